"""tessera.vision's augmentations (issue 53): transforms.functional's kernels against float64
NumPy references (or numbers recorded from PyTorch 2.15 where the formula is PyTorch's own),
the random transforms' draws within their ranges, transforms.v2, PIL inputs (skipped without
Pillow), CIFAR100 from local files."""
import colorsys
import os
import pickle

import numpy as np
import pytest

import tessera as ts
import tessera.vision.transforms as T
import tessera.vision.transforms.functional as TF
import tessera.vision.transforms.v2 as v2
from tessera.vision import datasets

RNG = np.random.default_rng(3)
X = RNG.random((3, 6, 7))
XT = ts.tensor(X.astype(np.float32))
TOL = dict(rtol=0, atol=2e-6)  # float32 results of O(1) values and a few operations


def _gray(x):
    return 0.2989 * x[0] + 0.587 * x[1] + 0.114 * x[2]


def test_color_adjustments():
    np.testing.assert_allclose(TF.adjust_brightness(XT, 1.4).numpy(), np.clip(1.4 * X, 0, 1),
                               **TOL)
    m = _gray(X).mean()
    np.testing.assert_allclose(TF.adjust_contrast(XT, 0.3).numpy(),
                               np.clip(0.3 * X + 0.7 * m, 0, 1), **TOL)
    np.testing.assert_allclose(TF.adjust_saturation(XT, 1.8).numpy(),
                               np.clip(1.8 * X - 0.8 * _gray(X)[None], 0, 1), **TOL)
    want = np.empty_like(X)
    for i in range(X.shape[1]):
        for j in range(X.shape[2]):
            h, s, v = colorsys.rgb_to_hsv(*X[:, i, j])
            want[:, i, j] = colorsys.hsv_to_rgb((h - 0.3) % 1.0, s, v)
    np.testing.assert_allclose(TF.adjust_hue(XT, -0.3).numpy(), want, atol=1e-5)
    with pytest.raises(ValueError, match="hue_factor"):
        TF.adjust_hue(XT, 0.7)


def test_gaussian_blur_reflect_padded():
    k, sigma = 3, 0.8
    g = np.exp(-0.5 * (np.arange(-1, 2) / sigma) ** 2)
    g /= g.sum()
    p = np.pad(X, ((0, 0), (1, 1), (1, 1)), mode="reflect")
    want = sum(g[a] * g[b] * p[:, a:a + 6, b:b + 7] for a in range(k) for b in range(k))
    np.testing.assert_allclose(TF.gaussian_blur(XT, 3, 0.8).numpy(), want, **TOL)
    np.testing.assert_allclose(T.GaussianBlur(3, sigma=0.8)(XT).numpy(), want, **TOL)
    with pytest.raises(ValueError, match="odd"):
        T.GaussianBlur(4)


def test_rotate_and_affine_exact_cases():
    sq = ts.tensor(X[:, :6, :6].astype(np.float32))
    np.testing.assert_array_equal(TF.rotate(sq, 90.0).numpy(), np.rot90(X[:, :6, :6], 1,
                                                                         (1, 2)).astype(
        np.float32))
    shifted = np.zeros_like(X)
    shifted[:, 1:, 2:] = X[:, :-1, :-2]
    np.testing.assert_array_equal(TF.affine(XT, 0.0, [2, 1], 1.0, [0.0, 0.0]).numpy(),
                                  shifted.astype(np.float32))
    assert TF.rotate(XT, 45.0, expand=True).shape[-2:] == (10, 11)  # torchvision 0.29 gives
    r = T.RandomRotation((90, 90))(sq)
    np.testing.assert_array_equal(r.numpy(), TF.rotate(sq, 90.0).numpy())
    u = (XT * 255).to(ts.uint8)
    assert T.RandomAffine(20, (0.1, 0.1), (0.9, 1.1), 5)(u).dtype == ts.uint8


def test_resize_antialias_matches_pytorch():
    x = ts.arange(16, dtype=ts.float32).view(1, 1, 4, 4) ** 1.5
    got = T.Resize((2, 3), antialias=True)(x).flatten().tolist()
    torch_2_15 = [7.385928153991699, 10.552849769592285, 14.371734619140625, 30.03599739074707,
                  35.67940902709961, 41.65595245361328]  # F.interpolate(antialias=True)
    np.testing.assert_allclose(got, torch_2_15, rtol=1e-6)


def test_random_resized_crop_and_erasing():
    ts.manual_seed(0)
    full = T.RandomResizedCrop((3, 4), scale=(1.0, 1.0), ratio=(7 / 6, 7 / 6))(XT)
    np.testing.assert_allclose(full.numpy(), T.Resize((3, 4), antialias=True)(XT).numpy(),
                               **TOL)
    for _ in range(5):
        assert tuple(T.RandomResizedCrop(5)(XT).shape) == (3, 5, 5)
    img = ts.ones(3, 20, 20)
    for _ in range(5):
        e = T.RandomErasing(p=1.0, value=0)(img).numpy()
        z = np.argwhere(e[0] == 0)
        (r0, c0), (r1, c1) = z.min(0), z.max(0)
        assert len(z) == (r1 - r0 + 1) * (c1 - c0 + 1)  # one rectangle
        assert 0.02 * 400 - 20 <= len(z) <= 0.33 * 400 + 20  # area within scale, rounding
        assert (e == 0).all(axis=0).sum() == len(z)
    assert img.min().item() == 1.0  # not in place
    assert T.RandomErasing(p=0.0)(img) is img


