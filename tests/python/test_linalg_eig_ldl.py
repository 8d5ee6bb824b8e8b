"""linalg.eig / eigvals, ldl_factor(_ex) / ldl_solve, polar, matrix_sqrth and torch.ormqr
(tessera.linalg, tessera.ormqr, Tensor.ormqr) on cpu and sim: PyTorch's names, named tuples and
dtypes, the defining identities checked in float64 with numpy (no scipy), gradients by central
differences, the errors. Tolerances: float64 results to a few hundred ulps of the magnitudes."""
import numpy as np
import pytest

import tessera
import tessera.linalg as LA


def T(a, device="cpu", dtype=tessera.float64, grad=False):
    t = tessera.tensor(np.ascontiguousarray(a), dtype=dtype, device=device)
    if grad:
        t.requires_grad_()
    return t


def N(t):
    return np.asarray(t.detach().cpu().tolist())


def Nc(t):  # a complex tensor as a complex numpy array
    r = N(tessera.view_as_real(t))
    return r[..., 0] + 1j * r[..., 1]


def numgrad(f, a, eps=1e-6):
    """d sum(f(a) * w) / da by central differences (f: numpy array -> real numpy array)"""
    w = np.random.default_rng(5).standard_normal(np.shape(f(a)))
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        p, m = a.copy(), a.copy()
        p[i] += eps
        m[i] -= eps
        g[i] = ((f(p) * w).sum() - (f(m) * w).sum()) / (2 * eps)
    return g, w


def test_eig_identity_and_names(device):
    a = np.random.default_rng(0).standard_normal((2, 5, 5))
    r = LA.eig(T(a, device))
    assert type(r).__name__ == "linalg_eig" and r.eigenvalues.dtype == tessera.complex128
    assert r.eigenvalues.device.type == device.split(":")[0]
    L, V = Nc(r.eigenvalues), Nc(r.eigenvectors)
    assert np.abs(a @ V - V * L[..., None, :]).max() < 1e-12
    assert np.abs(np.linalg.norm(V, axis=-2) - 1).max() < 1e-13
    assert np.iscomplex(L).any()  # conjugate pairs present
    assert np.allclose(np.sort_complex(L.ravel()), np.sort_complex(np.linalg.eigvals(a).ravel()))
    assert np.allclose(Nc(LA.eigvals(T(a, device))), L, atol=1e-13)
    assert LA.eigvals(T(a, device, tessera.float32)).dtype == tessera.complex64


def test_eig_grad():
    a = np.random.default_rng(1).standard_normal((4, 4))

    def f(x):
        w, v = np.linalg.eig(x)
        o = np.argsort(w.real + 1e-3 * w.imag)  # numpy's order may differ: sort both
        return np.concatenate([w[o].real, w[o].imag, np.abs(v[:, o]).ravel()])

    want, w = numgrad(f, a)
    x = T(a, grad=True)
    L, V = LA.eig(x)
    Ln, Vn = Nc(L), Nc(V)
    o = np.argsort(Ln.real + 1e-3 * Ln.imag)
    Lr = tessera.view_as_real(L)
    n = 4
    wl = np.zeros((n, 2))
    wl[o, 0], wl[o, 1] = w[:n], w[n:2 * n]
    wv = np.zeros((n, n))
    wv[:, o] = w[2 * n:].reshape(n, n)
    loss = (Lr * T(wl)).sum() + (V.abs() * T(wv)).sum()
    loss.backward()
    assert np.abs(N(x.grad) - want).max() < 1e-6


def test_ldl(device):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 4, 4))
    a = a + np.swapaxes(a, -1, -2)
    r = LA.ldl_factor_ex(T(a, device))
    assert type(r).__name__ == "linalg_ldl_factor_ex" and r.pivots.dtype == tessera.int32
    assert N(r.info).tolist() == [0, 0] and np.all(np.triu(N(r.LD), 1) == 0)
    b = rng.standard_normal((4, 3))
    x = N(LA.ldl_solve(r.LD, r.pivots, T(b, device)))
    assert x.shape == (2, 4, 3) and np.abs(a @ x - b).max() < 1e-12
    LD, piv = LA.ldl_factor(T(a, device))
    assert np.array_equal(N(LD), N(r.LD)) and np.array_equal(N(piv), N(r.pivots))
    with pytest.raises(RuntimeError, match="linalg.ldl_factor"):
        LA.ldl_factor(T(np.zeros((3, 3)), device))
    assert N(LA.ldl_factor_ex(T(np.zeros((3, 3)), device)).info).tolist() == 1


