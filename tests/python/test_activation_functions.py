"""Issue 52's activations (tessera.nn.functional elu, celu, selu, hardtanh, relu6, threshold,
hardshrink, softshrink, tanhshrink, softsign, logsigmoid, mish, hardsigmoid, hardswish, leaky_relu,
glu, prelu, softmin, the in-place forms, and the nn modules) against NumPy float64 formulas, on cpu and sim:0:
values (NaN and the kink points included), gradients against central differences in float64 and
PyTorch's choice at the kinks, float32 within its rounding, modules' arguments and reprs, errors."""
import math

import numpy as np
import pytest

import tessera as torch
import tessera.nn as nn
import tessera.nn.functional as F

SA, SS = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def t(a, device="cpu", grad=False, dtype=np.float64):
    x = torch.from_numpy(np.ascontiguousarray(a, dtype=dtype)).clone().to(device)
    if grad:
        x.requires_grad_(True)
    return x


def host(x):
    return x.detach().to("cpu").double().numpy()


def sig(x):
    return 1 / (1 + np.exp(-x))


def lt(a, b):  # comparisons that are False for NaN without a warning
    with np.errstate(invalid="ignore"):
        return a < b


# name: (functional call, value formula, derivative formula with PyTorch's kink convention)
CASES = {
    "elu": (lambda x: F.elu(x, 1.5),
            lambda x: np.where(x > 0, x, 1.5 * np.expm1(x)),
            lambda x: np.where(x <= 0, 1.5 * np.exp(x), 1.0)),
    "celu": (lambda x: F.celu(x, 0.5),
             lambda x: np.where(x > 0, x, 0.5 * np.expm1(x / 0.5)),
             lambda x: np.where(x <= 0, np.exp(x / 0.5), 1.0)),
    "selu": (F.selu,
             lambda x: SS * np.where(x > 0, x, SA * np.expm1(x)),
             lambda x: np.where(x <= 0, SS * SA * np.exp(x), SS)),
    "hardtanh": (lambda x: F.hardtanh(x, -1.5, 2.0),
                 lambda x: np.clip(x, -1.5, 2.0),
                 lambda x: np.where((x <= -1.5) | (x >= 2.0), 0.0, 1.0)),
    "relu6": (F.relu6,
              lambda x: np.clip(x, 0, 6),
              lambda x: np.where((x <= 0) | (x >= 6), 0.0, 1.0)),
    "threshold": (lambda x: F.threshold(x, 1.0, 5.0),
                  lambda x: np.where(x <= 1.0, 5.0, x),
                  lambda x: np.where(x <= 1.0, 0.0, 1.0)),
    "hardshrink": (lambda x: F.hardshrink(x, 0.75),
                   lambda x: np.where(np.abs(x) <= 0.75, 0.0, x),
                   lambda x: np.where((x >= -0.75) & (x <= 0.75), 0.0, 1.0)),
    "softshrink": (lambda x: F.softshrink(x, 0.75),
                   lambda x: np.where(x > 0.75, x - 0.75, np.where(x < -0.75, x + 0.75, x * 0)),
                   lambda x: np.where((x >= -0.75) & (x <= 0.75), 0.0, 1.0)),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x), lambda x: np.tanh(x) ** 2),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x)), lambda x: 1 / (1 + np.abs(x)) ** 2),
    "logsigmoid": (F.logsigmoid, lambda x: -np.logaddexp(0, -x), lambda x: sig(-x)),
    "mish": (F.mish, lambda x: x * np.tanh(np.logaddexp(0, x)),
             lambda x: np.tanh(np.logaddexp(0, x))
             + x * sig(x) * (1 - np.tanh(np.logaddexp(0, x)) ** 2)),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x + 3, 0, 6) / 6,
                    lambda x: np.where(lt(-3, x) & lt(x, 3), 1 / 6, 0.0)),
    "hardswish": (F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6,
                  lambda x: np.where(x <= -3, 0.0, np.where(lt(x, 3), x / 3 + 0.5, 1.0))),
    # leaky_relu_backward: x > 0 ? g : g * slope (the slope at 0 and at NaN, as PyTorch)
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2),
                   lambda x: np.where(x > 0, x, 0.2 * x),
                   lambda x: np.where(x > 0, 1.0, 0.2)),
}
KINKS = {"elu": [0.0], "celu": [0.0], "selu": [0.0], "hardtanh": [-1.5, 2.0], "relu6": [0.0, 6.0],
         "threshold": [1.0], "hardshrink": [-0.75, 0.75], "softshrink": [-0.75, 0.75],
         "hardsigmoid": [-3.0, 3.0], "hardswish": [-3.0, 3.0], "leaky_relu": [0.0]}
