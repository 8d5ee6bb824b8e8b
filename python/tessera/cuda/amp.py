"""tessera.cuda.amp — torch.cuda.amp's autocast and GradScaler over tessera.amp. The "cuda" they
stand for is the accelerator: CUDA when present, else the simulated devices (sim:N), so a seed
program that says `with autocast():` runs mixed precision on sim:0 as it would on a GPU."""
from tessera import _C
from tessera import amp as _amp

__all__ = ["autocast", "GradScaler"]


def _accelerator():
    return "cuda" if _C._cuda_is_available() else "sim"


def autocast(enabled=True, dtype=None, cache_enabled=True):
    """torch.cuda.amp.autocast(): tessera.amp.autocast on the accelerator's device type."""
    return _amp.autocast(_accelerator(), dtype=dtype, enabled=enabled,
                         cache_enabled=cache_enabled)


def GradScaler(*args, **kwargs):  # noqa: N802  (torch's class name)
    """torch.cuda.amp.GradScaler(...): tessera.amp.GradScaler."""
    return _amp.GradScaler(*args, **kwargs)
