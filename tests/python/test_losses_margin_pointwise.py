"""The other losses (issue 52: kl_div, huber, soft_margin, margin_ranking, hinge_embedding,
cosine_embedding, triplet_margin(_with_distance), poisson_nll, gaussian_nll, multilabel_margin,
multilabel_soft_margin, multi_margin) and their nn modules against NumPy float64 references of
PyTorch's formulas, on cpu and sim:0, with gradients against central differences."""
import math

import numpy as np
import pytest

import tessera as torch
import tessera.nn as nn
import tessera.nn.functional as F


def t(a, device="cpu", grad=False, dtype=np.float64):
    x = torch.from_numpy(np.ascontiguousarray(a, dtype=dtype)).clone().to(device)
    if grad:
        x.requires_grad_(True)
    return x


def arr(n, *shape):
    return np.sin(np.arange(1, math.prod(shape) + 1) * 0.37 * n).reshape(shape) * 2


def red(loss, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction](loss)


def check(got, want, tol=1e-10):
    g = got.detach().to("cpu").numpy()
    want = np.asarray(want, dtype=np.float64)
    assert g.shape == want.shape, (g.shape, want.shape)
    np.testing.assert_allclose(g, want, rtol=tol, atol=tol)


def softplus(x):
    return np.logaddexp(0, x)


def pdist(a, b, p=2.0, eps=1e-6):
    return (np.abs(a - b + eps) ** p).sum(-1) ** (1 / p)


A, B, C = arr(1, 3, 4), arr(2, 3, 4), arr(3, 3, 4)
Y = np.array([[1., -1, -1, 1], [1, 1, -1, 1], [-1, 0, 1, -1]])
REDS = ["mean", "sum", "none"]


def numgrad(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += h
        xm[i] -= h
        g[i] = (f(xp) - f(xm)) / (2 * h)
    return g


def grad_of(fn_t, x, device):
    xt = t(x, device, grad=True)
    fn_t(xt).sum().backward()
    return xt.grad.to("cpu").numpy()


# ------------------------------------------------------------------ kl_div
@pytest.mark.parametrize("reduction", REDS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(device, reduction, log_target):
    li = A - np.log(np.exp(A).sum(1, keepdims=True))
    p = np.exp(B) / np.exp(B).sum(1, keepdims=True)
    p[0, 1] = 0  # target * log(target) is 0 at 0
    tg = np.log(np.exp(B) / np.exp(B).sum(1, keepdims=True)) if log_target else p
    loss = np.exp(tg) * (tg - li) if log_target else \
        np.where(tg == 0, 0, tg * np.log(np.where(tg == 0, 1, tg))) - tg * li
    want = loss.sum() / 3 if reduction == "batchmean" else red(loss, reduction)
    check(F.kl_div(t(li, device), t(tg, device), reduction=reduction, log_target=log_target),
          want)
    check(nn.KLDivLoss(reduction=reduction, log_target=log_target)(t(li, device), t(tg, device)),
          want)


def test_kl_div_legacy_and_grad(device):
    li, p = -np.abs(A), np.abs(B) / 4
    check(F.kl_div(t(li), t(p), size_average=False), (p * np.log(p) - p * li).sum())
    check(F.kl_div(t(li), t(p), reduce=False), p * np.log(p) - p * li)
    g = grad_of(lambda x: F.kl_div(x, t(p, device), reduction="batchmean"), li, device)
    np.testing.assert_allclose(g, -p / 3, rtol=1e-12)


# ------------------------------------------------------------------ huber / soft margin
@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("delta", [0.5, 1.0, 2.5])
def test_huber(device, reduction, delta):
    z = np.abs(A - B)
    loss = np.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta))
    check(F.huber_loss(t(A, device), t(B, device), reduction=reduction, delta=delta),
          red(loss, reduction))
    check(nn.HuberLoss(reduction=reduction, delta=delta)(t(A, device), t(B, device)),
          red(loss, reduction))
    w = np.abs(C)
    check(F.huber_loss(t(A, device), t(B, device), reduction=reduction, delta=delta,
                       weight=t(w, device)), red(loss * w, reduction))
    g = grad_of(lambda x: F.huber_loss(x, t(B, device), reduction="sum", delta=delta), A, device)
    np.testing.assert_allclose(g, np.clip(A - B, -delta, delta), rtol=1e-12)


def test_huber_errors():
    with pytest.raises(Exception, match="delta"):
        F.huber_loss(t(A), t(B), delta=0.0)
    with pytest.raises(Exception, match="same size"):
        F.huber_loss(t(A), t(B), weight=t(A[0]))


