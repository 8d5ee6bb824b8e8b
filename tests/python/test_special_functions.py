"""test_special_functions.py — torch.special's remaining functions (ndtr ... the polynomials, igamma,
mvlgamma), torch.signal.windows and the *_window factories, and the small operators of
tessera/_numeric_forms.py (trapezoid, cov, corrcoef, cross, tril/triu_indices, combinations,
unravel_index, the *_scatter ops, the *_copy views, gradient, frexp, pdist, renorm, dist) on cpu
and sim:0, against float64 references: the standard library, NumPy, closed forms and 80-digit
series values (tests/gen_special_functions.py); refusals; gradients by central differences."""
import itertools
import math

import numpy as np
import pytest

import tessera
from tessera import special
from tessera.signal import windows

INF, NAN = float("inf"), float("nan")


def t64(values, device, requires_grad=False):
    return tessera.tensor(values, dtype=tessera.float64, device=device,
                          requires_grad=requires_grad)


def close(got, want, rel=1e-13, abs_=1e-15):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rel, atol=abs_, equal_nan=True)


# ------------------------------------------------------------------ special functions
XS = [-6.5, -2.0, -0.75, 0.0, 0.3, 1.0, 2.5, 5.0]


def test_normal_family(device):
    t = t64(XS, device)
    close(special.ndtr(t).tolist(), [0.5 * math.erfc(-x / math.sqrt(2)) for x in XS], 1e-14)
    close(special.log_ndtr(t).tolist(),
          [math.log(0.5 * math.erfc(-x / math.sqrt(2))) for x in XS], 1e-13)
    ps = [1e-300, 1e-10, 0.02, 0.3, 0.5, 0.7, 0.999]
    x = special.ndtri(t64(ps, device)).tolist()
    close([0.5 * math.erfc(-v / math.sqrt(2)) for v in x], ps, 1e-13)
    close(special.erfcx(t).tolist(), [math.exp(x * x) * math.erfc(x) for x in XS], 1e-12)
    pos = [0.0, 0.25, 1.0, 3.5]
    close(special.entr(t64(pos, device)).tolist(),
          [0.0 if x == 0 else -x * math.log(x) for x in pos])
    assert special.entr(t64([-1.0], device)).tolist() == [-INF]
    assert special.ndtri(t64([0.0, 1.0, -0.5], device)).tolist()[:2] == [-INF, INF]


# python3 tests/gen_special_functions.py (80-digit power series) at 1, 4.75, 13.2, 40
BX = [1.0, 4.75, 13.2, 40.0]
BREF = {
    "bessel_j0": [0.76519768655796661, -0.25512082749137394, 0.21668592225856409,
                  0.0073668905842372897],
    "bessel_j1": [0.4400505857449335, -0.28918679864711039, -0.027066702764779099,
                  0.126038318037585],
    "bessel_y0": [0.088256964215676956, -0.2612325032349756, -0.035237877102292876,
                  0.12593641705826092],
    "bessel_y1": [-0.78121282130028868, 0.22922559673872217, -0.21817290664552919,
                  -0.005793505821549633],
    "modified_bessel_k0": [0.42102443824070834, 0.0048572045578879524, 6.3258359450609666e-07,
                           8.3928611000995672e-19],
    "modified_bessel_k1": [0.60190723019723458, 0.0053459218178228398, 6.5612212749546659e-07,
                           8.4971319548610387e-19],
}


@pytest.mark.parametrize("name", sorted(BREF))
def test_bessel(device, name):
    got = getattr(special, name)(t64(BX, device)).tolist()
    close(got, BREF[name], 1e-14, 1e-16)


def test_bessel_more(device):
    t = t64(BX, device)
    close(special.scaled_modified_bessel_k0(t).tolist(),
          [k * math.exp(x) for k, x in zip(BREF["modified_bessel_k0"], BX)], 1e-14)
    close(special.spherical_bessel_j0(t).tolist(), [math.sin(x) / x for x in BX], 1e-15)
    assert special.modified_bessel_i0(t64([1.0], device)).tolist() == pytest.approx(
        [1.2660658777520082], rel=1e-15)
    assert special.bessel_y0(t64([0.0, -1.0], device)).tolist()[0] == -INF
    assert math.isnan(special.bessel_y0(t64([-1.0], device)).item())
    y = special.bessel_j0(tessera.tensor([1, 2], device=device))
    assert y.dtype == tessera.float32


