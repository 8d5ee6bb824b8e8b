"""tessera.ao.nn.intrinsic — fused float modules (torch.ao.nn.intrinsic): ConvReLU2d and
LinearReLU, what fuse_modules makes, and ConvBn2d / ConvBnReLU2d, what fuse_modules_qat makes;
their quantized forms in .quantized, their QAT forms in .qat."""
from tessera import nn as _nn

from . import quantized  # noqa: F401

__all__ = ["ConvReLU2d", "LinearReLU", "ConvBn2d", "ConvBnReLU2d", "quantized", "qat"]


class ConvReLU2d(_nn.Sequential):
    """torch.ao.nn.intrinsic.ConvReLU2d: Conv2d then ReLU, one module for quantization"""

    def __init__(self, conv, relu):
        super().__init__(conv, relu)


class LinearReLU(_nn.Sequential):
    """torch.ao.nn.intrinsic.LinearReLU"""

    def __init__(self, linear, relu):
        super().__init__(linear, relu)


class ConvBn2d(_nn.Sequential):
    """torch.ao.nn.intrinsic.ConvBn2d: Conv2d then BatchNorm2d (fuse_modules_qat's, for QAT)"""

    def __init__(self, conv, bn):
        super().__init__(conv, bn)


class ConvBnReLU2d(_nn.Sequential):
    """torch.ao.nn.intrinsic.ConvBnReLU2d"""

    def __init__(self, conv, bn, relu):
        super().__init__(conv, bn, relu)


from . import qat  # noqa: E402,F401  (after the float modules it maps)
