"""tessera.vision.datasets: torchvision's class lists, ImageFolder / DatasetFolder over
PNG files written here, download=True failing clearly."""
import os

import numpy as np
import pytest

import tessera as ts
from tessera.vision import datasets as D
from tessera.vision import io as vio


def test_class_lists():
    assert D.FashionMNIST.classes[0] == "T-shirt/top" and len(D.FashionMNIST.classes) == 10
    assert D.CIFAR10.classes[9] == "truck"
    assert issubclass(D.MNIST, ts.utils.data.Dataset)


def test_fashion_mnist_from_debian():
    if not os.path.isdir("/usr/share/datasets/fashion-mnist"):
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    f = D.FashionMNIST(train=False)
    assert f.class_to_idx["Ankle boot"] == 9
    assert tuple(f.data.shape) == (10000, 28, 28) and f.data.dtype == ts.uint8
    assert int(f.targets[0]) == f[0][1]


def test_download_fails_clearly(tmp_path):
    with pytest.raises(ts.FileError, match="downloads nothing"):
        D.CIFAR10(str(tmp_path), download=True)


def test_image_folder(tmp_path):
    imgs = {}
    rng = np.random.default_rng(0)
    for cls, name in [("b_dog", "x.png"), ("a_cat", "2.png"), ("a_cat", "1.png")]:
        os.makedirs(tmp_path / cls, exist_ok=True)
        img = rng.integers(0, 256, (3, 4, 5)).astype(np.uint8)
        vio.write_png(ts.tensor(img), tmp_path / cls / name)
        imgs[(cls, name)] = img
    (tmp_path / "a_cat" / "notes.txt").write_text("skip me")
    f = D.ImageFolder(str(tmp_path))
    assert f.classes == ["a_cat", "b_dog"] and f.class_to_idx == {"a_cat": 0, "b_dog": 1}
    assert [os.path.basename(p) for p, _ in f.samples] == ["1.png", "2.png", "x.png"]
    assert f.targets == [0, 0, 1]
    x, y = f[2]
    assert y == 1 and x.dtype == ts.uint8
    np.testing.assert_array_equal(x.numpy(), imgs[("b_dog", "x.png")])
    txt = D.DatasetFolder(str(tmp_path), loader=lambda p: open(p).read(), extensions=(".txt",),
                          allow_empty=True)
    assert len(txt) == 1 and txt[0] == ("skip me", 0)
    with pytest.raises(ValueError, match="exactly one"):
        D.DatasetFolder(str(tmp_path), loader=print)
