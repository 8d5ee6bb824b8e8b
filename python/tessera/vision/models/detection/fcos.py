"""tessera.vision.models.detection.fcos — FCOS (anchor-free: per location class logits, box
distances (left, top, right, bottom) and centerness; centre sampling with size ranges per level
in training; sigmoid focal, GIoU and centerness BCE losses) and the builder fcos_resnet50_fpn."""
import math
from collections import OrderedDict
from functools import partial

import tessera as ts
from tessera import nn

from ...ops.feature_pyramid_network import LastLevelP6P7
from ...ops.focal_loss import sigmoid_focal_loss
from ...ops.giou_loss import generalized_box_iou_loss
from ..resnet import resnet50
from . import _utils as det_utils
from .anchor_utils import AnchorGenerator
from .backbone_utils import _resnet_fpn_extractor, _validate_trainable_layers
from .faster_rcnn import _check_det_weights, _num_classes
from .generalized_rcnn import _check_degenerate, _check_targets
from .retinanet import _detect, _flatten_level
from .transform import GeneralizedRCNNTransform

__all__ = ["FCOS", "FCOSHead", "FCOSClassificationHead", "FCOSRegressionHead",
           "fcos_resnet50_fpn"]


def _tower(in_channels, num_convs, norm_layer):
    conv = []
    for _ in range(num_convs):
        conv.append(nn.Conv2d(in_channels, in_channels, kernel_size=3, stride=1, padding=1))
        conv.append(norm_layer(in_channels))
        conv.append(nn.ReLU())
    conv = nn.Sequential(*conv)
    for layer in conv.children():
        if isinstance(layer, nn.Conv2d):
            nn.init.normal_(layer.weight, std=0.01)
            nn.init.constant_(layer.bias, 0)
    return conv


class FCOSHead(nn.Module):
    def __init__(self, in_channels, num_anchors, num_classes, num_convs=4):
        super().__init__()
        self.box_coder = det_utils.BoxLinearCoder(normalize_by_size=True)
        self.classification_head = FCOSClassificationHead(in_channels, num_anchors, num_classes,
                                                          num_convs)
        self.regression_head = FCOSRegressionHead(in_channels, num_anchors, num_convs)

    def compute_loss(self, targets, head_outputs, anchors, matched_idxs):
        cls_logits = head_outputs["cls_logits"]
        bbox_regression = head_outputs["bbox_regression"]
        bbox_ctrness = head_outputs["bbox_ctrness"]
        gt_classes, gt_boxes = [], []
        for t, m in zip(targets, matched_idxs):
            if len(t["labels"]) == 0:
                cls = t["labels"].new_zeros((len(m),))
                box = t["boxes"].new_zeros((len(m), 4))
            else:
                cls = t["labels"][m.clamp(min=0)]
                box = t["boxes"][m.clamp(min=0)]
            cls[m < 0] = -1
            gt_classes.append(cls)
            gt_boxes.append(box)
        gt_boxes = ts.stack(gt_boxes)
        gt_classes = ts.stack(gt_classes)
        anchors = ts.stack(anchors)
        fg = gt_classes >= 0
        num_fg = int(fg.sum().item())
        cls_targets = ts.zeros_like(cls_logits)
        fg_img, fg_anc = ts.where(fg)
        cls_targets[fg_img, fg_anc, gt_classes[fg_img, fg_anc]] = 1.0
        loss_cls = sigmoid_focal_loss(cls_logits, cls_targets, reduction="sum")
        pred_boxes = self.box_coder.decode(bbox_regression, anchors)
        loss_reg = generalized_box_iou_loss(pred_boxes[fg], gt_boxes[fg], reduction="sum")
        reg_targets = self.box_coder.encode(anchors, gt_boxes)
        if len(reg_targets) == 0:
            ctr_targets = reg_targets.new_zeros(tuple(reg_targets.shape[:-1]))
        else:
            lr = ts.stack([reg_targets[..., 0], reg_targets[..., 2]], dim=-1)
            tb = ts.stack([reg_targets[..., 1], reg_targets[..., 3]], dim=-1)
            ctr_targets = ts.sqrt(lr.min(dim=-1)[0] / lr.max(dim=-1)[0]
                                  * (tb.min(dim=-1)[0] / tb.max(dim=-1)[0]))
        pred_ctr = bbox_ctrness.squeeze(dim=2)
        loss_ctr = nn.functional.binary_cross_entropy_with_logits(pred_ctr[fg], ctr_targets[fg],
                                                                  reduction="sum")
        d = max(1, num_fg)
        return {"classification": loss_cls / d, "bbox_regression": loss_reg / d,
                "bbox_ctrness": loss_ctr / d}

    def forward(self, x):
        bbox_regression, bbox_ctrness = self.regression_head(x)
        return {"cls_logits": self.classification_head(x), "bbox_regression": bbox_regression,
                "bbox_ctrness": bbox_ctrness}


