"""tessera.masked — torch.masked's reductions and normalizations on strided tensors (issue 52).

Each masked-out element (mask False; the mask broadcasts to the input) is replaced by the
operation's identity (0 for sum/norm, 1 for prod, -inf for amax/argmax/logsumexp/softmax, +inf for
amin/argmin/softmin, nan for median) and the plain op runs; mean/var/std divide by the count of
masked-in elements (fully masked-out: nan). sum, mean, median, cumsum, cumprod and normalize are
one C function each (ts_masked_*, tessera/masked.h); the others compose where and the plain ops.
They run on every device and differentiate as those ops do. MaskedTensor is not provided."""
import math

from . import _C

__all__ = ["sum", "prod", "amax", "amin", "argmax", "argmin", "mean", "median", "norm",
           "normalize", "logsumexp", "logaddexp", "softmax", "log_softmax", "softmin", "cumsum",
           "cumprod", "std", "var"]

_PROMOTE = ("uint8", "bool", "int8", "int16", "int32")


def _dname(dt):
    return str(dt).split(".")[-1]


def _canonical_dim(dim, ndim):
    if dim == () or dim is None:
        return tuple(range(ndim))
    ndim1 = max(ndim, 1)
    dims = []
    for d in ((dim,) if isinstance(dim, int) else dim):
        if d in dims:
            raise RuntimeError("dim=%d appears multiple times in the list of dims" % d)
        if d >= ndim1 or d < -ndim1:
            raise IndexError("Dimension out of range (expected to be in range of [%d, %d], but "
                             "got %d)" % (-ndim1, ndim1 - 1, d))
        dims.append(d % ndim1)
    return tuple(sorted(dims))


def _mask_of(input, mask):
    if mask.device != input.device:
        raise _C.DeviceError("masked: mask on %s, input on %s" % (mask.device, input.device))
    if tuple(mask.shape) != tuple(input.shape):
        if mask.ndim > input.ndim:
            raise IndexError("_input_mask expected broadcastable mask (got mask dimensionality "
                             "higher than of the input)")
        mask = mask.expand(tuple(input.shape))
    return mask.to(_C.bool)


def _input_mask(input, *args, **kwargs):
    """the canonical mask: bool, of input's shape (torch.masked._input_mask)"""
    mask = kwargs.get("mask")
    if mask is None:
        raise ValueError("_input_mask requires explicit mask")
    return _mask_of(input, mask)


_REDUCTIONS = ("sum", "prod", "amax", "amin", "argmax", "argmin", "mean", "median", "norm", "var",
               "std", "logsumexp")
_NORMALIZATIONS = ("softmax", "log_softmax", "softmin", "normalize", "cumsum", "cumprod")


def _output_mask(op, input, *args, **kwargs):
    """the defined outputs of a masked op: any masked-in element (torch.masked._output_mask)"""
    name = getattr(op, "__name__", "")
    if name in _REDUCTIONS:
        if name == "norm" and args:
            args = args[1:]
        dim = args[0] if args else kwargs.get("dim")
        m = _input_mask(input, **kwargs)
        keepdim = bool(kwargs.get("keepdim", False))
        for d in reversed(_canonical_dim(dim, input.ndim)):
            m = m.any(d, keepdim=keepdim)
        return m
    if name in _NORMALIZATIONS:
        return _input_mask(input, **kwargs)
    raise ValueError("_output_mask expected masked operation (got %r)" % (op,))


def _identity(op, input, ord=None):
    fl = input.dtype.is_floating_point
    if op in ("sum", "cumsum"):
        return 0
    if op in ("prod", "cumprod"):
        return 1
    if op in ("amax", "argmax", "logaddexp", "logsumexp"):
        if fl:
            return -math.inf
        return _iinfo(input.dtype)[0]
    if op in ("amin", "argmin"):
        if fl:
            return math.inf
        return _iinfo(input.dtype)[1]
    if op == "norm":
        return math.inf if ord == -math.inf else 0
    if op == "median":
        return math.nan
    raise NotImplementedError("identity of %s on %s input" % (op, input.dtype))


def _iinfo(dt):
    bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
    n = _dname(dt)
    if n == "uint8":
        return 0, 255
    if n == "bool":
        return 0, 1
    b = bits[n]
    return -(1 << (b - 1)), (1 << (b - 1)) - 1


def _combine(op, input, mask, ord=None):
    if mask is None:
        return input
    m = _mask_of(input, mask)
    fill = _C.full((), _identity(op, input, ord), dtype=input.dtype, device=input.device)
    return _C.where(m, input, fill)


def _reduce_dims(t, fn, dims, keepdim):
    for d in reversed(dims):
        t = fn(t, d, keepdim)
    return t


def _int_promote(input, dtype):
    if dtype is None:
        return _C.int64 if _dname(input.dtype) in _PROMOTE else input.dtype
    return dtype


def _checked(input, dim, mask):
    """torch's IndexErrors (a dim out of range or repeated, a mask of more dims); the C function
    checks the rest"""
    if dim is not None:
        _canonical_dim(dim, input.ndim)
    if mask is not None and mask.ndim > input.ndim:
        raise IndexError("_input_mask expected broadcastable mask (got mask dimensionality "
                         "higher than of the input)")
    return mask


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """torch.masked.sum: masked-out elements count as 0 (ts_masked_sum)"""
    return _C._masked_sum(input, dim, bool(keepdim), dtype, _checked(input, dim, mask))


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """torch.masked.prod: masked-out elements count as 1"""
    dtype = _int_promote(input, dtype)
    dims = _canonical_dim(dim, input.ndim)
    x = _combine("prod", input, mask).to(dtype)
    return _reduce_dims(x, lambda t, d, k: t.prod(d, keepdim=k), dims, bool(keepdim))


