"""tessera.vision.ops.boxes — torchvision.ops' box functions over the C library's ts_ functions
(include/tessera/vision_ops.h): nms, batched_nms, box_area, box_iou, generalized_box_iou,
distance_box_iou, complete_box_iou, box_convert, clip_boxes_to_image, remove_small_boxes.
Boxes are Tensor[..., 4] in (x1, y1, x2, y2) unless a format says otherwise."""
from tessera import _C

__all__ = ["nms", "batched_nms", "remove_small_boxes", "clip_boxes_to_image", "box_convert",
           "box_area", "box_iou", "generalized_box_iou", "distance_box_iou", "complete_box_iou"]

_FMTS = ("xyxy", "xywh", "cxcywh")


def nms(boxes, scores, iou_threshold):
    """Indices (int64) of the boxes kept by non-maximum suppression, by decreasing score: a box
    is dropped when a kept box of higher score overlaps it with IoU > iou_threshold."""
    return _C._vision_nms(boxes, scores, float(iou_threshold))


def batched_nms(boxes, scores, idxs, iou_threshold):
    """nms within each category of idxs: boxes of different categories never suppress each
    other. Indices by decreasing score."""
    return _C._vision_batched_nms(boxes, scores, idxs, float(iou_threshold))


def remove_small_boxes(boxes, min_size):
    """Indices of the boxes whose width and height are both >= min_size."""
    return _C._vision_remove_small_boxes(boxes, float(min_size))


def clip_boxes_to_image(boxes, size):
    """boxes clipped to an image of size (height, width)."""
    height, width = size
    return _C._vision_clip_boxes_to_image(boxes, int(height), int(width))


def _check_fmt(name, fmt, allowed=_FMTS):
    if fmt not in allowed:
        raise ValueError("%s: unsupported format %r (supported: %s; the rotated formats are not "
                         "implemented)" % (name, fmt, ", ".join(allowed)))


def box_convert(boxes, in_fmt, out_fmt):
    """boxes converted between 'xyxy', 'xywh' and 'cxcywh'."""
    _check_fmt("box_convert", in_fmt)
    _check_fmt("box_convert", out_fmt)
    return _C._vision_box_convert(boxes, in_fmt, out_fmt)


def box_area(boxes, fmt="xyxy"):
    """The areas of boxes [..., 4]."""
    _check_fmt("box_area", fmt)
    return _C._vision_box_area(boxes, fmt)


def box_iou(boxes1, boxes2, fmt="xyxy"):
    """The IoU matrix [..., N, M] of boxes1 [..., N, 4] and boxes2 [..., M, 4]."""
    _check_fmt("box_iou", fmt)
    return _C._vision_box_iou(boxes1, boxes2, fmt)


def generalized_box_iou(boxes1, boxes2):
    """Generalized IoU [..., N, M] of xyxy boxes."""
    return _C._vision_generalized_box_iou(boxes1, boxes2)


def distance_box_iou(boxes1, boxes2, eps=1e-7):
    """Distance IoU [..., N, M] of xyxy boxes."""
    return _C._vision_distance_box_iou(boxes1, boxes2, float(eps))


def complete_box_iou(boxes1, boxes2, eps=1e-7):
    """Complete IoU [..., N, M] of xyxy boxes."""
    return _C._vision_complete_box_iou(boxes1, boxes2, float(eps))