class FCOSClassificationHead(nn.Module):
    def __init__(self, in_channels, num_anchors, num_classes, num_convs=4, prior_probability=0.01,
                 norm_layer=None):
        super().__init__()
        self.num_classes = num_classes
        self.num_anchors = num_anchors
        self.conv = _tower(in_channels, num_convs, norm_layer or partial(nn.GroupNorm, 32))
        self.cls_logits = nn.Conv2d(in_channels, num_anchors * num_classes, kernel_size=3,
                                    stride=1, padding=1)
        nn.init.normal_(self.cls_logits.weight, std=0.01)
        nn.init.constant_(self.cls_logits.bias,
                          -math.log((1 - prior_probability) / prior_probability))

    def forward(self, x):
        return ts.cat([_flatten_level(self.cls_logits(self.conv(f)), f.shape[0],
                                      self.num_classes) for f in x], dim=1)


class FCOSRegressionHead(nn.Module):
    def __init__(self, in_channels, num_anchors, num_convs=4, norm_layer=None):
        super().__init__()
        self.conv = _tower(in_channels, num_convs, norm_layer or partial(nn.GroupNorm, 32))
        self.bbox_reg = nn.Conv2d(in_channels, num_anchors * 4, kernel_size=3, stride=1,
                                  padding=1)
        self.bbox_ctrness = nn.Conv2d(in_channels, num_anchors, kernel_size=3, stride=1,
                                      padding=1)
        for layer in [self.bbox_reg, self.bbox_ctrness]:
            nn.init.normal_(layer.weight, std=0.01)
            nn.init.zeros_(layer.bias)

    def forward(self, x):
        regs, ctrs = [], []
        for f in x:
            t = self.conv(f)
            regs.append(_flatten_level(nn.functional.relu(self.bbox_reg(t)), f.shape[0], 4))
            ctrs.append(_flatten_level(self.bbox_ctrness(t), f.shape[0], 1))
        return ts.cat(regs, dim=1), ts.cat(ctrs, dim=1)


