"""test_nn_bilinear_bag_dropout.py — nn.Bilinear / F.bilinear, nn.EmbeddingBag / F.embedding_bag,
nn.CTCLoss / F.ctc_loss, nn.RReLU / F.rrelu, the alpha and feature dropouts (AlphaDropout,
FeatureAlphaDropout, Dropout1d/2d/3d): values and gradients against float64 NumPy references
written here (CTC's against a brute-force sum over every alignment), random ones against their
distributions; on cpu and sim:0.

Tolerances: float64 throughout; each reference sums the same few terms in another order
(differences ~1e-15), so 1e-12. Central differences (h = 1e-6, float64): truncation ~h^2 and
rounding ~1e-16 / h, far below the 1e-6 used. Random tests: counts against a binomial with a
7-sigma band (false alarm ~1e-12)."""
import itertools
import math

import numpy as np
import pytest

import tessera
import tessera.nn as nn
import tessera.nn.functional as F

TOL = 1e-12


@pytest.fixture(params=["cpu", "sim:0"])
def device(request):
    if request.param.startswith("sim") and tessera.sim.device_count() == 0:
        tessera.sim.configure(2)
    return request.param


def T(a, device, grad=False):
    t = tessera.from_numpy(np.ascontiguousarray(np.asarray(a))).to(device)
    return t.requires_grad_(True) if grad else t


def N(t):
    return t.detach().to("cpu").numpy()


# ---------------------------------------------------------------- bilinear
def test_bilinear_values_and_gradients(device):
    rng = np.random.default_rng(1)
    x1, x2 = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 5))
    w, b = rng.normal(size=(6, 4, 5)), rng.normal(size=6)
    g = rng.normal(size=(2, 3, 6))
    ts = [T(a, device, True) for a in (x1, x2, w, b)]
    y = F.bilinear(*ts)
    want = np.einsum("...i,oij,...j->...o", x1, w, x2) + b
    np.testing.assert_allclose(N(y), want, rtol=TOL, atol=TOL)
    (y * T(g, device)).sum().backward()
    grads = [np.einsum("...o,oij,...j->...i", g, w, x2), np.einsum("...o,oij,...i->...j", g, w, x1),
             np.einsum("abo,abi,abj->oij", g, x1, x2), g.sum((0, 1))]
    for t, want_g in zip(ts, grads):
        np.testing.assert_allclose(N(t.grad), want_g, rtol=TOL, atol=TOL)
    m = nn.Bilinear(4, 5, 6, bias=False, dtype=tessera.float64).to(device)
    assert [k for k, _ in m.named_parameters()] == ["weight"] and m.bias is None
    assert tuple(m.weight.shape) == (6, 4, 5)
    bound = 1 / math.sqrt(4)
    assert float(m.weight.abs().max()) <= bound
    y = m(T(x1[0], device), T(x2[0], device))
    np.testing.assert_allclose(N(y), np.einsum("bi,oij,bj->bo", x1[0], N(m.weight), x2[0]),
                               rtol=TOL, atol=TOL)
    assert repr(m) == "Bilinear(in1_features=4, in2_features=5, out_features=6, bias=False)"
    with pytest.raises(RuntimeError, match="input1 size"):
        F.bilinear(T(x2, device), T(x2, device), T(w, device))
    with pytest.raises(RuntimeError, match="batch dimensions"):
        F.bilinear(T(x1, device), T(x2[:1], device), T(w, device))


