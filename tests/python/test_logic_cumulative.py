"""Issue 52's predicates, truth reductions, cumulative ops and pointwise forms
(python/src/tensor_logic.c, tessera/_method_functions.py) against NumPy float64 on cpu and sim:0:
values, dtypes, PyTorch's NaN / tie / promotion rules, 0-dim and empty tensors, gradients by
central finite differences, and the refusals."""
import math

import numpy as np
import pytest

import tessera as torch

NAN, INF = float("nan"), float("inf")


def T(a, device, dtype=None, rg=False):
    a = np.asarray(a)
    if dtype is None:
        dtype = torch.float64 if a.dtype.kind == "f" else (torch.bool if a.dtype.kind == "b"
                                                          else torch.int64)
    t = torch.tensor(a.tolist(), dtype=dtype, device=device)
    if rg:
        t.requires_grad_(True)
    return t


def N(t):
    return np.array(t.tolist())


def eq(t, ref, rtol=1e-13, atol=0.0):
    ref = np.asarray(ref)
    assert tuple(t.shape) == ref.shape, (tuple(t.shape), ref.shape)
    got = N(t).reshape(ref.shape)
    if ref.dtype.kind == "b":
        assert got.dtype.kind == "b" and (got == ref).all(), (got, ref)
    else:
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)


A = np.sin(np.arange(1, 61) * 1.7).reshape(3, 4, 5) * 1.5
SPECIAL = np.array([1.0, NAN, -INF, INF, 0.0, -0.0, -2.5, 1e308])


def fd_check(f, arrays, device, eps=1e-6, tol=1e-6):
    """the gradient of sum(f(*xs) * g) against central differences in float64"""
    xs = [T(a, device, rg=True) for a in arrays]
    y = f(*xs)
    g = np.cos(np.arange(y.numel()) * 0.7 + 0.3).reshape(tuple(y.shape))
    (y * T(g, device)).sum().backward()
    for i, a in enumerate(arrays):
        num = np.zeros(a.size)
        for k in range(a.size):
            vals = []
            for s in (eps, -eps):
                b = [np.array(c, dtype=np.float64) for c in arrays]
                b[i].reshape(-1)[k] += s
                with torch.no_grad():
                    vals.append(float((f(*[T(c, device) for c in b]) * T(g, device)).sum()))
            num[k] = (vals[0] - vals[1]) / (2 * eps)
        got = N(xs[i].grad).reshape(-1)
        np.testing.assert_allclose(got, num, rtol=tol, atol=tol)


# ------------------------------------------------------------------ predicates
def test_predicates(device):
    x = T(SPECIAL, device, torch.float32)
    with np.errstate(over="ignore"):
        ref = SPECIAL.astype(np.float32)
    eq(torch.isnan(x), np.isnan(ref))
    eq(x.isinf(), np.isinf(ref))
    eq(torch.isfinite(x), np.isfinite(ref))
    eq(torch.isposinf(x), np.isposinf(ref))  # 1e308 is inf in float32
    eq(x.isneginf(), np.isneginf(ref))
    eq(torch.isreal(x), np.ones(8, bool))
    for dt in (torch.int32, torch.uint8, torch.bool):
        i = T([0, 1, 1], device, dt)
        eq(torch.isnan(i), [False] * 3)
        eq(torch.isinf(i), [False] * 3)
        eq(torch.isfinite(i), [True] * 3)
        assert torch.isnan(i).dtype == torch.bool
    s = torch.tensor(NAN, device=device)
    assert torch.isnan(s).shape == () and bool(torch.isnan(s))
    assert torch.isfinite(torch.zeros(0, 3, device=device)).shape == (0, 3)


def test_logical_xor_heaviside(device):
    a = T([[0, 1, 2]], device)
    b = T([[0.0], [NAN], [-1.0]], device)
    eq(torch.logical_xor(a, b), np.logical_xor(np.array([[0, 1, 2]]), np.array([[0.0], [NAN], [-1.0]])))
    eq(a.logical_xor(0), [[False, True, True]])
    x = T([-1.5, 0.0, 2.0, NAN, -0.0], device)
    v = T([0.5, 0.25, 7.0, 3.0, 9.0], device)
    eq(torch.heaviside(x, v), [0.0, 0.25, 1.0, 0.0, 9.0])  # NaN: 0 (neither == 0 nor > 0)
    eq(x.heaviside(T([0.5], device)), [0.0, 0.5, 1.0, 0.0, 0.5])
    with pytest.raises(torch.DtypeError, match="heaviside"):
        torch.heaviside(x, T([1.0], device, torch.float32))


