"""torch.svd_lowrank / torch.pca_lowrank (src/ops/linalg_lowrank.c),
torch.ops.aten.max_pool2d_with_indices_backward (src/nn/pool.c) and nn.LinearCrossEntropyLoss /
F.linear_cross_entropy (src/nn/loss_linear_ce.c) from Python, against NumPy float64 references;
every test on cpu and sim:0."""
import math

import numpy as np
import pytest

import tessera
import tessera.nn as nn
import tessera.nn.functional as F


def t64(a, device):
    return tessera.from_numpy(np.ascontiguousarray(a, dtype=np.float64)).to(device)


def rng(seed):
    return np.random.default_rng(seed)


# ------------------------------------------------------------------ svd_lowrank / pca_lowrank
@pytest.mark.parametrize("shape,k,q", [((7, 5), 2, 2), ((2, 4, 9), 3, 3), ((3, 6, 6), 2, 4),
                                       ((5, 3), 2, 6)])
def test_svd_lowrank_exact_rank(device, shape, k, q):
    r = rng(1)
    *batch, m, n = shape
    a, b = r.standard_normal((*batch, m, k)), r.standard_normal((*batch, n, k))
    A = a @ np.swapaxes(b, -1, -2)
    tessera.manual_seed(5)
    U, S, V = tessera.svd_lowrank(t64(A, device), q=q)
    kk = min(q, m, n)
    assert tuple(U.shape) == (*batch, m, kk) and tuple(S.shape) == (*batch, kk)
    assert tuple(V.shape) == (*batch, n, kk) and U.device == tessera.device(device)
    u, s, v = U.cpu().numpy(), S.cpu().numpy(), V.cpu().numpy()
    rec = (u * s[..., None, :]) @ np.swapaxes(v, -1, -2)
    assert np.abs(rec - A).max() < 1e-10 * max(1.0, np.abs(A).max())
    ref = np.linalg.svd(A, compute_uv=False)[..., :kk]
    ref[..., k:] = 0
    assert np.abs(s - ref).max() < 1e-10 * ref.max()


def test_svd_lowrank_M_and_pca(device):
    r = rng(2)
    a, b = r.standard_normal((8, 2)), r.standard_normal((5, 2))
    A = a @ b.T
    M = r.standard_normal(5)
    U, S, V = tessera.svd_lowrank(t64(A + M, device), q=2, M=t64(M, device))
    rec = (U.cpu().numpy() * S.cpu().numpy()) @ V.cpu().numpy().T
    assert np.abs(rec - A).max() < 1e-10
    # pca: the column means removed (q None: min(6, m, n) = 5 columns)
    B = A + np.arange(1.0, 6.0)
    U, S, V = tessera.pca_lowrank(t64(B, device))
    assert tuple(U.shape) == (8, 5)
    rec = (U.cpu().numpy() * S.cpu().numpy()) @ V.cpu().numpy().T
    assert np.abs(rec - (B - B.mean(0))).max() < 1e-10
    U, S, V = tessera.pca_lowrank(t64(A, device), q=2, center=False)
    assert np.allclose(S.cpu().numpy(), np.linalg.svd(A, compute_uv=False)[:2], rtol=1e-10)


def test_svd_lowrank_grad(device):
    r = rng(3)
    a = t64(r.standard_normal((5, 2)), device).requires_grad_(True)
    b = t64(r.standard_normal((4, 2)), device).requires_grad_(True)

    def f(a, b):
        tessera.manual_seed(0)
        U, S, V = tessera.svd_lowrank(a @ b.mT, q=2)
        return (U @ V.mT).sum() + (S * S).sum()
    f(a, b).backward()
    ga, gb = a.grad.cpu().numpy(), b.grad.cpu().numpy()
    # d/da of ||a b^T||_F^2 = 2 a (b^T b); U V^T's part by central differences
    an, bn = a.detach().cpu().numpy(), b.detach().cpu().numpy()

    def num(x, which):
        g = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            d = np.zeros_like(x)
            d[i] = 1e-6
            lo = [an, bn]
            hi = [an, bn]
            lo[which], hi[which] = x - d, x + d
            g[i] = (f(t64(hi[0], device), t64(hi[1], device)).item()
                    - f(t64(lo[0], device), t64(lo[1], device)).item()) / 2e-6
        return g
    assert np.abs(ga - num(an, 0)).max() < 1e-5
    assert np.abs(gb - num(bn, 1)).max() < 1e-5


