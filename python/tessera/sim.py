"""tessera.sim — the host-simulated devices sim:0..N-1 (device code tested without a GPU).
TS_SIM_DEVICES=N in the environment configures them at start-up; configure() at run time."""
from tessera import _C

__all__ = ["configure", "device_count", "is_available", "set_link", "link", "link_stats",
           "reset_link_stats", "link_wait"]


def configure(count, capacity_bytes=0):
    """Makes sim:0..count-1 (capacity 0: unlimited memory). With live tensors on sim devices
    this raises tessera.StateError."""
    _C._sim_configure(count, capacity_bytes)


def device_count():
    return _C._device_count("sim")


def is_available():
    return device_count() > 0


def set_link(spec=None, latency=None):
    """A simulated host link for every sim device: set_link("16GB/s,5us") (TS_SIM_LINK's
    format), set_link(bandwidth_bytes_per_s, latency_s), or set_link(None) to turn it off.
    Copies between the host and a sim device then take latency + bytes / bandwidth; to_async
    from pinned memory overlaps (docs/MEMORY_PLANNING.md)."""
    if latency is None:
        _C._sim_set_link(spec)
    else:
        _C._sim_set_link(float(spec), float(latency))


def link():
    """(bandwidth_bytes_per_s, latency_s), or None when no link is set."""
    return _C._sim_link()


def link_stats(index=0):
    """Counters of sim:index's link: bytes_h2d, bytes_d2h, copies_h2d, copies_d2h,
    async_copies, busy_ns, wait_ns."""
    return _C._sim_link_stats(index)


def reset_link_stats(index=-1):
    _C._sim_link_reset_stats(index)


def link_wait(index=-1):
    """Blocks until the copies queued on sim:index's link (-1: every device) have finished."""
    _C._sim_link_wait(index)
