"""Issue 52's products and norm-type reductions from Python: addmm / addmv / addr / baddbmm /
addbmm (beta, alpha, in-place), mv, dot, vdot, outer / ger, inner, tensordot, kron, trace,
multi_dot / chain_matmul, mT / mH / H / T, norm, linalg.vector_norm / matrix_norm / norm,
F.normalize, var_mean, std_mean, aminmax, count_nonzero, F.cosine_similarity,
F.pairwise_distance, cdist. References are NumPy in float64 (no PyTorch needed)."""
import math

import numpy as np
import pytest

import tessera as torch
import tessera.nn.functional as F

RNG = np.random.default_rng(52)


def _np(t):
    return np.asarray(t.detach().cpu().tolist(), dtype=np.float64)


def _t(a, device, rg=False):
    return torch.tensor(np.asarray(a).tolist(), dtype=torch.float64, device=device,
                        requires_grad=rg)


def _r(*shape):
    return RNG.standard_normal(shape)


def close(t, ref, tol=1e-12):
    np.testing.assert_allclose(_np(t), np.asarray(ref, dtype=np.float64), rtol=tol, atol=tol)


# ------------------------------------------------------------------ products
def test_addmm_family(device):
    inp, a, b = _r(2, 3), _r(2, 4), _r(4, 3)
    close(torch.addmm(_t(inp, device), _t(a, device), _t(b, device), beta=0.2, alpha=0.6),
          0.2 * inp + 0.6 * a @ b)
    close(_t(inp[0], device).addmm(_t(a, device), _t(b, device)), inp[0] + a @ b)
    # beta=0: NaN in the input is ignored
    nan = _t([math.nan, math.inf, 1.0], device)
    close(torch.addmm(nan, _t(a, device), _t(b, device), beta=0), a @ b)
    m, v = _r(5, 4), _r(4)
    close(torch.addmv(_t(_r(5) * 0, device), _t(m, device), _t(v, device), alpha=2), 2 * m @ v)
    v1, v2, i2 = _r(3), _r(4), _r(3, 4)
    close(torch.addr(_t(i2, device), _t(v1, device), _t(v2, device), beta=0.6, alpha=0.2),
          0.6 * i2 + 0.2 * np.outer(v1, v2))
    b1, b2, i3 = _r(3, 2, 4), _r(3, 4, 5), _r(3, 2, 5)
    close(torch.baddbmm(_t(i3, device), _t(b1, device), _t(b2, device), beta=0.5),
          0.5 * i3 + b1 @ b2)
    close(torch.addbmm(_t(i3[0], device), _t(b1, device), _t(b2, device), alpha=0.3),
          i3[0] + 0.3 * (b1 @ b2).sum(0))
    # in place
    x = _t(inp, device)
    y = x.addmm_(_t(a, device), _t(b, device), beta=2)
    assert y is x
    close(x, 2 * inp + a @ b)
    with pytest.raises(torch.ShapeError, match="addmm_"):
        _t(inp[0], device).addmm_(_t(a, device), _t(b, device))


def test_addmm_grads(device):
    inp, a, b = _r(3), _r(2, 4), _r(4, 3)
    ti, ta, tb = _t(inp, device, True), _t(a, device, True), _t(b, device, True)
    g = _r(2, 3)
    (torch.addmm(ti, ta, tb, beta=0.2, alpha=0.6) * _t(g, device)).sum().backward()
    close(ti.grad, 0.2 * g.sum(0))
    close(ta.grad, 0.6 * g @ b.T)
    close(tb.grad, 0.6 * a.T @ g)


