"""PyTorch's small numeric operators, each one C function bound in tessera._C (issue 76):
trapezoid / cumulative_trapezoid (src/ops/integration.c) and trapz, cross (src/ops/statistics.c),
dist / renorm (src/ops/norm_forms.c), and include/tessera/numeric.h's combinations,
unravel_index, gradient, frexp, pdist, histogram and histogramdd (python/src/tensor_numeric.c),
hash_tensor (include/tessera/torch_forms.h)."""
from . import _C
from ._C import (combinations, cross, cumulative_trapezoid, dist, frexp, gradient,  # noqa: F401
                 histogram, histogramdd, pdist, renorm, trapezoid, unravel_index)

__all__ = ["trapezoid", "trapz", "cumulative_trapezoid", "combinations", "unravel_index", "renorm",
           "dist", "gradient", "frexp", "pdist", "histogram",
           "histogramdd", "hash_tensor"]


def trapz(y, x=None, *, dx=None, dim=-1):
    """torch.trapz: trapezoid's older name (trapz(y, x, dim=-1) or trapz(y, dx=1, dim=-1))"""
    return trapezoid(y, x, dx=dx, dim=dim)


def hash_tensor(input, dim=None, *, keepdim=False, mode=0):
    """torch.hash_tensor (mode 0): the xor of the elements' 64-bit patterns — floats as float64,
    integers and bool as int64 — over dim (None or (): every dim), as uint64"""
    return _C._hash_tensor(input, dim, keepdim, mode)
