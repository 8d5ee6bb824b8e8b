"""Issue 52's sorting and selection ops (python/src/tensor_sort.c over src/ops/sort.c, quantile.c,
search.c) against NumPy and plain-Python references on cpu and sim:0: sort / argsort / msort, topk,
kthvalue, median / nanmedian, mode, quantile / nanquantile, searchsorted / bucketize, unique /
unique_consecutive, histc, bincount, isin; PyTorch's order for ties and NaN, the (values,
indices) pairs, gradients by central finite differences in float64, and the refusals."""
import math

import numpy as np
import pytest

import tessera as torch

NAN = float("nan")


def T(a, device, dtype=None, rg=False):
    a = np.asarray(a)
    t = torch.tensor(a.tolist(), dtype=dtype or (torch.float64 if a.dtype.kind == "f" else None),
                     device=device)
    if rg:
        t.requires_grad_(True)
    return t


def N(t):
    return np.array(t.tolist())


def eq(t, ref, rtol=0.0):
    ref = np.asarray(ref, dtype=float)
    assert tuple(t.shape) == ref.shape, (tuple(t.shape), ref.shape)
    np.testing.assert_allclose(N(t).reshape(ref.shape).astype(float), ref, rtol=rtol, atol=0,
                               equal_nan=True)


# ties and NaNs (a small set of values), and distinct values
RNG = np.random.default_rng(52)
TIES = RNG.choice([-1.5, 0.0, 0.25, 2.0, 7.0, NAN, 3.5], size=(3, 4, 6))
DISTINCT = RNG.standard_normal((3, 4, 6))


def stable_order(row, descending):
    """PyTorch's stable order: NaN above every number."""
    def key(i):
        v = row[i]
        big = math.isnan(v)
        return (not big, -v if not big else 0.0) if descending else (big, v if not big else 0.0)
    return sorted(range(len(row)), key=key)


def along(a, dim, fn):
    """fn(row) -> list applied to every row of a along dim; results stacked back along dim."""
    m = np.moveaxis(a, dim, -1)
    out = np.array([fn(list(r)) for r in m.reshape(-1, m.shape[-1])])
    return np.moveaxis(out.reshape(m.shape[:-1] + out.shape[1:]), -1, dim) if out.ndim > 1 else \
        out.reshape(m.shape[:-1])


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_sort_argsort(device, dim, descending):
    x = T(TIES, device)
    r = torch.sort(x, dim=dim, descending=descending)
    assert type(r).__name__ == "sort" and r.values is r[0] and r.indices is r[1]
    idx = along(TIES, dim, lambda row: stable_order(row, descending))
    eq(r.indices, idx)
    eq(r.values, np.take_along_axis(TIES, idx, dim))
    assert r.indices.dtype == torch.int64 and r.values.dtype == torch.float64
    v, i = x.sort(dim, descending, stable=True)
    eq(i, idx)
    eq(torch.argsort(x, dim=dim, descending=descending), idx)
    eq(x.argsort(dim, descending), idx)


def test_sort_dtypes_and_edges(device):
    ints = RNG.integers(-3, 4, size=(5, 7))
    for dt in (torch.int64, torch.int32, torch.int16, torch.int8):
        x = T(ints, device, dtype=dt)
        r = x.sort(1)
        assert r.values.dtype == dt
        eq(r.indices, np.argsort(ints, axis=1, kind="stable"))
        eq(r.values, np.sort(ints, axis=1))
    b = T([True, False, True, False], device)
    eq(b.sort().indices, [1, 3, 0, 2])
    big = 2**60
    x = torch.tensor([big + 3, big + 1, -5, big + 2, big + 1], device=device)
    assert x.sort().values.tolist() == [-5, big + 1, big + 1, big + 2, big + 3]
    z = torch.tensor(4.5, device=device)
    v, i = z.sort()
    assert v.shape == () and i.shape == () and i.item() == 0
    e = torch.zeros(2, 0, device=device)
    assert x.msort().tolist() == sorted(x.tolist())
    assert e.sort(1).values.shape == (2, 0)
    eq(torch.msort(T(TIES, device)), np.take_along_axis(
        TIES, along(TIES, 0, lambda row: stable_order(row, False)), 0))


