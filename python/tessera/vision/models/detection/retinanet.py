"""tessera.vision.models.detection.retinanet — RetinaNet (one-stage: a classification and a
regression head shared over the FPN levels P3-P7, sigmoid focal loss, per-level top-k then
batched_nms) and the builders retinanet_resnet50_fpn(_v2)."""
import math
from collections import OrderedDict
from functools import partial

import tessera as ts
from tessera import nn

from ...ops import boxes as box_ops
from ...ops import misc as misc_nn_ops
from ...ops.feature_pyramid_network import LastLevelP6P7
from ...ops.focal_loss import sigmoid_focal_loss
from ..resnet import resnet50
from . import _utils as det_utils
from ._utils import _box_loss
from .anchor_utils import AnchorGenerator
from .backbone_utils import _resnet_fpn_extractor, _validate_trainable_layers
from .faster_rcnn import _check_det_weights, _num_classes
from .generalized_rcnn import _check_degenerate, _check_targets
from .transform import GeneralizedRCNNTransform

__all__ = ["RetinaNet", "RetinaNetHead", "RetinaNetClassificationHead",
           "RetinaNetRegressionHead", "retinanet_resnet50_fpn", "retinanet_resnet50_fpn_v2"]


def _sum(x):
    res = x[0]
    for i in x[1:]:
        res = res + i
    return res


def _default_anchorgen():
    sizes = tuple((x, int(x * 2 ** (1.0 / 3)), int(x * 2 ** (2.0 / 3)))
                  for x in [32, 64, 128, 256, 512])
    return AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * len(sizes))


def _flatten_level(t, N, C):
    """[N, A*C, H, W] -> [N, H*W*A, C]"""
    H, W = t.shape[-2:]
    return t.reshape(N, -1, C, H, W).permute(0, 3, 4, 1, 2).reshape(N, -1, C)


def _detect(model, outputs, anchors, image_shapes, score_fn, decode):
    """Per image and level: scores = score_fn(outputs of the level) flattened over (anchor,
    class), those > score_thresh, the best topk_candidates, their boxes decoded and clipped;
    then batched_nms over the levels, detections_per_img kept."""
    detections = []
    for index in range(len(image_shapes)):
        image_boxes, image_scores, image_labels = [], [], []
        for level in range(len(anchors[index])):
            outs = [o[level][index] for o in outputs]
            anc_l = anchors[index][level]
            num_classes = outs[0].shape[-1]
            scores = score_fn(*([outs[0]] + outs[2:])).flatten()
            keep = scores > model.score_thresh
            scores = scores[keep]
            topk_idxs = ts.where(keep)[0]
            k = det_utils._topk_min(topk_idxs, model.topk_candidates, 0)
            scores, idxs = scores.topk(k)
            topk_idxs = topk_idxs[idxs]
            anchor_idxs = ts.div(topk_idxs, num_classes, rounding_mode="floor")
            boxes = decode(outs[1][anchor_idxs], anc_l[anchor_idxs])
            image_boxes.append(box_ops.clip_boxes_to_image(boxes, image_shapes[index]))
            image_scores.append(scores)
            image_labels.append(topk_idxs % num_classes)
        image_boxes = ts.cat(image_boxes, dim=0)
        image_scores = ts.cat(image_scores, dim=0)
        image_labels = ts.cat(image_labels, dim=0)
        keep = box_ops.batched_nms(image_boxes, image_scores, image_labels, model.nms_thresh)
        keep = keep[: model.detections_per_img]
        detections.append({"boxes": image_boxes[keep], "scores": image_scores[keep],
                           "labels": image_labels[keep]})
    return detections


class RetinaNetHead(nn.Module):
    def __init__(self, in_channels, num_anchors, num_classes, norm_layer=None):
        super().__init__()
        self.classification_head = RetinaNetClassificationHead(in_channels, num_anchors,
                                                               num_classes, norm_layer=norm_layer)
        self.regression_head = RetinaNetRegressionHead(in_channels, num_anchors,
                                                       norm_layer=norm_layer)

    def compute_loss(self, targets, head_outputs, anchors, matched_idxs):
        return {"classification": self.classification_head.compute_loss(targets, head_outputs,
                                                                         matched_idxs),
                "bbox_regression": self.regression_head.compute_loss(targets, head_outputs,
                                                                     anchors, matched_idxs)}

    def forward(self, x):
        return {"cls_logits": self.classification_head(x),
                "bbox_regression": self.regression_head(x)}


