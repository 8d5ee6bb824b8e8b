"""Autograd from Python: requires_grad, .grad, backward, detach, grad modes (context managers and
decorators), tessera.autograd.grad / backward, on cpu and sim:0; gradients against hand
derivatives (float32: relative 1e-6)."""
import math
import threading

import pytest

import tessera


def test_seed_000_cpu_leaf_moved_to_device(device):
    """Seed 000: a cpu leaf moved to the device, computed on there; the cpu leaf gets its gradient."""
    cpu_tensor = tessera.tensor([1.0, 2.0, 3.0], requires_grad=True)
    dev_tensor = tessera.tensor([4.0, 5.0, 6.0], device=device, requires_grad=True)
    result = cpu_tensor.to(device) * dev_tensor
    assert result.grad_fn is not None and not result.is_leaf and result.requires_grad
    result.backward(tessera.tensor([1.0, 1.0, 1.0], device=device))
    assert cpu_tensor.grad.device == tessera.device("cpu")
    assert cpu_tensor.grad.tolist() == [4.0, 5.0, 6.0]
    assert dev_tensor.grad.device == tessera.device(device)
    assert dev_tensor.grad.tolist() == [1.0, 2.0, 3.0]


def test_scalar_backward_hand_derivatives(device, close):
    xs = [0.5, -1.25, 2.0]
    x = tessera.tensor(xs, device=device, requires_grad=True)
    y = (x * x * x + x.exp() * 2 - x.sin() / 3).sum()
    y.backward()
    close(x.grad.tolist(), [3 * v * v + 2 * math.exp(v) - math.cos(v) / 3 for v in xs], rel=4e-6)
    # a second pass accumulates
    (x * 2).sum().backward()
    close(x.grad.tolist(), [3 * v * v + 2 * math.exp(v) - math.cos(v) / 3 + 2 for v in xs], rel=4e-6)


def test_matmul_mean_gradients(device, close):
    W = [[1.0, 2.0], [-1.0, 0.5], [3.0, -2.0]]
    X = [[0.5, -1.0, 2.0]]
    w = tessera.tensor(W, device=device, requires_grad=True)
    x = tessera.tensor(X, device=device, requires_grad=True)
    loss = (x @ w).relu().mean()
    loss.backward()
    out = [sum(X[0][k] * W[k][j] for k in range(3)) for j in range(2)]
    mask = [1.0 if o > 0 else 0.0 for o in out]
    close(w.grad.tolist(), [[X[0][k] * mask[j] / 2 for j in range(2)] for k in range(3)])
    close(x.grad.tolist(), [[sum(W[k][j] * mask[j] / 2 for j in range(2)) for k in range(3)]])


def test_requires_grad_flags(device):
    x = tessera.ones(2, device=device)
    assert not x.requires_grad and x.is_leaf and x.grad is None and x.grad_fn is None
    assert x.requires_grad_() is x and x.requires_grad
    x.requires_grad = False
    assert not x.requires_grad
    x.requires_grad = True
    y = x * 2
    assert y.grad_fn.name() == "MulBackward0"
    with pytest.raises(RuntimeError):
        y.requires_grad = False  # only leaves
    d = y.detach()
    assert not d.requires_grad and d.is_leaf and d.tolist() == [2, 2]
    y.detach_()
    assert not y.requires_grad and y.grad_fn is None


def test_grad_set_and_clear(device):
    x = tessera.ones(3, device=device, requires_grad=True)
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3, 3, 3]
    x.grad = None
    assert x.grad is None
    x.grad = tessera.full((3,), 0.5, device=device)
    (x * 1).sum().backward()
    assert x.grad.tolist() == [1.5, 1.5, 1.5]
    x.grad.zero_()
    assert x.grad.tolist() == [0, 0, 0]


def test_backward_errors(device):
    x = tessera.ones(3, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="scalar"):
        (x * 2).backward()  # implicit gradient needs one element
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()  # the graph was kept
    assert x.grad.tolist() == [4, 4, 4]
    z = (x * x).sum()
    z.backward()
    with pytest.raises(tessera.StateError):
        z.backward()  # freed
    with pytest.raises(TypeError, match="gradient"):
        (x * 2).backward(gradient=[1.0, 1.0, 1.0])
    with pytest.raises(tessera.TesseraError):
        tessera.ones(2, device=device).sum().backward()  # nothing requires grad


def test_no_grad_context_and_decorator(device):
    x = tessera.ones(2, device=device, requires_grad=True)
    with tessera.no_grad():
        assert not tessera.is_grad_enabled()
        assert not (x * 2).requires_grad
        with tessera.enable_grad():
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad
    assert tessera.is_grad_enabled() and (x * 2).requires_grad

    @tessera.no_grad()
    def f(t):
        return t * 2

    @tessera.no_grad
    def g(t):
        return t * 2

    assert not f(x).requires_grad and not g(x).requires_grad and tessera.is_grad_enabled()
    with tessera.inference_mode():
        assert not (x + 1).requires_grad
    with tessera.set_grad_enabled(False):
        assert not (x + 1).requires_grad
    assert (x + 1).requires_grad
    tessera.set_grad_enabled(False)
    assert not tessera.is_grad_enabled()
    tessera.set_grad_enabled(True)
    assert tessera.is_grad_enabled()


def test_no_grad_is_per_thread():
    seen = []
    with tessera.no_grad():
        t = threading.Thread(target=lambda: seen.append(tessera.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]


def test_autograd_grad_leaves_dot_grad_alone(device, close):
    x = tessera.tensor([1.0, 2.0], device=device, requires_grad=True)
    w = tessera.tensor([3.0, -1.0], device=device, requires_grad=True)
    x.grad = tessera.full((2,), 10.0, device=device)
    (gx, gw) = tessera.autograd.grad((x * x * w).sum(), [x, w])
    close(gx.tolist(), [2 * 1 * 3, 2 * 2 * -1])
    close(gw.tolist(), [1, 4])
    assert x.grad.tolist() == [10, 10] and w.grad is None
    y = x * 2
    (g,) = tessera.autograd.grad(y, x, grad_outputs=tessera.tensor([1.0, 0.5], device=device))
    assert g.tolist() == [2, 1]
    unused = tessera.ones(1, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="allow_unused"):
        tessera.autograd.grad((x * 2).sum(), [x, unused])
    gx, gu = tessera.autograd.grad((x * 2).sum(), [x, unused], allow_unused=True)
    assert gu is None and gx.tolist() == [2, 2]


def test_autograd_backward_several_outputs(device):
    x = tessera.ones(2, device=device, requires_grad=True)
    a, b = (x * 2).sum(), (x * 3).sum()
    tessera.autograd.backward([a, b])
    assert x.grad.tolist() == [5, 5]


def test_backward_gradient_none_given_explicitly():
    """backward(None) and backward(gradient=None) are backward() for a one-element output"""
    for call in (lambda y: y.backward(None), lambda y: y.backward(gradient=None)):
        x = tessera.tensor([2.0, 3.0], requires_grad=True)
        call((x * x).sum())
        assert x.grad.tolist() == [4.0, 6.0]