def test_products(device):
    m, v, w = _r(5, 4), _r(4), _r(4)
    close(torch.mv(_t(m, device), _t(v, device)), m @ v)
    close(_t(v, device).dot(_t(w, device)), v @ w)
    close(torch.vdot(_t(v, device), _t(w, device)), v @ w)
    close(torch.outer(_t(v, device), _t(w[:3], device)), np.outer(v, w[:3]))
    close(torch.ger(_t(v, device), _t(w[:3], device)), np.outer(v, w[:3]))
    a, b = _r(2, 3), _r(4, 3)
    close(torch.inner(_t(a, device), _t(b, device)), np.inner(a, b))
    close(torch.inner(_t(2.0, device), _t(b, device)), 2 * b)
    x, y = _r(2, 3, 4), _r(3, 4, 5)
    close(torch.tensordot(_t(x, device), _t(y, device)), np.tensordot(x, y, 2))
    close(torch.tensordot(_t(x, device), _t(y, device), dims=([1, 2], [0, 1])),
          np.tensordot(x, y, ([1, 2], [0, 1])))
    close(torch.tensordot(_t(x, device), _t(y, device), dims=1) if False else
          torch.tensordot(_t(x, device), _t(y.transpose(1, 0, 2), device), dims=([1], [1])),
          np.tensordot(x, y.transpose(1, 0, 2), ([1], [1])))
    p, q = _r(2, 3), _r(4, 5)
    close(torch.kron(_t(p, device), _t(q, device)), np.kron(p, q))
    close(torch.trace(_t(_r(3, 5) * 0 + np.arange(15).reshape(3, 5), device)), 0 + 6 + 12)
    mats = [_r(3), _r(3, 4), _r(4, 2), _r(2, 5)]
    close(torch.linalg.multi_dot([_t(z, device) for z in mats]),
          np.linalg.multi_dot(mats))
    c = [_r(2, 3), _r(3, 3), _r(3, 4)]
    close(torch.chain_matmul(*[_t(z, device) for z in c]), c[0] @ c[1] @ c[2])


def test_transposes(device):
    x = _r(2, 3, 4)
    t = _t(x, device)
    close(t.mT, x.transpose(0, 2, 1))
    close(t.mH, x.transpose(0, 2, 1))
    close(t.T, x.transpose(2, 1, 0))
    close(_t(x[0], device).H, x[0].T)
    with pytest.raises(RuntimeError, match="mT"):
        _t(x[0, 0], device).mT
    with pytest.raises(RuntimeError, match="H"):
        t.H


def test_product_errors(device):
    with pytest.raises(torch.ShapeError, match="dot"):
        torch.dot(_t(_r(3), device), _t(_r(4), device))
    with pytest.raises(torch.ArgumentError, match="alpha"):
        torch.addmm(torch.ones(2, 2, dtype=torch.int64), torch.ones(2, 2, dtype=torch.int64),
                    torch.ones(2, 2, dtype=torch.int64), alpha=0.5)
    with pytest.raises(torch.ShapeError, match="contracted dimensions"):
        torch.tensordot(_t(_r(2, 3), device), _t(_r(4, 3), device), dims=([0], [0]))


# ------------------------------------------------------------------ norms
ORDS = [0, 1, 2, 3.5, 0.5, -1, math.inf, -math.inf]


def _vnorm(x, p, axis=None, keepdims=False):
    a = np.abs(x)
    if p == 0:
        return (a != 0).sum(axis=axis, keepdims=keepdims).astype(np.float64)
    if p == math.inf:
        return a.max(axis=axis, keepdims=keepdims)
    if p == -math.inf:
        return a.min(axis=axis, keepdims=keepdims)
    return (a ** p).sum(axis=axis, keepdims=keepdims) ** (1 / p)


@pytest.mark.parametrize("p", ORDS)
def test_vector_norm(device, p):
    x = _r(3, 4)
    t = _t(x, device)
    close(torch.linalg.vector_norm(t, p), _vnorm(x, p))
    close(torch.linalg.vector_norm(t, p, dim=1, keepdim=True), _vnorm(x, p, 1, True))
    close(torch.linalg.vector_norm(t, p, dim=(0, 1)), _vnorm(x, p))
    close(torch.norm(t, p, dim=0), _vnorm(x, p, 0))
    close(t.norm(p=p, dim=-1), _vnorm(x, p, -1))


def test_norm_gradients_at_zero(device):
    for p in (2, 3, 0.5, 1.5):
        z = _t([0.0, 0.0, 0.0], device, True)
        torch.linalg.vector_norm(z, p).backward()
        assert z.grad.tolist() == [0.0, 0.0, 0.0]
    z = _t([-2.0, 1.0, 2.0], device, True)
    torch.linalg.vector_norm(z, math.inf).backward()
    assert z.grad.tolist() == [-0.5, 0.0, 0.5]
    x = _r(4)
    z = _t(x, device, True)
    torch.linalg.vector_norm(z, 3).backward()
    close(z.grad, x * np.abs(x) / np.linalg.norm(x, 3) ** 2)


