"""tessera.nn.functional's activations of issue 52 (src/ops/activation.c): elu, celu, selu,
hardtanh, relu6, threshold, hardshrink, softshrink, tanhshrink, softsign, logsigmoid, mish,
hardsigmoid, hardswish, leaky_relu, glu, prelu, softmin and the in-place forms, with PyTorch's
signatures; each is one C call. `inplace=True` writes into input and returns it, as PyTorch."""
from .. import _C

# kinds of _C._nn_act_kind (python/src/nn_activation.c)
(_ELU, _CELU, _SELU, _HARDTANH, _RELU6, _THRESHOLD, _HARDSHRINK, _SOFTSHRINK, _TANHSHRINK,
 _SOFTSIGN, _LOGSIGMOID, _MISH, _HARDSIGMOID, _HARDSWISH, _LEAKY_RELU, _SOFTPLUS) = range(16)


def _act(kind, input, a=0.0, b=0.0, inplace=False):
    return _C._nn_act_kind(kind, input, float(a), float(b), bool(inplace))


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _act(_LEAKY_RELU, input, negative_slope, inplace=inplace)


def leaky_relu_(input, negative_slope=0.01):
    return _act(_LEAKY_RELU, input, negative_slope, inplace=True)


def elu(input, alpha=1.0, inplace=False):
    return _act(_ELU, input, alpha, inplace=inplace)


def elu_(input, alpha=1.0):
    return _act(_ELU, input, alpha, inplace=True)


def celu(input, alpha=1.0, inplace=False):
    return _act(_CELU, input, alpha, inplace=inplace)


def celu_(input, alpha=1.0):
    return _act(_CELU, input, alpha, inplace=True)


def selu(input, inplace=False):
    return _act(_SELU, input, inplace=inplace)


def selu_(input):
    return _act(_SELU, input, inplace=True)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _act(_HARDTANH, input, min_val, max_val, inplace)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    return _act(_RELU6, input, inplace=inplace)


def threshold(input, threshold, value, inplace=False):
    return _act(_THRESHOLD, input, threshold, value, inplace)


def threshold_(input, threshold, value):
    return _act(_THRESHOLD, input, threshold, value, True)


def hardshrink(input, lambd=0.5):
    return _act(_HARDSHRINK, input, lambd)


def softshrink(input, lambd=0.5):
    return _act(_SOFTSHRINK, input, lambd)


def tanhshrink(input):
    return _act(_TANHSHRINK, input)


def softsign(input):
    return _act(_SOFTSIGN, input)


def logsigmoid(input):
    return _act(_LOGSIGMOID, input)


def mish(input, inplace=False):
    return _act(_MISH, input, inplace=inplace)


def _quantized(input, name, inplace):
    if not getattr(input, "is_quantized", False):
        return False
    if inplace:
        raise RuntimeError("%s(inplace=True) of a quantized tensor is not supported (quantized "
                           "tensors are not written in place); use inplace=False" % name)
    return True


def hardsigmoid(input, inplace=False):
    if _quantized(input, "hardsigmoid", inplace):  # ts_quantized_hardsigmoid: fixed qparams
        return _C._quantized_hardsigmoid(input)
    return _act(_HARDSIGMOID, input, inplace=inplace)


def hardswish(input, inplace=False):
    if _quantized(input, "hardswish", inplace):  # ts_quantized_hardswish: the input's qparams
        return _C._quantized_hardswish(input)
    return _act(_HARDSWISH, input, inplace=inplace)


def glu(input, dim=-1):
    return _C._nn_glu(input, int(dim))


def prelu(input, weight):
    return _C._nn_prelu(input, weight)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:  # PyTorch's _get_softmax_dim (its deprecation warning left out)
        dim = 0 if input.dim() in (0, 1, 3) else 1
    if dtype is not None:
        input = input.to(dtype)
    return _C._nn_softmin(input, int(dim))
