"""Issue 52's remaining operators (python/tessera/_random_fill.py, _index_put.py, _strided.py,
masked.py): the random family
(normal, multinomial, cauchy_ / exponential_ / geometric_ / log_normal_) by moments within
k-sigma bands from the sample size and by reproducibility under manual_seed; index_put, put,
index_reduce, as_strided_copy / as_strided_scatter, nonzero_static and tessera.masked against
float64 NumPy loops, gradients against central differences. No PyTorch needed."""
import math

import numpy as np
import pytest

import tessera as torch

RNG = np.random.default_rng(1252)
K = 6.0  # sigma band of the moment checks: a false failure has odds ~1e-9 per check


def _np(t):
    return np.asarray(t.detach().cpu().tolist(), dtype=np.float64)


def _t(a, device, rg=False, dtype=torch.float64):
    return torch.tensor(np.asarray(a).tolist(), dtype=dtype, device=device, requires_grad=rg)


def _fd_grad(f, arrays, i, eps=1e-6):
    """central differences of sum(f(*arrays)) wrt arrays[i] (float64 NumPy)"""
    x = arrays[i]
    g = np.zeros_like(x)
    for j in np.ndindex(x.shape):
        a = [y.copy() for y in arrays]
        a[i][j] += eps
        hi = f(*a).sum()
        a[i][j] -= 2 * eps
        lo = f(*a).sum()
        g[j] = (hi - lo) / (2 * eps)
    return g


# ---- random family ------------------------------------------------------------------------------

N = 200000


def _mean_band(x, mu, sd):
    assert abs(x.mean() - mu) <= K * sd / math.sqrt(x.size), (x.mean(), mu)


def test_exponential_moments(device):
    torch.manual_seed(3)
    x = _np(torch.empty(N, dtype=torch.float64, device=device).exponential_(2.5))
    assert (x >= 0).all()
    _mean_band(x, 1 / 2.5, 1 / 2.5)
    # P(X > 1/lambda) = e^-1
    p = math.exp(-1)
    assert abs((x > 0.4).mean() - p) <= K * math.sqrt(p * (1 - p) / N)


def test_cauchy_quartiles(device):
    torch.manual_seed(4)
    x = _np(torch.empty(N, dtype=torch.float64, device=device).cauchy_(-2.0, 0.5))
    # half the mass within median +- sigma, a quarter below median - sigma
    for lo, hi, p in ((-2.5, -1.5, 0.5), (-math.inf, -2.5, 0.25)):
        f = ((x > lo) & (x <= hi)).mean()
        assert abs(f - p) <= K * math.sqrt(p * (1 - p) / N), (lo, hi, f)


def test_geometric_moments(device):
    torch.manual_seed(5)
    p = 0.3
    x = _np(torch.empty(N, dtype=torch.float32, device=device).geometric_(p))
    assert (x >= 1).all() and (x == np.round(x)).all()
    _mean_band(x, 1 / p, math.sqrt(1 - p) / p)
    assert abs((x == 1).mean() - p) <= K * math.sqrt(p * (1 - p) / N)


def test_log_normal_moments(device):
    torch.manual_seed(6)
    x = _np(torch.empty(N, dtype=torch.float64, device=device).log_normal_(0.5, 0.75))
    assert (x > 0).all()
    _mean_band(np.log(x), 0.5, 0.75)
    v = np.log(x).var()
    # var of the sample variance of a normal: 2 sigma^4 / (n - 1)
    assert abs(v - 0.75 ** 2) <= K * math.sqrt(2 / (N - 1)) * 0.75 ** 2


def test_normal_forms_moments_and_grad(device):
    torch.manual_seed(7)
    mean = _t(np.full((N,), 1.5), device, rg=True)
    std = _t(np.full((N,), 0.5), device, rg=True)
    out = torch.normal(mean, std)
    z = (_np(out) - 1.5) / 0.5
    _mean_band(z, 0.0, 1.0)
    assert abs(z.var() - 1) <= K * math.sqrt(2 / (N - 1))
    out.sum().backward()
    # reparameterized: d out / d mean = 1, d out / d std = (out - mean) / std
    assert np.allclose(_np(mean.grad), 1.0)
    assert np.allclose(_np(std.grad), z, atol=1e-12)
    wide = torch.normal(_t(np.zeros((1, 2, 3)), device), _t(np.ones((5, 2, 3)), device))
    assert tuple(wide.shape) == (5, 2, 3)
    assert tuple(torch.normal(2.0, _t(np.ones(4), device)).shape) == (4,)
    assert torch.normal(0.0, 1.0, (2, 3), device=device).shape == (2, 3)
    with pytest.raises(RuntimeError):
        torch.normal(_t(np.zeros(3), device), _t(-np.ones(3), device))


