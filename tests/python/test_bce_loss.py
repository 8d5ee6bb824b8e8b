"""binary_cross_entropy on probabilities (src/nn/loss_bce.c) against NumPy float64 forms of PyTorch's
formulas, on cpu and sim:0: the loss with each log clamped at -100, the input's gradient
g (x - t) / max(x (1 - x), 1e-12) w, finite where x is exactly 0 or 1 (a saturated float32 sigmoid:
the corpus's siamese_network got NaN weights from the composed logs' inf * 0), the target's
g (log1p(-x) - log x) w, the weight's; float64 gradcheck; float32 within its rounding; errors, and
values outside [0, 1] refused as PyTorch refuses them.
Also torch.where with two numbers (the same program's torch.where(outputs > 0.5, 1, 0))."""
import numpy as np
import pytest

import tessera as torch
import tessera.nn as nn
import tessera.nn.functional as F

EPS32 = 2.0**-24


def t(a, device="cpu", grad=False, dtype=np.float64):
    x = torch.from_numpy(np.ascontiguousarray(a, dtype=dtype)).clone().to(device)
    if grad:
        x.requires_grad_(True)
    return x


def host(x):
    return x.detach().to("cpu").double().numpy()


def ref_terms(x, y):
    """PyTorch's clamped logs, float64"""
    with np.errstate(divide="ignore"):
        return np.maximum(np.log(x), -100), np.maximum(np.log1p(-x), -100)


def ref_loss(x, y, w=1.0):
    lx, lq = ref_terms(x, y)
    return ((y - 1) * lq - y * lx) * w


# probabilities with the ends 0 and 1 and values next to them, hard and soft targets
X = np.array([0.0, 1.0, 1e-30, 1 - 1e-12, 0.5, 0.25, 0.9, 1e-3, 0.999, 0.3, 0.7, 0.05])
Y = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.2, 0.7, 1.0, 0.0, 0.5])
W = np.linspace(0.5, 2.0, X.size)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_loss_float64(device, reduction):
    y = F.binary_cross_entropy(t(X, device), t(Y, device), reduction=reduction)
    want = ref_loss(X, Y)
    want = want if reduction == "none" else want.sum() if reduction == "sum" else want.mean()
    np.testing.assert_allclose(host(y), want, rtol=1e-13, atol=1e-13)
    assert y.device == torch.device(device)


def test_loss_weight_broadcast(device):
    x, yv = X.reshape(3, 4), Y.reshape(3, 4)
    w = np.array([0.5, 1.0, 2.0, 3.0])
    y = F.binary_cross_entropy(t(x, device), t(yv, device), weight=t(w, device), reduction="none")
    np.testing.assert_allclose(host(y), ref_loss(x, yv, w), rtol=1e-13, atol=1e-13)
    m = nn.BCELoss(weight=t(w, device))(t(x, device), t(yv, device))
    np.testing.assert_allclose(host(m), ref_loss(x, yv, w).mean(), rtol=1e-13)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_gradients_match_pytorch_formula(device, reduction):
    x, yv, w = t(X, device, grad=True), t(Y, device, grad=True), t(W, device, grad=True)
    loss = F.binary_cross_entropy(x, yv, weight=w, reduction=reduction)
    g = np.linspace(-1.0, 1.5, X.size) if reduction == "none" else np.full(X.size, 1.0)
    if reduction == "none":
        loss.backward(t(g, device))
    else:
        loss.backward()
    if reduction == "mean":
        g = g / X.size
    gx, gy, gw = host(x.grad), host(yv.grad), host(w.grad)
    assert np.isfinite(gx).all()
    want_x = g * (X - Y) / np.maximum((1 - X) * X, 1e-12) * W
    np.testing.assert_allclose(gx, want_x, rtol=1e-12)
    with np.errstate(divide="ignore"):
        want_y = g * (np.log1p(-X) - np.log(X)) * W
    inner = np.isfinite(want_y)  # PyTorch's -logit(x): +-inf at the ends
    np.testing.assert_allclose(gy[inner], want_y[inner], rtol=1e-12)
    assert (np.sign(gy[~inner]) == np.sign(want_y[~inner])).all() and np.isinf(gy[~inner]).all()
    np.testing.assert_allclose(gw, g * ref_loss(X, Y), rtol=1e-12, atol=1e-300)


def test_weight_gradient_summed_to_its_shape(device):
    x, yv = X.reshape(3, 4), Y.reshape(3, 4)
    w = t([0.5, 1.0, 2.0, 3.0], device, grad=True)
    F.binary_cross_entropy(t(x, device), t(yv, device), weight=w, reduction="sum").backward()
    np.testing.assert_allclose(host(w.grad), ref_loss(x, yv).sum(axis=0), rtol=1e-12)


