"""PyTorch's remaining small operators (issue 52), composed from Tessera's differentiable ops so
they run on every device: trapezoid / trapz / cumulative_trapezoid, combinations, unravel_index,
the *_copy forms of the views, unsafe_chunk / unsafe_split, renorm, dist, pdist, real / conj,
scalar_tensor, constant_pad_nd, gradient and frexp. (cov / corrcoef / cross, tril_indices /
triu_indices and the scatters into views moved into C, issue 76: python/src/tensor_statistics.c,
tensor_scatter.c.)

Index tables (combinations) are made on the host, as PyTorch's CPU kernels make them.
"""
import itertools
import math
import warnings

from . import _C

__all__ = [
    "trapezoid", "trapz", "cumulative_trapezoid", "combinations", "unravel_index", "alias_copy",
    "diagonal_copy", "expand_copy", "permute_copy", "squeeze_copy",
    "t_copy", "transpose_copy", "unbind_copy", "unfold_copy", "unsqueeze_copy", "view_copy",
    "narrow_copy", "split_with_sizes_copy", "unsafe_chunk", "unsafe_split", "renorm", "dist",
    "real", "conj", "conj_physical", "resolve_conj", "resolve_neg", "scalar_tensor",
    "constant_pad_nd", "gradient", "frexp",
]


def _dim(fn, dim, nd):
    if not isinstance(dim, int):
        raise TypeError("%s(): argument 'dim' must be int, not %s" % (fn, type(dim).__name__))
    lo, hi = (-nd, nd - 1) if nd > 0 else (-1, 0)
    if dim < lo or dim > hi:
        raise IndexError("%s(): Dimension out of range (expected to be in range of [%d, %d], but "
                         "got %d)" % (fn, lo, hi, dim))
    return dim % nd if nd > 0 else 0


def _contig(t):
    """a fresh contiguous copy (the *_copy ops never alias their input)"""
    return t.clone() if t.is_contiguous() else t.contiguous()


# ------------------------------------------------------------------ integration
# (trapezoid / cumulative_trapezoid: C's, src/ops/integration.c)
from ._C import trapezoid, cumulative_trapezoid  # noqa: E402,F401


def trapz(y, x=None, *, dx=None, dim=-1):
    """torch.trapz: trapezoid's older name (trapz(y, x, dim=-1) or trapz(y, dx=1, dim=-1))"""
    return trapezoid(y, x, dx=dx, dim=dim)


# ------------------------------------------------------------------ statistics
# (cov / corrcoef / cross: C's, src/ops/statistics.c; _C.cross stays importable from here for
# linalg.cross)
from ._C import cross  # noqa: E402,F401


# (dist / renorm: C's, src/ops/norm_forms.c)
from ._C import dist, renorm  # noqa: E402,F401


# ------------------------------------------------------------------ index tables
# (tril_indices / triu_indices: C's, src/ops/coordinates.c)
def combinations(input, r=2, with_replacement=False):
    """torch.combinations: the r-element combinations of a 1-D tensor's elements, as rows"""
    if input.ndim != 1:
        raise RuntimeError("Expect a 1D vector, but got shape %s" % (list(input.shape),))
    if r < 0:
        raise RuntimeError("Expect a non-negative number, but got %d" % r)
    if r == 0:
        return input.narrow(0, 0, 0) * 1
    gen = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = [i for c in gen(range(input.shape[0]), r) for i in c]
    if not idx:  # still on input's graph, as PyTorch's
        return input.narrow(0, 0, 0).reshape(0, r) * 1
    it = _C.tensor(idx, dtype=_C.int64, device=input.device)
    return _C.index_select(input, 0, it).reshape(-1, r)


