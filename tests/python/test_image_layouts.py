"""uint8 images in both layouts Tessera hands out, through the torchvision pipelines course
programs write (issue 53: dcgan_faces_tutorial's ImageFolder + Resize + CenterCrop + ToTensor +
Normalize; CIFAR10 + Resize). ImageFolder / io.read_image give [C, H, W]; the built-in data sets
give [H, W, C] (torchvision's PIL images). Each transform keeps the layout it is given, and
ToTensor gives float32 [C, H, W] from either. References: NumPy in float64 on the same bytes."""
import os

import numpy as np
import pytest

import tessera as ts
import tessera.vision.transforms as T
from tessera.vision import datasets as D
from tessera.vision import io as vio

RNG = np.random.default_rng(11)
CHW = RNG.integers(0, 256, (3, 10, 8), dtype=np.uint8)  # H 10, W 8
HWC = np.ascontiguousarray(CHW.transpose(1, 2, 0))
NORM = ((0.5, 0.4, 0.3), (0.2, 0.25, 0.3))


def _normalized(chw):
    m, s = (np.array(v)[:, None, None] for v in NORM)
    return (chw.astype(np.float64) / 255 - m) / s


@pytest.mark.parametrize("layout", ["chw", "hwc"])
def test_to_tensor_either_layout(layout):
    x = ts.tensor(CHW if layout == "chw" else HWC)
    y = T.ToTensor()(x)
    assert y.shape == (3, 10, 8) and y.dtype == ts.float32
    np.testing.assert_array_equal(y.numpy(), (CHW.astype(np.float32) / np.float32(255)))
    z = T.Compose([T.ToTensor(), T.Normalize(*NORM)])(x)
    assert np.abs(z.numpy() - _normalized(CHW)).max() < 4e-6  # float32 (x/255 - m)/s, |z| < 5


@pytest.mark.parametrize("layout", ["chw", "hwc"])
def test_crops_and_flips_keep_the_layout(layout):
    x = ts.tensor(CHW if layout == "chw" else HWC)
    back = (lambda a: a) if layout == "chw" else (lambda a: a.transpose(2, 0, 1))
    c = T.CenterCrop(6)(x).numpy()
    np.testing.assert_array_equal(back(c), CHW[:, 2:8, 1:7])
    f = T.RandomHorizontalFlip(1.0)(x).numpy()
    np.testing.assert_array_equal(back(f), CHW[:, :, ::-1])
    r = T.RandomCrop(8)(x).numpy()  # H 10 -> 8: one of three vertical offsets
    assert any(np.array_equal(back(r), CHW[:, i:i + 8, :]) for i in range(3))
    rz = T.Resize(4)(x)  # the shorter side (W 8) to 4: [.., 5, 4]
    assert tuple(rz.shape) == ((3, 5, 4) if layout == "chw" else (5, 4, 3)) and rz.dtype == ts.uint8
    want = T.Resize(4)(ts.tensor(CHW.astype(np.float32))).numpy()  # the float CHW path
    np.testing.assert_array_equal(back(rz.numpy()),
                                  np.clip(np.round(want), 0, 255).astype(np.uint8))


def test_image_folder_pipeline(tmp_path):
    os.makedirs(tmp_path / "faces")
    vio.write_png(ts.tensor(CHW), tmp_path / "faces" / "a.png")
    ds = D.ImageFolder(str(tmp_path), transform=T.Compose([
        T.Resize(8), T.CenterCrop(8), T.ToTensor(), T.Normalize(*NORM)]))
    x, y = ds[0]
    assert y == 0 and x.shape == (3, 8, 8)
    assert np.abs(x.numpy() - _normalized(CHW[:, 1:9, :])).max() < 4e-6  # Resize(8): W is 8 already


