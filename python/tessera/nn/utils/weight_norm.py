"""tessera.nn.utils.weight_norm — PyTorch's legacy torch.nn.utils.weight_norm and
remove_weight_norm: the module's parameter `name` becomes name_g (the 2-norms over every dim but
dim) and name_v (the direction), and `name` is recomputed as g * v / ||v|| before every forward
by a forward pre-hook. The arithmetic is parametrizations.weight_norm's (one definition)."""
import warnings

from ..parameter import Parameter
from .parametrizations import _WeightNorm, _norm_except_dim

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


class WeightNorm:
    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim
        self._norm = _WeightNorm(self.dim)

    def compute_weight(self, module):
        return self._norm(getattr(module, self.name + "_g"), getattr(module, self.name + "_v"))

    @staticmethod
    def apply(module, name, dim):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError("Cannot register two weight_norm hooks on the same parameter "
                                   f"{name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        g = _norm_except_dim(weight, fn._norm._dim(weight)).detach()
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(g))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        weight = self.compute_weight(module).detach()
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """w = g * v / ||v||, recomputed before each forward from module.<name>_g and <name>_v"""
    warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                  "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=2)
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """undo weight_norm: `name` becomes one Parameter again, holding the current g * v / ||v||"""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
