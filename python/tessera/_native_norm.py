"""torch.native_batch_norm, native_layer_norm and native_group_norm (issue 52): the norm and the
statistics PyTorch's kernels save for backward (the mean and 1 / sqrt(var + eps), biased
variance), composed from tessera.nn.functional and differentiable reductions."""
from . import _C
from .nn import functional as _F

__all__ = ["native_batch_norm", "native_layer_norm", "native_group_norm"]


def _stats(input, dims, keepdim, eps):
    mean = input.mean(dims, keepdim=keepdim)
    var = input.var(dims, unbiased=False, keepdim=keepdim)
    return mean, (var + eps).rsqrt()


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    out = _F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    if not training:  # PyTorch's CPU kernel saves nothing in evaluation
        return (out, _C.empty(0, device=input.device, dtype=input.dtype),
                _C.empty(0, device=input.device, dtype=input.dtype))
    mean, rstd = _stats(input, [0] + list(range(2, input.dim())), False, eps)
    return out, mean, rstd


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    ns = tuple(normalized_shape)
    out = _F.layer_norm(input, ns, weight, bias, eps)
    mean, rstd = _stats(input, list(range(input.dim() - len(ns), input.dim())), True, eps)
    return out, mean, rstd


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """the output and the [N, group] mean and rstd (ts_native_group_norm)"""
    return _C._nn_native_group_norm(input, weight, bias, int(N), int(C), int(HxW), int(group),
                                    float(eps))
