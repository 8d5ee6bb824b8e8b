"""transforms.Pad as torchvision's: int / (lr, tb) / (l, t, r, b) padding, fill, the four
padding modes, non-square images, uint8 [H, W, C] samples, the C fast path inside Compose and in
the DataLoader's pipeline. The reference is numpy.pad, whose constant / edge / reflect /
symmetric modes are torchvision's."""
import pytest

import tessera
from tessera.vision import transforms as T

np = pytest.importorskip("numpy")

PADS = [0, 2, (1, 3), (2, 0, 1, 3)]
MODES = ["constant", "edge", "reflect", "symmetric"]


def _ltrb(p):
    if isinstance(p, int):
        return p, p, p, p
    return (p[0], p[1], p[0], p[1]) if len(p) == 2 else tuple(p)


def _ref(a, pad, mode, fill, lead=1):
    left, top, right, bottom = _ltrb(pad)
    widths = ((0, 0),) * lead + ((top, bottom), (left, right))
    if mode == "constant":
        return np.pad(a, widths, mode="constant", constant_values=fill)
    return np.pad(a, widths, mode=mode)


@pytest.mark.parametrize("pad", PADS)
@pytest.mark.parametrize("mode", MODES)
def test_float_chw_non_square(pad, mode):
    a = np.arange(2 * 4 * 7, dtype=np.float32).reshape(2, 4, 7) * 0.5 - 3
    fill = 1.5 if mode == "constant" else 0
    y = T.Pad(pad, fill=fill, padding_mode=mode)(tessera.tensor(a))
    np.testing.assert_array_equal(y.numpy(), _ref(a, pad, mode, fill))


@pytest.mark.parametrize("mode", MODES)
def test_batched_and_plane(mode):
    a = np.random.default_rng(1).standard_normal((3, 2, 5, 4))
    y = T.Pad((1, 2, 3, 1), padding_mode=mode)(tessera.tensor(a))
    np.testing.assert_array_equal(y.numpy(), _ref(a, (1, 2, 3, 1), mode, 0, lead=2))
    p = a[0, 0]
    y = T.Pad(2, padding_mode=mode)(tessera.tensor(p))
    np.testing.assert_array_equal(y.numpy(), _ref(p, 2, mode, 0, lead=0))


@pytest.mark.parametrize("pad", [2, (1, 3)])
@pytest.mark.parametrize("mode", ["constant", "reflect"])
def test_uint8_hwc_sample(pad, mode):
    a = np.arange(5 * 6 * 3, dtype=np.uint8).reshape(5, 6, 3)  # a data set's sample: [H, W, C]
    y = T.Pad(pad, padding_mode=mode)(tessera.tensor(a))
    ref = np.moveaxis(_ref(np.moveaxis(a, 2, 0), pad, mode, 0), 0, 2)
    assert y.dtype == tessera.uint8
    np.testing.assert_array_equal(y.numpy(), ref)
    # in a pipeline, then ToTensor: [C, H, W] floats of the padded image
    z = T.Compose([T.Pad(pad, padding_mode=mode), T.ToTensor()])(tessera.tensor(a))
    np.testing.assert_allclose(z.numpy(), np.moveaxis(ref, 2, 0) / 255.0, atol=1e-7)


def test_c_path_non_square():
    """the int-padding, zero-fill form runs in C (loader threads): non-square images too"""
    assert T.Pad(3)._spec() == ("pad", 3)
    assert T.Pad(3, fill=1)._spec() is None and T.Pad((1, 2))._spec() is None
    a = np.random.default_rng(2).random((1, 3, 8)).astype(np.float32)
    c = T.Compose([T.Pad(3), T.Normalize((0.5,), (0.25,))])
    assert c._spec() is not None
    np.testing.assert_allclose(c(tessera.tensor(a)).numpy(),
                               (_ref(a, 3, "constant", 0) - 0.5) / 0.25, atol=1e-6)
    py = T.Compose([T.Pad((3, 1), padding_mode="edge"), T.Normalize((0.5,), (0.25,))])
    assert py._spec() is None
    np.testing.assert_allclose(py(tessera.tensor(a)).numpy(),
                               (_ref(a, (3, 1), "edge", 0) - 0.5) / 0.25, atol=1e-6)


def test_negative_constant_crops():
    a = np.arange(30, dtype=np.float32).reshape(1, 5, 6)
    y = T.Pad((-1, 2, 0, -2))(tessera.tensor(a))
    np.testing.assert_array_equal(y.numpy(), np.pad(a, ((0, 0), (2, 0), (0, 0)))[:, :-2, 1:])


def test_errors():
    with pytest.raises(ValueError, match="padding_mode"):
        T.Pad(1, padding_mode="wrap")
    with pytest.raises(TypeError, match="padding"):
        T.Pad((1, 2, 3))
    with pytest.raises(TypeError, match="padding"):
        T.Pad(1.5)
    with pytest.raises(ValueError, match="negative"):
        T.Pad(-1, padding_mode="reflect")
    with pytest.raises(TypeError, match="fill"):
        T.Pad(1, fill=(1, 2, 3))(tessera.ones(3, 4, 4))
    with pytest.raises(ValueError, match="larger than the dim"):
        T.Pad(5, padding_mode="symmetric")(tessera.ones(1, 3, 3))
    assert "padding_mode=reflect" in repr(T.Pad(2, padding_mode="reflect"))


def test_pil_modes_and_fill():
    Image = pytest.importorskip("PIL.Image")
    a = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    img = Image.fromarray(a)
    for mode in MODES:
        out = np.asarray(T.Pad((1, 2), padding_mode=mode)(img))
        ref = np.moveaxis(_ref(np.moveaxis(a, 2, 0), (1, 2), mode, 0), 0, 2)
        np.testing.assert_array_equal(out, ref)
    out = np.asarray(T.Pad(1, fill=(10, 20, 30))(img))
    assert out.shape == (6, 7, 3) and (out[0, 0] == [10, 20, 30]).all()
    np.testing.assert_array_equal(out[1:-1, 1:-1], a)
