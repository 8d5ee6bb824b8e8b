"""tessera.vision.ops.giou_loss — torchvision.ops.generalized_box_iou_loss: 1 - GIoU of paired
xyxy boxes [..., 4], torchvision's formula with eps in both divisions (the C
ts_generalized_box_iou_loss)."""
from tessera import _C

__all__ = ["generalized_box_iou_loss"]


def generalized_box_iou_loss(boxes1, boxes2, reduction="none", eps=1e-7):
    """1 - GIoU(boxes1[i], boxes2[i]) for xyxy boxes [..., 4] of one shape."""
    return _C._vision_generalized_box_iou_loss(boxes1, boxes2, reduction, float(eps))
