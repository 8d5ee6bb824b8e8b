"""tessera.utils — data loading (tessera.utils.data), activation checkpointing
(tessera.utils.checkpoint)."""
from . import data  # noqa: F401
from . import checkpoint  # noqa: F401
from . import _pytree  # noqa: F401  (torch.utils._pytree)
from . import hooks  # noqa: F401  (torch.utils.hooks: RemovableHandle, issue 75)

# torch.utils.data.sampler: the samplers' module (tessera/utils/sampler.py) under PyTorch's name,
# importable (`from tessera.utils.data.sampler import Sampler`) though data is a module
import sys as _sys  # noqa: E402
from . import sampler as _sampler  # noqa: E402

data.sampler = _sampler
_sys.modules.setdefault(__name__ + ".data.sampler", _sampler)

# torch.utils.data's other submodules (dataloader: DataLoader, default_collate, get_worker_info;
# dataset: Dataset, TensorDataset, Subset, ConcatDataset, random_split; distributed:
# DistributedSampler) are this one module under those names, so `from
# tessera.utils.data.dataloader import DataLoader` and `tessera.utils.data.dataset.Dataset` work
for _sub in ("dataloader", "dataset", "distributed"):
    setattr(data, _sub, data)
    _sys.modules.setdefault(__name__ + ".data." + _sub, data)