def _conv_tower(in_channels, norm_layer):
    conv = nn.Sequential(*[misc_nn_ops.Conv2dNormActivation(in_channels, in_channels,
                                                            norm_layer=norm_layer)
                           for _ in range(4)])
    for layer in conv.modules():
        if isinstance(layer, nn.Conv2d):
            nn.init.normal_(layer.weight, std=0.01)
            if layer.bias is not None:
                nn.init.constant_(layer.bias, 0)
    return conv


class RetinaNetClassificationHead(nn.Module):
    _version = 2

    def __init__(self, in_channels, num_anchors, num_classes, prior_probability=0.01,
                 norm_layer=None):
        super().__init__()
        self.conv = _conv_tower(in_channels, norm_layer)
        self.cls_logits = nn.Conv2d(in_channels, num_anchors * num_classes, kernel_size=3,
                                    stride=1, padding=1)
        nn.init.normal_(self.cls_logits.weight, std=0.01)
        nn.init.constant_(self.cls_logits.bias,
                          -math.log((1 - prior_probability) / prior_probability))
        self.num_classes = num_classes
        self.num_anchors = num_anchors
        self.BETWEEN_THRESHOLDS = det_utils.Matcher.BETWEEN_THRESHOLDS

    def compute_loss(self, targets, head_outputs, matched_idxs):
        losses = []
        for t, logits, m in zip(targets, head_outputs["cls_logits"], matched_idxs):
            fg = m >= 0
            num_fg = int(fg.sum())
            gt = ts.zeros_like(logits)
            fg_idx = ts.where(fg)[0]
            gt[fg_idx, t["labels"][m[fg_idx]]] = 1.0
            valid = m != self.BETWEEN_THRESHOLDS
            losses.append(sigmoid_focal_loss(logits[valid], gt[valid], reduction="sum")
                          / max(1, num_fg))
        return _sum(losses) / len(targets)

    def forward(self, x):
        out = [_flatten_level(self.cls_logits(self.conv(f)), f.shape[0], self.num_classes)
               for f in x]
        return ts.cat(out, dim=1)


class RetinaNetRegressionHead(nn.Module):
    _version = 2

    def __init__(self, in_channels, num_anchors, norm_layer=None):
        super().__init__()
        self.conv = _conv_tower(in_channels, norm_layer)
        self.bbox_reg = nn.Conv2d(in_channels, num_anchors * 4, kernel_size=3, stride=1,
                                  padding=1)
        nn.init.normal_(self.bbox_reg.weight, std=0.01)
        nn.init.zeros_(self.bbox_reg.bias)
        self.box_coder = det_utils.BoxCoder(weights=(1.0, 1.0, 1.0, 1.0))
        self._loss_type = "l1"

    def compute_loss(self, targets, head_outputs, anchors, matched_idxs):
        losses = []
        for t, reg, anc, m in zip(targets, head_outputs["bbox_regression"], anchors,
                                  matched_idxs):
            fg = ts.where(m >= 0)[0]
            matched_gt = t["boxes"][m[fg]]
            losses.append(_box_loss(self._loss_type, self.box_coder, anc[fg, :], matched_gt,
                                    reg[fg, :]) / max(1, fg.numel()))
        return _sum(losses) / max(1, len(targets))

    def forward(self, x):
        out = [_flatten_level(self.bbox_reg(self.conv(f)), f.shape[0], 4) for f in x]
        return ts.cat(out, dim=1)


