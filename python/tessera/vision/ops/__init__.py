"""tessera.vision.ops — torchvision.ops: the layers (misc: FrozenBatchNorm2d, Conv2dNormActivation,
SqueezeExcitation, MLP, Permute; StochasticDepth / stochastic_depth) and, where their modules are
present, the box and region operators (boxes: nms, box_iou...; roi: roi_align, roi_pool...)."""
from . import misc  # noqa: F401
from .misc import (FrozenBatchNorm2d, Conv2dNormActivation, SqueezeExcitation,  # noqa: F401
                   MLP, Permute)
from .stochastic_depth import stochastic_depth, StochasticDepth  # noqa: F401

try:  # box operators (another module's; absent until it lands)
    from .boxes import *  # noqa: F401,F403
except ImportError as _e:
    if getattr(_e, "name", None) != __name__ + ".boxes":
        raise
try:  # region pooling
    from .roi import *  # noqa: F401,F403
except ImportError as _e:
    if getattr(_e, "name", None) != __name__ + ".roi":
        raise
try:  # multi-scale RoIAlign and the feature pyramid (issue 75's modules)
    from .poolers import MultiScaleRoIAlign  # noqa: F401
    from .feature_pyramid_network import FeaturePyramidNetwork  # noqa: F401
except ImportError as _e:
    if getattr(_e, "name", None) not in (__name__ + ".poolers",
                                         __name__ + ".feature_pyramid_network"):
        raise
try:  # losses of the detection models (compositions over the C box ops)
    from .focal_loss import sigmoid_focal_loss  # noqa: F401
    from .giou_loss import generalized_box_iou_loss  # noqa: F401
except ImportError as _e:
    if getattr(_e, "name", None) not in (__name__ + ".focal_loss", __name__ + ".giou_loss"):
        raise
