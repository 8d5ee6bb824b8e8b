"""F.conv1d / conv3d, F.conv_transpose1d/2d/3d, F.unfold / fold, F.channel_shuffle and their
modules (Conv1d, Conv3d, ConvTranspose*, Lazy*, Unfold, Fold, ChannelShuffle) against float64
NumPy references, on cpu and sim:0, with gradients (issue 52)."""
import itertools
import math

import numpy as np
import pytest

import tessera as torch
import tessera.nn as nn
import tessera.nn.functional as F

if not torch.sim.is_available():
    torch.sim.configure(2)

DEVICES = ["cpu", "sim:0"]


def t(a, device="cpu", grad=False):
    x = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)).clone().to(device)
    if grad:
        x.requires_grad_(True)
    return x


def arr(n, *shape):
    return (np.sin(np.arange(1, math.prod(shape) + 1) * 0.37 * n) * 3).reshape(shape)


# ------------------------------------------------------------------ NumPy references
def np_conv(x, w, b, s, p, d, groups):
    k = w.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pi, pi) for pi in p])
    out = [(xp.shape[2 + i] - d[i] * (w.shape[2 + i] - 1) - 1) // s[i] + 1 for i in range(k)]
    n, cin = x.shape[:2]
    cout, cig = w.shape[:2]
    cog = cout // groups
    y = np.zeros((n, cout, *out))
    for off in itertools.product(*[range(kk) for kk in w.shape[2:]]):
        sl = tuple(slice(off[i] * d[i], off[i] * d[i] + (out[i] - 1) * s[i] + 1, s[i])
                   for i in range(k))
        xs = xp[(slice(None), slice(None)) + sl]
        for g in range(groups):
            wg = w[(slice(g * cog, (g + 1) * cog), slice(None)) + off]  # [cog, cig]
            y[:, g * cog:(g + 1) * cog] += np.einsum("nc...,oc->no...",
                                                     xs[:, g * cig:(g + 1) * cig], wg)
    if b is not None:
        y += b.reshape((1, -1) + (1,) * k)
    return y


def np_conv_transpose(x, w, b, s, p, op, groups, d):
    k = w.ndim - 2
    n, cin = x.shape[:2]
    cig, cog = cin // groups, w.shape[1]
    ins = x.shape[2:]
    out = [(ins[i] - 1) * s[i] - 2 * p[i] + d[i] * (w.shape[2 + i] - 1) + op[i] + 1
           for i in range(k)]
    full = [max((ins[i] - 1) * s[i] + d[i] * (w.shape[2 + i] - 1) + 1, p[i] + out[i])
            for i in range(k)]
    y = np.zeros((n, cog * groups, *full))
    for off in itertools.product(*[range(kk) for kk in w.shape[2:]]):
        sl = tuple(slice(off[i] * d[i], off[i] * d[i] + (ins[i] - 1) * s[i] + 1, s[i])
                   for i in range(k))
        for g in range(groups):
            wg = w[(slice(g * cig, (g + 1) * cig), slice(None)) + off]  # [cig, cog]
            y[(slice(None), slice(g * cog, (g + 1) * cog)) + sl] += np.einsum(
                "nc...,co->no...", x[:, g * cig:(g + 1) * cig], wg)
    y = y[(slice(None), slice(None)) + tuple(slice(p[i], p[i] + out[i]) for i in range(k))]
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * k)
    return y


def linear_grad(f, args, i, g):
    """d sum(f(args) * g) / d args[i], exact for f linear in args[i] (unit steps)"""
    base = np.sum(f(*args) * g)
    a = args[i]
    out = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        moved = list(args)
        moved[i] = a.copy()
        moved[i][idx] += 1.0
        out[idx] = np.sum(f(*moved) * g) - base
    return out


def close(a, ref, terms):
    # float64: rounding u per product and sum, the terms summed (2**-52 per operation, x4)
    tol = 4 * 2.0 ** -52 * terms * (np.abs(ref).max() + 1) * 8
    np.testing.assert_allclose(a, ref, rtol=0, atol=tol)


