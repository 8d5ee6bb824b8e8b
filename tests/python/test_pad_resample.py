"""F.pad, F.interpolate, F.upsample*, F.pixel_shuffle / pixel_unshuffle and their nn modules
(issue 52) against NumPy / hand-computed float64 references, on cpu and sim:0, with gradients."""
import math

import numpy as np
import pytest

import tessera as torch
import tessera.nn as nn
import tessera.nn.functional as F

if not torch.sim.is_available():
    torch.sim.configure(2)

DEVICES = ["cpu", "sim:0"]


def t(a, device="cpu", dtype=None, grad=False):
    x = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)).clone()
    x = (x if dtype is None else x.to(dtype)).to(device)
    if grad:
        x.requires_grad_(True)
    return x


def arr(n, *shape):
    return (np.sin(np.arange(1, math.prod(shape) + 1) * 0.37 * n) * 3).reshape(shape)


# ------------------------------------------------------------------ pad
NP_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pad", [((2, 3, 5), (2, 3)), ((1, 2, 4, 5), (1, 2, 3, 1)),
                                       ((1, 1, 3, 4, 5), (2, 1, 0, 3, 1, 2))])
def test_pad_matches_numpy(device, mode, shape, pad):
    x = arr(3, *shape)
    k = len(pad) // 2
    widths = [(0, 0)] * (len(shape) - k) + [(pad[2 * i], pad[2 * i + 1])
                                             for i in reversed(range(k))]
    kw = {"constant_values": 1.5} if mode == "constant" else {}
    ref = np.pad(x, widths, mode=NP_MODES[mode], **kw)
    y = F.pad(t(x, device), pad, mode=mode, value=1.5 if mode == "constant" else None)
    assert y.device == torch.device(device)
    np.testing.assert_array_equal(y.cpu().numpy(), ref)


@pytest.mark.parametrize("device", DEVICES)
def test_pad_negative_and_values(device):
    x = t(np.arange(5.0).reshape(1, 1, 5), device)
    # PyTorch 2.15's outputs
    assert F.pad(x, (-2, 3), mode="reflect").flatten().tolist() == [2, 3, 4, 3, 2, 1]
    assert F.pad(x, (2, -1), mode="reflect").flatten().tolist() == [2, 1, 0, 1, 2, 3]
    assert F.pad(x, (3, -2), mode="replicate").flatten().tolist() == [0, 0, 0, 0, 1, 2]
    assert F.pad(x, (2, -1), mode="circular").flatten().tolist() == [2, 3, 0, 1, 2, 3]
    assert F.pad(x, (-2, 3), mode="circular").flatten().tolist() == [2, 3, 4, 2, 3, 4]
    assert F.pad(x, (-1, -2)).flatten().tolist() == [1, 2]
    xi = torch.ones(2, 3, dtype=torch.int64).to(device)
    y = F.pad(xi, (1, 1), value=2.5)
    assert y.dtype == torch.int64 and y[0].tolist() == [2, 1, 1, 1, 2]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_grad(device, mode):
    # the gradient of sum(pad(x) * g) is g gathered back: each input gets the sum of the g
    # entries that copy it (NumPy's pad of the input's positions says which)
    x = arr(1, 1, 2, 4)
    g = arr(2, 1, 2, 7)
    xt = t(x, device, grad=True)
    F.pad(xt, (2, 1), mode=mode).mul(t(g, device)).sum().backward()
    kw = {"constant_values": -1} if mode == "constant" else {}
    pos = np.pad(np.arange(4), (2, 1), mode=NP_MODES[mode], **kw)
    ref = np.zeros_like(x)
    for j, p in enumerate(pos):
        if p >= 0:
            ref[..., p] += g[..., j]
    np.testing.assert_allclose(xt.grad.cpu().numpy(), ref, rtol=0, atol=1e-12)


