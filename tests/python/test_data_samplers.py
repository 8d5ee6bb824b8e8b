"""test_data_samplers.py — torch.utils.data's samplers (Sequential, Random, SubsetRandom,
WeightedRandom, Batch), the DataLoader's batch_sampler= and batch_size=None, IterableDataset
(streams batched in order, read ahead by a thread, errors and early exits) and ConcatDataset."""
import math
import threading

import pytest

import tessera
from tessera.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset,
                                IterableDataset, RandomSampler, Sampler, SequentialSampler,
                                SubsetRandomSampler, TensorDataset, WeightedRandomSampler,
                                get_worker_info)


class Numbers(Dataset):
    """sample i: (float tensor [i], i)"""

    def __init__(self, n, base=0):
        self.n, self.base = n, base

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return tessera.tensor([float(self.base + i)]), self.base + i


class Stream(IterableDataset):
    """0 .. n-1 as (tensor [i], i); fails with ValueError at fail_at; counts its reads"""

    def __init__(self, n, fail_at=None, sized=False):
        self.n, self.fail_at, self.sized = n, fail_at, sized
        self.started = 0
        self.threads = set()

    def __iter__(self):
        self.started += 1
        for i in range(self.n):
            self.threads.add(threading.get_ident())
            if i == self.fail_at:
                raise ValueError("stream broke at %d" % i)
            yield tessera.tensor([float(i)]), i

    def __len__(self):
        if not self.sized:
            raise TypeError("Stream has no len()")
        return self.n


def _labels(batches):
    return [b[1].tolist() for b in batches]


# ------------------------------------------------------------------ samplers

def test_sequential_sampler():
    s = SequentialSampler(range(5))
    assert list(s) == [0, 1, 2, 3, 4] and len(s) == 5
    assert isinstance(s, Sampler)


def test_random_sampler_is_a_permutation_new_each_epoch_and_seeded():
    tessera.manual_seed(3)
    s = RandomSampler(range(50))
    a, b = list(s), list(s)
    assert sorted(a) == list(range(50)) and sorted(b) == list(range(50))
    assert a != b  # each iteration draws afresh (1 in 50! to be equal by chance)
    assert a != list(range(50))
    tessera.manual_seed(3)
    assert list(RandomSampler(range(50))) == a  # tessera.manual_seed fixes the order


def test_random_sampler_num_samples_and_replacement():
    tessera.manual_seed(0)
    s = RandomSampler(range(4), num_samples=10)
    got = list(s)
    assert len(got) == 10 == len(s)
    assert sorted(got[:4]) == [0, 1, 2, 3] and sorted(got[4:8]) == [0, 1, 2, 3]
    r = RandomSampler(range(3), replacement=True, num_samples=300)
    drawn = list(r)
    assert len(drawn) == 300 and set(drawn) == {0, 1, 2}
    with pytest.raises(ValueError, match="num_samples"):
        RandomSampler(range(3), num_samples=0)
    with pytest.raises(TypeError, match="replacement"):
        RandomSampler(range(3), replacement=1)


def test_subset_random_sampler():
    s = SubsetRandomSampler([7, 3, 9, 11])
    assert sorted(s) == [3, 7, 9, 11] and len(s) == 4


def test_weighted_random_sampler_follows_the_weights():
    tessera.manual_seed(5)
    n = 20000
    s = WeightedRandomSampler([0.0, 1.0, 3.0], n)
    drawn = list(s)
    assert len(drawn) == n == len(s)
    assert 0 not in drawn  # weight 0 is never drawn
    p = drawn.count(2) / n  # expected 3/4; binomial standard deviation sqrt(p(1-p)/n) ~ 0.003
    assert abs(p - 0.75) < 6 * math.sqrt(0.75 * 0.25 / n)
    # without replacement: distinct indices, zero weights never
    w = WeightedRandomSampler(tessera.tensor([1.0, 0.0, 2.0, 5.0]), 3, replacement=False)
    once = list(w)
    assert sorted(once) == [0, 2, 3]
    with pytest.raises(RuntimeError, match="without replacement"):
        WeightedRandomSampler([1.0, 0.0], 2, replacement=False)
    with pytest.raises(ValueError, match="non-negative"):
        WeightedRandomSampler([1.0, -1.0], 2)
    with pytest.raises(ValueError, match="num_samples"):
        WeightedRandomSampler([1.0], 0)


def test_batch_sampler():
    b = BatchSampler(SequentialSampler(range(10)), 4, drop_last=False)
    assert list(b) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] and len(b) == 3
    d = BatchSampler(range(10), 4, drop_last=True)
    assert list(d) == [[0, 1, 2, 3], [4, 5, 6, 7]] and len(d) == 2
    with pytest.raises(ValueError, match="batch_size"):
        BatchSampler(range(3), 0, False)
    with pytest.raises(ValueError, match="drop_last"):
        BatchSampler(range(3), 2, drop_last=None)


def test_generator_is_a_random_random():
    import random
    a = list(RandomSampler(range(30), generator=random.Random(9)))
    b = list(RandomSampler(range(30), generator=random.Random(9)))
    assert a == b and sorted(a) == list(range(30))
    with pytest.raises(TypeError, match="generator"):
        RandomSampler(range(3), generator=42)


# ------------------------------------------------------------------ the DataLoader