# ------------------------------------------------------------------ any / all / isclose / equal
def test_any_all(device):
    x = np.array([[0.0, 0.0, NAN], [0.0, 2.0, 3.0]])
    t = T(x, device)
    assert torch.any(t).dtype == torch.bool and bool(torch.any(t)) and not bool(torch.all(t))
    eq(torch.any(t, 0), np.any(x != 0, 0))
    eq(t.all(dim=1), np.all(x != 0, 1))
    eq(t.all(1, keepdim=True), np.all(x != 0, 1, keepdims=True))
    eq(torch.any(t, (0, 1)), np.array(True))
    eq(torch.any(t, dim=-1, keepdim=True), np.any(x != 0, -1, keepdims=True))
    u = T([[0, 3], [0, 0]], device, torch.uint8)
    assert torch.any(u).dtype == torch.uint8 and torch.all(u, 1).dtype == torch.uint8
    eq(torch.any(u, 1).to(torch.bool), [True, False])
    e = torch.zeros(2, 0, device=device)
    assert not bool(torch.any(e)) and bool(torch.all(e))
    eq(torch.all(e, 1), [True, True])
    eq(torch.any(e, 1), [False, False])
    assert bool(torch.all(torch.tensor(True, device=device)))


def test_isclose_allclose_equal(device):
    a = np.array([1.0, 1.0 + 1e-6, 1.1, NAN, INF, -INF, 0.0, 1e-9])
    b = np.array([1.0, 1.0, 1.0, NAN, INF, INF, 1e-9, 0.0])
    ta, tb = T(a, device), T(b, device)
    for rtol, atol, en in ((1e-5, 1e-8, False), (1e-5, 1e-8, True), (0.2, 0.0, False), (0.0, 0.0, True)):
        eq(torch.isclose(ta, tb, rtol=rtol, atol=atol, equal_nan=en),
           np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=en))
    eq(ta.isclose(tb, 0, 1e-8), np.isclose(a, b, 0, 1e-8))
    i, j = T([1, 5, 100], device), T([2, 5, 103], device)
    eq(torch.isclose(i, j, rtol=0.01, atol=1), np.isclose([1, 5, 100], [2, 5, 103], 0.01, 1))
    r = torch.allclose(ta, ta.clone(), equal_nan=True)
    assert r is True and torch.allclose(ta, tb) is False
    assert ta.allclose(ta + 1e-9, rtol=0, atol=1e-8) is False  # the infinities differ
    assert torch.allclose(T([1.0, 2.0], device), T([[1.0, 2.0 + 1e-7]], device))  # broadcast
    assert torch.equal(ta, ta) is True  # the same elements: NaN too, as PyTorch's
    assert torch.equal(ta, ta.clone()) is False
    assert torch.equal(i, i.clone()) and not torch.equal(i, j)
    assert not torch.equal(i, T([[1, 5, 100]], device))  # shapes differ
    with pytest.raises(torch.DtypeError):
        torch.isclose(ta, ta.float())
    with pytest.raises(torch.ArgumentError, match="rtol"):
        torch.isclose(ta, tb, rtol=-1.0)


# ------------------------------------------------------------------ cumulative
def cum_ext_ref(x, dim, is_max):
    x = np.moveaxis(np.array(x, dtype=np.float64), dim, -1)
    v, ix = np.empty_like(x), np.zeros(x.shape, np.int64)
    for idx in np.ndindex(*x.shape[:-1]):
        cur, at = None, 0
        for k, e in enumerate(x[idx]):
            if cur is None or math.isnan(e) or (not math.isnan(cur) and (e >= cur if is_max else e <= cur)):
                cur, at = e, k
            v[idx + (k,)], ix[idx + (k,)] = cur, at
    return np.moveaxis(v, -1, dim), np.moveaxis(ix, -1, dim)


