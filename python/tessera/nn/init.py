"""tessera.nn.init — in-place initialisers with PyTorch's formulas (the C library's, drawing from
the global generator); each returns its tensor."""
import math

from .. import _C
from .._generator import use

_KU, _KN, _U, _N, _XU, _Z, _O, _CONST = range(8)


def _init(kind, tensor, a=0.0, b=0.0, fan_out=False):
    return _C._nn_init(kind, tensor, float(a), float(b), bool(fan_out))


def _gain_a(nonlinearity, a):
    if nonlinearity == "relu":
        return 0.0
    if nonlinearity == "leaky_relu":
        return a
    raise NotImplementedError(f"tessera: kaiming init with nonlinearity={nonlinearity!r}")


def _kaiming_std(tensor, a, mode, nonlinearity):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan_in if mode == "fan_in" else fan_out)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-b, b), b = gain * sqrt(3 / fan) (He): the C initialiser for fan_in and a (leaky) ReLU,
    the formula on uniform_ otherwise (any mode and nonlinearity calculate_gain knows)"""
    if mode == "fan_in" and nonlinearity in ("relu", "leaky_relu"):
        with use(generator, "kaiming_uniform_"):
            return _init(_KU, tensor, _gain_a(nonlinearity, a))
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if mode in ("fan_in", "fan_out") and nonlinearity in ("relu", "leaky_relu"):
        with use(generator, "kaiming_normal_"):
            return _init(_KN, tensor, _gain_a(nonlinearity, a), fan_out=mode == "fan_out")
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


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
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std) truncated to [a, b], PyTorch's way: uniform draws between the bounds' normal
    CDFs mapped back through the inverse CDF (erfinv), clamped to [a, b]"""
    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    with _no_grad(), use(generator, "trunc_normal_"):
        tensor.uniform_(2 * lo - 1, 2 * hi - 1)
        tensor.erfinv_()
        tensor.mul_(std * math.sqrt(2.0))
        tensor.add_(mean)
        tensor.clamp_(min=a, max=b)
    return tensor


def orthogonal_(tensor, gain=1, generator=None):
    """a (semi-)orthogonal matrix (rows x the rest flattened) from the QR decomposition of normal
    draws, the signs of R's diagonal folded into Q (PyTorch's way), times gain"""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    from .. import linalg
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with _no_grad(), use(generator, "orthogonal_"):
        flat = _C.randn(rows, cols, dtype=tensor.dtype, device=tensor.device)
        if rows < cols:
            flat = flat.t()
        q, r = linalg.qr(flat)
        q = q * r.diagonal().sign()
        if rows < cols:
            q = q.t()
        tensor.copy_(q.reshape(tuple(tensor.shape)) * gain)
    return tensor


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


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """a 2-D tensor of N(0, std) draws with ceil(sparsity * rows) entries of each column zeroed
    (rows chosen by a random permutation per column), PyTorch's"""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    with _no_grad(), use(generator, "sparse_"):
        normal_(tensor, 0, std)
        if num_zeros and cols:
            flat = []
            for col in range(cols):
                for r in _C.randperm(rows)[:num_zeros].tolist():
                    flat.append(r * cols + col)
            idx = _C.tensor(flat, dtype=_C.int64, device=tensor.device)
            tensor.copy_(tensor.reshape(-1).index_fill(0, idx, 0.0).reshape(rows, cols))
    return tensor


def dirac_(tensor, groups=1):
    """the identity of a convolution (3-, 4- or 5-D weight [out, in, *k]): 1 at the centre of
    channel d's kernel for output d of each group, 0 elsewhere"""
    dims = tensor.ndim
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    min_dim = min(out_per_group, sizes[1])
    strides = [math.prod(sizes[i + 1:]) for i in range(dims)]
    centre = sum((sizes[i] // 2) * strides[i] for i in range(2, dims))
    flat = [(g * out_per_group + d) * strides[0] + d * strides[1] + centre
            for g in range(groups) for d in range(min_dim)]
    with _no_grad():
        out = _C.zeros(tensor.numel(), dtype=tensor.dtype, device=tensor.device)
        if flat:
            idx = _C.tensor(flat, dtype=_C.int64, device=tensor.device)
            out = out.index_fill(0, idx, 1.0)
        tensor.copy_(out.reshape(sizes))
    return tensor
