"""tessera.nn's 1-d / 3-d / adaptive / lp pooling, max unpooling, GroupNorm, InstanceNorm,
LocalResponseNorm, BatchNorm3d and the native_* norms against NumPy float64 references
(python/tessera/nn/functional_pool_norm.py, pool_norm.py; src/nn/pool_nd.c, group_norm.c)."""
import itertools
import math

import numpy as np
import pytest

import tessera
import tessera.nn as nn
import tessera.nn.functional as F

RNG = np.random.default_rng(52)


def t64(a, device, rg=False):
    return tessera.tensor(a.tolist(), dtype=tessera.float64, device=device, requires_grad=rg)


def arr(t):
    return np.array(t.to("cpu").tolist(), dtype=np.float64)


def ref_pool(x, nd, k, s, p, d, ceil, avg, include_pad=True, divisor=None):
    """PyTorch's loops over the last nd dims of x (N, C, *S): values and flat indices"""
    sp = x.shape[-nd:]
    outs = []
    for i in range(nd):
        span = sp[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1
        o = (-(-span // s[i]) if ceil else span // s[i]) + 1
        if ceil and (o - 1) * s[i] >= sp[i] + p[i]:
            o -= 1
        outs.append(o)
    lead = x.shape[:-nd]
    y = np.zeros(lead + tuple(outs))
    idx = np.zeros(lead + tuple(outs), dtype=np.int64)
    for li in itertools.product(*[range(n) for n in lead]):
        plane = x[li]
        for oi in itertools.product(*[range(o) for o in outs]):
            st = [oi[a] * s[a] - p[a] for a in range(nd)]
            vals, poss = [], []
            for ki in itertools.product(*[range(kk) for kk in k]):
                pos = [st[a] + ki[a] * d[a] for a in range(nd)]
                if all(0 <= pos[a] < sp[a] for a in range(nd)):
                    vals.append(plane[tuple(pos)])
                    poss.append(int(np.ravel_multi_index(pos, sp)))
            if avg:
                en = [min(st[a] + k[a], sp[a] + p[a]) for a in range(nd)]
                if divisor:
                    div = divisor
                elif include_pad:
                    div = math.prod(en[a] - st[a] for a in range(nd))
                else:
                    div = len(vals)
                y[li + oi] = sum(vals) / div
            else:
                j = int(np.argmax(vals))
                y[li + oi], idx[li + oi] = vals[j], poss[j]
    return y, idx


@pytest.mark.parametrize("nd,k,s,p,d,ceil", [
    (1, (3,), (2,), (1,), (2,), False), (1, (2,), (2,), (0,), (1,), True),
    (3, (2, 3, 2), (2, 1, 2), (1, 1, 0), (1, 1, 2), True), (3, (3, 2, 2), (3, 2, 2), (1, 1, 1),
                                                            (1, 1, 1), False)])
def test_max_pool(device, nd, k, s, p, d, ceil):
    x = RNG.standard_normal((2, 3) + (9, 5, 6)[-nd:] if nd == 1 else (2, 2, 4, 5, 6))
    fn = F.max_pool1d if nd == 1 else F.max_pool3d
    y, i = fn(t64(x, device), k, s, p, d, ceil, True)
    ry, ri = ref_pool(x, nd, k, s, p, d, ceil, False)
    assert y.shape == ry.shape and np.allclose(arr(y), ry, rtol=0, atol=1e-15)
    assert i.dtype == tessera.int64 and (arr(i) == ri).all()
    # the module, unbatched
    m = (nn.MaxPool1d if nd == 1 else nn.MaxPool3d)(k, s, p, d, ceil_mode=ceil)
    assert np.allclose(arr(m(t64(x[0], device))), ry[0], rtol=0, atol=1e-15)


@pytest.mark.parametrize("nd,k,s,p,ceil,inc,div", [
    (1, (3,), (2,), (1,), True, False, None), (1, (2,), (1,), (1,), False, True, None),
    (3, (3, 2, 2), (2, 2, 1), (1, 1, 1), True, True, None),
    (3, (3, 2, 2), (2, 2, 1), (1, 1, 1), True, False, None),
    (3, (2, 2, 3), (2, 2, 3), (1, 0, 1), False, True, -4)])
def test_avg_pool(device, nd, k, s, p, ceil, inc, div):
    x = RNG.standard_normal((2, 3, 9) if nd == 1 else (2, 2, 5, 4, 6))
    if nd == 1:
        y = F.avg_pool1d(t64(x, device), k, s, p, ceil, inc)
    else:
        y = nn.AvgPool3d(k, s, p, ceil, inc, div)(t64(x, device))
    ry, _ = ref_pool(x, nd, k, s, p, (1,) * nd, ceil, True, inc, div)
    assert y.shape == ry.shape and np.allclose(arr(y), ry, rtol=1e-13, atol=1e-14)


def adaptive_ref(x, out, maxp):
    nd = len(out)
    sp = x.shape[-nd:]
    lead = x.shape[:-nd]
    y = np.zeros(lead + tuple(out))
    idx = np.zeros(lead + tuple(out), dtype=np.int64)
    for li in itertools.product(*[range(n) for n in lead]):
        for oi in itertools.product(*[range(o) for o in out]):
            sl = tuple(slice((oi[a] * sp[a]) // out[a], -((-(oi[a] + 1) * sp[a]) // out[a]))
                       for a in range(nd))
            win = x[li][sl]
            if maxp:
                j = np.unravel_index(int(np.argmax(win)), win.shape)
                pos = [sl[a].start + j[a] for a in range(nd)]
                y[li + oi], idx[li + oi] = win[j], np.ravel_multi_index(pos, sp)
            else:
                y[li + oi] = win.mean()
    return y, idx


@pytest.mark.parametrize("nd,ins,out", [(1, (7,), (3,)), (2, (5, 7), (3, 4)),
                                        (3, (4, 5, 3), (3, 2, 2)), (2, (3, 3), (5, 2))])
def test_adaptive_max(device, nd, ins, out):
    x = RNG.standard_normal((2, 2) + ins)
    fn = [None, F.adaptive_max_pool1d, F.adaptive_max_pool2d, F.adaptive_max_pool3d][nd]
    xt = t64(x, device, True)
    y, i = fn(xt, out, True)
    ry, ri = adaptive_ref(x, out, True)
    assert np.allclose(arr(y), ry, rtol=0, atol=0) and (arr(i) == ri).all()
    g = RNG.standard_normal(ry.shape)
    (y * t64(g, device)).sum().backward()
    gx = np.zeros(x.size)
    np.add.at(gx.reshape(4, -1), (np.arange(4)[:, None], ri.reshape(4, -1)), g.reshape(4, -1))
    assert np.allclose(arr(xt.grad).reshape(-1), gx, rtol=0, atol=1e-15)


@pytest.mark.parametrize("nd,ins,out", [(1, (7,), (4,)), (3, (5, 4, 6), (2, 3, 4))])
def test_adaptive_avg(device, nd, ins, out):
    x = RNG.standard_normal((2, 2) + ins)
    m = nn.AdaptiveAvgPool1d(out) if nd == 1 else nn.AdaptiveAvgPool3d(out)
    ry, _ = adaptive_ref(x, out, False)
    assert np.allclose(arr(m(t64(x, device))), ry, rtol=1e-13, atol=1e-14)
    if nd == 3:  # None keeps that dim's size
        y = F.adaptive_avg_pool3d(t64(x, device), (None, 3, None))
        assert y.shape == (2, 2, 5, 3, 6)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_unpool_round_trip(device, nd):
    x = RNG.standard_normal((2, 2) + (8, 6, 4)[:nd])
    pool = [None, F.max_pool1d, F.max_pool2d, F.max_pool3d][nd]
    y, i = pool(t64(x, device), 2, 2, 0, 1, False, True)
    unpool = [None, nn.MaxUnpool1d, nn.MaxUnpool2d, nn.MaxUnpool3d][nd](2)
    u = unpool(y, i)
    ref = np.zeros(x.shape)
    ref.reshape(4, -1)[np.arange(4)[:, None], arr(i).astype(np.int64).reshape(4, -1)] = \
        arr(y).reshape(4, -1)
    assert u.shape == x.shape and (arr(u) == ref).all()
    with pytest.raises(ValueError):
        unpool(y, i, output_size=[1] * nd)


def test_max_unpool_bad_index(device):
    x = t64(RNG.standard_normal((1, 1, 2)), device)
    with pytest.raises(tessera.TesseraError, match="invalid max index"):
        F.max_unpool1d(x, tessera.tensor([[[0, 9]]], device=device), 2)


@pytest.mark.parametrize("nd,p", [(1, 2.0), (2, 3.0), (3, 1.5)])
def test_lp_pool(device, nd, p):
    x = np.abs(RNG.standard_normal((2, 2) + (7, 5, 6)[:nd])) + 0.1
    m = [None, nn.LPPool1d, nn.LPPool2d, nn.LPPool3d][nd](p, 2, 1)
    y = m(t64(x, device))
    a, _ = ref_pool(x ** p, nd, (2,) * nd, (1,) * nd, (0,) * nd, (1,) * nd, False, True)
    assert np.allclose(arr(y), (a * 2 ** nd) ** (1 / p), rtol=1e-13, atol=1e-14)


def test_group_norm(device):
    x = RNG.standard_normal((2, 6, 3, 2))
    m = nn.GroupNorm(3, 6).to(device).double()
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    w, b = RNG.standard_normal(6), RNG.standard_normal(6)
    m.weight.data = t64(w, device)
    m.bias.data = t64(b, device)
    xr = x.reshape(2, 3, -1)
    ref = ((xr - xr.mean(-1, keepdims=True)) / np.sqrt(xr.var(-1, keepdims=True) + 1e-5))
    ref = ref.reshape(x.shape) * w[None, :, None, None] + b[None, :, None, None]
    assert np.allclose(arr(m(t64(x, device))), ref, rtol=1e-12, atol=1e-13)
    out, mean, rstd = tessera.native_group_norm(t64(x, device), None, None, 2, 6, 6, 3, 1e-5)
    assert np.allclose(arr(mean), xr.mean(-1)) and mean.shape == (2, 3)
    with pytest.raises(tessera.TesseraError, match="divisible by num_groups"):
        F.group_norm(t64(x, device), 4)


def test_instance_norm_running_stats(device):
    x = RNG.standard_normal((3, 2, 5))
    m = nn.InstanceNorm1d(2, momentum=0.2, affine=True, track_running_stats=True).to(device)
    m = m.double()
    assert sorted(m.state_dict()) == ["bias", "num_batches_tracked", "running_mean",
                                      "running_var", "weight"]
    y = m(t64(x, device))
    mu, var = x.mean(-1), x.var(-1)
    assert np.allclose(arr(y), (x - mu[..., None]) / np.sqrt(var[..., None] + 1e-5),
                       rtol=1e-12, atol=1e-13)
    assert np.allclose(arr(m.running_mean), (0.2 * mu).mean(0), rtol=1e-12, atol=1e-14)
    assert np.allclose(arr(m.running_var), (0.8 + 0.2 * x.var(-1, ddof=1)).mean(0), rtol=1e-12)
    m.eval()
    rm, rv = arr(m.running_mean), arr(m.running_var)
    assert np.allclose(arr(m(t64(x, device))), (x - rm[:, None]) / np.sqrt(rv[:, None] + 1e-5))
    # unbatched input, 2-d / 3-d variants
    assert nn.InstanceNorm2d(3)(t64(x, device)).shape == (3, 2, 5)
    assert nn.InstanceNorm3d(3)(t64(RNG.standard_normal((2, 3, 2, 2, 2)), device)).shape == \
        (2, 3, 2, 2, 2)


def test_norm_argument_errors(device):
    x = t64(RNG.standard_normal((2, 4, 3)), device)
    with pytest.raises(TypeError, match=r"group_norm\(\): argument 'bias' must be Tensor, not str"):
        F.group_norm(x, 2, None, "b")
    with pytest.raises(TypeError, match="argument 'running_mean' must be Tensor, not str"):
        F.instance_norm(x, running_mean="m")
    with pytest.raises(TypeError, match="argument 'weight' must be Tensor, not str"):
        F.instance_norm(x, weight="w")


def test_local_response_norm(device):
    x = RNG.standard_normal((2, 5, 3, 2))
    y = nn.LocalResponseNorm(3, alpha=0.5, beta=0.75, k=2.0)(t64(x, device))
    sq = np.pad(x ** 2, ((0, 0), (1, 1), (0, 0), (0, 0)))
    div = (2.0 + 0.5 * (sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:]) / 3) ** 0.75
    assert np.allclose(arr(y), x / div, rtol=1e-12, atol=1e-13)
    with pytest.raises(ValueError):
        F.local_response_norm(t64(x[0, 0], device), 2)


def test_batch_norm3d_and_native(device):
    x = RNG.standard_normal((2, 3, 2, 2, 2))
    m = nn.BatchNorm3d(3).to(device).double()
    y = m(t64(x, device))
    mu, var = x.mean((0, 2, 3, 4)), x.var((0, 2, 3, 4))
    ref = (x - mu[None, :, None, None, None]) / np.sqrt(var[None, :, None, None, None] + 1e-5)
    assert np.allclose(arr(y), ref, rtol=1e-12, atol=1e-13)
    out, sm, si = tessera.native_batch_norm(t64(x, device), None, None, None, None, True, 0.1,
                                            1e-5)
    assert np.allclose(arr(sm), mu) and np.allclose(arr(si), 1 / np.sqrt(var + 1e-5))
    out, lm, lr = tessera.native_layer_norm(t64(x, device), (2, 2), None, None, 1e-5)
    assert lm.shape == (2, 3, 2, 1, 1)
    with pytest.raises(ValueError):
        m(t64(x[0], device))


def test_softplus_threshold(device):
    x = np.linspace(-3, 3, 13)
    y = F.softplus(t64(x, device), beta=2.0, threshold=1.5)
    ref = np.where(2 * x > 1.5, x, np.log1p(np.exp(2 * x)) / 2)
    assert np.allclose(arr(y), ref, rtol=1e-12, atol=1e-14)