@pytest.mark.parametrize("reduction", REDS)
def test_soft_margin(device, reduction):
    want = red(softplus(-A * Y), reduction)
    check(F.soft_margin_loss(t(A, device), t(Y, device), reduction=reduction), want)
    check(nn.SoftMarginLoss(reduction=reduction)(t(A, device), t(Y, device)), want)
    g = grad_of(lambda x: F.soft_margin_loss(x, t(Y, device), reduction="sum"), A, device)
    np.testing.assert_allclose(g, numgrad(lambda x: softplus(-x * Y).sum(), A), rtol=1e-6)


# ------------------------------------------------------------------ margin / embedding losses
@pytest.mark.parametrize("reduction", REDS)
def test_margin_ranking(device, reduction):
    y = np.array([1., -1, 1, -1])
    want = red(np.maximum(0, -y * (A[0] - B[0]) + 0.4), reduction)
    check(F.margin_ranking_loss(t(A[0], device), t(B[0], device), t(y, device), margin=0.4,
                                reduction=reduction), want)
    check(nn.MarginRankingLoss(0.4, reduction=reduction)(t(A[0], device), t(B[0], device),
                                                         t(y, device)), want)
    with pytest.raises(Exception, match="same dimension"):
        F.margin_ranking_loss(t(A), t(B), t(y))


@pytest.mark.parametrize("reduction", REDS)
def test_hinge_embedding(device, reduction):
    loss = np.where(Y != 1, np.maximum(0, 1.5 - A), 0) + np.where(Y != -1, A, 0)
    check(F.hinge_embedding_loss(t(A, device), t(Y, device), margin=1.5, reduction=reduction),
          red(loss, reduction))
    check(nn.HingeEmbeddingLoss(1.5, reduction=reduction)(t(A, device), t(Y, device)),
          red(loss, reduction))


@pytest.mark.parametrize("reduction", REDS)
def test_cosine_embedding(device, reduction):
    y = np.array([1., -1, 1])
    cos = (A * B).sum(1) / np.sqrt(((A * A).sum(1) + 1e-12) * ((B * B).sum(1) + 1e-12))
    loss = np.where(y == 1, 1 - cos, 0) + np.where(y == -1, np.maximum(0, cos - 0.1), 0)
    check(F.cosine_embedding_loss(t(A, device), t(B, device), t(y, device), margin=0.1,
                                  reduction=reduction), red(loss, reduction))
    check(nn.CosineEmbeddingLoss(0.1, reduction=reduction)(t(A, device), t(B, device),
                                                           t(y, device)), red(loss, reduction))
    with pytest.raises(Exception, match="1D target tensor expects 2D input"):
        F.cosine_embedding_loss(t(A[0]), t(B[0]), t(y))


@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("p,swap", [(2.0, False), (1.0, True), (3.0, True)])
def test_triplet_margin(device, reduction, p, swap):
    dn = pdist(A, C, p)
    if swap:
        dn = np.minimum(dn, pdist(B, C, p))
    want = red(np.maximum(0, 0.8 + pdist(A, B, p) - dn), reduction)
    args = [t(A, device), t(B, device), t(C, device)]
    check(F.triplet_margin_loss(*args, margin=0.8, p=p, swap=swap, reduction=reduction), want)
    check(nn.TripletMarginLoss(0.8, p, swap=swap, reduction=reduction)(*args), want)
    if p == 2.0:
        check(F.triplet_margin_with_distance_loss(*args, margin=0.8, swap=swap,
                                                  reduction=reduction), want)
        check(nn.TripletMarginWithDistanceLoss(margin=0.8, swap=swap, reduction=reduction)(*args),
              want)


def test_triplet_with_distance_function(device):
    def l1(a, b):
        return (a - b).abs().sum(-1)
    pos = C + 0.1 * B  # near the negative: the swap picks d(positive, negative)
    dn = np.minimum(np.abs(A - C).sum(-1), np.abs(pos - C).sum(-1))
    assert (np.abs(pos - C).sum(-1) < np.abs(A - C).sum(-1)).any()
    want = np.maximum(0, 1.0 + np.abs(A - pos).sum(-1) - dn).mean()
    args = [t(A, device), t(pos, device), t(C, device)]
    check(F.triplet_margin_with_distance_loss(*args, distance_function=l1, swap=True), want)
    with pytest.raises(ValueError, match="margin"):
        F.triplet_margin_with_distance_loss(*args, margin=0)
    with pytest.raises(Exception, match="same number of dimensions"):
        F.triplet_margin_loss(t(A), t(B), t(C[0]))


