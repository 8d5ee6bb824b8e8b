"""tessera.vision.models.segmentation — torchvision.models.segmentation: FCN and DeepLabV3 on a
dilated ResNet-50 / 101 (and DeepLabV3 on MobileNetV3-Large), LR-ASPP on MobileNetV3-Large, with
torchvision's module and state-dict names. forward returns an OrderedDict: "out" (and "aux" with
aux_loss=True), [N, num_classes, H, W] at the input's size. weights=None and weights_backbone=None
only: tessera downloads nothing (torchvision's default weights_backbone would)."""
from .deeplabv3 import (DeepLabV3, deeplabv3_mobilenet_v3_large, deeplabv3_resnet50,
                        deeplabv3_resnet101)
from .fcn import FCN, fcn_resnet50, fcn_resnet101
from .lraspp import LRASPP, lraspp_mobilenet_v3_large

__all__ = ["FCN", "DeepLabV3", "LRASPP", "fcn_resnet50", "fcn_resnet101", "deeplabv3_resnet50",
           "deeplabv3_resnet101", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"]
