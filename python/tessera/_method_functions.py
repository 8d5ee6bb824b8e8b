"""PyTorch's function forms of existing Tensor methods (issue 52): clamp_min, clamp_max, clone,
masked_fill, rsub, true_divide, zero_, fill — each one call of the Tensor method, so gradients
and devices follow the method's."""
from . import _C

__all__ = ["clamp_min", "clamp_max", "clone", "masked_fill", "rsub", "true_divide", "zero_",
           "fill"]


def _tensor(fn, x):
    if not isinstance(x, _C.Tensor):
        raise TypeError("%s(): argument 'input' must be Tensor, not %s" % (fn, type(x).__name__))
    return x


def clamp_min(input, min):
    """torch.clamp_min: clamp(input, min=min)"""
    return _tensor("clamp_min", input).clamp_min(min)


def clamp_max(input, max):
    """torch.clamp_max: clamp(input, max=max)"""
    return _tensor("clamp_max", input).clamp_max(max)


def clone(input, *, memory_format=None):
    """torch.clone: a copy (memory_format as Tensor.clone takes it)"""
    return _tensor("clone", input).clone(memory_format=memory_format)


def masked_fill(input, mask, value):
    """torch.masked_fill: value (a number or a 0-dim tensor) where mask is true"""
    return _tensor("masked_fill", input).masked_fill(mask, value)


def rsub(input, other, *, alpha=1):
    """torch.rsub: other - alpha * input"""
    return _C._rsub(_tensor("rsub", input), other, alpha)


def true_divide(input, other):
    """torch.true_divide: div without rounding"""
    return _tensor("true_divide", input).div(other)


def zero_(input):
    """torch.zero_: fills input with zeros in place"""
    return _tensor("zero_", input).zero_()


def fill(input, value):
    """torch.fill: a copy of input filled with value (differentiable in a 0-dim tensor value)"""
    return _C._fill(_tensor("fill", input), value)