# ---------------------------------------------------------------- embedding_bag
def ref_bag(weight, bags, mode, psw=None, padding_idx=None):
    out = np.zeros((len(bags), weight.shape[1]))
    for r, bag in enumerate(bags):
        rows = [(k, i) for k, i in bag if i != padding_idx]
        if not rows:
            continue
        vecs = np.array([weight[i] * (psw[k] if psw is not None else 1.0) for k, i in rows])
        out[r] = vecs.sum(0) if mode == "sum" else vecs.mean(0) if mode == "mean" else \
            vecs.max(0)
    return out


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_offsets_and_2d(device, mode):
    rng = np.random.default_rng(2)
    w = rng.normal(size=(10, 3))
    inp = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0])
    offsets = np.array([0, 3, 3, 7])  # bag 1 is empty
    bags = [list(enumerate(inp))[s:e] for s, e in zip(offsets, list(offsets[1:]) + [len(inp)])]
    wt = T(w, device, True)
    y = F.embedding_bag(T(inp, device), wt, T(offsets, device), mode=mode, padding_idx=2)
    want = ref_bag(w, bags, mode, padding_idx=2)
    np.testing.assert_allclose(N(y), want, rtol=TOL, atol=TOL)
    g = rng.normal(size=want.shape)
    (y * T(g, device)).sum().backward()
    gw = np.zeros_like(w)
    for r, bag in enumerate(bags):
        rows = [i for _, i in bag if i != 2]
        if mode == "max" and rows:
            for d in range(w.shape[1]):
                gw[max(rows, key=lambda i: w[i, d]), d] += g[r, d]
        for i in rows if mode != "max" else []:
            gw[i] += g[r] / (len(rows) if mode == "mean" else 1)
    np.testing.assert_allclose(N(wt.grad), gw, rtol=TOL, atol=TOL)
    # include_last_offset and the 2-D form
    y2 = F.embedding_bag(T(inp, device), T(w, device), T(list(offsets) + [9], device), mode=mode,
                         include_last_offset=True)
    np.testing.assert_allclose(N(y2), ref_bag(w, bags, mode), rtol=TOL, atol=TOL)
    inp2 = inp[:8].reshape(2, 4)
    y3 = F.embedding_bag(T(inp2, device), T(w, device), mode=mode)
    bags2 = [list(enumerate(inp2[0])), list(enumerate(inp2[1]))]
    np.testing.assert_allclose(N(y3), ref_bag(w, bags2, mode), rtol=TOL, atol=TOL)


def test_embedding_bag_per_sample_weights_and_module(device):
    rng = np.random.default_rng(3)
    w, psw = rng.normal(size=(6, 4)), rng.normal(size=7)
    inp, offsets = np.array([0, 5, 5, 1, 2, 3, 0]), np.array([0, 2, 5])
    bag = nn.EmbeddingBag(6, 4, mode="sum", padding_idx=5, dtype=tessera.float64).to(device)
    assert float(bag.weight[5].abs().sum()) == 0.0  # the padding row starts at zero
    bag.load_state_dict({"weight": tessera.from_numpy(w)})
    pt = T(psw, device, True)
    y = bag(T(inp, device), T(offsets, device), per_sample_weights=pt)
    bags = [list(enumerate(inp))[s:e] for s, e in ((0, 2), (2, 5), (5, 7))]
    np.testing.assert_allclose(N(y), ref_bag(w, bags, "sum", psw, 5), rtol=TOL, atol=TOL)
    y.sum().backward()
    want_gp = np.array([0.0 if i == 5 else w[i].sum() for i in inp])
    np.testing.assert_allclose(N(pt.grad), want_gp, rtol=TOL, atol=TOL)
    assert repr(bag) == "EmbeddingBag(6, 4, mode='sum', padding_idx=5)"
    with pytest.raises(NotImplementedError, match="per_sample_weights"):
        F.embedding_bag(T(inp, device), T(w, device), T(offsets, device), mode="mean",
                        per_sample_weights=pt)
    with pytest.raises(RuntimeError, match="offsets\\[0\\]"):
        F.embedding_bag(T(inp, device), T(w, device), T([1, 2], device))
    with pytest.raises(ValueError, match="offsets has to be None"):
        F.embedding_bag(T(inp[:6].reshape(2, 3), device), T(w, device), T([0, 1], device))
    fp = nn.EmbeddingBag.from_pretrained(tessera.from_numpy(w), mode="max")
    assert not fp.weight.requires_grad
    np.testing.assert_allclose(N(fp(T(inp[:6].reshape(2, 3), "cpu"))),
                               np.stack([w[inp[:3]].max(0), w[inp[3:6]].max(0)]), rtol=TOL)