def unravel_index(indices, shape):
    """torch.unravel_index: flat indices to coordinate tensors of shape (floor modulo, so negative
    indices count from the end)"""
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError("'shape' cannot have negative values, but got %s" % (shape,))
    if not isinstance(indices, _C.Tensor):
        indices = _C.tensor(indices)
    if indices.dtype.is_floating_point or indices.dtype == _C.bool:
        raise TypeError("expected 'indices' to be integer dtype, but got %s" % indices.dtype)
    total = math.prod(shape)
    vals = indices.flatten().tolist()  # exact integers (a comparison with a number is in double)
    if any(v >= total or v < -total for v in vals):
        raise RuntimeError("unravel_index: 'indices' must be in range [-%d, %d)" % (total, total))
    idx = indices.to(_C.int64)
    out = []
    for s in reversed(shape):
        st = _C.tensor(s, dtype=_C.int64, device=idx.device)
        out.append(_C.remainder(idx, st) if s else idx * 0)
        idx = _C.floor_divide(idx, st) if s else idx
    return tuple(reversed(out))


# ------------------------------------------------------------------ the views' copying forms
def alias_copy(input):
    """torch.alias_copy: a copy"""
    return _contig(input)


def diagonal_copy(input, offset=0, dim1=0, dim2=1):
    return _contig(_C.diagonal(input, offset, dim1, dim2))


def expand_copy(input, size, *, implicit=False):
    return _contig(input.expand(*size) if not isinstance(size, int) else input.expand(size))


def permute_copy(input, dims):
    return _contig(input.permute(*dims))


def squeeze_copy(input, dim=None):
    return _contig(input.squeeze() if dim is None else input.squeeze(dim))


def t_copy(input):
    return _contig(input.t())


def transpose_copy(input, dim0, dim1):
    return _contig(input.transpose(dim0, dim1))


def unbind_copy(input, dim=0):
    return tuple(_contig(t) for t in input.unbind(dim))


def unfold_copy(input, dimension, size, step):
    return _contig(input.unfold(dimension, size, step))


def unsqueeze_copy(input, dim):
    return _contig(input.unsqueeze(dim))


def view_copy(input, *size, dtype=None):
    if dtype is not None:
        return _contig(input.view(dtype))
    if len(size) == 1 and not isinstance(size[0], int):
        size = tuple(size[0]) if not isinstance(size[0], _C.dtype) else size[0]
    if isinstance(size, _C.dtype):
        return _contig(input.view(size))
    return _contig(input.reshape(*size))


def narrow_copy(input, dim, start, length):
    return _contig(input.narrow(dim, start, length))


def split_with_sizes_copy(input, split_sizes, dim=0):
    return [_contig(t) for t in input.split(list(split_sizes), dim)]


def unsafe_chunk(input, chunks, dim=0):
    """torch.unsafe_chunk: chunk (Tessera's views need no unsafe form)"""
    return input.chunk(chunks, dim)


def unsafe_split(input, split_size_or_sections, dim=0):
    """torch.unsafe_split: split"""
    return input.split(split_size_or_sections, dim)


# ------------------------------------------------------------------ real tensors
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


