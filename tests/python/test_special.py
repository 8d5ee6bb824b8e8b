"""test_special.py — issue 52's special elementwise functions from Python: tessera.* functions,
Tensor methods and tessera.special's aliases on cpu and sim:0, against the standard library's
float64 functions and known values; PyTorch's edge values (poles, infinities, NaN); result dtypes
and refusals; gradients through autograd.gradcheck-like central differences; `%`."""
import math

import pytest

import tessera
from tessera import special

INF, NAN = float("inf"), float("nan")


def t64(values, device, requires_grad=False):
    return tessera.tensor(values, dtype=tessera.float64, device=device,
                          requires_grad=requires_grad)


def same(a, b):
    if isinstance(b, float) and math.isnan(b):
        return isinstance(a, float) and math.isnan(a)
    return a == b or a == pytest.approx(b, rel=1e-13, abs=1e-300)


XS = [-2.75, -0.5, 0.25, 0.5, 1.0, 1.5, 3.0, 7.25]
POS = [0.125, 0.5, 1.0, 2.0, 9.5]
UNARY_REFS = [
    ("lgamma", XS, math.lgamma),
    ("expm1", XS, math.expm1),
    ("exp2", XS, lambda x: 2.0 ** x),
    ("log2", POS, math.log2),
    ("log10", POS, math.log10),
    ("erfc", XS, math.erfc),
    ("trunc", XS, math.trunc),
    ("fix", XS, math.trunc),
    ("frac", XS, lambda x: x - math.trunc(x)),
    ("deg2rad", XS, math.radians),
    ("rad2deg", XS, math.degrees),
    ("sinc", XS, lambda x: 1.0 if x == 0 else math.sin(math.pi * x) / (math.pi * x)),
    ("sgn", XS, lambda x: float((x > 0) - (x < 0))),
]


@pytest.mark.parametrize("name,xs,ref", UNARY_REFS, ids=[u[0] for u in UNARY_REFS])
def test_unary_against_math(device, name, xs, ref):
    t = t64(xs, device)
    for y in (getattr(tessera, name)(t), getattr(t, name)()):
        assert y.dtype == tessera.float64
        got = y.tolist()
        for x, g in zip(xs, got):
            assert g == pytest.approx(ref(x), rel=1e-14, abs=1e-15), (name, x)


def test_known_values(device):
    euler = 0.57721566490153286061
    t = t64([1.0, 0.5], device)
    assert tessera.digamma(t).tolist() == pytest.approx([-euler, -euler - 2 * math.log(2)],
                                                          rel=1e-15)
    assert special.psi(t).tolist() == tessera.digamma(t).tolist()
    assert tessera.polygamma(1, t).tolist() == pytest.approx(
        [math.pi ** 2 / 6, math.pi ** 2 / 2], rel=1e-15)
    assert t.polygamma(2).tolist()[0] == pytest.approx(-2 * 1.2020569031595942854, rel=1e-15)
    assert tessera.erfinv(t64([0.5, -0.9], device)).tolist() == pytest.approx(
        [0.47693627620446987338, -1.1630871536766740867], rel=1e-15)
    # Abramowitz and Stegun table 9.8: I0(1), e^-1 I1(1)... and I1(2)
    assert tessera.i0(t64([1.0, 2.0], device)).tolist() == pytest.approx(
        [1.2660658777520082, 2.2795853023360673], rel=1e-15)
    assert special.i1(t64([2.0], device)).tolist() == pytest.approx([1.5906368546373291],
                                                                     rel=1e-15)
    assert special.i0e(t64([2.0], device)).tolist() == pytest.approx(
        [2.2795853023360673 * math.exp(-2)], rel=1e-15)
    assert special.i1e(t64([-2.0], device)).tolist() == pytest.approx(
        [-1.5906368546373291 * math.exp(-2)], rel=1e-15)
    assert special.gammaln is tessera.lgamma and special.expit is tessera.sigmoid


