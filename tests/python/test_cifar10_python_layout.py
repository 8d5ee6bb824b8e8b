"""tessera.vision.datasets.CIFAR10 over torchvision's own layout (root/cifar-10-batches-py: pickled
dicts of a uint8 [N, 3072] array of CHW planes and a label list; issue 53's held-back programs call
CIFAR10(root='../../data/', download=True) on the folder torchvision extracts). References: the
same bytes through NumPy in float64, and the binary version of the same images read by the C
library."""
import os
import pickle

import numpy as np
import pytest

import tessera as ts
import tessera.vision.transforms as T
from tessera.utils.data import DataLoader
from tessera.vision import datasets

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def _write(root, per_batch=3, seed=5):
    """the five training batches and the test batch, as torchvision's archive holds them; returns
    ({split: (pixels [N, 3072], labels)})"""
    rng = np.random.default_rng(seed)
    d = os.path.join(root, "cifar-10-batches-py")
    os.makedirs(d)
    out = {"train": ([], []), "test": ([], [])}
    names = ["data_batch_%d" % i for i in range(1, 6)] + ["test_batch"]
    for name in names:
        px = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        lab = [int(v) for v in rng.integers(0, 10, per_batch)]
        with open(os.path.join(d, name), "wb") as f:
            pickle.dump({"batch_label": name, "data": px, "labels": lab,
                         "filenames": ["x.png"] * per_batch}, f, protocol=2)
        split = "test" if name == "test_batch" else "train"
        out[split][0].append(px)
        out[split][1].extend(lab)
    with open(os.path.join(d, "batches.meta"), "wb") as f:
        pickle.dump({"label_names": CLASSES, "num_vis": 3072}, f, protocol=2)
    return {k: (np.vstack(v[0]), v[1]) for k, v in out.items()}


def _hwc(px):
    return px.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)


@pytest.mark.parametrize("train", [True, False])
def test_reads_torchvisions_layout(tmp_path, train):
    ref = _write(str(tmp_path))["train" if train else "test"]
    ds = datasets.CIFAR10(root=str(tmp_path), train=train, download=True)
    n = 15 if train else 3
    assert len(ds) == n and ds.targets == ref[1] and ds.classes == CLASSES
    assert ds.data.shape == (n, 32, 32, 3) and ds.data.dtype == np.uint8
    np.testing.assert_array_equal(ds.data, _hwc(ref[0]))  # the batches in order, CHW to HWC
    img, y = ds[n - 1]
    assert isinstance(y, int) and y == ref[1][n - 1]
    np.testing.assert_array_equal(img.numpy(), _hwc(ref[0])[n - 1])


def test_transform_as_torchvision(tmp_path):
    ref = _write(str(tmp_path))["train"]
    t = T.Compose([T.ToTensor(), T.Normalize((0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261))])
    ds = datasets.CIFAR10(root=str(tmp_path), train=True, transform=t,
                          target_transform=lambda v: v + 100)
    x, y = ds[7]
    chw = ref[0][7].reshape(3, 32, 32).astype(np.float64) / 255
    want = (chw - np.array([0.4914, 0.4822, 0.4465])[:, None, None]) / \
        np.array([0.247, 0.243, 0.261])[:, None, None]
    assert x.shape == (3, 32, 32) and x.dtype == ts.float32 and y == ref[1][7] + 100
    # float32 ToTensor and Normalize of values in [-2, 2.2]: a few float32 ulps
    assert np.abs(x.numpy() - want).max() < 2e-6


def test_same_samples_as_the_binary_version(tmp_path):
    ref = _write(str(tmp_path / "py"))["test"]
    b = tmp_path / "bin" / "cifar-10-batches-bin"
    b.mkdir(parents=True)
    rec = np.concatenate([np.array(ref[1], np.uint8)[:, None], ref[0]], axis=1)
    rec.tofile(str(b / "test_batch.bin"))
    t = T.Compose([T.ToTensor(), T.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))])
    py = datasets.CIFAR10(root=str(tmp_path / "py"), train=False, transform=t)
    bn = datasets.CIFAR10(root=str(tmp_path / "bin"), train=False, transform=t)
    for i in range(3):
        assert py[i][1] == bn[i][1]
        np.testing.assert_array_equal(py[i][0].numpy(), bn[i][0].numpy())
    xb, yb = next(iter(DataLoader(py, batch_size=3, shuffle=False)))
    assert xb.shape == (3, 3, 32, 32) and yb.tolist() == ref[1]
    np.testing.assert_array_equal(xb.numpy(), np.stack([bn[i][0].numpy() for i in range(3)]))


def test_loader_shuffles_and_pickles(tmp_path):
    _write(str(tmp_path))
    ds = datasets.CIFAR10(root=str(tmp_path), transform=T.ToTensor())
    seen = []
    for xb, yb in DataLoader(ds, batch_size=4, shuffle=True):
        seen.extend(yb.tolist())
    assert sorted(seen) == sorted(ds.targets) and len(seen) == 15
    back = pickle.loads(pickle.dumps(ds))
    assert len(back) == 15 and back.targets == ds.targets
    np.testing.assert_array_equal(back[4][0].numpy(), ds[4][0].numpy())


def test_errors(tmp_path):
    with pytest.raises(ts.FileError, match="downloads nothing"):
        datasets.CIFAR10(root=str(tmp_path / "none"), download=True)
    d = tmp_path / "cifar-10-batches-py"
    d.mkdir()
    with open(d / "data_batch_1", "wb") as f:
        pickle.dump({"data": np.zeros((2, 3072), np.uint8), "labels": [0, 10]}, f)
    with pytest.raises(ts.FileError, match=r"CIFAR10: .*label outside \[0, 10\)"):
        datasets.CIFAR10(root=str(tmp_path))
    with open(d / "data_batch_1", "wb") as f:
        pickle.dump({"data": np.zeros((2, 3000), np.uint8), "labels": [0, 1]}, f)
    with pytest.raises(ts.FileError, match=r"not uint8 \[N, 3072\]"):
        datasets.CIFAR10(root=str(tmp_path))

    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    with open(d / "data_batch_1", "wb") as f:
        pickle.dump({"data": Evil()}, f)
    with pytest.raises(pickle.UnpicklingError, match="CIFAR10: .*only NumPy arrays"):
        datasets.CIFAR10(root=str(tmp_path))
    os.remove(d / "data_batch_1")
    with open(d / "test_batch", "wb") as f:
        pickle.dump({"data": np.zeros((1, 3072), np.uint8), "labels": [3]}, f)
    with pytest.raises(ts.FileError, match="data_batch_1: no such file"):
        datasets.CIFAR10(root=str(tmp_path), train=True)
    assert datasets.CIFAR10(root=str(tmp_path), train=False).targets == [3]