@pytest.mark.parametrize("largest", [True, False])
def test_topk(device, largest):
    x = T(TIES, device)
    for k in (0, 1, 3, 6):
        r = torch.topk(x, k, largest=largest)
        assert type(r).__name__ == "topk"
        idx = along(TIES, -1, lambda row: stable_order(row, largest)[:k]) if k else \
            np.zeros((3, 4, 0))
        eq(r.indices, idx)
        eq(r.values, np.take_along_axis(TIES, idx.astype(int), -1))
    r = x.topk(2, dim=0, largest=largest, sorted=True)
    idx = along(TIES, 0, lambda row: stable_order(row, largest)[:2])
    eq(r.indices, idx)


def lower_median(row, ignore_nan):
    order = stable_order(row, False)
    nans = sum(math.isnan(v) for v in row)
    if ignore_nan:
        return order[(len(row) - nans - 1) // 2 if nans < len(row) else 0]
    return order[len(row) - nans if nans else (len(row) - 1) // 2]


def mode_index(row):
    best, count = None, 0
    for i, v in enumerate(row):
        c = 1 if math.isnan(v) else sum(1 for w in row if w == v)
        last = i if math.isnan(v) else max(j for j, w in enumerate(row) if w == v)
        if c > count or (c == count and not math.isnan(v) and
                         (math.isnan(row[best]) or v < row[best])):
            best, count = last, c
    return best


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 2])
def test_kthvalue_median_mode(device, dim, keepdim):
    x = T(TIES, device)
    n = TIES.shape[dim]
    cases = [
        (lambda: torch.kthvalue(x, 2, dim, keepdim), lambda row: stable_order(row, False)[1],
         "kthvalue"),
        (lambda: torch.median(x, dim, keepdim), lambda row: lower_median(row, False), "median"),
        (lambda: x.nanmedian(dim, keepdim=keepdim), lambda row: lower_median(row, True),
         "nanmedian"),
        (lambda: torch.mode(x, dim, keepdim), mode_index, "mode"),
    ]
    for call, ref, name in cases:
        r = call()
        assert type(r).__name__ == name
        idx = along(TIES, dim, ref)
        if keepdim:
            idx = np.expand_dims(idx, dim)
        eq(r.indices, idx)
        eq(r.values, np.take_along_axis(TIES, idx if keepdim else np.expand_dims(idx, dim), dim)
           .reshape(idx.shape))
    assert n > 1
    # ints: mode of [1, 2, 2, 1, 3] is 1 (the smallest of the most frequent) at its last index
    r = torch.mode(torch.tensor([1, 2, 2, 1, 3], device=device))
    assert r.values.item() == 1 and r.indices.item() == 3


