"""tessera.ao.quantization.qconfig — QConfig and PyTorch's default qconfigs."""
from collections import namedtuple

from .observer import (HistogramObserver, default_observer,
                       default_per_channel_weight_observer, default_weight_observer)
from .fake_quantize import (FakeQuantize, FusedMovingAvgObsFakeQuantize,
                            MovingAverageMinMaxObserver, default_fake_quant,
                            default_fused_act_fake_quant, default_fused_per_channel_wt_fake_quant,
                            default_fused_wt_fake_quant, default_per_channel_weight_fake_quant,
                            default_weight_fake_quant)

__all__ = ["QConfig", "default_qconfig", "default_per_channel_qconfig", "get_default_qconfig",
           "default_qat_qconfig", "default_qat_qconfig_v2", "get_default_qat_qconfig"]


class QConfig(namedtuple("QConfig", ["activation", "weight"])):
    """torch.ao.quantization.QConfig(activation, weight): observer factories (classes or
    Observer.with_args(...)), not instances"""

    def __new__(cls, activation, weight):
        from tessera.nn.module import Module
        if isinstance(activation, Module) or isinstance(weight, Module):
            raise ValueError("QConfig received observer instance, please pass observer class "
                             "instead. Use MyObserver.with_args(x=1) to override arguments to "
                             "constructor if needed")
        return super().__new__(cls, activation, weight)


default_qconfig = QConfig(activation=default_observer, weight=default_weight_observer)
default_per_channel_qconfig = QConfig(activation=default_observer,
                                      weight=default_per_channel_weight_observer)


def get_default_qconfig(backend="x86", version=0):
    """PyTorch's defaults: x86 / fbgemm: HistogramObserver(reduce_range=True) activations and
    per-channel symmetric qint8 weights; qnnpack: HistogramObserver(reduce_range=False) and
    per-tensor symmetric weights; onednn: HistogramObserver(reduce_range=False), per-channel"""
    if backend in ("x86", "fbgemm"):
        return QConfig(activation=HistogramObserver.with_args(reduce_range=True),
                       weight=default_per_channel_weight_observer)
    if backend == "qnnpack":
        return QConfig(activation=HistogramObserver.with_args(reduce_range=False),
                       weight=default_weight_observer)
    if backend == "onednn":
        return QConfig(activation=HistogramObserver.with_args(reduce_range=False),
                       weight=default_per_channel_weight_observer)
    raise AssertionError(f"backend: {backend} not supported. backend must be one of "
                         "['x86', 'fbgemm', 'qnnpack', 'onednn']")


default_qat_qconfig = QConfig(activation=default_fake_quant, weight=default_weight_fake_quant)
default_qat_qconfig_v2 = QConfig(activation=default_fused_act_fake_quant,
                                 weight=default_fused_wt_fake_quant)


def get_default_qat_qconfig(backend="x86", version=1):
    """PyTorch's QAT defaults: moving-average activation fake quants (x86 / fbgemm with
    reduce_range) and per-channel symmetric qint8 weights (qnnpack: per tensor); version 1 the
    fused fake quants, version 0 FakeQuantize"""
    backends = ["fbgemm", "x86", "qnnpack", "onednn"]
    if backend not in backends:
        raise AssertionError(f"backend: {backend} not supported. backend must be one of "
                             f"{backends}")
    if version not in (0, 1):
        raise AssertionError(f"Version number: {version} in get_default_qat_qconfig is not "
                             "supported. Version number must be 0 or 1")
    act_cls = FakeQuantize if version == 0 else FusedMovingAvgObsFakeQuantize
    reduce = backend in ("x86", "fbgemm")
    activation = act_cls.with_args(observer=MovingAverageMinMaxObserver, quant_min=0,
                                   quant_max=255, reduce_range=reduce)
    if backend == "qnnpack":
        weight = default_weight_fake_quant if version == 0 else default_fused_wt_fake_quant
    else:
        weight = (default_per_channel_weight_fake_quant if version == 0
                  else default_fused_per_channel_wt_fake_quant)
    return QConfig(activation=activation, weight=weight)
