"""torchvision.models.quantization.mobilenetv2: MobileNetV2 with QuantStub / DeQuantStub, a
FloatFunctional residual add, ReLU for ReLU6 and fuse_model (torchvision's names)."""
from tessera import nn
from tessera.ao.nn.quantized import FloatFunctional

from .._utils import Conv2dNormActivation
from ..mobilenetv2 import InvertedResidual, MobileNetV2
from .utils import _QuantStubs, _build, _fuse_modules

__all__ = ["QuantizableMobileNetV2", "mobilenet_v2"]


class QuantizableInvertedResidual(InvertedResidual):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.skip_add = FloatFunctional()

    def forward(self, x):
        if self.use_res_connect:
            return self.skip_add.add(x, self.conv(x))
        return self.conv(x)

    def fuse_model(self, is_qat=None):
        for idx in range(len(self.conv)):
            if type(self.conv[idx]) is nn.Conv2d:
                _fuse_modules(self.conv, [str(idx), str(idx + 1)], is_qat, inplace=True)


class QuantizableMobileNetV2(_QuantStubs, MobileNetV2):
    def fuse_model(self, is_qat=None):
        for m in self.modules():
            if type(m) is Conv2dNormActivation:
                _fuse_modules(m, ["0", "1", "2"], is_qat, inplace=True)
            if type(m) is QuantizableInvertedResidual:
                m.fuse_model(is_qat)


def mobilenet_v2(*, weights=None, progress=True, quantize=False, **kwargs):
    return _build("quantized_mobilenet_v2", QuantizableMobileNetV2, (), weights, quantize,
                  dict(kwargs, block=QuantizableInvertedResidual), backend="qnnpack")
