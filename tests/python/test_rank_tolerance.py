"""linalg.matrix_rank and linalg.pinv's default tolerance on rank-deficient float32 input (issue
76): with neither atol nor rtol, singular values up to rtol * s_max are dropped, rtol = max(m, n)
* eps(dtype) (PyTorch's; src/ops/linalg_lstsq.c). The matrices are built in float64 from exact
orthonormal factors and singular values [1, 0.5, 2e-6, 0]: for a 64 x 4 float32 matrix the
threshold is 64 * 2^-23 = 7.6e-6, so the rank is 2; float32's rounding moves a singular value by
about 1e-7, far from every threshold a plausible bug would use (float64's eps: rank 4; min(m, n)
instead of max: 4.8e-7, rank 3; no default tolerance: rank 4; atol instead of rtol scaling:
threshold not scaled by s_max). pinv's reference is the float64 pseudo-inverse of the kept part."""
import numpy as np
import pytest

import tessera
import tessera.linalg as LA

EPS32 = 2.0 ** -23
S = np.array([1.0, 0.5, 2e-6, 0.0])


def orthonormal(rng, m, k):
    q, _ = np.linalg.qr(rng.standard_normal((m, k)))
    return q


def build(rng, m, n, scale=1.0):
    k = min(m, n)
    u, v = orthonormal(rng, m, k), orthonormal(rng, n, k)
    s = S * scale
    return u @ np.diag(s) @ v.T, u, s, v


def t32(a, device):
    return tessera.tensor(a.tolist(), dtype=tessera.float32, device=device)


def kept_pinv(u, s, v, rtol):
    keep = s > rtol * s.max()
    return v[:, keep] @ np.diag(1 / s[keep]) @ u[:, keep].T


@pytest.mark.parametrize("m,n", [(64, 4), (4, 64)])
@pytest.mark.parametrize("scale", [1.0, 1e3, 1e-3])  # the threshold is relative to s_max
def test_default_tolerance_float32(device, m, n, scale):
    rng = np.random.default_rng(m * 7 + n)
    a, u, s, v = build(rng, m, n, scale)
    A = t32(a, device)
    rtol = max(m, n) * EPS32
    assert int(LA.matrix_rank(A).item()) == 2
    assert int(LA.matrix_rank(A, hermitian=False).item()) == 2
    # the same threshold given explicitly; a tighter one keeps the 2e-6 value
    assert int(LA.matrix_rank(A, rtol=rtol).item()) == 2
    assert int(LA.matrix_rank(A, rtol=min(m, n) * EPS32).item()) == 3
    p = LA.pinv(A)
    ref = kept_pinv(u, s, v, rtol)
    got = np.array(p.to("cpu").tolist())
    # float32 rounding of A and of the result, amplified by the kept condition number (2)
    assert np.allclose(got, ref, rtol=0, atol=64 * EPS32 * np.abs(ref).max()), \
        np.abs(got - ref).max()


def test_default_tolerance_float32_batched_and_hermitian(device):
    rng = np.random.default_rng(3)
    mats = np.stack([build(rng, 64, 4)[0] for _ in range(3)])
    assert LA.matrix_rank(t32(mats, device)).tolist() == [2, 2, 2]
    q = orthonormal(rng, 64, 64)
    lam = np.zeros(64)
    lam[:4] = [1.0, -0.5, 2e-6, -2e-6]  # |eigenvalues| are the singular values
    h = q @ np.diag(lam) @ q.T
    H = t32((h + h.T) / 2, device)
    assert int(LA.matrix_rank(H, hermitian=True).item()) == 2
    assert int(LA.matrix_rank(H).item()) == 2
    keep = np.abs(lam) > 64 * EPS32
    ref = q[:, keep] @ np.diag(1 / lam[keep]) @ q[:, keep].T
    got = np.array(LA.pinv(H, hermitian=True).to("cpu").tolist())
    assert np.allclose(got, ref, rtol=0, atol=64 * 64 * EPS32), np.abs(got - ref).max()


def test_float64_keeps_what_float32_drops(device):
    """float64's eps: the same matrix has rank 3 (2e-6 >> 64 * 2^-52), the zero still dropped"""
    rng = np.random.default_rng(9)
    a = build(rng, 64, 4)[0]
    A = tessera.tensor(a.tolist(), dtype=tessera.float64, device=device)
    assert int(LA.matrix_rank(A).item()) == 3
