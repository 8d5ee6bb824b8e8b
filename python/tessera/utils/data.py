"""tessera.utils.data — Dataset, TensorDataset, DataLoader and the built-in data sets.

Two paths, one DataLoader:

* the C library's data sets (MNIST, FashionMNIST, CIFAR10, IdxDataset, and a TensorDataset of
  (inputs, labels) cpu tensors) with transforms from tessera.vision.transforms are loaded by the C
  loader: its num_workers threads read, transform and stack samples with the GIL released;
* a Dataset written in Python (__len__ / __getitem__), a custom collate_fn or a Python callable
  transform runs on Python threads (num_workers of them; __getitem__ holds the GIL, the ops it
  calls release it). Python code never runs on the C loader's threads: the loader calls its data
  sets inside C memory scopes, which Python-made tensors must not enter.

Batches are [inputs, labels] lists (as torch's default_collate makes for (x, y) samples) of cpu
tensors, pinned with pin_memory=True.
"""
import collections.abc
import concurrent.futures
import itertools
import os
import queue
import random as _random
import threading
from typing import Generic

import tessera as _t
from tessera import _C
from tessera.utils.sampler import _rng, _T_co
from tessera.utils.sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                                   SubsetRandomSampler, WeightedRandomSampler)

__all__ = [
    "Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "Subset", "random_split",
    "DataLoader", "default_collate", "get_worker_info", "MNIST", "FashionMNIST", "CIFAR10",
    "IdxDataset", "DistributedSampler", "Sampler", "SequentialSampler", "RandomSampler",
    "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler",
]


class Dataset(Generic[_T_co]):
    """A map-style data set: subclass it and define __getitem__ (and __len__); Dataset[T] is a
    generic alias (typing.Generic), as in torch."""

    def __getitem__(self, index):
        raise NotImplementedError("Dataset subclasses must define __getitem__")

    def _native(self):
        """The _C._Dataset that loads this data set in C, or None (Python path)."""
        return None


class IterableDataset(Dataset[_T_co]):
    """A stream of samples: subclass it and define __iter__. The DataLoader batches the stream
    in order (no shuffle, no sampler); with num_workers > 0 one thread reads it ahead of the
    training loop, so the stream is read once — not once per worker as with torch's processes,
    and get_worker_info() gives None, so code that splits the stream by worker reads all of it."""

    def __iter__(self):
        raise NotImplementedError("IterableDataset subclasses must define __iter__")

    def __getitem__(self, index):
        raise TypeError("%s is an IterableDataset: it has no __getitem__" % type(self).__name__)


def get_worker_info():
    """None: Tessera's loader workers are threads of this process, each sees the whole data set
    (torch returns None in the main process too)."""
    return None


class TensorDataset(Dataset):
    """Samples are the rows of the given tensors (all of the same first dimension)."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: expected at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, _t.Tensor):
                raise TypeError("TensorDataset(): argument %d must be Tensor, not %s"
                                % (i, type(t).__name__))
        n = tensors[0].shape[0] if tensors[0].dim() else None
        if any(not t.dim() or t.shape[0] != n for t in tensors):
            raise ValueError("TensorDataset: size mismatch between tensors (first dimensions)")
        self.tensors = tensors
        self._c = None

    def __len__(self):
        return self.tensors[0].shape[0]

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def _native(self):
        if len(self.tensors) != 2 or any(t.device.type != "cpu" for t in self.tensors):
            return None
        if self._c is None:
            self._c = _C._tensor_dataset(self.tensors[0], self.tensors[1])
        return self._c


class Subset(Dataset):
    """The samples of dataset at the given indices."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = list(indices)

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, index):
        return self.dataset[self.indices[index]]