def test_random_reproducible(device):
    def draw():
        torch.manual_seed(11)
        e = torch.empty(50, device=device)
        return (_np(e.clone().exponential_()), _np(e.clone().cauchy_()),
                _np(torch.normal(torch.zeros(5, device=device), 2.0)),
                _np(torch.multinomial(torch.ones(3, 7, device=device), 4)))
    for a, b in zip(draw(), draw()):
        assert np.array_equal(a, b)


def test_multinomial(device):
    torch.manual_seed(8)
    w = np.array([1.0, 0.0, 3.0, 6.0])
    n = 40000
    s = _np(torch.multinomial(_t(w, device), n, replacement=True)).astype(int)
    f = np.bincount(s, minlength=4) / n
    p = w / w.sum()
    assert (np.abs(f - p) <= K * np.sqrt(p * (1 - p) / n)).all(), f
    rows = _np(torch.multinomial(_t(np.tile(w, (2000, 1)), device), 3)).astype(int)
    assert rows.shape == (2000, 3)
    assert all(len(set(r)) == 3 for r in rows) and not (rows == 1).any()
    # first draw without replacement follows p
    f0 = np.bincount(rows[:, 0], minlength=4) / 2000
    assert (np.abs(f0 - p) <= K * np.sqrt(p * (1 - p) / 2000)).all()
    with pytest.raises(RuntimeError):
        torch.multinomial(_t(w, device), 4)  # only 3 non-zero categories
    with pytest.raises(RuntimeError):
        torch.multinomial(_t([1.0, -1.0], device), 1)


# ---- index_put / put / index_reduce -------------------------------------------------------------

def test_index_put_accumulate_and_grad(device):
    x = RNG.standard_normal((4, 3))
    v = RNG.standard_normal((5, 3))
    i = np.array([0, 2, 0, -1, 2])
    ref = x.copy()
    np.add.at(ref, i, v)
    xt, vt = _t(x, device, rg=True), _t(v, device, rg=True)
    out = torch.index_put(xt, (_t(i, device, dtype=torch.int64),), vt, accumulate=True)
    assert np.allclose(_np(out), ref, rtol=0, atol=1e-14)
    g = RNG.standard_normal((4, 3))
    (out * _t(g, device)).sum().backward()
    assert np.allclose(_np(xt.grad), g) and np.allclose(_np(vt.grad), g[i])
    # two index tensors, broadcast value, plain put (last write of distinct positions)
    r = x.copy()
    r[[1, 3], [0, 2]] = 7.0
    out = _t(x, device).index_put((_t([1, 3], device, dtype=torch.int64),
                                   _t([0, 2], device, dtype=torch.int64)), _t(7.0, device))
    assert np.array_equal(_np(out), r)
    m = x > 0
    r = x.copy()
    r[m] = -1
    out = torch.index_put(_t(x, device), (_t(m, device, dtype=torch.bool),), _t(-1.0, device))
    assert np.array_equal(_np(out), r)
    with pytest.raises(IndexError):
        torch.index_put(_t(x, device), (_t([4], device, dtype=torch.int64),), _t(1.0, device))


def test_put(device):
    x = RNG.standard_normal((3, 4))
    idx = np.array([[0, 11], [5, 0]])
    src = RNG.standard_normal((2, 2))
    ref = x.copy().reshape(-1)
    np.add.at(ref, idx.reshape(-1), src.reshape(-1))
    out = torch.put(_t(x, device), _t(idx, device, dtype=torch.int64), _t(src, device),
                    accumulate=True)
    assert np.allclose(_np(out), ref.reshape(3, 4), rtol=0, atol=1e-14)
    xt = _t(x, device)
    xt.put_(_t([1, -1], device, dtype=torch.int64), _t([5.0, 6.0], device))
    r = x.copy().reshape(-1)
    r[[1, -1]] = [5.0, 6.0]
    assert np.array_equal(_np(xt), r.reshape(3, 4))
    with pytest.raises(IndexError):
        torch.put(_t(x, device), _t([12], device, dtype=torch.int64), _t([1.0], device))


