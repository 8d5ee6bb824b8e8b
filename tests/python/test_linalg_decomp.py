"""torch.linalg's decompositions and solvers (issue 52) against numpy.linalg in float64: values on
cpu and sim, PyTorch's named tuples and names (torch.* and Tensor methods), gradients by central
differences, the errors PyTorch raises. Tolerances: float64 results agree with NumPy's to a few
hundred ulps of the condition-scaled magnitude; float32 inputs are computed in float64 and then
rounded, so they agree to float32's roundoff times the size."""
import math

import numpy as np
import pytest

import tessera
import tessera.linalg as LA

DEVICES = ["cpu", "sim:0"]


@pytest.fixture(params=DEVICES)
def device(request):
    if request.param.startswith("sim") and tessera.sim.device_count() < 1:
        pytest.skip("no sim devices (TS_SIM_DEVICES=2)")
    return request.param


def rng(seed=0):
    return np.random.default_rng(seed)


def T(a, device="cpu", dtype=tessera.float64, grad=False):
    t = tessera.tensor(np.ascontiguousarray(a), dtype=dtype, device=device)
    if grad:
        t.requires_grad_(True)
    return t


def N(t):
    return np.array(t.to("cpu").to(tessera.float64).tolist(), dtype=np.float64)


def well(n, batch=(), seed=0):
    a = rng(seed).standard_normal(batch + (n, n))
    return a + n * np.eye(n)


def spd(n, batch=(), seed=0):
    m = rng(seed).standard_normal(batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def close(got, want, tol):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
    assert np.abs(got - want).max(initial=0) <= tol * scale, np.abs(got - want).max()


TOL64 = 1e-12
TOL32 = 2e-5


@pytest.mark.parametrize("dtype,tol", [(tessera.float64, TOL64), (tessera.float32, TOL32)])
def test_inv_solve_det(device, dtype, tol):
    a = well(4, (3,), seed=1)
    A = T(a, device, dtype)
    a = N(A)  # the values actually given (float32 rounding)
    close(N(LA.inv(A)), np.linalg.inv(a), tol)
    close(N(tessera.inverse(A)), np.linalg.inv(a), tol)
    close(N(A.inverse()), np.linalg.inv(a), tol)
    b = rng(2).standard_normal((4, 2))
    close(N(LA.solve(A, T(b, device, dtype))), np.linalg.solve(a, np.broadcast_to(b, (3, 4, 2))),
          tol * 10)
    v = N(T(b[:, 0], device, dtype))
    close(N(LA.solve(A, T(v, device, dtype))), np.linalg.solve(a, v[None, :, None])[..., 0],
          tol * 10)
    close(N(LA.solve(A, T(b.T, device, dtype), left=False)),
          np.swapaxes(np.linalg.solve(np.swapaxes(a, -1, -2), np.broadcast_to(b, (3, 4, 2))), -1,
                      -2), tol * 10)
    close(N(LA.det(A)), np.linalg.det(a), tol * 10)
    close(N(A.det()), np.linalg.det(a), tol * 10)
    r = LA.slogdet(A)
    s, la = np.linalg.slogdet(a)
    assert type(r).__name__ == "linalg_slogdet" and r._fields == ("sign", "logabsdet")
    close(N(r.sign), s, 0)
    close(N(r.logabsdet), la, tol * 10)
    close(N(tessera.logdet(T(spd(3), device, dtype))), np.linalg.slogdet(spd(3))[1], tol * 10)
    g = N(T(rng(3).standard_normal((6, 5, 5)), device, dtype))  # pivots of either sign
    g[0] = np.diag([-1.0, 2.0, 1.0, 1.0, 3.0]) + 0.1  # one negative pivot: det < 0
    s, la = np.linalg.slogdet(g)
    close(N(LA.slogdet(T(g, device, dtype)).sign), s, 0)
    close(N(LA.det(T(g, device, dtype))), np.linalg.det(g), tol * 100)
    X, info = LA.inv_ex(A)
    assert info.dtype == tessera.int32 and N(info).tolist() == [0, 0, 0]


def test_singular_and_not_pd_errors(device):
    sing = T([[1.0, 2.0], [2.0, 4.0]], device)
    with pytest.raises(RuntimeError, match="linalg.inv: The diagonal element 2 is zero, the "
                       "inversion could not be completed because the input matrix is singular"):
        LA.inv(sing)
    with pytest.raises(RuntimeError, match="The solver failed because the input matrix is "
                       "singular"):
        LA.solve(sing, T([1.0, 1.0], device))
    with pytest.raises(RuntimeError, match=r"linalg.cholesky: The factorization could not be "
                       r"completed because the input is not positive-definite \(the leading "
                       r"minor of order 1 is not positive-definite\)"):
        LA.cholesky(T(-np.eye(3), device))
    assert N(LA.inv_ex(sing).info).tolist() == 2
    assert N(LA.cholesky_ex(T(-np.eye(3), device)).info).tolist() == 1
    with pytest.raises(RuntimeError, match="A must be batches of square matrices, but they are 2 "
                       "by 3 matrices"):
        LA.inv(T(np.ones((2, 3)), device))
    with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as input. "
                       "Got Long"):
        LA.det(tessera.ones(2, 2, dtype=tessera.int64, device=device))
    with pytest.raises(RuntimeError, match="Incompatible shapes of A and B"):
        LA.solve(T(np.eye(2), device), T(np.ones((3, 2)), device))
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        LA.solve(T(well(2, (3,)), device), T(np.ones((2, 2, 1)), device))