class ConcatDataset(Dataset):
    """The samples of several map-style data sets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        n = len(self)
        if index < 0:
            if -index > n:
                raise ValueError("absolute value of index should not exceed dataset length")
            index += n
        if index >= n:
            raise IndexError("ConcatDataset: index %d out of range for %d samples" % (index, n))
        k = next(i for i, c in enumerate(self.cumulative_sizes) if index < c)
        return self.datasets[k][index - (self.cumulative_sizes[k - 1] if k else 0)]


def random_split(dataset, lengths, generator=None):
    """Splits dataset into non-overlapping Subsets of the given lengths (or fractions); the
    order is drawn from generator (a tessera.Generator or random.Random; None: the global one)."""
    n = len(dataset)
    if all(isinstance(x, float) for x in lengths) and abs(sum(lengths) - 1) < 1e-9:
        sizes = [int(n * f) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
    else:
        sizes = list(lengths)
    if sum(sizes) != n:
        raise ValueError("random_split: the lengths add up to %d, the data set has %d samples"
                         % (sum(sizes), n))
    order = list(range(n))
    _rng(generator).shuffle(order)
    out, start = [], 0
    for s in sizes:
        out.append(Subset(dataset, order[start:start + s]))
        start += s
    return out


# ------------------------------------------------------------------ the built-in data sets

def _spec_of(transform):
    """The C spec of a tessera.vision transform, or None when it has none (a Python callable)."""
    if transform is None:
        return None
    spec = getattr(transform, "_spec", None)
    return spec() if callable(spec) else None


def _expand_root(root):
    """torchvision's VisionDataset: a str root has its ~ expanded (os.path.expanduser)"""
    return os.path.expanduser(root) if isinstance(root, str) else root


