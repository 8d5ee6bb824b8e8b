"""torchvision.models.segmentation.lraspp: Lite R-ASPP on MobileNetV3-Large (dilated)."""
from collections import OrderedDict

from tessera import nn
from tessera.nn import functional as F

from .._utils import IntermediateLayerGetter
from ..mobilenetv3 import mobilenet_v3_large
from ._utils import _segmentation_args
from .deeplabv3 import _mobilenet_stages

__all__ = ["LRASPP", "lraspp_mobilenet_v3_large"]


class LRASPPHead(nn.Module):
    def __init__(self, low_channels, high_channels, num_classes, inter_channels):
        super().__init__()
        self.cbr = nn.Sequential(nn.Conv2d(high_channels, inter_channels, 1, bias=False),
                                 nn.BatchNorm2d(inter_channels), nn.ReLU(inplace=True))
        self.scale = nn.Sequential(nn.AdaptiveAvgPool2d(1),
                                   nn.Conv2d(high_channels, inter_channels, 1, bias=False),
                                   nn.Sigmoid())
        self.low_classifier = nn.Conv2d(low_channels, num_classes, 1)
        self.high_classifier = nn.Conv2d(inter_channels, num_classes, 1)

    def forward(self, features):
        low, high = features["low"], features["high"]
        x = self.cbr(high) * self.scale(high)
        x = F.interpolate(x, size=low.shape[-2:], mode="bilinear", align_corners=False)
        return self.low_classifier(low) + self.high_classifier(x)


class LRASPP(nn.Module):
    def __init__(self, backbone, low_channels, high_channels, num_classes, inter_channels=128):
        super().__init__()
        self.backbone = backbone
        self.classifier = LRASPPHead(low_channels, high_channels, num_classes, inter_channels)

    def forward(self, x):
        out = self.classifier(self.backbone(x))
        result = OrderedDict()
        result["out"] = F.interpolate(out, size=x.shape[-2:], mode="bilinear",
                                      align_corners=False)
        return result


def lraspp_mobilenet_v3_large(*, weights=None, progress=True, num_classes=None,
                              weights_backbone=None, **kwargs):
    if kwargs.pop("aux_loss", False):
        raise NotImplementedError("lraspp_mobilenet_v3_large: this model does not use an "
                                  "auxiliary loss (aux_loss=True)")
    n = _segmentation_args("lraspp_mobilenet_v3_large", weights, weights_backbone, num_classes,
                           kwargs)
    features = mobilenet_v3_large(dilated=True).features
    stages = _mobilenet_stages(features)
    low_pos, high_pos = stages[-4], stages[-1]  # C2 (output stride 8), C5 (stride 16)
    body = IntermediateLayerGetter(features, return_layers={str(low_pos): "low",
                                                            str(high_pos): "high"})
    return LRASPP(body, features[low_pos].out_channels, features[high_pos].out_channels, n)