# ------------------------------------------------------------------ poisson / gaussian
@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("log_input,full", [(True, False), (True, True), (False, True)])
def test_poisson_nll(device, reduction, log_input, full):
    tg = np.abs(B) * 2
    tg[0, 0] = 0
    x = A if log_input else np.exp(A)
    loss = np.exp(x) - tg * x if log_input else x - tg * np.log(x + 1e-8)
    if full:
        tc = np.where(tg > 1, tg, 1)
        st = tg * np.log(tc) - tg + 0.5 * np.log(2 * np.pi * tc)
        loss = loss + np.where(tg > 1, st, 0)
    want = red(loss, reduction)
    check(F.poisson_nll_loss(t(x, device), t(tg, device), log_input=log_input, full=full,
                             reduction=reduction), want)
    check(nn.PoissonNLLLoss(log_input, full, reduction=reduction)(t(x, device), t(tg, device)),
          want)


@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("full", [False, True])
def test_gaussian_nll(device, reduction, full):
    v = np.abs(C) + 0.1
    v[1, 2] = 1e-9  # clamped to eps
    vc = np.maximum(v, 1e-6)
    loss = 0.5 * (np.log(vc) + (A - B) ** 2 / vc) + (0.5 * math.log(2 * math.pi) if full else 0)
    check(F.gaussian_nll_loss(t(A, device), t(B, device), t(v, device), full=full,
                              reduction=reduction), red(loss, reduction))
    check(nn.GaussianNLLLoss(full=full, reduction=reduction)(t(A, device), t(B, device),
                                                            t(v, device)), red(loss, reduction))
    # homoscedastic: var without the last dim, or with it 1
    vh = vc[:, :1]
    lh = 0.5 * (np.log(vh) + (A - B) ** 2 / vh) + (0.5 * math.log(2 * math.pi) if full else 0)
    check(F.gaussian_nll_loss(t(A, device), t(B, device), t(v[:, 0], device), full=full,
                              reduction=reduction), red(lh, reduction))
    check(F.gaussian_nll_loss(t(A, device), t(B, device), t(v[:, :1], device), full=full,
                              reduction=reduction), red(lh, reduction))


def test_gaussian_nll_grad_through_clamp(device):
    v = np.abs(C) + 0.1
    v[1, 2] = 1e-9
    vc = np.maximum(v, 1e-6)
    vt = t(v, device, grad=True)
    F.gaussian_nll_loss(t(A, device), t(B, device), vt, reduction="sum").backward()
    # d/dv at the clamped value, passed on as if unclamped (PyTorch clamps a clone in no_grad)
    np.testing.assert_allclose(vt.grad.to("cpu").numpy(),
                               0.5 * (1 / vc - (A - B) ** 2 / vc ** 2), rtol=1e-9)


def test_gaussian_nll_errors():
    with pytest.raises(Exception, match="var is of incorrect size"):
        F.gaussian_nll_loss(t(A), t(B), t(np.ones((3, 2))))
    with pytest.raises(Exception, match="negative"):
        F.gaussian_nll_loss(t(A), t(B), t(B))
    with pytest.raises(ValueError, match="not valid"):
        F.gaussian_nll_loss(t(A), t(B), t(np.abs(B)), reduction="bad")
    check(F.gaussian_nll_loss(t(A), t(B), 0.5), (0.5 * (np.log(0.5) + (A - B) ** 2 / 0.5)).mean())


# ------------------------------------------------------------------ class-index margin losses
def mlm_ref(x, y):
    out = []
    for xi, yi in zip(np.atleast_2d(x), np.atleast_2d(y)):
        tg = []
        for v in yi:
            if v < 0:
                break
            tg.append(v)
        s = 0.0
        for j in tg:
            for i in range(len(xi)):
                if i not in tg:
                    s += max(0.0, 1 - (xi[j] - xi[i]))
        out.append(s / len(xi))
    return np.array(out)


MT = np.array([[3, 0, -1, 1], [0, 1, 2, 3], [2, -1, 0, 0]])