def test_lowrank_errors():
    A = tessera.randn(5, 4)
    with pytest.raises(ValueError, match="q"):
        tessera.svd_lowrank(A, q=-1)
    with pytest.raises(RuntimeError, match=r"q\(=5\) must be non-negative integer and not greater"):
        tessera.pca_lowrank(A, q=5)
    with pytest.raises(RuntimeError, match=r"niter\(=-1\)"):
        tessera.pca_lowrank(A, niter=-1)
    with pytest.raises(RuntimeError, match="svd_lowrank: M of shape"):
        tessera.svd_lowrank(A, q=2, M=tessera.randn(3))


# ------------------------------------------------------------------ max_pool2d_with_indices_backward
def test_aten_max_pool2d_backward(device):
    r = rng(4)
    x = t64(r.standard_normal((2, 3, 7, 6)), device).requires_grad_(True)
    out, idx = F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
    g = t64(r.standard_normal(tuple(out.shape)), device)
    op = tessera.ops.aten.max_pool2d_with_indices_backward
    gx = op.default(g, x, [3, 3], [2, 2], [1], [1], False, idx)
    # NumPy: g added at each flat index of its plane
    ref = np.zeros((6, 42))
    gi, ii = g.cpu().numpy().reshape(6, -1), idx.cpu().numpy().reshape(6, -1)
    for p in range(6):
        np.add.at(ref[p], ii[p], gi[p])
    assert np.abs(gx.detach().cpu().numpy().reshape(6, -1) - ref).max() < 1e-12
    # an empty stride is the kernel size; the packet itself calls .default
    assert tuple(op(g[:, :, :3, :3].contiguous(), x, 2, [], 0, 1, False,
                    F.max_pool2d(x, 2, return_indices=True)[1][:, :, :3, :3].contiguous()).shape) \
        == (2, 3, 7, 6)
    # its own gradient: a gather at the indices (grad_output), zero (self)
    g.requires_grad_(True)
    gx = op.default(g, x, 3, 2, 1, 1, False, idx)
    w = t64(r.standard_normal((2, 3, 7, 6)), device)
    (gx * w).sum().backward()
    want = np.take_along_axis(w.cpu().numpy().reshape(6, -1), ii, 1).reshape(out.shape)
    assert np.abs(g.grad.cpu().numpy() - want).max() < 1e-12
    assert float(x.grad.abs().sum()) == 0.0


def test_aten_max_pool2d_backward_errors():
    x = tessera.randn(1, 1, 4, 4)
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    with pytest.raises(RuntimeError, match="indices must lie in"):
        tessera.ops.aten.max_pool2d_with_indices_backward.default(
            tessera.ones_like(out), x, 2, 2, 0, 1, False, idx + 100)
    with pytest.raises(RuntimeError, match="kernel_size must either be a single int"):
        tessera.ops.aten.max_pool2d_with_indices_backward(
            tessera.ones_like(out), x, (2, 2, 2), 2, 0, 1, False, idx)


# ------------------------------------------------------------------ LinearCrossEntropyLoss
def np_lce(x, W, b, t, cw=None, ignore=-100, ls=0.0, reduction="mean", prob=False):
    z = x @ W.T + (0 if b is None else b)
    logp = z - z.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    C = W.shape[0]
    w = np.ones(C) if cw is None else cw
    if prob:
        y = t * (1 - ls) + ls / C
        rows = -(w * y * logp).sum(1)
        den = len(x)
    else:
        keep = t != ignore
        tc = np.where(keep, t, 0)
        wt = np.where(keep, w[tc], 0.0)
        rows = (1 - ls) * wt * -logp[np.arange(len(x)), tc] \
            + np.where(keep, ls / C * -(w * logp).sum(1), 0.0)
        den = wt.sum()
    return rows if reduction == "none" else rows.sum() if reduction == "sum" else rows.sum() / den


@pytest.mark.parametrize("options", [None, nn.LinearCrossEntropyOptions(batch_chunk_size=3),
                                     nn.LinearCrossEntropyOptions()])
@pytest.mark.parametrize("reduction,ii,ls,weighted", [("mean", None, 0.0, False),
                                                      ("mean", 1, 0.1, True),
                                                      ("sum", 9, 0.0, True),
                                                      ("none", -100, 0.2, False)])
