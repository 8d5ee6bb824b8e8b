"""tessera.ao.quantization's quantization-aware training steps under PyTorch's names:
fuse_modules_qat (conv + bn (+ relu) kept as ConvBn2d / ConvBnReLU2d for training, conv + relu,
linear + relu), prepare_qat (each float module swapped for its tessera.ao.nn.qat /
tessera.ao.nn.intrinsic.qat form, then prepare's observers, here FakeQuantize modules from the
qconfig) and get_default_qat_module_mappings; convert (quantize.py) then makes the quantized
modules."""
import copy

from tessera import nn

from ..nn import intrinsic as nni
from ..nn import qat as nnqat
from ..nn.intrinsic import qat as nniqat
from .fuse_modules import _get, _set
from .quantize import prepare, propagate_qconfig_

__all__ = ["fuse_modules_qat", "prepare_qat", "get_default_qat_module_mappings"]


def get_default_qat_module_mappings():
    return {nn.Conv2d: nnqat.Conv2d, nn.Linear: nnqat.Linear, nni.ConvBn2d: nniqat.ConvBn2d,
            nni.ConvBnReLU2d: nniqat.ConvBnReLU2d, nni.ConvReLU2d: nniqat.ConvReLU2d,
            nni.LinearReLU: nniqat.LinearReLU}


def _fuse_qat(mods):
    types = tuple(type(m) for m in mods)
    if types[:2] == (nn.Conv2d, nn.BatchNorm2d) and mods[0].training != mods[1].training:
        raise AssertionError("Conv and BN both must be in the same mode (train or eval).")
    if types == (nn.Conv2d, nn.BatchNorm2d):
        return nni.ConvBn2d(*mods)
    if types == (nn.Conv2d, nn.BatchNorm2d, nn.ReLU):
        return nni.ConvBnReLU2d(*mods)
    if types == (nn.Conv2d, nn.ReLU):
        return nni.ConvReLU2d(*mods)
    if types == (nn.Linear, nn.ReLU):
        return nni.LinearReLU(*mods)
    raise NotImplementedError("Cannot fuse modules: (%s) (tessera fuses conv-bn(-relu), "
                              "conv-relu, linear-relu)" % ", ".join(t.__name__ for t in types))


def fuse_modules_qat(model, modules_to_fuse, inplace=False, fuser_func=None,
                     fuse_custom_config_dict=None):
    """torch.ao.quantization.fuse_modules_qat: each list of names becomes one fused module at the
    first name (the batch norm kept, not folded: ConvBn2d / ConvBnReLU2d), nn.Identity at the
    others"""
    if fuser_func is not None or fuse_custom_config_dict is not None:
        raise NotImplementedError("tessera: fuse_modules_qat with fuser_func / custom config")
    if not inplace:
        model = copy.deepcopy(model)
    groups = modules_to_fuse
    if groups and all(isinstance(n, str) for n in groups):
        groups = [groups]
    for names in groups:
        fused = _fuse_qat([_get(model, n) for n in names])
        _set(model, names[0], fused)
        for n in names[1:]:
            _set(model, n, nn.Identity())
    return model


def _swap_qat(module, mapping):
    for name, child in list(module.named_children()):
        target = mapping.get(type(child))
        if target is not None and getattr(child, "qconfig", None) is not None:
            setattr(module, name, target.from_float(child))
        else:
            _swap_qat(child, mapping)


def prepare_qat(model, mapping=None, inplace=False):
    """torch.ao.quantization.prepare_qat: the model (in training mode) with its float modules
    swapped for QAT ones and fake quants after QuantStub and each QAT module"""
    if not model.training:
        raise AssertionError("prepare_qat only works on models in training mode")
    if not inplace:
        model = copy.deepcopy(model)
    propagate_qconfig_(model)
    _swap_qat(model, get_default_qat_module_mappings() if mapping is None else mapping)
    return prepare(model, inplace=True)
