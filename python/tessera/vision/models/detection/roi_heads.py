"""tessera.vision.models.detection.roi_heads — the second stage of the R-CNNs: RoIHeads (sample
proposals against the ground truth, pool them, classify and refine; postprocess with per-class
batched_nms) with the optional mask branch (Mask R-CNN) and keypoint branch (Keypoint R-CNN),
their losses and inference (paste_masks_in_image, heatmaps_to_keypoints)."""
import tessera as ts
from tessera import nn
from tessera.nn import functional as F

from ...ops import boxes as box_ops
from ...ops.roi import roi_align
from . import _utils as det_utils

__all__ = ["RoIHeads", "fastrcnn_loss", "maskrcnn_loss", "maskrcnn_inference",
           "keypointrcnn_loss", "keypointrcnn_inference", "paste_masks_in_image",
           "heatmaps_to_keypoints", "keypoints_to_heatmap"]


def fastrcnn_loss(class_logits, box_regression, labels, regression_targets):
    """(cross entropy over the sampled proposals, smooth L1 (beta 1/9) of the true class's
    deltas over the positives / number of samples)."""
    labels = ts.cat(labels, dim=0)
    regression_targets = ts.cat(regression_targets, dim=0)
    classification_loss = F.cross_entropy(class_logits, labels)
    pos = ts.where(labels > 0)[0]
    labels_pos = labels[pos]
    N = class_logits.shape[0]
    box_regression = box_regression.reshape(N, box_regression.size(-1) // 4, 4)
    box_loss = F.smooth_l1_loss(box_regression[pos, labels_pos], regression_targets[pos],
                                beta=1 / 9, reduction="sum")
    return classification_loss, box_loss / labels.numel()


def maskrcnn_inference(x, labels):
    """Mask probabilities of each detection's class: list of [L_i, 1, M, M]."""
    mask_prob = x.sigmoid()
    per_image = [lab.shape[0] for lab in labels]
    labels = ts.cat(labels)
    index = ts.arange(x.shape[0], device=labels.device)
    return mask_prob[index, labels][:, None].split(per_image, dim=0)


def project_masks_on_boxes(gt_masks, boxes, matched_idxs, M):
    """The gt masks cropped to boxes and resized to M x M by roi_align."""
    rois = ts.cat([matched_idxs.to(boxes.dtype)[:, None], boxes], dim=1)
    return roi_align(gt_masks[:, None].to(rois.dtype), rois, (M, M), 1.0)[:, 0]


def maskrcnn_loss(mask_logits, proposals, gt_masks, gt_labels, mask_matched_idxs):
    M = mask_logits.shape[-1]
    labels = ts.cat([g[i] for g, i in zip(gt_labels, mask_matched_idxs)], dim=0)
    targets = ts.cat([project_masks_on_boxes(m, p, i, M)
                      for m, p, i in zip(gt_masks, proposals, mask_matched_idxs)], dim=0)
    if targets.numel() == 0:
        return mask_logits.sum() * 0
    picked = mask_logits[ts.arange(labels.shape[0], device=labels.device), labels]
    return F.binary_cross_entropy_with_logits(picked, targets)


def keypoints_to_heatmap(keypoints, rois, heatmap_size):
    """(flat heatmap index y * S + x of each keypoint in its roi, valid mask)."""
    offset_x = rois[:, 0][:, None]
    offset_y = rois[:, 1][:, None]
    scale_x = (heatmap_size / (rois[:, 2] - rois[:, 0]))[:, None]
    scale_y = (heatmap_size / (rois[:, 3] - rois[:, 1]))[:, None]
    x = keypoints[..., 0]
    y = keypoints[..., 1]
    x_boundary = x == rois[:, 2][:, None]
    y_boundary = y == rois[:, 3][:, None]
    x = ((x - offset_x) * scale_x).floor().long()
    y = ((y - offset_y) * scale_y).floor().long()
    x[x_boundary] = heatmap_size - 1
    y[y_boundary] = heatmap_size - 1
    valid_loc = (x >= 0) & (y >= 0) & (x < heatmap_size) & (y < heatmap_size)
    valid = (valid_loc & (keypoints[..., 2] > 0)).long()
    return (y * heatmap_size + x) * valid, valid


def heatmaps_to_keypoints(maps, rois):
    """Each heatmap resized (bicubic) to its roi's size, its argmax as the keypoint: returns
    ([R, K, 3] (x, y, 1), [R, K] scores)."""
    offset_x = rois[:, 0]
    offset_y = rois[:, 1]
    widths = (rois[:, 2] - rois[:, 0]).clamp(min=1)
    heights = (rois[:, 3] - rois[:, 1]).clamp(min=1)
    widths_ceil = widths.ceil()
    heights_ceil = heights.ceil()
    K = maps.shape[1]
    xy_preds, end_scores = [], []
    for i in range(len(rois)):
        rw = int(widths_ceil[i].item())
        rh = int(heights_ceil[i].item())
        roi_map = F.interpolate(maps[i][:, None], size=(rh, rw), mode="bicubic",
                                align_corners=False)[:, 0]
        w = roi_map.shape[2]
        pos = roi_map.reshape(K, -1).argmax(dim=1)
        x_int = pos % w
        y_int = ts.div(pos - x_int, w, rounding_mode="floor")
        x = (x_int.float() + 0.5) * (widths[i] / rw)
        y = (y_int.float() + 0.5) * (heights[i] / rh)
        xy_preds.append(ts.stack([x + offset_x[i], y + offset_y[i], ts.ones_like(x)], dim=1))
        end_scores.append(roi_map[ts.arange(K, device=roi_map.device), y_int, x_int])
    if not xy_preds:
        return (ts.zeros((0, K, 3), dtype=ts.float32, device=maps.device),
                ts.zeros((0, K), dtype=ts.float32, device=maps.device))
    return ts.stack(xy_preds).to(ts.float32), ts.stack(end_scores).to(ts.float32)


def keypointrcnn_loss(keypoint_logits, proposals, gt_keypoints, keypoint_matched_idxs):
    N, K, H, W = keypoint_logits.shape
    if H != W:
        raise ValueError("keypoint_logits height and width (last two elements of shape) should "
                         "be equal. Instead got H = %d and W = %d" % (H, W))
    heatmaps, valid = [], []
    for props, gt_kp, midx in zip(proposals, gt_keypoints, keypoint_matched_idxs):
        h, v = keypoints_to_heatmap(gt_kp[midx], props, H)
        heatmaps.append(h.reshape(-1))
        valid.append(v.reshape(-1))
    targets = ts.cat(heatmaps, dim=0)
    valid = ts.where(ts.cat(valid, dim=0) > 0)[0]
    if targets.numel() == 0 or len(valid) == 0:
        return keypoint_logits.sum() * 0
    logits = keypoint_logits.reshape(N * K, H * W)
    return F.cross_entropy(logits[valid], targets[valid])


def keypointrcnn_inference(x, boxes):
    kp_probs, kp_scores = [], []
    per_image = [b.size(0) for b in boxes]
    for xx, bb in zip(x.split(per_image, dim=0), boxes):
        p, s = heatmaps_to_keypoints(xx, bb)
        kp_probs.append(p)
        kp_scores.append(s)
    return kp_probs, kp_scores


def expand_boxes(boxes, scale):
    w_half = (boxes[:, 2] - boxes[:, 0]) * 0.5 * scale
    h_half = (boxes[:, 3] - boxes[:, 1]) * 0.5 * scale
    x_c = (boxes[:, 2] + boxes[:, 0]) * 0.5
    y_c = (boxes[:, 3] + boxes[:, 1]) * 0.5
    return ts.stack((x_c - w_half, y_c - h_half, x_c + w_half, y_c + h_half), dim=1)


def expand_masks(mask, padding):
    M = mask.shape[-1]
    return F.pad(mask, (padding,) * 4), float(M + 2 * padding) / M


def paste_mask_in_image(mask, box, im_h, im_w):
    """mask [M, M] resized (bilinear) to the integer box and placed in an im_h x im_w image."""
    b = [int(v) for v in box.tolist()]
    w = max(b[2] - b[0] + 1, 1)
    h = max(b[3] - b[1] + 1, 1)
    mask = F.interpolate(mask.expand((1, 1, -1, -1)), size=(h, w), mode="bilinear",
                         align_corners=False)[0][0]
    x_0, x_1 = max(b[0], 0), min(b[2] + 1, im_w)
    y_0, y_1 = max(b[1], 0), min(b[3] + 1, im_h)
    if x_1 <= x_0 or y_1 <= y_0:
        return ts.zeros((im_h, im_w), dtype=mask.dtype, device=mask.device)
    crop = mask[y_0 - b[1]:y_1 - b[1], x_0 - b[0]:x_1 - b[0]]
    return F.pad(crop, (x_0, im_w - x_1, y_0, im_h - y_1))


def paste_masks_in_image(masks, boxes, img_shape, padding=1):
    """masks [R, 1, M, M] pasted into [R, 1, H, W] at boxes."""
    masks, scale = expand_masks(masks, padding=padding)
    boxes = expand_boxes(boxes, scale).to(dtype=ts.int64)
    im_h, im_w = int(img_shape[0]), int(img_shape[1])
    res = [paste_mask_in_image(m[0], b, im_h, im_w) for m, b in zip(masks, boxes)]
    if res:
        return ts.stack(res, dim=0)[:, None]
    return masks.new_empty((0, 1, im_h, im_w))


class RoIHeads(nn.Module):
    """forward(features, proposals, image_shapes, targets=None) -> (detections, losses)."""

    def __init__(self, box_roi_pool, box_head, box_predictor, fg_iou_thresh, bg_iou_thresh,
                 batch_size_per_image, positive_fraction, bbox_reg_weights, score_thresh,
                 nms_thresh, detections_per_img, mask_roi_pool=None, mask_head=None,
                 mask_predictor=None, keypoint_roi_pool=None, keypoint_head=None,
                 keypoint_predictor=None):
        super().__init__()
        self.box_similarity = box_ops.box_iou
        self.proposal_matcher = det_utils.Matcher(fg_iou_thresh, bg_iou_thresh,
                                                  allow_low_quality_matches=False)
        self.fg_bg_sampler = det_utils.BalancedPositiveNegativeSampler(batch_size_per_image,
                                                                       positive_fraction)
        if bbox_reg_weights is None:
            bbox_reg_weights = (10.0, 10.0, 5.0, 5.0)
        self.box_coder = det_utils.BoxCoder(bbox_reg_weights)
        self.box_roi_pool = box_roi_pool
        self.box_head = box_head
        self.box_predictor = box_predictor
        self.score_thresh = score_thresh
        self.nms_thresh = nms_thresh
        self.detections_per_img = detections_per_img
        self.mask_roi_pool = mask_roi_pool
        self.mask_head = mask_head
        self.mask_predictor = mask_predictor
        self.keypoint_roi_pool = keypoint_roi_pool
        self.keypoint_head = keypoint_head
        self.keypoint_predictor = keypoint_predictor

    def has_mask(self):
        return (self.mask_roi_pool is not None and self.mask_head is not None
                and self.mask_predictor is not None)

    def has_keypoint(self):
        return (self.keypoint_roi_pool is not None and self.keypoint_head is not None
                and self.keypoint_predictor is not None)

    def assign_targets_to_proposals(self, proposals, gt_boxes, gt_labels):
        matched_idxs, labels = [], []
        for props, gtb, gtl in zip(proposals, gt_boxes, gt_labels):
            if gtb.numel() == 0:
                clamped = ts.zeros((props.shape[0],), dtype=ts.int64, device=props.device)
                lab = ts.zeros((props.shape[0],), dtype=ts.int64, device=props.device)
            else:
                m = self.proposal_matcher(box_ops.box_iou(gtb, props))
                clamped = m.clamp(min=0)
                lab = gtl[clamped].to(dtype=ts.int64)
                lab[m == self.proposal_matcher.BELOW_LOW_THRESHOLD] = 0
                lab[m == self.proposal_matcher.BETWEEN_THRESHOLDS] = -1
            matched_idxs.append(clamped)
            labels.append(lab)
        return matched_idxs, labels

    def subsample(self, labels):
        pos, neg = self.fg_bg_sampler(labels)
        return [ts.where((p > 0) | (n > 0))[0] for p, n in zip(pos, neg)]

    def add_gt_proposals(self, proposals, gt_boxes):
        return [ts.cat((p, g)) for p, g in zip(proposals, gt_boxes)]

    def check_targets(self, targets):
        if targets is None:
            raise ValueError("targets should not be None")
        for t in targets:
            if "boxes" not in t or "labels" not in t:
                raise ValueError("every target should have boxes and labels")
            if self.has_mask() and "masks" not in t:
                raise ValueError("Mask R-CNN: every target should have masks")

    def select_training_samples(self, proposals, targets):
        self.check_targets(targets)
        dtype, device = proposals[0].dtype, proposals[0].device
        gt_boxes = [t["boxes"].to(dtype) for t in targets]
        gt_labels = [t["labels"] for t in targets]
        proposals = self.add_gt_proposals(proposals, gt_boxes)
        matched_idxs, labels = self.assign_targets_to_proposals(proposals, gt_boxes, gt_labels)
        sampled = self.subsample(labels)
        matched_gt_boxes = []
        for i in range(len(proposals)):
            s = sampled[i]
            proposals[i] = proposals[i][s]
            labels[i] = labels[i][s]
            matched_idxs[i] = matched_idxs[i][s]
            gtb = gt_boxes[i]
            if gtb.numel() == 0:
                gtb = ts.zeros((1, 4), dtype=dtype, device=device)
            matched_gt_boxes.append(gtb[matched_idxs[i]])
        regression_targets = self.box_coder.encode(matched_gt_boxes, proposals)
        return proposals, matched_idxs, labels, regression_targets

    def postprocess_detections(self, class_logits, box_regression, proposals, image_shapes):
        device = class_logits.device
        num_classes = class_logits.shape[-1]
        per_image = [p.shape[0] for p in proposals]
        pred_boxes = self.box_coder.decode(box_regression, proposals)
        pred_scores = F.softmax(class_logits, -1)
        all_boxes, all_scores, all_labels = [], [], []
        for boxes, scores, shape in zip(pred_boxes.split(per_image, 0),
                                        pred_scores.split(per_image, 0), image_shapes):
            boxes = box_ops.clip_boxes_to_image(boxes, shape)
            labels = ts.arange(num_classes, device=device).reshape(1, -1).expand_as(scores)
            boxes = boxes[:, 1:].reshape(-1, 4)
            scores = scores[:, 1:].reshape(-1)
            labels = labels[:, 1:].reshape(-1)
            inds = ts.where(scores > self.score_thresh)[0]
            boxes, scores, labels = boxes[inds], scores[inds], labels[inds]
            keep = box_ops.remove_small_boxes(boxes, min_size=1e-2)
            boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
            keep = box_ops.batched_nms(boxes, scores, labels, self.nms_thresh)
            keep = keep[: self.detections_per_img]
            all_boxes.append(boxes[keep])
            all_scores.append(scores[keep])
            all_labels.append(labels[keep])
        return all_boxes, all_scores, all_labels

    def _positive(self, proposals, labels, matched_idxs):
        props, idxs = [], []
        for i in range(len(proposals)):
            pos = ts.where(labels[i] > 0)[0]
            props.append(proposals[i][pos])
            idxs.append(matched_idxs[i][pos])
        return props, idxs

    def forward(self, features, proposals, image_shapes, targets=None):
        if targets is not None:
            for t in targets:
                if not t["boxes"].is_floating_point():
                    raise TypeError("target boxes must be of float type")
                if t["labels"].dtype != ts.int64:
                    raise TypeError("target labels must be of int64 type")
                if self.has_keypoint() and not t["keypoints"].is_floating_point():
                    raise TypeError("target keypoints must be of float type")
        if self.training:
            proposals, matched_idxs, labels, regression_targets = \
                self.select_training_samples(proposals, targets)
        else:
            labels = regression_targets = matched_idxs = None
        box_features = self.box_head(self.box_roi_pool(features, proposals, image_shapes))
        class_logits, box_regression = self.box_predictor(box_features)
        result, losses = [], {}
        if self.training:
            loss_classifier, loss_box_reg = fastrcnn_loss(class_logits, box_regression, labels,
                                                          regression_targets)
            losses = {"loss_classifier": loss_classifier, "loss_box_reg": loss_box_reg}
        else:
            boxes, scores, labels = self.postprocess_detections(class_logits, box_regression,
                                                                proposals, image_shapes)
            for i in range(len(boxes)):
                result.append({"boxes": boxes[i], "labels": labels[i], "scores": scores[i]})
        if self.has_mask():
            if self.training:
                mask_proposals, pos_matched_idxs = self._positive(proposals, labels, matched_idxs)
            else:
                mask_proposals = [p["boxes"] for p in result]
            mask_features = self.mask_head(self.mask_roi_pool(features, mask_proposals,
                                                              image_shapes))
            mask_logits = self.mask_predictor(mask_features)
            if self.training:
                losses["loss_mask"] = maskrcnn_loss(
                    mask_logits, mask_proposals, [t["masks"] for t in targets],
                    [t["labels"] for t in targets], pos_matched_idxs)
            else:
                for prob, r in zip(maskrcnn_inference(mask_logits,
                                                      [r["labels"] for r in result]), result):
                    r["masks"] = prob
        if self.has_keypoint():
            if self.training:
                kp_proposals, pos_matched_idxs = self._positive(proposals, labels, matched_idxs)
            else:
                kp_proposals = [p["boxes"] for p in result]
            kp_features = self.keypoint_head(self.keypoint_roi_pool(features, kp_proposals,
                                                                    image_shapes))
            kp_logits = self.keypoint_predictor(kp_features)
            if self.training:
                losses["loss_keypoint"] = keypointrcnn_loss(
                    kp_logits, kp_proposals, [t["keypoints"] for t in targets], pos_matched_idxs)
            else:
                probs, scores = keypointrcnn_inference(kp_logits, kp_proposals)
                for p, s, r in zip(probs, scores, result):
                    r["keypoints"] = p
                    r["keypoints_scores"] = s
        return result, losses
