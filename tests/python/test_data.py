"""test_data.py — tessera.utils.data: Dataset subclassed in Python, TensorDataset, the DataLoader
on both paths (the C loader's worker threads; Python threads), default_collate, the built-in
data sets and tessera.vision.transforms, checked against NumPy computations on the raw files."""
import gzip
import os
import threading

import pytest

import tessera
from tessera.utils.data import (DataLoader, Dataset, DistributedSampler, TensorDataset,
                                default_collate)
import tessera.vision.transforms as transforms
from tessera.vision.datasets import CIFAR10, FashionMNIST

DEVICES = ["cpu", "sim:0"]
FASHION = "/usr/share/datasets/fashion-mnist"


@pytest.fixture(autouse=True)
def _sim():
    if tessera.sim.device_count() < 2:
        tessera.sim.configure(2)


def _live():
    return tessera.memory_stats("cpu")["live_tensors"]


class Squares(Dataset):
    """sample i: (tensor [i, i*i] float32, i % 3)"""

    def __init__(self, n, fail_at=None):
        self.n, self.fail_at = n, fail_at
        self.threads = set()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.threads.add(threading.get_ident())
        if i == self.fail_at:
            raise ValueError("sample %d is broken" % i)
        return tessera.tensor([float(i), float(i * i)]), i % 3


# ------------------------------------------------------------------ Python data sets

@pytest.mark.parametrize("workers", [0, 3])
def test_python_dataset_batches(workers):
    ds = Squares(10)
    dl = DataLoader(ds, batch_size=4, num_workers=workers)
    assert not dl.uses_c_loader and len(dl) == 3
    batches = list(dl)
    assert [b[0].shape[0] for b in batches] == [4, 4, 2]
    x = [row for b in batches for row in b[0].tolist()]
    y = [v for b in batches for v in b[1].tolist()]
    assert x == [[float(i), float(i * i)] for i in range(10)]
    assert y == [i % 3 for i in range(10)]
    assert batches[0][1].dtype == tessera.int64 and batches[0][0].dtype == tessera.float32
    if workers:
        assert threading.get_ident() not in ds.threads


@pytest.mark.parametrize("workers", [0, 2])
def test_python_dataset_shuffle_drop_last(workers):
    tessera.manual_seed(7)
    dl = DataLoader(Squares(11), batch_size=3, shuffle=True, drop_last=True, num_workers=workers)
    assert len(dl) == 3
    e1 = [int(r[0]) for b in dl for r in b[0].tolist()]
    e2 = [int(r[0]) for b in dl for r in b[0].tolist()]
    assert len(e1) == 9 and len(set(e1)) == 9 and set(e1) <= set(range(11))
    assert e1 != e2  # another permutation each epoch
    tessera.manual_seed(7)
    again = DataLoader(Squares(11), batch_size=3, shuffle=True, drop_last=True,
                       num_workers=workers)
    assert [int(r[0]) for b in again for r in b[0].tolist()] == e1


@pytest.mark.parametrize("workers", [0, 2])
def test_python_dataset_error_propagates(workers):
    dl = DataLoader(Squares(8, fail_at=5), batch_size=2, num_workers=workers)
    with pytest.raises(ValueError, match="sample 5 is broken"):
        list(dl)


def test_default_collate_structures():
    t = tessera.tensor
    out = default_collate([{"a": t([1.0]), "b": 2.5, "c": "x"}, {"a": t([2.0]), "b": 1.0,
                                                                  "c": "y"}])
    assert out["a"].tolist() == [[1.0], [2.0]]
    assert out["b"].dtype == tessera.float64 and out["b"].tolist() == [2.5, 1.0]
    assert out["c"] == ["x", "y"]
    pairs = default_collate([(t([1, 2]), True), (t([3, 4]), False)])
    assert pairs[0].tolist() == [[1, 2], [3, 4]] and pairs[1].tolist() == [True, False]
    with pytest.raises(TypeError, match="default_collate"):
        default_collate([object(), object()])
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([(1, 2), (1,)])


def test_custom_collate_and_worker_init():
    seen = []
    dl = DataLoader(Squares(4), batch_size=2, collate_fn=lambda b: len(b), num_workers=2,
                    worker_init_fn=seen.append)
    assert list(dl) == [2, 2]
    # each worker thread calls it once as it starts, with its id (threads start as needed)
    assert 1 <= len(seen) <= 2 and sorted(seen) == list(range(len(seen)))


