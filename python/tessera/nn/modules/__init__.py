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


# PyTorch's private base classes that libraries test with isinstance (timm's efficientvim and
# norm_act: nn.modules.batchnorm._BatchNorm); only those whose subclasses here match PyTorch's
# (_ConvNd is not: Conv2d is no _ConvNd here), the others stay an AttributeError
_PRIVATE = {"_NormBase": "layers", "_BatchNorm": "layers", "_InstanceNorm": "pool_norm"}


def _nn_getattr(name):
    from ... import nn
    if name == "NonDynamicallyQuantizableLinear":
        return NonDynamicallyQuantizableLinear
    if name in _PRIVATE:
        return getattr(getattr(nn, _PRIVATE[name]), name)
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
