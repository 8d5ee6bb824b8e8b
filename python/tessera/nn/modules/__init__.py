"""tessera.nn.modules: torch.nn.modules' layout (torch.nn.modules.linear.Linear,
torch.nn.modules.rnn.GRU...) for programs that name a class by its full PyTorch path, as
torch.serialization.safe_globals lists do. Each submodule gives every name of tessera.nn (where
the class lives in Tessera does not follow PyTorch's file split)."""
import sys
import types

from .. import Linear as _Linear
from .. import Module  # noqa: F401 (torch.nn.modules.Module)

_SUBMODULES = ("activation", "adaptive", "batchnorm", "channelshuffle", "container", "conv",
               "distance", "dropout", "flatten", "fold", "instancenorm", "lazy", "linear", "loss",
               "module", "normalization", "padding", "pixelshuffle", "pooling", "rnn", "sparse",
               "transformer", "upsampling")


class NonDynamicallyQuantizableLinear(_Linear):
    """PyTorch's Linear subclass MultiheadAttention's out_proj is (a plain Linear here)"""


def _nn_getattr(name):
    from ... import nn
    if name == "NonDynamicallyQuantizableLinear":
        return NonDynamicallyQuantizableLinear
    try:
        return getattr(nn, name)
    except AttributeError:
        raise AttributeError(f"module 'tessera.nn.modules' has no attribute '{name}'") from None


def __getattr__(name):
    return _nn_getattr(name)


for _name in _SUBMODULES:
    _mod = types.ModuleType(f"{__name__}.{_name}",
                            f"torch.nn.modules.{_name}: every name of tessera.nn")
    _mod.__getattr__ = _nn_getattr
    sys.modules[_mod.__name__] = _mod
    globals()[_name] = _mod
del _name, _mod
