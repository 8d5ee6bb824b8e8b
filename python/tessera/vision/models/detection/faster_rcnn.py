"""tessera.vision.models.detection.faster_rcnn — FasterRCNN (GeneralizedRCNN with an RPN and
box RoIHeads), its heads (TwoMLPHead, FastRCNNConvFCHead, FastRCNNPredictor) and the builders
fasterrcnn_resnet50_fpn(_v2) and fasterrcnn_mobilenet_v3_large(_320)_fpn. weights=None and
weights_backbone=None only (tessera downloads nothing): the backbone then uses trainable
BatchNorm2d and every layer trainable, as torchvision does without pretrained weights."""
from tessera import nn
from tessera.nn import functional as F

from ...ops import misc as misc_nn_ops
from ...ops.poolers import MultiScaleRoIAlign
from ..mobilenetv3 import mobilenet_v3_large
from ..resnet import resnet50
from .anchor_utils import AnchorGenerator
from .backbone_utils import (_mobilenet_extractor, _resnet_fpn_extractor,
                             _validate_trainable_layers)
from .generalized_rcnn import GeneralizedRCNN
from .roi_heads import RoIHeads
from .rpn import RegionProposalNetwork, RPNHead
from .transform import GeneralizedRCNNTransform

__all__ = ["FasterRCNN", "TwoMLPHead", "FastRCNNConvFCHead", "FastRCNNPredictor",
           "fasterrcnn_resnet50_fpn", "fasterrcnn_resnet50_fpn_v2",
           "fasterrcnn_mobilenet_v3_large_fpn", "fasterrcnn_mobilenet_v3_large_320_fpn"]


def _default_anchorgen():
    sizes = ((32,), (64,), (128,), (256,), (512,))
    return AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * len(sizes))


class FasterRCNN(GeneralizedRCNN):
    """Faster R-CNN with torchvision's arguments (min_size, max_size, rpn_*, box_*)."""

    def __init__(self, backbone, num_classes=None, min_size=800, max_size=1333, image_mean=None,
                 image_std=None, rpn_anchor_generator=None, rpn_head=None,
                 rpn_pre_nms_top_n_train=2000, rpn_pre_nms_top_n_test=1000,
                 rpn_post_nms_top_n_train=2000, rpn_post_nms_top_n_test=1000, rpn_nms_thresh=0.7,
                 rpn_fg_iou_thresh=0.7, rpn_bg_iou_thresh=0.3, rpn_batch_size_per_image=256,
                 rpn_positive_fraction=0.5, rpn_score_thresh=0.0, box_roi_pool=None,
                 box_head=None, box_predictor=None, box_score_thresh=0.05, box_nms_thresh=0.5,
                 box_detections_per_img=100, box_fg_iou_thresh=0.5, box_bg_iou_thresh=0.5,
                 box_batch_size_per_image=512, box_positive_fraction=0.25, bbox_reg_weights=None,
                 **kwargs):
        if not hasattr(backbone, "out_channels"):
            raise ValueError("backbone should contain an attribute out_channels specifying the "
                             "number of output channels (assumed to be the same for all the "
                             "levels)")
        if not isinstance(rpn_anchor_generator, (AnchorGenerator, type(None))):
            raise TypeError("rpn_anchor_generator should be of type AnchorGenerator or None "
                            "instead of %s" % type(rpn_anchor_generator))
        if not isinstance(box_roi_pool, (MultiScaleRoIAlign, type(None))):
            raise TypeError("box_roi_pool should be of type MultiScaleRoIAlign or None instead "
                            "of %s" % type(box_roi_pool))
        if num_classes is not None and box_predictor is not None:
            raise ValueError("num_classes should be None when box_predictor is specified")
        if num_classes is None and box_predictor is None:
            raise ValueError("num_classes should not be None when box_predictor is not "
                             "specified")
        out_channels = backbone.out_channels
        if rpn_anchor_generator is None:
            rpn_anchor_generator = _default_anchorgen()
        if rpn_head is None:
            rpn_head = RPNHead(out_channels, rpn_anchor_generator.num_anchors_per_location()[0])
        rpn = RegionProposalNetwork(
            rpn_anchor_generator, rpn_head, rpn_fg_iou_thresh, rpn_bg_iou_thresh,
            rpn_batch_size_per_image, rpn_positive_fraction,
            dict(training=rpn_pre_nms_top_n_train, testing=rpn_pre_nms_top_n_test),
            dict(training=rpn_post_nms_top_n_train, testing=rpn_post_nms_top_n_test),
            rpn_nms_thresh, score_thresh=rpn_score_thresh)
        if box_roi_pool is None:
            box_roi_pool = MultiScaleRoIAlign(featmap_names=["0", "1", "2", "3"], output_size=7,
                                              sampling_ratio=2)
        if box_head is None:
            resolution = box_roi_pool.output_size[0]
            box_head = TwoMLPHead(out_channels * resolution ** 2, 1024)
        if box_predictor is None:
            box_predictor = FastRCNNPredictor(1024, num_classes)
        roi_heads = RoIHeads(box_roi_pool, box_head, box_predictor, box_fg_iou_thresh,
                             box_bg_iou_thresh, box_batch_size_per_image, box_positive_fraction,
                             bbox_reg_weights, box_score_thresh, box_nms_thresh,
                             box_detections_per_img)
        if image_mean is None:
            image_mean = [0.485, 0.456, 0.406]
        if image_std is None:
            image_std = [0.229, 0.224, 0.225]
        transform = GeneralizedRCNNTransform(min_size, max_size, image_mean, image_std, **kwargs)
        super().__init__(backbone, rpn, roi_heads, transform)