def test_cumsum_cumprod_values(device):
    x = T(A, device)
    for d in (0, 1, 2, -1):
        eq(torch.cumsum(x, d), np.cumsum(A, d))
        eq(x.cumprod(dim=d), np.cumprod(A, d))
        eq(torch.logcumsumexp(x, d), np.logaddexp.accumulate(A, d), rtol=1e-13, atol=1e-15)
    p = x.permute(2, 0, 1)  # strided input
    eq(torch.cumsum(p, 1), np.cumsum(A.transpose(2, 0, 1), 1))
    f = torch.cumsum(T(A, device, torch.float32), 2)
    assert f.dtype == torch.float32
    eq(f, np.cumsum(A.astype(np.float32).astype(np.float64), 2).astype(np.float32), rtol=0)
    i = T([[3, -1, 4], [1, 5, 9]], device, torch.int32)
    assert torch.cumsum(i, 1).dtype == torch.int64 and torch.cumprod(i, 0).dtype == torch.int64
    eq(torch.cumsum(i, 1), [[3, 2, 6], [1, 6, 15]])
    eq(torch.cumsum(i, 1, dtype=torch.float64), [[3.0, 2.0, 6.0], [1.0, 6.0, 15.0]])
    assert torch.cumsum(i, 1, dtype=torch.float64).dtype == torch.float64
    b = T([True, False, True, True], device)
    eq(torch.cumsum(b, 0), [1, 1, 2, 3])
    eq(torch.cumsum(T([200, 100], device, torch.uint8), 0, dtype=torch.uint8), [200, 44])
    s = torch.tensor(2.0, device=device)
    assert torch.cumsum(s, 0).shape == () and float(torch.cumprod(s, -1)) == 2.0
    assert torch.cumsum(torch.zeros(0, 2, device=device), 0).shape == (0, 2)
    eq(torch.logcumsumexp(T([-INF, -INF, 0.0, INF, NAN], device), 0), [-INF, -INF, 0.0, INF, NAN])


def test_cummax_cummin(device):
    x = np.array([[1.0, 3.0, 3.0, NAN, 2.0, NAN, 5.0], [2.0, 1.0, 1.0, -4.0, -4.0, 0.0, -5.0]])
    t = T(x, device)
    for d in (0, 1):
        for is_max in (True, False):
            r = torch.cummax(t, d) if is_max else t.cummin(d)
            v, i = cum_ext_ref(x, d, is_max)
            eq(r.values, v)
            eq(r.indices, i)
            assert r.indices.dtype == torch.int64
            rv, ri = r  # a named tuple
            assert rv.shape == r.values.shape
    n = T([[5, -1, 5, 7]], device, torch.int16)
    r = torch.cummax(n, 1)
    assert r.values.dtype == torch.int16
    eq(r.values, [[5, 5, 5, 7]])
    eq(r.indices, [[0, 0, 2, 3]])
    eq(torch.cummin(T([True, False, True], device), 0).indices, [0, 1, 1])
    e = torch.cummax(torch.zeros(3, 0, device=device), 1)
    assert e.values.shape == (3, 0) and e.indices.shape == (3, 0)


def test_cumulative_gradients(device):
    fd_check(lambda x: torch.cumsum(x, 1), [A[:2, :3, :2]], device)
    fd_check(lambda x: torch.cumprod(x, 2), [A[:2, :2]], device)
    z = np.array([[0.0, 1.5, -2.0, 0.7], [1.2, 0.0, 3.0, 0.0], [2.0, 0.8, 0.0, -1.0]])
    fd_check(lambda x: torch.cumprod(x, 1), [z], device)  # zeros: first and later ones
    fd_check(lambda x: torch.cumprod(x, 0), [z], device)
    fd_check(lambda x: torch.logcumsumexp(x, 0), [A[:, :2, 0]], device)
    fd_check(lambda x: torch.cummax(x, 1).values, [A[0]], device)
    fd_check(lambda x: torch.cummin(x, 0).values, [A[:, 0]], device)
    fd_check(lambda x: torch.cumsum(x, 0, dtype=torch.float64), [A[0, 0]], device)


def test_cumulative_errors(device):
    x = T(A, device)
    with pytest.raises(torch.ArgumentError, match="cumsum"):
        torch.cumsum(x, 3)
    with pytest.raises(torch.DtypeError, match="logcumsumexp"):
        torch.logcumsumexp(T([1, 2], device), 0)
    with pytest.raises(TypeError):
        torch.cumsum(x)


