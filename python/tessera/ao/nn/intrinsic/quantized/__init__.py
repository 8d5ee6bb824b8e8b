"""tessera.ao.nn.intrinsic.quantized — quantized fused modules (torch.ao.nn.intrinsic.quantized):
ConvReLU2d and LinearReLU, the quantized Conv2d / Linear with the ReLU in the requantization
(the C functions' relu flag: the output's lower bound raised to its zero point)."""
from tessera.ao.nn.quantized import modules as _m

__all__ = ["ConvReLU2d", "LinearReLU"]


class ConvReLU2d(_m.Conv2d):
    _relu = True

    def _get_name(self):
        return "QuantizedConvReLU2d"


class LinearReLU(_m.Linear):
    _relu = True

    def _get_name(self):
        return "QuantizedLinearReLU"
