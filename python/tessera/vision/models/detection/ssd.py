"""tessera.vision.models.detection.ssd — SSD (one-stage over multi-scale feature maps with
default boxes; softmax classification with hard negative mining 3:1, smooth L1 box loss;
per-class top-k then batched_nms), its heads, the VGG feature extractor and ssd300_vgg16."""
from collections import OrderedDict

import tessera as ts
from tessera import nn
from tessera.nn import functional as F

from ...ops import boxes as box_ops
from ..vgg import vgg16
from . import _utils as det_utils
from .anchor_utils import DefaultBoxGenerator
from .backbone_utils import _validate_trainable_layers
from .faster_rcnn import _check_det_weights, _num_classes
from .generalized_rcnn import _check_degenerate, _check_targets
from .transform import GeneralizedRCNNTransform

__all__ = ["SSD", "SSDHead", "SSDClassificationHead", "SSDRegressionHead", "SSDScoringHead",
           "SSDFeatureExtractorVGG", "ssd300_vgg16"]


def _xavier_init(conv):
    for layer in conv.modules():
        if isinstance(layer, nn.Conv2d):
            nn.init.xavier_uniform_(layer.weight)
            if layer.bias is not None:
                nn.init.constant_(layer.bias, 0.0)


class SSDHead(nn.Module):
    def __init__(self, in_channels, num_anchors, num_classes):
        super().__init__()
        self.classification_head = SSDClassificationHead(in_channels, num_anchors, num_classes)
        self.regression_head = SSDRegressionHead(in_channels, num_anchors)

    def forward(self, x):
        return {"bbox_regression": self.regression_head(x),
                "cls_logits": self.classification_head(x)}


class SSDScoringHead(nn.Module):
    """module_list[i] applied to feature map i, each flattened to [N, H*W*A, num_columns] and
    concatenated."""

    def __init__(self, module_list, num_columns):
        super().__init__()
        self.module_list = module_list
        self.num_columns = num_columns

    def forward(self, x):
        out = []
        for module, f in zip(self.module_list, x):
            r = module(f)
            N, _, H, W = r.shape
            out.append(r.reshape(N, -1, self.num_columns, H, W).permute(0, 3, 4, 1, 2)
                       .reshape(N, -1, self.num_columns))
        return ts.cat(out, dim=1)


class SSDClassificationHead(SSDScoringHead):
    def __init__(self, in_channels, num_anchors, num_classes):
        cls_logits = nn.ModuleList()
        for c, a in zip(in_channels, num_anchors):
            cls_logits.append(nn.Conv2d(c, num_classes * a, kernel_size=3, padding=1))
        _xavier_init(cls_logits)
        super().__init__(cls_logits, num_classes)


class SSDRegressionHead(SSDScoringHead):
    def __init__(self, in_channels, num_anchors):
        bbox_reg = nn.ModuleList()
        for c, a in zip(in_channels, num_anchors):
            bbox_reg.append(nn.Conv2d(c, 4 * a, kernel_size=3, padding=1))
        _xavier_init(bbox_reg)
        super().__init__(bbox_reg, 4)