# ------------------------------------------------------------------ gradient
def _grad_along(f, d, h, edge_order):
    """PyTorch's torch.gradient along dim d: h a number (uniform) or a 1-D tensor of coordinates"""
    n = f.shape[d]
    if n < edge_order + 1:
        raise RuntimeError("torch.gradient expected each dimension size to be at least "
                           "edge_order+1")
    if isinstance(h, _C.Tensor):
        x = h.to(f.dtype) if f.dtype.is_floating_point else h
        shape = [1] * f.ndim
        shape[d] = n
        x = x.reshape(shape)
        dx = _C.diff(x, dim=d)  # n - 1 spacings
        a, b = dx.narrow(d, 0, n - 2), dx.narrow(d, 1, n - 2)
        fm, f0, fp = f.narrow(d, 0, n - 2), f.narrow(d, 1, n - 2), f.narrow(d, 2, n - 2)
        inner = (a * a * fp - b * b * fm + (b * b - a * a) * f0) / (a * b * (a + b))
        if edge_order == 1:
            first = (f.narrow(d, 1, 1) - f.narrow(d, 0, 1)) / dx.narrow(d, 0, 1)
            last = (f.narrow(d, n - 1, 1) - f.narrow(d, n - 2, 1)) / dx.narrow(d, n - 2, 1)
        else:
            h1, h2 = dx.narrow(d, 0, 1), dx.narrow(d, 1, 1)
            first = (-(2 * h1 + h2) / (h1 * (h1 + h2)) * f.narrow(d, 0, 1)
                     + (h1 + h2) / (h1 * h2) * f.narrow(d, 1, 1)
                     - h1 / (h2 * (h1 + h2)) * f.narrow(d, 2, 1))
            g1, g2 = dx.narrow(d, n - 2, 1), dx.narrow(d, n - 3, 1)
            last = (g1 / (g2 * (g1 + g2)) * f.narrow(d, n - 3, 1)
                    - (g1 + g2) / (g1 * g2) * f.narrow(d, n - 2, 1)
                    + (2 * g1 + g2) / (g1 * (g1 + g2)) * f.narrow(d, n - 1, 1))
        return _C.cat([first, inner, last], d)
    inner = (f.narrow(d, 2, n - 2) - f.narrow(d, 0, n - 2)) / (2 * h)
    if edge_order == 1:
        first = (f.narrow(d, 1, 1) - f.narrow(d, 0, 1)) / h
        last = (f.narrow(d, n - 1, 1) - f.narrow(d, n - 2, 1)) / h
    else:
        first = (-1.5 * f.narrow(d, 0, 1) + 2 * f.narrow(d, 1, 1) - 0.5 * f.narrow(d, 2, 1)) / h
        last = (0.5 * f.narrow(d, n - 3, 1) - 2 * f.narrow(d, n - 2, 1)
                + 1.5 * f.narrow(d, n - 1, 1)) / h
    return _C.cat([first, inner, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """torch.gradient: second-order central differences inside, first or second order at the
    edges; spacing a number, a list of numbers or of coordinate tensors, one per dim"""
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    if dim is None:
        dims = list(range(input.ndim))
    elif isinstance(dim, int):
        dims = [_dim("gradient", dim, input.ndim)]
    else:
        dims = [_dim("gradient", x, input.ndim) for x in dim]
    if spacing is None:
        spacing = 1
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            raise RuntimeError("torch.gradient expected spacing to be unspecified, a scalar or "
                               "it's spacing and dim arguments to have the same length, but got "
                               "a spacing argument of length %d and a dim argument of length %d."
                               % (len(spacing), len(dims)))
        hs = list(spacing)
    else:
        hs = [spacing] * len(dims)
    f = input if input.dtype.is_floating_point else input.to(_C.float32)
    out = []
    for d, h in zip(dims, hs):
        if isinstance(h, _C.Tensor) and h.ndim == 0:
            h = h.item()
        out.append(_grad_along(f, d, h, edge_order))
    return tuple(out)


# ------------------------------------------------------------------ frexp
def frexp(input):
    """torch.frexp: (mantissa, exponent) with input = mantissa * 2**exponent, |mantissa| in
    [0.5, 1) (0, inf and NaN: the input itself and exponent 0); the exponent int32"""
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    a = _C.abs(input)
    ok = _C.isfinite(input) & (input != 0)
    safe = _C.where(ok, a, _C.ones_like(a))
    e = _C.floor(_C.log2(safe.to(_C.float64))) + 1
    # log2 may round up just below a power of two: one step back where the mantissa is < 1/2
    half = _C.floor_divide(e, 2)
    m = safe.to(_C.float64) * _C.exp2(-half) * _C.exp2(-(e - half))
    low = m < 0.5
    e = _C.where(low, e - 1, e)
    m = _C.where(low, m * 2, m)
    big = m >= 1
    e = _C.where(big, e + 1, e)
    m = _C.where(big, m / 2, m)
    mant = _C.where(ok, _C.copysign(m, input.to(_C.float64)).to(input.dtype), input)
    exp = _C.where(ok, e, _C.zeros_like(e)).to(_C.int32)
    return mant, exp


# ------------------------------------------------------------------ torch.*_window
def _periodic_window(f, window_length, periodic, dtype, device, requires_grad, **kw):
    from .signal import windows
    return getattr(windows, f)(window_length, sym=not periodic, dtype=dtype, device=device,
                               requires_grad=requires_grad, **kw)


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False, pin_memory=False):
    return _periodic_window("hann", window_length, periodic, dtype, device, requires_grad)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, requires_grad=False, pin_memory=False):
    return _periodic_window("general_cosine", window_length, periodic, dtype, device,
                            requires_grad, a=[alpha, beta])


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False, pin_memory=False):
    return _periodic_window("blackman", window_length, periodic, dtype, device, requires_grad)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False, pin_memory=False):
    return _periodic_window("bartlett", window_length, periodic, dtype, device, requires_grad)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, requires_grad=False, pin_memory=False):
    return _periodic_window("kaiser", window_length, periodic, dtype, device, requires_grad,
                            beta=beta)