# ------------------------------------------------------------------ convolutions
CONV_CASES = [  # k, n, cin, cout, groups, in, ker, stride, padding, dilation
    (1, 2, 4, 6, 2, (9,), (3,), (2,), (1,), (2,)),
    (1, 1, 3, 2, 1, (7,), (2,), (1,), (0,), (1,)),
    (3, 2, 4, 4, 2, (5, 4, 6), (3, 2, 2), (2, 1, 2), (1, 0, 1), (1, 2, 1)),
    (3, 1, 2, 3, 1, (4, 5, 3), (2, 3, 1), (1, 2, 1), (0, 1, 0), (2, 1, 1)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_matches_numpy(device, case):
    k, n, cin, cout, groups, ins, ker, s, p, d = case
    x, w, b = arr(1, n, cin, *ins), arr(2, cout, cin // groups, *ker), arr(3, cout)
    fn = F.conv1d if k == 1 else F.conv3d
    xt, wt, bt = t(x, device, True), t(w, device, True), t(b, device, True)
    y = fn(xt, wt, bt, s, p, d, groups)
    ref = np_conv(x, w, b, s, p, d, groups)
    terms = cin // groups * math.prod(ker)
    close(y.detach().cpu().numpy(), ref, terms)
    g = arr(4, *ref.shape)
    (y * t(g, device)).sum().backward()
    f = lambda x_, w_, b_: np_conv(x_, w_, b_, s, p, d, groups)  # noqa: E731
    close(xt.grad.detach().cpu().numpy(), linear_grad(f, [x, w, b], 0, g), terms * 4)
    close(wt.grad.detach().cpu().numpy(), linear_grad(f, [x, w, b], 1, g), g.size)
    close(bt.grad.detach().cpu().numpy(), linear_grad(f, [x, w, b], 2, g), g.size)
    # unbatched: the batch's first sample
    y1 = fn(t(x[0], device), t(w, device), None, s, p, d, groups)
    close(y1.detach().cpu().numpy(), ref[0] - b.reshape((-1,) + (1,) * k), terms)


TRANSPOSE_CASES = [  # k, n, cin, cout, groups, in, ker, stride, padding, output_padding, dilation
    (1, 2, 4, 6, 2, (5,), (3,), (2,), (1,), (1,), (1,)),
    (1, 1, 3, 2, 1, (4,), (2,), (3,), (0,), (2,), (2,)),
    (2, 2, 4, 6, 2, (3, 4), (3, 2), (2, 1), (1, 0), (1, 0), (1, 2)),
    (2, 1, 2, 2, 1, (3, 3), (2, 2), (1, 1), (1, 1), (2, 1), (3, 2)),
    (3, 2, 4, 2, 2, (3, 2, 3), (2, 2, 3), (2, 1, 2), (1, 0, 1), (1, 0, 1), (1, 2, 1)),
    (3, 1, 2, 2, 1, (2, 2, 2), (2, 2, 2), (1, 1, 1), (1, 0, 0), (2, 0, 0), (3, 1, 1)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", TRANSPOSE_CASES)
def test_conv_transpose_matches_numpy(device, case):
    k, n, cin, cout, groups, ins, ker, s, p, op, d = case
    x, w, b = arr(1, n, cin, *ins), arr(2, cin, cout // groups, *ker), arr(3, cout)
    fn = [F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d][k - 1]
    xt, wt, bt = t(x, device, True), t(w, device, True), t(b, device, True)
    y = fn(xt, wt, bt, s, p, op, groups, d)
    ref = np_conv_transpose(x, w, b, s, p, op, groups, d)
    assert tuple(y.shape) == ref.shape
    terms = cin // groups * math.prod(ker)
    close(y.detach().cpu().numpy(), ref, terms)
    g = arr(4, *ref.shape)
    (y * t(g, device)).sum().backward()
    f = lambda x_, w_, b_: np_conv_transpose(x_, w_, b_, s, p, op, groups, d)  # noqa: E731
    close(xt.grad.detach().cpu().numpy(), linear_grad(f, [x, w, b], 0, g), terms * 4)
    close(wt.grad.detach().cpu().numpy(), linear_grad(f, [x, w, b], 1, g), g.size)
    close(bt.grad.detach().cpu().numpy(), linear_grad(f, [x, w, b], 2, g), g.size)


@pytest.mark.parametrize("device", DEVICES)
def test_conv_padding_strings(device):
    x, w = arr(1, 2, 3, 7), arr(2, 4, 3, 4)  # even kernel: 'same' pads 1 left, 2 right
    y = F.conv1d(t(x, device), t(w, device), padding="same", dilation=1)
    ref = np_conv(np.pad(x, [(0, 0), (0, 0), (1, 2)]), w, None, (1,), (0,), (1,), 1)
    close(y.detach().cpu().numpy(), ref, 12)
    y = F.conv3d(t(arr(1, 1, 2, 3, 4, 5), device), t(arr(2, 2, 2, 1, 2, 3), device),
                 padding="valid")
    assert tuple(y.shape) == (1, 2, 3, 3, 3)
    with pytest.raises(ValueError, match="strided"):
        F.conv1d(t(x), t(w), padding="same", stride=2)


# ------------------------------------------------------------------ modules
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv_modules_padding_modes(device, mode):
    m = nn.Conv3d(2, 4, (3, 2, 3), padding=(1, 1, 1), padding_mode=mode, groups=2).to(device)
    x = arr(5, 1, 2, 4, 5, 6)
    y = m(t(x, device).float())
    npm = {"zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}
    xp = np.pad(x.astype(np.float32).astype(np.float64), [(0, 0), (0, 0)] + [(1, 1)] * 3,
                mode=npm[mode])
    ref = np_conv(xp, m.weight.detach().cpu().double().numpy(),
                  m.bias.detach().cpu().double().numpy(), (1,) * 3, (0,) * 3, (1,) * 3, 2)
    np.testing.assert_allclose(y.detach().cpu().double().numpy(), ref, rtol=0,
                               atol=2.0 ** -24 * 20 * (np.abs(ref).max() + 1))


def test_module_parameters_and_repr():
    m = nn.Conv1d(4, 6, 3, stride=2, groups=2)
    assert tuple(m.weight.shape) == (6, 2, 3) and tuple(m.bias.shape) == (6,)
    assert repr(m) == "Conv1d(4, 6, kernel_size=(3,), stride=(2,), groups=2)"
    bound = 1 / math.sqrt(2 * 3)
    assert float(m.weight.abs().max()) <= bound and float(m.bias.abs().max()) <= bound
    ct = nn.ConvTranspose2d(4, 6, (2, 3), stride=2, output_padding=1, groups=2, bias=False)
    assert tuple(ct.weight.shape) == (4, 3, 2, 3) and ct.bias is None
    assert list(ct.state_dict()) == ["weight"]
    assert "output_padding=(1, 1)" in repr(ct)
    ct3 = nn.ConvTranspose3d(2, 5, 2)
    assert tuple(ct3.bias.shape) == (5,)
    with pytest.raises(ValueError):
        nn.ConvTranspose1d(2, 2, 3, padding_mode="reflect")
    with pytest.raises(ValueError):
        nn.Conv1d(3, 4, 3, groups=2)


@pytest.mark.parametrize("device", DEVICES)
def test_conv_transpose_output_size(device):
    m = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1).to(device).double()
    x = t(arr(1, 1, 2, 4, 5), device)
    assert tuple(m(x).shape) == (1, 3, 7, 9)
    y = m(x, output_size=(8, 10))
    assert tuple(y.shape) == (1, 3, 8, 10)
    w, b = m.weight.detach().cpu().numpy(), m.bias.detach().cpu().numpy()
    ref = np_conv_transpose(arr(1, 1, 2, 4, 5), w, b, (2, 2), (1, 1), (1, 1), 1, (1, 1))
    close(y.detach().cpu().numpy(), ref, 20)
    with pytest.raises(ValueError):
        m(x, output_size=(10, 10))


@pytest.mark.parametrize("device", DEVICES)
def test_lazy_modules(device):
    for cls, shape, wshape in [(nn.LazyConv1d, (2, 3, 8), (4, 3, 3)),
                               (nn.LazyConv2d, (2, 3, 5, 6), (4, 3, 3, 3)),
                               (nn.LazyConv3d, (3, 4, 4, 4), (4, 3, 3, 3, 3)),
                               (nn.LazyConvTranspose1d, (2, 3, 8), (3, 4, 3)),
                               (nn.LazyConvTranspose3d, (1, 3, 2, 2, 2), (3, 4, 3, 3, 3))]:
        m = cls(4, 3)
        assert m.weight is None
        y = m(t(arr(1, *shape), device))
        assert tuple(m.weight.shape) == wshape and m.in_channels == 3
        assert m.weight.device == torch.device(device) and m.weight.dtype == torch.float64
        assert y.shape[-len(shape) + 1] == 4 if len(shape) == len(wshape) else True
    m = nn.LazyConvTranspose2d(5, 2)
    m.load_state_dict({"weight": torch.zeros(3, 5, 2, 2), "bias": torch.ones(5)})
    assert m.in_channels == 3
    y = m(t(arr(1, 1, 3, 2, 2)).float())
    np.testing.assert_array_equal(y.detach().numpy(), np.ones((1, 5, 3, 3)))


# ------------------------------------------------------------------ unfold, fold, shuffle
def np_unfold(x, ker, d, p, s):
    n, c, h, w = x.shape
    xp = np.pad(x, [(0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])])
    lh = (h + 2 * p[0] - d[0] * (ker[0] - 1) - 1) // s[0] + 1
    lw = (w + 2 * p[1] - d[1] * (ker[1] - 1) - 1) // s[1] + 1
    out = np.zeros((n, c, ker[0], ker[1], lh, lw))
    for i in range(ker[0]):
        for j in range(ker[1]):
            out[:, :, i, j] = xp[:, :, i * d[0]:i * d[0] + (lh - 1) * s[0] + 1:s[0],
                                 j * d[1]:j * d[1] + (lw - 1) * s[1] + 1:s[1]]
    return out.reshape(n, c * ker[0] * ker[1], lh * lw)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("ker,d,p,s", [((2, 3), (1, 2), (1, 0), (2, 1)), ((3, 3), (1, 1), (1, 1),
                                                                          (1, 1))])
def test_unfold_fold(device, ker, d, p, s):
    x = arr(1, 2, 3, 5, 7)
    xt = t(x, device, True)
    cols = F.unfold(xt, ker, d, p, s)
    ref = np_unfold(x, ker, d, p, s)
    np.testing.assert_array_equal(cols.detach().cpu().numpy(), ref)
    # fold is unfold's adjoint: <unfold(x), c> = <x, fold(c)>, and the gradient of unfold is fold
    c = arr(2, *ref.shape)
    folded = F.fold(t(c, device), (5, 7), ker, d, p, s)
    adj = linear_grad(lambda x_: np_unfold(x_, ker, d, p, s), [x], 0, c)
    close(folded.detach().cpu().numpy(), adj, 9)
    (cols * t(c, device)).sum().backward()
    close(xt.grad.detach().cpu().numpy(), adj, 9)
    assert tuple(nn.Fold((5, 7), ker, d, p, s)(t(c, device)).shape) == (2, 3, 5, 7)
    assert tuple(nn.Unfold(ker, d, p, s)(t(x, device)).shape) == ref.shape
    with pytest.raises(RuntimeError, match="sliding blocks"):
        F.fold(t(c, device), (9, 7), ker, d, p, s)


@pytest.mark.parametrize("device", DEVICES)
def test_channel_shuffle(device):
    x = arr(1, 2, 6, 2, 3)
    y = F.channel_shuffle(t(x, device), 3)
    ref = x.reshape(2, 3, 2, 2, 3).transpose(0, 2, 1, 3, 4).reshape(2, 6, 2, 3)
    np.testing.assert_array_equal(y.detach().cpu().numpy(), ref)
    np.testing.assert_array_equal(nn.ChannelShuffle(3)(t(x, device)).detach().cpu().numpy(), ref)
    with pytest.raises(ValueError):
        F.channel_shuffle(t(x), 4)


# ------------------------------------------------------------------ errors
def test_errors():
    x = t(arr(1, 1, 4, 5))
    with pytest.raises(RuntimeError, match="conv1d"):
        F.conv1d(t(arr(1, 1, 1, 4, 5)), t(arr(2, 6, 2, 3)), groups=2)
    with pytest.raises(RuntimeError, match="groups=4"):
        F.conv1d(x, t(arr(2, 6, 2, 3)), groups=4)
    with pytest.raises(RuntimeError, match="output padding must be smaller"):
        F.conv_transpose1d(x, t(arr(2, 4, 2, 3)), stride=2, output_padding=2, dilation=2)
    with pytest.raises(RuntimeError):
        F.conv_transpose2d(x.to("sim:0"), t(arr(2, 4, 2, 3)))
    with pytest.raises(RuntimeError, match="conv3d"):
        F.conv3d(t(arr(1, 1, 2, 2, 2, 2)).to("sim:0"), t(arr(2, 2, 2, 1, 1, 1)))
