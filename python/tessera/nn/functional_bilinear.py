"""tessera.nn.functional.bilinear: one C call (ts_bilinear, src/nn/bilinear.c)."""
from .. import _C


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]
    (ts_bilinear, src/nn/bilinear.c)"""
    return _C._nn_bilinear(input1, input2, weight, bias)