def _index_reduce_ref(x, dim, idx, src, reduce, include_self):
    x = np.moveaxis(x.copy(), dim, 0)
    src = np.moveaxis(src, dim, 0)
    out = x.copy()
    for r in range(x.shape[0]):
        rows = [src[k] for k in range(len(idx)) if idx[k] % x.shape[0] == r]
        if not rows:
            continue
        vals = ([x[r]] if include_self else []) + rows
        st = np.stack(vals)
        out[r] = {"prod": st.prod(0), "mean": st.mean(0), "amax": st.max(0),
                  "amin": st.min(0)}[reduce]
    return np.moveaxis(out, 0, dim)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(device, reduce, include_self):
    x = RNG.standard_normal((3, 5))
    src = RNG.standard_normal((3, 4))
    idx = np.array([4, 0, 4, 3])
    ref = _index_reduce_ref(x, 1, idx, src, reduce, include_self)
    xt, st = _t(x, device, rg=True), _t(src, device, rg=True)
    out = xt.index_reduce(1, _t(idx, device, dtype=torch.int64), st, reduce,
                          include_self=include_self)
    assert np.allclose(_np(out), ref, rtol=1e-13, atol=1e-14)
    out.sum().backward()
    f = lambda a, b: _index_reduce_ref(a, 1, idx, b, reduce, include_self)  # noqa: E731
    assert np.allclose(_np(xt.grad), _fd_grad(f, [x, src], 0), atol=1e-7)
    assert np.allclose(_np(st.grad), _fd_grad(f, [x, src], 1), atol=1e-7)
    with pytest.raises(IndexError):
        xt.index_reduce(1, _t([5, 0, 0, 0], device, dtype=torch.int64), st, reduce)
    with pytest.raises(IndexError):  # PyTorch's: no negative indices (index out of range in self)
        xt.index_reduce(1, _t([-1, 0, 0, 0], device, dtype=torch.int64), st, reduce)
    with pytest.raises(RuntimeError):
        xt.index_reduce(1, _t(idx, device, dtype=torch.int64), st, "sum")


# ---- strided storage ----------------------------------------------------------------------------

def _as_strided_np(base, size, stride, off):
    flat = base.reshape(-1)
    out = np.empty(size)
    for j in np.ndindex(*size):
        out[j] = flat[off + sum(a * b for a, b in zip(j, stride))]
    return out


def test_as_strided_copy_and_scatter(device):
    x = RNG.standard_normal((3, 4))
    for size, stride, off in (((2, 2), (1, 2), 1), ((3, 3), (4, 1), 0), ((2, 3), (0, 1), 5)):
        xt = _t(x, device, rg=True)
        out = torch.as_strided_copy(xt, size, stride, off)
        assert np.array_equal(_np(out), _as_strided_np(x, size, stride, off))
        out.sum().backward()
        cnt = np.zeros(12)
        for j in np.ndindex(*size):
            cnt[off + sum(a * b for a, b in zip(j, stride))] += 1
        assert np.array_equal(_np(xt.grad), cnt.reshape(3, 4))
        src = RNG.standard_normal(size)
        ref = x.copy().reshape(-1)
        for j in np.ndindex(*size):
            ref[off + sum(a * b for a, b in zip(j, stride))] = src[j]
        xt2, st = _t(x, device, rg=True), _t(src, device, rg=True)
        sc = torch.as_strided_scatter(xt2, st, size, stride, off)
        assert np.array_equal(_np(sc), ref.reshape(3, 4))
        sc.sum().backward()
        # overwritten elements of the input get no gradient (PyTorch 2.15 inverts this: a bug)
        assert np.array_equal(_np(xt2.grad), (cnt == 0).reshape(3, 4).astype(float))
    # a transposed view: positions follow the view's own strides over its base
    xt = _t(x, device).t()
    out = torch.as_strided_copy(xt, (2,), (1,), 1)
    assert np.array_equal(_np(out), x.reshape(-1)[1:3])
    with pytest.raises(RuntimeError, match="outside"):
        torch.as_strided_copy(_t(x, device), (2, 2), (4, 1), 9)
    with pytest.raises(RuntimeError, match="outside"):
        torch.as_strided_copy(_t(x, device)[1:], (1,), (1,), 0)


