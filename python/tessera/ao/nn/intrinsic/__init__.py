"""tessera.ao.nn.intrinsic — fused float modules (torch.ao.nn.intrinsic): ConvReLU2d and
LinearReLU, what fuse_modules makes; their quantized forms in .quantized."""
from tessera import nn as _nn

from . import quantized  # noqa: F401

__all__ = ["ConvReLU2d", "LinearReLU", "quantized"]


class ConvReLU2d(_nn.Sequential):
    """torch.ao.nn.intrinsic.ConvReLU2d: Conv2d then ReLU, one module for quantization"""

    def __init__(self, conv, relu):
        super().__init__(conv, relu)


class LinearReLU(_nn.Sequential):
    """torch.ao.nn.intrinsic.LinearReLU"""

    def __init__(self, linear, relu):
        super().__init__(linear, relu)