class TwoMLPHead(nn.Module):
    """flatten, fc6 + ReLU, fc7 + ReLU."""

    def __init__(self, in_channels, representation_size):
        super().__init__()
        self.fc6 = nn.Linear(in_channels, representation_size)
        self.fc7 = nn.Linear(representation_size, representation_size)

    def forward(self, x):
        return F.relu(self.fc7(F.relu(self.fc6(x.flatten(start_dim=1)))))


class FastRCNNConvFCHead(nn.Sequential):
    """conv_layers 3x3 Conv2dNormActivation, Flatten, fc_layers Linear + ReLU (the v2 head)."""

    def __init__(self, input_size, conv_layers, fc_layers, norm_layer=None):
        in_channels, in_height, in_width = input_size
        blocks = []
        prev = in_channels
        for c in conv_layers:
            blocks.append(misc_nn_ops.Conv2dNormActivation(prev, c, norm_layer=norm_layer))
            prev = c
        blocks.append(nn.Flatten())
        prev = prev * in_height * in_width
        for c in fc_layers:
            blocks.append(nn.Linear(prev, c))
            blocks.append(nn.ReLU(inplace=True))
            prev = c
        super().__init__(*blocks)
        for layer in self.modules():
            if isinstance(layer, nn.Conv2d):
                nn.init.kaiming_normal_(layer.weight, mode="fan_out", nonlinearity="relu")
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)


class FastRCNNPredictor(nn.Module):
    """cls_score and bbox_pred (num_classes * 4) Linear layers."""

    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.cls_score = nn.Linear(in_channels, num_classes)
        self.bbox_pred = nn.Linear(in_channels, num_classes * 4)

    def forward(self, x):
        if x.dim() == 4 and list(x.shape[2:]) != [1, 1]:
            raise ValueError("x has the wrong shape, expecting the last two dimensions to be "
                             "[1,1] instead of %s" % (list(x.shape[2:]),))
        x = x.flatten(start_dim=1)
        return self.cls_score(x), self.bbox_pred(x)


def _check_det_weights(name, weights, weights_backbone, kwargs):
    kwargs.pop("progress", None)
    if kwargs.pop("pretrained", False) or kwargs.pop("pretrained_backbone", False):
        weights = weights or "pretrained=True"
    for what, w in (("weights", weights), ("weights_backbone", weights_backbone)):
        if w is not None:
            raise ValueError(
                "tessera.vision.models.detection.%s: %s=%r is not supported (tessera downloads "
                "nothing); build with weights=None, weights_backbone=None and load a local "
                "checkpoint: model.load_state_dict(tessera.load(path))" % (name, what, w))