# where PyTorch's backward passes the gradient at NaN (its comparisons are false there)
NAN_GRAD = {"elu": 1.0, "celu": 1.0, "selu": SS, "hardtanh": 1.0, "relu6": 1.0, "threshold": 1.0,
            "hardshrink": 1.0, "softshrink": 1.0, "hardsigmoid": 0.0, "hardswish": 1.0,
            "leaky_relu": 0.2}


def points(name):
    return np.concatenate([np.linspace(-7.3, 7.9, 97), KINKS.get(name, []), [0.0, -0.0, 40, -40]])


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_f64_and_f32(name, device):
    f, ref, _ = CASES[name]
    x = points(name)
    with np.errstate(over="ignore"):
        want = ref(x)
    np.testing.assert_allclose(host(f(t(x, device))), want, rtol=4e-15, atol=4e-15)
    x32 = x.astype(np.float32).astype(np.float64)  # the float32 input, exactly
    y32 = f(t(x32, device, dtype=np.float32))
    assert y32.dtype == torch.float32
    with np.errstate(over="ignore"):
        want32 = ref(x32)
    # computed in float: a few roundings of the result's size (composites: one per op)
    np.testing.assert_allclose(host(y32), want32, rtol=8 * 2.0**-24, atol=8 * 2.0**-24)


@pytest.mark.parametrize("name", sorted(CASES))
def test_nan_and_inf(name, device):
    f, _, _ = CASES[name]
    y = host(f(t([math.nan], device)))
    assert math.isnan(y[0])
    if name in NAN_GRAD:
        x = t([math.nan, 0.5], device, grad=True)
        f(x).sum().backward()
        assert host(x.grad)[0] == NAN_GRAD[name]
    yi = host(f(t([math.inf, -math.inf], device)))
    with np.errstate(invalid="ignore", over="ignore"):
        want = CASES[name][1](np.array([math.inf, -math.inf]))
    np.testing.assert_array_equal(yi, want)  # NaN where the formula gives NaN (mish(-inf)...)


