"""CIFAR-10 in the Python layout torchvision downloads and extracts (root/cifar-10-batches-py:
data_batch_1..5, test_batch, batches.meta; pickles of a dict with "data", a uint8 [N, 3072] array
of CHW planes, and "labels"), read with an unpickler that resolves NumPy's array rebuilders only.
tessera.vision.datasets.CIFAR10 reads it when the binary version is not there (issue 53: the
held-back programs' CIFAR10(root='../../data/', download=True) finds torchvision's folder)."""
import os

import numpy as np

import tessera as ts

from . import _cifar100

FOLDER = "cifar-10-batches-py"
TRAIN = ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5")
TEST = ("test_batch",)


def _unpickle(path):
    d = _cifar100._unpickle(path, "CIFAR10")
    if not isinstance(d, dict):
        raise ts.FileError(f"CIFAR10: {path} holds a {type(d).__name__}, not a dict")
    return d


def find(root):
    """root/cifar-10-batches-py when its first training file is there, else None"""
    folder = os.path.join(os.fspath(root), FOLDER)
    return folder if os.path.isfile(os.path.join(folder, TRAIN[0])) or \
        os.path.isfile(os.path.join(folder, TEST[0])) else None


def load(folder, train):
    """(data: uint8 [N, 32, 32, 3] HWC, targets: list of int, classes or None), the batches in
    torchvision's order"""
    arrays, labels = [], []
    for name in TRAIN if train else TEST:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            raise ts.FileError(f"CIFAR10: {path}: no such file")
        d = _unpickle(path)
        if "data" not in d or not ("labels" in d or "fine_labels" in d):
            raise ts.FileError(f"CIFAR10: {path} has no 'data' and 'labels'")
        raw = np.asarray(d["data"])
        lab = [int(v) for v in (d["labels"] if "labels" in d else d["fine_labels"])]
        if raw.dtype != np.uint8 or raw.ndim != 2 or raw.shape[1] != 3072 or \
                raw.shape[0] != len(lab):
            raise ts.FileError(f"CIFAR10: {path} holds {raw.dtype} {list(raw.shape)} pixels for "
                               f"{len(lab)} labels, not uint8 [N, 3072] and N")
        if any(not 0 <= v < 10 for v in lab):
            raise ts.FileError(f"CIFAR10: {path} has a label outside [0, 10)")
        arrays.append(raw)
        labels.extend(lab)
    data = np.ascontiguousarray(np.vstack(arrays).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
    classes = None
    meta = os.path.join(folder, "batches.meta")
    if os.path.isfile(meta):
        names = _unpickle(meta).get("label_names")
        if isinstance(names, (list, tuple)) and len(names) == 10:
            classes = [n.decode("latin1") if isinstance(n, bytes) else str(n) for n in names]
    return data, labels, classes
