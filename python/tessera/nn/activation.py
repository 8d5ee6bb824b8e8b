"""tessera.nn's activation modules of issue 52, as PyTorch's (constructor arguments, attributes,
extra_repr): ELU, CELU, SELU, Hardtanh, ReLU6, Hardshrink, Softshrink, Tanhshrink, Softsign,
Threshold, LogSigmoid, Mish, Hardsigmoid, Hardswish, GLU, PReLU, Softmin, Softmax2d, RReLU. Each
forward is one functional call (functional_act.py; RReLU: functional_dropout.py)."""
import warnings

from .. import _C
from . import functional as F
from . import functional_dropout as FD
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["ELU", "CELU", "SELU", "Hardtanh", "ReLU6", "Hardshrink", "Softshrink", "Tanhshrink",
           "Softsign", "Threshold", "LogSigmoid", "Mish", "Hardsigmoid", "Hardswish", "GLU",
           "PReLU", "Softmin", "Softmax2d", "RReLU"]


def _inplace_str(inplace, first=False):
    if not inplace:
        return ""
    return "inplace=True" if first else ", inplace=True"


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}{_inplace_str(self.inplace)}"


class CELU(ELU):
    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)


class _InplaceOnly(Module):
    """an activation whose only argument is inplace"""
    _fn = None
    _repr = True  # extra_repr shows inplace=True (SELU, Mish; not Hardsigmoid, Hardswish)

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input, self.inplace)

    def extra_repr(self):
        return _inplace_str(self.inplace, True) if self._repr else ""


class SELU(_InplaceOnly):
    _fn = F.selu


class Mish(_InplaceOnly):
    _fn = F.mish


class Hardsigmoid(_InplaceOnly):
    _fn, _repr = F.hardsigmoid, False


class Hardswish(_InplaceOnly):
    _fn, _repr = F.hardswish, False


class Hardtanh(Module):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None,
                 max_value=None):
        super().__init__()
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and rename to `min_val`",
                          FutureWarning, stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and rename to `max_val`",
                          FutureWarning, stacklevel=2)
            max_val = max_value
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace
        if not self.max_val > self.min_val:
            raise AssertionError(f"max_val ({self.max_val}) must be greater than min_val "
                                 f"({self.min_val})")

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace_str(self.inplace)}"


class ReLU6(Hardtanh):
    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def forward(self, input):
        return F.relu6(input, self.inplace)

    def extra_repr(self):
        return _inplace_str(self.inplace, True)


class Hardshrink(Module):
    _fn = F.hardshrink

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return type(self)._fn(input, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    _fn = F.softshrink


class _NoArgs(Module):
    _fn = None

    def forward(self, input):
        return type(self)._fn(input)


class Tanhshrink(_NoArgs):
    _fn = F.tanhshrink


class Softsign(_NoArgs):
    _fn = F.softsign


class LogSigmoid(_NoArgs):
    _fn = F.logsigmoid


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}{_inplace_str(self.inplace)}"


class GLU(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class PReLU(Module):
    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(_C.empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class Softmin(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax2d(Module):
    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D "
                             "instead")
        return F.softmax(input, -3, _stacklevel=5)


class RReLU(Module):
    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return FD.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace
                                                            else "")
