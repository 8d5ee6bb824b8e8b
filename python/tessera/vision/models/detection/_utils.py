"""tessera.vision.models.detection._utils — torchvision's det_utils: BoxCoder (the R-CNN box
parametrization), BoxLinearCoder (FCOS), Matcher / SSDMatcher (ground truth to prediction by
IoU), BalancedPositiveNegativeSampler, overwrite_eps, retrieve_out_channels and the box-loss
switch of RetinaNet / FCOS. Each is a composition of tessera tensor ops."""
import math
from collections import OrderedDict

import tessera as ts
from tessera.nn import functional as F

from ...ops.misc import FrozenBatchNorm2d

__all__ = ["BalancedPositiveNegativeSampler", "BoxCoder", "BoxLinearCoder", "Matcher",
           "SSDMatcher", "encode_boxes", "overwrite_eps", "retrieve_out_channels"]


class BalancedPositiveNegativeSampler:
    """Draws, per image, at most batch_size_per_image * positive_fraction positives (matched
    label >= 1) and fills the batch with negatives (label 0), each at random (ts.randperm).
    Returns two lists of uint8 masks."""

    def __init__(self, batch_size_per_image, positive_fraction):
        self.batch_size_per_image = batch_size_per_image
        self.positive_fraction = positive_fraction

    def __call__(self, matched_idxs):
        pos_idx, neg_idx = [], []
        for m in matched_idxs:
            positive = ts.where(m >= 1)[0]
            negative = ts.where(m == 0)[0]
            num_pos = min(positive.numel(), int(self.batch_size_per_image * self.positive_fraction))
            num_neg = min(negative.numel(), self.batch_size_per_image - num_pos)
            pos = positive[ts.randperm(positive.numel(), device=positive.device)[:num_pos]]
            neg = negative[ts.randperm(negative.numel(), device=negative.device)[:num_neg]]
            pos_mask = ts.zeros_like(m, dtype=ts.uint8)
            neg_mask = ts.zeros_like(m, dtype=ts.uint8)
            pos_mask[pos] = 1
            neg_mask[neg] = 1
            pos_idx.append(pos_mask)
            neg_idx.append(neg_mask)
        return pos_idx, neg_idx


def _centers(boxes):
    w = boxes[:, 2] - boxes[:, 0]
    h = boxes[:, 3] - boxes[:, 1]
    return boxes[:, 0] + 0.5 * w, boxes[:, 1] + 0.5 * h, w, h


def encode_boxes(reference_boxes, proposals, weights):
    """Regression targets [N, 4] (dx, dy, dw, dh) * weights that move proposals onto
    reference_boxes: dx = wx * (gx - px) / pw, dw = ww * log(gw / pw)."""
    wx, wy, ww, wh = (float(w) for w in weights)
    px, py, pw, ph = _centers(proposals)
    gx, gy, gw, gh = _centers(reference_boxes)
    return ts.stack((wx * (gx - px) / pw, wy * (gy - py) / ph, ww * ts.log(gw / pw),
                     wh * ts.log(gh / ph)), dim=1)


class BoxCoder:
    """Encodes boxes as (dx, dy, dw, dh) relative to reference boxes and back; dw, dh clamped
    at bbox_xform_clip = log(1000 / 16) on decode."""

    def __init__(self, weights, bbox_xform_clip=math.log(1000.0 / 16)):
        self.weights = weights
        self.bbox_xform_clip = bbox_xform_clip

    def encode(self, reference_boxes, proposals):
        per_image = [len(b) for b in reference_boxes]
        targets = self.encode_single(ts.cat(reference_boxes, dim=0), ts.cat(proposals, dim=0))
        return targets.split(per_image, 0)

    def encode_single(self, reference_boxes, proposals):
        return encode_boxes(reference_boxes, proposals, self.weights)

    def decode(self, rel_codes, boxes):
        per_image = [b.size(0) for b in boxes]
        concat = ts.cat(boxes, dim=0)
        total = sum(per_image)
        if total > 0:
            rel_codes = rel_codes.reshape(total, -1)
        pred = self.decode_single(rel_codes, concat)
        if total > 0:
            pred = pred.reshape(total, -1, 4)
        return pred

    def decode_single(self, rel_codes, boxes):
        """rel_codes [N, 4k] applied to boxes [N, 4] -> [N, 4k] boxes (x1, y1, x2, y2)."""
        boxes = boxes.to(rel_codes.dtype)
        ctr_x, ctr_y, widths, heights = _centers(boxes)
        wx, wy, ww, wh = self.weights
        dx = rel_codes[:, 0::4] / wx
        dy = rel_codes[:, 1::4] / wy
        dw = ts.clamp(rel_codes[:, 2::4] / ww, max=self.bbox_xform_clip)
        dh = ts.clamp(rel_codes[:, 3::4] / wh, max=self.bbox_xform_clip)
        pcx = dx * widths[:, None] + ctr_x[:, None]
        pcy = dy * heights[:, None] + ctr_y[:, None]
        half_w = 0.5 * (ts.exp(dw) * widths[:, None])
        half_h = 0.5 * (ts.exp(dh) * heights[:, None])
        return ts.stack((pcx - half_w, pcy - half_h, pcx + half_w, pcy + half_h),
                        dim=2).flatten(1)