def numgrad(fn, x, h=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        xp, xm = x.copy(), x.copy()
        xp.flat[i] += h
        xm.flat[i] -= h
        g.flat[i] = (fn(xp) - fn(xm)) / (2 * h)
    return g


def test_central_differences_float64(device):
    """first and second derivatives against central differences of the float64 loss"""
    rng = np.random.default_rng(0)
    xv, yv, wv = rng.uniform(0.05, 0.95, (3, 4)), rng.uniform(0, 1, (3, 4)), rng.uniform(0.5, 2, (4,))

    def f(a, b, c):
        return host(F.binary_cross_entropy(t(a, device), t(b, device), weight=t(c, device)))

    x, y, w = t(xv, device, grad=True), t(yv, device, grad=True), t(wv, device, grad=True)
    gx, gy, gw = torch.autograd.grad(F.binary_cross_entropy(x, y, weight=w), (x, y, w), create_graph=True)
    np.testing.assert_allclose(host(gx), numgrad(lambda a: f(a, yv, wv), xv), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(host(gy), numgrad(lambda b: f(xv, b, wv), yv), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(host(gw), numgrad(lambda c: f(xv, yv, c), wv), rtol=1e-6, atol=1e-9)
    # twice differentiable: d/dx of sum(dL/dx) against differences of the first derivative
    (hx,) = torch.autograd.grad(gx.sum(), (x,))

    def first(a):
        xa = t(a, device, grad=True)
        (g1,) = torch.autograd.grad(F.binary_cross_entropy(xa, t(yv, device), weight=t(wv, device)), (xa,))
        return host(g1).sum()

    np.testing.assert_allclose(host(hx), numgrad(first, xv), rtol=1e-5, atol=1e-8)


def test_saturated_sigmoid_gives_finite_gradient(device):
    """float32 sigmoid(40) is exactly 1 and sigmoid(-200) exactly 0: PyTorch's gradient through
    BCELoss(sigmoid(z)) is (x - t) / 1e-12 * x (1 - x) = 0 there, never NaN"""
    z = t([40.0, -200.0, 2.0], device, grad=True, dtype=np.float32)
    p = torch.sigmoid(z)
    assert host(p)[0] == 1.0 and host(p)[1] == 0.0
    loss = nn.BCELoss()(p, t([0.0, 1.0, 1.0], device, dtype=np.float32))
    np.testing.assert_allclose(host(loss), (100 + 100 + np.log1p(np.exp(-2.0))) / 3, rtol=4 * EPS32)
    loss.backward()
    gz = host(z.grad)
    assert np.isfinite(gz).all()
    assert gz[0] == 0 and gz[1] == 0
    s = 1 / (1 + np.exp(-2.0))
    np.testing.assert_allclose(gz[2], (s - 1) / 3, rtol=16 * EPS32)


def test_float32_within_rounding(device):
    rng = np.random.default_rng(1)
    x32 = rng.uniform(0, 1, 257).astype(np.float32)
    x32[:2] = [0, 1]
    y32 = (rng.uniform(0, 1, 257) > 0.5).astype(np.float32)
    x = t(x32, device, grad=True, dtype=np.float32)
    loss = F.binary_cross_entropy(x, t(y32, device, dtype=np.float32), reduction="none")
    xd, yd = x32.astype(np.float64), y32.astype(np.float64)
    lx, lq = ref_terms(xd, yd)
    bound = 4 * EPS32 * (np.abs(lx) + np.abs(lq) + 1e-30)  # each log and product rounds once
    assert (np.abs(host(loss) - ref_loss(xd, yd)) <= bound).all()
    loss.sum().backward()
    want = (xd - yd) / np.maximum((1 - xd) * xd, 1e-12)
    np.testing.assert_allclose(host(x.grad), want, rtol=6 * EPS32)


def test_errors():
    with pytest.raises(Exception, match="binary_cross_entropy.*target size"):
        F.binary_cross_entropy(t(X), t(Y[:3]))
    with pytest.raises(Exception, match="binary_cross_entropy.*broadcast"):
        F.binary_cross_entropy(t(X), t(Y), weight=t([1.0, 2.0]))
    with pytest.raises(Exception, match="binary_cross_entropy.*floating"):
        F.binary_cross_entropy(t(X), torch.tensor([1] * X.size))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("bad", [1.5, -0.25, np.nan, np.inf])
def test_values_outside_0_1_refused(device, dtype, bad):
    """PyTorch's test of every element (its messages, RuntimeError; NaN is outside), the input's
    before the target's; the ends 0 and 1 and -0 are inside."""
    ok_x, ok_y = np.full(5, 0.5), np.array([0.0, 1.0, -0.0, 0.5, 1.0])
    bad_x, bad_y = ok_x.copy(), ok_y.copy()
    bad_x[3] = bad_y[4] = bad
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(t(bad_x, device, dtype=dtype), t(ok_y, device, dtype=dtype))
    with pytest.raises(RuntimeError, match="all elements of target should be between 0 and 1"):
        F.binary_cross_entropy(t(ok_x, device, dtype=dtype), t(bad_y, device, dtype=dtype))
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        nn.BCELoss()(t(bad_x, device, dtype=dtype), t(bad_y, device, dtype=dtype))
    ends = F.binary_cross_entropy(t([0.0, 1.0, 0.5], device, dtype=dtype),
                                  t([0.0, 1.0, -0.0], device, dtype=dtype), reduction="none")
    np.testing.assert_allclose(host(ends), [0.0, 0.0, np.log(2)], rtol=4 * EPS32)


@pytest.mark.parametrize("a, b, dtype", [(1, 0, "int64"), (1.5, 0, "float32"), (True, False, "bool"),
                                         (2, 0.5, "float32"), (1, False, "int64"), (True, 2, "int64"),
                                         (0.5, True, "float32")])
def test_where_two_numbers(device, a, b, dtype):
    c = t([0.7, 0.2, 0.9], device) > 0.5
    r = torch.where(c, a, b)
    assert str(r.dtype) == "tessera." + dtype and r.device == torch.device(device)
    assert host(r).tolist() == [a, b, a]
