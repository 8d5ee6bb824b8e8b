"""tessera.ao.quantization.qconfig — QConfig and PyTorch's default qconfigs."""
from collections import namedtuple

from .observer import (HistogramObserver, default_observer,
                       default_per_channel_weight_observer, default_weight_observer)

__all__ = ["QConfig", "default_qconfig", "default_per_channel_qconfig", "get_default_qconfig"]


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
    """PyTorch's defaults: x86 / fbgemm: HistogramObserver(reduce_range=True) activations (not
    implemented: prepare raises naming it) and per-channel symmetric qint8 weights; qnnpack:
    HistogramObserver(reduce_range=False) and per-tensor symmetric weights"""
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