def test_edges(device):
    t = t64([0.0, -0.0, -1.0, INF, -INF, NAN], device)
    want = {
        "lgamma": [INF, INF, INF, INF, INF, NAN],
        "digamma": [-INF, INF, NAN, INF, NAN, NAN],
        "sinc": [1.0, 1.0, 3.8981718325193755e-17, NAN, NAN, NAN],
        "frac": [0.0, 0.0, 0.0, NAN, NAN, NAN],
    }
    for name, w in want.items():
        got = getattr(tessera, name)(t).tolist()
        assert all(same(g, e) for g, e in zip(got, w)), (name, got)
    assert [math.copysign(1, v) for v in tessera.trunc(t).tolist()[:2]] == [1, -1]
    assert tessera.erfinv(t64([1, -1, 1.5], device)).tolist()[:2] == [INF, -INF]
    assert math.isnan(tessera.erfinv(t64([1.5], device)).item())
    assert tessera.signbit(t64([0.0, -0.0, -2, 3], device)).tolist() == [False, True, True, False]


def test_logit_and_nan_to_num(device):
    x = tessera.tensor([0.0, 1.0, 0.5, -1.0, 2.0, NAN], device=device)
    got = tessera.logit(x).tolist()
    assert got[:3] == [-INF, INF, 0.0] and all(math.isnan(v) for v in got[3:])
    got = x.logit(eps=0.1).tolist()
    lo = math.log(0.1 / 0.9)
    assert got[:5] == pytest.approx([lo, -lo, 0.0, lo, -lo], rel=1e-6)
    assert special.logit is tessera.logit
    v = tessera.tensor([NAN, INF, -INF, 1.0], device=device)
    assert tessera.nan_to_num(v).tolist() == [0.0, 3.4028234663852886e38,
                                              -3.4028234663852886e38, 1.0]
    assert v.nan_to_num(nan=1.0, posinf=2.0, neginf=-3.0).tolist() == [1.0, 2.0, -3.0, 1.0]
    h = v.to(tessera.float16)
    assert tessera.nan_to_num(h).tolist() == [0.0, 65504.0, -65504.0, 1.0]
    i = tessera.tensor([1, -2], device=device)
    assert tessera.nan_to_num(i).dtype == tessera.int64


BINARY_REFS = [
    ("xlogy", [0.0, 2.0, -1.5], [3.0, 0.5, 4.0], lambda a, b: 0.0 if a == 0 else a * math.log(b)),
    ("hypot", [3.0, -5.0, 0.5], [4.0, 12.0, -0.25], math.hypot),
    ("copysign", [3.0, -5.0, 0.5], [-1.0, 2.0, -0.0], math.copysign),
    ("atan2", [3.0, -5.0, 0.5], [4.0, -12.0, -0.25], math.atan2),
    ("logaddexp", [3.0, -5.0, 0.5], [4.0, -12.0, -0.25],
     lambda a, b: max(a, b) + math.log1p(math.exp(-abs(a - b)))),
    ("logaddexp2", [3.0, -5.0, 0.5], [4.0, -12.0, -0.25],
     lambda a, b: max(a, b) + math.log1p(2.0 ** -abs(a - b)) / math.log(2)),
    ("remainder", [7.5, -7.5, 5.0], [2.0, 2.0, -3.0], lambda a, b: a % b),
    ("ldexp", [1.5, -3.0, 0.75], [3.0, -2.0, 0.0], lambda a, b: a * 2.0 ** b),
    ("float_power", [1.5, 3.0, 0.75], [3.0, -2.0, 0.5], lambda a, b: a ** b),
    ("nextafter", [1.0, -1.0, 0.0], [2.0, -2.0, -1.0], math.nextafter),
]


@pytest.mark.parametrize("name,a,b,ref", BINARY_REFS, ids=[u[0] for u in BINARY_REFS])
def test_binary_against_math(device, name, a, b, ref):
    ta, tb = t64(a, device), t64(b, device)
    for y in (getattr(tessera, name)(ta, tb), getattr(ta, name)(tb)):
        assert y.dtype == tessera.float64
        for x1, x2, g in zip(a, b, y.tolist()):
            assert g == pytest.approx(ref(x1, x2), rel=1e-15, abs=1e-300), (name, x1, x2)


