"""torchvision.models.quantization.shufflenetv2: ShuffleNetV2 with QuantStub / DeQuantStub, a
FloatFunctional cat and fuse_model (torchvision's names)."""
from tessera.ao.nn.quantized import FloatFunctional

from .. import shufflenetv2
from .utils import _QuantStubs, _build, _fuse_modules

__all__ = ["QuantizableShuffleNetV2", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0",
           "shufflenet_v2_x1_5", "shufflenet_v2_x2_0"]


class QuantizableInvertedResidual(shufflenetv2.InvertedResidual):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cat = FloatFunctional()

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = self.cat.cat([x1, self.branch2(x2)], dim=1)
        else:
            out = self.cat.cat([self.branch1(x), self.branch2(x)], dim=1)
        return shufflenetv2.channel_shuffle(out, 2)


class QuantizableShuffleNetV2(_QuantStubs, shufflenetv2.ShuffleNetV2):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, inverted_residual=QuantizableInvertedResidual, **kwargs)

    def fuse_model(self, is_qat=None):
        for name, m in self._modules.items():
            if name in ("conv1", "conv5") and m is not None:
                _fuse_modules(m, [["0", "1", "2"]], is_qat, inplace=True)
        for m in self.modules():
            if type(m) is QuantizableInvertedResidual:
                if len(m.branch1._modules.items()) > 0:
                    _fuse_modules(m.branch1, [["0", "1"], ["2", "3", "4"]], is_qat, inplace=True)
                _fuse_modules(m.branch2, [["0", "1", "2"], ["3", "4"], ["5", "6", "7"]], is_qat,
                              inplace=True)


def _shufflenetv2(name, repeats, channels, weights, quantize, kwargs):
    return _build(name, QuantizableShuffleNetV2, (repeats, channels), weights, quantize, kwargs)


def shufflenet_v2_x0_5(*, weights=None, progress=True, quantize=False, **kwargs):
    return _shufflenetv2("quantized_shufflenet_v2_x0_5", [4, 8, 4], [24, 48, 96, 192, 1024],
                         weights, quantize, kwargs)


def shufflenet_v2_x1_0(*, weights=None, progress=True, quantize=False, **kwargs):
    return _shufflenetv2("quantized_shufflenet_v2_x1_0", [4, 8, 4], [24, 116, 232, 464, 1024],
                         weights, quantize, kwargs)


def shufflenet_v2_x1_5(*, weights=None, progress=True, quantize=False, **kwargs):
    return _shufflenetv2("quantized_shufflenet_v2_x1_5", [4, 8, 4], [24, 176, 352, 704, 1024],
                         weights, quantize, kwargs)


def shufflenet_v2_x2_0(*, weights=None, progress=True, quantize=False, **kwargs):
    return _shufflenetv2("quantized_shufflenet_v2_x2_0", [4, 8, 4], [24, 244, 488, 976, 2048],
                         weights, quantize, kwargs)
