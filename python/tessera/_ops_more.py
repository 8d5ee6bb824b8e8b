"""PyTorch's remaining small operators (issue 52), composed from Tessera's differentiable ops so
they run on every device: trapezoid / trapz / cumulative_trapezoid, cov / corrcoef, cross,
tril_indices / triu_indices, combinations, unravel_index, diagonal_scatter / select_scatter /
slice_scatter, the *_copy forms of the views, unsafe_chunk / unsafe_split, renorm, dist, pdist,
real / conj, scalar_tensor, constant_pad_nd, gradient and frexp.

Index tables (tril_indices, combinations) are made on the host, as PyTorch's CPU kernels make them.
"""
import itertools
import math
import warnings

from . import _C

__all__ = [
    "trapezoid", "trapz", "cumulative_trapezoid", "cov", "corrcoef", "cross", "tril_indices",
    "triu_indices", "combinations", "unravel_index", "diagonal_scatter", "select_scatter",
    "slice_scatter", "alias_copy", "diagonal_copy", "expand_copy", "permute_copy", "squeeze_copy",
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
def _trapz_x(y, x, dim):
    """the spacing along dim as a tensor that broadcasts with y's slices"""
    if x.ndim == 1:
        if x.shape[0] != y.shape[dim]:
            raise RuntimeError("trapezoid: There must be one `x` value for each sample point")
        dx = _C.diff(x)
        shape = [1] * y.ndim
        shape[dim] = dx.shape[0]
        return dx.reshape(shape)
    return _C.diff(x, dim=dim)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """torch.trapezoid: the trapezoidal rule along dim, with sample points x or spacing dx (1)"""
    if not isinstance(y, _C.Tensor):
        raise TypeError("trapezoid(): argument 'y' must be Tensor, not %s" % type(y).__name__)
    d = _dim("trapezoid", dim, y.ndim)
    n = y.shape[d] if y.ndim else 1
    if x is not None and dx is not None:
        raise TypeError("trapezoid(): pass x or dx, not both")
    if n == 0:
        return _C.sum(y, dim=d) * 0
    left, right = y.narrow(d, 0, n - 1), y.narrow(d, 1, n - 1)
    if isinstance(x, _C.Tensor):
        return _C.sum(_trapz_x(y, x, d) * (left + right), dim=d) / 2
    step = 1 if dx is None else (x if x is not None else dx)
    return (_C.sum(y, dim=d) - (y.select(d, 0) + y.select(d, -1)) * 0.5) * step


def trapz(y, x=None, *, dx=None, dim=-1):
    """torch.trapz: trapezoid's older name (trapz(y, x, dim=-1) or trapz(y, dx=1, dim=-1))"""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """torch.cumulative_trapezoid: the running trapezoidal sums along dim (one fewer element)"""
    d = _dim("cumulative_trapezoid", dim, y.ndim)
    n = y.shape[d]
    if n == 0:
        return y.narrow(d, 0, 0) * 1
    avg = (y.narrow(d, 0, n - 1) + y.narrow(d, 1, n - 1)) / 2
    if isinstance(x, _C.Tensor):
        avg = avg * _trapz_x(y, x, d)
    else:
        step = 1 if dx is None else dx
        if x is not None:
            step = x
        avg = avg * step
    return _C.cumsum(avg, d)


# ------------------------------------------------------------------ statistics
def cov(input, *, correction=1, fweights=None, aweights=None):
    """torch.cov: the covariance of the rows (variables) over the columns (observations)"""
    if input.ndim > 2:
        raise RuntimeError("cov(): expected input to have two or fewer dimensions but got an "
                           "input with %d dimensions" % input.ndim)
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.dtype.is_floating_point:
        x = x.to(_C.float32)
    n_obs = x.shape[1]
    w = None
    for name, wt in (("fweights", fweights), ("aweights", aweights)):
        if wt is None:
            continue
        if wt.ndim > 1 or (wt.ndim == 1 and wt.shape[0] != n_obs):
            raise RuntimeError("cov(): expected %s to have one dimension of size %d" % (name, n_obs))
        if name == "fweights" and wt.dtype.is_floating_point:
            raise RuntimeError("cov(): expected fweights to have integral dtype")
        w = wt if w is None else w * wt
    if w is None:
        avg = x.mean(dim=1)
        w_sum = float(n_obs)
    else:
        w_sum = w.sum()
        avg = (x * w).sum(dim=1) / w_sum
    if w is not None and correction != 0 and aweights is not None:
        norm = w_sum - correction * (w * aweights).sum() / w_sum
    else:
        norm = w_sum - correction
    if not isinstance(norm, _C.Tensor):
        if norm <= 0:
            warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less "
                          "than the number of observations.")
            norm = 0.0
    else:
        norm = _C.clamp(norm, min=0)
    xc = x - avg.unsqueeze(1)
    c = _C.matmul(xc, (xc if w is None else xc * w).t())
    return (c / norm).squeeze()