# ------------------------------------------------------------------ pointwise forms
def test_addcmul_addcdiv_lerp(device):
    a, b, c = A[0], A[1] + 3.0, A[2, 0]
    ta, tb, tc = T(a, device), T(b, device), T(c, device)
    eq(torch.addcmul(ta, tb, tc, value=0.5), a + 0.5 * b * c)
    eq(ta.addcdiv(tb, tc, value=-2), a + -2 * b / c)
    eq(torch.addcmul(ta, tb, tc), a + b * c)
    i = T([1, 2, 3], device)
    r = torch.addcmul(i, i, i, value=2)
    assert r.dtype == torch.int64
    eq(r, [3, 10, 21])
    eq(torch.addcmul(T([1.0], device, torch.float32), i, i).to(torch.float64), [2.0, 5.0, 10.0])
    with pytest.raises(torch.DtypeError, match="addcdiv"):
        torch.addcdiv(i, i, i)
    w = np.linspace(-0.5, 1.5, 5)
    tw = T(w, device)
    s, e = np.full(5, 2.0), np.arange(5.0) * 3
    ref = np.where(np.abs(w) < 0.5, s + w * (e - s), e - (e - s) * (1 - w))
    eq(torch.lerp(T(s, device), T(e, device), tw), ref)
    eq(T(s, device).lerp(T(e, device), 0.75), s + 0.75 * (e - s))
    with pytest.raises(torch.DtypeError):
        torch.lerp(T(s, device), T(e, device, torch.float32), 0.5)
    fd_check(lambda x, y, z: torch.addcmul(x, y, z, value=0.3), [a, b, c], device)
    fd_check(lambda x, y, z: torch.addcdiv(x, y, z, value=1.5), [a, b, c], device)
    fd_check(lambda x, y, z: torch.lerp(x, y, z), [s, e, w], device)
    fd_check(lambda x, y: torch.lerp(x, y, 0.8), [s, e], device)


def test_fmax_fmin(device):
    a = np.array([1.0, NAN, 2.0, NAN, -0.5, 3.0])
    b = np.array([NAN, 3.0, 1.0, NAN, -0.5, INF])
    ta, tb = T(a, device), T(b, device)
    eq(torch.fmax(ta, tb), np.fmax(a, b))
    eq(tb.fmin(ta), np.fmin(b, a))
    eq(torch.fmax(T([1, 5], device), T([[3], [4]], device)), np.fmax([1, 5], [[3], [4]]))
    r = torch.fmax(T([1, 5], device, torch.int32), T([2.5], device, torch.float32))
    assert r.dtype == torch.float32
    x, y = A[0, 0], A[1, 0]  # no ties: the gradient of the larger
    fd_check(lambda p, q: torch.fmax(p, q), [x, y], device)
    fd_check(lambda p, q: torch.fmin(p, q), [x, y], device)
    p, q = T([1.0, NAN, 2.0], device, rg=True), T([1.0, 3.0, NAN], device, rg=True)
    torch.fmax(p, q).sum().backward()  # a tie goes to the first operand, a NaN to the other
    eq(p.grad, [1.0, 0.0, 1.0])
    eq(q.grad, [0.0, 1.0, 0.0])


def test_nansum_nanmean(device):
    x = np.array([[1.0, NAN, 3.0], [NAN, NAN, NAN], [0.5, -1.0, 2.0]])
    t = T(x, device)
    eq(torch.nansum(t), np.nansum(x))
    eq(t.nansum(1), np.nansum(x, 1))
    eq(torch.nansum(t, (0, 1), keepdim=True), np.nansum(x, (0, 1), keepdims=True))
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        ref = np.nanmean(x, 1)
    eq(torch.nanmean(t, 1), ref)
    eq(t.nanmean(), np.nanmean(x))
    eq(torch.nanmean(t, 0, keepdim=True), np.nanmean(x, 0, keepdims=True))
    eq(torch.nansum(T([1, 2, 3], device)), np.array(6))
    assert torch.nansum(T([1, 2], device, torch.int32), dtype=torch.float64).dtype == torch.float64
    with pytest.raises(torch.DtypeError, match="nanmean"):
        torch.nanmean(T([1, 2], device))
    fd_check(lambda v: torch.nansum(v, 0), [A[0]], device)
    fd_check(lambda v: torch.nanmean(v, 1), [A[0]], device)
    v = T(x, device, rg=True)
    torch.nanmean(v, 1).sum().backward()
    eq(v.grad, np.where(np.isnan(x), 0.0, [[0.5], [0.0], [1 / 3]]))


def test_diff(device):
    x = T(A, device)
    for n in (1, 2, 3):
        for d in (0, -1, 1):
            eq(torch.diff(x, n, d), np.diff(A, n, d))
    pre, app = A[:, :, :2], A[:, :, 1:3]
    eq(torch.diff(x, 2, -1, T(pre, device), T(app, device)), np.diff(A, 2, -1, prepend=pre, append=app))
    eq(torch.diff(x, n=0, prepend=T(pre, device)), A)  # n == 0: the input, as PyTorch
    eq(torch.diff(x, n=9), np.diff(A, 5, -1))  # past the size: empty
    eq(torch.diff(T([True, False, False, True], device)), [True, False, True])
    eq(torch.diff(T([1, 4, 9], device, torch.uint8)), [3, 5])
    with pytest.raises(torch.ShapeError):
        torch.diff(torch.tensor(1.0, device=device))
    fd_check(lambda v: torch.diff(v, 2, 0), [A[:, :2, 0]], device)