@pytest.mark.parametrize("reduction", REDS)
def test_multilabel_margin(device, reduction):
    want = red(mlm_ref(A, MT), reduction)
    mt = t(MT, device, dtype=np.int64)
    check(F.multilabel_margin_loss(t(A, device), mt, reduction=reduction), want)
    check(nn.MultiLabelMarginLoss(reduction=reduction)(t(A, device), mt), want)
    one = F.multilabel_margin_loss(t(A[0], device), t(MT[0], device, dtype=np.int64),
                                   reduction=reduction)
    check(one, mlm_ref(A[0], MT[0])[0])  # 0-dim, even with reduction none
    g = grad_of(lambda x: F.multilabel_margin_loss(x, mt, reduction="sum"), A, device)
    np.testing.assert_allclose(g, numgrad(lambda x: mlm_ref(x, MT).sum(), A), atol=1e-6)


def test_multilabel_margin_errors():
    with pytest.raises(Exception, match="target out of range"):
        F.multilabel_margin_loss(t(A), t(MT + 2, dtype=np.int64))
    with pytest.raises(Exception, match="inconsistent target size"):
        F.multilabel_margin_loss(t(A), t(MT[:2], dtype=np.int64))


@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("weighted", [False, True])
def test_multilabel_soft_margin(device, reduction, weighted):
    z = (Y > 0).astype(np.float64)
    w = np.array([0.5, 1.0, 2.0, 1.5])
    loss = z * softplus(-A) + (1 - z) * softplus(A)
    if weighted:
        loss = loss * w
    want = red(loss.sum(1) / 4, reduction)
    wt = t(w, device) if weighted else None
    check(F.multilabel_soft_margin_loss(t(A, device), t(z, device), weight=wt,
                                        reduction=reduction), want)
    check(nn.MultiLabelSoftMarginLoss(wt, reduction=reduction)(t(A, device), t(z, device)), want)


def mm_ref(x, y, p=1, margin=1.0, w=None):
    x = np.atleast_2d(x)
    out = []
    for xi, yi in zip(x, np.atleast_1d(y)):
        s = 0.0
        for i in range(len(xi)):
            if i != yi:
                z = max(0.0, margin - xi[yi] + xi[i]) ** p
                s += z * (w[yi] if w is not None else 1)
        out.append(s / len(xi))
    return np.array(out)


@pytest.mark.parametrize("reduction", REDS)
@pytest.mark.parametrize("p,margin,weighted", [(1, 1.0, False), (2, 0.7, True), (1, 2.0, True)])
def test_multi_margin(device, reduction, p, margin, weighted):
    y = np.array([3, 0, 2])
    w = np.array([0.5, 1.0, 2.0, 1.5])
    wt = t(w, device) if weighted else None
    want = red(mm_ref(A, y, p, margin, w if weighted else None), reduction)
    yt = t(y, device, dtype=np.int64)
    check(F.multi_margin_loss(t(A, device), yt, p=p, margin=margin, weight=wt,
                              reduction=reduction), want)
    check(nn.MultiMarginLoss(p, margin, wt, reduction=reduction)(t(A, device), yt), want)
    g = grad_of(lambda x: F.multi_margin_loss(x, yt, p=p, margin=margin, weight=wt,
                                              reduction="sum"), A, device)
    np.testing.assert_allclose(
        g, numgrad(lambda x: mm_ref(x, y, p, margin, w if weighted else None).sum(), A),
        atol=1e-6)


def test_multi_margin_errors():
    y = t(np.array([3, 0, 2]), dtype=np.int64)
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        F.multi_margin_loss(t(A), y, p=3)
    with pytest.raises(ValueError, match="one-dimensional"):
        F.multi_margin_loss(t(A), y, weight=t(A))
    with pytest.raises(Exception, match="target out of range"):
        F.multi_margin_loss(t(A), t(np.array([4, 0, 2]), dtype=np.int64))
    with pytest.raises(Exception, match="inconsistent target size"):
        F.multi_margin_loss(t(A), t(np.array([1, 0]), dtype=np.int64))


def test_legacy_reduction_arguments():
    li, p = -np.abs(A), np.abs(B) / 4
    assert nn.SoftMarginLoss(size_average=False).reduction == "sum"
    assert nn.MultiMarginLoss(reduce=False).reduction == "none"
    check(F.soft_margin_loss(t(A), t(Y), size_average=False), softplus(-A * Y).sum())
    check(F.hinge_embedding_loss(t(A), t(Y), reduce=False),
          np.where(Y != 1, np.maximum(0, 1 - A), 0) + np.where(Y != -1, A, 0))
    assert nn.KLDivLoss(reduction="batchmean").reduction == "batchmean"
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.soft_margin_loss(t(A), t(Y), reduction="bad")
    check(F.kl_div(t(li), t(p), reduction="sum"), (p * np.log(p) - p * li).sum())
