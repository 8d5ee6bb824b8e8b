"""tessera.utils.sampler — torch.utils.data's samplers: the order in which a DataLoader takes a
map-style data set's indices (Sampler, SequentialSampler, RandomSampler, SubsetRandomSampler,
WeightedRandomSampler) and the grouping of indices into batches (BatchSampler).

Random samplers draw from Python's Mersenne Twister seeded from tessera.manual_seed (as the
DataLoader's own shuffling): a program that seeds Tessera sees the same order on every run; each
new iteration (epoch) draws afresh. A `generator=` may be a random.Random, used as it is."""
import itertools
import random as _random
from typing import Generic, TypeVar

from tessera import _C

_T_co = TypeVar("_T_co", covariant=True)

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]


class Sampler(Generic[_T_co]):
    """Base class: an iterable of indices (define __iter__, and __len__ where known); Sampler[int]
    is a generic alias, as in torch."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError("Sampler subclasses must define __iter__")


def _rng(generator):
    if generator is None:
        return _random.Random(_C._loader_seed())
    if isinstance(generator, _random.Random):
        return generator
    from tessera._generator import Generator, python_random
    if isinstance(generator, Generator):  # torch's: a tessera.Generator seeds the shuffles
        return python_random(generator)
    raise TypeError("generator must be a tessera.Generator, a random.Random or None, not %s"
                    % type(generator).__name__)


class _Drawing(Sampler):
    """A sampler whose epochs draw from one generator, seeded once (torch: each iteration of a
    RandomSampler gives a new permutation)."""

    def __init__(self, generator):
        self._gen = _rng(generator)


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(_Drawing):
    """A random permutation of the indices, or num_samples draws with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError("replacement should be a boolean value, but got replacement=%r"
                            % (replacement,))
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            raise ValueError("num_samples should be a positive integer value, but got "
                             "num_samples=%r" % (num_samples,))
        super().__init__(generator)
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        if self.num_samples <= 0:  # as torch: an empty data set too (DataLoader(shuffle=True))
            raise ValueError("num_samples should be a positive integer value, but got "
                             "num_samples=%r" % (self.num_samples,))

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        # drawn lazily: num_samples may be huge (an "infinite" loader asks for 10**10)
        n = len(self.data_source)
        if self.replacement:
            return (self._gen.randrange(n) for _ in range(self.num_samples))
        return self._permutations(n, self.num_samples)

    def _permutations(self, n, count):
        while count > 0 and n:  # num_samples may exceed n: one permutation after another
            order = list(range(n))
            self._gen.shuffle(order)
            yield from order[:count]
            count -= n

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(_Drawing):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        super().__init__(generator)
        self.indices = list(indices)

    def __iter__(self):
        order = list(self.indices)
        self._gen.shuffle(order)
        return iter(order)

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(_Drawing):
    """num_samples indices drawn with probabilities proportional to weights."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             "num_samples=%r" % (num_samples,))
        if not isinstance(replacement, bool):
            raise ValueError("replacement should be a boolean value, but got replacement=%r"
                             % (replacement,))
        w = weights.tolist() if hasattr(weights, "tolist") else list(weights)
        if any(not isinstance(x, (int, float)) for x in w):
            raise ValueError("weights should be a sequence of numbers")
        if not w or any(x < 0 or x != x for x in w) or sum(w) <= 0:
            raise ValueError("weights must be non-negative and not all zero, got %r" % (w,))
        if not replacement and num_samples > sum(1 for x in w if x > 0):
            raise RuntimeError("WeightedRandomSampler: cannot draw %d samples without replacement "
                               "from %d non-zero weights" % (num_samples,
                                                             sum(1 for x in w if x > 0)))
        super().__init__(generator)
        self.weights = [float(x) for x in w]
        self.num_samples = num_samples
        self.replacement = replacement

    def __iter__(self):
        n = len(self.weights)
        if self.replacement:
            return self._draws(n)
        w = list(self.weights)  # without replacement: each draw removes its index
        out = []
        for _ in range(self.num_samples):
            i = self._gen.choices(range(n), weights=w, k=1)[0]
            out.append(i)
            w[i] = 0.0
        return iter(out)

    def _draws(self, n):
        # lazily, in chunks: the same stream as one choices(k=num_samples) call
        cum = list(itertools.accumulate(self.weights))
        left = self.num_samples
        while left > 0:
            k = min(left, 4096)
            yield from self._gen.choices(range(n), cum_weights=cum, k=k)
            left -= k

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of batch_size (the last one shorter unless
    drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        if (not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0):
            raise ValueError("batch_size should be a positive integer value, but got "
                             "batch_size=%r" % (batch_size,))
        if not isinstance(drop_last, bool):
            raise ValueError("drop_last should be a boolean value, but got drop_last=%r"
                             % (drop_last,))
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
