"""tessera.ao.nn.quantized — quantized modules (torch.ao.nn.quantized): Quantize, DeQuantize,
Linear, Conv2d, Hardswish, FloatFunctional / QFunctional and the dynamic Linear (docs/QUANTIZATION.md lists
what is missing)."""
from . import dynamic, dynamic_activation, weight_only  # noqa: F401
from .modules import (Conv2d, DeQuantize, FloatFunctional, Hardswish, Linear,  # noqa: F401
                      QFunctional, Quantize)