@pytest.mark.parametrize("workers", [0, 2])
def test_loader_batch_sampler(workers):
    batches = [[4, 1], [0], [2, 3, 5]]
    dl = DataLoader(Numbers(6), batch_sampler=batches, num_workers=workers)
    assert len(dl) == 3 and not dl.uses_c_loader
    got = list(dl)
    assert _labels(got) == batches
    assert got[2][0].shape == (3, 1) and got[2][0].flatten().tolist() == [2.0, 3.0, 5.0]
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(Numbers(6), batch_size=2, batch_sampler=batches)
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(Numbers(6), shuffle=True, batch_sampler=batches)


def test_loader_batch_sampler_on_a_builtin_dataset_takes_the_python_path():
    x = tessera.arange(12, dtype=tessera.float32).reshape(6, 2)
    y = tessera.arange(6)
    dl = DataLoader(TensorDataset(x, y), batch_sampler=BatchSampler(range(5, -1, -1), 4, False))
    assert not dl.uses_c_loader
    assert _labels(dl) == [[5, 4, 3, 2], [1, 0]]


def test_loader_sampler_objects():
    tessera.manual_seed(11)
    dl = DataLoader(Numbers(9), batch_size=4, sampler=RandomSampler(range(9)))
    labels = sum(_labels(dl), [])
    assert sorted(labels) == list(range(9)) and len(dl) == 3


def test_loader_without_auto_batching():
    dl = DataLoader(Numbers(3), batch_size=None)
    got = list(dl)
    assert len(dl) == 3 and [g[1] for g in got] == [0, 1, 2]  # samples as they are
    assert got[1][0].tolist() == [1.0]
    with pytest.raises(ValueError, match="drop_last"):
        DataLoader(Numbers(3), batch_size=None, drop_last=True)
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(Numbers(3), batch_size=0)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("drop_last", [False, True])
def test_iterable_dataset_batches_in_order(workers, drop_last):
    s = Stream(10)
    dl = DataLoader(s, batch_size=4, num_workers=workers, drop_last=drop_last)
    want = [[0, 1, 2, 3], [4, 5, 6, 7]] + ([] if drop_last else [[8, 9]])
    assert _labels(dl) == want
    assert _labels(dl) == want  # a second epoch reads the stream again
    assert s.started == 2
    if workers:
        assert threading.get_ident() not in s.threads  # read ahead on the loader's thread
    else:
        assert s.threads == {threading.get_ident()}


def test_iterable_dataset_len_and_option_errors():
    with pytest.raises(TypeError):
        len(DataLoader(Stream(5), batch_size=2))
    assert len(DataLoader(Stream(5, sized=True), batch_size=2)) == 3
    assert len(DataLoader(Stream(5, sized=True), batch_size=2, drop_last=True)) == 2
    for kw in ({"shuffle": True}, {"sampler": [0, 1]}, {"batch_sampler": [[0]]}):
        with pytest.raises(ValueError, match="IterableDataset"):
            DataLoader(Stream(5), **kw)
    with pytest.raises(TypeError, match="no __getitem__"):
        Stream(3)[0]


@pytest.mark.parametrize("workers", [0, 2])
def test_iterable_dataset_error_reaches_the_loop(workers):
    dl = DataLoader(Stream(10, fail_at=5), batch_size=2, num_workers=workers)
    it = iter(dl)
    assert _labels([next(it), next(it)]) == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="stream broke at 5"):
        next(it)
    with pytest.raises(StopIteration):  # the epoch is over after the error
        next(it)


def test_iterable_dataset_early_exit_stops_the_reader():
    s = Stream(100000)
    before = threading.active_count()
    for k, batch in enumerate(DataLoader(s, batch_size=2, num_workers=1, prefetch_factor=2)):
        if k == 3:
            break
    # the reader thread is joined once the iterator goes (it waits on a bounded queue)
    import gc
    gc.collect()
    assert threading.active_count() == before


def test_iterable_dataset_worker_init_fn_and_worker_info():
    seen = []
    dl = DataLoader(Stream(4), batch_size=2, num_workers=1,
                    worker_init_fn=lambda i: seen.append((i, threading.get_ident())))
    assert _labels(dl) == [[0, 1], [2, 3]]
    assert [s[0] for s in seen] == [0] and seen[0][1] != threading.get_ident()
    assert get_worker_info() is None

    def broken(i):
        raise RuntimeError("init failed")
    with pytest.raises(RuntimeError, match="init failed"):
        list(DataLoader(Stream(4), batch_size=2, num_workers=1, worker_init_fn=broken))


def test_iterable_dataset_without_auto_batching():
    got = list(DataLoader(Stream(3), batch_size=None))
    assert [g[1] for g in got] == [0, 1, 2]


# ------------------------------------------------------------------ ConcatDataset

def test_concat_dataset():
    c = ConcatDataset([Numbers(3), Numbers(0), Numbers(2, base=100)])
    assert len(c) == 5 and c.cumulative_sizes == [3, 3, 5]
    assert [c[i][1] for i in range(5)] == [0, 1, 2, 100, 101]
    assert c[-1][1] == 101 and c[-5][1] == 0
    with pytest.raises(IndexError):
        c[5]
    with pytest.raises(ValueError, match="exceed"):
        c[-6]
    with pytest.raises(ValueError, match="empty"):
        ConcatDataset([])
    with pytest.raises(TypeError, match="IterableDataset"):
        ConcatDataset([Numbers(2), Stream(2)])
    assert _labels(DataLoader(c, batch_size=2)) == [[0, 1], [2, 100], [101]]
