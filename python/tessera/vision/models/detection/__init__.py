"""tessera.vision.models.detection — torchvision.models.detection's detectors with its module
and state-dict names (a torchvision state dict loads with strict=True): Faster R-CNN, RetinaNet,
FCOS, Mask R-CNN, Keypoint R-CNN, SSD and SSDlite. Only weights=None, weights_backbone=None
(tessera downloads nothing); see docs/COMPAT.md for the limits."""
from .faster_rcnn import *  # noqa: F401,F403
from .fcos import *  # noqa: F401,F403
from .keypoint_rcnn import *  # noqa: F401,F403
from .mask_rcnn import *  # noqa: F401,F403
from .retinanet import *  # noqa: F401,F403
from .ssd import *  # noqa: F401,F403
from .ssdlite import *  # noqa: F401,F403

__all__ = ["fasterrcnn_resnet50_fpn", "fasterrcnn_resnet50_fpn_v2",
           "fasterrcnn_mobilenet_v3_large_fpn", "fasterrcnn_mobilenet_v3_large_320_fpn",
           "retinanet_resnet50_fpn", "retinanet_resnet50_fpn_v2", "fcos_resnet50_fpn",
           "maskrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn_v2", "keypointrcnn_resnet50_fpn",
           "ssd300_vgg16", "ssdlite320_mobilenet_v3_large",
           "FasterRCNN", "RetinaNet", "FCOS", "MaskRCNN", "KeypointRCNN", "SSD"]
