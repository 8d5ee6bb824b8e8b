"""tessera.vision.ops.focal_loss — torchvision.ops.sigmoid_focal_loss (RetinaNet): the C
ts_sigmoid_focal_loss (binary cross entropy with logits weighted by (1 - p_t)**gamma and alpha,
torchvision's order of operations)."""
from tessera import _C

__all__ = ["sigmoid_focal_loss"]


def sigmoid_focal_loss(inputs, targets, alpha=0.25, gamma=2.0, reduction="none"):
    """loss = alpha_t * (1 - p_t)**gamma * BCE(inputs, targets), p = sigmoid(inputs),
    p_t = p * t + (1 - p) * (1 - t), alpha_t = alpha * t + (1 - alpha) * (1 - t) (alpha < 0:
    no weighting). reduction: 'none', 'mean' or 'sum'."""
    return _C._vision_sigmoid_focal_loss(inputs, targets, float(alpha), float(gamma), reduction)
