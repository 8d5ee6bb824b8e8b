"""PyTorch's complex-number forms on real tensors (real, conj, conj_physical, resolve_conj,
resolve_neg: the identity or the complex op; angle: 0 or pi with a zero gradient), scalar_tensor
and constant_pad_nd (issue 52)."""
import math

from . import _C

__all__ = ["real", "conj", "conj_physical", "resolve_conj", "resolve_neg", "scalar_tensor",
           "constant_pad_nd", "angle"]


def real(input):
    """torch.real: the real parts of a complex tensor (a view); a real tensor itself"""
    return _C.real(input) if input.is_complex() else input


def conj(input):
    """torch.conj: the conjugate of a complex tensor (materialised); a real tensor itself"""
    return _C.conj(input) if input.is_complex() else input


conj_physical = conj


def resolve_conj(input):
    """torch.resolve_conj: the identity (conj materialises: no lazy conjugate bit to resolve)"""
    return input



def resolve_neg(input):
    """torch.resolve_neg: the identity (Tessera has no lazy negation bit)"""
    return input


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False, layout=None,
                  pin_memory=False):
    """torch.scalar_tensor: a 0-dim tensor of the default float dtype (or dtype)"""
    t = _C.tensor(float(s) if not isinstance(s, bool) else s,
                  dtype=dtype if dtype is not None else _C.get_default_dtype(), device=device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def constant_pad_nd(input, pad, value=0):
    """torch.constant_pad_nd: nn.functional.pad in constant mode (negative pads crop)"""
    from .nn import functional as F
    return F.pad(input, list(pad), mode="constant", value=value)


def _angle_values(x):
    base = _C.where(x < 0, _C.full_like(x, math.pi), _C.zeros_like(x))
    return _C.where(x != x, x, base)


_ANGLE_FN = []


def _angle_function():
    """a custom Function whose gradient is zero everywhere (PyTorch's angle_backward for real
    inputs), built on first use (tessera.autograd imports this module)"""
    if not _ANGLE_FN:
        from ._autograd_function import Function

        class _Angle(Function):
            @staticmethod
            def forward(ctx, x):
                return _angle_values(x)

            @staticmethod
            def backward(ctx, grad):
                return _C.zeros_like(grad)
        _ANGLE_FN.append(_Angle)
    return _ANGLE_FN[0]


def angle(input):
    """torch.angle of a real tensor: 0 for x >= 0 (and -0.0), pi for x < 0, NaN for NaN; a float
    result (the default float dtype for integer and bool inputs) whose gradient is zero, as
    PyTorch's. Of a complex tensor: atan2(imag, real)."""
    if input.is_complex():
        return _C.angle(input)
    if not input.is_floating_point():
        return _angle_values(input.to(_C.get_default_dtype()))
    if input.requires_grad and _C.is_grad_enabled():
        return _angle_function().apply(input)
    return _angle_values(input)
