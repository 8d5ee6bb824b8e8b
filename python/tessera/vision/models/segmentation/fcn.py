"""torchvision.models.segmentation.fcn: FCN on a dilated ResNet-50 / 101 (output stride 8)."""
from tessera import nn

from .._utils import IntermediateLayerGetter
from ..resnet import resnet50, resnet101
from ._utils import _SimpleSegmentationModel, _segmentation_args

__all__ = ["FCN", "FCNHead", "fcn_resnet50", "fcn_resnet101"]


class FCN(_SimpleSegmentationModel):
    pass


class FCNHead(nn.Sequential):
    def __init__(self, in_channels, channels):
        inter = in_channels // 4
        super().__init__(nn.Conv2d(in_channels, inter, 3, padding=1, bias=False),
                         nn.BatchNorm2d(inter), nn.ReLU(), nn.Dropout(0.1),
                         nn.Conv2d(inter, channels, 1))


def _fcn_resnet(backbone, num_classes, aux):
    return_layers = {"layer4": "out"}
    if aux:
        return_layers["layer3"] = "aux"
    backbone = IntermediateLayerGetter(backbone, return_layers=return_layers)
    return FCN(backbone, FCNHead(2048, num_classes), FCNHead(1024, num_classes) if aux else None)


def fcn_resnet50(*, weights=None, progress=True, num_classes=None, aux_loss=None,
                 weights_backbone=None, **kwargs):
    n = _segmentation_args("fcn_resnet50", weights, weights_backbone, num_classes, kwargs)
    backbone = resnet50(replace_stride_with_dilation=[False, True, True])
    return _fcn_resnet(backbone, n, aux_loss)


def fcn_resnet101(*, weights=None, progress=True, num_classes=None, aux_loss=None,
                  weights_backbone=None, **kwargs):
    n = _segmentation_args("fcn_resnet101", weights, weights_backbone, num_classes, kwargs)
    backbone = resnet101(replace_stride_with_dilation=[False, True, True])
    return _fcn_resnet(backbone, n, aux_loss)