def test_igamma_zeta(device):
    a, x = [1.0, 3.0, 10.0], [0.5, 2.0, 12.0]

    def q(n, v):
        return math.exp(-v) * sum(v ** k / math.factorial(k) for k in range(int(n)))
    want_q = [q(n, v) for n, v in zip(a, x)]
    close(tessera.igammac(t64(a, device), t64(x, device)).tolist(), want_q, 1e-13)
    close(tessera.igamma(t64(a, device), t64(x, device)).tolist(), [1 - w for w in want_q], 1e-13)
    close(t64(a, device).igamma(t64(x, device)).tolist(), [1 - w for w in want_q], 1e-13)
    assert special.gammaincc is tessera.igammac
    z = special.zeta(t64([2.0, 4.0, 1.0], device), t64([1.0, 1.0, 1.0], device)).tolist()
    close(z, [math.pi ** 2 / 6, math.pi ** 4 / 90, INF], 1e-14)
    assert special.zeta(2.0, t64([0.5], device)).tolist() == pytest.approx([math.pi ** 2 / 2])


def test_mvlgamma(device):
    t = t64([2.5, 7.0], device)
    want = [sum(math.lgamma(v - i / 2) for i in range(3)) + 1.5 * math.log(math.pi) for v in
            [2.5, 7.0]]
    close(tessera.mvlgamma(t, 3).tolist(), want, 1e-14)
    close(t.mvlgamma(p=1).tolist(), [math.lgamma(2.5), math.lgamma(7.0)], 1e-14)
    with pytest.raises(tessera.TesseraError, match=r"greater than \(p-1\)/2"):
        tessera.mvlgamma(t, 6)


POLY = [
    ("chebyshev_polynomial_t", lambda x, n: math.cos(n * math.acos(x))),
    ("chebyshev_polynomial_u", lambda x, n: math.sin((n + 1) * math.acos(x)) / math.sin(math.acos(x))),
    ("chebyshev_polynomial_v",
     lambda x, n: math.cos((n + 0.5) * math.acos(x)) / math.cos(math.acos(x) / 2)),
    ("chebyshev_polynomial_w",
     lambda x, n: math.sin((n + 0.5) * math.acos(x)) / math.sin(math.acos(x) / 2)),
    ("shifted_chebyshev_polynomial_t", lambda x, n: math.cos(n * math.acos(2 * x - 1))),
    ("hermite_polynomial_h", lambda x, n: [1, 2 * x, 4 * x * x - 2, 8 * x ** 3 - 12 * x][n]),
    ("hermite_polynomial_he", lambda x, n: [1, x, x * x - 1, x ** 3 - 3 * x][n]),
    ("laguerre_polynomial_l",
     lambda x, n: [1, 1 - x, (x * x - 4 * x + 2) / 2, (-x ** 3 + 9 * x * x - 18 * x + 6) / 6][n]),
    ("legendre_polynomial_p", lambda x, n: [1, x, (3 * x * x - 1) / 2, (5 * x ** 3 - 3 * x) / 2][n]),
]


@pytest.mark.parametrize("name,ref", POLY, ids=[p[0] for p in POLY])
def test_polynomials(device, name, ref):
    xs = [0.1, 0.35, 0.6, 0.85]
    ns = [0, 1, 2, 3]
    got = getattr(special, name)(t64(xs, device), t64(ns, device)).tolist()
    close(got, [ref(x, n) for x, n in zip(xs, ns)], 1e-12, 1e-14)
    assert getattr(special, name)(t64([0.5], device), -1).tolist() == [0.0]


def test_refusals_and_grads(device):
    x = t64([0.5, 1.5], device, requires_grad=True)
    with pytest.raises(tessera.TesseraError, match="autograd is not implemented"):
        special.spherical_bessel_j0(x)
    with pytest.raises(tessera.TesseraError, match="autograd is not implemented"):
        special.legendre_polynomial_p(x, 2)
    with pytest.raises(tessera.TesseraError, match="autograd is not implemented"):
        special.zeta(x, 2.0)
    # central differences of the differentiable ones
    for f, pts in ((special.ndtr, [-1.0, 0.5]), (special.log_ndtr, [-3.0, 0.5]),
                   (special.erfcx, [-0.5, 2.0]), (special.entr, [0.5, 2.0]),
                   (special.ndtri, [0.2, 0.9]), (special.bessel_j1, [0.7, 3.0]),
                   (special.bessel_y1, [0.7, 3.0]), (special.modified_bessel_k1, [0.7, 3.0]),
                   (lambda v: special.zeta(3.0, v), [0.7, 3.0]),
                   (lambda v: tessera.igamma(2.5, v), [0.7, 3.0])):
        t = t64(pts, device, requires_grad=True)
        f(t).sum().backward()
        h = 1e-6
        num = [(f(t64([p + h], device)).item() - f(t64([p - h], device)).item()) / (2 * h)
               for p in pts]
        close(t.grad.tolist(), num, 1e-6, 1e-8)