__all__ += ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
            "kaiser_window"]


def pdist(input, p=2):
    """torch.pdist / nn.functional.pdist: the p-norm distances between the rows of an N x M
    input, pairs i < j in row-major order (N (N - 1) / 2 values)"""
    if input.ndim != 2:
        raise RuntimeError("pdist only supports 2D tensors, got: %dD" % input.ndim)
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    if n < 2:  # still on input's graph, as PyTorch's
        return input.flatten().narrow(0, 0, 0) * 1
    ij = _C.triu_indices(n, n, 1, device=input.device)
    d = _C.index_select(input, 0, ij[0]) - _C.index_select(input, 0, ij[1])
    from . import linalg
    return linalg.vector_norm(d, p, dim=1)


__all__ += ["pdist"]


def histogram(input, bins=100, *, range=None, weight=None, density=False):
    """torch.histogram: (hist, bin_edges) of a float tensor: bins equal-width bins over range
    (default: the data's min and max, widened by 1/2 each way when they are equal; [0, 1] when
    empty) or the given increasing bin edges; the last bin includes its right edge; weight per
    element; density: hist / (sum(hist) * bin widths). Counted on the host (no gradient)."""
    import bisect
    if not input.dtype.is_floating_point:
        raise RuntimeError("\"histogram_cpu\" not implemented for '%s'" % input.dtype)
    if input.is_meta:  # no values to count: the shapes (bins counts, bins + 1 edges)
        if isinstance(bins, _C.Tensor):
            if bins.ndim != 1 or bins.shape[0] < 1:
                raise RuntimeError("torch.histogram: bins tensor should have one dimension and "
                                   "at least 1 element")
            nb = bins.shape[0] - 1
        elif bins <= 0:
            raise RuntimeError("torch.histogram(): bins must be > 0, but got %d" % bins)
        else:
            nb = bins
        return (_C.empty(nb, dtype=input.dtype, device=input.device),
                _C.empty(nb + 1, dtype=input.dtype, device=input.device))
    vals = input.detach().flatten().tolist()
    wts = weight.detach().flatten().tolist() if weight is not None else None
    if wts is not None and len(wts) != len(vals):
        raise RuntimeError("torch.histogram: if weight tensor is provided it should have the same "
                           "shape as the input tensor")
    if isinstance(bins, _C.Tensor):
        if bins.ndim != 1 or bins.shape[0] < 1:
            raise RuntimeError("torch.histogram: bins tensor should have one dimension and at "
                               "least 1 element")
        edges_t = bins.detach().to(input.dtype)
    else:
        if bins <= 0:
            raise RuntimeError("torch.histogram(): bins must be > 0, but got %d" % bins)
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
            if lo > hi:
                raise RuntimeError("torch.histogram: max must be larger than min")
        else:
            finite = [v for v in vals if v == v]
            lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges_t = _C.linspace(lo, hi, bins + 1, dtype=input.dtype, device=input.device)
    edges = edges_t.tolist()
    nb = max(len(edges) - 1, 0)
    counts = [0.0] * nb
    for i, v in enumerate(vals):
        if nb == 0 or not (edges[0] <= v <= edges[-1]):
            continue
        pos = min(bisect.bisect_right(edges, v) - 1, nb - 1)
        counts[pos] += wts[i] if wts is not None else 1.0
    hist = _C.tensor(counts, dtype=input.dtype, device=input.device)
    if density and nb:
        hist = hist / (hist.sum() * _C.diff(edges_t))
    return hist, edges_t


__all__ += ["histogram"]