def test_linear_cross_entropy_loss(device, options, reduction, ii, ls, weighted):
    r = rng(6)
    N, Fi, C = 8, 5, 4
    cw = np.exp(r.standard_normal(C)) if weighted else None
    m = nn.LinearCrossEntropyLoss(Fi, C, bias=True, dtype=tessera.float64, reduction=reduction,
                                  weight=None if cw is None else t64(cw, "cpu"), ignore_index=ii,
                                  label_smoothing=ls, options=options).to(device)
    assert sorted(k for k, _ in m.named_parameters()) == ["linear.bias", "linear.weight"]
    assert tuple(m.linear.weight.shape) == (C, Fi)
    x = t64(r.standard_normal((N, Fi)), device).requires_grad_(True)
    t = r.integers(0, C, N)
    if ii is not None:
        t[2] = ii
    y = m(x, tessera.from_numpy(t).to(device))
    W, b = m.linear.weight.detach().cpu().numpy(), m.linear.bias.detach().cpu().numpy()
    want = np_lce(x.detach().cpu().numpy(), W, b, t, cw, -100 if ii is None else ii, ls,
                  reduction)
    assert np.abs(y.detach().cpu().numpy() - want).max() < 1e-12
    # the gradient of x by central differences of the NumPy reference
    g = r.standard_normal(np.shape(want))
    (y * t64(g, device)).sum().backward()
    xn = x.detach().cpu().numpy()
    num = np.zeros_like(xn)
    for i in np.ndindex(xn.shape):
        d = np.zeros_like(xn)
        d[i] = 1e-6
        num[i] = ((np_lce(xn + d, W, b, t, cw, -100 if ii is None else ii, ls, reduction) * g).sum()
                  - (np_lce(xn - d, W, b, t, cw, -100 if ii is None else ii, ls, reduction)
                     * g).sum()) / 2e-6
    assert np.abs(x.grad.cpu().numpy() - num).max() < 1e-6


def test_linear_cross_entropy_prob_and_kdim(device):
    r = rng(7)
    x, W, b = r.standard_normal((6, 3)), r.standard_normal((4, 3)), r.standard_normal(4)
    p = np.abs(r.standard_normal((6, 4)))
    for opt in (None, nn.LinearCrossEntropyOptions(batch_chunk_size=4)):
        y = F.linear_cross_entropy(t64(x, device), t64(W, device), t64(p, device),
                                   linear_bias=t64(b, device), label_smoothing=0.1, options=opt)
        assert abs(y.item() - np_lce(x, W, b, p, ls=0.1, prob=True)) < 1e-12
    # K-dimensional: out_features (2, 3), the flat weight's state dict names
    m = nn.LinearCrossEntropyLoss(3, 4, out_features=(2, 3), bias=True, dtype=tessera.float64)
    assert tuple(m.linear.weight.shape) == (24, 3) and tuple(m.linear.bias.shape) == (24,)
    t = r.integers(0, 4, (5, 2, 3))
    xin = r.standard_normal((5, 3))
    y = m.to(device)(t64(xin, device), tessera.from_numpy(t).to(device))
    Wk = m.linear.weight.detach().cpu().numpy().reshape(4, 6, 3)
    bk = m.linear.bias.detach().cpu().numpy().reshape(4, 6)
    z = np.einsum("nf,cpf->ncp", xin, Wk) + bk
    lse = np.log(np.exp(z).sum(1))
    want = (lse - np.take_along_axis(z, t.reshape(5, 1, 6), 1)[:, 0]).mean()
    assert abs(y.item() - want) < 1e-12


def test_linear_cross_entropy_errors():
    m = nn.LinearCrossEntropyLoss(3, 2)
    with pytest.raises(RuntimeError, match="expected input with dimensionality 1 or 2, got 3"):
        m(tessera.randn(1, 4, 3), tessera.zeros(4, dtype=tessera.int64))
    with pytest.raises(RuntimeError, match="ignore_index cannot be specified"):
        F.linear_cross_entropy(tessera.randn(4, 3), tessera.randn(2, 3), tessera.rand(4, 2),
                               ignore_index=1)
    with pytest.raises(RuntimeError, match="expected weight shape to be"):
        nn.LinearCrossEntropyLoss(3, 2, weight=tessera.ones(3))
    with pytest.raises(RuntimeError, match="label_smoothing"):
        nn.LinearCrossEntropyLoss(3, 2, label_smoothing=1.5)
