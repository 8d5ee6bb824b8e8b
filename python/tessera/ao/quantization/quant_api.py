"""tessera.ao.quantization.quant_api — torchao's quantize_ API: quantize_(model, config,
filter_fn) swaps each nn.Linear that filter_fn accepts (by default every nn.Linear) for its
quantized form: int8_weight_only() / int4_weight_only(group_size) make a
tessera.ao.nn.quantized.weight_only.WeightOnlyLinear, int8_dynamic_activation_int8_weight() a
dynamic Linear (tessera.ao.nn.quantized.dynamic.Linear, per-channel int8 weights as torchao's).
In place, as torchao's (it returns the model too)."""
import tessera
from tessera import _C
from tessera import nn as _nn
from ..nn.quantized import dynamic as _dynamic
from ..nn.quantized.weight_only import WeightOnlyLinear

__all__ = ["quantize_", "int8_weight_only", "int4_weight_only",
           "int8_dynamic_activation_int8_weight", "Int8WeightOnlyConfig", "Int4WeightOnlyConfig",
           "Int8DynamicActivationInt8WeightConfig"]


class Int8WeightOnlyConfig:
    """int8 symmetric per-channel weights, float activations"""

    def __repr__(self):
        return "Int8WeightOnlyConfig()"


class Int4WeightOnlyConfig:
    """int4 asymmetric per-group weights (group_size 32, 64, 128 or 256), float activations"""

    def __init__(self, group_size=128):
        if group_size not in (32, 64, 128, 256):
            raise ValueError(f"int4_weight_only: group_size must be 32, 64, 128 or 256 "
                             f"(got {group_size})")
        self.group_size = group_size

    def __repr__(self):
        return f"Int4WeightOnlyConfig(group_size={self.group_size})"


class Int8DynamicActivationInt8WeightConfig:
    """int8 symmetric per-channel weights, activations quantized per tensor at each call"""

    def __repr__(self):
        return "Int8DynamicActivationInt8WeightConfig()"


def int8_weight_only():
    return Int8WeightOnlyConfig()


def int4_weight_only(group_size=128):
    return Int4WeightOnlyConfig(group_size)


def int8_dynamic_activation_int8_weight():
    return Int8DynamicActivationInt8WeightConfig()


def _is_linear(mod, fqn):
    return type(mod) is _nn.Linear


def _swap(mod, config):
    if isinstance(config, Int8WeightOnlyConfig):
        return WeightOnlyLinear.from_float(mod, bits=8)
    if isinstance(config, Int4WeightOnlyConfig):
        return WeightOnlyLinear.from_float(mod, bits=4, group_size=config.group_size)
    if isinstance(config, Int8DynamicActivationInt8WeightConfig):
        # torchao's weights: int8 symmetric per channel (its int8_weight_only recipe); the
        # activations: per tensor, as the dynamic Linear quantizes them
        q = _dynamic.Linear(mod.in_features, mod.out_features, bias_=mod.bias is not None)
        q.reduce_range = False
        wq = _C._quantize_int8_weight_only(mod.weight.detach().float().contiguous())
        q.set_weight_bias(wq, mod.bias)
        return q
    raise TypeError(f"quantize_: unknown config {config!r} (int8_weight_only(), "
                    "int4_weight_only(group_size), int8_dynamic_activation_int8_weight())")


def quantize_(model, config, filter_fn=None, device=None):
    """torchao.quantization.quantize_: every submodule mod (named fqn) with filter_fn(mod, fqn)
    true (default: every nn.Linear) replaced by its quantized form, in place. A model that is
    itself a Linear is refused (there is no parent to put its replacement in)."""
    if device is not None:
        raise NotImplementedError("tessera: quantize_(device=...) (move the model first)")
    if not isinstance(config, (Int8WeightOnlyConfig, Int4WeightOnlyConfig,
                               Int8DynamicActivationInt8WeightConfig)):
        raise TypeError(f"quantize_: unknown config {config!r}")
    fn = _is_linear if filter_fn is None else filter_fn
    if fn(model, ""):
        raise NotImplementedError("tessera: quantize_ of a model that is itself a Linear "
                                  "(wrap it in a container)")

    def visit(parent, prefix):
        for name, child in list(parent._modules.items()):
            if child is None:
                continue
            fqn = f"{prefix}.{name}" if prefix else name
            if fn(child, fqn):
                if not isinstance(child, _nn.Linear):
                    raise NotImplementedError(f"tessera: quantize_ of {type(child).__name__} "
                                              f"({fqn}): only nn.Linear")
                setattr(parent, name, _swap(child, config))
            else:
                visit(child, fqn)

    with tessera.no_grad():
        visit(model, "")
    return model
