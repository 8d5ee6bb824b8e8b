"""tessera.ao.quantization — torch.ao.quantization: quantize_dynamic for Linear, eager-mode static
PTQ (QuantStub / DeQuantStub, fuse_modules, observers, QConfig, prepare, convert) and
quantization-aware training (FakeQuantize, fuse_modules_qat, prepare_qat, the QAT qconfigs);
docs/QUANTIZATION.md lists what is missing."""
import tessera
from tessera import nn as _nn
from ..nn.quantized import dynamic as _dynamic
from .fuse_modules import fuse_conv_bn_eval, fuse_modules  # noqa: F401
from .observer import (HistogramObserver, MinMaxObserver, MovingAverageMinMaxObserver,  # noqa
                       PerChannelMinMaxObserver, default_observer,
                       default_per_channel_weight_observer, default_weight_observer)
from .qconfig import (QConfig, default_per_channel_qconfig, default_qconfig,  # noqa: F401
                      default_qat_qconfig, default_qat_qconfig_v2, get_default_qat_qconfig,
                      get_default_qconfig)
from .fake_quantize import (FakeQuantize, FusedMovingAvgObsFakeQuantize,  # noqa: F401
                            MovingAveragePerChannelMinMaxObserver, default_fake_quant,
                            default_fused_act_fake_quant, default_fused_per_channel_wt_fake_quant,
                            default_fused_wt_fake_quant, default_per_channel_weight_fake_quant,
                            default_weight_fake_quant, disable_fake_quant, disable_observer,
                            enable_fake_quant, enable_observer)
from .quantize import (convert, get_default_static_quant_module_mappings,  # noqa: F401
                       prepare, propagate_qconfig_)
from .stubs import DeQuantStub, QuantStub  # noqa: F401
from .quant_api import (int4_weight_only, int8_dynamic_activation_int4_weight,  # noqa: F401
                        int8_dynamic_activation_int8_weight, int8_weight_only, quantize_)
from .quantize_qat import (fuse_modules_qat, get_default_qat_module_mappings,  # noqa: F401
                           prepare_qat)

__all__ = ["quantize_dynamic", "QuantStub", "DeQuantStub", "fuse_modules", "MinMaxObserver",
           "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver", "HistogramObserver",
           "QConfig", "get_default_qconfig", "default_qconfig", "default_per_channel_qconfig",
           "default_observer", "default_weight_observer", "default_per_channel_weight_observer",
           "fuse_conv_bn_eval", "prepare", "convert", "propagate_qconfig_",
           "get_default_static_quant_module_mappings", "FakeQuantize",
           "FusedMovingAvgObsFakeQuantize", "MovingAveragePerChannelMinMaxObserver",
           "default_fake_quant", "default_weight_fake_quant",
           "default_per_channel_weight_fake_quant", "default_fused_act_fake_quant",
           "default_fused_wt_fake_quant", "default_fused_per_channel_wt_fake_quant",
           "default_qat_qconfig", "default_qat_qconfig_v2", "get_default_qat_qconfig",
           "enable_fake_quant", "disable_fake_quant", "enable_observer", "disable_observer",
           "fuse_modules_qat", "prepare_qat", "get_default_qat_module_mappings"]

_DYNAMIC_MAP = {_nn.Linear: _dynamic.Linear, _nn.LSTM: _dynamic.LSTM}


def quantize_dynamic(model, qconfig_spec=None, dtype=None, mapping=None, inplace=False):
    """torch.ao.quantization.quantize_dynamic: each nn.Linear / nn.LSTM (the types in
    qconfig_spec) replaced by nn.quantized.dynamic.Linear / LSTM with qint8 weights. Other layer
    types (GRU, ...) and float16 dynamic quantization are refused, not skipped."""
    import copy
    if dtype is None:
        dtype = tessera.qint8
    if dtype != tessera.qint8:
        raise NotImplementedError(f"tessera: quantize_dynamic(dtype={dtype}): only qint8")
    mapping = dict(_DYNAMIC_MAP if mapping is None else mapping)
    if qconfig_spec is None:
        types = set(mapping)
    else:
        types = set()
        for k in qconfig_spec:
            if isinstance(k, str):
                raise NotImplementedError("tessera: quantize_dynamic with module names in "
                                          "qconfig_spec (give types)")
            if k not in mapping:
                raise NotImplementedError(f"tessera: quantize_dynamic of {k.__name__} (only "
                                          "nn.Linear and nn.LSTM)")
            types.add(k)
    if not inplace:
        model = copy.deepcopy(model)
    if type(model) in types:
        return mapping[type(model)].from_float(model)
    _swap(model, types, mapping)
    return model


def _swap(module, types, mapping):
    for name, child in list(module.named_children()):
        if type(child) in types:
            setattr(module, name, mapping[type(child)].from_float(child))
        else:
            _swap(child, types, mapping)