# ------------------------------------------------------------------ windows
WINDOWS = [
    ("hann", {}, lambda M: np.hanning(M)),
    ("hamming", {}, lambda M: np.hamming(M)),
    ("blackman", {}, lambda M: np.blackman(M)),
    ("bartlett", {}, lambda M: np.bartlett(M)),
    ("kaiser", {"beta": 5.0}, lambda M: np.kaiser(M, 5.0)),
    ("cosine", {}, lambda M: np.sin(np.pi * (np.arange(M) + 0.5) / M)),
    ("gaussian", {"std": 1.5}, lambda M: np.exp(-0.5 * ((np.arange(M) - (M - 1) / 2) / 1.5) ** 2)),
    ("exponential", {"tau": 2.0}, lambda M: np.exp(-np.abs(np.arange(M) - (M - 1) / 2) / 2.0)),
    ("nuttall", {}, lambda M: sum((-1) ** i * a * np.cos(2 * np.pi * i * np.arange(M) / (M - 1))
                                  for i, a in enumerate([0.3635819, 0.4891775, 0.1365995,
                                                         0.0106411]))),
]


@pytest.mark.parametrize("name,kw,ref", WINDOWS, ids=[w[0] for w in WINDOWS])
def test_windows(device, name, kw, ref):
    f = getattr(windows, name)
    for M in (2, 7, 10):
        w = f(M, dtype=tessera.float64, device=device, **kw)
        close(w.tolist(), ref(M), 1e-13, 1e-15)
        if name != "exponential":  # periodic: the symmetric window of M + 1 without its last
            close(f(M, sym=False, dtype=tessera.float64, **kw).tolist(), ref(M + 1)[:-1], 1e-13,
                  1e-15)
    assert f(0, **kw).shape == (0,) and f(1, **kw).tolist() == [1.0]
    assert f(4, **kw).dtype == tessera.float32
    with pytest.raises(ValueError):
        f(-1, **kw)


def test_window_factories():
    close(tessera.hann_window(8, dtype=tessera.float64).tolist(), np.hanning(9)[:-1], 1e-13,
          1e-15)
    close(tessera.hamming_window(5, periodic=False, dtype=tessera.float64).tolist(),
          np.hamming(5), 1e-13, 1e-15)
    close(tessera.kaiser_window(6, False, 3.0, dtype=tessera.float64).tolist(), np.kaiser(6, 3.0),
          1e-13)
    close(tessera.bartlett_window(5, dtype=tessera.float64).tolist(), np.bartlett(6)[:-1], 1e-13)
    close(tessera.blackman_window(5, dtype=tessera.float64).tolist(), np.blackman(6)[:-1], 1e-13,
          1e-15)


# ------------------------------------------------------------------ small operators
RNG = np.random.default_rng(5)
A = RNG.standard_normal((3, 5))
B = RNG.standard_normal((4, 3))


def test_trapezoid(device):
    y = t64(A.tolist(), device)
    close(tessera.trapezoid(y).tolist(), np.trapz(A, axis=-1), 1e-14)
    close(tessera.trapezoid(y, dx=0.5, dim=0).tolist(), np.trapz(A, dx=0.5, axis=0), 1e-14)
    xs = np.cumsum(RNG.uniform(0.1, 1, 5))
    close(tessera.trapezoid(y, t64(xs.tolist(), device)).tolist(), np.trapz(A, xs, axis=-1), 1e-14)
    close(tessera.trapz(y, t64(xs.tolist(), device)).tolist(), np.trapz(A, xs, axis=-1), 1e-14)
    cum = [[np.trapz(r[:k + 1], xs[:k + 1]) for k in range(1, 5)] for r in A]
    close(tessera.cumulative_trapezoid(y, t64(xs.tolist(), device)).tolist(), cum, 1e-13)


