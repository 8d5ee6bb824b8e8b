"""tessera.accelerator — torch.accelerator, the device idiom of today's PyTorch examples:

    device = (tessera.accelerator.current_accelerator().type
              if tessera.accelerator.is_available() else "cpu")

Tessera's accelerator is CUDA. The cpu is not an accelerator (as in PyTorch), and neither are the
sim devices: they simulate devices on the host for testing and are only used when named."""
from . import _C

__all__ = ["is_available", "current_accelerator", "device_count", "synchronize",
           "current_device_index", "set_device_index", "current_device_idx", "set_device_idx"]


def is_available():
    """True when a CUDA device can be used."""
    return _C._cuda_is_available()


def device_count():
    """The number of CUDA devices (0 without CUDA)."""
    return _C._device_count("cuda")


def current_accelerator(check_available=False):
    """tessera.device("cuda") when a CUDA device exists, else None. (PyTorch built with CUDA
    returns cuda even on a machine without a GPU unless check_available=True; Tessera answers
    None there whatever check_available says, so `current_accelerator().type` is only read after
    is_available(), as the idiom does.)"""
    return _C.device("cuda") if is_available() else None


def _no_accelerator(fn):
    return RuntimeError("tessera.accelerator.%s(): no accelerator is available (no CUDA device)"
                        % fn)


def current_device_index():
    """The current CUDA device's index (the thread's)."""
    if not is_available():
        raise _no_accelerator("current_device_index")
    return _C._cuda_current_device()


def set_device_index(device):
    """Makes a CUDA device (an index, "cuda:N" or a tessera.device) the thread's current one."""
    if not is_available():
        raise _no_accelerator("set_device_index")
    if not isinstance(device, int):
        device = _C.device(device)
        if device.type != "cuda":
            raise ValueError("set_device_index(): %s is not an accelerator device" % device)
        device = 0 if device.index is None else device.index
    _C._cuda_set_device(device)


current_device_idx, set_device_idx = current_device_index, set_device_index


def synchronize(device=None):
    """Waits for the work queued on the CUDA device (None: the current one). Without an
    accelerator there is nothing to wait for: Tessera's cpu and sim ops finish before they
    return."""
    if not is_available():
        return
    if device is not None and not isinstance(device, int):
        device = _C.device(device)
        device = device.index if device.type == "cuda" else None
    _C._cuda_synchronize(device)