def test_matrix_norms(device):
    x = _r(2, 3, 4)
    t = _t(x, device)
    for ord in ("fro", 1, -1, math.inf, -math.inf):
        ref = np.stack([np.linalg.norm(m, ord) for m in x])
        close(torch.linalg.matrix_norm(t, ord), ref)
        close(torch.linalg.norm(t, ord, dim=(1, 2)), ref)
    close(torch.linalg.norm(t), np.linalg.norm(x.ravel()))
    close(torch.norm(t), np.linalg.norm(x.ravel()))
    close(torch.norm(t, "fro", dim=(1, 2)), [np.linalg.norm(m) for m in x])
    close(torch.linalg.norm(_t(x[0], device), 1), np.linalg.norm(x[0], 1))
    for ord in ("nuc", 2, -2):  # from linalg.svdvals
        close(torch.linalg.matrix_norm(t, ord), np.stack([np.linalg.norm(m, ord) for m in x]))
    with pytest.raises(torch.DtypeError, match="floating point"):
        torch.linalg.vector_norm(torch.ones(3, dtype=torch.int64))


def test_normalize_and_moments(device):
    x = _r(2, 3, 4)
    t = _t(x, device)
    close(F.normalize(t), x / np.linalg.norm(x, axis=1, keepdims=True))
    close(F.normalize(t, p=1, dim=-1), x / np.abs(x).sum(-1, keepdims=True))
    v, m = torch.var_mean(t, dim=1)
    close(v, x.var(1, ddof=1)), close(m, x.mean(1))
    v, m = torch.var_mean(t, 1, False, True)
    close(v, x.var(1, ddof=0, keepdims=True)), close(m, x.mean(1, keepdims=True))
    s, m = torch.std_mean(t, correction=2)
    close(s, x.std(ddof=2)), close(m, x.mean())
    s, m = torch.std_mean(t, True)
    close(s, x.std(ddof=1))
    r = torch.aminmax(t, dim=2, keepdim=True)
    close(r.min, x.min(2, keepdims=True)), close(r.max, x.max(2, keepdims=True))
    lo, hi = t.aminmax()
    close(lo, x.min()), close(hi, x.max())
    z = torch.tensor([[0, 1, 2], [0, 0, 3]], device=device)
    assert torch.count_nonzero(z).tolist() == 3
    assert z.count_nonzero(dim=1).tolist() == [2, 1]
    assert torch.count_nonzero(z, dim=(0, 1)).tolist() == 3


def test_distances(device):
    a, b = _r(5, 4), _r(5, 4)
    ta, tb = _t(a, device), _t(b, device)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    close(F.cosine_similarity(ta, tb), cos)
    close(torch.cosine_similarity(ta, tb, dim=1), cos)
    close(F.pairwise_distance(ta, tb), np.linalg.norm(a - b + 1e-6, axis=1))
    close(F.pairwise_distance(ta, tb, p=1, keepdim=True),
          np.abs(a - b + 1e-6).sum(1, keepdims=True))
    c = _r(3, 4)
    for p in (0, 1, 2, 3, 0.5, math.inf):
        ref = np.array([[_vnorm(a[i] - c[j], p) for j in range(3)] for i in range(5)])
        close(torch.cdist(ta, _t(c, device), p=p), ref)
    # batched, broadcast
    xb, yb = _r(2, 1, 3, 2), _r(2, 4, 2)
    ref = np.linalg.norm(xb[..., :, None, :] - yb[..., None, :, :], axis=-1)
    close(torch.cdist(_t(xb, device), _t(yb, device)), ref)
    # the gradient of the 2-norm distance at a zero distance is 0 (PyTorch)
    x = _t([[1.0, 2.0]], device, True)
    torch.cdist(x, _t([[1.0, 2.0]], device)).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0]]


def test_cosine_similarity_grad(device):
    a, b = _r(3, 4), _r(3, 4)
    ta, tb = _t(a, device, True), _t(b, device, True)
    F.cosine_similarity(ta, tb).sum().backward()
    na, nb = np.linalg.norm(a, axis=1, keepdims=True), np.linalg.norm(b, axis=1, keepdims=True)
    cos = (a * b).sum(1, keepdims=True) / (na * nb)
    close(ta.grad, b / (na * nb) - cos * a / na ** 2, 1e-10)
