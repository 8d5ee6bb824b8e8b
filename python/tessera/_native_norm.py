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
    if (input.dim() < 2 or input.shape[0] != N or input.shape[1] != C
            or input.numel() != N * C * HxW):
        raise RuntimeError(f"native_group_norm: expected input of N={N}, C={C} and HxW={HxW}, got "
                           f"{tuple(input.shape)}")
    out, mean, rstd = _C._nn_group_norm(input, int(group), weight, bias, float(eps), True)
    if out.requires_grad and not mean.requires_grad:
        # PyTorch's node owns all three outputs: the statistics require grad (with zero
        # gradient to weight and bias) whenever the output does
        mean.requires_grad_(), rstd.requires_grad_()
    return out, mean, rstd