def test_gcd_lcm(device):
    a = np.array([12, -18, 0, 7, 0, 270, -4])
    b = np.array([8, 12, 0, 0, 5, 192, -6])
    eq(torch.gcd(T(a, device), T(b, device)), np.gcd(a, b))
    eq(T(a, device).lcm(T(b, device)), np.lcm(a, b))
    eq(torch.gcd(T(a, device), T([[4], [9]], device)), np.gcd(a, [[4], [9]]))
    r = torch.gcd(T([12, 30], device, torch.uint8), T([18], device, torch.uint8))
    assert r.dtype == torch.uint8
    eq(r, [6, 6])
    big = 2**62 + 2**40
    eq(torch.gcd(T([big], device), T([2**41], device)), [2**40])
    with pytest.raises(torch.DtypeError, match="gcd"):
        torch.gcd(T([1.0], device), T([2.0], device))


def test_repeat_tile_shapes(device):
    x = T(A[0, :2, :3], device)
    eq(x.repeat(2, 3), np.tile(A[0, :2, :3], (2, 3)))
    eq(x.repeat((2, 1, 2)), np.tile(A[0, :2, :3], (2, 1, 2)))
    eq(x.repeat(0, 2), np.zeros((0, 6)))
    eq(torch.tile(x, (2,)), np.tile(A[0, :2, :3], (2,)))
    eq(x.tile(3, 1, 1), np.tile(A[0, :2, :3], (3, 1, 1)))
    eq(torch.tensor(5, device=device).repeat(3), [5, 5, 5])
    with pytest.raises(torch.ArgumentError, match="repeat"):
        x.repeat(2)
    fd_check(lambda v: v.repeat(2, 1, 2), [A[0, :2, :2]], device)
    fd_check(lambda v: torch.tile(v, (3,)), [A[0, 0]], device)
    t = T(A, device)
    eq(torch.ravel(t), A.ravel())
    eq(t.unflatten(1, (2, 2)), A.reshape(3, 2, 2, 5))
    eq(torch.unflatten(t, -1, (-1, 1)), A.reshape(3, 4, 5, 1))
    with pytest.raises(RuntimeError):
        t.unflatten(1, (3, 2))


def test_aliases(device):
    t = T(A[0], device)
    assert torch.positive(t) is t and t.positive() is t
    with pytest.raises(TypeError):
        torch.positive(T([True], device))
    eq(torch.rsub(t, 2.0), 2.0 - A[0])
    eq(torch.rsub(t, T(A[1], device), alpha=3), A[1] - 3 * A[0])
    eq(torch.true_divide(t, 4), A[0] / 4)
    eq(T([3, 4], device).true_divide(T([2, 8], device)), [1.5, 0.5])
    eq(torch.clamp_min(t, 0.2), np.maximum(A[0], 0.2))
    eq(torch.clamp_max(t, T(0.1, device)), np.minimum(A[0], 0.1))
    c = torch.clone(t, memory_format=torch.preserve_format)
    eq(c, A[0])
    assert not torch.equal(c, t.add(1))
    m = T(A[0] > 0, device)
    eq(torch.masked_fill(t, m, -1.0), np.where(A[0] > 0, -1.0, A[0]))
    eq(torch.masked_fill(t, m, torch.tensor(5.0, device=device)), np.where(A[0] > 0, 5.0, A[0]))
    f = torch.fill(t, 7.0)
    eq(f, np.full_like(A[0], 7.0))
    eq(t, A[0])  # fill is not in place
    z = t.clone()
    assert torch.zero_(z) is z
    eq(z, np.zeros_like(A[0]))


def test_pytorch_corner_rules(device):
    """rules found by comparing with PyTorch 2.15 call by call"""
    x = T([[0.0, 1.0, NAN]], device)
    eq(torch.any(x, dim=()), [[False, True, True]])  # an empty dim tuple reduces nothing
    assert torch.equal(T([1, 2], device), T([1.0, 2.0], device))  # values compared, not dtypes
    eq(torch.addcmul(T([1], device), T([2], device), T([4], device), value=0.5), [1])  # truncated
    eq(torch.gcd(T([-128, 6], device, torch.int8), T([4, 0], device, torch.int8)), [4, 6])
    with pytest.raises(torch.DtypeError, match="Bool"):
        torch.cumsum(T([0, 2], device), 0, dtype=torch.bool)
    with pytest.raises(IndexError):
        torch.tensor(3.0, device=device).unflatten(0, (1, 1))
