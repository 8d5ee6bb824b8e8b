"""tessera.ao.quantization.quantize — eager-mode static post-training quantization under
PyTorch's names: propagate_qconfig_, prepare (observers after QuantStub, Conv2d, Linear,
Hardswish and the fused modules; FloatFunctional's own), calibration (run the model) and convert
(each observed module swapped for its tessera.ao.nn.quantized form)."""
import copy

from tessera import nn

from ..nn import intrinsic as nni
from ..nn import quantized as nnq
from ..nn import qat as nnqat
from ..nn.intrinsic import qat as nniqat
from ..nn.intrinsic import quantized as nniq
from .stubs import DeQuantStub, QuantStub

__all__ = ["propagate_qconfig_", "prepare", "convert", "get_default_static_quant_module_mappings"]


def get_default_static_quant_module_mappings():
    return {QuantStub: nnq.Quantize, DeQuantStub: nnq.DeQuantize, nn.Conv2d: nnq.Conv2d,
            nn.Linear: nnq.Linear, nn.Hardswish: nnq.Hardswish, nni.ConvReLU2d: nniq.ConvReLU2d,
            nni.LinearReLU: nniq.LinearReLU, nnq.FloatFunctional: nnq.QFunctional,
            # QAT modules (prepare_qat's): converted by nnqat._quantized_from_qat
            nnqat.Linear: nnq.Linear, nnqat.Conv2d: nnq.Conv2d, nniqat.ConvBn2d: nnq.Conv2d,
            nniqat.ConvBnReLU2d: nniq.ConvReLU2d, nniqat.ConvReLU2d: nniq.ConvReLU2d,
            nniqat.LinearReLU: nniq.LinearReLU}


# observed at their output by a forward hook (DeQuantStub's output is float: not observed)
_OBSERVED = (QuantStub, nn.Conv2d, nn.Linear, nn.Hardswish, nni.ConvReLU2d, nni.LinearReLU,
             nnqat.Linear, nnqat.Conv2d, nniqat.ConvBn2d, nniqat.ConvBnReLU2d, nniqat.ConvReLU2d,
             nniqat.LinearReLU)


def propagate_qconfig_(module, qconfig_dict=None, prepare_custom_config_dict=None):
    """Each submodule without a qconfig of its own takes its parent's"""
    if qconfig_dict:
        raise NotImplementedError("tessera: propagate_qconfig_ with a qconfig_dict (set "
                                  "module.qconfig)")
    _propagate(module, getattr(module, "qconfig", None))


def _propagate(module, parent_qconfig):
    qconfig = getattr(module, "qconfig", parent_qconfig)
    if "qconfig" not in module.__dict__ and qconfig is not None:
        module.qconfig = qconfig
    for child in module.children():
        _propagate(child, qconfig)


def _observe_output(mod, inputs, output):
    return mod.activation_post_process(output)


def _add_observers(module):
    for child in module.children():
        qconfig = getattr(child, "qconfig", None)
        if isinstance(child, nnq.FloatFunctional):
            if qconfig is not None:
                child.activation_post_process = qconfig.activation()
        elif type(child) in _OBSERVED:
            if qconfig is not None:
                child.activation_post_process = qconfig.activation()
                child.register_forward_hook(_observe_output)
        else:
            _add_observers(child)


def prepare(model, inplace=False, allow_list=None, observer_non_leaf_module_list=None,
            prepare_custom_config_dict=None):
    """torch.ao.quantization.prepare: qconfig propagated, observers attached (the model is then
    run on calibration data)"""
    if allow_list is not None or observer_non_leaf_module_list is not None or \
            prepare_custom_config_dict is not None:
        raise NotImplementedError("tessera: prepare with allow_list / custom configs")
    if not inplace:
        model = copy.deepcopy(model)
    propagate_qconfig_(model)
    if not any(getattr(m, "qconfig", None) is not None for m in model.modules()):
        import warnings
        warnings.warn("None of the submodule got qconfig applied. Make sure you passed correct "
                      "configuration through `qconfig_dict` or by assigning the `.qconfig` "
                      "attribute directly on submodules")
    _add_observers(model)
    return model


def _convert(module, mapping):
    for name, child in list(module.named_children()):
        target = mapping.get(type(child))
        if target is not None and (type(child) is DeQuantStub or
                                   getattr(child, "qconfig", None) is not None):
            if type(child) is not DeQuantStub and \
                    "activation_post_process" not in child._modules:
                raise RuntimeError(f"convert: module '{name}' ({type(child).__name__}) has a "
                                   "qconfig but no observer: call prepare and run calibration "
                                   "data through the model first")
            if hasattr(child, "weight_fake_quant"):  # a QAT module
                setattr(module, name, nnqat._quantized_from_qat(target, child))
            else:
                setattr(module, name, target.from_float(child))
        elif target is None or type(child) is nnq.FloatFunctional:
            _convert(child, mapping)


def convert(module, mapping=None, inplace=False, remove_qconfig=True, is_reference=False,
            convert_custom_config_dict=None):
    """torch.ao.quantization.convert: each observed module replaced by its quantized module,
    with the scale and zero point its observer computed"""
    if is_reference or convert_custom_config_dict is not None:
        raise NotImplementedError("tessera: convert with is_reference / custom configs")
    if not inplace:
        module = copy.deepcopy(module)
    _convert(module, get_default_static_quant_module_mappings() if mapping is None else mapping)
    if remove_qconfig:
        for m in module.modules():
            if "qconfig" in m.__dict__:
                del m.__dict__["qconfig"]
    return module