def test_pad_errors():
    x = torch.ones(1, 2, 3)
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding"):
        F.pad(x, (3, 3), mode="reflect")
    with pytest.raises(RuntimeError, match="Padding length must be divisible by 2"):
        F.pad(x, (1, 1, 1))
    with pytest.raises(RuntimeError, match="doesn't take in value argument"):
        F.pad(x, (1, 1), mode="reflect", value=2)
    with pytest.raises(RuntimeError, match="wrapping around more than once"):
        F.pad(x, (4, 0), mode="circular")
    with pytest.raises(RuntimeError, match="Padding size 4 is not supported for 2D input"):
        F.pad(torch.ones(2, 3), (1, 1, 1, 1), mode="replicate")
    with pytest.raises(NotImplementedError, match="Unrecognised padding mode foo"):
        F.pad(x, (1, 1), mode="foo")
    with pytest.raises(RuntimeError, match="not implemented for 'Bool'"):
        F.pad(torch.ones(1, 2, 3, dtype=torch.bool), (1, 1), mode="reflect")


# ------------------------------------------------------------------ interpolate references
def lin_weights(n_in, n_out, ac, sf=None, cubic=False):
    """W [out, in] of linear / cubic interpolation, PyTorch's mapping in float64"""
    W = np.zeros((n_out, n_in))
    for j in range(n_out):
        if ac:
            s = (n_in - 1) / (n_out - 1) * j if n_out > 1 else 0.0
        else:
            scale = 1 / sf if sf else n_in / n_out
            s = scale * (j + 0.5) - 0.5
            if not cubic:
                s = max(s, 0.0)
        if cubic:
            f = math.floor(s)
            for i in range(f - 1, f + 3):
                d, A = abs(s - i), -0.75
                w = (((A + 2) * d - (A + 3)) * d * d + 1 if d <= 1 else
                     ((A * d - 5 * A) * d + 8 * A) * d - 4 * A if d < 2 else 0)
                W[j, min(max(i, 0), n_in - 1)] += w
        elif n_in == n_out:
            W[j, j] = 1
        else:
            f = math.floor(s)
            lam = s - f
            W[j, f] += 1 - lam
            W[j, min(f + 1, n_in - 1)] += lam
    return W


def near_weights(n_in, n_out, exact, sf=None):
    W = np.zeros((n_out, n_in))
    scale = 1 / sf if sf else n_in / n_out
    for j in range(n_out):
        W[j, min(int(math.floor(((j + 0.5) if exact else j) * scale)), n_in - 1)] = 1
    return W


def area_weights(n_in, n_out):
    W = np.zeros((n_out, n_in))
    for j in range(n_out):
        a, b = (j * n_in) // n_out, -((-(j + 1) * n_in) // n_out)
        W[j, a:b] = 1 / (b - a)
    return W


def apply(x, Ws):
    for i, W in enumerate(Ws):
        x = np.moveaxis(np.tensordot(W, np.moveaxis(x, 2 + i, 0), axes=(1, 0)), 0, 2 + i)
    return x