# ---------------------------------------------------------------- ctc
def ref_ctc(lp, target, blank=0):
    """-log sum over every alignment (path of T labels) that collapses to target"""
    t_len, c = lp.shape
    total = 0.0
    for path in itertools.product(range(c), repeat=t_len):
        col = [k for k, _ in itertools.groupby(path) if k != blank]
        if col == list(target):
            total += math.exp(sum(lp[t, k] for t, k in enumerate(path)))
    return -math.log(total) if total > 0 else math.inf


def log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_ctc_loss_matches_brute_force(device, reduction):
    rng = np.random.default_rng(4)
    t_len, n, c = 5, 4, 3
    logits = rng.normal(size=(t_len, n, c))
    targets = [[1, 2], [1, 1], [2], []]
    il, tl = [5, 4, 3, 2], [len(t) for t in targets]
    lp = log_softmax(logits)
    per = np.array([ref_ctc(lp[:il[b], b], targets[b]) for b in range(n)])
    want = per if reduction == "none" else per.sum() if reduction == "sum" else \
        (per / np.maximum(tl, 1)).mean()
    padded = np.array([t + [0] * (2 - len(t)) for t in targets])
    concat = np.array(sum(targets, []))
    for tg in (padded, concat):
        x = T(logits, device, True)
        loss = F.ctc_loss(x.log_softmax(2), T(tg, device), il, tl, reduction=reduction)
        np.testing.assert_allclose(N(loss), want, rtol=TOL, atol=TOL)
    # gradient through log_softmax against central differences of the brute force
    g = rng.normal(size=np.shape(want))
    (loss * T(g, device)).sum().backward()
    h = 1e-6

    def f(lg):
        lq = log_softmax(lg)
        p = np.array([ref_ctc(lq[:il[b], b], targets[b]) for b in range(n)])
        r = p if reduction == "none" else p.sum() if reduction == "sum" else \
            (p / np.maximum(tl, 1)).mean()
        return float((r * g).sum())
    num = np.zeros_like(logits)
    for idx in np.ndindex(*logits.shape):
        a, b = logits.copy(), logits.copy()
        a[idx] += h
        b[idx] -= h
        num[idx] = (f(a) - f(b)) / (2 * h)
    np.testing.assert_allclose(N(x.grad), num, rtol=1e-6, atol=1e-6)


def test_ctc_loss_gradient_is_pytorchs_and_infeasible(device):
    """the gradient with respect to log_probs is exp(log_probs) - occupancy, as PyTorch's"""
    rng = np.random.default_rng(5)
    lp = log_softmax(rng.normal(size=(5, 1, 3)))
    x = T(lp, device, True)  # 5 frames, the input length 4: the last frame's gradient is 0
    F.ctc_loss(x, T([[1, 2]], device), [4], [2], reduction="sum").backward()
    h, num = 1e-6, np.zeros_like(lp)
    for t, k in np.ndindex(4, 3):
        a, b = lp.copy(), lp.copy()
        a[t, 0, k] += h
        b[t, 0, k] -= h
        num[t, 0, k] = (ref_ctc(a[:4, 0], [1, 2]) - ref_ctc(b[:4, 0], [1, 2])) / (2 * h)
    want = np.exp(lp) + num
    want[4] = 0.0
    np.testing.assert_allclose(N(x.grad), want, rtol=1e-6, atol=1e-6)
    lp = lp[:4]
    # [1, 1] needs 3 frames: infeasible in 2 -> inf, or 0 with zero_infinity (and no gradient)
    y = T(lp[:2], device, True)
    assert math.isinf(float(F.ctc_loss(y, T([[1, 1]], device), [2], [2], reduction="sum")))
    z = nn.CTCLoss(zero_infinity=True)(y, T([[1, 1]], device), [2], [2])
    assert float(z) == 0.0
    z.backward()
    assert float(y.grad.abs().sum()) == 0.0
    # unbatched
    u = F.ctc_loss(T(lp[:, 0], device), T([1, 2], device), [4], [2], reduction="none")
    np.testing.assert_allclose(float(u), ref_ctc(lp[:, 0], [1, 2]), rtol=TOL)
    with pytest.raises(RuntimeError, match="blank"):
        F.ctc_loss(T(lp, device), T([[1]], device), [4], [1], blank=3)
    with pytest.raises(RuntimeError, match="input length"):
        F.ctc_loss(T(lp, device), T([[1]], device), [5], [1])


