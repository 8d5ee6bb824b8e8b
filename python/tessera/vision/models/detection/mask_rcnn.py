"""tessera.vision.models.detection.mask_rcnn — MaskRCNN (Faster R-CNN plus a mask branch:
MultiScaleRoIAlign 14x14, MaskRCNNHeads convs, MaskRCNNPredictor transposed conv + 1x1 logits)
and the builders maskrcnn_resnet50_fpn(_v2)."""
from collections import OrderedDict

from tessera import nn

from ...ops import misc as misc_nn_ops
from ...ops.poolers import MultiScaleRoIAlign
from ..resnet import resnet50
from .backbone_utils import _resnet_fpn_extractor, _validate_trainable_layers
from .faster_rcnn import (FasterRCNN, FastRCNNConvFCHead, RPNHead, _check_det_weights,
                          _default_anchorgen, _num_classes)

__all__ = ["MaskRCNN", "MaskRCNNHeads", "MaskRCNNPredictor", "maskrcnn_resnet50_fpn",
           "maskrcnn_resnet50_fpn_v2"]


class MaskRCNN(FasterRCNN):
    """FasterRCNN's arguments plus mask_roi_pool, mask_head, mask_predictor. Eval detections
    carry masks [N, 1, H, W] (probabilities pasted into the original image)."""

    def __init__(self, backbone, num_classes=None, *args, mask_roi_pool=None, mask_head=None,
                 mask_predictor=None, **kwargs):
        if not isinstance(mask_roi_pool, (MultiScaleRoIAlign, type(None))):
            raise TypeError("mask_roi_pool should be of type MultiScaleRoIAlign or None instead "
                            "of %s" % type(mask_roi_pool))
        if num_classes is not None and mask_predictor is not None:
            raise ValueError("num_classes should be None when mask_predictor is specified")
        out_channels = backbone.out_channels
        if mask_roi_pool is None:
            mask_roi_pool = MultiScaleRoIAlign(featmap_names=["0", "1", "2", "3"],
                                               output_size=14, sampling_ratio=2)
        if mask_head is None:
            mask_head = MaskRCNNHeads(out_channels, (256, 256, 256, 256), 1)
        if mask_predictor is None:
            mask_predictor = MaskRCNNPredictor(256, 256, num_classes)
        super().__init__(backbone, num_classes, *args, **kwargs)
        self.roi_heads.mask_roi_pool = mask_roi_pool
        self.roi_heads.mask_head = mask_head
        self.roi_heads.mask_predictor = mask_predictor


class MaskRCNNHeads(nn.Sequential):
    _version = 2

    def __init__(self, in_channels, layers, dilation, norm_layer=None):
        blocks = []
        nxt = in_channels
        for f in layers:
            blocks.append(misc_nn_ops.Conv2dNormActivation(nxt, f, kernel_size=3, stride=1,
                                                           padding=dilation, dilation=dilation,
                                                           norm_layer=norm_layer))
            nxt = f
        super().__init__(*blocks)
        for layer in self.modules():
            if isinstance(layer, nn.Conv2d):
                nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)


class MaskRCNNPredictor(nn.Sequential):
    def __init__(self, in_channels, dim_reduced, num_classes):
        super().__init__(OrderedDict([
            ("conv5_mask", nn.ConvTranspose2d(in_channels, dim_reduced, 2, 2, 0)),
            ("relu", nn.ReLU(inplace=True)),
            ("mask_fcn_logits", nn.Conv2d(dim_reduced, num_classes, 1, 1, 0))]))
        for name, param in self.named_parameters():
            if "weight" in name:
                nn.init.kaiming_normal_(param, mode="fan_out", nonlinearity="relu")


def maskrcnn_resnet50_fpn(*, weights=None, progress=True, num_classes=None,
                          weights_backbone=None, trainable_backbone_layers=None, **kwargs):
    _check_det_weights("maskrcnn_resnet50_fpn", weights, weights_backbone, kwargs)
    trainable = _validate_trainable_layers(False, trainable_backbone_layers, 5, 3)
    backbone = resnet50(weights=None, norm_layer=nn.BatchNorm2d)
    backbone = _resnet_fpn_extractor(backbone, trainable)
    return MaskRCNN(backbone, num_classes=_num_classes(num_classes), **kwargs)


def maskrcnn_resnet50_fpn_v2(*, weights=None, progress=True, num_classes=None,
                             weights_backbone=None, trainable_backbone_layers=None, **kwargs):
    _check_det_weights("maskrcnn_resnet50_fpn_v2", weights, weights_backbone, kwargs)
    trainable = _validate_trainable_layers(False, trainable_backbone_layers, 5, 3)
    backbone = resnet50(weights=None)
    backbone = _resnet_fpn_extractor(backbone, trainable, norm_layer=nn.BatchNorm2d)
    anchor_gen = _default_anchorgen()
    rpn_head = RPNHead(backbone.out_channels, anchor_gen.num_anchors_per_location()[0],
                       conv_depth=2)
    box_head = FastRCNNConvFCHead((backbone.out_channels, 7, 7), [256, 256, 256, 256], [1024],
                                  norm_layer=nn.BatchNorm2d)
    mask_head = MaskRCNNHeads(backbone.out_channels, [256, 256, 256, 256], 1,
                              norm_layer=nn.BatchNorm2d)
    return MaskRCNN(backbone, num_classes=_num_classes(num_classes),
                    rpn_anchor_generator=anchor_gen, rpn_head=rpn_head, box_head=box_head,
                    mask_head=mask_head, **kwargs)
