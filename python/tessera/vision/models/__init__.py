"""tessera.vision.models — torchvision.models' classification networks as tessera.nn module trees
with torchvision's module and state-dict names: a torchvision state_dict (tessera.load of a .pt)
loads with strict=True. Only weights=None: tessera downloads nothing."""
from . import (alexnet as _alexnet_mod, densenet,  # noqa: F401 (torchvision's submodules) efficientnet, mobilenetv2, mobilenetv3, resnet,
               squeezenet, vgg, vision_transformer)
from .alexnet import AlexNet, alexnet
from .densenet import DenseNet, densenet121, densenet161, densenet169, densenet201
from .efficientnet import (EfficientNet, efficientnet_b0, efficientnet_b1, efficientnet_b2,
                           efficientnet_b3, efficientnet_b4, efficientnet_b5, efficientnet_b6,
                           efficientnet_b7)
from .mobilenetv2 import MobileNetV2, mobilenet_v2
from .mobilenetv3 import MobileNetV3, mobilenet_v3_large, mobilenet_v3_small
from .resnet import (ResNet, resnet18, resnet34, resnet50, resnet101, resnet152, resnext50_32x4d,
                     resnext101_32x8d, resnext101_64x4d, wide_resnet50_2, wide_resnet101_2)
from .squeezenet import SqueezeNet, squeezenet1_0, squeezenet1_1
from .vgg import (VGG, vgg11, vgg11_bn, vgg13, vgg13_bn, vgg16, vgg16_bn, vgg19, vgg19_bn)
from .vision_transformer import (VisionTransformer, vit_b_16, vit_b_32, vit_h_14, vit_l_16,
                                 vit_l_32)

_BUILDERS = {name: obj for name, obj in dict(globals()).items()
             if callable(obj) and name[:1].islower() and not name.startswith("_")}


def list_models():
    """Names of the builders, as torchvision.models.list_models()."""
    return sorted(_BUILDERS)


def get_model(name, **config):
    """torchvision.models.get_model: the builder `name` called with config."""
    if name not in _BUILDERS:
        raise ValueError("tessera.vision.models.get_model: unknown model %r; known: %s"
                         % (name, ", ".join(list_models())))
    return _BUILDERS[name](**config)
