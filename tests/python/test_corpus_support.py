"""The small pieces the corpus of real programs (tests/programs) needed: MNIST.data / .targets,
vision.datasets.FakeData, indexing with a range, Tensor.is_xpu / is_mps."""
import os

import numpy as np
import pytest

import tessera as t
from tessera.vision import datasets, transforms

FASHION = "/usr/share/datasets/fashion-mnist"


@pytest.mark.skipif(not os.path.isdir(FASHION), reason="needs dataset-fashion-mnist")
def test_mnist_data_targets_are_the_untransformed_samples():
    ds = datasets.FashionMNIST(None, train=False, transform=transforms.ToTensor())
    data, targets = ds.data, ds.targets
    assert data.shape == (len(ds), 28, 28) and data.dtype == t.uint8
    assert targets.shape == (len(ds),) and targets.dtype == t.int64
    for i in (0, 1, len(ds) - 1):
        x, y = ds[i]  # ToTensor: float CHW in [0, 1]
        np.testing.assert_array_equal(np.round(x[0].numpy() * 255).astype(np.uint8), data[i].numpy())
        assert int(targets[i]) == y
    assert ds.data is data  # read once


def test_fakedata_is_the_same_on_every_read_and_keeps_the_rng():
    ds = datasets.FakeData(size=5, image_size=(3, 4, 6), num_classes=3, transform=transforms.ToTensor())
    assert len(ds) == 5
    t.manual_seed(7)
    before = t.rand(4)
    t.manual_seed(7)
    x, y = ds[2]
    after = t.rand(4)
    assert bool((before == after).all())  # reading an item leaves the global generator as it was
    x2, y2 = ds[2]
    assert x.shape == (3, 4, 6) and x.dtype == t.float32 and 0 <= y < 3
    assert bool((x == x2).all()) and y == y2
    assert not bool((ds[1][0] == x).all())
    assert 0.0 <= float(x.min()) and float(x.max()) <= 1.0
    with pytest.raises(IndexError):
        ds[5]
    with pytest.raises(ValueError, match="image_size"):
        datasets.FakeData(image_size=(4, 4))


def test_index_with_a_range():
    x = t.arange(12.0).reshape(3, 4)
    y = [3, 0, 2]
    x[range(3), y] = -1.0  # mnist_forward_forward's overlay
    ref = np.arange(12.0).reshape(3, 4)
    ref[range(3), y] = -1.0
    np.testing.assert_array_equal(x.numpy(), ref)
    np.testing.assert_array_equal(x[range(1, 3)].numpy(), ref[1:3])
    assert x[range(0)].shape == (0, 4)


def test_is_xpu_is_mps_are_false():
    x = t.zeros(2)
    assert x.is_xpu is False and x.is_mps is False and x.is_cpu is True