class SSD(nn.Module):
    """forward(images, targets=None): losses {bbox_regression, classification} in training,
    detections per image in eval. Images are resized to the fixed size (w, h)."""

    def __init__(self, backbone, anchor_generator, size, num_classes, image_mean=None,
                 image_std=None, head=None, score_thresh=0.01, nms_thresh=0.45,
                 detections_per_img=200, iou_thresh=0.5, topk_candidates=400,
                 positive_fraction=0.25, **kwargs):
        super().__init__()
        self.backbone = backbone
        self.anchor_generator = anchor_generator
        self.box_coder = det_utils.BoxCoder(weights=(10.0, 10.0, 5.0, 5.0))
        if head is None:
            if hasattr(backbone, "out_channels"):
                out_channels = backbone.out_channels
            else:
                out_channels = det_utils.retrieve_out_channels(backbone, size)
            if len(out_channels) != len(anchor_generator.aspect_ratios):
                raise ValueError(
                    "The length of the output channels from the backbone (%d) do not match the "
                    "length of the anchor generator aspect ratios (%d)"
                    % (len(out_channels), len(anchor_generator.aspect_ratios)))
            head = SSDHead(out_channels, self.anchor_generator.num_anchors_per_location(),
                           num_classes)
        self.head = head
        self.proposal_matcher = det_utils.SSDMatcher(iou_thresh)
        if image_mean is None:
            image_mean = [0.485, 0.456, 0.406]
        if image_std is None:
            image_std = [0.229, 0.224, 0.225]
        self.transform = GeneralizedRCNNTransform(min(size), max(size), image_mean, image_std,
                                                  size_divisible=1, fixed_size=size, **kwargs)
        self.score_thresh = score_thresh
        self.nms_thresh = nms_thresh
        self.detections_per_img = detections_per_img
        self.topk_candidates = topk_candidates
        self.neg_to_pos_ratio = (1.0 - positive_fraction) / positive_fraction

    def eager_outputs(self, losses, detections):
        return losses if self.training else detections

    def compute_loss(self, targets, head_outputs, anchors, matched_idxs):
        bbox_regression = head_outputs["bbox_regression"]
        cls_logits = head_outputs["cls_logits"]
        num_fg = 0
        bbox_loss, cls_targets = [], []
        for t, reg, logits, anc, m in zip(targets, bbox_regression, cls_logits, anchors,
                                          matched_idxs):
            fg = ts.where(m >= 0)[0]
            fg_matched = m[fg]
            num_fg += fg_matched.numel()
            target_reg = self.box_coder.encode_single(t["boxes"][fg_matched], anc[fg, :])
            bbox_loss.append(F.smooth_l1_loss(reg[fg, :], target_reg, reduction="sum"))
            cls_t = ts.zeros((logits.size(0),), dtype=t["labels"].dtype,
                             device=t["labels"].device)
            cls_t[fg] = t["labels"][fg_matched]
            cls_targets.append(cls_t)
        bbox_loss = ts.stack(bbox_loss)
        cls_targets = ts.stack(cls_targets)
        num_classes = cls_logits.size(-1)
        cls_loss = F.cross_entropy(cls_logits.reshape(-1, num_classes), cls_targets.reshape(-1),
                                   reduction="none").reshape(tuple(cls_targets.shape))
        fg_mask = cls_targets > 0
        num_negative = self.neg_to_pos_ratio * fg_mask.sum(1, keepdim=True)
        negative_loss = cls_loss.detach().clone()
        negative_loss[fg_mask] = -float("inf")
        _, idx = negative_loss.sort(1, descending=True)
        background = idx.sort(1)[1] < num_negative
        N = max(1, num_fg)
        return {"bbox_regression": bbox_loss.sum() / N,
                "classification": (cls_loss[fg_mask].sum() + cls_loss[background].sum()) / N}

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
            matched_idxs = []
            for anc, t in zip(anchors, targets):
                if t["boxes"].numel() == 0:
                    matched_idxs.append(ts.full((anc.size(0),), -1, dtype=ts.int64,
                                                device=anc.device))
                    continue
                matched_idxs.append(self.proposal_matcher(box_ops.box_iou(t["boxes"], anc)))
            losses = self.compute_loss(targets, head_outputs, anchors, matched_idxs)
        else:
            detections = self.postprocess_detections(head_outputs, anchors, images.image_sizes)
            detections = self.transform.postprocess(detections, images.image_sizes,
                                                    original_image_sizes)
        return self.eager_outputs(losses, detections)

    def postprocess_detections(self, head_outputs, image_anchors, image_shapes):
        pred_scores = F.softmax(head_outputs["cls_logits"], dim=-1)
        num_classes = pred_scores.size(-1)
        detections = []
        for boxes, scores, anchors, shape in zip(head_outputs["bbox_regression"], pred_scores,
                                                 image_anchors, image_shapes):
            boxes = box_ops.clip_boxes_to_image(self.box_coder.decode_single(boxes, anchors),
                                                shape)
            image_boxes, image_scores, image_labels = [], [], []
            for label in range(1, num_classes):
                score = scores[:, label]
                keep = score > self.score_thresh
                score = score[keep]
                box = boxes[keep]
                k = det_utils._topk_min(score, self.topk_candidates, 0)
                score, idxs = score.topk(k)
                image_boxes.append(box[idxs])
                image_scores.append(score)
                image_labels.append(ts.full((score.numel(),), label, dtype=ts.int64,
                                            device=score.device))
            image_boxes = ts.cat(image_boxes, dim=0)
            image_scores = ts.cat(image_scores, dim=0)
            image_labels = ts.cat(image_labels, dim=0)
            keep = box_ops.batched_nms(image_boxes, image_scores, image_labels, self.nms_thresh)
            keep = keep[: self.detections_per_img]
            detections.append({"boxes": image_boxes[keep], "scores": image_scores[keep],
                               "labels": image_labels[keep]})
        return detections


