"""test_complex_autograd_grad.py — tessera.autograd.grad and Tensor.backward with complex inputs
(issue 52; src/autograd/engine.c's ts_autograd_grad, src/core/complex_gate.c): PyTorch's
convention, the gradient of a real loss L with respect to z = x + iy is dL/dx + i dL/dy
(2 dL/dz*), so for L = Re(c f(z)) with f holomorphic it is conj(c f'(z)), and a vector-Jacobian
product with v for a complex output f(z) is conj(f'(z)) v. Closed forms in complex128, on cpu and
sim:0; and PyTorch's refusals: an implicit gradient of a complex output, a real gradient for a
complex output (or the reverse), a hook that changes a gradient's kind."""
import numpy as np
import pytest

import tessera
from tessera import autograd

DEVICES = ["cpu", "sim:0"]
TOL = dict(rtol=1e-13, atol=1e-13)


def arr(t):
    return np.array(t.detach().to("cpu").tolist())


def cvals(n, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-2, 2, n) + 1j * rng.uniform(-1.5, 1.5, n)


def leaf(v, device, dtype=tessera.complex128):
    return tessera.tensor(np.asarray(v).tolist(), dtype=dtype, device=device, requires_grad=True)


@pytest.mark.parametrize("device", DEVICES)
def test_closed_forms(device):
    a, b = cvals(5, 1), cvals(5, 2)
    z, w = leaf(a, device), leaf(b, device)
    # |z|^2 = z conj(z): 2z
    (g,) = autograd.grad((z.abs() ** 2).sum(), z)
    assert g.dtype == tessera.complex128 and g.device == z.device
    np.testing.assert_allclose(arr(g), 2 * a, **TOL)
    # Re(z w): conj(w), conj(z)
    gz, gw = autograd.grad((z * w).real.sum(), [z, w])
    np.testing.assert_allclose(arr(gz), np.conj(b), **TOL)
    np.testing.assert_allclose(arr(gw), np.conj(a), **TOL)
    # Im(z^2 w) = Re(-i z^2 w): conj(-i 2 z w) = i conj(2 z w)
    (gz,) = autograd.grad((z * z * w).imag.sum(), z)
    np.testing.assert_allclose(arr(gz), 1j * np.conj(2 * a * b), **TOL)
    # |z| (not holomorphic): z / |z|
    (gz,) = autograd.grad(z.abs().sum(), z)
    np.testing.assert_allclose(arr(gz), a / np.abs(a), **TOL)
    # Re(c exp(z)) with a complex constant c: conj(c exp(z))
    c = 0.3 - 1.1j
    (gz,) = autograd.grad((z.exp() * c).real.sum(), z)
    np.testing.assert_allclose(arr(gz), np.conj(c * np.exp(a)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_vjp_of_complex_output(device):
    a, b, v = cvals(4, 3), cvals(4, 4), cvals(4, 5)
    z, w = leaf(a, device), leaf(b, device)
    y = z * z * w
    vt = tessera.tensor(v.tolist(), dtype=tessera.complex128, device=device)
    gz, gw = autograd.grad(y, [z, w], grad_outputs=vt)
    np.testing.assert_allclose(arr(gz), np.conj(2 * a * b) * v, **TOL)
    np.testing.assert_allclose(arr(gw), np.conj(a * a) * v, **TOL)


@pytest.mark.parametrize("device", DEVICES)
def test_mixed_real_and_complex_inputs(device):
    a = cvals(3, 6)
    x = tessera.tensor([1.0, -2.0, 0.5], dtype=tessera.float64, device=device,
                       requires_grad=True)
    z = leaf(a, device)
    # Im(x z): d/dx = Im(z) (real, x's dtype); conj(-i x) = i x for z
    gx, gz = autograd.grad((x * z).imag.sum(), [x, z])
    assert gx.dtype == tessera.float64 and gz.dtype == tessera.complex128
    np.testing.assert_allclose(arr(gx), a.imag, **TOL)
    np.testing.assert_allclose(arr(gz), 1j * np.array([1.0, -2.0, 0.5]), **TOL)


@pytest.mark.parametrize("device", DEVICES)
def test_non_leaf_input_and_unused(device):
    a, b = cvals(4, 7), cvals(4, 8)
    z, w = leaf(a, device), leaf(b, device)
    y = z * 2.0
    gy, gw = autograd.grad((y * y.conj()).real.sum(), [y, w], allow_unused=True)
    np.testing.assert_allclose(arr(gy), 4 * a, **TOL)  # 2y
    assert gw is None
    (gz, gw) = autograd.grad((z * 3).real.sum(), [z, w], materialize_grads=True)
    np.testing.assert_allclose(arr(gz), np.full(4, 3.0 + 0j), **TOL)
    assert gw.dtype == tessera.complex128 and not arr(gw).any()


@pytest.mark.parametrize("device", DEVICES)
def test_create_graph(device):
    a, b = cvals(4, 9), cvals(4, 10)
    z, w = leaf(a, device), leaf(b, device)
    (g,) = autograd.grad((z.abs() ** 2).sum(), z, create_graph=True)  # 2z
    (gg,) = autograd.grad(g.real.sum(), z)  # Re(2z) = 2x: 2
    np.testing.assert_allclose(arr(gg), np.full(4, 2.0 + 0j), **TOL)
    # g = i conj(2 z w) for Im(z^2 w); |g|^2 = 4 |z|^2 |w|^2: 8 z |w|^2 and 8 w |z|^2
    (g,) = autograd.grad((z * z * w).imag.sum(), z, create_graph=True)
    gz, gw = autograd.grad((g * g.conj()).real.sum(), [z, w])
    np.testing.assert_allclose(arr(gz), 8 * a * np.abs(b) ** 2, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(arr(gw), 8 * b * np.abs(a) ** 2, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_backward_and_complex64(device):
    a, b = cvals(6, 11), cvals(6, 12)
    z, w = leaf(a, device, tessera.complex64), leaf(b, device, tessera.complex64)
    (z * w).real.sum().backward(inputs=[w])
    assert z.grad is None
    a32 = arr(z)
    np.testing.assert_allclose(arr(w.grad), np.conj(a32), rtol=1e-6, atol=1e-6)
    (gz,) = autograd.grad((z.abs() ** 2).sum(), z)
    assert gz.dtype == tessera.complex64
    np.testing.assert_allclose(arr(gz), 2 * a32, rtol=4e-6, atol=4e-6)


def test_hooks_on_complex_gradients():
    a, b = cvals(3, 13), cvals(3, 14)
    z, w = leaf(a, "cpu"), leaf(b, "cpu")
    z2 = z.detach().clone().requires_grad_()
    z2.register_hook(lambda g: g * 2j)
    (g,) = autograd.grad((z2 * w).real.sum(), z2)
    np.testing.assert_allclose(arr(g), 2j * np.conj(b), **TOL)
    y = z * 1.0
    y.register_hook(lambda g: g * 2j)
    (g,) = autograd.grad((y * w).real.sum(), z)
    np.testing.assert_allclose(arr(g), 2j * np.conj(b), **TOL)
    y = z * 1.0
    y.register_hook(lambda g: g.real)  # a real result would drop the imaginary parts
    with pytest.raises(tessera.DtypeError, match="complex gradient needs a complex result"):
        autograd.grad((y * w).real.sum(), z)


def test_refusals():
    z, w = leaf(cvals(2, 15), "cpu"), leaf(cvals(2, 16), "cpu")
    with pytest.raises(tessera.DtypeError, match="real scalar outputs"):
        autograd.grad((z * w).sum(), z)
    with pytest.raises(tessera.DtypeError, match="real scalar outputs"):
        (z * w).sum().backward()
    with pytest.raises(tessera.DtypeError, match="same dtype"):
        autograd.grad(z * w, z, grad_outputs=tessera.ones(2, dtype=tessera.float64))
    x = tessera.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(tessera.DtypeError, match="same dtype"):
        autograd.grad(x * 2, x, grad_outputs=tessera.tensor([1 + 1j, 2]))
    with pytest.raises(tessera.DtypeError, match="same dtype"):
        (x * 2).backward(tessera.tensor([1 + 1j, 2]))
    assert x.grad is None