CASES = [
    ("nearest", (2, 2, 5), (3,), None),
    ("nearest", (1, 2, 3, 4), None, (2.5, 1.5)),
    ("nearest-exact", (1, 1, 2, 3, 4), (3, 5, 2), None),
    ("linear", (2, 2, 4), (7,), None),
    ("linear", (1, 1, 3), None, (1.5,)),
    ("bilinear", (1, 2, 3, 4), (5, 3), None),
    ("bicubic", (1, 2, 3, 4), (5, 6), None),
    ("bicubic", (1, 1, 2, 2), None, (1.7, 2.0)),
    ("trilinear", (1, 2, 2, 3, 4), (3, 5, 3), None),
    ("area", (1, 2, 5, 7), (3, 4), None),
    ("area", (2, 2, 7), (3,), None),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("ac", [False, True])
@pytest.mark.parametrize("mode,shape,size,sf", CASES)
def test_interpolate_matches_reference(device, ac, mode, shape, size, sf):
    if ac and mode in ("nearest", "nearest-exact", "area"):
        return
    x = arr(2, *shape)
    ins = shape[2:]
    outs = size if size else tuple(int(math.floor(n * f)) for n, f in zip(ins, sf))
    Ws = []
    for i, (n_in, n_out) in enumerate(zip(ins, outs)):
        f = sf[i] if sf else None
        if mode in ("nearest", "nearest-exact"):
            Ws.append(near_weights(n_in, n_out, mode == "nearest-exact", f))
        elif mode == "area":
            Ws.append(area_weights(n_in, n_out))
        else:
            Ws.append(lin_weights(n_in, n_out, ac, f, cubic=mode == "bicubic"))
    ref = apply(x, Ws)
    kw = {} if mode in ("nearest", "nearest-exact", "area") else {"align_corners": ac}
    xt = t(x, device, grad=True)
    y = F.interpolate(xt, size=size, scale_factor=sf, mode=mode, **kw)
    np.testing.assert_allclose(y.detach().cpu().numpy(), ref, rtol=0, atol=1e-12)
    # gradient: the transpose of the same linear map
    g = arr(5, *ref.shape)
    y.mul(t(g, device)).sum().backward()
    gref = g
    for i, W in reversed(list(enumerate(Ws))):
        gref = np.moveaxis(np.tensordot(W.T, np.moveaxis(gref, 2 + i, 0), axes=(1, 0)), 0, 2 + i)
    np.testing.assert_allclose(xt.grad.cpu().numpy(), gref, rtol=0, atol=1e-11)


def test_interpolate_torch_values():
    # PyTorch 2.15's float32 outputs
    x = torch.tensor([[[0.0, 1.0, 2.0]]])
    y = F.interpolate(x, scale_factor=1.5, mode="linear")
    np.testing.assert_allclose(y.flatten().tolist(), [0.0, 0.5, 1.1666667461, 1.8333334923],
                               atol=2e-7)
    # recompute_scale_factor=True: the scale is the sizes' ratio 3 / 4
    y = F.interpolate(x, scale_factor=1.5, mode="linear", recompute_scale_factor=True)
    np.testing.assert_allclose(y.flatten().tolist(), [0.0, 0.625, 1.375, 2.0], atol=2e-7)
    v = torch.arange(10.0).reshape(1, 1, 10)
    assert F.interpolate(v, size=3).flatten().tolist() == [0, 3, 6]
    assert F.interpolate(v, size=3, mode="nearest-exact").flatten().tolist() == [1, 5, 8]
    w = torch.arange(4.0).reshape(1, 1, 4)
    assert F.interpolate(w, scale_factor=1.2).flatten().tolist() == [0, 0, 1, 2]
    assert F.interpolate(w, scale_factor=1.2, mode="nearest-exact").flatten().tolist() == \
        [0, 1, 2, 2]
    assert F.interpolate(w, scale_factor=1.2, mode="linear").flatten().tolist() == [0, 1, 2, 3]
    # 2-D outputs of H + W <= 128 take PyTorch's nearest_idx (an unchanged size is the identity,
    # a doubled one j // 2); larger ones and 1-D / 3-D floor(j * scale) (PyTorch 2.15's values)
    y = F.interpolate(torch.arange(18.0).reshape(1, 1, 3, 6), scale_factor=(1.2, 3.0))
    assert y[0, 0, :, 0].tolist() == [0, 6, 12]
    y = F.interpolate(torch.arange(4.0).reshape(1, 1, 2, 2), scale_factor=(1.5, 2.2))
    assert y[0, 0].tolist() == [[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3]]
    y = F.interpolate(torch.arange(240.0).reshape(1, 1, 4, 60), scale_factor=(1.2, 2.2))
    assert y.shape == (1, 1, 4, 132) and y[0, 0, :, 0].tolist() == [0, 0, 60, 120]
    y = F.interpolate(torch.arange(4.0).reshape(1, 1, 4, 1, 1), scale_factor=(1.2, 1, 1))
    assert y.flatten().tolist() == [0, 0, 1, 2]
    u8 = F.interpolate(v.to(torch.uint8), size=4)
    assert u8.dtype == torch.uint8 and u8.flatten().tolist() == [0, 2, 5, 7]
    y = F.upsample_bilinear(torch.tensor([[[[0.0, 1.0], [2.0, 3.0]]]]), size=(3, 3))
    np.testing.assert_allclose(y.flatten().tolist(), [0, .5, 1, 1, 1.5, 2, 2, 2.5, 3])
    y = F.upsample_nearest(torch.tensor([[[[0.0, 1.0], [2.0, 3.0]]]]), scale_factor=2)
    assert y.flatten().tolist() == [0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3]


def test_interpolate_errors():
    x = torch.ones(1, 2, 3)
    with pytest.raises(NotImplementedError, match="Got 3D input, but bilinear mode needs 4D"):
        F.interpolate(x, size=4, mode="bilinear")
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, size=4, mode="nearest", align_corners=False)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=4, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="Anti-alias option is restricted"):
        F.interpolate(torch.ones(1, 1, 3, 3), size=(2, 2), mode="nearest", antialias=True)
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        F.interpolate(torch.ones(1, 1, 3, dtype=torch.int64), size=4)
    with pytest.raises(RuntimeError, match="Input and output sizes should be greater than 0"):
        F.interpolate(x, size=0)