def test_median_whole(device):
    x = T(TIES, device)
    assert math.isnan(torch.median(x).item())
    flat = [v for v in TIES.ravel() if not math.isnan(v)]
    assert x.nanmedian().item() == sorted(flat)[(len(flat) - 1) // 2]
    d = T(DISTINCT, device)
    assert d.median().item() == sorted(DISTINCT.ravel())[(DISTINCT.size - 1) // 2]
    assert math.isnan(torch.median(torch.zeros(0, device=device)).item())
    assert torch.tensor([1, 2], dtype=torch.int8, device=device).median().dtype == torch.int8


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile(device, method):
    a = DISTINCT.copy()
    a[0, 1, 2] = NAN
    x = T(a, device)
    qs = [0.0, 0.1, 0.5, 0.77, 1.0]
    q = T(qs, device)
    eq(torch.quantile(x, q, dim=2, interpolation=method),
       np.quantile(a, qs, axis=2, method=method), rtol=1e-12)
    eq(torch.nanquantile(x, q, dim=1, keepdim=True, interpolation=method),
       np.nanquantile(a, qs, axis=1, keepdims=True, method=method), rtol=1e-12)
    eq(x.quantile(0.3, dim=0, interpolation=method), np.quantile(a, 0.3, axis=0, method=method),
       rtol=1e-12)
    d = T(DISTINCT, device)
    eq(torch.quantile(d, q, interpolation=method), np.quantile(DISTINCT, qs, method=method),
       rtol=1e-12)
    eq(d.nanquantile(0.6, keepdim=True, interpolation=method),
       np.nanquantile(DISTINCT, 0.6, keepdims=True, method=method), rtol=1e-12)
    assert math.isnan(torch.quantile(x, 0.5).item())


def test_searchsorted_bucketize(device):
    bnd = np.sort(RNG.choice([-2.0, -1.0, 0.0, 0.5, 3.0], size=(3, 6)), axis=1)
    vals = RNG.choice([-3.0, -1.0, 0.0, 0.25, 0.5, 3.0, 4.0], size=(3, 5))
    B, V = T(bnd, device), T(vals, device)
    for side in ("left", "right"):
        ref = np.stack([np.searchsorted(bnd[r], vals[r], side=side) for r in range(3)])
        eq(torch.searchsorted(B, V, side=side), ref)
        eq(torch.searchsorted(B, V, right=side == "right"), ref)
        ref1 = np.searchsorted(bnd[0], vals, side=side)
        r1 = torch.searchsorted(B[0], V, right=side == "right", out_int32=True)
        assert r1.dtype == torch.int32
        eq(r1, ref1)
        eq(torch.bucketize(V, B[0], right=side == "right"), ref1)
        perm = RNG.permutation(6)
        sorter = torch.tensor(np.argsort(bnd[0][perm], kind="stable").tolist(), device=device)
        eq(torch.searchsorted(T(bnd[0][perm], device), V, side=side, sorter=sorter), ref1)
    s = torch.searchsorted(B[0], 0.5)
    assert s.shape == () and s.item() == np.searchsorted(bnd[0], 0.5)
    assert torch.bucketize(0.5, B[0], right=True).item() == np.searchsorted(bnd[0], 0.5, "right")
    # NaN values go past the end
    assert torch.searchsorted(T([1.0, 2.0], device), T([NAN], device)).tolist() == [2]


def test_unique(device):
    ints = RNG.integers(-3, 5, size=(4, 5))
    x = T(ints, device)
    u, inv, cnt = np.unique(ints, return_inverse=True, return_counts=True)
    eq(torch.unique(x), u)
    r = x.unique(return_inverse=True, return_counts=True)
    assert isinstance(r, tuple) and len(r) == 3
    eq(r[0], u)
    eq(r[1], inv.reshape(ints.shape))
    eq(r[2], cnt)
    r = torch.unique(x, sorted=False, return_counts=True)
    eq(r[1], cnt)
    # along a dim
    rows = np.array([[2, 1], [0, 5], [2, 1], [0, 4]])
    u, inv, cnt = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    r = torch.unique(T(rows, device), dim=0, return_inverse=True, return_counts=True)
    eq(r[0], u)
    eq(r[1], inv.ravel())
    eq(r[2], cnt)
    # NaNs are each their own value (PyTorch), sorted last
    r = torch.unique(T([NAN, 1.0, NAN, 1.0], device), return_inverse=True, return_counts=True)
    eq(r[0], [1.0, NAN, NAN])
    eq(r[1], [1, 0, 2, 0])
    eq(r[2], [2, 1, 1])
    # unique_consecutive
    seq = [3, 3, 1, 1, 1, 3, 2, 2]
    r = torch.unique_consecutive(T(seq, device), return_inverse=True, return_counts=True)
    eq(r[0], [3, 1, 3, 2])
    eq(r[1], [0, 0, 1, 1, 1, 2, 3, 3])
    eq(r[2], [2, 3, 1, 2])
    r = T(rows[[0, 2, 1, 3]], device).unique_consecutive(dim=0, return_counts=True)
    eq(r[0], [[2, 1], [0, 5], [0, 4]])
    eq(r[1], [2, 1, 1])
    assert torch.unique(torch.tensor(3, device=device)).tolist() == [3]


def test_histc_bincount_isin(device):
    data = RNG.standard_normal(200)
    x = T(data, device)
    for bins, lo, hi in ((10, -2.0, 2.0), (7, -1.0, 0.5), (1, -3.0, 3.0)):
        ref, _ = np.histogram(data, bins=bins, range=(lo, hi))
        eq(torch.histc(x, bins=bins, min=lo, max=hi), ref)
    ref, _ = np.histogram(data, bins=100, range=(data.min(), data.max()))
    h = x.histc()
    assert h.dtype == torch.float64
    eq(h, ref)
    h32 = torch.histc(torch.tensor([1.0, 2.0, 1.0, 5.0], device=device), bins=4)
    assert h32.dtype == torch.float32 and h32.tolist() == [2.0, 1.0, 0.0, 1.0]
    vals = RNG.integers(0, 6, size=30)
    w = RNG.standard_normal(30)
    v = T(vals, device)
    eq(torch.bincount(v), np.bincount(vals))
    eq(v.bincount(minlength=10), np.bincount(vals, minlength=10))
    r = torch.bincount(v, weights=T(w, device))
    assert r.dtype == torch.float64
    eq(r, np.bincount(vals, weights=w), rtol=1e-12)
    assert torch.bincount(v, T(w, device, dtype=torch.float32)).dtype == torch.float32
    assert torch.bincount(torch.zeros(0, dtype=torch.int64, device=device), minlength=2) \
        .tolist() == [0, 0]
    el = RNG.integers(0, 10, size=(3, 4))
    te = [1, 3, 5, 11]
    eq(torch.isin(T(el, device), T(te, device)), np.isin(el, te))
    eq(torch.isin(T(el, device), T(te, device), invert=True), np.isin(el, te, invert=True))
    eq(torch.isin(T(el, device), 3), el == 3)
    assert torch.isin(3, T(te, device)).item() is True
    eq(torch.isin(T([NAN, 1.0], device), T([NAN, 1.0], device)), [False, True])


def numeric_grad(f, a, g):
    """d sum(f(a) * g) / da by central differences in float64"""
    out = np.zeros_like(a)
    eps = 1e-6
    for i in np.ndindex(a.shape):
        ap, am = a.copy(), a.copy()
        ap[i] += eps
        am[i] -= eps
        out[i] = (np.sum(f(ap) * g) - np.sum(f(am) * g)) / (2 * eps)
    return out


@pytest.mark.parametrize("case", ["sort", "topk", "kthvalue", "median_dim", "median", "mode",
                                  "quantile", "nanquantile"])
def test_gradients(device, case):
    a = DISTINCT[0]  # [4, 6], distinct: every op is smooth there
    ops = {
        "sort": lambda t: t.sort(1, descending=True).values,
        "topk": lambda t: torch.topk(t, 3, dim=0, largest=False).values,
        "kthvalue": lambda t: torch.kthvalue(t, 2, 1).values,
        "median_dim": lambda t: t.median(0, keepdim=True).values,
        "median": lambda t: t.median(),
        "mode": lambda t: t.mode(1).values,
        "quantile": lambda t: torch.quantile(t, torch.tensor([0.2, 0.9], dtype=torch.float64,
                                                             device=t.device), dim=1),
        "nanquantile": lambda t: torch.nanquantile(t, 0.35, dim=0, interpolation="midpoint"),
    }
    f = ops[case]
    shape = tuple(f(T(a, device)).shape)
    g = RNG.standard_normal(shape)
    x = T(a, device, rg=True)
    (f(x) * T(g, device)).sum().backward()
    ref = numeric_grad(lambda arr: N(f(T(arr, device))), a, g)
    np.testing.assert_allclose(N(x.grad), ref, rtol=1e-6, atol=1e-8)
    assert f(x).grad_fn is not None


def test_median_gradient_shared(device):
    x = T([2.0, 1.0, 2.0, 3.0, 2.0], device, rg=True)
    x.median().backward()
    eq(x.grad, [1 / 3, 0, 1 / 3, 0, 1 / 3], rtol=1e-15)


def test_errors(device):
    x = T(DISTINCT[0], device)
    with pytest.raises(RuntimeError, match="topk"):
        x.topk(7)
    with pytest.raises(RuntimeError, match="kthvalue"):
        x.kthvalue(0)
    with pytest.raises(RuntimeError, match="sort"):
        x.sort(2)
    with pytest.raises(RuntimeError, match="median"):
        torch.zeros(0, 3, device=device).median(0)
    with pytest.raises(RuntimeError, match="quantile"):
        x.quantile(1.5)
    with pytest.raises(RuntimeError, match="interpolation"):
        x.quantile(0.5, interpolation="cubic")
    with pytest.raises(RuntimeError, match="quantile"):
        torch.quantile(torch.tensor([1, 2], device=device), 0.5)
    with pytest.raises(RuntimeError, match="bincount"):
        torch.bincount(torch.tensor([1, -1], device=device))
    with pytest.raises(RuntimeError, match="histc"):
        x.histc(bins=0)
    with pytest.raises(RuntimeError, match="searchsorted"):
        torch.searchsorted(x, torch.zeros(3, 3, device=device))
    with pytest.raises(ValueError, match="side"):
        torch.searchsorted(x[0], x, right=True, side="left")
    with pytest.raises(RuntimeError, match="UInt64"):
        torch.tensor([1, 2], dtype=torch.uint64, device=device).sort()
