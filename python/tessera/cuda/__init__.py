"""tessera.cuda — torch.cuda's queries: is_available(), device_count(), memory statistics.

The memory functions take any device ("cuda:0", and also "sim:0" or "cpu", which torch.cuda does
not have); device=None means the current CUDA device, and reads 0 on a machine without CUDA (as
torch.cuda.memory_allocated() does before CUDA is initialised)."""
from tessera import _C

from . import amp  # noqa: F401  (tessera.cuda.amp: torch.cuda.amp's autocast, GradScaler)
from .streams import (Event, Stream, StreamContext, current_stream, default_stream,  # noqa: F401
                      set_stream, stream)
from .._legacy import cuda_types as _cuda_types

globals().update(_cuda_types)  # tessera.cuda.FloatTensor... (on cuda)

__all__ = ["is_available", "device_count", "current_device", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_stats",
           "reset_peak_memory_stats", "empty_cache", "mem_get_info", "synchronize",
           "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "set_device",
           "device", "get_device_name", "get_device_properties", "get_device_capability",
           "is_bf16_supported", "is_initialized", "init", "Event", "Stream", "StreamContext",
           "current_stream", "default_stream", "stream", "set_stream",
           "set_sync_debug_mode", "get_sync_debug_mode"] + list(_cuda_types)


def is_available():
    return _C._cuda_is_available()


def device_count():
    return _C._device_count("cuda")


def is_initialized():
    return is_available()


def init():
    """Nothing to do: Tessera starts CUDA when it is first used."""


def _index(device, fn):
    """None / int / "cuda:1" / tessera.device -> a CUDA device index (None: current)"""
    if device is None or isinstance(device, int):
        return device
    d = _C.device(device)
    if d.type != "cuda":
        raise ValueError("tessera.cuda.%s(): expected a cuda device, got %s" % (fn, d))
    return d.index


def _need_cuda(fn):
    if not is_available():
        raise RuntimeError("tessera.cuda.%s(): no CUDA device is available" % fn)


def current_device():
    """The thread's current CUDA device (0 without CUDA, where there is none to choose)."""
    return _C._cuda_current_device() if is_available() else 0


def set_device(device):
    """Makes a CUDA device the thread's current one (a negative index does nothing, as torch)."""
    i = _index(device, "set_device")
    if i is not None and i < 0:
        return
    _need_cuda("set_device")
    _C._cuda_set_device(0 if i is None else i)


class device:
    """with tessera.cuda.device(1): the current CUDA device inside the block (None or -1: no
    change), as torch.cuda.device."""

    def __init__(self, device):
        self.idx = _index(device, "device")
        self._prev = None

    def __enter__(self):
        if self.idx is not None and self.idx >= 0:
            self._prev = current_device()
            set_device(self.idx)

    def __exit__(self, *exc):
        if self._prev is not None:
            _C._cuda_set_device(self._prev)
        return False


def synchronize(device=None):
    """Waits for the work queued on every stream of the CUDA device (None: the current one);
    without CUDA nothing is pending (cpu and sim ops finish before they return)."""
    if is_available():
        _C._cuda_synchronize(_index(device, "synchronize"))


def _properties(device, fn):
    _need_cuda(fn)
    return _C._cuda_get_device_properties(_index(device, fn))


class _CudaDeviceProperties:
    """torch.cuda.get_device_properties's result: name, total_memory, major, minor,
    multi_processor_count, warp_size, L2_cache_size... as attributes."""

    def __init__(self, props):
        self.__dict__.update(props)

    def __repr__(self):
        return ("_CudaDeviceProperties(name='%s', major=%d, minor=%d, total_memory=%dMB, "
                "multi_processor_count=%d, L2_cache_size=%dMB)"
                % (self.name, self.major, self.minor, self.total_memory >> 20,
                   self.multi_processor_count, self.L2_cache_size >> 20))


def get_device_properties(device=None):
    return _CudaDeviceProperties(_properties(device, "get_device_properties"))


def get_device_name(device=None):
    return _properties(device, "get_device_name")["name"]


def get_device_capability(device=None):
    p = _properties(device, "get_device_capability")
    return (p["major"], p["minor"])


def is_bf16_supported(including_emulation=True):
    """bfloat16 on CUDA: compute capability 8.0 (Ampere) or later; False without CUDA."""
    return is_available() and get_device_capability()[0] >= 8


# Random numbers: Tessera has one Philox generator for every device (a seed gives the same
# numbers on cpu, cuda and sim), so seeding CUDA's generator seeds that one. Without CUDA these
# are silently ignored, as torch.cuda's are.
def manual_seed(seed):
    if is_available():
        _C.manual_seed(int(seed))


manual_seed_all = manual_seed


def seed():
    if is_available():
        import random
        _C.manual_seed(random.getrandbits(63))


seed_all = seed


def initial_seed():
    return _C.initial_seed()


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


_SYNC_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode):
    """torch.cuda.set_sync_debug_mode: "default"/0 (off), "warn"/1 (a UserWarning at the calling
    line for each operation that makes the host wait for a device: .item(), .tolist(), .numpy(),
    bool(t), .to("cpu"), nonzero, masked_select, unique...), "error"/2 (such an operation raises
    RuntimeError). sim devices count as devices; cpu tensors never synchronize."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_MODES:
            raise RuntimeError('invalid value of debug_mode, expected one of "default", "warn", '
                               '"error", got "%s"' % debug_mode)
        debug_mode = _SYNC_MODES[debug_mode]
    import os
    _C._set_sync_debug_mode(int(debug_mode),
                            os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)


def get_sync_debug_mode():
    """The sync debug mode: 0 (default), 1 (warn) or 2 (error)."""
    return _C._get_sync_debug_mode()


from . import memory  # noqa: E402,F401  (tessera.cuda.memory: snapshots)
from .graphs import (CUDAGraph, graph, graph_pool_handle,  # noqa: E402,F401  (torch.cuda.graphs)
                     is_current_stream_capturing, make_graphed_callables)
