"""tessera.nn.functional's 1-d / 3-d / adaptive / power-average pooling, max unpooling and the
group / instance / local response norms (issue 52) with PyTorch's signatures; each is one C call
(python/src/nn_pool_norm.c -> src/nn/pool_nd.c, src/nn/group_norm.c)."""
from .. import _C

_MAX, _AVG, _LP = 0, 1, 2


def _tuple(v, n, name, fn, none_ok=False, like=None):
    """an int or a sequence of n ints (one int repeats; None entries: like's sizes)"""
    if v is None and not none_ok:
        raise TypeError(f"{fn}(): argument '{name}' must be an int or a tuple of {n} ints")
    if isinstance(v, int) or v is None:
        t = (v,) * n
    else:
        try:
            t = tuple(v)
        except TypeError:
            raise TypeError(f"{fn}(): argument '{name}' must be an int or a tuple of {n} ints, "
                            f"not {type(v).__name__}") from None
        if len(t) == 1:
            t = t * n
    if len(t) != n:
        raise ValueError(f"{fn}(): argument '{name}' must have {n} elements, got {len(t)}")
    if like is not None:
        t = tuple(like[len(like) - n + i] if x is None else x for i, x in enumerate(t))
    try:
        return tuple(int(x) for x in t)
    except TypeError:
        raise TypeError(f"{fn}(): argument '{name}' must hold ints") from None


def _stride(stride, kernel, n, fn):
    if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0):
        return kernel
    return _tuple(stride, n, "stride", fn)


def _max_pool(n, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    fn = f"max_pool{n}d"
    k = _tuple(kernel_size, n, "kernel_size", fn)
    return _C._nn_pool_nd(_MAX, input, n, k, _stride(stride, k, n, fn),
                          _tuple(padding, n, "padding", fn), _tuple(dilation, n, "dilation", fn),
                          bool(ceil_mode), False, 0, bool(return_indices), 0.0)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_pool(3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    return _max_pool(1, input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    return _max_pool(3, input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _divisor(divisor_override, fn):
    if divisor_override is None:
        return 0
    if divisor_override == 0:
        raise RuntimeError(f"{fn}(): divisor must be not zero")
    return int(divisor_override)


def _avg_pool(n, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor):
    fn = f"avg_pool{n}d"
    k = _tuple(kernel_size, n, "kernel_size", fn)
    return _C._nn_pool_nd(_AVG, input, n, k, _stride(stride, k, n, fn),
                          _tuple(padding, n, "padding", fn), (1,) * n, bool(ceil_mode),
                          not count_include_pad, _divisor(divisor, fn), False, 0.0)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    return _avg_pool(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return _avg_pool(3, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def _lp_pool(n, input, norm_type, kernel_size, stride, ceil_mode):
    fn = f"lp_pool{n}d"
    k = _tuple(kernel_size, n, "kernel_size", fn)
    return _C._nn_pool_nd(_LP, input, n, k, _stride(stride, k, n, fn), (0,) * n, (1,) * n,
                          bool(ceil_mode), False, 0, False, float(norm_type))


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(3, input, norm_type, kernel_size, stride, ceil_mode)


def _adaptive(n, maxp, input, output_size, return_indices):
    fn = f"adaptive_{'max' if maxp else 'avg'}_pool{n}d"
    out = _tuple(output_size, n, "output_size", fn, none_ok=n > 1, like=tuple(input.shape))
    return _C._nn_adaptive_pool(maxp, input, n, out, bool(return_indices))


def adaptive_avg_pool1d(input, output_size):
    return _adaptive(1, False, input, output_size, False)


def adaptive_avg_pool3d(input, output_size):
    return _adaptive(3, False, input, output_size, False)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    return _adaptive(1, True, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _adaptive(2, True, input, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    return _adaptive(3, True, input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    return _adaptive(1, True, input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    return _adaptive(2, True, input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=True):
    return _adaptive(3, True, input, output_size, True)


def _unpool_size(input, k, s, p, output_size):
    """PyTorch's _unpool_output_size"""
    n = len(k)
    shape = tuple(input.shape)
    default = [(shape[-n + d] - 1) * s[d] + k[d] - 2 * p[d] for d in range(n)]
    if output_size is None:
        return tuple(default)
    output_size = tuple(int(x) for x in output_size)
    if len(output_size) == n + 2:
        output_size = output_size[2:]
    if len(output_size) != n:
        raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, "
                         f"but it has a length of '{len(output_size)}'")
    for d in range(n):
        lo, hi = default[d] - s[d], default[d] + s[d]
        if not lo < output_size[d] < hi:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between '
                             f'{lo} and {hi})')
    return output_size


def _max_unpool(n, input, indices, kernel_size, stride, padding, output_size):
    fn = f"max_unpool{n}d"
    k = _tuple(kernel_size, n, "kernel_size", fn)
    s = _stride(stride, k, n, fn)
    p = _tuple(padding, n, "padding", fn)
    return _C._nn_max_unpool(input, indices, n, _unpool_size(input, k, s, p, output_size))


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(3, input, indices, kernel_size, stride, padding, output_size)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.dim()}")
    return _C._nn_group_norm(input, int(num_groups), weight, bias, float(eps), False)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    return _C._nn_instance_norm(input, running_mean, running_var, weight, bias,
                                bool(use_input_stats), float(momentum), float(eps))


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.dim()} "
                         "dimensions)")
    return _C._nn_local_response_norm(input, int(size), float(alpha), float(beta), float(k))


__all__ = [
    "max_pool1d", "max_pool3d", "max_pool1d_with_indices", "max_pool3d_with_indices",
    "avg_pool1d", "avg_pool3d", "lp_pool1d", "lp_pool2d", "lp_pool3d", "adaptive_avg_pool1d",
    "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices", "max_unpool1d", "max_unpool2d", "max_unpool3d",
    "group_norm", "instance_norm", "local_response_norm",
]
