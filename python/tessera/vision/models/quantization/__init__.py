"""torchvision.models.quantization: the quantizable classification networks (QuantStub /
DeQuantStub, FloatFunctional adds, cats and products, fuse_model), float by default; quantize=True
runs torchvision's eager-mode quantization on them (tessera.ao.quantization: post-training, or for
MobileNetV3 QAT-prepared and converted). Registered in tessera.vision.models as quantized_<name>,
as torchvision registers them. Only weights=None."""
from . import inception, mobilenetv2, mobilenetv3, resnet, shufflenetv2  # noqa: F401
from .googlenet import QuantizableGoogLeNet, googlenet  # the function, as in torchvision
from .inception import QuantizableInception3, inception_v3
from .mobilenetv2 import QuantizableMobileNetV2, mobilenet_v2
from .mobilenetv3 import QuantizableMobileNetV3, mobilenet_v3_large
from .resnet import QuantizableResNet, resnet18, resnet50, resnext101_32x8d, resnext101_64x4d
from .shufflenetv2 import (QuantizableShuffleNetV2, shufflenet_v2_x0_5, shufflenet_v2_x1_0,
                           shufflenet_v2_x1_5, shufflenet_v2_x2_0)

__all__ = ["QuantizableGoogLeNet", "QuantizableInception3", "QuantizableMobileNetV2",
           "QuantizableMobileNetV3", "QuantizableResNet", "QuantizableShuffleNetV2", "googlenet",
           "inception_v3", "mobilenet_v2", "mobilenet_v3_large", "resnet18", "resnet50",
           "resnext101_32x8d", "resnext101_64x4d", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0",
           "shufflenet_v2_x1_5", "shufflenet_v2_x2_0"]