class _CDataset(Dataset):
    """A data set read by the C library; transform: a tessera.vision transform (runs in C) or any
    callable on a Tensor (runs in Python, and the DataLoader takes the Python path)."""

    def _open(self, download, make, *args):
        self._py_transform = None
        spec = _spec_of(self.transform)
        if self.transform is not None and spec is None:
            self._py_transform = self.transform
        self._c_recipe = (make.__name__, args)  # how __setstate__ opens it again
        try:
            self._c = make(*args, transform=spec)
        except _t.FileError as e:
            if not download:
                raise
            # offline by design: the files come from a Debian package or a folder filled by hand
            raise _t.FileError("%s (download=True: tessera downloads nothing; put the files in "
                               "root)" % e) from None

    def __len__(self):
        return len(self._c)

    def __getstate__(self):
        """pickled (a process of tessera.multiprocessing receives it): the C reader is opened
        again from its files on unpickling, the cached raw arrays left out"""
        state = self.__dict__.copy()
        state.pop("_c", None)
        state.pop("_raw", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        name, args = self._c_recipe
        self._c = getattr(_C, name)(*args, transform=_spec_of(self.transform))

    def __getitem__(self, index):
        x, y = self._c[index]
        if self._py_transform is not None:
            x = self._py_transform(x)
        if getattr(self, "target_transform", None) is not None:
            y = self.target_transform(y)
        elif y.dim() == 0:
            y = int(y.item())  # torchvision gives the label as an int
        return x, y

    def _native(self):
        if self._py_transform is not None or getattr(self, "target_transform", None) is not None:
            return None
        return self._c

    @property
    def num_classes(self):
        return self._c.num_classes


class MNIST(_CDataset):
    """MNIST from root ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]). Samples: uint8 HWC
    [28, 28, 1] images (float CHW after transforms.ToTensor()) and int labels."""

    _default_root = None

    def __init__(self, root=None, train=True, transform=None, target_transform=None,
                 download=False):
        self.root, self.train = _expand_root(root), train
        self.transform, self.target_transform = transform, target_transform
        self._open(download, _C._mnist, self._find(self.root), bool(train))

    @classmethod
    def _find(cls, root):
        """root itself or root/<ClassName>/raw (torchvision's layout); None: Debian's folder"""
        if root is None:
            return cls._default_root
        raw = os.path.join(os.fspath(root), cls.__name__, "raw")
        return raw if os.path.isdir(raw) else root

    def _raw_arrays(self):
        """(uint8 [N, 28, 28] images, int64 [N] labels), untransformed, read once"""
        if getattr(self, "_raw", None) is None:
            c = _C._mnist(self._find(self.root), bool(self.train), transform=None)
            xs, ys = zip(*(c[i] for i in range(len(c)))) if len(c) else ((), ())
            data = _t.stack(list(xs))[..., 0] if xs else _t.zeros(0, 28, 28, dtype=_t.uint8)
            targets = _t.stack(list(ys)).to(_t.int64) if ys else _t.zeros(0, dtype=_t.int64)
            self._raw = (data, targets)
        return self._raw

    @property
    def data(self):
        """torchvision's MNIST.data: every image, uint8 [N, 28, 28], before any transform"""
        return self._raw_arrays()[0]

    @property
    def targets(self):
        """torchvision's MNIST.targets: every label, int64 [N]"""
        return self._raw_arrays()[1]


class FashionMNIST(MNIST):
    """Fashion-MNIST; root None reads Debian's dataset-fashion-mnist
    (/usr/share/datasets/fashion-mnist)."""


class CIFAR10(_CDataset):
    """CIFAR-10 binary batches (data_batch_1..5.bin, test_batch.bin) in root or in
    root/cifar-10-batches-bin. Samples: uint8 HWC [32, 32, 3] images and int labels."""

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        self.root, self.train = _expand_root(root), train
        self.transform, self.target_transform = transform, target_transform
        self._open(download, _C._cifar10, self.root, bool(train))


class IdxDataset(_CDataset):
    """A pair of IDX files (images, labels), plain or .gz."""

    def __init__(self, images, labels, transform=None, target_transform=None):
        self.transform, self.target_transform = transform, target_transform
        self._open(False, _C._idx_dataset, images, labels)


# ------------------------------------------------------------------ samplers

class DistributedSampler(Sampler):
    """torch's DistributedSampler (the C library's): each of num_replicas processes takes every
    num_replicas-th index of the epoch's permutation (seeded by seed and the epoch set by
    set_epoch), padded to a multiple of num_replicas (or cut, drop_last). num_replicas / rank
    None: tessera.distributed's world size and rank."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if (num_replicas is None) != (rank is None):
            from tessera import distributed
            num_replicas = distributed.get_world_size() if num_replicas is None else num_replicas
            rank = distributed.get_rank() if rank is None else rank
        self.num_replicas, self.rank = num_replicas or 0, rank or 0
        self.shuffle, self.seed, self.drop_last = bool(shuffle), int(seed), bool(drop_last)
        self.dataset_len = len(dataset)
        self.epoch = 0
        self._c = _C._Sampler(self.dataset_len, self.num_replicas, self.rank, self.shuffle,
                              self.seed, self.drop_last)

    def set_epoch(self, epoch):
        self.epoch = int(epoch)
        self._c.set_epoch(self.epoch)

    def __len__(self):
        return len(self._c)

    def __iter__(self):
        return iter(self._c.indices())


# ------------------------------------------------------------------ collation

def default_collate(batch):
    """torch's default_collate: tensors stacked on a new first dim, numbers made tensors,
    dicts and tuples collated field by field."""
    elem = batch[0]
    if isinstance(elem, _t.Tensor):
        return _t.stack(list(batch), 0)
    if isinstance(elem, bool):
        return _t.tensor(list(batch), dtype=_t.bool)
    if isinstance(elem, int):
        return _t.tensor(list(batch), dtype=_t.int64)
    if isinstance(elem, float):
        return _t.tensor(list(batch), dtype=_t.float64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if type(elem).__module__ == "numpy":
        return _t.stack([_t.as_tensor(b) for b in batch], 0)
    if isinstance(elem, collections.abc.Mapping):
        return {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, collections.abc.Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of "
                               "equal size")
        return [default_collate(list(s)) for s in zip(*batch)]
    raise TypeError("default_collate: batch must contain tensors, numbers, dicts or lists; found "
                    "%s" % type(elem).__name__)


def _pin(obj):
    if isinstance(obj, _t.Tensor):
        return obj.pin_memory()
    if isinstance(obj, list):
        return [_pin(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _pin(v) for k, v in obj.items()}
    return obj


# ------------------------------------------------------------------ the loader

class DataLoader(Generic[_T_co]):
    """torch.utils.data.DataLoader: batches of a map-style data set, shuffled per epoch when
    shuffle=True (the order follows tessera.manual_seed), made by num_workers threads."""

    def __init__(self, dataset, batch_size=1, shuffle=False, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False,
                 timeout=0, worker_init_fn=None, prefetch_factor=None, persistent_workers=False,
                 generator=None, multiprocessing_context=None, in_order=True,
                 pin_memory_device=""):
        # the workers are threads: no process start method to choose, and batches always come
        # in order (which in_order=False allows); PyTorch's check of a context without workers
        if multiprocessing_context is not None and int(num_workers) == 0:
            raise ValueError("multiprocessing_context can only be used with multi-process "
                             "loading (num_workers > 0), but got num_workers=0")
        self.multiprocessing_context = multiprocessing_context
        self.in_order = bool(in_order)
        self.pin_memory_device = pin_memory_device
        if batch_size is not None and (isinstance(batch_size, bool) or int(batch_size) < 1):
            raise ValueError("DataLoader: batch_size should be a positive integer or None, got %r"
                             % (batch_size,))
        if int(num_workers) < 0:
            raise ValueError("DataLoader: num_workers option should be non-negative")
        iterable = isinstance(dataset, IterableDataset)
        if iterable and (shuffle or sampler is not None or batch_sampler is not None):
            raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle, "
                             "sampler and batch_sampler options, got shuffle=%r, sampler=%r, "
                             "batch_sampler=%r" % (shuffle, sampler, batch_sampler))
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if shuffle and not iterable and batch_sampler is None and len(dataset) == 0:
            # torch builds a RandomSampler here, which refuses an empty data set
            raise ValueError("num_samples should be a positive integer value, but got "
                             "num_samples=0")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with "
                                 "batch_size, shuffle, sampler, and drop_last")
            batch_size = None
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching and is "
                             "mutually exclusive with drop_last")
        self.dataset = dataset
        self.batch_size = None if batch_size is None else int(batch_size)
        self.shuffle = bool(shuffle)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = int(num_workers)
        self.collate_fn = collate_fn
        self.pin_memory = bool(pin_memory)
        self.drop_last = bool(drop_last)
        self.prefetch_factor = prefetch_factor
        self.worker_init_fn = worker_init_fn
        self._seed = (_C._loader_seed() if generator is None else
                      _rng(generator).getrandbits(62))  # a tessera.Generator seeds the shuffle
        self._epoch = 0
        native = None
        c_sampler = getattr(sampler, "_c", None) if isinstance(sampler, DistributedSampler) else None
        if (collate_fn is None and (sampler is None or c_sampler is not None)
                and batch_sampler is None and self.batch_size is not None and not iterable
                and hasattr(dataset, "_native")):
            native = dataset._native()
        self._loader = None
        if native is not None:
            self._loader = _C._Loader(native, batch_size=self.batch_size, shuffle=self.shuffle,
                                      drop_last=self.drop_last, num_workers=self.num_workers,
                                      pin_memory=self.pin_memory, seed=self._seed,
                                      prefetch=int(prefetch_factor or 0), sampler=c_sampler)

    @property
    def uses_c_loader(self):
        """True when the C loader makes the batches (a built-in data set, no Python code)."""
        return self._loader is not None

    def __len__(self):
        if self._loader is not None:
            return len(self._loader)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)  # TypeError when the stream has no __len__, as in torch
        else:
            n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        epoch = self._epoch
        self._epoch += 1
        if isinstance(self.sampler, DistributedSampler):
            epoch = self.sampler.epoch  # as torch: the epoch the user set (set_epoch)
        if self._loader is not None:
            return _NativeIter(self._loader, epoch)
        if isinstance(self.dataset, IterableDataset):
            return _StreamIter(self)
        return _PythonIter(self, epoch)

    def _indices(self, epoch):
        """the epoch's indices, drawn lazily: a sampler may be long or endless (a RandomSampler with
        replacement and num_samples=10**10, an infinite generator), as torch allows"""
        if self.sampler is not None:
            return iter(self.sampler)  # its epoch is the user's (set_epoch), as in torch
        order = list(range(len(self.dataset)))
        if self.shuffle:
            _random.Random(self._seed * 1000003 + epoch).shuffle(order)
        return iter(order)

    def _batches(self, epoch):
        """The epoch's index lists (one index per "batch" without auto-batching), an iterator."""
        if self.batch_sampler is not None:
            return (list(b) for b in self.batch_sampler)
        idx = self._indices(epoch)
        if self.batch_size is None:
            return idx
        return _chunks(idx, self.batch_size, self.drop_last)


