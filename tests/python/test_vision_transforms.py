"""tessera.vision.transforms' Python transforms against NumPy references: Resize (bilinear with
align_corners=False, torchvision's size rule), CenterCrop's rounding, flips, ConvertImageDtype,
RandomApply / RandomChoice reproducible under tessera.manual_seed."""
import numpy as np
import pytest

import tessera as ts
import tessera.vision.transforms as T


def _bilinear_ref(x, oh, ow):
    """float64 bilinear, align_corners=False (half-pixel centres, edge-clamped), x [C,H,W]."""
    c, h, w = x.shape

    def coords(o, n):
        s = (np.arange(o) + 0.5) * (n / o) - 0.5
        s = np.maximum(s, 0)
        i0 = np.minimum(np.floor(s).astype(int), n - 1)
        i1 = np.minimum(i0 + 1, n - 1)
        return i0, i1, s - i0

    y0, y1, fy = coords(oh, h)
    x0, x1, fx = coords(ow, w)
    top = x[:, y0][:, :, x0] * (1 - fx) + x[:, y0][:, :, x1] * fx
    bot = x[:, y1][:, :, x0] * (1 - fx) + x[:, y1][:, :, x1] * fx
    return top * (1 - fy)[:, None] + bot * fy[:, None]


@pytest.mark.parametrize("size,want_hw", [((4, 9), (4, 9)), (3, (3, 4)), ([8], (8, 10))])
def test_resize_bilinear(size, want_hw):
    x = np.random.default_rng(0).random((3, 6, 8)).astype(np.float32)
    got = T.Resize(size)(ts.tensor(x)).numpy()
    assert got.shape == (3,) + want_hw
    np.testing.assert_allclose(got, _bilinear_ref(x.astype(np.float64), *want_hw), atol=1e-6)
    batch = T.Resize(size)(ts.tensor(np.stack([x, x]))).numpy()
    np.testing.assert_allclose(batch[1], got, atol=0)


def test_resize_uint8_and_nearest():
    x = np.random.default_rng(1).integers(0, 256, (1, 5, 7)).astype(np.uint8)
    got = T.Resize((3, 4))(ts.tensor(x)).numpy()
    want = np.clip(np.round(_bilinear_ref(x.astype(np.float64), 3, 4)), 0, 255)
    assert got.dtype == np.uint8
    assert np.abs(got.astype(np.int64) - want).max() <= 1  # float32 rounding at .5 boundaries
    near = T.Resize((3, 4), interpolation="nearest")(ts.tensor(x)).numpy()
    iy, ix = np.floor(np.arange(3) * 5 / 3).astype(int), np.floor(np.arange(4) * 7 / 4).astype(int)
    np.testing.assert_array_equal(near, x[:, iy][:, :, ix])
    with pytest.raises(ValueError, match="interpolation"):
        T.Resize(3, interpolation="bicubic")


@pytest.mark.parametrize("hw,size", [((6, 8), 3), ((7, 8), (4, 5)), ((5, 5), (2, 2))])
def test_center_crop(hw, size):
    x = np.arange(2 * hw[0] * hw[1], dtype=np.float32).reshape(2, *hw)
    th, tw = (size, size) if isinstance(size, int) else size
    top, left = int(round((hw[0] - th) / 2.0)), int(round((hw[1] - tw) / 2.0))
    np.testing.assert_array_equal(T.CenterCrop(size)(ts.tensor(x)).numpy(),
                                  x[:, top:top + th, left:left + tw])
    with pytest.raises(ValueError, match="larger than the image"):
        T.CenterCrop(hw[0] + 1)(ts.tensor(x))


def test_vertical_flip_and_convert_dtype():
    x = np.random.default_rng(2).random((3, 4, 5)).astype(np.float32)
    np.testing.assert_array_equal(T.RandomVerticalFlip(p=1.0)(ts.tensor(x)).numpy(), x[:, ::-1])
    np.testing.assert_array_equal(T.RandomVerticalFlip(p=0.0)(ts.tensor(x)).numpy(), x)
    u8 = T.ConvertImageDtype(ts.uint8)(ts.tensor(x)).numpy()
    np.testing.assert_array_equal(u8, (x.astype(np.float64) * (256 - 1e-3)).astype(np.uint8))
    back = T.ConvertImageDtype(ts.float32)(ts.tensor(u8)).numpy()
    np.testing.assert_allclose(back, u8 / 255.0, rtol=1e-6)


def test_random_apply_and_choice_reproducible():
    x = ts.tensor(np.arange(12, dtype=np.float32).reshape(1, 3, 4))
    flip = T.RandomVerticalFlip(p=1.0)
    ra = T.RandomApply([flip], p=0.5)
    ts.manual_seed(3)
    first = [bool((ra(x).numpy() != x.numpy()).any()) for _ in range(200)]
    ts.manual_seed(3)
    again = [bool((ra(x).numpy() != x.numpy()).any()) for _ in range(200)]
    assert first == again and 60 < sum(first) < 140  # Binomial(200, 0.5): > 5 sd margin
    rc = T.RandomChoice([flip, T.CenterCrop(2)], p=[0.0, 1.0])
    assert tuple(rc(x).shape) == (1, 2, 2)
    assert isinstance(T.Compose([T.Resize(2), ra]), T.Compose)
    assert tuple(T.Compose([T.Resize((2, 2)), T.CenterCrop(1)])(x).shape) == (1, 1, 1)