def corrcoef(input):
    """torch.corrcoef: Pearson's correlation coefficients of the rows, clipped to [-1, 1]"""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    sd = _C.sqrt(_C.diagonal(c))
    c = c / sd.unsqueeze(1)
    c = c / sd.unsqueeze(0)
    return _C.clamp(c, -1, 1)


def cross(input, other, dim=None):
    """torch.cross: the cross product along dim (None: the first dim of size 3), broadcast"""
    from ._shape_more import broadcast_tensors
    a, b = broadcast_tensors(input, other) if input.shape != other.shape else (input, other)
    if dim is None:
        dims = [i for i, s in enumerate(a.shape) if s == 3]
        if not dims:
            raise RuntimeError("cross(): no dimension of size 3 in input")
        d = dims[0]
    else:
        d = _dim("cross", dim, a.ndim)
    if a.shape[d] != 3:
        raise RuntimeError("linalg.cross: inputs dimension %d must have length 3. Got %d and %d"
                           % (dim if dim is not None else d, input.shape[d] if input.ndim > d
                              else 1, other.shape[d] if other.ndim > d else 1))
    a1, a2 = _C.roll(a, -1, d), _C.roll(a, -2, d)
    b1, b2 = _C.roll(b, -1, d), _C.roll(b, -2, d)
    return a1 * b2 - a2 * b1


def dist(input, other, p=2):
    """torch.dist: the p-norm of input - other (broadcast)"""
    return _C.norm((input - other).flatten(), p)


def renorm(input, p, dim, maxnorm):
    """torch.renorm: each slice along dim whose p-norm exceeds maxnorm scaled down to it (PyTorch's
    factor maxnorm / (norm + 1e-7))"""
    d = _dim("renorm", dim, input.ndim)
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError("renorm: expected maxnorm to be >= 0 but got %s" % maxnorm)
    others = [i for i in range(input.ndim) if i != d]
    from . import linalg
    norms = linalg.vector_norm(input, p, dim=others, keepdim=True) if others else \
        _C.abs(input)
    factor = _C.where(norms > maxnorm, maxnorm / (norms + 1e-7), _C.ones_like(norms))
    return input * factor


