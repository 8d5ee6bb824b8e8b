"""tessera.random — torch.random: the default generator's seeding and state (issue 53:
mrdbourke's `torch.random.manual_seed(seed=42)`). The CPU generator only."""
import contextlib
import os

import tessera as _t

__all__ = ["manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "fork_rng",
           "default_generator"]


def __getattr__(name):
    if name == "default_generator":
        return _t.default_generator
    raise AttributeError(f"module 'tessera.random' has no attribute '{name}'")


def manual_seed(seed):
    """seeds the default generator; returns it"""
    return _t.manual_seed(seed)


def seed():
    """seeds the default generator with a non-deterministic number and returns that number"""
    s = int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)
    _t.manual_seed(s)
    return s


def initial_seed():
    return _t.initial_seed()


def get_rng_state():
    return _t.get_rng_state()


def set_rng_state(new_state):
    _t.set_rng_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type="cuda"):
    """restores the CPU generator's state on exit (the cuda generators are not forked here)"""
    if not enabled:
        yield
        return
    state = _t.get_rng_state()
    try:
        yield
    finally:
        _t.set_rng_state(state)