def test_as_strided_view(device):
    x = RNG.standard_normal((3, 4))
    for size, stride, off in (((2, 2), (1, 2), 1), ((3, 3), (4, 1), 0), ((2, 3), (0, 1), 5)):
        xt = _t(x, device, rg=True)
        v = torch.as_strided(xt, size, stride, off)
        assert v.stride() == stride and v.storage_offset() == off
        assert np.array_equal(_np(v), _as_strided_np(x, size, stride, off))
        (v * v).sum().backward()  # each read adds its gradient 2 x
        want = np.zeros(12)
        for j in np.ndindex(*size):
            p = off + sum(a * b for a, b in zip(j, stride))
            want[p] += 2 * x.reshape(-1)[p]
        assert np.allclose(_np(xt.grad), want.reshape(3, 4), rtol=1e-15, atol=0)
    # a view: writes reach the input; the default offset is the input's own
    y = _t(x, device)
    y.as_strided((3,), (5,)).fill_(7.0)
    assert all(_np(y).reshape(-1)[[0, 5, 10]] == 7.0)
    row = y[2]
    assert np.array_equal(_np(row.as_strided((2,), (2,))), _np(y).reshape(-1)[[8, 10]])
    with pytest.raises(Exception, match="as_strided"):
        y.as_strided((2, 2), (4, 7), 1)  # reaches element 12 of 12
    with pytest.raises(RuntimeError, match="mismatch"):
        y.as_strided((2, 2), (1,))


def test_view_dtype(device):
    a = RNG.standard_normal((3, 4))
    for src, dst in ((np.float32, "int32"), (np.float64, "float32"), (np.float32, "float64"),
                     (np.float32, "uint8"), (np.int64, "float64"), (np.float32, "float16")):
        x = _t(a.astype(src), device, dtype=getattr(torch, np.dtype(src).name))
        y = x.view(getattr(torch, dst))
        want = a.astype(src).view(np.dtype(dst))
        assert tuple(y.shape) == want.shape and y.dtype == getattr(torch, dst)
        assert np.array_equal(y.cpu().numpy().view(np.uint8), want.view(np.uint8))
    x = _t(a.astype(np.float64), device, dtype=torch.float64)
    x.view(torch.int64).fill_(0)  # a view: writes reach x
    assert not _np(x).any()
    with pytest.raises(Exception, match="stride"):
        _t(a, device, dtype=torch.float32).t().view(torch.float64)
    with pytest.raises(Exception, match="divisible"):
        _t(a, device, dtype=torch.float32)[:, :3].view(torch.float64)


def test_hash_tensor(device):
    a = RNG.standard_normal((3, 2, 5))
    bits = a.view(np.uint64)
    x = _t(a, device, dtype=torch.float64)
    assert int(torch.hash_tensor(x)) == int(np.bitwise_xor.reduce(bits, axis=None))
    for dim, keep in ((0, False), (-1, True), ((0, 2), False), (1, True)):
        got = torch.hash_tensor(x, dim, keepdim=keep)
        want = np.bitwise_xor.reduce(bits, axis=dim, keepdims=keep)
        assert got.dtype == torch.uint64 and np.array_equal(got.cpu().numpy(), want)
    # float32 and integers hash as float64 and int64
    f = a.astype(np.float32)
    got = torch.hash_tensor(_t(f, device, dtype=torch.float32), 1)
    assert np.array_equal(got.cpu().numpy(), np.bitwise_xor.reduce(f.astype(np.float64).view(np.uint64), 1))
    i = (a * 100).astype(np.int32)
    got = torch.hash_tensor(_t(i, device, dtype=torch.int32), 2)
    assert np.array_equal(got.cpu().numpy(), np.bitwise_xor.reduce(i.astype(np.int64).view(np.uint64), 2))
    with pytest.raises(RuntimeError):
        torch.hash_tensor(x, mode=1)


# ---- factories, nonzero_static ------------------------------------------------------------------

def test_empty_forms_and_nonzero_static(device):
    assert torch.empty_strided((2, 3), (3, 1), device=device).shape == (2, 3)
    assert torch.empty_permuted((2, 3, 4), (0, 2, 1), dtype=torch.float64).dtype == torch.float64
    x = _t([[0.0, 1.0], [2.0, 0.0], [3.0, 4.0]], device)
    assert x.new_empty_strided((4,), (1,)).dtype == torch.float64
    nz = np.argwhere(_np(x) != 0)
    assert np.array_equal(_np(torch.nonzero_static(x, size=6)),
                          np.vstack([nz, -np.ones((2, 2))]))
    assert np.array_equal(_np(x.nonzero_static(size=2, fill_value=9)), nz[:2])
    with pytest.raises(RuntimeError):
        torch.nonzero_static(x, size=-1)


