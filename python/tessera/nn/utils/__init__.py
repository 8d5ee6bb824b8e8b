"""tessera.nn.utils — gradient clipping (torch.nn.utils.clip_grad_norm_)."""
from ... import _C
from . import rnn  # noqa: F401,E402  (torch.nn.utils.rnn)
from . import fusion  # noqa: F401,E402  (torch.nn.utils.fusion, issue 75)
from .placement import place  # noqa: F401,E402  (docs/PLACEMENT.md)
from .weight_stream import stream, stream_stats, unstream  # noqa: F401,E402  (the same)
from .weight_norm import weight_norm, remove_weight_norm  # noqa: F401,E402  (legacy API)

Tensor = _C.Tensor


def _params(parameters):
    if isinstance(parameters, Tensor):
        return [parameters]
    return [p for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Scales the gradients in place so their total norm is at most max_norm; returns the total
    norm before clipping, a 0-dim Tensor on the gradients' device (float32, float64 when a
    gradient is), read on the host only for error_if_nonfinite — as torch, so a captured step can
    clip."""
    norm_type = float(norm_type)
    total = _C._optim_clip_grad_norm(_params(parameters), float(max_norm), norm_type)
    if error_if_nonfinite:
        v = total.item()
        if v != v or v in (float("inf"), float("-inf")):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                               "`parameters` is non-finite, so it cannot be clipped.")
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    for p in _params(parameters):
        p.grad.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters):
    return _C.cat([p.reshape(-1) for p in parameters])
from . import parametrize  # noqa: F401,E402  (torch.nn.utils.parametrize)
from . import parametrizations  # noqa: F401,E402  (torch.nn.utils.parametrizations)
from . import prune  # noqa: F401,E402  (torch.nn.utils.prune)
