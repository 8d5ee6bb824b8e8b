"""tessera.backends.cudnn — torch.backends.cudnn's flags, stored and read back; Tessera has no
cuDNN, so they change nothing (see tessera.backends)."""
import contextlib

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True
benchmark_limit = 10


def is_available():
    """False: Tessera's convolutions are its own kernels, not cuDNN's."""
    return False


def version():
    """None: no cuDNN."""
    return None


def is_acceptable(tensor):
    return False


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, deterministic=False, allow_tf32=True):
    """torch.backends.cudnn.flags(...): sets the flags for the block, then restores them."""
    g = globals()
    names = ("enabled", "benchmark", "deterministic", "allow_tf32")
    old = tuple(g[n] for n in names)
    g.update(zip(names, (enabled, benchmark, deterministic, allow_tf32)))
    try:
        yield
    finally:
        g.update(zip(names, old))