@pytest.mark.parametrize("dtype,tol", [(tessera.float64, TOL64), (tessera.float32, TOL32)])
def test_cholesky_qr_svd_eigh(device, dtype, tol):
    a = N(T(spd(4, (2,), seed=3), device, dtype))
    A = T(a, device, dtype)
    close(N(LA.cholesky(A)), np.linalg.cholesky(a), tol * 10)
    close(N(LA.cholesky(A, upper=True)), np.swapaxes(np.linalg.cholesky(a), -1, -2), tol * 10)
    close(N(A.cholesky()), np.linalg.cholesky(a), tol * 10)
    L = LA.cholesky(A)
    b = rng(4).standard_normal((2, 4, 3))
    close(N(tessera.cholesky_solve(T(b, device, dtype), L)), np.linalg.solve(a, b), tol * 100)
    close(N(tessera.cholesky_inverse(L)), np.linalg.inv(a), tol * 100)
    w, v = np.linalg.eigh(a)
    r = LA.eigh(A)
    assert r._fields == ("eigenvalues", "eigenvectors")
    close(N(r.eigenvalues), w, tol * 10)
    close(np.abs(N(r.eigenvectors)), np.abs(v), tol * 100)  # distinct eigenvalues: up to sign
    close(N(LA.eigvalsh(A, UPLO="U")), w, tol * 10)
    for shape in [(5, 3), (3, 5), (2, 4, 4)]:
        m = N(T(rng(5).standard_normal(shape), device, dtype))
        M = T(m, device, dtype)
        for mode in ["reduced", "complete"]:
            Q, R = LA.qr(M, mode=mode)
            q, rr = np.linalg.qr(m, mode=mode)
            close(np.abs(N(R)), np.abs(rr), tol * 10)  # unique up to the signs of the rows
            close(N(Q) @ N(R), m, tol * 10)
        U, S, Vh = LA.svd(M, full_matrices=False)
        close(N(S), np.linalg.svd(m, compute_uv=False), tol * 10)
        close(N(U) @ (N(S)[..., :, None] * N(Vh)), m, tol * 10)
        close(N(LA.svdvals(M)), np.linalg.svd(m, compute_uv=False), tol * 10)
        u, s, v = tessera.svd(M)
        close(N(u) @ (N(s)[..., :, None] * np.swapaxes(N(v), -1, -2)), m, tol * 10)
        for o, f in [("nuc", "nuc"), (2, 2), (-2, -2)]:
            close(N(LA.matrix_norm(M, ord=o)), np.linalg.norm(m, ord=f, axis=(-2, -1)), tol * 10)


def test_lstsq_pinv_rank(device):
    a = rng(6).standard_normal((6, 3))
    b = rng(7).standard_normal((6, 2))
    A, B = T(a, device), T(b, device)
    x, res, rank, sv = np.linalg.lstsq(a, b, rcond=None)
    for driver in ["gelsy", "gelsd", "gelss", "gels"]:
        r = LA.lstsq(A, B, driver=driver)
        assert r._fields == ("solution", "residuals", "rank", "singular_values")
        close(N(r.solution), x, 1e-12)
        if driver != "gelsy":
            close(N(r.residuals), res, 1e-12)
    r = LA.lstsq(A, B, driver="gelsd")
    assert int(r.rank.item()) == 3
    close(N(r.singular_values), sv, 1e-12)
    close(N(LA.pinv(A)), np.linalg.pinv(a), 1e-12)
    close(N(tessera.pinverse(A)), np.linalg.pinv(a), 1e-12)
    h = a @ a.T  # rank 3, symmetric
    close(N(LA.pinv(T(h, device), hermitian=True, rtol=1e-8)), np.linalg.pinv(h, rcond=1e-8,
                                                                                hermitian=True),
          1e-10)
    assert int(LA.matrix_rank(T(h, device)).item()) == np.linalg.matrix_rank(h) == 3
    assert int(LA.matrix_rank(T(h, device), hermitian=True).item()) == 3


