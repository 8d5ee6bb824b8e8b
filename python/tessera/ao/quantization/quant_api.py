"""tessera.ao.quantization.quant_api — torchao's quantize_ API: quantize_(model, config,
filter_fn) swaps each nn.Linear that filter_fn accepts (by default every nn.Linear) for its
quantized form: int8_weight_only() / int4_weight_only(group_size) make a
tessera.ao.nn.quantized.weight_only.WeightOnlyLinear, int8_dynamic_activation_int8_weight() /
int8_dynamic_activation_int4_weight(group_size) a
tessera.ao.nn.quantized.dynamic_activation.Int8DynamicActivationLinear (activations int8 per
token, symmetric, as torchao's). In place, as torchao's (it returns the model too)."""
import tessera
from tessera import nn as _nn
from ..nn.quantized.dynamic_activation import Int8DynamicActivationLinear
from ..nn.quantized.weight_only import WeightOnlyLinear

__all__ = ["quantize_", "int8_weight_only", "int4_weight_only",
           "int8_dynamic_activation_int8_weight", "int8_dynamic_activation_int4_weight",
           "Int8WeightOnlyConfig", "Int4WeightOnlyConfig", "Int8DynamicActivationInt8WeightConfig",
           "Int8DynamicActivationInt4WeightConfig"]


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
    """int8 symmetric per-channel weights, activations quantized to int8 per token (symmetric,
    scale max|x| / 127, torchao's _int8_symm_per_token_reduced_range_quant) at each call"""

    def __repr__(self):
        return "Int8DynamicActivationInt8WeightConfig()"


class Int8DynamicActivationInt4WeightConfig:
    """int4 symmetric per-group weights ([-8, 7], scale max|w| / 7.5), activations int8 per token.
    torchao's default act_mapping_type is ASYMMETRIC; Tessera runs SYMMETRIC only (torchao's
    act_mapping_type=MappingType.SYMMETRIC): any other value is refused."""

    def __init__(self, group_size=32, act_mapping_type="symmetric"):
        if group_size not in (32, 64, 128, 256):
            raise ValueError(f"int8_dynamic_activation_int4_weight: group_size must be 32, 64, "
                             f"128 or 256 (got {group_size})")
        name = str(getattr(act_mapping_type, "name", act_mapping_type)).lower()
        if name != "symmetric":
            raise NotImplementedError(f"tessera: int8_dynamic_activation_int4_weight("
                                      f"act_mapping_type={act_mapping_type!r}): only symmetric "
                                      f"activations")
        self.group_size = group_size

    def __repr__(self):
        return f"Int8DynamicActivationInt4WeightConfig(group_size={self.group_size})"


def int8_weight_only():
    return Int8WeightOnlyConfig()


def int4_weight_only(group_size=128):
    return Int4WeightOnlyConfig(group_size)


def int8_dynamic_activation_int8_weight():
    return Int8DynamicActivationInt8WeightConfig()


def int8_dynamic_activation_int4_weight(group_size=32, act_mapping_type="symmetric"):
    return Int8DynamicActivationInt4WeightConfig(group_size, act_mapping_type)


def _is_linear(mod, fqn):
    return type(mod) is _nn.Linear


def _swap(mod, config):
    if isinstance(config, Int8WeightOnlyConfig):
        return WeightOnlyLinear.from_float(mod, bits=8)
    if isinstance(config, Int4WeightOnlyConfig):
        return WeightOnlyLinear.from_float(mod, bits=4, group_size=config.group_size)
    if isinstance(config, Int8DynamicActivationInt8WeightConfig):
        return Int8DynamicActivationLinear.from_float(mod, bits=8)
    if isinstance(config, Int8DynamicActivationInt4WeightConfig):
        return Int8DynamicActivationLinear.from_float(mod, bits=4, group_size=config.group_size)
    raise TypeError(f"quantize_: unknown config {config!r} (int8_weight_only(), "
                    "int4_weight_only(group_size), int8_dynamic_activation_int8_weight(), "
                    "int8_dynamic_activation_int4_weight(group_size))")


def quantize_(model, config, filter_fn=None, device=None):
    """torchao.quantization.quantize_: every submodule mod (named fqn) with filter_fn(mod, fqn)
    true (default: every nn.Linear) replaced by its quantized form, in place. A model that is
    itself a Linear is refused (there is no parent to put its replacement in)."""
    if device is not None:
        raise NotImplementedError("tessera: quantize_(device=...) (move the model first)")
    if not isinstance(config, (Int8WeightOnlyConfig, Int4WeightOnlyConfig,
                               Int8DynamicActivationInt8WeightConfig,
                               Int8DynamicActivationInt4WeightConfig)):
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
