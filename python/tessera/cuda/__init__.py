"""tessera.cuda — torch.cuda's queries: is_available(), device_count(), memory statistics.

The memory functions take any device ("cuda:0", and also "sim:0" or "cpu", which torch.cuda does
not have); device=None means the current CUDA device, and reads 0 on a machine without CUDA (as
torch.cuda.memory_allocated() does before CUDA is initialised)."""
from tessera import _C

from . import amp  # noqa: F401  (tessera.cuda.amp: torch.cuda.amp's autocast, GradScaler)

__all__ = ["is_available", "device_count", "current_device", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_stats",
           "reset_peak_memory_stats", "empty_cache", "mem_get_info", "synchronize"]


def is_available():
    return _C._cuda_is_available()


def device_count():
    return _C._device_count("cuda")


def current_device():
    return 0


def synchronize(device=None):
    """Waits for the device's work; Tessera's ops return finished results, so nothing to do."""


def _device(device):
    """device, or cuda's current device; None when there is no CUDA and none was named."""
    if device is not None:
        return device
    return "cuda" if is_available() else None


def memory_stats(device=None):
    d = _device(device)
    return {} if d is None else _C.memory_stats(d)


def _stat(device, key):
    return memory_stats(device).get(key, 0)


def memory_allocated(device=None):
    """Bytes held by live tensors on the device."""
    return _stat(device, "allocated_bytes.all.current")


def max_memory_allocated(device=None):
    return _stat(device, "allocated_bytes.all.peak")


def memory_reserved(device=None):
    """Bytes the caching allocator holds (live tensors plus its cache)."""
    return _stat(device, "reserved_bytes.all.current")


def max_memory_reserved(device=None):
    return _stat(device, "reserved_bytes.all.peak")


def reset_peak_memory_stats(device=None):
    d = _device(device)
    if d is not None:
        _C._reset_peak_memory_stats(d)


def empty_cache(device=None):
    """Gives the allocator's cached blocks back (every CUDA device when device is None)."""
    if device is not None:
        _C._empty_cache(device)
        return
    for i in range(device_count()):
        _C._empty_cache("cuda:%d" % i)


def mem_get_info(device=None):
    """(free, total) bytes of the device."""
    d = _device(device)
    if d is None:
        raise RuntimeError("mem_get_info: no CUDA device (name a device, e.g. \"sim:0\")")
    return _C._mem_get_info(d)
