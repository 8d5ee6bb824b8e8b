"""torchvision.models.quantization: the quantizable classification networks (QuantStub /
DeQuantStub, FloatFunctional adds and cats, fuse_model), float by default; quantize=True runs
torchvision's eager-mode post-training quantization on them (tessera.ao.quantization). Registered
in tessera.vision.models as quantized_<name>, as torchvision registers them. Only weights=None.
GoogLeNet, Inception v3 and MobileNetV3 are not here yet."""
from . import mobilenetv2, resnet, shufflenetv2  # noqa: F401
from .mobilenetv2 import QuantizableMobileNetV2, mobilenet_v2
from .resnet import QuantizableResNet, resnet18, resnet50, resnext101_32x8d, resnext101_64x4d
from .shufflenetv2 import (QuantizableShuffleNetV2, shufflenet_v2_x0_5, shufflenet_v2_x1_0,
                           shufflenet_v2_x1_5, shufflenet_v2_x2_0)

__all__ = ["QuantizableMobileNetV2", "QuantizableResNet", "QuantizableShuffleNetV2",
           "mobilenet_v2", "resnet18", "resnet50", "resnext101_32x8d", "resnext101_64x4d",
           "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5",
           "shufflenet_v2_x2_0"]