def test_color_jitter_draws_in_range():
    ts.manual_seed(1)
    cj = T.ColorJitter(brightness=(1.5, 1.5))
    np.testing.assert_allclose(cj(XT).numpy(), np.clip(1.5 * X, 0, 1), **TOL)
    assert T.ColorJitter(0.4, 0.4, 0.4, 0.1).hue == (-0.1, 0.1)
    with pytest.raises(ValueError, match="hue"):
        T.ColorJitter(hue=0.6)


def test_v2_alias():
    assert v2.RandomRotation is T.RandomRotation and v2.Compose is T.Compose
    a = (X.transpose(1, 2, 0) * 255).astype(np.uint8)
    t = v2.Compose([v2.ToImage(), v2.ToDtype(ts.float32, scale=True)])(a)
    np.testing.assert_allclose(t.numpy(), a.transpose(2, 0, 1) / 255.0, atol=1e-7)


def test_pil_images():
    Image = pytest.importorskip("PIL.Image")
    a = (X.transpose(1, 2, 0) * 255).astype(np.uint8)
    img = Image.fromarray(a)
    np.testing.assert_allclose(T.ToTensor()(img).numpy(), a.transpose(2, 0, 1) / 255.0,
                               atol=1e-7)
    np.testing.assert_array_equal(T.PILToTensor()(img).numpy(), a.transpose(2, 0, 1))
    out = T.Compose([T.CenterCrop(4), T.RandomVerticalFlip(p=1.0), T.ToTensor()])(img)
    np.testing.assert_allclose(out.numpy(), a[1:5, 2:6][::-1].transpose(2, 0, 1) / 255.0,
                               atol=1e-7)
    assert T.ColorJitter(0.2)(img).size == img.size
    padded = np.asarray(T.Pad(1)(img))
    assert padded.shape == (8, 9, 3) and (padded[1:-1, 1:-1] == a).all() and padded[0].max() == 0
    np.testing.assert_array_equal(np.asarray(T.RandomHorizontalFlip(1.0)(img)), a[:, ::-1])
    gray = np.asarray(T.Grayscale()(img)).astype(np.float64)  # PIL's L: 0.299 R + 0.587 G...
    assert np.abs(gray - a @ [0.299, 0.587, 0.114]).max() <= 0.5 + 1e-9
    with pytest.raises(TypeError, match="Tensor"):
        T.RandomErasing(p=1.0)(img)


def _write_cifar100_python(root, n):
    d = os.path.join(root, "cifar-100-python")
    os.makedirs(d)
    data = np.arange(n * 3072, dtype=np.int64).reshape(n, 3072) % 251
    with open(os.path.join(d, "train"), "wb") as f:
        pickle.dump({"data": data.astype(np.uint8), "fine_labels": list(range(n)),
                     "coarse_labels": [0] * n}, f)
    with open(os.path.join(d, "meta"), "wb") as f:
        pickle.dump({"fine_label_names": ["c%d" % i for i in range(100)]}, f)
    return data


def test_cifar100_python_and_binary(tmp_path):
    data = _write_cifar100_python(str(tmp_path), 3)
    ds = datasets.CIFAR100(str(tmp_path), train=True)
    assert len(ds) == 3 and ds.targets == [0, 1, 2] and ds.classes[7] == "c7"
    np.testing.assert_array_equal(ds.data[1], data[1].reshape(3, 32, 32).transpose(1, 2, 0))
    img, y = ds[2]
    assert y == 2 and tuple(img.shape) == (32, 32, 3)
    np.testing.assert_array_equal(img.numpy(), ds.data[2])
    b = tmp_path / "bin"
    (b / "cifar-100-binary").mkdir(parents=True)
    rec = np.zeros((2, 3074), np.uint8)
    rec[:, 1] = [5, 99]
    rec[1, 2:] = 7
    rec.tofile(str(b / "cifar-100-binary" / "test.bin"))
    ds = datasets.CIFAR100(str(b), train=False)
    assert ds.targets == [5, 99] and (ds.data[1] == 7).all() and ds.data.shape == (2, 32, 32, 3)
    with pytest.raises(ts.FileError, match="downloads nothing"):
        datasets.CIFAR100(str(tmp_path / "none"), download=True)


def test_cifar100_refuses_a_pickle_with_code(tmp_path):
    d = tmp_path / "cifar-100-python"
    d.mkdir()

    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    with open(d / "train", "wb") as f:
        pickle.dump({"data": Evil()}, f)
    with pytest.raises(pickle.UnpicklingError, match="only NumPy arrays"):
        datasets.CIFAR100(str(tmp_path))
