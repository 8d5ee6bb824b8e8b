"""tessera.vision.models — torchvision.models' classification networks (and, in .segmentation /
.detection / .video / .optical_flow, its segmentation, detection, video and optical-flow models)
as tessera.nn module trees with torchvision's module and state-dict names: a torchvision
state_dict (tessera.load of a .pt) loads with strict=True. Only weights=None: tessera downloads
nothing."""
from . import (alexnet as _alexnet_mod, convnext, densenet,  # noqa: F401 (submodules)
               efficientnet, googlenet as _googlenet_mod, inception, maxvit, mnasnet, mobilenetv2,
               mobilenetv3, regnet, resnet, shufflenetv2, squeezenet, swin_transformer, vgg,
               vision_transformer)
from .alexnet import AlexNet, alexnet
from .convnext import ConvNeXt, convnext_base, convnext_large, convnext_small, convnext_tiny
from .densenet import DenseNet, densenet121, densenet161, densenet169, densenet201
from .efficientnet import (EfficientNet, efficientnet_b0, efficientnet_b1, efficientnet_b2,
                           efficientnet_b3, efficientnet_b4, efficientnet_b5, efficientnet_b6,
                           efficientnet_b7, efficientnet_v2_l, efficientnet_v2_m,
                           efficientnet_v2_s)
from .googlenet import GoogLeNet, GoogLeNetOutputs, googlenet
from .inception import Inception3, InceptionOutputs, inception_v3
from .maxvit import MaxVit, maxvit_t
from .mnasnet import MNASNet, mnasnet0_5, mnasnet0_75, mnasnet1_0, mnasnet1_3
from .mobilenetv2 import MobileNetV2, mobilenet_v2
from .mobilenetv3 import MobileNetV3, mobilenet_v3_large, mobilenet_v3_small
from .regnet import (RegNet, regnet_x_1_6gf, regnet_x_3_2gf, regnet_x_8gf, regnet_x_16gf,
                     regnet_x_32gf, regnet_x_400mf, regnet_x_800mf, regnet_y_1_6gf,
                     regnet_y_3_2gf, regnet_y_8gf, regnet_y_16gf, regnet_y_32gf, regnet_y_128gf,
                     regnet_y_400mf, regnet_y_800mf)
from .resnet import (ResNet, resnet18, resnet34, resnet50, resnet101, resnet152, resnext50_32x4d,
                     resnext101_32x8d, resnext101_64x4d, wide_resnet50_2, wide_resnet101_2)
from .shufflenetv2 import (ShuffleNetV2, shufflenet_v2_x0_5, shufflenet_v2_x1_0,
                           shufflenet_v2_x1_5, shufflenet_v2_x2_0)
from .squeezenet import SqueezeNet, squeezenet1_0, squeezenet1_1
from .swin_transformer import (SwinTransformer, swin_b, swin_s, swin_t, swin_v2_b, swin_v2_s,
                               swin_v2_t)
from .vgg import (VGG, vgg11, vgg11_bn, vgg13, vgg13_bn, vgg16, vgg16_bn, vgg19, vgg19_bn)
from .vision_transformer import (VisionTransformer, vit_b_16, vit_b_32, vit_h_14, vit_l_16,
                                 vit_l_32)

from . import detection  # noqa: F401,E402 (torchvision.models.detection)

from . import segmentation  # noqa: E402 (torchvision.models.segmentation)

from . import optical_flow, video  # noqa: E402 (torchvision.models.video / .optical_flow)

from . import quantization  # noqa: E402 (torchvision.models.quantization)

_BUILDERS = {name: obj for name, obj in dict(globals()).items()
             if callable(obj) and name[:1].islower() and not name.startswith("_")}
_BUILDERS.update({name: getattr(segmentation, name) for name in segmentation.__all__
                  if name[:1].islower()})  # registered, as torchvision's, not attributes here
_BUILDERS.update({name: getattr(detection, name) for name in detection.__all__
                  if name[:1].islower()})
_BUILDERS.update({name: getattr(mod, name) for mod in (video, optical_flow)
                  for name in mod.__all__ if name[:1].islower()})
_BUILDERS.update({"quantized_" + name: getattr(quantization, name)  # torchvision's names
                  for name in quantization.__all__ if name[:1].islower()})


def list_models():
    """Names of the builders, as torchvision.models.list_models()."""
    return sorted(_BUILDERS)


def get_model_builder(name):
    """torchvision.models.get_model_builder: the builder function called `name`."""
    if name not in _BUILDERS:
        raise ValueError("tessera.vision.models.get_model_builder: unknown model %r" % (name,))
    return _BUILDERS[name]


def get_model(name, **config):
    """torchvision.models.get_model: the builder `name` called with config."""
    if name not in _BUILDERS:
        raise ValueError("tessera.vision.models.get_model: unknown model %r; known: %s"
                         % (name, ", ".join(list_models())))
    return _BUILDERS[name](**config)