# ---- tessera.masked -----------------------------------------------------------------------------

def test_masked_reductions(device):
    x = RNG.standard_normal((3, 5))
    m = RNG.random((3, 5)) > 0.4
    m[1] = False  # a fully masked-out row
    xt, mt = _t(x, device), _t(m, device, dtype=torch.bool)
    ma = np.ma.masked_array(x, ~m)
    with np.errstate(all="ignore"):
        cnt = m.sum(1)
        s = np.where(m, x, 0).sum(1)
        mean = s / cnt
        var = np.array([np.var(x[i][m[i]], ddof=1) if cnt[i] > 1 else np.nan for i in range(3)])
    assert np.allclose(_np(torch.masked.sum(xt, 1, mask=mt)), s, atol=1e-14)
    assert np.allclose(_np(torch.masked.prod(xt, 1, mask=mt)), np.where(m, x, 1).prod(1))
    assert np.allclose(_np(torch.masked.mean(xt, 1, mask=mt)), mean, equal_nan=True)
    assert np.allclose(_np(torch.masked.var(xt, 1, mask=mt)), var, equal_nan=True)
    assert np.allclose(_np(torch.masked.amax(xt, 1, mask=mt)), np.where(m, x, -np.inf).max(1))
    assert np.allclose(_np(torch.masked.amin(xt, 1, mask=mt)), np.where(m, x, np.inf).min(1))
    assert np.allclose(_np(torch.masked.norm(xt, 2.0, 1, mask=mt)),
                       np.sqrt(np.where(m, x * x, 0).sum(1)))
    med = _np(torch.masked.median(xt, 1, mask=mt))
    assert np.isnan(med[1]) and np.allclose(med[[0, 2]], [
        np.median(x[i][m[i]]) if m[i].sum() % 2 else np.sort(x[i][m[i]])[m[i].sum() // 2 - 1]
        for i in (0, 2)])
    e = np.where(m, np.exp(x), 0)
    with np.errstate(all="ignore"):
        sm = e / e.sum(1, keepdims=True)
    got = _np(torch.masked.softmax(xt, 1, mask=mt))
    assert np.allclose(got[[0, 2]], sm[[0, 2]]) and np.isnan(got[1]).all()
    assert np.allclose(_np(torch.masked.cumsum(xt, 1, mask=mt)), np.where(m, x, 0).cumsum(1))
    assert float(torch.masked.sum(xt, mask=mt)) == pytest.approx(ma.sum(), abs=1e-13)
    with pytest.raises(IndexError):
        torch.masked.sum(xt, mask=_t(np.ones((2, 3, 5)), device, dtype=torch.bool))


# ---- affine_grid / grid_sample / linear_cross_entropy -------------------------------------------

def _grid_sample_np(x, g, padding, ac):
    """bilinear grid_sample of a (N, C, H, W) float64 array, zeros or border padding"""
    N, C, H, W = x.shape
    out = np.zeros((N, C) + g.shape[1:3])
    for n in range(N):
        for i, j in np.ndindex(*g.shape[1:3]):
            cx, cy = g[n, i, j]
            fx = (cx + 1) * (W - 1) / 2 if ac else ((cx + 1) * W - 1) / 2
            fy = (cy + 1) * (H - 1) / 2 if ac else ((cy + 1) * H - 1) / 2
            if padding == "border":
                fx, fy = min(max(fx, 0), W - 1), min(max(fy, 0), H - 1)
            x0, y0 = math.floor(fx), math.floor(fy)
            for dx, dy in ((0, 0), (1, 0), (0, 1), (1, 1)):
                xi, yi = x0 + dx, y0 + dy
                if 0 <= xi < W and 0 <= yi < H:
                    w = (fx - x0 if dx else 1 - (fx - x0)) * (fy - y0 if dy else 1 - (fy - y0))
                    out[n, :, i, j] += w * x[n, :, yi, xi]
    return out


@pytest.mark.parametrize("padding", ["zeros", "border"])
@pytest.mark.parametrize("ac", [False, True])
def test_grid_sample_bilinear(device, padding, ac):
    F = torch.nn.functional
    x = RNG.standard_normal((2, 3, 4, 5))
    g = RNG.uniform(-1.3, 1.3, (2, 3, 2, 2))
    xt, gt = _t(x, device, rg=True), _t(g, device, rg=True)
    out = F.grid_sample(xt, gt, padding_mode=padding, align_corners=ac)
    assert np.allclose(_np(out), _grid_sample_np(x, g, padding, ac), rtol=0, atol=1e-13)
    out.sum().backward()
    f = lambda a, b: _grid_sample_np(a, b, padding, ac)  # noqa: E731
    assert np.allclose(_np(xt.grad), _fd_grad(f, [x, g], 0), atol=1e-7)
    assert np.allclose(_np(gt.grad), _fd_grad(f, [x, g], 1), atol=1e-6)
    with pytest.raises(ValueError):
        F.grid_sample(xt, gt, mode="area")


def test_affine_grid(device):
    F = torch.nn.functional
    th = RNG.standard_normal((2, 2, 3))
    for ac in (False, True):
        H, W = 3, 4
        xs = np.linspace(-1, 1, W) * (1 if ac else (W - 1) / W)
        ys = np.linspace(-1, 1, H) * (1 if ac else (H - 1) / H)
        base = np.stack(np.broadcast_arrays(xs[None, :], ys[:, None], 1.0), -1)
        ref = np.einsum("hwk,nck->nhwc", base, th)
        got = F.affine_grid(_t(th, device), (2, 1, H, W), align_corners=ac)
        assert np.allclose(_np(got), ref, rtol=0, atol=1e-14)
    with pytest.raises(ValueError):
        F.affine_grid(_t(th, device), (2, 1, 3, 4, 5))


def test_linear_cross_entropy(device):
    F = torch.nn.functional
    x, w, b = RNG.standard_normal((4, 3)), RNG.standard_normal((5, 3)), RNG.standard_normal(5)
    y = np.array([0, 4, 2, 4])
    z = x @ w.T + b
    lse = np.log(np.exp(z).sum(1))
    ref = (lse - z[np.arange(4), y]).mean()
    got = F.linear_cross_entropy(_t(x, device), _t(w, device), _t(y, device, dtype=torch.int64),
                                 linear_bias=_t(b, device), options=object())
    assert float(got) == pytest.approx(ref, rel=1e-13)
    with pytest.raises(RuntimeError):
        F.linear_cross_entropy(_t(x, device), _t(w[:, :2], device),
                               _t(y, device, dtype=torch.int64))


def test_histogramdd(device):
    x = RNG.standard_normal((50, 2))
    w = RNG.random(50)
    x[0] = [0.0, 3.0]  # beyond the given range: not counted
    ref, re = np.histogramdd(x, bins=[3, 4], range=[(-1, 1), (-2, 2)], weights=w)
    h, e = torch.histogramdd(_t(x, device), [3, 4], range=[-1.0, 1.0, -2.0, 2.0],
                             weight=_t(w, device))
    assert np.allclose(_np(h), ref, rtol=1e-13) and np.allclose(_np(e[1]), re[1])
    ref, _ = np.histogramdd(x, bins=4, density=True)
    h, _ = torch.histogramdd(_t(x, device), 4, density=True)
    assert np.allclose(_np(h), ref, rtol=1e-12)


def test_resize(device):
    x = torch.arange(6.0, device=device)
    assert x.resize_(2, 3) is x and tuple(x.shape) == (2, 3) and x.stride() == (3, 1)
    assert np.array_equal(_np(x), np.arange(6.0).reshape(2, 3))
    x.resize_(2, 2)  # smaller: the same storage, the first elements
    assert np.array_equal(_np(x), [[0, 1], [2, 3]])
    x.resize_(3, 4)  # larger: a new storage holding the old bytes first
    assert tuple(x.shape) == (3, 4) and np.array_equal(_np(x).reshape(-1)[:6], np.arange(6.0))
    y = torch.zeros(5, device=device)
    assert torch.resize_as_(y, x) is y and tuple(y.shape) == (3, 4)
    v = torch.arange(10.0, device=device)[2:]  # a view keeps its storage offset
    v.resize_(3)
    assert np.array_equal(_np(v), [2, 3, 4]) and v.storage_offset() == 2
    with pytest.raises(Exception, match="require grad"):
        torch.ones(2, requires_grad=True).resize_(3)
    with pytest.raises(Exception, match="negative"):
        x.resize_(-1, 2)