_DONE = object()


def _chunks(it, size, drop_last):
    while True:
        batch = list(itertools.islice(it, size))
        if not batch or (drop_last and len(batch) < size):
            return
        yield batch


class _NativeIter:
    """One epoch of the C loader."""

    def __init__(self, loader, epoch):
        self._loader = loader
        if loader.epoch != epoch:
            loader.set_epoch(epoch)  # a loop that stopped early: start the next epoch afresh
        self._done = False

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def __next__(self):
        if self._done:
            raise StopIteration
        batch = self._loader.next()
        if batch is None:
            self._done = True
            raise StopIteration
        return batch


def _collate(dl, samples):
    """a batch of samples, or one sample as it is without auto-batching (batch_size=None)"""
    if dl.batch_size is None and dl.batch_sampler is None:
        batch = dl.collate_fn(samples) if dl.collate_fn else samples
    else:
        batch = (dl.collate_fn or default_collate)(samples)
    return _pin(batch) if dl.pin_memory else batch


def _make_batch(dl, indices):
    """one batch of a Python data set (on a worker thread when num_workers > 0)"""
    if dl.batch_size is None and dl.batch_sampler is None:
        return _collate(dl, dl.dataset[indices])
    return _collate(dl, [dl.dataset[i] for i in indices])


class _StreamIter:
    """One pass over an IterableDataset: batch_size samples a batch, in the stream's order; with
    num_workers > 0 a thread reads and collates ahead (num_workers * prefetch_factor batches)."""

    _END = object()

    def __init__(self, dl):
        self._dl = dl
        self._batches = self._make(dl)
        self._thread = None
        if dl.num_workers > 0:
            self._queue = queue.Queue(maxsize=dl.num_workers * int(dl.prefetch_factor or 2))
            self._stop = threading.Event()
            # the thread holds the queue, the event and the stream, never this iterator: when the
            # loop drops the iterator, __del__ stops and joins the thread
            self._thread = threading.Thread(
                target=_StreamIter._produce, name="tessera-loader", daemon=True,
                args=(self._batches, self._queue, self._stop, dl.worker_init_fn, self._END))
            self._thread.start()

    @staticmethod
    def _make(dl):
        it = iter(dl.dataset)
        if dl.batch_size is None:
            for sample in it:
                yield _collate(dl, sample)
            return
        while True:
            samples = list(itertools.islice(it, dl.batch_size))
            if not samples or (dl.drop_last and len(samples) < dl.batch_size):
                return
            yield _collate(dl, samples)

    @staticmethod
    def _put(q, stop, item):
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    @staticmethod
    def _produce(batches, q, stop, init, end):
        put = _StreamIter._put
        if init:
            try:
                init(0)
            except BaseException as e:  # handed to the training loop, raised there
                put(q, stop, (False, e))
                return
        try:
            for batch in batches:
                if not put(q, stop, (True, batch)):
                    return
            put(q, stop, (True, end))
        except BaseException as e:
            put(q, stop, (False, e))

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._dl)

    def __next__(self):
        if self._dl.num_workers == 0:
            return next(self._batches)
        if self._thread is None:  # the stream ended, failed or the loop was closed
            raise StopIteration
        ok, item = self._queue.get()
        if not ok:
            self._close()
            raise item
        if item is self._END:
            self._close()
            raise StopIteration
        return item

    def _close(self):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def __del__(self):
        self._close()


