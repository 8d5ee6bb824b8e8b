"""torchvision.models.segmentation.deeplabv3: DeepLabV3 (ASPP head) on a dilated ResNet-50 / 101
or on MobileNetV3-Large (dilated last stage)."""
import tessera as ts
from tessera import nn
from tessera.nn import functional as F

from .._utils import IntermediateLayerGetter
from ..mobilenetv3 import mobilenet_v3_large
from ..resnet import resnet50, resnet101
from ._utils import _SimpleSegmentationModel, _segmentation_args
from .fcn import FCNHead

__all__ = ["DeepLabV3", "DeepLabHead", "deeplabv3_resnet50", "deeplabv3_resnet101",
           "deeplabv3_mobilenet_v3_large"]


class DeepLabV3(_SimpleSegmentationModel):
    pass


class ASPPConv(nn.Sequential):
    def __init__(self, in_channels, out_channels, dilation):
        super().__init__(nn.Conv2d(in_channels, out_channels, 3, padding=dilation,
                                   dilation=dilation, bias=False),
                         nn.BatchNorm2d(out_channels), nn.ReLU())


class ASPPPooling(nn.Sequential):
    """global average, 1x1 conv, BN, ReLU, broadcast back (bilinear) to the input's size"""

    def __init__(self, in_channels, out_channels):
        super().__init__(nn.AdaptiveAvgPool2d(1), nn.Conv2d(in_channels, out_channels, 1,
                                                            bias=False),
                         nn.BatchNorm2d(out_channels), nn.ReLU())

    def forward(self, x):
        size = x.shape[-2:]
        for mod in self:
            x = mod(x)
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


class ASPP(nn.Module):
    def __init__(self, in_channels, atrous_rates, out_channels=256):
        super().__init__()
        mods = [nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, bias=False),
                              nn.BatchNorm2d(out_channels), nn.ReLU())]
        mods += [ASPPConv(in_channels, out_channels, r) for r in tuple(atrous_rates)]
        mods.append(ASPPPooling(in_channels, out_channels))
        self.convs = nn.ModuleList(mods)
        self.project = nn.Sequential(
            nn.Conv2d(len(self.convs) * out_channels, out_channels, 1, bias=False),
            nn.BatchNorm2d(out_channels), nn.ReLU(), nn.Dropout(0.5))

    def forward(self, x):
        return self.project(ts.cat([conv(x) for conv in self.convs], dim=1))


class DeepLabHead(nn.Sequential):
    def __init__(self, in_channels, num_classes, atrous_rates=(12, 24, 36)):
        super().__init__(ASPP(in_channels, atrous_rates),
                         nn.Conv2d(256, 256, 3, padding=1, bias=False), nn.BatchNorm2d(256),
                         nn.ReLU(), nn.Conv2d(256, num_classes, 1))


def _deeplabv3_resnet(backbone, num_classes, aux):
    return_layers = {"layer4": "out"}
    if aux:
        return_layers["layer3"] = "aux"
    backbone = IntermediateLayerGetter(backbone, return_layers=return_layers)
    return DeepLabV3(backbone, DeepLabHead(2048, num_classes),
                     FCNHead(1024, num_classes) if aux else None)


def _mobilenet_stages(features):
    """indices of MobileNetV3's features: the stem, every strided block, the last conv"""
    return [0] + [i for i, b in enumerate(features) if getattr(b, "_is_cn", False)] + [
        len(features) - 1]


def _deeplabv3_mobilenetv3(backbone, num_classes, aux):
    features = backbone.features
    stages = _mobilenet_stages(features)
    out_pos, aux_pos = stages[-1], stages[-4]  # C5 (output stride 16), C2 (stride 8)
    return_layers = {str(out_pos): "out"}
    if aux:
        return_layers[str(aux_pos)] = "aux"
    body = IntermediateLayerGetter(features, return_layers=return_layers)
    return DeepLabV3(body, DeepLabHead(features[out_pos].out_channels, num_classes),
                     FCNHead(features[aux_pos].out_channels, num_classes) if aux else None)


def deeplabv3_resnet50(*, weights=None, progress=True, num_classes=None, aux_loss=None,
                       weights_backbone=None, **kwargs):
    n = _segmentation_args("deeplabv3_resnet50", weights, weights_backbone, num_classes, kwargs)
    return _deeplabv3_resnet(resnet50(replace_stride_with_dilation=[False, True, True]), n,
                             aux_loss)


def deeplabv3_resnet101(*, weights=None, progress=True, num_classes=None, aux_loss=None,
                        weights_backbone=None, **kwargs):
    n = _segmentation_args("deeplabv3_resnet101", weights, weights_backbone, num_classes, kwargs)
    return _deeplabv3_resnet(resnet101(replace_stride_with_dilation=[False, True, True]), n,
                             aux_loss)


def deeplabv3_mobilenet_v3_large(*, weights=None, progress=True, num_classes=None,
                                 aux_loss=None, weights_backbone=None, **kwargs):
    n = _segmentation_args("deeplabv3_mobilenet_v3_large", weights, weights_backbone,
                           num_classes, kwargs)
    return _deeplabv3_mobilenetv3(mobilenet_v3_large(dilated=True), n, aux_loss)