def test_cifar_like_sample_resized():
    # a CIFAR10 sample is uint8 [32, 32, 3]; Resize(64) + ToTensor gives [3, 64, 64]
    img = RNG.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    y = T.Compose([T.Resize(64), T.ToTensor()])(ts.tensor(img))
    assert y.shape == (3, 64, 64)
    ref = T.Resize(64)(ts.tensor(img.transpose(2, 0, 1).astype(np.float32)))
    np.testing.assert_allclose(y.numpy(), np.clip(np.round(ref.numpy()), 0, 255) / 255, atol=1e-7)


def _pil_l(rgb):
    # PIL's "L" of an RGB image (Convert.c's L24): integer weights, rounded
    c = rgb.astype(np.int64)
    lum = (c[..., 0] * 19595 + c[..., 1] * 38470 + c[..., 2] * 7471 + 0x8000) >> 16
    return lum.astype(np.uint8)


@pytest.mark.parametrize("n", [1, 3])
def test_grayscale_before_to_tensor(n):
    # torchvision's PIL path: Grayscale(n) of an "L" image (MNIST's samples) or an RGB one
    # (CIFAR10's), then ToTensor
    gray = RNG.integers(0, 256, (6, 5), dtype=np.uint8)
    y = T.Compose([T.Grayscale(n), T.ToTensor()])(ts.tensor(gray))
    assert y.shape == (n, 6, 5)
    np.testing.assert_array_equal(y.numpy(),
                                  np.repeat(gray[None], n, 0).astype(np.float32) / np.float32(255))
    for img, want in ((ts.tensor(HWC), _pil_l(HWC)), (ts.tensor(CHW), _pil_l(HWC))):
        g = T.Grayscale(n)(img)
        assert g.dtype == ts.uint8
        out = g.numpy()
        if img.shape[2] != 3:  # [C, H, W] in, [n, H, W] out
            out = out[0] if n == 1 else out.transpose(1, 2, 0)
        np.testing.assert_array_equal(out, want if n == 1 else np.repeat(want[:, :, None], 3, 2))
        t = T.Compose([T.Grayscale(n), T.ToTensor()])(img)
        np.testing.assert_array_equal(
            t.numpy(), np.repeat(want[None], n, 0).astype(np.float32) / np.float32(255))
    try:
        from PIL import Image
    except ImportError:
        return
    np.testing.assert_array_equal(np.asarray(Image.fromarray(HWC).convert("L")), _pil_l(HWC))


def test_grayscale_in_a_data_set():
    if not os.path.isdir("/usr/share/datasets/fashion-mnist"):
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    ds = D.FashionMNIST(train=False, transform=T.Compose([T.Grayscale(3), T.ToTensor()]))
    plain = D.FashionMNIST(train=False, transform=T.ToTensor())
    x, y = ds[5]
    assert x.shape == (3, 28, 28) and y == plain[5][1]
    np.testing.assert_array_equal(x.numpy(), np.repeat(plain[5][0].numpy(), 3, 0))


@pytest.mark.parametrize("make", [
    lambda: T.ColorJitter(0.4, 0.4, 0.4, 0.1),
    lambda: T.RandomResizedCrop((6, 5), scale=(0.3, 1.0)),
    lambda: T.RandomRotation(30),
    lambda: T.RandomAffine(20, translate=(0.1, 0.2), scale=(0.8, 1.2), shear=10),
    lambda: T.GaussianBlur(3, sigma=(0.5, 1.5)),
    lambda: T.RandomErasing(p=1.0, value=7),
], ids=["jitter", "resized_crop", "rotation", "affine", "blur", "erasing"])
def test_augmentations_keep_hwc_samples(make):
    """each augmentation on a data set's uint8 [H, W, C] sample is the same draw and the same
    pixels as on its [C, H, W] view, given back as [H, W, C] (it was read as C = H rows)"""
    t = make()
    ts.manual_seed(5)
    want = t(ts.tensor(CHW)).numpy()
    ts.manual_seed(5)
    got = t(ts.tensor(HWC))
    assert got.dtype == ts.uint8 and tuple(got.shape) == want.transpose(1, 2, 0).shape
    np.testing.assert_array_equal(got.numpy(), want.transpose(1, 2, 0))
