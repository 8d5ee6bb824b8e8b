"""PyTorch's complex-number forms on real tensors (real, conj, conj_physical, resolve_conj,
resolve_neg: the identity or the complex op), scalar_tensor and constant_pad_nd (issue 52)."""
from . import _C

__all__ = ["real", "conj", "conj_physical", "resolve_conj", "resolve_neg", "scalar_tensor",
           "constant_pad_nd"]


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