def test_matrix_functions_and_lu(device):
    a = rng(8).standard_normal((3, 3)) * 0.7
    A = T(a, device)
    close(N(LA.matrix_power(A, 5)), np.linalg.matrix_power(a, 5), 1e-12)
    close(N(LA.matrix_power(A, -2)), np.linalg.matrix_power(np.linalg.inv(a), 2), 1e-10)
    close(N(A.matrix_power(0)), np.eye(3), 0)
    ref = sum(np.linalg.matrix_power(a, k) / math.factorial(k) for k in range(40))
    close(N(LA.matrix_exp(A)), ref, 1e-13)
    t = 9.0  # a rotation: scaling and squaring
    close(N(tessera.matrix_exp(T([[0, t], [-t, 0]], device))),
          [[math.cos(t), math.sin(t)], [-math.sin(t), math.cos(t)]], 1e-12)
    close(N(LA.cond(A)), np.linalg.cond(a), 1e-10)
    for p in ["fro", "nuc", 1, -1, math.inf, -math.inf, -2]:
        close(N(LA.cond(A, p)), np.linalg.cond(a, p), 1e-10)
    LU, piv = LA.lu_factor(A)
    assert piv.dtype == tessera.int32
    P, L, U = LA.lu(A)
    close(N(P) @ N(L) @ N(U), a, 1e-13)
    b = rng(9).standard_normal((3, 2))
    close(N(LA.lu_solve(LU, piv, T(b, device))), np.linalg.solve(a, b), 1e-12)
    close(N(LA.lu_solve(LU, piv, T(b, device), adjoint=True)), np.linalg.solve(a.T, b), 1e-12)
    close(N(tessera.lu_solve(T(b, device), LU, piv)), np.linalg.solve(a, b), 1e-12)
    P2, L2, U2 = tessera.lu_unpack(LU, piv)
    close(N(P2) @ N(L2) @ N(U2), a, 1e-13)
    tri = np.triu(a) + 3 * np.eye(3)
    close(N(LA.solve_triangular(T(tri, device), T(b, device), upper=True)),
          np.linalg.solve(tri, b), 1e-12)
    sol, coef = tessera.triangular_solve(T(b, device), T(tri, device), upper=True, transpose=True)
    close(N(sol), np.linalg.solve(tri.T, b), 1e-12)
    close(N(LA.tensorinv(T(well(4).reshape(4, 2, 2), device), ind=1)),
          np.linalg.tensorinv(well(4).reshape(4, 2, 2), ind=1), 1e-12)
    close(N(LA.vander(T([1.0, 2.0, 3.0], device))), np.vander([1.0, 2.0, 3.0], increasing=True),
          0)


def numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


@pytest.mark.parametrize("name", ["inv", "det", "slogdet", "cholesky", "qr", "svdvals", "eigh",
                                  "pinv", "lstsq", "matrix_exp", "lu"])
def test_gradients_against_differences(name):
    w = rng(10).standard_normal((3, 3))  # the weights of a scalar loss

    def loss_t(X):
        if name == "inv":
            return (LA.inv(X) * T(w)).sum()
        if name == "det":
            return LA.det(X)
        if name == "slogdet":
            return LA.slogdet(X).logabsdet
        if name == "cholesky":
            return (LA.cholesky(X @ X.mT + T(3 * np.eye(3))) * T(w)).sum()
        if name == "qr":
            Q, R = LA.qr(X)
            return (Q * T(w)).sum() + (R * T(w.T)).sum()
        if name == "svdvals":
            return (LA.svdvals(X) * T(w[0])).sum()
        if name == "eigh":
            L, V = LA.eigh(X + X.mT)
            return (L * T(w[0])).sum() + ((V * V) * T(w)).sum()
        if name == "pinv":
            return (LA.pinv(X) * T(w)).sum()
        if name == "lstsq":
            return (LA.lstsq(X, T(w[:, :2])).solution * T(w[:, 1:])).sum()
        if name == "matrix_exp":
            return (LA.matrix_exp(X) * T(w)).sum()
        P, L, U = LA.lu(X)
        return (L * T(w)).sum() + (U * T(w.T)).sum()

    x = well(3, seed=11) if name in ("inv", "det", "slogdet", "lu") else \
        rng(11).standard_normal((3, 3))
    X = T(x, grad=True)
    loss_t(X).backward()
    num = numeric_grad(lambda v: float(loss_t(T(v)).item()), x)
    close(N(X.grad), num, 1e-6)


def test_geqrf(device):
    rng = np.random.default_rng(7)
    for shape in ((4, 3), (3, 5), (2, 4, 4)):
        a = rng.standard_normal(shape)
        r = tessera.geqrf(tessera.tensor(a, dtype=tessera.float64, device=device))
        assert r.a.shape == a.shape and tuple(r.tau.shape) == shape[:-2] + (min(shape[-2:]),)
        for b in np.ndindex(*shape[:-2]):
            h, tau = r.a.cpu().numpy()[b], r.tau.cpu().numpy()[b]
            m, n = h.shape
            q = np.eye(m)
            for i in range(min(m, n)):  # Q = H_0 H_1 ... with H_i = I - tau_i v_i v_i^T
                v = np.zeros(m)
                v[i], v[i + 1:] = 1.0, h[i + 1:, i]
                q = q @ (np.eye(m) - tau[i] * np.outer(v, v))
            rr = np.triu(h)[:m]
            assert np.allclose(q @ rr, a[b], rtol=0, atol=1e-13 * max(m, n))
    f = tessera.geqrf(tessera.tensor(rng.standard_normal((3, 3)), dtype=tessera.float32,
                                     device=device))
    assert f.a.dtype == tessera.float32 and f.tau.dtype == tessera.float32
    with pytest.raises(Exception, match="geqrf"):
        tessera.geqrf(tessera.ones(3, device=device))
