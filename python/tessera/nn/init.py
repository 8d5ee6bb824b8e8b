"""tessera.nn.init — in-place initialisers with PyTorch's formulas (the C library's, drawing from
the global generator); each returns its tensor."""
from .. import _C
from .._generator import use

_KU, _KN, _U, _N, _XU, _Z, _O, _CONST = range(8)


def _init(kind, tensor, a=0.0, b=0.0, fan_out=False):
    return _C._nn_init(kind, tensor, float(a), float(b), bool(fan_out))


def _more(kind, tensor, a=0.0, b=0.0, c=0.0, d=0.0, name=""):
    return _C._nn_init_more(kind, tensor, float(a), float(b), float(c), float(d), name)


def _mode(mode):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    return mode == "fan_out"


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-b, b), b = gain * sqrt(3 / fan) (He), gain = calculate_gain(nonlinearity, a)"""
    fan_out = _mode(mode)
    with use(generator, "kaiming_uniform_"):
        return _more(0, tensor, a, fan_out, name=nonlinearity)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std), std = gain / sqrt(fan) (He), gain = calculate_gain(nonlinearity, a)"""
    fan_out = _mode(mode)
    with use(generator, "kaiming_normal_"):
        return _more(1, tensor, a, fan_out, name=nonlinearity)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    with use(generator, "uniform_"):
        return _init(_U, tensor, a, b)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    with use(generator, "normal_"):
        return _init(_N, tensor, mean, std)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    with use(generator, "xavier_uniform_"):
        return _init(_XU, tensor, gain)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """normal draws of std gain * sqrt(2 / (fan_in + fan_out)) (Glorot), in place"""
    with use(generator, "xavier_normal_"):
        return _more(2, tensor, gain)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std) truncated to [a, b], PyTorch's way: uniform draws between the bounds' normal
    CDFs mapped back through the inverse CDF (erfinv), clamped to [a, b]"""
    with use(generator, "trunc_normal_"):
        return _more(3, tensor, mean, std, a, b)


def orthogonal_(tensor, gain=1, generator=None):
    """a (semi-)orthogonal matrix (rows x the rest flattened) from the QR decomposition of normal
    draws, the signs of R's diagonal folded into Q (PyTorch's way), times gain"""
    with use(generator, "orthogonal_"):
        return _more(4, tensor, gain)


def eye_(tensor):
    """the identity matrix in a 2-D tensor (ones on the diagonal, zeros elsewhere)"""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with _no_grad():
        tensor.copy_(_C.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype,
                            device=tensor.device))
    return tensor


def _no_grad():
    from ..autograd import no_grad
    return no_grad()


def zeros_(tensor):
    return _init(_Z, tensor)


def ones_(tensor):
    return _init(_O, tensor)


def constant_(tensor, val):
    return _init(_CONST, tensor, val)


def calculate_gain(nonlinearity, param=None):
    """PyTorch's recommended gain for a nonlinearity (ts_init_calculate_gain)"""
    return _C._nn_calculate_gain(nonlinearity, param)


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    rf = 1
    for s in tensor.shape[2:]:
        rf *= s
    return tensor.shape[1] * rf, tensor.shape[0] * rf


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """a 2-D tensor of N(0, std) draws with ceil(sparsity * rows) entries of each column zeroed
    (rows chosen by a random permutation per column), PyTorch's"""
    with use(generator, "sparse_"):
        return _more(5, tensor, sparsity, std)


def dirac_(tensor, groups=1):
    """the identity of a convolution (3-, 4- or 5-D weight [out, in, *k]): 1 at the centre of
    channel d's kernel for output d of each group, 0 elsewhere"""
    return _more(6, tensor, groups)
