"""torchvision.datasets.CIFAR100 over local files (tessera downloads nothing): the Python
version torchvision fetches (root/cifar-100-python/{train,test,meta}: pickles of NumPy arrays,
read with an unpickler that resolves NumPy's array rebuilders only) or the binary version
(root/cifar-100-binary/{train,test}.bin: per image a coarse and a fine label byte, then 3072
bytes; fine_label_names.txt). Samples: uint8 HWC [32, 32, 3] tensors as CIFAR10's, the fine
label as an int; .data (NumPy [N, 32, 32, 3]), .targets, .classes, .class_to_idx."""
import os
import pickle

import numpy as np

import tessera as ts
from tessera.utils import data as _data

_SAFE = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
         ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}
_MAX_BYTES = 1 << 30


class _ArraysOnly(pickle.Unpickler):
    """Resolves NumPy's array rebuilders only; `op` names the data set in its errors."""
    op = "CIFAR100"

    def find_class(self, module, name):
        if (module, name) not in _SAFE:
            raise pickle.UnpicklingError(f"{self.op}: the file asks for {module}.{name}; only "
                                         "NumPy arrays are read")
        if module.startswith("numpy._core") and not hasattr(np, "_core"):
            module = module.replace("numpy._core", "numpy.core", 1)
        return super().find_class(module, name)


def _unpickle(path, op="CIFAR100"):
    """The pickle at `path` (at most _MAX_BYTES), NumPy arrays and plain containers only."""
    if os.path.getsize(path) > _MAX_BYTES:
        raise ts.FileError(f"{op}: {path} is larger than {_MAX_BYTES} bytes")
    with open(path, "rb") as f:
        u = _ArraysOnly(f, encoding="latin1")
        u.op = op
        return u.load()


class CIFAR100(_data.Dataset):
    def __init__(self, root, train=True, transform=None, target_transform=None,
                 download=False):
        self.root, self.train = os.path.expanduser(os.fspath(root)), bool(train)
        self.transform, self.target_transform = transform, target_transform
        split = "train" if self.train else "test"
        py = os.path.join(self.root, "cifar-100-python")
        binary = os.path.join(self.root, "cifar-100-binary")
        if os.path.isfile(os.path.join(py, split)):
            d = _unpickle(os.path.join(py, split))
            raw = np.asarray(d["data"], dtype=np.uint8)
            labels = [int(v) for v in d["fine_labels"]]
            meta = os.path.join(py, "meta")
            names = (list(_unpickle(meta)["fine_label_names"]) if os.path.isfile(meta)
                     else None)
        elif os.path.isfile(os.path.join(binary, split + ".bin")):
            path = os.path.join(binary, split + ".bin")
            size = os.path.getsize(path)
            if size % 3074 or size > _MAX_BYTES:
                raise ts.FileError(f"CIFAR100: {path} is {size} bytes, not a multiple of 3074")
            rec = np.fromfile(path, dtype=np.uint8).reshape(-1, 3074)
            raw, labels = rec[:, 2:], rec[:, 1].astype(np.int64).tolist()
            txt = os.path.join(binary, "fine_label_names.txt")
            names = None
            if os.path.isfile(txt):
                with open(txt) as f:
                    names = [ln.strip() for ln in f if ln.strip()]
        else:
            hint = " (download=True: tessera downloads nothing; put the files in root)" \
                if download else ""
            raise ts.FileError(f"CIFAR100: neither {py}/{split} nor {binary}/{split}.bin "
                               f"exists{hint}")
        if raw.ndim != 2 or raw.shape[1] != 3072 or len(labels) != raw.shape[0]:
            raise ts.FileError(f"CIFAR100: {split} holds {raw.shape} pixels for {len(labels)} "
                               "labels, not [N, 3072] and N")
        if any(not 0 <= v < 100 for v in labels):
            raise ts.FileError("CIFAR100: a fine label outside [0, 100)")
        self.data = np.ascontiguousarray(raw.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        self.targets = labels
        self.classes = names if names and len(names) == 100 else [str(i) for i in range(100)]

    @property
    def class_to_idx(self):
        return {c: i for i, c in enumerate(self.classes)}

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        img, target = ts.tensor(self.data[index]), self.targets[index]
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target
