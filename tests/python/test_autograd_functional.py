"""tessera.autograd.functional (python/tessera/_autograd_functional.py): PyTorch's jacobian, vjp,
jvp (and hessian, hvp, vhp, which need double backward) against closed forms and float64 central
differences; result structures and strict-mode errors as PyTorch 2.15's."""
import numpy as np
import pytest

import tessera
from tessera.autograd.functional import hessian, hvp, jacobian, jvp, vhp, vjp

F64 = tessera.float64
X = np.array([0.5, -1.25, 2.0])
Y = np.array([1.5, 0.75, -0.5])
M = np.array([[0.3, -0.7, 1.1], [0.9, 0.2, -0.4]])


def t(a, **kw):
    return tessera.tensor(np.asarray(a, dtype=np.float64), dtype=F64, **kw)


def close(got, want, tol=1e-13):
    assert isinstance(got, tessera.Tensor)
    assert not got.requires_grad
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)


def fd_jacobian(f, x, h=1e-5):
    """central differences of the NumPy function f at x: shape f(x).shape + x.shape"""
    y = np.asarray(f(x))
    J = np.zeros(y.shape + x.shape)
    for idx in np.ndindex(*x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        J[(Ellipsis,) + idx] = (np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h)
    return J


def two_in_two_out(a, b):
    return a * b, a.exp().sum()


def test_jacobian_tensor_to_tensor():
    x = t(X, requires_grad=True)
    J = jacobian(lambda a: a ** 3, x)
    close(J, np.diag(3 * X ** 2))
    assert x.grad is None and x.requires_grad  # inputs are detached copies
    with tessera.no_grad():  # the pass records its own graph
        close(jacobian(lambda a: a ** 3, x), np.diag(3 * X ** 2))
    J = jacobian(lambda a: a ** 3, x, vectorize=True)  # the same, by the same loop
    close(J, np.diag(3 * X ** 2))


def test_jacobian_matrix_against_central_differences():
    f_np = lambda m: np.tanh(np.sin(m) @ m.T)  # noqa: E731
    J = jacobian(lambda m: (m.sin() @ m.t()).tanh(), t(M))
    assert tuple(J.shape) == (2, 2, 2, 3)
    close(J, fd_jacobian(f_np, M), tol=1e-8)  # O(h^2) = 1e-10 and eps / h = 1e-11 errors


def test_jacobian_structures():
    x, y = t(X), t(Y)
    J = jacobian(two_in_two_out, (x, y))
    assert isinstance(J, tuple) and len(J) == 2 and all(len(r) == 2 for r in J)
    close(J[0][0], np.diag(Y))
    close(J[0][1], np.diag(X))
    close(J[1][0], np.exp(X))
    close(J[1][1], np.zeros(3))  # the output does not depend on b: zeros
    assert tuple(J[1][0].shape) == (3,)
    # one input as a 1-tuple: the per-output entries are 1-tuples
    J = jacobian(lambda a: a.sin(), (x,))
    assert isinstance(J, tuple) and len(J) == 1
    close(J[0], np.diag(np.cos(X)))
    # a tuple of outputs of one tensor input: one tensor per output
    J = jacobian(lambda a: (a ** 2, a.sum()), x)
    assert isinstance(J, tuple) and len(J) == 2
    close(J[0], np.diag(2 * X))
    close(J[1], np.ones(3))
    # a tensor output of tuple inputs: a tuple per input
    J = jacobian(lambda a, b: (a * b).sum(), (x, y))
    close(J[0], Y)
    close(J[1], X)


def test_jacobian_strict_and_arguments():
    x, y = t(X), t(Y)
    with pytest.raises(RuntimeError, match="Output 1 of the user-provided function is "
                                           "independent of input 1. This is not allowed in "
                                           "strict mode."):
        jacobian(two_in_two_out, (x, y), strict=True)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not "
                                           "require gradients"):
        jacobian(lambda a: a.detach() * 2, x, strict=True)
    close(jacobian(lambda a: a.detach() * 2, x), np.zeros((3, 3)))
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorized=True` are not "
                                           "supported together"):
        jacobian(lambda a: a * 2, x, strict=True, vectorize=True)
    with pytest.raises(NotImplementedError, match='strategy="forward-mode"'):
        jacobian(lambda a: a * 2, x, strategy="forward-mode")
    with pytest.raises(AssertionError, match="Expected strategy to be either"):
        jacobian(lambda a: a * 2, x, strategy="sideways")
    with pytest.raises(TypeError, match="The inputs given to jacobian must be either a Tensor or "
                                        "a tuple of Tensors but the given inputs has type"):
        jacobian(lambda a: a, [x])
    with pytest.raises(TypeError, match="outputs of the user-provided function given to jacobian "
                                        "must be either a Tensor or a tuple of Tensors but the "
                                        "value at index 1"):
        jacobian(lambda a: (a, 1.0), x)


def test_vjp():
    x, y = t(X), t(Y)
    v = (t([1.0, -2.0, 0.5]), t(3.0))
    out, g = vjp(two_in_two_out, (x, y), v)
    close(out[0], X * Y)
    close(out[1], np.exp(X).sum())
    close(g[0], v[0].numpy() * Y + 3.0 * np.exp(X))
    close(g[1], v[0].numpy() * X)
    # a scalar function: v defaults to 1; tensor in, tensor out
    out, g = vjp(lambda a: (a ** 3).sum(), x)
    close(out, (X ** 3).sum())
    close(g, 3 * X ** 2)
    # an input the outputs do not use: zeros, or PyTorch's error when strict
    out, g = vjp(lambda a, b: (a ** 2).sum(), (x, y))
    close(g[1], np.zeros(3))
    with pytest.raises(RuntimeError, match="The output of the user-provided function is "
                                           "independent of input 1. This is not allowed in "
                                           "strict mode."):
        vjp(lambda a, b: (a ** 2).sum(), (x, y), strict=True)
    with pytest.raises(RuntimeError, match="The vector v can only be None if the user-provided "
                                           "function returns a single Tensor with a single "
                                           "element."):
        vjp(lambda a: a * 2, x)
    with pytest.raises(RuntimeError, match=r"Entry 1 in v has invalid size: should be "):
        vjp(two_in_two_out, (x, y), (v[0], t([1.0, 2.0])))
    with pytest.raises(RuntimeError, match="v is a tuple of invalid length: should be 2 but got "
                                           "1."):
        vjp(two_in_two_out, (x, y), (v[0],))
    with pytest.raises(RuntimeError, match="The given v should contain a single Tensor."):
        vjp(lambda a: a * 2, x, (v[0], v[0]))


def test_jvp():
    x, y = t(X), t(Y)
    u = (t([1.0, -2.0, 0.5]), t([0.25, 1.0, -1.0]))
    out, g = jvp(two_in_two_out, (x, y), u)
    assert isinstance(g, tuple) and len(g) == 2
    close(out[0], X * Y)
    close(g[0], Y * u[0].numpy() + X * u[1].numpy())
    close(g[1], (np.exp(X) * u[0].numpy()).sum())
    assert tuple(g[1].shape) == ()
    # against central differences: d/de f(m + e u) at e = 0
    f_np = lambda m: np.tanh(np.sin(m) @ m.T)  # noqa: E731
    du = np.array([[1.0, 0.5, -0.25], [0.0, -1.5, 2.0]])
    out, g = jvp(lambda m: (m.sin() @ m.t()).tanh(), t(M), t(du))
    h = 1e-5
    close(g, (f_np(M + h * du) - f_np(M - h * du)) / (2 * h), tol=1e-8)
    # a one-element input: v defaults to 1
    out, g = jvp(lambda a: a.exp() * 2, t([0.5]))
    close(g, 2 * np.exp([0.5]))
    # an output that does not depend on the inputs: zeros; strict: PyTorch's errors
    out, g = jvp(lambda a, b: (a * 2, b.detach() * 3), (x, y), u)
    close(g[1], np.zeros(3))
    with pytest.raises(RuntimeError, match="The output of the user-provided function is "
                                           "independent of input 1"):
        jvp(lambda a, b: a * 2, (x, y), u, strict=True)
    with pytest.raises(RuntimeError, match="Output 1 of the user-provided function does not "
                                           "require gradients"):
        jvp(lambda a, b: (a * b, b.detach()), (x, y), u, strict=True)
    with pytest.raises(RuntimeError, match="The vector v can only be None if the input to the "
                                           "user-provided function is a single Tensor with a "
                                           "single element."):
        jvp(lambda a: a * 2, x)


def test_second_order():
    x, v = t(X), t(Y)
    cube = lambda a: (a ** 3).sum()  # noqa: E731
    close(hessian(cube, x), np.diag(6 * X))
    out, hv = hvp(cube, x, v)
    close(out, (X ** 3).sum())
    close(hv, 6 * X * Y)
    close(vhp(cube, x, v)[1], 6 * X * Y)
    # create_graph: results that can be differentiated again
    j = jacobian(cube, x, create_graph=True)
    assert j.requires_grad
    close(j.detach(), 3 * X ** 2)
    _, g = vjp(cube, x, t(1.0), create_graph=True)
    assert g.requires_grad
    close(g.detach(), 3 * X ** 2)
    _, jv = jvp(cube, x, v, create_graph=True)
    close(jv.detach(), (3 * X ** 2 * Y).sum())
    import tessera.autograd.functional as F  # the module under its PyTorch path
    assert F.jacobian is jacobian