def test_loader_argument_errors():
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(Squares(2), batch_size=0)
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(Squares(2), num_workers=-1)
    with pytest.raises(TypeError):
        tessera._C._Loader(Squares(2))
    with pytest.raises(TypeError, match="argument 1 must be Tensor"):
        TensorDataset(tessera.ones(2), [1, 2])
    with pytest.raises(ValueError, match="size mismatch"):
        TensorDataset(tessera.ones(2), tessera.ones(3))


# ------------------------------------------------------------------ TensorDataset

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("workers", [0, 2])
def test_tensor_dataset(device, workers):
    n = 37
    x = tessera.arange(n, dtype=tessera.float32, device=device).reshape(n, 1) * 1.0
    y = tessera.arange(n, device=device) * 2
    ds = TensorDataset(x, y)
    assert len(ds) == n and ds[3][0].tolist() == [3.0] and ds[3][1].item() == 6
    tessera.manual_seed(1)
    dl = DataLoader(ds, batch_size=8, shuffle=True, num_workers=workers)
    assert dl.uses_c_loader == (device == "cpu")  # the C loader takes cpu tensors
    assert len(dl) == 5
    seen = []
    for xb, yb in dl:
        assert str(xb.device) == "cpu" or str(xb.device) == device
        xs, ys = [int(v[0]) for v in xb.tolist()], yb.tolist()
        assert ys == [2 * v for v in xs]  # rows stay paired
        seen += xs
    assert sorted(seen) == list(range(n)) and seen != list(range(n))


def test_tensor_dataset_three_tensors_python_path():
    a, b, c = tessera.ones(4, 2), tessera.zeros(4), tessera.arange(4)
    dl = DataLoader(TensorDataset(a, b, c), batch_size=3)
    assert not dl.uses_c_loader
    first = next(iter(dl))
    assert len(first) == 3 and first[2].tolist() == [0, 1, 2]


def test_c_loader_early_break_and_no_growth():
    ds = TensorDataset(tessera.randn(64, 3), tessera.arange(64))
    dl = DataLoader(ds, batch_size=8, num_workers=2)
    for _ in range(3):  # break mid-epoch: the next iteration starts a whole epoch
        for i, (xb, _) in enumerate(dl):
            if i == 2:
                break
        assert len(list(dl)) == 8
    base = _live()
    for _ in range(20):
        for xb, yb in dl:
            pass
    del xb, yb
    assert _live() <= base


@pytest.mark.parametrize("workers", [0, 2])
def test_distributed_sampler(workers):
    n = 10
    ds = TensorDataset(tessera.arange(n, dtype=tessera.float32).unsqueeze(1), tessera.arange(n))
    s0 = DistributedSampler(ds, num_replicas=3, rank=0, seed=5)
    s1 = DistributedSampler(ds, num_replicas=3, rank=1, seed=5)
    s2 = DistributedSampler(ds, num_replicas=3, rank=2, seed=5)
    parts = [list(s) for s in (s0, s1, s2)]
    assert [len(p) for p in parts] == [4, 4, 4] and len(s0) == 4  # 10 padded to 12
    flat = [i for p in zip(*parts) for i in p]  # rank r takes positions r, r + 3, ...
    assert sorted(set(flat)) == list(range(n)) and flat[n:] == flat[:2]  # padded with the first
    s0.set_epoch(1)
    assert list(s0) != parts[0]
    # both paths of the loader visit the sampler's indices in its order
    c = DataLoader(ds, batch_size=3, sampler=s0, num_workers=workers)
    py = DataLoader(ds, batch_size=3, sampler=s0, num_workers=workers,
                    collate_fn=default_collate)
    assert c.uses_c_loader and not py.uses_c_loader
    want = list(s0)
    for dl in (c, py):
        got = [v for _, yb in dl for v in yb.tolist()]
        assert got == want
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(ds, sampler=s0, shuffle=True)


# ------------------------------------------------------------------ built-in data sets

def _idx_images(name):
    """the raw IDX file as (count, rows, cols, bytes), read by hand"""
    path = os.path.join(FASHION, name)
    opener = gzip.open if not os.path.exists(path) else open
    with opener(path if os.path.exists(path) else path + ".gz", "rb") as f:
        data = f.read()
    n, r, c = (int.from_bytes(data[i:i + 4], "big") for i in (4, 8, 12))
    return n, r, c, data[16:]


fashion = pytest.mark.skipif(not os.path.isdir(FASHION), reason="dataset-fashion-mnist absent")


