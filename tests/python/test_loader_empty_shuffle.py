"""An empty map-style data set with shuffle=True / RandomSampler: torch refuses it when the loader
is made (RandomSampler's "num_samples should be a positive integer value"; issue 53: yunjey's
pytorch_basics builds DataLoader(CustomDataset(), shuffle=True) over a data set of length 0 and
PyTorch stops there); without shuffle it is an empty loader, as in torch."""
import pytest

from tessera.utils.data import DataLoader, Dataset, RandomSampler, TensorDataset
import tessera as ts


class Empty(Dataset):
    def __getitem__(self, i):
        raise IndexError(i)

    def __len__(self):
        return 0


def test_shuffle_over_empty_refused():
    with pytest.raises(ValueError, match="num_samples should be a positive integer value, but got "
                                         "num_samples=0"):
        DataLoader(Empty(), batch_size=64, shuffle=True)
    with pytest.raises(ValueError, match="num_samples=0"):
        RandomSampler(Empty())
    with pytest.raises(ValueError, match="num_samples=0"):
        DataLoader(TensorDataset(ts.zeros(0, 2)), shuffle=True)


def test_empty_without_shuffle_is_empty():
    dl = DataLoader(Empty(), batch_size=64)
    assert len(dl) == 0 and list(dl) == []
    assert len(RandomSampler(Empty(), num_samples=3, replacement=True)) == 3
    assert len(list(DataLoader(TensorDataset(ts.zeros(3, 2)), batch_size=2, shuffle=True))) == 2
