"""tessera.vision.datasets — torchvision.datasets' MNIST, FashionMNIST and CIFAR10 (read by the C
library, tessera.utils.data) with .classes / .class_to_idx, FakeData (_fakedata.py), CIFAR100
(_cifar100.py), and in
Python DatasetFolder and ImageFolder (images decoded by stb_image: uint8 [C,H,W] tensors, not
PIL)."""
import os

import tessera as ts
from tessera.utils import data as _data

from ._fakedata import FakeData  # noqa: F401  (another change of issue 53)
from ._cifar100 import CIFAR100  # noqa: F401  (issue 53: the Python or binary files, offline)
from . import _cifar10_py  # CIFAR10 in torchvision's Python layout (issue 53)

__all__ = ["MNIST", "FashionMNIST", "CIFAR10", "CIFAR100", "FakeData", "DatasetFolder",
           "ImageFolder", "IMG_EXTENSIONS"]


class _Classes:
    @property
    def class_to_idx(self):
        return {c: i for i, c in enumerate(self.classes)}


class MNIST(_Classes, _data.MNIST):
    __doc__ = _data.MNIST.__doc__
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six",
               "7 - seven", "8 - eight", "9 - nine"]

    @classmethod
    def _find(cls, root):
        return _data.MNIST._find.__func__(cls, root)


class FashionMNIST(_Classes, _data.FashionMNIST):
    __doc__ = _data.FashionMNIST.__doc__
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot"]
    _default_root = _data.FashionMNIST._default_root

    @classmethod
    def _find(cls, root):
        if root is None:
            return _data.FashionMNIST._find(None)
        raw = os.path.join(os.fspath(root), "FashionMNIST", "raw")
        return raw if os.path.isdir(raw) else root


class CIFAR10(_Classes, _data.CIFAR10):
    __doc__ = _data.CIFAR10.__doc__
    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
               "truck"]

    _py_layout = False  # True: read from torchvision's cifar-10-batches-py (_cifar10_py.py)

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        try:
            super().__init__(root, train, transform, target_transform, download)
            self._py_layout = False
        except ts.FileError:
            # torchvision's own layout (root/cifar-10-batches-py), read in Python
            folder = _cifar10_py.find(os.path.expanduser(os.fspath(root)))
            if folder is None:
                raise
            self.root, self.train = os.path.expanduser(os.fspath(root)), train
            self.transform, self.target_transform = transform, target_transform
            data, targets, names = _cifar10_py.load(folder, bool(train))
            self._raw_cache, self._py_layout = (data, targets), True
            if names is not None:
                self.classes = names

    def __len__(self):
        return len(self._raw_cache[1]) if self._py_layout else super().__len__()

    def __getitem__(self, index):
        if not self._py_layout:
            return super().__getitem__(index)
        img, target = ts.tensor(self.data[index]), self.targets[index]
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def _native(self):
        return None if self._py_layout else super()._native()

    def __setstate__(self, state):
        if state.get("_py_layout"):
            self.__dict__.update(state)
        else:
            super().__setstate__(state)

    @property
    def num_classes(self):
        return 10 if self._py_layout else super().num_classes

    def _raw(self):
        if getattr(self, "_raw_cache", None) is None:
            import numpy as np
            c = ts._C._cifar10(self.root, bool(self.train), transform=None)
            xs, ys = zip(*(c[i] for i in range(len(c)))) if len(c) else ((), ())
            data = (np.stack([x.numpy() for x in xs]) if xs
                    else np.zeros((0, 32, 32, 3), np.uint8))
            self._raw_cache = (data, [int(y.item()) for y in ys])
        return self._raw_cache

    @property
    def data(self):
        """torchvision's CIFAR10.data: a NumPy uint8 array [N, 32, 32, 3]"""
        return self._raw()[0]

    @property
    def targets(self):
        """torchvision's CIFAR10.targets: a list of int labels"""
        return self._raw()[1]


IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def default_loader(path):
    """An image file as a uint8 RGB [3, H, W] tensor (tessera.vision.io.read_image)."""
    from .io import ImageReadMode, read_image
    return read_image(path, ImageReadMode.RGB)


class DatasetFolder(_data.Dataset):
    """root/<class>/**/<file> samples, classes sorted by name (torchvision's DatasetFolder)."""

    def __init__(self, root, loader, extensions=None, transform=None, target_transform=None,
                 is_valid_file=None, allow_empty=False):
        if (extensions is None) == (is_valid_file is None):
            raise ValueError("DatasetFolder: give exactly one of extensions and is_valid_file")
        self.root, self.loader = os.path.expanduser(os.fspath(root)), loader
        self.transform, self.target_transform = transform, target_transform
        if extensions is not None:
            exts = tuple(e.lower() for e in extensions)
            is_valid_file = lambda p: p.lower().endswith(exts)  # noqa: E731
        self.classes = sorted(e.name for e in os.scandir(self.root) if e.is_dir())
        if not self.classes:
            raise FileNotFoundError("DatasetFolder: no class folders in %s" % self.root)
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.samples = []
        for c in self.classes:
            found = []
            for dirpath, _, files in sorted(os.walk(os.path.join(self.root, c), followlinks=True)):
                found += [os.path.join(dirpath, f) for f in sorted(files)
                          if is_valid_file(os.path.join(dirpath, f))]
            if not found and not allow_empty:
                raise FileNotFoundError("DatasetFolder: no valid file in class folder %s"
                                        % os.path.join(self.root, c))
            self.samples += [(p, self.class_to_idx[c]) for p in found]
        self.imgs = self.samples
        self.targets = [t for _, t in self.samples]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        path, target = self.samples[index]
        sample = self.loader(path)
        if self.transform is not None:
            sample = self.transform(sample)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return sample, target


class ImageFolder(DatasetFolder):
    """root/<class>/<image>: uint8 RGB [3, H, W] tensors (torchvision gives PIL images; use
    transforms.ConvertImageDtype(tessera.float32) where ToTensor would follow)."""

    def __init__(self, root, transform=None, target_transform=None, loader=default_loader,
                 is_valid_file=None, allow_empty=False):
        super().__init__(root, loader, IMG_EXTENSIONS if is_valid_file is None else None,
                         transform, target_transform, is_valid_file, allow_empty)


# torchvision's other data sets: importable names whose construction raises (issue 75)
from ._unavailable_datasets import *  # noqa: E402,F401,F403
from ._unavailable_datasets import NAMES as _UNAVAILABLE  # noqa: E402
__all__ += list(_UNAVAILABLE)