class RetinaNet(nn.Module):
    """forward(images, targets=None): losses {classification, bbox_regression} in training,
    detections (boxes, scores, labels) per image in eval."""

    def __init__(self, backbone, num_classes, min_size=800, max_size=1333, image_mean=None,
                 image_std=None, anchor_generator=None, head=None, proposal_matcher=None,
                 score_thresh=0.05, nms_thresh=0.5, detections_per_img=300, fg_iou_thresh=0.5,
                 bg_iou_thresh=0.4, topk_candidates=1000, **kwargs):
        super().__init__()
        if not hasattr(backbone, "out_channels"):
            raise ValueError("backbone should contain an attribute out_channels specifying the "
                             "number of output channels (assumed to be the same for all the "
                             "levels)")
        self.backbone = backbone
        if not isinstance(anchor_generator, (AnchorGenerator, type(None))):
            raise TypeError("anchor_generator should be of type AnchorGenerator or None instead "
                            "of %s" % type(anchor_generator))
        if anchor_generator is None:
            anchor_generator = _default_anchorgen()
        self.anchor_generator = anchor_generator
        if head is None:
            head = RetinaNetHead(backbone.out_channels,
                                 anchor_generator.num_anchors_per_location()[0], num_classes)
        self.head = head
        if proposal_matcher is None:
            proposal_matcher = det_utils.Matcher(fg_iou_thresh, bg_iou_thresh,
                                                 allow_low_quality_matches=True)
        self.proposal_matcher = proposal_matcher
        self.box_coder = det_utils.BoxCoder(weights=(1.0, 1.0, 1.0, 1.0))
        if image_mean is None:
            image_mean = [0.485, 0.456, 0.406]
        if image_std is None:
            image_std = [0.229, 0.224, 0.225]
        self.transform = GeneralizedRCNNTransform(min_size, max_size, image_mean, image_std,
                                                  **kwargs)
        self.score_thresh = score_thresh
        self.nms_thresh = nms_thresh
        self.detections_per_img = detections_per_img
        self.topk_candidates = topk_candidates

    def eager_outputs(self, losses, detections):
        return losses if self.training else detections

    def compute_loss(self, targets, head_outputs, anchors):
        matched_idxs = []
        for anc, t in zip(anchors, targets):
            if t["boxes"].numel() == 0:
                matched_idxs.append(ts.full((anc.size(0),), -1, dtype=ts.int64,
                                            device=anc.device))
                continue
            matched_idxs.append(self.proposal_matcher(box_ops.box_iou(t["boxes"], anc)))
        return self.head.compute_loss(targets, head_outputs, anchors, matched_idxs)

    def postprocess_detections(self, head_outputs, anchors, image_shapes):
        return _detect(self, [head_outputs["cls_logits"], head_outputs["bbox_regression"]],
                       anchors, image_shapes, lambda logits: ts.sigmoid(logits),
                       self.box_coder.decode_single)

    def forward(self, images, targets=None):
        if self.training:
            _check_targets(targets, type(self).__name__)
        original_image_sizes = [(int(img.shape[-2]), int(img.shape[-1])) for img in images]
        images, targets = self.transform(images, targets)
        if targets is not None:
            _check_degenerate(targets)
        features = self.backbone(images.tensors)
        if isinstance(features, ts.Tensor):
            features = OrderedDict([("0", features)])
        features = list(features.values())
        head_outputs = self.head(features)
        anchors = self.anchor_generator(images, features)
        losses, detections = {}, []
        if self.training:
            losses = self.compute_loss(targets, head_outputs, anchors)
        else:
            hw = [x.size(2) * x.size(3) for x in features]
            A = head_outputs["cls_logits"].size(1) // sum(hw)
            per_level = [v * A for v in hw]
            split = {k: list(v.split(per_level, dim=1)) for k, v in head_outputs.items()}
            split_anchors = [list(a.split(per_level)) for a in anchors]
            detections = self.postprocess_detections(split, split_anchors, images.image_sizes)
            detections = self.transform.postprocess(detections, images.image_sizes,
                                                    original_image_sizes)
        return self.eager_outputs(losses, detections)


def retinanet_resnet50_fpn(*, weights=None, progress=True, num_classes=None,
                           weights_backbone=None, trainable_backbone_layers=None, **kwargs):
    _check_det_weights("retinanet_resnet50_fpn", weights, weights_backbone, kwargs)
    trainable = _validate_trainable_layers(False, trainable_backbone_layers, 5, 3)
    backbone = resnet50(weights=None, norm_layer=nn.BatchNorm2d)
    backbone = _resnet_fpn_extractor(backbone, trainable, returned_layers=[2, 3, 4],
                                     extra_blocks=LastLevelP6P7(256, 256))
    return RetinaNet(backbone, _num_classes(num_classes), **kwargs)


def retinanet_resnet50_fpn_v2(*, weights=None, progress=True, num_classes=None,
                              weights_backbone=None, trainable_backbone_layers=None, **kwargs):
    _check_det_weights("retinanet_resnet50_fpn_v2", weights, weights_backbone, kwargs)
    trainable = _validate_trainable_layers(False, trainable_backbone_layers, 5, 3)
    backbone = resnet50(weights=None)
    backbone = _resnet_fpn_extractor(backbone, trainable, returned_layers=[2, 3, 4],
                                     extra_blocks=LastLevelP6P7(2048, 256))
    anchor_gen = _default_anchorgen()
    head = RetinaNetHead(backbone.out_channels, anchor_gen.num_anchors_per_location()[0],
                         _num_classes(num_classes), norm_layer=partial(nn.GroupNorm, 32))
    head.regression_head._loss_type = "giou"
    return RetinaNet(backbone, _num_classes(num_classes), anchor_generator=anchor_gen, head=head,
                     **kwargs)