class _PythonIter:
    """One epoch of a Python data set: batches made in order, num_workers threads ahead."""

    def __init__(self, dl, epoch):
        self._dl = dl
        self._batches = dl._batches(epoch)
        self._pool = None
        self._pending = collections.deque()
        if dl.num_workers > 0:
            ids = itertools.count()
            init = dl.worker_init_fn
            self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=dl.num_workers, thread_name_prefix="tessera-loader",
                initializer=(lambda: init(next(ids))) if init else None)
            self._ahead = dl.num_workers * int(dl.prefetch_factor or 2)

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._dl)

    def __next__(self):
        if self._pool is None:
            return _make_batch(self._dl, next(self._batches))  # StopIteration ends the epoch
        while len(self._pending) < self._ahead:
            indices = next(self._batches, _DONE)
            if indices is _DONE:
                break
            # the workers get the loader, not this iterator: its last reference stays here
            self._pending.append(self._pool.submit(_make_batch, self._dl, indices))
        if not self._pending:
            self._close()
            raise StopIteration
        try:
            return self._pending.popleft().result()
        except BaseException:
            self._close()
            raise

    def _close(self):
        if self._pool is not None:
            for f in self._pending:
                f.cancel()
            self._pending.clear()
            self._pool.shutdown(wait=True)
            self._pool = None

    def __del__(self):
        self._close()