@fashion
def test_fashion_mnist_raw_and_to_tensor():
    np = pytest.importorskip("numpy")
    n, r, c, pixels = _idx_images("t10k-images-idx3-ubyte")
    raw = FashionMNIST(train=False)
    assert len(raw) == n == 10000 and raw.num_classes == 10
    x, y = raw[17]
    assert x.shape == (28, 28, 1) and x.dtype == tessera.uint8 and isinstance(y, int)
    want = np.frombuffer(pixels, np.uint8)[17 * 784:18 * 784].reshape(28, 28)
    assert np.array_equal(x.numpy()[:, :, 0], want)

    norm = FashionMNIST(train=False, transform=transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))]))
    xt, yt = norm[17]
    assert xt.shape == (1, 28, 28) and xt.dtype == tessera.float32 and yt == y
    ref = (want.astype(np.float64) / 255 - 0.5) / 0.5
    assert np.abs(xt.numpy()[0] - ref).max() < 1e-6  # float32 rounding of values in [-1, 1]


@fashion
def test_fashion_mnist_as_cifar_shape():
    np = pytest.importorskip("numpy")
    t = transforms.Compose([transforms.ToTensor(), transforms.Pad(2),
                            transforms.Grayscale(num_output_channels=3),
                            transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])
    x, _ = FashionMNIST(train=False, transform=t)[3]
    plain, _ = FashionMNIST(train=False, transform=transforms.ToTensor())[3]
    a = x.numpy()
    assert a.shape == (3, 32, 32)
    assert np.all(a[:, :2, :] == -1) and np.all(a[:, :, -2:] == -1)  # zero padding, normalised
    for ch in range(3):
        assert np.abs(a[ch, 2:30, 2:30] - (plain.numpy()[0] - 0.5) / 0.5).max() < 1e-6


@fashion
@pytest.mark.parametrize("workers", [0, 2])
def test_fashion_mnist_c_loader(workers):
    ds = FashionMNIST(train=False, transform=transforms.ToTensor())
    dl = DataLoader(ds, batch_size=1000, shuffle=False, num_workers=workers, pin_memory=True)
    assert dl.uses_c_loader and len(dl) == 10
    total, count = 0.0, 0
    labels = [0] * 10
    for xb, yb in dl:
        assert xb.shape == (1000, 1, 28, 28) and yb.dtype == tessera.int64
        total += xb.sum().item()
        count += xb.nelement()
        for v in yb.tolist():
            labels[v] += 1
    assert labels == [1000] * 10  # Fashion-MNIST's test split is balanced
    _, _, _, pixels = _idx_images("t10k-images-idx3-ubyte")
    assert count == len(pixels)
    assert abs(total - sum(pixels) / 255) < 1e-4 * count  # float32 sums of 1000-image batches


@fashion
def test_python_transform_takes_python_path():
    ds = FashionMNIST(train=False, transform=transforms.Compose(
        [transforms.ToTensor(), transforms.Lambda(lambda x: x * 2)]))
    dl = DataLoader(ds, batch_size=5, num_workers=2)
    assert not dl.uses_c_loader
    xb, yb = next(iter(dl))
    ref = FashionMNIST(train=False, transform=transforms.ToTensor())
    assert xb[1].tolist() == (ref[1][0] * 2).tolist() and yb[1].item() == ref[1][1]


def test_cifar_missing_files(tmp_path):
    with pytest.raises(tessera.FileError):
        CIFAR10(root=str(tmp_path), train=True)
    with pytest.raises(tessera.FileError, match="downloads nothing"):
        CIFAR10(root=str(tmp_path), train=True, download=True)


def test_transform_spec_errors():
    x = tessera.ones(1, 4, 4)
    with pytest.raises(ValueError, match="mean has 2 values but std 1"):
        transforms.Normalize((0.5, 0.5), (0.5,))(x)
    with pytest.raises(tessera.ShapeError, match="Grayscale"):
        transforms.Grayscale(3)(tessera.ones(4, 4))
    with pytest.raises(TypeError, match="img"):
        transforms.ToTensor()([1, 2])
    assert transforms.Pad(1)(x).shape == (1, 6, 6)


@pytest.mark.parametrize("channels", [1, 3])
def test_grayscale_of_rgb(channels):
    np = pytest.importorskip("numpy")
    tessera.manual_seed(4)
    rgb = tessera.rand(3, 5, 6)
    g = transforms.Grayscale(num_output_channels=channels)(rgb).numpy()
    a = rgb.numpy().astype(np.float64)
    ref = 0.2989 * a[0] + 0.587 * a[1] + 0.114 * a[2]  # ITU-R 601-2, torchvision's weights
    assert g.shape == (channels, 5, 6)
    assert np.abs(g - ref).max() < 1e-6  # float32 rounding of a sum of three terms below 1