def test_cov_corrcoef(device):
    x = t64(A.tolist(), device)
    close(tessera.cov(x).tolist(), np.cov(A), 1e-13)
    close(tessera.cov(x, correction=0).tolist(), np.cov(A, bias=True), 1e-13)
    fw = [1, 2, 1, 3, 1]
    aw = [0.5, 1.0, 2.0, 1.0, 0.25]
    got = tessera.cov(x, fweights=tessera.tensor(fw, device=device),
                      aweights=t64(aw, device)).tolist()
    close(got, np.cov(A, fweights=fw, aweights=aw), 1e-13)
    close(tessera.corrcoef(x).tolist(), np.corrcoef(A), 1e-13)


def test_cross_dist_pdist_renorm(device):
    a, b = t64(B.tolist(), device), t64(B[::-1].tolist(), device)
    close(tessera.cross(a, b, dim=1).tolist(), np.cross(B, B[::-1]), 1e-14)
    close(tessera.cross(a, b).tolist(), np.cross(B, B[::-1]), 1e-14)
    assert tessera.dist(a, b).item() == pytest.approx(np.linalg.norm(B - B[::-1]), rel=1e-14)
    assert tessera.dist(a, b, 1).item() == pytest.approx(np.abs(B - B[::-1]).sum(), rel=1e-14)
    want = [np.linalg.norm(B[i] - B[j]) for i, j in itertools.combinations(range(4), 2)]
    close(tessera.nn.functional.pdist(a).tolist(), want, 1e-14)
    norms = np.linalg.norm(B, axis=1, keepdims=True)
    want = np.where(norms > 1.0, B * (1.0 / (norms + 1e-7)), B)
    close(tessera.renorm(a, 2, 0, 1.0).tolist(), want, 1e-14)


def test_index_tables(device):
    for r, c, k in ((4, 4, 0), (3, 5, 1), (5, 3, -1), (0, 3, 0)):
        got = tessera.tril_indices(r, c, k, device=device).tolist()
        want = np.stack(np.tril_indices(r, k, c)).tolist() if r else [[], []]
        assert got == want
        got = tessera.triu_indices(r, c, k).tolist()
        want = np.stack(np.triu_indices(r, k, c)).tolist() if r else [[], []]
        assert got == want
    v = tessera.tensor([5, 6, 7, 8], device=device)
    assert tessera.combinations(v).tolist() == [list(c) for c in itertools.combinations(
        [5, 6, 7, 8], 2)]
    assert tessera.combinations(v, 3, with_replacement=True).tolist() == [
        list(c) for c in itertools.combinations_with_replacement([5, 6, 7, 8], 3)]
    idx = [0, 5, 17, 23]
    got = tessera.unravel_index(tessera.tensor(idx, device=device), (2, 3, 4))
    assert [g.tolist() for g in got] == [list(a) for a in np.unravel_index(idx, (2, 3, 4))]
    with pytest.raises(RuntimeError):
        tessera.unravel_index(tessera.tensor([24]), (2, 3, 4))


def test_scatters(device):
    base = RNG.standard_normal((4, 5))
    x = t64(base.tolist(), device, requires_grad=True)
    src = t64([1.0, 2.0, 3.0, 4.0], device, requires_grad=True)
    y = tessera.diagonal_scatter(x, src)
    want = base.copy()
    np.fill_diagonal(want, [1, 2, 3, 4])
    close(y.tolist(), want)
    (y * t64(np.arange(20.0).reshape(4, 5).tolist(), device)).sum().backward()
    gw = np.arange(20.0).reshape(4, 5)
    mask = np.eye(4, 5, dtype=bool)
    close(x.grad.tolist(), np.where(mask, 0, gw))
    close(src.grad.tolist(), gw[mask])
    want = base.copy()
    want[1:, :][np.eye(3, 5, dtype=bool)] = [7, 8, 9]
    close(tessera.diagonal_scatter(t64(base.tolist(), device), t64([7.0, 8, 9], device), -1)
          .tolist(), want)
    want = base.copy()
    want[:, 2] = 9
    close(tessera.select_scatter(t64(base.tolist(), device), t64([9.0] * 4, device), 1, 2)
          .tolist(), want)
    want = base.copy()
    want[:, 1:5:2] = -1
    close(tessera.slice_scatter(t64(base.tolist(), device), t64(np.full((4, 2), -1.0).tolist(),
                                                                 device), 1, 1, 5, 2).tolist(),
          want)


