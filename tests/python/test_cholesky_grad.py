"""cholesky_inverse / cholesky_solve gradients with respect to the factor: PyTorch's DENSE
definition (cholesky_inverse_backward / cholesky_solve_backward in derivatives.yaml), the
derivative of (L L^T)^-1 B with L taken as a full matrix, so the triangle the forward never reads
gets a nonzero gradient (docs/decisions/0039-cholesky-dense-gradient.md; src/ops/linalg_tri.c,
linalg_grad.c). Checked against numbers printed by PyTorch 2.15 and against central differences
of the float64 NumPy function over every entry of L, upper and lower, batched and broadcast."""
import numpy as np
import pytest

import tessera

L3 = [[2.0, 0.0, 0.0], [0.5, 1.5, 0.0], [-0.25, 0.75, 1.25]]
G3 = [[0.3, -0.2, 0.1], [0.7, 0.4, -0.5], [-0.6, 0.2, 0.9]]
B32 = [[1.0, -2.0], [0.5, 0.25], [3.0, -1.0]]
GB32 = [[0.2, 0.1], [-0.3, 0.6], [0.5, -0.4]]
# PyTorch 2.15 (torch.float64): l.grad after (cholesky_inverse(l) * G3).sum().backward(), lower
TORCH_INV_GRAD = [[-0.007555555555555565, 0.030518518518518528, -0.1689777777777779],
                  [-0.1737777777777778, -0.26474074074074083, 0.6535111111111114],
                  [0.19200000000000003, 0.18133333333333335, -1.0048000000000006]]
# ... and after (cholesky_solve(b, l) * GB32).sum().backward(): l.grad, b.grad
TORCH_SOLVE_GRAD_L = [[-0.27538888888888874, 0.5270925925925924, -1.5217333333333336],
                      [0.7035555555555556, -0.6977037037037035, 2.4601333333333337],
                      [-0.7960000000000002, 0.988, -3.2736000000000005]]
TORCH_SOLVE_GRAD_B = [[0.20088888888888887, -0.1468888888888889],
                      [-0.3795555555555555, 0.47155555555555556],
                      [0.44799999999999995, -0.43200000000000005]]
TOL = dict(rtol=1e-12, atol=1e-13)


def t64(a, device, rg=False):
    return tessera.tensor(np.asarray(a).tolist(), dtype=tessera.float64, device=device,
                          requires_grad=rg)


def arr(t):
    return np.array(t.to("cpu").tolist(), dtype=np.float64)


@pytest.mark.parametrize("upper", [False, True])
def test_against_torch_numbers(device, upper):
    L = np.array(L3).T if upper else np.array(L3)
    tr = (lambda a: np.array(a).T) if upper else np.array  # upper: U = L^T, gradients transposed
    l = t64(L, device, True)
    (tessera.cholesky_inverse(l, upper=upper) * t64(G3, device)).sum().backward()
    assert np.allclose(arr(l.grad), tr(TORCH_INV_GRAD), **TOL)
    l, b = t64(L, device, True), t64(B32, device, True)
    (tessera.cholesky_solve(b, l, upper=upper) * t64(GB32, device)).sum().backward()
    assert np.allclose(arr(l.grad), tr(TORCH_SOLVE_GRAD_L), **TOL)
    assert np.allclose(arr(b.grad), np.array(TORCH_SOLVE_GRAD_B), **TOL)
    # the triangle the forward does not read has a gradient (PyTorch's dense convention)
    off = np.triu(arr(l.grad), 1) if not upper else np.tril(arr(l.grad), -1)
    assert np.abs(off).max() > 0.1


def _factor(rng, shape):
    n = shape[-1]
    L = np.tril(rng.standard_normal(shape)) * 0.3
    return L + np.eye(n) * (1.5 + rng.random(shape[:-1]))[..., None]


def _full_solve(L, B, upper):
    """cholesky_solve with L read as a full matrix: (L L^T)^-1 B (upper: (U^T U)^-1 B)"""
    A = np.swapaxes(L, -1, -2) @ L if upper else L @ np.swapaxes(L, -1, -2)
    return _solve(A, B)


def _solve(A, B):
    """A^-1 B over the broadcast batch of both (NumPy would read a B of one dim less as
    vectors)"""
    batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    return np.linalg.solve(np.broadcast_to(A, batch + A.shape[-2:]),
                           np.broadcast_to(B, batch + B.shape[-2:]))


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("lshape,bshape", [((3, 3), (3, 2)), ((2, 4, 4), (2, 4, 3)),
                                           ((4, 4), (3, 4, 1)), ((2, 1, 3, 3), (4, 3, 2))])
def test_solve_central_differences(device, upper, lshape, bshape):
    rng = np.random.default_rng(76)
    L = _factor(rng, lshape)
    if upper:
        L = np.swapaxes(L, -1, -2).copy()
    B = rng.standard_normal(bshape)
    out = _full_solve(L, B, upper)
    G = rng.standard_normal(out.shape)
    l, b = t64(L, device, True), t64(B, device, True)
    y = tessera.cholesky_solve(b, l, upper=upper)
    assert np.allclose(arr(y), out, **TOL)
    (y * t64(G, device)).sum().backward()
    h = 1e-6
    num = np.zeros_like(L)
    for idx in np.ndindex(L.shape):  # every entry, both triangles
        Lp, Lm = L.copy(), L.copy()
        Lp[idx] += h
        Lm[idx] -= h
        num[idx] = ((_full_solve(Lp, B, upper) - _full_solve(Lm, B, upper)) * G).sum() / (2 * h)
    # central differences: O(h^2) truncation plus O(eps / h) rounding on O(1) values
    assert np.allclose(arr(l.grad), num, rtol=1e-6, atol=1e-7)
    A = np.swapaxes(L, -1, -2) @ L if upper else L @ np.swapaxes(L, -1, -2)
    gb = _solve(A, G)  # A^-T G, A symmetric
    while gb.ndim > B.ndim:  # a broadcast B: its gradient summed back to its shape
        gb = gb.sum(0)
    gb = gb.sum(tuple(i for i in range(B.ndim) if B.shape[i] == 1 and gb.shape[i] != 1),
                keepdims=True)
    assert np.allclose(arr(b.grad), gb, **TOL)


@pytest.mark.parametrize("upper", [False, True])
def test_inverse_central_differences(device, upper):
    rng = np.random.default_rng(7)
    L = _factor(rng, (2, 4, 4))
    if upper:
        L = np.swapaxes(L, -1, -2).copy()
    eye = np.broadcast_to(np.eye(4), L.shape)
    G = rng.standard_normal(L.shape)
    l = t64(L, device, True)
    y = tessera.cholesky_inverse(l, upper=upper)
    assert np.allclose(arr(y), _full_solve(L, eye, upper), **TOL)
    (y * t64(G, device)).sum().backward()
    h, num = 1e-6, np.zeros_like(L)
    for idx in np.ndindex(L.shape):
        Lp, Lm = L.copy(), L.copy()
        Lp[idx] += h
        Lm[idx] -= h
        num[idx] = ((_full_solve(Lp, eye, upper) - _full_solve(Lm, eye, upper)) * G).sum() / (2 * h)
    assert np.allclose(arr(l.grad), num, rtol=1e-6, atol=1e-7)