class SSDFeatureExtractorVGG(nn.Module):
    """VGG16's features up to conv4_3 (L2-normalized, scaled by a learned per-channel weight),
    then conv5 + the dilated fc6/fc7 convs and the extra blocks: 6 (7 when highres) maps."""

    def __init__(self, backbone, highres):
        super().__init__()
        layers = list(backbone)
        pools = [i for i, layer in enumerate(layers) if isinstance(layer, nn.MaxPool2d)]
        if len(pools) != 5:
            raise ValueError("SSDFeatureExtractorVGG: expected VGG features with 5 MaxPool2d, "
                             "got %d" % len(pools))
        maxpool3_pos, maxpool4_pos = pools[2], pools[3]
        layers[maxpool3_pos].ceil_mode = True
        self.scale_weight = nn.Parameter(ts.ones(512) * 20)
        self.features = nn.Sequential(*layers[:maxpool4_pos])
        extra = nn.ModuleList([
            nn.Sequential(nn.Conv2d(1024, 256, kernel_size=1), nn.ReLU(inplace=True),
                          nn.Conv2d(256, 512, kernel_size=3, padding=1, stride=2),
                          nn.ReLU(inplace=True)),
            nn.Sequential(nn.Conv2d(512, 128, kernel_size=1), nn.ReLU(inplace=True),
                          nn.Conv2d(128, 256, kernel_size=3, padding=1, stride=2),
                          nn.ReLU(inplace=True)),
            nn.Sequential(nn.Conv2d(256, 128, kernel_size=1), nn.ReLU(inplace=True),
                          nn.Conv2d(128, 256, kernel_size=3), nn.ReLU(inplace=True)),
            nn.Sequential(nn.Conv2d(256, 128, kernel_size=1), nn.ReLU(inplace=True),
                          nn.Conv2d(128, 256, kernel_size=3), nn.ReLU(inplace=True))])
        if highres:
            extra.append(nn.Sequential(nn.Conv2d(256, 128, kernel_size=1), nn.ReLU(inplace=True),
                                       nn.Conv2d(128, 256, kernel_size=4),
                                       nn.ReLU(inplace=True)))
        _xavier_init(extra)
        fc = nn.Sequential(
            nn.MaxPool2d(kernel_size=3, stride=1, padding=1, ceil_mode=False),
            nn.Conv2d(in_channels=512, out_channels=1024, kernel_size=3, padding=6, dilation=6),
            nn.ReLU(inplace=True), nn.Conv2d(in_channels=1024, out_channels=1024, kernel_size=1),
            nn.ReLU(inplace=True))
        _xavier_init(fc)
        extra.insert(0, nn.Sequential(*layers[maxpool4_pos:-1], fc))
        self.extra = extra

    def forward(self, x):
        x = self.features(x)
        output = [self.scale_weight.reshape(1, -1, 1, 1) * F.normalize(x)]
        for block in self.extra:
            x = block(x)
            output.append(x)
        return OrderedDict([(str(i), v) for i, v in enumerate(output)])


def _vgg_extractor(backbone, highres, trainable_layers):
    features = list(backbone.features)
    stage_indices = [0] + [i for i, b in enumerate(features) if isinstance(b, nn.MaxPool2d)][:-1]
    num_stages = len(stage_indices)
    if not 0 <= trainable_layers <= num_stages:
        raise ValueError("trainable_layers should be in the range [0, %d], got %d"
                         % (num_stages, trainable_layers))
    freeze_before = (len(features) if trainable_layers == 0
                     else stage_indices[num_stages - trainable_layers])
    for b in features[:freeze_before]:
        for p in b.parameters():
            p.requires_grad_(False)
    return SSDFeatureExtractorVGG(features, highres)


def ssd300_vgg16(*, weights=None, progress=True, num_classes=None, weights_backbone=None,
                 trainable_backbone_layers=None, **kwargs):
    _check_det_weights("ssd300_vgg16", weights, weights_backbone, kwargs)
    kwargs.pop("size", None)  # torchvision warns and ignores it: the size is fixed at 300
    trainable = _validate_trainable_layers(False, trainable_backbone_layers, 5, 4)
    backbone = _vgg_extractor(vgg16(weights=None), False, trainable)
    anchor_generator = DefaultBoxGenerator(
        [[2], [2, 3], [2, 3], [2, 3], [2], [2]],
        scales=[0.07, 0.15, 0.33, 0.51, 0.69, 0.87, 1.05], steps=[8, 16, 32, 64, 100, 300])
    defaults = {"image_mean": [0.48235, 0.45882, 0.40784],
                "image_std": [1.0 / 255.0, 1.0 / 255.0, 1.0 / 255.0]}
    return SSD(backbone, anchor_generator, (300, 300), _num_classes(num_classes),
               **{**defaults, **kwargs})