def test_ormqr(device):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 5, 3))
    ref, tau = tessera.geqrf(T(a, device))
    Q = N(LA.householder_product(ref, tau))  # the first 3 columns of Q
    c = rng.standard_normal((2, 5, 2))
    y = N(tessera.ormqr(ref, tau, T(c, device), transpose=True))
    assert np.abs(y[:, :3] - np.swapaxes(Q, -1, -2) @ c).max() < 1e-12
    y2 = N(ref.ormqr(tau, T(y, device)))  # Q (Q^T c) = c
    assert np.abs(y2 - c).max() < 1e-12


def test_ormqr_grad():
    rng = np.random.default_rng(4)
    ref, tau = tessera.geqrf(T(rng.standard_normal((4, 3))))
    r0, t0 = N(ref), N(tau)
    c = rng.standard_normal((2, 4))

    def f(x):  # ormqr(right, no transpose) by hand in numpy
        y = c.copy()
        for i in range(3):
            v = np.where(np.arange(4) > i, x[:, i], 0.0) + (np.arange(4) == i)
            y = y - t0[i] * np.outer(y @ v, v)
        return y

    want, w = numgrad(f, r0)
    x = T(r0, grad=True)
    (tessera.ormqr(x, T(t0), T(c), left=False) * T(w)).sum().backward()
    assert np.abs(N(x.grad) - want).max() < 1e-6
    assert np.all(np.triu(N(x.grad)) == 0)  # the diagonal and above are not read


def test_polar_and_sqrth(device):
    rng = np.random.default_rng(6)
    a = rng.standard_normal((2, 5, 3))
    U, H = LA.polar(T(a, device))
    u, h = N(U), N(H)
    assert np.abs(u @ h - a).max() < 1e-12 and np.abs(h - np.swapaxes(h, -1, -2)).max() < 1e-12
    assert np.abs(np.swapaxes(u, -1, -2) @ u - np.eye(3)).max() < 1e-12
    assert np.linalg.eigvalsh(h).min() > 0
    m = rng.standard_normal((2, 4, 4))
    s = m @ np.swapaxes(m, -1, -2) + np.eye(4)
    x = N(LA.matrix_sqrth(T(s, device)))
    assert np.abs(x @ x - s).max() < 1e-12 and np.linalg.eigvalsh(x).min() > 0
    x32 = LA.matrix_sqrth(T(s, device, tessera.float32))
    assert x32.dtype == tessera.float32 and np.abs(N(x32) - x).max() < 1e-5
    with pytest.raises(RuntimeError, match="linalg.polar: input must have at least as many rows"):
        LA.polar(T(np.ones((2, 3)), device))


def test_polar_grad():
    a = np.random.default_rng(7).standard_normal((4, 3))

    def f(x):
        w, s, vh = np.linalg.svd(x, full_matrices=False)
        return np.concatenate([(w @ vh).ravel(), (vh.T @ np.diag(s) @ vh).ravel()])

    want, w = numgrad(f, a)
    x = T(a, grad=True)
    U, H = LA.polar(x)
    (U * T(w[:12].reshape(4, 3))).sum().add((H * T(w[12:].reshape(3, 3))).sum()).backward()
    assert np.abs(N(x.grad) - want).max() < 1e-6


def test_errors():
    with pytest.raises(RuntimeError, match="linalg.eig: A must be batches of square matrices"):
        LA.eig(T(np.ones((2, 3))))
    with pytest.raises(RuntimeError, match="torch.ormqr: tau.shape"):
        tessera.ormqr(T(np.ones((5, 3))), T(np.ones(2)), T(np.ones((5, 2))))
    with pytest.raises(RuntimeError, match="Expected b and A to have the same dtype"):
        LA.ldl_solve(T(np.eye(2)), tessera.tensor([1, 2], dtype=tessera.int32),
                     T(np.ones((2, 1)), dtype=tessera.float32))