def cumsum(input, dim, *, dtype=None, mask=None):
    """torch.masked.cumsum: masked-out elements count as 0 (ts_masked_cumsum)"""
    return _C._masked_cumsum(input, dim, dtype, _checked(input, dim, mask))


def cumprod(input, dim, *, dtype=None, mask=None):
    """torch.masked.cumprod: masked-out elements count as 1 (ts_masked_cumprod)"""
    return _C._masked_cumprod(input, dim, dtype, _checked(input, dim, mask))


def _amaxmin(op, input, dim, keepdim, dtype, mask):
    dtype = dtype or input.dtype
    x = _combine(op, input, mask)
    dims = _canonical_dim(dim, x.ndim)
    f = x.amax if op == "amax" else x.amin
    return f(dims, keepdim=bool(keepdim)).to(dtype)


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """torch.masked.amax: masked-out elements count as -inf (the dtype's minimum)"""
    return _amaxmin("amax", input, dim, keepdim, dtype, mask)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """torch.masked.amin: masked-out elements count as +inf (the dtype's maximum)"""
    return _amaxmin("amin", input, dim, keepdim, dtype, mask)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    dtype = dtype or input.dtype
    return _C.argmax(_combine("argmax", input, mask), dim, bool(keepdim)).to(dtype)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    dtype = dtype or input.dtype
    return _C.argmin(_combine("argmin", input, mask), dim, bool(keepdim)).to(dtype)


def _count(input, dim, keepdim, mask):
    if mask is None:
        ones = _C.ones(tuple(input.shape), dtype=_C.int64, device=input.device)
        return sum(ones, dim, keepdim=keepdim), None
    inmask = _mask_of(input, mask)
    return sum(inmask, dim, keepdim=keepdim), inmask


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """torch.masked.mean: the mean of the masked-in elements (none: nan; ts_masked_mean)"""
    return _C._masked_mean(input, dim, bool(keepdim), dtype, _checked(input, dim, mask))


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """torch.masked.median: nanmedian over the masked-in elements (none: nan; ts_masked_median)"""
    return _C._masked_median(input, dim, bool(keepdim), dtype, _checked(input, dim, mask))


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    dtype = dtype or input.dtype
    dims = _canonical_dim(dim, input.ndim)
    return _C.logsumexp(_combine("logsumexp", input, mask), dims, keepdim=keepdim).to(dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    dtype = dtype or input.dtype
    a = _combine("logaddexp", input, input_mask)
    b = _combine("logaddexp", other, other_mask)
    return _C.logaddexp(a, b).to(dtype)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """torch.masked.norm: the vector norm of the masked-in elements"""
    dtype = dtype or input.dtype
    x = _combine("norm", input, mask, ord)
    dims = _canonical_dim(dim, input.ndim)
    from . import linalg
    return linalg.vector_norm(x, ord, dims, bool(keepdim), dtype=dtype)


def _std_var(input, dim, unbiased, correction_opt, keepdim, dtype, mask, take_sqrt):
    if unbiased is not None and correction_opt is not None:
        raise ValueError("Only one of unbiased and correction may be given")
    correction = 1.0
    if unbiased is not None:
        correction = 1.0 if unbiased else 0.0
    if correction_opt is not None:
        correction = float(correction_opt)
    if dtype is None:
        dtype = input.dtype if input.dtype.is_floating_point else _C.float32
    cdt = dtype if dtype.is_floating_point else _C.float32
    count, inmask = _count(input, dim, True, mask)
    total = sum(input, dim, keepdim=True, dtype=dtype, mask=inmask)
    x = input - total / count
    tot = sum(x * x, dim, keepdim=keepdim, dtype=cdt, mask=inmask)
    if not keepdim:
        count = count.reshape(tuple(tot.shape))
    if correction != 0:
        count = (count.to(cdt) - correction).clamp(min=0.0)
    out = (tot / count).to(dtype)
    return out.sqrt() if take_sqrt else out


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """torch.masked.var: variance of the masked-in elements (correction as torch.var)"""
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, False)


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None, mask=None):
    """torch.masked.std: standard deviation of the masked-in elements"""
    return _std_var(input, dim, unbiased, correction, keepdim, dtype, mask, True)


def _softmax_like(fname, op, input, dim, dtype, mask):
    from .nn import functional as F
    dtype = dtype or input.dtype
    d = _canonical_dim(dim, input.ndim)[0]
    return getattr(F, fname)(_combine(op, input, mask), d, dtype=dtype)


def softmax(input, dim, *, dtype=None, mask=None):
    return _softmax_like("softmax", "amax", input, dim, dtype, mask)


def log_softmax(input, dim, *, dtype=None, mask=None):
    return _softmax_like("log_softmax", "amax", input, dim, dtype, mask)


def softmin(input, dim, *, dtype=None, mask=None):
    return _softmax_like("softmin", "amin", input, dim, dtype, mask)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """torch.masked.normalize: the masked input over its masked norm, at least eps
    (ts_masked_normalize)"""
    return _C._masked_normalize(input, float(ord), dim, float(eps), dtype,
                                _checked(input, dim, mask))