def numgrad(fn, x, h=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        xp, xm = x.copy(), x.copy()
        xp[i] += h
        xm[i] -= h
        g[i] = (fn(xp) - fn(xm)) / (2 * h)
    return g


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients(name, device):
    f, ref, dref = CASES[name]
    x = np.linspace(-4.3, 4.1, 23) + 0.0137  # away from every kink by more than h
    xt = t(x, device, grad=True)
    y = f(xt)
    w = np.cos(np.arange(x.size) * 0.7)
    (y * t(w, device)).sum().backward()
    g = host(xt.grad)
    np.testing.assert_allclose(g, numgrad(lambda v: float((ref(v) * w).sum()), x), rtol=1e-7,
                               atol=1e-8)
    np.testing.assert_allclose(g, w * dref(x), rtol=1e-13, atol=1e-14)
    # exactly PyTorch's side at each kink
    k = np.array(KINKS.get(name, [0.0]))
    kt = t(k, device, grad=True)
    f(kt).sum().backward()
    np.testing.assert_allclose(host(kt.grad), dref(k), rtol=1e-15, atol=0)


def test_kink_gradients_by_hand(device):
    """PyTorch 2's values at the kinks, written out"""
    def grad(fn, v):
        x = t(v, device, grad=True)
        fn(x).sum().backward()
        return host(x.grad).tolist()

    assert grad(lambda x: F.hardtanh(x), [-1.0, 1.0, 0.0]) == [0.0, 0.0, 1.0]
    assert grad(F.relu6, [0.0, 6.0, 3.0]) == [0.0, 0.0, 1.0]
    assert grad(lambda x: F.threshold(x, 1.0, 5.0), [1.0, 1.5]) == [0.0, 1.0]
    assert grad(lambda x: F.elu(x, 2.0), [0.0]) == [2.0]
    assert grad(lambda x: F.celu(x, 2.0), [0.0]) == [1.0]
    assert grad(F.selu, [0.0]) == pytest.approx([SA * SS], rel=1e-15)
    assert grad(F.hardswish, [-3.0, 3.0, 0.0]) == [0.0, 1.0, 0.5]
    assert grad(F.hardsigmoid, [-3.0, 3.0, 0.0]) == pytest.approx([0.0, 0.0, 1 / 6], rel=1e-15)
    assert grad(F.mish, [0.0]) == pytest.approx([0.6], rel=1e-15)
    assert grad(F.logsigmoid, [0.0]) == [0.5]


def test_threshold_strict_and_values(device):
    x = t([0.9999999999, 1.0, 1.0000000001], device)
    assert host(F.threshold(x, 1.0, -7.0)).tolist() == [-7.0, -7.0, 1.0000000001]
    assert host(F.softshrink(t([-0.0, 0.75, -0.75, 1.0], device), 0.75)).tolist() == [0, 0, 0, 0.25]


INPLACE = {"elu": lambda x: F.elu(x, 1.5, inplace=True),
           "elu_": lambda x: F.elu_(x, 1.5),
           "celu": lambda x: F.celu(x, 0.5, inplace=True),
           "selu": lambda x: F.selu(x, inplace=True),
           "hardtanh": lambda x: F.hardtanh(x, -1.5, 2.0, inplace=True),
           "hardtanh_": lambda x: F.hardtanh_(x, -1.5, 2.0),
           "relu6": lambda x: F.relu6(x, inplace=True),
           "threshold": lambda x: F.threshold(x, 1.0, 5.0, inplace=True),
           "threshold_": lambda x: F.threshold_(x, 1.0, 5.0),
           "mish": lambda x: F.mish(x, inplace=True),
           "hardsigmoid": lambda x: F.hardsigmoid(x, inplace=True),
           "hardswish": lambda x: F.hardswish(x, inplace=True)}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace(name, device):
    f, ref, dref = CASES[name.rstrip("_")]
    x = points(name.rstrip("_"))[::3]
    a = t(x, device)
    r = INPLACE[name](a)
    assert r is a  # the same Tensor, written
    np.testing.assert_allclose(host(a), ref(x), rtol=4e-15, atol=4e-15)
    leaf = t(x, device, grad=True)
    mid = leaf * 1.0
    out = INPLACE[name](mid)
    assert out is mid
    out.sum().backward()
    np.testing.assert_allclose(host(leaf.grad), dref(x), rtol=1e-13, atol=1e-14)
    with pytest.raises(RuntimeError):
        INPLACE[name](t(x, device, grad=True))  # a leaf that requires grad


def test_integer_forms(device):
    xi = torch.tensor([-3, 0, 2, 7], device=device)
    assert F.hardtanh(xi, -1.5, 1.5).tolist() == [-1, 0, 1, 1]
    assert F.relu6(torch.tensor([253, 0, 2, 7], dtype=torch.uint8, device=device)).tolist() == \
        [6, 0, 2, 6]
    assert F.threshold(xi, 2.5, 20.5).tolist() == [20, 20, 20, 7]
    assert F.threshold(torch.tensor([2**62 + 1, 2**62], device=device), float(2**62),
                       5.0).tolist() == [2**62 + 1, 5]
    assert F.softsign(xi).dtype == torch.float32 and F.tanhshrink(xi).dtype == torch.float32
    with pytest.raises(torch.DtypeError, match="not implemented for 'Long'"):
        F.elu(xi)
    with pytest.raises(torch.ArgumentError, match="without overflow"):
        F.threshold(torch.ones(2, dtype=torch.uint8, device=device), 1, 300)


def test_glu(device):
    a = np.sin(np.arange(24) * 0.9).reshape(2, 6, 2) * 3
    for dim in (1, -2, 2):
        x = t(a, device, grad=True)
        y = F.glu(x, dim)
        p, q = np.split(a, 2, axis=dim)
        np.testing.assert_allclose(host(y), p * sig(q), rtol=1e-15, atol=1e-15)
        w = np.cos(np.arange(y.numel()) * 0.3).reshape(y.shape)
        (y * t(w, device)).sum().backward()
        num = numgrad(lambda v: float((np.split(v.reshape(a.shape), 2, axis=dim)[0]
                                       * sig(np.split(v.reshape(a.shape), 2, axis=dim)[1])
                                       * w).sum()), a.ravel())
        np.testing.assert_allclose(host(x.grad).ravel(), num, rtol=1e-7, atol=1e-8)
    with pytest.raises(RuntimeError, match="dimension 0 is size 3"):
        F.glu(t(np.ones((3, 4)), device), 0)
    with pytest.raises(RuntimeError, match="glu does not support scalars"):
        F.glu(torch.tensor(1.0, device=device))
    assert nn.GLU(1)(t(a, device)).shape == (2, 3, 2)


def test_prelu(device):
    a = np.sin(np.arange(24) * 0.9).reshape(2, 3, 4) * 3
    wv = np.array([0.25, -0.5, 2.0])
    x, w = t(a, device, grad=True), t(wv, device, grad=True)
    y = F.prelu(x, w)
    want = np.where(a > 0, a, wv[None, :, None] * a)
    np.testing.assert_array_equal(host(y), want)
    g = np.cos(np.arange(24) * 0.3).reshape(a.shape)
    (y * t(g, device)).sum().backward()
    np.testing.assert_allclose(host(x.grad), np.where(a > 0, g, wv[None, :, None] * g),
                               rtol=1e-15, atol=0)
    np.testing.assert_allclose(host(w.grad), np.where(a > 0, 0, g * a).sum(axis=(0, 2)),
                               rtol=1e-14, atol=1e-15)
    # one slope; the gradient at x = 0 goes to the slope's side (x > 0 is strict)
    x1, w1 = t([0.0, -2.0, 3.0], device, grad=True), t([0.1], device, grad=True)
    F.prelu(x1, w1).sum().backward()
    assert host(x1.grad).tolist() == [0.1, 0.1, 1.0] and host(w1.grad).tolist() == [-2.0]
    s = F.prelu(torch.tensor(-2.0, dtype=torch.float64, device=device), t([0.5], device))
    assert s.dim() == 0 and s.item() == -1.0
    with pytest.raises(RuntimeError, match="Found parameter numbers = 2 and channel size = 3"):
        F.prelu(t(a, device), t([1.0, 2.0], device))
    with pytest.raises(RuntimeError, match="Type promoting not supported"):
        F.prelu(t(a, device), t(wv, device, dtype=np.float32))


def test_prelu_module(device):
    m = nn.PReLU(3, init=0.1).to(device).double()
    assert repr(m) == "PReLU(num_parameters=3)" and m.init == 0.1
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    assert host(m.weight).tolist() == pytest.approx([0.1] * 3)
    x = t(-np.ones((2, 3)), device)
    m(x).sum().backward()
    assert host(m.weight.grad).tolist() == [-2.0, -2.0, -2.0]
    assert host(nn.PReLU().weight).tolist() == [0.25]


def test_softmin(device):
    a = np.sin(np.arange(12) * 0.9).reshape(3, 4) * 3
    for dim in (0, 1):
        e = np.exp(-a - np.max(-a, axis=dim, keepdims=True))
        np.testing.assert_allclose(host(F.softmin(t(a, device), dim)),
                                   e / e.sum(axis=dim, keepdims=True), rtol=1e-15, atol=1e-16)
    y = F.softmin(t(a, device, dtype=np.float32), 1, dtype=torch.float64)
    assert y.dtype == torch.float64
    # no dim: PyTorch's legacy choice (dim 1 for 2-D)
    np.testing.assert_allclose(host(F.softmin(t(a, device))), host(F.softmin(t(a, device), 1)))
    np.testing.assert_allclose(host(nn.Softmin(0)(t(a, device))), host(F.softmin(t(a, device), 0)))
    x4 = t(np.arange(24.0).reshape(1, 2, 3, 4) / 7, device)
    np.testing.assert_allclose(host(nn.Softmax2d()(x4)), host(F.softmax(x4, -3)))
    with pytest.raises(ValueError, match="expected input to be 3D or 4D, got 2D"):
        nn.Softmax2d()(t(a, device))


MODULES = [
    (nn.ELU(), "ELU(alpha=1.0)", lambda x: F.elu(x)),
    (nn.ELU(0.5, inplace=True), "ELU(alpha=0.5, inplace=True)", lambda x: F.elu(x, 0.5)),
    (nn.CELU(2.0), "CELU(alpha=2.0)", lambda x: F.celu(x, 2.0)),
    (nn.SELU(), "SELU()", F.selu),
    (nn.SELU(True), "SELU(inplace=True)", F.selu),
    (nn.Hardtanh(-2, 3), "Hardtanh(min_val=-2, max_val=3)", lambda x: F.hardtanh(x, -2, 3)),
    (nn.ReLU6(), "ReLU6()", F.relu6),
    (nn.ReLU6(True), "ReLU6(inplace=True)", F.relu6),
    (nn.Hardshrink(), "Hardshrink(0.5)", F.hardshrink),
    (nn.Softshrink(1), "Softshrink(1)", lambda x: F.softshrink(x, 1)),
    (nn.Tanhshrink(), "Tanhshrink()", F.tanhshrink),
    (nn.Softsign(), "Softsign()", F.softsign),
    (nn.Threshold(0.1, 20), "Threshold(threshold=0.1, value=20)",
     lambda x: F.threshold(x, 0.1, 20)),
    (nn.LogSigmoid(), "LogSigmoid()", F.logsigmoid),
    (nn.Mish(), "Mish()", F.mish),
    (nn.Mish(True), "Mish(inplace=True)", F.mish),
    (nn.Hardsigmoid(True), "Hardsigmoid()", F.hardsigmoid),
    (nn.Hardswish(), "Hardswish()", F.hardswish),
    (nn.GLU(), "GLU(dim=-1)", F.glu),
    (nn.Softmin(1), "Softmin(dim=1)", lambda x: F.softmin(x, 1)),
    (nn.Softmin(), "Softmin(dim=None)", F.softmin),
]


@pytest.mark.parametrize("i", range(len(MODULES)))
def test_modules(i, device):
    m, rep, fn = MODULES[i]
    assert repr(m) == rep
    a = np.sin(np.arange(8) * 0.9).reshape(2, 4) * 4
    want = host(fn(t(a, device)))
    x = t(a, device)
    y = m(x)
    np.testing.assert_array_equal(host(y), want)
    if getattr(m, "inplace", False):
        assert y is x


def test_module_arguments():
    h = nn.Hardtanh(-0.5, 0.5)
    assert (h.min_val, h.max_val, h.inplace) == (-0.5, 0.5, False)
    r = nn.ReLU6()
    assert (r.min_val, r.max_val) == (0.0, 6.0)
    with pytest.warns(FutureWarning):
        assert nn.Hardtanh(min_value=-2.0).min_val == -2.0
    with pytest.raises(AssertionError, match="must be greater than min_val"):
        nn.Hardtanh(1, 1)
    assert nn.Threshold(1, 2, True).inplace and nn.ELU(inplace=True).alpha == 1.0
    assert nn.Hardshrink(0.3).lambd == 0.3 and nn.GLU(2).dim == 2


def test_errors(device):
    x = t(np.ones((2, 3)), device)
    with pytest.raises(RuntimeError, match="alpha cannot be 0 for CELU"):
        F.celu(x, 0.0)
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        F.hardtanh(x, 2.0, 1.0)
    with pytest.raises(RuntimeError, match="lambda must be in range"):
        F.softshrink(x, -1.0)
    with pytest.raises(torch.DtypeError, match="Bool inputs not supported for hardtanh"):
        F.hardtanh(torch.ones(2, dtype=torch.bool))
    with pytest.raises(TypeError):
        F.elu([1.0, 2.0])


def test_half_dtypes(device):
    x = np.linspace(-5, 5, 41)
    for dt in (torch.float16, torch.bfloat16):
        xt = t(x, device).to(dt)
        xs = host(xt)
        for name in ("elu", "hardswish", "mish", "logsigmoid", "hardtanh"):
            f, ref, _ = CASES[name]
            y = f(xt)
            assert y.dtype == dt
            eps = 2.0**-11 if dt == torch.float16 else 2.0**-8
            np.testing.assert_allclose(host(y), ref(xs), rtol=eps, atol=eps)


def test_top_level_forms(device):
    """torch.selu, torch.celu, torch.prelu, torch.threshold, torch.hardshrink and the in-place
    selu_ / celu_ / threshold_ are the functional forms."""
    x = torch.tensor([-2.0, -0.5, 0.0, 0.25, 3.0], device=device)
    w = torch.tensor([0.1], device=device)
    pairs = [(torch.selu(x), F.selu(x)), (torch.celu(x, 0.5), F.celu(x, 0.5)),
             (torch.prelu(x, w), F.prelu(x, w)), (torch.threshold(x, 0.1, -7.0),
                                                   F.threshold(x, 0.1, -7.0)),
             (torch.hardshrink(x, 0.3), F.hardshrink(x, 0.3))]
    for got, want in pairs:
        assert got.tolist() == want.tolist()
    for inplace, functional, args in [(torch.selu_, F.selu, ()), (torch.celu_, F.celu, (0.5,)),
                                      (torch.threshold_, F.threshold, (0.1, -7.0))]:
        y = x.clone()
        assert inplace(y, *args) is y
        assert y.tolist() == functional(x, *args).tolist()


def test_leaky_relu_pytorch(device):
    """F.leaky_relu / leaky_relu_ / nn.LeakyReLU against PyTorch 2.15's values and gradients
    (printed by torch): the slope's gradient at 0, -0 and NaN, inplace=True writing into input."""
    x = t([-2.0, -0.0, 0.0, 1.5, math.nan], device, grad=True, dtype=np.float32)
    y = F.leaky_relu(x, 0.2)
    assert y.grad_fn.name() == "LeakyReluBackward0"
    np.testing.assert_array_equal(host(y), [-0.4000000059604645, -0.0, 0.0, 1.5, math.nan])
    assert math.copysign(1, host(y)[1]) == -1
    y.sum().backward()
    np.testing.assert_array_equal(host(x.grad), np.float32([0.2, 0.2, 0.2, 1.0, 0.2]))
    z = t([-1.0, 2.0], device)
    assert F.leaky_relu(z, 0.1, inplace=True) is z and F.leaky_relu_(z, 2.0) is z
    np.testing.assert_allclose(host(z), [-0.2, 2.0], rtol=1e-15)
    m = nn.LeakyReLU(0.3, inplace=True)
    w = t([-1.0, 1.0], device)
    assert m(w) is w and repr(m) == "LeakyReLU(negative_slope=0.3, inplace=True)"
    with pytest.raises(Exception, match="leaky_relu.*'Long'"):
        F.leaky_relu(torch.tensor([1, -2]).to(device))
    # rrelu in evaluation is leaky_relu with the mean slope, its gradient included
    r = t([-1.0, 0.0, 3.0], device, grad=True)
    F.rrelu(r, 0.1, 0.3).sum().backward()
    np.testing.assert_allclose(host(r.grad), [0.2, 0.2, 1.0], rtol=1e-15)


def test_relu_inplace_writes_into_input(device):
    """F.relu(x, inplace=True) and F.relu_(x) write into x and return it (they computed out of
    place: code that used x afterwards read the values before the ReLU), gradients as PyTorch's"""
    for f in (lambda x: F.relu(x, inplace=True), F.relu_):
        x = t([-1.5, 0.0, 2.0], device)
        assert f(x) is x
        np.testing.assert_array_equal(host(x), [0.0, 0.0, 2.0])
        leaf = t([-1.5, 0.5, 2.0], device, grad=True)
        y = leaf * 2
        assert f(y) is y
        y.sum().backward()
        np.testing.assert_array_equal(host(leaf.grad), [0.0, 2.0, 2.0])


def test_relu_module_inplace(device):
    """nn.ReLU(inplace=True) writes into its input and returns it; inplace=False does not"""
    x = t([-1.0, 3.0], device)
    assert nn.ReLU(inplace=True)(x) is x
    np.testing.assert_array_equal(host(x), [0.0, 3.0])
    z = t([-1.0, 3.0], device)
    assert nn.ReLU()(z) is not z
    np.testing.assert_array_equal(host(z), [-1.0, 3.0])


def test_silu_inplace_writes_into_input(device):
    """F.silu(x, inplace=True) and nn.SiLU(inplace=True) write into x and return it (they computed
    out of place), with the gradient of x * sigmoid(x) at the values before the write: PyTorch
    keeps the input for silu_'s backward, and so does ts_silu_"""
    vals = [-2.0, -0.5, 0.0, 1.5]
    want = [v / (1.0 + math.exp(-v)) for v in vals]
    dwant = [(1 / (1 + math.exp(-v))) * (1 + v * (1 - 1 / (1 + math.exp(-v)))) for v in vals]
    for f in (lambda x: F.silu(x, inplace=True), nn.SiLU(inplace=True)):
        x = t(vals, device)
        assert f(x) is x
        np.testing.assert_allclose(host(x), want, rtol=1e-15)
        leaf = t(vals, device, grad=True)
        y = leaf * 1.0
        assert f(y) is y
        y.sum().backward()
        np.testing.assert_allclose(host(leaf.grad), dwant, rtol=1e-14)
    z = t(vals, device)
    assert F.silu(z) is not z and nn.SiLU()(z) is not z
    np.testing.assert_array_equal(host(z), vals)
    assert repr(nn.SiLU(inplace=True)) == "SiLU(inplace=True)"


def test_dropout_inplace_writes_into_input(device):
    """F.dropout(x, inplace=True) and nn.Dropout(inplace=True) in training write the dropped and
    rescaled values into x and return it; in evaluation x is returned as it was. p = 1 zeroes
    every element, so the values are known without the random mask"""
    x = t([1.0, -2.0, 3.0], device)
    assert F.dropout(x, 1.0, training=True, inplace=True) is x
    np.testing.assert_array_equal(host(x), [0.0, 0.0, 0.0])
    y = t([1.0, -2.0, 3.0], device)
    out = nn.Dropout(0.5, inplace=True)(y)
    assert out is y
    kept = host(y)
    assert all(v == 0.0 or v == 2.0 * w for v, w in zip(kept, [1.0, -2.0, 3.0]))
    m = nn.Dropout(0.5, inplace=True).eval()
    e = t([1.0, -2.0], device)
    assert m(e) is e
    np.testing.assert_array_equal(host(e), [1.0, -2.0])
    # under autograd: the gradient through the in-place write is the mask's scale
    leaf = t([1.0, 2.0, 3.0, 4.0], device, grad=True)
    h = leaf * 1.0
    assert F.dropout(h, 0.5, training=True, inplace=True) is h
    h.sum().backward()
    g, hv = host(leaf.grad), host(h.detach())
    for gi, hi, xi in zip(g, hv, [1.0, 2.0, 3.0, 4.0]):
        assert (gi, hi) in ((0.0, 0.0), (2.0, 2.0 * xi))
