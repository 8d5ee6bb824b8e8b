"""tessera.autograd.graph — hooks on the tensors autograd saves for backward (PyTorch's
torch.autograd.graph.saved_tensors_hooks) and activation offload (save_on_cpu), over the C core's
include/tessera/saved_hooks.h."""
from . import _C

__all__ = ["saved_tensors_hooks", "save_on_cpu", "save_on_cpu_stats"]


class saved_tensors_hooks:
    """Inside the context, each tensor an op saves for backward is passed to pack_hook(tensor)
    and replaced by what it returns; backward calls unpack_hook(packed) for the tensor it needs
    (it must return a Tensor with the saved one's values). Thread-local and nestable: the
    innermost context wins. Both hooks run with gradient recording off; an exception in a hook
    becomes the op's (or the backward's) error."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        _C._saved_hooks_push(self.pack_hook, self.unpack_hook)
        return self

    def __exit__(self, *exc):
        _C._saved_hooks_pop()
        return False


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors of a device other than the cpu are moved to host memory in the forward
    (page-locked with pin_memory=True) and copied back when backward needs them; with pin_memory
    the next `prefetch` tensors are copied back ahead, asynchronously. Tessera's additions:
    min_bytes (smaller tensors stay) and prefetch; parameters stay on their device."""

    def __init__(self, pin_memory=False, device_type="cuda", min_bytes=0, prefetch=2):
        self.pin_memory = bool(pin_memory)
        self.device_type = device_type  # PyTorch's argument: any non-cpu device is offloaded
        self.min_bytes = int(min_bytes)
        self.prefetch = int(prefetch)
        if self.min_bytes < 0 or self.prefetch < 0:
            raise ValueError("save_on_cpu: min_bytes and prefetch must be >= 0")

    def __enter__(self):
        _C._save_on_cpu_begin(self.pin_memory, self.min_bytes, self.prefetch)
        return self

    def __exit__(self, *exc):
        _C._save_on_cpu_end()
        return False


def save_on_cpu_stats():
    """Process-wide counters: offloaded, offloaded_bytes, kept, restored, prefetched."""
    return _C._save_on_cpu_stats()
