"""tessera.nn.attention — torch.nn.attention: SDPBackend and the sdpa_kernel context manager.

Tessera has no user-selectable attention backend: scaled_dot_product_attention runs the device
backend's fused kernel where it has one for the inputs, else the composition of tensor ops (the
same values up to rounding). sdpa_kernel therefore checks its argument as PyTorch does, records
the request (_cur_sdpa_kernel_backends() reports it inside the block) and otherwise has no effect;
the first use warns once that it selects nothing. flex_attention is importable and unsupported
(tessera.nn.attention.flex_attention).
"""
import contextlib
import contextvars
import enum
import warnings

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.IntEnum):
    """The attention backends of PyTorch (the same names and values)."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __str__(self):
        return "SDPBackend." + self.name


# what PyTorch enables by default, in its default priority order
_DEFAULT = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH,
            SDPBackend.CUDNN_ATTENTION)
_current = contextvars.ContextVar("tessera_sdpa_kernel", default=_DEFAULT)
_warned = False


def _cur_sdpa_kernel_backends(with_priority=False):
    """The backends the innermost sdpa_kernel block asked for (all of them outside one)."""
    return list(_current.get())


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """with sdpa_kernel(SDPBackend.MATH): ... — accepted and recorded; Tessera picks its attention
    kernel itself (see the module's doc), so the block computes what it would compute without
    it."""
    global _warned
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of SDPBackend "
                             "instances, got %s" % type(backends).__name__)
    if isinstance(backends, SDPBackend):
        backends = [backends]
    for b in backends:
        if not isinstance(b, SDPBackend):
            raise AssertionError("Backend must be an instance of SDPBackend or a list of "
                                 "SDPBackend instances, got a list holding %s"
                                 % type(b).__name__)
    if not _warned:
        _warned = True
        warnings.warn("torch.nn.attention.sdpa_kernel has no effect in Tessera: "
                      "scaled_dot_product_attention picks the device's fused kernel or the "
                      "composition of tensor ops itself", UserWarning, stacklevel=3)
    token = _current.set(tuple(dict.fromkeys(backends)))
    try:
        yield {}
    finally:
        _current.reset(token)
