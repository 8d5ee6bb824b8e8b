"""tessera.nn.utils.stateless — PyTorch's deprecated torch.nn.utils.stateless.functional_call
(one dict, PyTorch's signature), on tessera.func.functional_call."""
import warnings

__all__ = ["functional_call"]


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """torch.nn.utils.stateless.functional_call: deprecated since PyTorch 2.0 for
    torch.func.functional_call, which it calls."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 "
                  "and will be removed in a future version of PyTorch. Please use "
                  "`torch.func.functional_call` instead which is a drop-in replacement.",
                  FutureWarning, stacklevel=2)
    from ...func import functional_call as _fc
    return _fc(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights,
               strict=strict)
