"""tessera.ao.quantization.fuse_modules — torch.ao.quantization.fuse_modules in eval mode:
conv + bn (+ relu), conv + relu, linear + relu. The batch norm is folded into the convolution
by nn.utils.fusion (ts_fuse_conv_bn_weights in C)."""
import copy

from tessera import nn
from tessera.nn.utils import fusion as _fusion

from ..nn import intrinsic as nni

__all__ = ["fuse_modules", "fuse_conv_bn_eval"]


def fuse_conv_bn_eval(conv, bn):
    """A new Conv2d computing bn(conv(x)) in eval mode: nn.utils.fusion's (ts_fuse_conv_bn_weights:
    w * gamma / sqrt(var + eps) per output channel, (b - mean) * gamma / sqrt(var + eps) + beta,
    in float64 rounded once)"""
    if conv.training or bn.training:
        raise NotImplementedError("tessera: fuse_modules in training mode (QAT fusion)")
    return _fusion.fuse_conv_bn_eval(conv, bn)


def _fuse(mods):
    types = tuple(type(m) for m in mods)
    if types == (nn.Conv2d, nn.BatchNorm2d):
        return fuse_conv_bn_eval(*mods)
    if types == (nn.Conv2d, nn.BatchNorm2d, nn.ReLU):
        return nni.ConvReLU2d(fuse_conv_bn_eval(mods[0], mods[1]), mods[2])
    if types == (nn.Conv2d, nn.ReLU):
        return nni.ConvReLU2d(mods[0], mods[1])
    if types == (nn.Linear, nn.ReLU):
        return nni.LinearReLU(mods[0], mods[1])
    raise NotImplementedError("Cannot fuse modules: (%s) (tessera fuses conv-bn(-relu), conv-relu, "
                              "linear-relu)" % ", ".join(t.__name__ for t in types))


def _get(model, name):
    for part in name.split("."):
        model = getattr(model, part)
    return model


def _set(model, name, value):
    parent, _, leaf = name.rpartition(".")
    setattr(_get(model, parent) if parent else model, leaf, value)


def fuse_modules(model, modules_to_fuse, inplace=False, fuser_func=None,
                 fuse_custom_config_dict=None):
    """Each list of names becomes one module at the first name, nn.Identity at the others"""
    if fuser_func is not None or fuse_custom_config_dict is not None:
        raise NotImplementedError("tessera: fuse_modules with fuser_func / custom config")
    if not inplace:
        model = copy.deepcopy(model)
    groups = modules_to_fuse
    if groups and all(isinstance(n, str) for n in groups):
        groups = [groups]
    for names in groups:
        fused = _fuse([_get(model, n) for n in names])
        _set(model, names[0], fused)
        for n in names[1:]:
            _set(model, n, nn.Identity())
    return model