# ------------------------------------------------------------------ index tables
def _index_table(fn, rows, dtype, device):
    dt = _C.int64 if dtype is None else dtype
    if dt not in (_C.int64, _C.int32):
        raise RuntimeError("%s(): \"%s\" not implemented for '%s'" % (fn, fn, dt))
    if not rows[0]:
        return _C.zeros(2, 0, dtype=dt, device=device)
    return _C.tensor(rows, dtype=dt, device=device)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """torch.tril_indices: the (row, col) coordinates of the lower triangle, row-major"""
    if row < 0 or col < 0:
        raise RuntimeError("tril_indices: row and col must be non-negative (row=%d, col=%d)"
                           % (row, col))
    rs, cs = [], []
    for i in range(row):
        for j in range(min(col, max(i + offset + 1, 0))):
            rs.append(i)
            cs.append(j)
    return _index_table("tril_indices", [rs, cs], dtype, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """torch.triu_indices: the (row, col) coordinates of the upper triangle, row-major"""
    if row < 0 or col < 0:
        raise RuntimeError("triu_indices: row and col must be non-negative (row=%d, col=%d)"
                           % (row, col))
    rs, cs = [], []
    for i in range(row):
        for j in range(max(i + offset, 0), col):
            rs.append(i)
            cs.append(j)
    return _index_table("triu_indices", [rs, cs], dtype, device)


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


# ------------------------------------------------------------------ scatters into views
def _place(input, src, dim, positions):
    """input with the entries at `positions` (a list of ints along dim) taken from src's slices,
    in order; differentiable in both"""
    n = input.shape[dim]
    m = [0] * n
    mask = [False] * n
    for k, p in enumerate(positions):
        m[p] = k
        mask[p] = True
    shape = [1] * input.ndim
    shape[dim] = n
    gathered = _C.index_select(src, dim, _C.tensor(m, dtype=_C.int64, device=src.device))
    sel = _C.tensor(mask, device=input.device).reshape(shape)
    return _C.where(sel, gathered, input)


def select_scatter(input, src, dim, index):
    """torch.select_scatter: input with its slice `index` along dim replaced by src"""
    d = _dim("select_scatter", dim, input.ndim)
    n = input.shape[d]
    if index < -n or index >= n:
        raise IndexError("select_scatter(): index %d out of range for tensor of size %s at "
                         "dimension %d" % (index, list(input.shape), dim))
    want = list(input.shape[:d]) + list(input.shape[d + 1:])
    if list(src.shape) != want:
        raise RuntimeError("expected src to have a size equal to the slice of self. src size = "
                           "%s, slice size = %s" % (list(src.shape), want))
    return _place(input, src.unsqueeze(d), d, [index % n])


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """torch.slice_scatter: input with input[start:end:step] along dim replaced by src"""
    d = _dim("slice_scatter", dim, input.ndim)
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    positions = list(range(input.shape[d]))[slice(start, end, step)]
    want = list(input.shape)
    want[d] = len(positions)
    if list(src.shape) != want:
        raise RuntimeError("expected src to have a size equal to the slice of self. src size = "
                           "%s, slice size = %s" % (list(src.shape), want))
    if not positions:
        return input * 1
    return _place(input, src, d, positions)


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """torch.diagonal_scatter: input with its diagonal (offset, dim1, dim2) replaced by src"""
    diag = _C.diagonal(input, offset, dim1, dim2)
    if list(src.shape) != list(diag.shape):
        raise RuntimeError("expected src to have a size equal to the diagonal of self. src size ="
                           " %s, diagonal size = %s" % (list(src.shape), list(diag.shape)))
    nd = input.ndim
    d1, d2 = dim1 % nd, dim2 % nd
    if diag.shape[-1] == 0:
        return input * 1
    # dim1, dim2 last; element k of the diagonal sits at (k, k + offset) or (k - offset, k)
    x = _C.movedim(input, (d1, d2), (nd - 2, nd - 1))
    n1, n2 = x.shape[-2], x.shape[-1]
    idx, mask = [], []
    for i in range(n1):
        for j in range(n2):
            on = j - i == offset
            mask.append(on)
            idx.append((i if offset >= 0 else j) if on else 0)
    emb = _C.index_select(src, src.ndim - 1, _C.tensor(idx, dtype=_C.int64, device=src.device))
    emb = emb.reshape(tuple(src.shape[:-1]) + (n1, n2))
    sel = _C.tensor(mask, device=input.device).reshape(n1, n2)
    return _C.movedim(_C.where(sel, emb, x), (nd - 2, nd - 1), (d1, d2))


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
    ij = triu_indices(n, n, 1, device=input.device)
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
