"""tessera.nn.init — in-place initialisers with PyTorch's formulas (the C library's, drawing from
the global generator); each returns its tensor."""
import math

from .. import _C

_KU, _KN, _U, _N, _XU, _Z, _O, _CONST = range(8)


def _init(kind, tensor, a=0.0, b=0.0, fan_out=False):
    return _C._nn_init(kind, tensor, float(a), float(b), bool(fan_out))


def _gain_a(nonlinearity, a):
    if nonlinearity == "relu":
        return 0.0
    if nonlinearity == "leaky_relu":
        return a
    raise NotImplementedError(f"tessera: kaiming init with nonlinearity={nonlinearity!r}")


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if mode != "fan_in":
        raise NotImplementedError("tessera: kaiming_uniform_(mode='fan_out')")
    return _init(_KU, tensor, _gain_a(nonlinearity, a))


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    return _init(_KN, tensor, _gain_a(nonlinearity, a), fan_out=mode == "fan_out")


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    return _init(_U, tensor, a, b)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    return _init(_N, tensor, mean, std)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    return _init(_XU, tensor, gain)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """normal draws of std gain * sqrt(2 / (fan_in + fan_out)) (Glorot), in place"""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def zeros_(tensor):
    return _init(_Z, tensor)


def ones_(tensor):
    return _init(_O, tensor)


def constant_(tensor, val):
    return _init(_CONST, tensor, val)


def calculate_gain(nonlinearity, param=None):
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    rf = 1
    for s in tensor.shape[2:]:
        rf *= s
    return tensor.shape[1] * rf, tensor.shape[0] * rf
