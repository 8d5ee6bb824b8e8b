"""tessera.vision.models.detection.generalized_rcnn — GeneralizedRCNN: transform -> backbone ->
rpn -> roi_heads -> postprocess. Training (model.train()) returns the loss dict and needs
targets; eval returns one dict of boxes / labels / scores (and masks / keypoints) per image."""
from collections import OrderedDict

import tessera as ts
from tessera import nn

__all__ = ["GeneralizedRCNN"]


def _check_targets(targets, who):
    if targets is None:
        raise ValueError("%s: in training mode, targets should be passed" % who)
    for t in targets:
        boxes = t["boxes"]
        if not isinstance(boxes, ts.Tensor) or boxes.dim() != 2 or boxes.shape[-1] != 4:
            raise ValueError("%s: expected target boxes to be a tensor of shape [N, 4], got %s"
                             % (who, getattr(boxes, "shape", type(boxes))))


def _check_degenerate(targets):
    for i, t in enumerate(targets):
        boxes = t["boxes"]
        degenerate = boxes[:, 2:] <= boxes[:, :2]
        if degenerate.any():
            bb = int(ts.where(degenerate.any(dim=1))[0][0])
            raise ValueError("All bounding boxes should have positive height and width. Found "
                             "invalid box %s for target at index %d." % (boxes[bb].tolist(), i))


class GeneralizedRCNN(nn.Module):
    def __init__(self, backbone, rpn, roi_heads, transform):
        super().__init__()
        self.transform = transform
        self.backbone = backbone
        self.rpn = rpn
        self.roi_heads = roi_heads

    def eager_outputs(self, losses, detections):
        return losses if self.training else detections

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
        proposals, proposal_losses = self.rpn(images, features, targets)
        detections, detector_losses = self.roi_heads(features, proposals, images.image_sizes,
                                                     targets)
        detections = self.transform.postprocess(detections, images.image_sizes,
                                                original_image_sizes)
        losses = {}
        losses.update(detector_losses)
        losses.update(proposal_losses)
        return self.eager_outputs(losses, detections)
