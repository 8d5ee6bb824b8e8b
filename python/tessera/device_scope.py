"""tessera.device_scope — TensorFlow's `with tf.device(...)`: inside the block, tensors made
without device= (factories, tessera.tensor, modules' parameters) land on that device. The scope
belongs to the thread that opens it (the C library's thread-local default-device stack)."""
import contextlib

from tessera import _C


class device_scope(contextlib.ContextDecorator):
    """with tessera.device_scope("sim:0"): ... (also a decorator). Scopes nest."""

    def __init__(self, device):
        self.device = device

    def __enter__(self):
        _C._device_push(self.device)
        return self

    def __exit__(self, *exc):
        _C._device_pop()
        return False

    def __repr__(self):
        return "device_scope(%r)" % (self.device,)


def get_default_device():
    """The device factories use now: the innermost device_scope's, else the cpu."""
    return _C._default_device()