def test_copies(device):
    x = t64(np.arange(24.0).reshape(2, 3, 4).tolist(), device)
    a = np.arange(24.0).reshape(2, 3, 4)
    cases = [
        (tessera.permute_copy(x, (2, 0, 1)), a.transpose(2, 0, 1)),
        (tessera.transpose_copy(x, 0, 2), a.transpose(2, 1, 0)),
        (tessera.diagonal_copy(x, 0, 1, 2), np.diagonal(a, 0, 1, 2)),
        (tessera.unsqueeze_copy(x, 1), a[:, None]),
        (tessera.squeeze_copy(tessera.unsqueeze_copy(x, 0)), a),
        (tessera.narrow_copy(x, 2, 1, 2), a[:, :, 1:3]),
        (tessera.view_copy(x, (6, 4)), a.reshape(6, 4)),
        (tessera.expand_copy(t64([1.0, 2.0], device), (3, 2)), np.tile([1.0, 2.0], (3, 1))),
        (tessera.t_copy(t64(a[0].tolist(), device)), a[0].T),
        (tessera.alias_copy(x), a),
    ]
    for got, want in cases:
        assert got.is_contiguous()
        close(got.tolist(), want)
    alias = tessera.alias_copy(x)
    alias.add_(1)  # a copy, not a view
    close(x.tolist(), a)
    parts = tessera.split_with_sizes_copy(x, [1, 3], 2)
    close(parts[1].tolist(), a[:, :, 1:])
    assert [p.tolist() for p in tessera.unbind_copy(x, 1)] == [a[:, i].tolist() for i in range(3)]
    assert len(tessera.unsafe_chunk(x, 2, 2)) == 2 and len(tessera.unsafe_split(x, 1)) == 2


def test_gradient_frexp(device):
    f = RNG.standard_normal((4, 6))
    g = tessera.gradient(t64(f.tolist(), device))
    for got, want in zip(g, np.gradient(f)):
        close(got.tolist(), want, 1e-13)
    g = tessera.gradient(t64(f.tolist(), device), spacing=2.0, dim=1, edge_order=2)
    close(g[0].tolist(), np.gradient(f, 2.0, axis=1, edge_order=2), 1e-13)
    xs = np.cumsum(RNG.uniform(0.2, 1, 6))
    g = tessera.gradient(t64(f.tolist(), device), spacing=[t64(xs.tolist(), device)], dim=1)
    close(g[0].tolist(), np.gradient(f, xs, axis=1), 1e-12)
    v = [8.0, 0.3, 0.0, -5.0, 1e-310, 3.0e300, INF]
    m, e = tessera.frexp(t64(v, device))
    nm, ne = np.frexp(np.array(v))
    close(m.tolist(), nm, 0, 0)
    assert e.tolist() == ne.tolist() and e.dtype == tessera.int32
    assert tessera.real(m) is m and tessera.conj(m) is m
    s = tessera.scalar_tensor(3)
    assert s.dtype == tessera.float32 and s.shape == () and s.item() == 3


def test_histogram(device):
    v = RNG.standard_normal(50)
    w = RNG.uniform(0, 2, 50)
    h, e = tessera.histogram(t64(v.tolist(), device), 7)
    nh, ne = np.histogram(v, 7)
    close(h.tolist(), nh, 0, 0)
    close(e.tolist(), ne, 1e-14, 1e-15)
    edges = [-3.0, -1.0, 0.0, 0.5, 3.0]
    h, _ = tessera.histogram(t64(v.tolist(), device), t64(edges, device),
                             weight=t64(w.tolist(), device), density=True)
    close(h.tolist(), np.histogram(v, edges, weights=w, density=True)[0], 1e-13)
    h, e = tessera.histogram(t64([2.0, 2.0], device), 2)
    assert h.tolist() == [0.0, 2.0] and e.tolist() == [1.5, 2.0, 2.5]
    with pytest.raises(RuntimeError):
        tessera.histogram(tessera.tensor([1, 2]), 2)


def test_sum_to_size_rmod(device):
    a = np.arange(24.0).reshape(2, 3, 4)
    x = t64(a.tolist(), device, requires_grad=True)
    close(x.sum_to_size(3, 1).tolist(), a.sum(axis=(0, 2)).reshape(3, 1))
    close(x.sum_to_size((1, 4)).tolist(), a.sum(axis=(0, 1)).reshape(1, 4))
    x.sum_to_size(3, 4).sum().backward()
    close(x.grad.tolist(), np.ones((2, 3, 4)))
    with pytest.raises(RuntimeError, match="not expandable"):
        x.sum_to_size(5)
    t = t64([1.5, -2.0, 4.0], device)
    close(t.__rmod__(5).tolist(), np.mod(5, [1.5, -2.0, 4.0]))
    close((7 % t).tolist(), np.mod(7, [1.5, -2.0, 4.0]))
