"""tessera.vision.ops.stochastic_depth — torchvision.ops.stochastic_depth and StochasticDepth
(the module lives with the models that use it, tessera.vision.models._utils)"""
from ..models._utils import StochasticDepth

__all__ = ["stochastic_depth", "StochasticDepth"]


def stochastic_depth(input, p, mode, training=True):
    """drops whole rows (mode "row") or the whole batch ("batch") of input with probability p,
    scaling the kept ones by 1 / (1 - p), when training; input unchanged otherwise"""
    m = StochasticDepth(p, mode)
    m.training = bool(training)
    return m(input)
