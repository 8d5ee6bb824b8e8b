"""tessera.vision.models.detection.keypoint_rcnn — KeypointRCNN (Faster R-CNN plus a keypoint
branch: MultiScaleRoIAlign 14x14, eight 3x3 conv + ReLU, a transposed conv and 2x bilinear
upsampling to heatmaps) and the builder keypointrcnn_resnet50_fpn."""
from tessera import nn
from tessera.nn import functional as F

from ...ops.poolers import MultiScaleRoIAlign
from ..resnet import resnet50
from .backbone_utils import _resnet_fpn_extractor, _validate_trainable_layers
from .faster_rcnn import FasterRCNN, _check_det_weights

__all__ = ["KeypointRCNN", "KeypointRCNNHeads", "KeypointRCNNPredictor",
           "keypointrcnn_resnet50_fpn"]


class KeypointRCNN(FasterRCNN):
    """FasterRCNN's arguments plus keypoint_roi_pool, keypoint_head, keypoint_predictor,
    num_keypoints (17). Eval detections carry keypoints [N, K, 3] and keypoints_scores [N, K]."""

    def __init__(self, backbone, num_classes=None, min_size=None, *args, keypoint_roi_pool=None,
                 keypoint_head=None, keypoint_predictor=None, num_keypoints=None, **kwargs):
        if not isinstance(keypoint_roi_pool, (MultiScaleRoIAlign, type(None))):
            raise TypeError("keypoint_roi_pool should be of type MultiScaleRoIAlign or None "
                            "instead of %s" % type(keypoint_roi_pool))
        if min_size is None:
            min_size = (640, 672, 704, 736, 768, 800)
        if num_keypoints is not None:
            if keypoint_predictor is not None:
                raise ValueError("num_keypoints should be None when keypoint_predictor is "
                                 "specified")
        else:
            num_keypoints = 17
        out_channels = backbone.out_channels
        if keypoint_roi_pool is None:
            keypoint_roi_pool = MultiScaleRoIAlign(featmap_names=["0", "1", "2", "3"],
                                                   output_size=14, sampling_ratio=2)
        if keypoint_head is None:
            keypoint_head = KeypointRCNNHeads(out_channels, tuple(512 for _ in range(8)))
        if keypoint_predictor is None:
            keypoint_predictor = KeypointRCNNPredictor(512, num_keypoints)
        super().__init__(backbone, num_classes, min_size, *args, **kwargs)
        self.roi_heads.keypoint_roi_pool = keypoint_roi_pool
        self.roi_heads.keypoint_head = keypoint_head
        self.roi_heads.keypoint_predictor = keypoint_predictor


class KeypointRCNNHeads(nn.Sequential):
    def __init__(self, in_channels, layers):
        d = []
        nxt = in_channels
        for out_channels in layers:
            d.append(nn.Conv2d(nxt, out_channels, 3, stride=1, padding=1))
            d.append(nn.ReLU(inplace=True))
            nxt = out_channels
        super().__init__(*d)
        for m in self.children():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.constant_(m.bias, 0)


class KeypointRCNNPredictor(nn.Module):
    def __init__(self, in_channels, num_keypoints):
        super().__init__()
        k = 4
        self.kps_score_lowres = nn.ConvTranspose2d(in_channels, num_keypoints, k, stride=2,
                                                   padding=k // 2 - 1)
        nn.init.kaiming_normal_(self.kps_score_lowres.weight, mode="fan_out",
                                nonlinearity="relu")
        nn.init.constant_(self.kps_score_lowres.bias, 0)
        self.up_scale = 2
        self.out_channels = num_keypoints

    def forward(self, x):
        return F.interpolate(self.kps_score_lowres(x), scale_factor=float(self.up_scale),
                             mode="bilinear", align_corners=False, recompute_scale_factor=False)


def keypointrcnn_resnet50_fpn(*, weights=None, progress=True, num_classes=None,
                              num_keypoints=None, weights_backbone=None,
                              trainable_backbone_layers=None, **kwargs):
    _check_det_weights("keypointrcnn_resnet50_fpn", weights, weights_backbone, kwargs)
    num_classes = 2 if num_classes is None else num_classes
    num_keypoints = 17 if num_keypoints is None else num_keypoints
    trainable = _validate_trainable_layers(False, trainable_backbone_layers, 5, 3)
    backbone = resnet50(weights=None, norm_layer=nn.BatchNorm2d)
    backbone = _resnet_fpn_extractor(backbone, trainable)
    return KeypointRCNN(backbone, num_classes, num_keypoints=num_keypoints, **kwargs)