# ---------------------------------------------------------------- random activations, dropouts
def band(n, p):
    """a 7-sigma interval for a Binomial(n, p) count"""
    s = 7 * math.sqrt(n * p * (1 - p))
    return n * p - s, n * p + s


def test_rrelu(device):
    x = np.linspace(-3, 3, 20000)
    xt = T(x, device, True)
    np.testing.assert_allclose(N(F.rrelu(xt)), np.where(x >= 0, x, x * (1 / 8 + 1 / 3) / 2),
                               rtol=TOL, atol=TOL)
    m = nn.RReLU(0.1, 0.3)
    y = m(xt)
    neg = x < 0
    slope = N(y)[neg] / x[neg]
    assert slope.min() >= 0.1 and slope.max() <= 0.3
    sd = 0.2 / math.sqrt(12) / math.sqrt(neg.sum())
    assert abs(slope.mean() - 0.2) < 7 * sd
    np.testing.assert_array_equal(N(y)[~neg], x[~neg])
    y.sum().backward()
    np.testing.assert_allclose(N(xt.grad)[neg], slope, rtol=1e-12)
    m.eval()
    np.testing.assert_allclose(N(m(xt))[neg], x[neg] * 0.2, rtol=TOL)
    assert repr(m) == "RReLU(lower=0.1, upper=0.3)"


def test_alpha_dropouts(device):
    rng = np.random.default_rng(6)
    x = rng.normal(size=(40, 50, 3))
    p, alpha = 0.3, 1.7580993408473766
    a = 1 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    kept, dropped = a * x + alpha * a * p, -alpha * a * (1 - p)
    y = N(F.alpha_dropout(T(x, device), p, training=True))
    is_kept = np.isclose(y, kept, rtol=1e-12, atol=1e-12)
    is_dropped = np.isclose(y, dropped, rtol=1e-12, atol=1e-12)
    assert np.all(is_kept | is_dropped)
    lo, hi = band(x.size, p)
    assert lo < is_dropped.sum() < hi
    yf = N(nn.FeatureAlphaDropout(p)(T(x, device)))
    kf = np.isclose(yf, kept, rtol=1e-12, atol=1e-12).all(2)
    df = np.isclose(yf, dropped, rtol=1e-12, atol=1e-12).all(2)
    assert np.all(kf | df)  # whole channels [n, c, :]
    lo, hi = band(40 * 50, p)
    assert lo < df.sum() < hi
    np.testing.assert_array_equal(N(F.alpha_dropout(T(x, device), p)), x)  # training=False
    m = nn.AlphaDropout(p).eval()
    np.testing.assert_array_equal(N(m(T(x, device))), x)


@pytest.mark.filterwarnings("ignore:dropout2d")
@pytest.mark.parametrize("fn,cls,shape", [(F.dropout1d, nn.Dropout1d, (30, 40, 5)),
                                          (F.dropout2d, nn.Dropout2d, (30, 40, 2, 3)),
                                          (F.dropout3d, nn.Dropout3d, (30, 40, 2, 2, 2))])
def test_feature_dropouts(device, fn, cls, shape):
    rng = np.random.default_rng(7)
    x = rng.normal(size=shape) + 5.0  # no zeros of its own
    p = 0.4
    y = N(fn(T(x, device), p))
    flat_y, flat_x = y.reshape(30, 40, -1), x.reshape(30, 40, -1)
    zero = (flat_y == 0).all(2)
    scaled = np.isclose(flat_y, flat_x / (1 - p), rtol=1e-12).all(2)
    assert np.all(zero | scaled)
    lo, hi = band(30 * 40, p)
    assert lo < zero.sum() < hi
    # unbatched: [C, *]
    yu = N(cls(p)(T(x[0], device)))
    assert yu.shape == x[0].shape
    m = cls(p).eval()
    np.testing.assert_array_equal(N(m(T(x, device))), x)
    with pytest.raises(ValueError, match="between 0 and 1"):
        fn(T(x, device), 1.5)


def test_dropout1d_rejects_4d():
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
        F.dropout1d(tessera.randn(2, 3, 4, 5), 0.5)
