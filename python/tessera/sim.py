"""tessera.sim — the host-simulated devices sim:0..N-1 (device code tested without a GPU).
TS_SIM_DEVICES=N in the environment configures them at start-up; configure() at run time."""
from tessera import _C

__all__ = ["configure", "device_count", "is_available"]


def configure(count, capacity_bytes=0):
    """Makes sim:0..count-1 (capacity 0: unlimited memory). With live tensors on sim devices
    this raises tessera.StateError."""
    _C._sim_configure(count, capacity_bytes)


def device_count():
    return _C._device_count("sim")


def is_available():
    return device_count() > 0