def test_binary_numbers_and_dtypes(device):
    t = tessera.tensor([1.0, 2.0, 4.0], device=device)
    assert tessera.xlogy(t, 2).tolist() == pytest.approx([math.log(2), 2 * math.log(2),
                                                          4 * math.log(2)], rel=1e-6)
    assert tessera.xlogy(2, t).tolist() == pytest.approx([0, 2 * math.log(2), 2 * math.log(4)],
                                                         rel=1e-6)
    assert special.xlog1py(t, t).tolist() == pytest.approx([math.log(2), 2 * math.log(3),
                                                            4 * math.log(5)], rel=1e-6)
    assert (t % 3).tolist() == [1.0, 2.0, 1.0]
    assert (-t % 3).tolist() == [2.0, 1.0, 2.0]
    assert (5 % t).tolist() == [0.0, 1.0, 1.0]
    i = tessera.tensor([1, 2, -3], device=device)
    assert tessera.atan2(i, i).dtype == tessera.float32
    assert tessera.copysign(i, i).dtype == tessera.float32
    assert tessera.float_power(i, 2).dtype == tessera.float64
    assert tessera.ldexp(i, i).tolist() == [2.0, 8.0, -0.375]
    assert tessera.lgamma(i).dtype == tessera.float32
    assert tessera.trunc(i).dtype == tessera.int64
    for name in ("hypot", "logaddexp", "logaddexp2", "nextafter"):
        with pytest.raises(Exception, match="not implemented for 'Long'"):
            getattr(tessera, name)(i, i)
    with pytest.raises(Exception, match="frac: not implemented for 'Long'"):
        tessera.frac(i)
    with pytest.raises(Exception, match="does not support negative n"):
        tessera.polygamma(-1, t)


def numeric_grad(f, xs, h=1e-6):
    out = []
    for k in range(len(xs)):
        p, m = list(xs), list(xs)
        p[k] += h
        m[k] -= h
        out.append((f(p) - f(m)) / (2 * h))
    return out


UNARY_GRADS = [
    ("lgamma", [0.7, 1.3, 2.5]), ("digamma", [0.7, 1.3, 2.5]), ("erfinv", [-0.6, 0.1, 0.8]),
    ("i0", [-1.2, 0.4, 2.0]), ("sinc", [-1.2, 0.4, 2.0]), ("expm1", [-1.2, 0.4, 2.0]),
    ("exp2", [-1.2, 0.4, 2.0]), ("log2", [0.3, 1.4, 2.0]), ("log10", [0.3, 1.4, 2.0]),
    ("erfc", [-1.2, 0.4, 2.0]), ("frac", [-1.2, 0.4, 2.3]), ("deg2rad", [-1.2, 0.4, 2.0]),
    ("rad2deg", [-1.2, 0.4, 2.0]), ("logit", [0.2, 0.5, 0.7]),
]


@pytest.mark.parametrize("name,xs", UNARY_GRADS, ids=[u[0] for u in UNARY_GRADS])
def test_unary_grads(device, name, xs):
    fn = getattr(tessera, name)
    x = t64(xs, device, requires_grad=True)
    fn(x).sum().backward()
    want = numeric_grad(lambda v: fn(t64(v, device)).sum().item(), xs)
    assert x.grad.tolist() == pytest.approx(want, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("name", ["xlogy", "hypot", "atan2", "logaddexp", "logaddexp2",
                                  "remainder", "ldexp", "float_power"])
def test_binary_grads(device, name):
    fn = getattr(tessera, name)
    a0, b0 = [0.7, 1.3, 2.5], [1.9, 0.6, 2.2]
    a, b = t64(a0, device, True), t64(b0, device, True)
    fn(a, b).sum().backward()
    wa = numeric_grad(lambda v: fn(t64(v, device), t64(b0, device)).sum().item(), a0)
    wb = numeric_grad(lambda v: fn(t64(a0, device), t64(v, device)).sum().item(), b0)
    assert a.grad.tolist() == pytest.approx(wa, rel=1e-6, abs=1e-8)
    assert b.grad.tolist() == pytest.approx(wb, rel=1e-6, abs=1e-8)


def test_polygamma_grad_chain(device):
    x = t64([0.8, 2.5], device, requires_grad=True)
    tessera.polygamma(2, x).sum().backward()
    assert x.grad.tolist() == pytest.approx(tessera.polygamma(3, t64([0.8, 2.5], device)).tolist(),
                                            rel=1e-14)