# ------------------------------------------------------------------ pixel shuffle
@pytest.mark.parametrize("device", DEVICES)
def test_pixel_shuffle(device):
    x = arr(4, 2, 3, 8, 2, 3)  # a leading batch dim
    r = 2
    ref = x.reshape(2, 3, 2, r, r, 2, 3).transpose(0, 1, 2, 5, 3, 6, 4).reshape(2, 3, 2, 4, 6)
    xt = t(x, device, grad=True)
    y = F.pixel_shuffle(xt, r)
    np.testing.assert_array_equal(y.detach().cpu().numpy(), ref)
    np.testing.assert_array_equal(F.pixel_unshuffle(y, r).detach().cpu().numpy(), x)
    g = arr(6, *ref.shape)
    y.mul(t(g, device)).sum().backward()
    np.testing.assert_array_equal(xt.grad.cpu().numpy(),
                                  F.pixel_unshuffle(t(g), r).numpy())
    with pytest.raises(RuntimeError, match="is not divisible by 4"):
        F.pixel_shuffle(torch.ones(1, 3, 2, 2), 2)


# ------------------------------------------------------------------ modules
def test_modules_repr_and_forward():
    assert repr(nn.ReflectionPad2d(2)) == "ReflectionPad2d((2, 2, 2, 2))"
    assert repr(nn.ConstantPad1d((1, 2), 3.5)) == "ConstantPad1d(padding=(1, 2), value=3.5)"
    assert repr(nn.ZeroPad2d(1)) == "ZeroPad2d((1, 1, 1, 1))"
    assert nn.CircularPad3d(1).padding == (1, 1, 1, 1, 1, 1)
    assert nn.ReplicationPad1d((1, 3)).padding == (1, 3)
    assert repr(nn.Upsample(scale_factor=2)) == "Upsample(scale_factor=2.0, mode='nearest')"
    assert repr(nn.Upsample(size=3, mode="bilinear")) == "Upsample(size=3, mode='bilinear')"
    assert repr(nn.UpsamplingBilinear2d(size=(2, 3))) == \
        "UpsamplingBilinear2d(size=(2, 3), mode='bilinear')"
    assert repr(nn.PixelShuffle(2)) == "PixelShuffle(upscale_factor=2)"
    assert repr(nn.PixelUnshuffle(3)) == "PixelUnshuffle(downscale_factor=3)"
    x = t(arr(1, 1, 2, 3, 4))
    np.testing.assert_array_equal(nn.ReplicationPad2d((1, 0, 2, 1))(x).numpy(),
                                  np.pad(x.numpy(), [(0, 0), (0, 0), (2, 1), (1, 0)], "edge"))
    np.testing.assert_array_equal(nn.ZeroPad1d(2)(x).numpy(),
                                  np.pad(x.numpy(), [(0, 0), (0, 0), (0, 0), (2, 2)]))
    np.testing.assert_array_equal(nn.UpsamplingNearest2d(scale_factor=2)(x).numpy(),
                                  x.numpy().repeat(2, axis=2).repeat(2, axis=3))
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        nn.CircularPad1d(1)(torch.ones(1, 1, 2, 3))