class BoxLinearCoder:
    """FCOS's coder: distances (left, top, right, bottom) from the reference box centre, divided
    by the reference box size when normalize_by_size."""

    def __init__(self, normalize_by_size=True):
        self.normalize_by_size = normalize_by_size

    def _size(self, boxes):
        w = boxes[..., 2] - boxes[..., 0]
        h = boxes[..., 3] - boxes[..., 1]
        return ts.stack((w, h, w, h), dim=-1)

    def encode(self, reference_boxes, proposals):
        cx = 0.5 * (reference_boxes[..., 0] + reference_boxes[..., 2])
        cy = 0.5 * (reference_boxes[..., 1] + reference_boxes[..., 3])
        t = ts.stack((cx - proposals[..., 0], cy - proposals[..., 1], proposals[..., 2] - cx,
                      proposals[..., 3] - cy), dim=-1)
        return t / self._size(reference_boxes) if self.normalize_by_size else t

    def decode(self, rel_codes, boxes):
        boxes = boxes.to(dtype=rel_codes.dtype)
        cx = 0.5 * (boxes[..., 0] + boxes[..., 2])
        cy = 0.5 * (boxes[..., 1] + boxes[..., 3])
        if self.normalize_by_size:
            rel_codes = rel_codes * self._size(boxes)
        return ts.stack((cx - rel_codes[..., 0], cy - rel_codes[..., 1], cx + rel_codes[..., 2],
                         cy + rel_codes[..., 3]), dim=-1)


class Matcher:
    """Assigns each prediction (column of the [gt, pred] quality matrix) its best ground truth:
    the gt index, BELOW_LOW_THRESHOLD (-1) or BETWEEN_THRESHOLDS (-2). allow_low_quality_matches
    keeps, for each gt, the predictions of its highest quality (ties included) matched."""

    BELOW_LOW_THRESHOLD = -1
    BETWEEN_THRESHOLDS = -2

    def __init__(self, high_threshold, low_threshold, allow_low_quality_matches=False):
        if low_threshold > high_threshold:
            raise ValueError("Matcher: low_threshold %r > high_threshold %r"
                             % (low_threshold, high_threshold))
        self.high_threshold = high_threshold
        self.low_threshold = low_threshold
        self.allow_low_quality_matches = allow_low_quality_matches

    def __call__(self, match_quality_matrix):
        if match_quality_matrix.numel() == 0:
            if match_quality_matrix.shape[0] == 0:
                raise ValueError("No ground-truth boxes available for one of the images during "
                                 "training")
            raise ValueError("No proposal boxes available for one of the images during training")
        matched_vals, matches = match_quality_matrix.max(dim=0)
        all_matches = matches.clone() if self.allow_low_quality_matches else None
        below = matched_vals < self.low_threshold
        between = (matched_vals >= self.low_threshold) & (matched_vals < self.high_threshold)
        matches[below] = self.BELOW_LOW_THRESHOLD
        matches[between] = self.BETWEEN_THRESHOLDS
        if self.allow_low_quality_matches:
            self.set_low_quality_matches_(matches, all_matches, match_quality_matrix)
        return matches

    def set_low_quality_matches_(self, matches, all_matches, match_quality_matrix):
        highest, _ = match_quality_matrix.max(dim=1)
        pred_inds = ts.where(match_quality_matrix == highest[:, None])[1]
        matches[pred_inds] = all_matches[pred_inds]


class SSDMatcher(Matcher):
    """Matcher at one threshold that also gives each gt its best prediction."""

    def __init__(self, threshold):
        super().__init__(threshold, threshold, allow_low_quality_matches=False)

    def __call__(self, match_quality_matrix):
        matches = super().__call__(match_quality_matrix)
        _, best_pred = match_quality_matrix.max(dim=1)
        matches[best_pred] = ts.arange(best_pred.size(0), dtype=ts.int64,
                                       device=best_pred.device)
        return matches


def overwrite_eps(model, eps):
    """Sets eps of every FrozenBatchNorm2d in model (the legacy checkpoints used 0)."""
    for module in model.modules():
        if isinstance(module, FrozenBatchNorm2d):
            module.eps = eps


def retrieve_out_channels(model, size):
    """Channels of each feature map model returns for a zero image of size (w, h)."""
    in_training = model.training
    model.eval()
    with ts.no_grad():
        device = next(model.parameters()).device
        features = model(ts.zeros((1, 3, size[1], size[0]), device=device))
        if isinstance(features, ts.Tensor):
            features = OrderedDict([("0", features)])
        out_channels = [x.size(1) for x in features.values()]
    if in_training:
        model.train()
    return out_channels


def _topk_min(input, orig_kval, axis):
    return min(orig_kval, input.size(axis))


def _box_loss(type, box_coder, anchors_per_image, matched_gt_boxes_per_image,
              bbox_regression_per_image, cnf=None):
    if type == "l1":
        target = box_coder.encode_single(matched_gt_boxes_per_image, anchors_per_image)
        return F.l1_loss(bbox_regression_per_image, target, reduction="sum")
    if type == "smooth_l1":
        target = box_coder.encode_single(matched_gt_boxes_per_image, anchors_per_image)
        beta = cnf["beta"] if cnf is not None and "beta" in cnf else 1.0
        return F.smooth_l1_loss(bbox_regression_per_image, target, reduction="sum", beta=beta)
    if type in ("giou", "diou", "ciou"):
        from ... import ops
        boxes = box_coder.decode_single(bbox_regression_per_image, anchors_per_image)
        eps = cnf["eps"] if cnf is not None and "eps" in cnf else 1e-7
        fn = {"giou": "generalized_box_iou_loss", "diou": "distance_box_iou_loss",
              "ciou": "complete_box_iou_loss"}[type]
        if not hasattr(ops, fn):
            raise NotImplementedError("detection box loss %r: tessera.vision.ops.%s is missing"
                                      % (type, fn))
        return getattr(ops, fn)(boxes, matched_gt_boxes_per_image, reduction="sum", eps=eps)
    raise ValueError("Unsupported loss: %s" % type)