def _num_classes(num_classes):
    return 91 if num_classes is None else num_classes


def fasterrcnn_resnet50_fpn(*, weights=None, progress=True, num_classes=None,
                            weights_backbone=None, trainable_backbone_layers=None, **kwargs):
    _check_det_weights("fasterrcnn_resnet50_fpn", weights, weights_backbone, kwargs)
    trainable = _validate_trainable_layers(False, trainable_backbone_layers, 5, 3)
    backbone = resnet50(weights=None, norm_layer=nn.BatchNorm2d)
    backbone = _resnet_fpn_extractor(backbone, trainable)
    return FasterRCNN(backbone, num_classes=_num_classes(num_classes), **kwargs)


def fasterrcnn_resnet50_fpn_v2(*, weights=None, progress=True, num_classes=None,
                               weights_backbone=None, trainable_backbone_layers=None, **kwargs):
    _check_det_weights("fasterrcnn_resnet50_fpn_v2", weights, weights_backbone, kwargs)
    trainable = _validate_trainable_layers(False, trainable_backbone_layers, 5, 3)
    backbone = resnet50(weights=None)
    backbone = _resnet_fpn_extractor(backbone, trainable, norm_layer=nn.BatchNorm2d)
    anchor_gen = _default_anchorgen()
    rpn_head = RPNHead(backbone.out_channels, anchor_gen.num_anchors_per_location()[0],
                       conv_depth=2)
    box_head = FastRCNNConvFCHead((backbone.out_channels, 7, 7), [256, 256, 256, 256], [1024],
                                  norm_layer=nn.BatchNorm2d)
    return FasterRCNN(backbone, num_classes=_num_classes(num_classes),
                      rpn_anchor_generator=anchor_gen, rpn_head=rpn_head, box_head=box_head,
                      **kwargs)


def _fasterrcnn_mobilenet_v3_large_fpn(name, num_classes, trainable_backbone_layers, kwargs):
    trainable = _validate_trainable_layers(False, trainable_backbone_layers, 6, 3)
    backbone = mobilenet_v3_large(weights=None, norm_layer=nn.BatchNorm2d)
    backbone = _mobilenet_extractor(backbone, True, trainable)
    anchor_sizes = ((32, 64, 128, 256, 512),) * 3
    aspect_ratios = ((0.5, 1.0, 2.0),) * len(anchor_sizes)
    return FasterRCNN(backbone, _num_classes(num_classes),
                      rpn_anchor_generator=AnchorGenerator(anchor_sizes, aspect_ratios), **kwargs)


def fasterrcnn_mobilenet_v3_large_320_fpn(*, weights=None, progress=True, num_classes=None,
                                          weights_backbone=None, trainable_backbone_layers=None,
                                          **kwargs):
    _check_det_weights("fasterrcnn_mobilenet_v3_large_320_fpn", weights, weights_backbone,
                       kwargs)
    defaults = {"min_size": 320, "max_size": 640, "rpn_pre_nms_top_n_test": 150,
                "rpn_post_nms_top_n_test": 150, "rpn_score_thresh": 0.05}
    return _fasterrcnn_mobilenet_v3_large_fpn("fasterrcnn_mobilenet_v3_large_320_fpn",
                                              num_classes, trainable_backbone_layers,
                                              {**defaults, **kwargs})


def fasterrcnn_mobilenet_v3_large_fpn(*, weights=None, progress=True, num_classes=None,
                                      weights_backbone=None, trainable_backbone_layers=None,
                                      **kwargs):
    _check_det_weights("fasterrcnn_mobilenet_v3_large_fpn", weights, weights_backbone, kwargs)
    return _fasterrcnn_mobilenet_v3_large_fpn("fasterrcnn_mobilenet_v3_large_fpn", num_classes,
                                              trainable_backbone_layers,
                                              {"rpn_score_thresh": 0.05, **kwargs})