class FCOS(nn.Module):
    def __init__(self, backbone, num_classes, min_size=800, max_size=1333, image_mean=None,
                 image_std=None, anchor_generator=None, head=None, center_sampling_radius=1.5,
                 score_thresh=0.2, nms_thresh=0.6, detections_per_img=100, topk_candidates=1000,
                 **kwargs):
        super().__init__()
        if not hasattr(backbone, "out_channels"):
            raise ValueError("backbone should contain an attribute out_channels specifying the "
                             "number of output channels (assumed to be the same for all the "
                             "levels)")
        self.backbone = backbone
        if not isinstance(anchor_generator, (AnchorGenerator, type(None))):
            raise TypeError("anchor_generator should be of type AnchorGenerator or None, got %s"
                            % type(anchor_generator))
        if anchor_generator is None:
            sizes = ((8,), (16,), (32,), (64,), (128,))
            anchor_generator = AnchorGenerator(sizes, ((1.0,),) * len(sizes))
        self.anchor_generator = anchor_generator
        if self.anchor_generator.num_anchors_per_location()[0] != 1:
            raise ValueError("anchor_generator.num_anchors_per_location()[0] should be 1 instead "
                             "of %d" % anchor_generator.num_anchors_per_location()[0])
        if head is None:
            head = FCOSHead(backbone.out_channels, anchor_generator.num_anchors_per_location()[0],
                            num_classes)
        self.head = head
        self.box_coder = det_utils.BoxLinearCoder(normalize_by_size=True)
        if image_mean is None:
            image_mean = [0.485, 0.456, 0.406]
        if image_std is None:
            image_std = [0.229, 0.224, 0.225]
        self.transform = GeneralizedRCNNTransform(min_size, max_size, image_mean, image_std,
                                                  **kwargs)
        self.center_sampling_radius = center_sampling_radius
        self.score_thresh = score_thresh
        self.nms_thresh = nms_thresh
        self.detections_per_img = detections_per_img
        self.topk_candidates = topk_candidates

    def eager_outputs(self, losses, detections):
        return losses if self.training else detections

    def compute_loss(self, targets, head_outputs, anchors, num_anchors_per_level):
        matched_idxs = []
        for anc, t in zip(anchors, targets):
            if t["boxes"].numel() == 0:
                matched_idxs.append(ts.full((anc.size(0),), -1, dtype=ts.int64,
                                            device=anc.device))
                continue
            gt = t["boxes"]
            gt_centers = (gt[:, :2] + gt[:, 2:]) / 2
            anc_centers = (anc[:, :2] + anc[:, 2:]) / 2
            anc_sizes = anc[:, 2] - anc[:, 0]
            match = ((anc_centers[:, None, :] - gt_centers[None, :, :]).abs().max(dim=2).values
                     < self.center_sampling_radius * anc_sizes[:, None])
            x, y = anc_centers.unsqueeze(dim=2).unbind(dim=1)
            x0, y0, x1, y1 = gt.unsqueeze(dim=0).unbind(dim=2)
            dist = ts.stack([x - x0, y - y0, x1 - x, y1 - y], dim=2)
            match = match & (dist.min(dim=2).values > 0)
            n0, nl = num_anchors_per_level[0], num_anchors_per_level[-1]
            lower = ts.cat([ts.zeros_like(anc_sizes[:n0]), anc_sizes[n0:] * 4])
            upper = ts.cat([anc_sizes[:-nl] * 8,
                            ts.full_like(anc_sizes[-nl:], float("inf"))])
            dist = dist.max(dim=2).values
            match = match & (dist > lower[:, None]) & (dist < upper[:, None])
            gt_areas = (gt[:, 2] - gt[:, 0]) * (gt[:, 3] - gt[:, 1])
            score = match.to(ts.float32) * (1e8 - gt_areas[None, :])
            min_values, matched = score.max(dim=1)
            matched[min_values < 1e-5] = -1
            matched_idxs.append(matched)
        return self.head.compute_loss(targets, head_outputs, anchors, matched_idxs)

    def postprocess_detections(self, head_outputs, anchors, image_shapes):
        return _detect(self, [head_outputs["cls_logits"], head_outputs["bbox_regression"],
                              head_outputs["bbox_ctrness"]], anchors, image_shapes,
                       lambda logits, ctr: ts.sqrt(ts.sigmoid(logits) * ts.sigmoid(ctr)),
                       self.box_coder.decode)

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
        per_level = [x.size(2) * x.size(3) for x in features]
        losses, detections = {}, []
        if self.training:
            losses = self.compute_loss(targets, head_outputs, anchors, per_level)
        else:
            split = {k: list(v.split(per_level, dim=1)) for k, v in head_outputs.items()}
            split_anchors = [list(a.split(per_level)) for a in anchors]
            detections = self.postprocess_detections(split, split_anchors, images.image_sizes)
            detections = self.transform.postprocess(detections, images.image_sizes,
                                                    original_image_sizes)
        return self.eager_outputs(losses, detections)


def fcos_resnet50_fpn(*, weights=None, progress=True, num_classes=None, weights_backbone=None,
                      trainable_backbone_layers=None, **kwargs):
    _check_det_weights("fcos_resnet50_fpn", weights, weights_backbone, kwargs)
    trainable = _validate_trainable_layers(False, trainable_backbone_layers, 5, 3)
    backbone = resnet50(weights=None, norm_layer=nn.BatchNorm2d)
    backbone = _resnet_fpn_extractor(backbone, trainable, returned_layers=[2, 3, 4],
                                     extra_blocks=LastLevelP6P7(256, 256))
    return FCOS(backbone, _num_classes(num_classes), **kwargs)
