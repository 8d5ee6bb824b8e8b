"""tessera.vision.models.detection.ssdlite — SSDlite (SSD with depthwise-separable prediction
blocks over a MobileNetV3-Large feature extractor and four extra blocks) and the builder
ssdlite320_mobilenet_v3_large."""
from collections import OrderedDict
from functools import partial

from tessera import nn

from .._utils import Conv2dNormActivation
from ..mobilenetv3 import mobilenet_v3_large
from . import _utils as det_utils
from .anchor_utils import DefaultBoxGenerator
from .backbone_utils import _validate_trainable_layers
from .faster_rcnn import _check_det_weights, _num_classes
from .ssd import SSD, SSDScoringHead

__all__ = ["SSDLiteHead", "SSDLiteClassificationHead", "SSDLiteRegressionHead",
           "SSDLiteFeatureExtractorMobileNet", "ssdlite320_mobilenet_v3_large"]


def _prediction_block(in_channels, out_channels, kernel_size, norm_layer):
    return nn.Sequential(
        Conv2dNormActivation(in_channels, in_channels, kernel_size=kernel_size,
                             groups=in_channels, norm_layer=norm_layer, activation_layer=nn.ReLU6),
        nn.Conv2d(in_channels, out_channels, 1))


def _extra_block(in_channels, out_channels, norm_layer):
    mid = out_channels // 2
    return nn.Sequential(
        Conv2dNormActivation(in_channels, mid, kernel_size=1, norm_layer=norm_layer,
                             activation_layer=nn.ReLU6),
        Conv2dNormActivation(mid, mid, kernel_size=3, stride=2, groups=mid, norm_layer=norm_layer,
                             activation_layer=nn.ReLU6),
        Conv2dNormActivation(mid, out_channels, kernel_size=1, norm_layer=norm_layer,
                             activation_layer=nn.ReLU6))


def _normal_init(conv):
    for layer in conv.modules():
        if isinstance(layer, nn.Conv2d):
            nn.init.normal_(layer.weight, mean=0.0, std=0.03)
            if layer.bias is not None:
                nn.init.constant_(layer.bias, 0.0)


class SSDLiteHead(nn.Module):
    def __init__(self, in_channels, num_anchors, num_classes, norm_layer):
        super().__init__()
        self.classification_head = SSDLiteClassificationHead(in_channels, num_anchors,
                                                             num_classes, norm_layer)
        self.regression_head = SSDLiteRegressionHead(in_channels, num_anchors, norm_layer)

    def forward(self, x):
        return {"bbox_regression": self.regression_head(x),
                "cls_logits": self.classification_head(x)}


class SSDLiteClassificationHead(SSDScoringHead):
    def __init__(self, in_channels, num_anchors, num_classes, norm_layer):
        cls_logits = nn.ModuleList()
        for c, a in zip(in_channels, num_anchors):
            cls_logits.append(_prediction_block(c, num_classes * a, 3, norm_layer))
        _normal_init(cls_logits)
        super().__init__(cls_logits, num_classes)


class SSDLiteRegressionHead(SSDScoringHead):
    def __init__(self, in_channels, num_anchors, norm_layer):
        bbox_reg = nn.ModuleList()
        for c, a in zip(in_channels, num_anchors):
            bbox_reg.append(_prediction_block(c, 4 * a, 3, norm_layer))
        _normal_init(bbox_reg)
        super().__init__(bbox_reg, 4)


class SSDLiteFeatureExtractorMobileNet(nn.Module):
    """MobileNet features split inside block c4_pos (after its expansion conv), then four extra
    blocks: 6 maps."""

    def __init__(self, backbone, c4_pos, norm_layer, width_mult=1.0, min_depth=16):
        super().__init__()
        layers = list(backbone)
        if layers[c4_pos].use_res_connect:
            raise ValueError("backbone[c4_pos].use_res_connect should be False")
        c4_block = list(layers[c4_pos].block.named_children())
        # torchvision slices block[1:]: a Sequential that keeps the names "1", "2", ...
        self.features = nn.Sequential(
            nn.Sequential(*layers[:c4_pos], c4_block[0][1]),
            nn.Sequential(nn.Sequential(OrderedDict(c4_block[1:])), *layers[c4_pos + 1:]))

        def depth(d):
            return max(min_depth, int(d * width_mult))

        extra = nn.ModuleList([
            _extra_block(layers[-1].out_channels, depth(512), norm_layer),
            _extra_block(depth(512), depth(256), norm_layer),
            _extra_block(depth(256), depth(256), norm_layer),
            _extra_block(depth(256), depth(128), norm_layer)])
        _normal_init(extra)
        self.extra = extra

    def forward(self, x):
        output = []
        for block in self.features:
            x = block(x)
            output.append(x)
        for block in self.extra:
            x = block(x)
            output.append(x)
        return OrderedDict([(str(i), v) for i, v in enumerate(output)])


def _mobilenet_extractor(backbone, trainable_layers, norm_layer):
    features = list(backbone.features)
    stage_indices = ([0] + [i for i, b in enumerate(features) if getattr(b, "_is_cn", False)]
                     + [len(features) - 1])
    num_stages = len(stage_indices)
    if not 0 <= trainable_layers <= num_stages:
        raise ValueError("trainable_layers should be in the range [0, %d], instead got %d"
                         % (num_stages, trainable_layers))
    freeze_before = (len(features) if trainable_layers == 0
                     else stage_indices[num_stages - trainable_layers])
    for b in features[:freeze_before]:
        for p in b.parameters():
            p.requires_grad_(False)
    return SSDLiteFeatureExtractorMobileNet(features, stage_indices[-2], norm_layer)


def ssdlite320_mobilenet_v3_large(*, weights=None, progress=True, num_classes=None,
                                  weights_backbone=None, trainable_backbone_layers=None,
                                  norm_layer=None, **kwargs):
    _check_det_weights("ssdlite320_mobilenet_v3_large", weights, weights_backbone, kwargs)
    kwargs.pop("size", None)  # torchvision warns and ignores it: the size is fixed at 320
    trainable = _validate_trainable_layers(False, trainable_backbone_layers, 6, 6)
    if norm_layer is None:
        norm_layer = partial(nn.BatchNorm2d, eps=0.001, momentum=0.03)
    backbone = mobilenet_v3_large(weights=None, norm_layer=norm_layer, reduced_tail=True)
    _normal_init(backbone)
    backbone = _mobilenet_extractor(backbone, trainable, norm_layer)
    size = (320, 320)
    anchor_generator = DefaultBoxGenerator([[2, 3] for _ in range(6)], min_ratio=0.2,
                                           max_ratio=0.95)
    out_channels = det_utils.retrieve_out_channels(backbone, size)
    num_anchors = anchor_generator.num_anchors_per_location()
    num_classes = _num_classes(num_classes)
    defaults = {"score_thresh": 0.001, "nms_thresh": 0.55, "detections_per_img": 300,
                "topk_candidates": 300, "image_mean": [0.5, 0.5, 0.5],
                "image_std": [0.5, 0.5, 0.5]}
    return SSD(backbone, anchor_generator, size, num_classes,
               head=SSDLiteHead(out_channels, num_anchors, num_classes, norm_layer),
               **{**defaults, **kwargs})
