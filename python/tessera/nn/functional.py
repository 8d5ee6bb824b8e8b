"""tessera.nn.functional — the stateless ops (relu, linear, conv2d, cross_entropy...) with
PyTorch's signatures; each is one call of the C library (python/src/nn.c)."""
from .. import _C

Tensor = _C.Tensor

# kinds of _C._nn_act (nn.c's table)
_RELU, _GELU, _GELU_TANH, _SIGMOID, _TANH, _SILU, _SOFTPLUS = range(7)
# kinds of _C._nn_loss
_CE, _NLL, _MSE, _L1, _SMOOTH_L1, _BCE_LOGITS, _BCE = range(7)
_REDUCTIONS = {"mean": 0, "sum": 1, "none": 2}


def _pair(v, name, fn):
    if isinstance(v, int):
        return (v, v)
    try:
        t = tuple(int(x) for x in v)
    except TypeError:
        raise TypeError(f"{fn}(): argument '{name}' must be an int or a tuple of 2 ints, "
                        f"not {type(v).__name__}") from None
    if len(t) == 1:
        return (t[0], t[0])
    if len(t) != 2:
        raise ValueError(f"{fn}(): argument '{name}' must have 2 elements, got {len(t)}")
    return t


def _reduction(reduction, size_average=None, reduce=None):
    if size_average is not None or reduce is not None:  # PyTorch's legacy arguments
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else ("mean" if size_average else "sum")
    try:
        return _REDUCTIONS[reduction]
    except (KeyError, TypeError):
        raise ValueError(f"{reduction} is not a valid value for reduction") from None


# ------------------------------------------------------------------ activations
def relu(input, inplace=False):
    if inplace:  # written into input and returned, as PyTorch (ts_relu_)
        return input.relu_()
    return _C._nn_act(_RELU, input)


def relu_(input):
    return input.relu_()


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate argument must be either none or tanh, got {approximate}")
    return _C._nn_act(_GELU if approximate == "none" else _GELU_TANH, input)


def sigmoid(input):
    return _C._nn_act(_SIGMOID, input)


def tanh(input):
    return _C._nn_act(_TANH, input)


def silu(input, inplace=False):  # inplace=True writes into input and returns it (ts_silu_)
    return _C._nn_act(_SILU, input, bool(inplace))


def softplus(input, beta=1.0, threshold=20.0):
    """x where beta x > threshold, else log1p(exp(beta x)) / beta, with PyTorch's gradient
    (ts_softplus_ex, src/nn/softplus.c)"""
    from .functional_act import _act, _SOFTPLUS as _SOFTPLUS_EX
    return _act(_SOFTPLUS_EX, input, beta, threshold)


def _unsupported(what):
    raise NotImplementedError(f"tessera: {what} is not supported")


def _softmax_dim(ndim):
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return _C._nn_softmax(False, input, _softmax_dim(input.dim()) if dim is None else dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return _C._nn_softmax(True, input, _softmax_dim(input.dim()) if dim is None else dim)


# ------------------------------------------------------------------ layers
def linear(input, weight, bias=None):
    return _C._nn_linear(input, weight, bias)


def _no_stride(stride):
    """None or an empty sequence: the kernel size (PyTorch's default)"""
    return stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    k = _pair(kernel_size, "kernel_size", "max_pool2d")
    s = k if _no_stride(stride) else _pair(stride, "stride", "max_pool2d")
    if getattr(input, "is_quantized", False) and not return_indices:  # ts_quantized_max_pool2d
        return _C._quantized_max_pool2d(input, k, s, _pair(padding, "padding", "max_pool2d"),
                                        _pair(dilation, "dilation", "max_pool2d"), bool(ceil_mode))
    return _C._nn_pool2d(False, input, k, s, _pair(padding, "padding", "max_pool2d"),
                         _pair(dilation, "dilation", "max_pool2d"), bool(ceil_mode), False, 0,
                         bool(return_indices))


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    divisor = 0
    if divisor_override is not None:
        divisor = int(divisor_override)
        if divisor == 0:
            raise RuntimeError("avg_pool2d(): divisor must be not zero")
    k = _pair(kernel_size, "kernel_size", "avg_pool2d")
    s = k if _no_stride(stride) else _pair(stride, "stride", "avg_pool2d")
    if getattr(input, "is_quantized", False):  # ts_quantized_avg_pool2d
        return _C._quantized_avg_pool2d(input, k, s, _pair(padding, "padding", "avg_pool2d"),
                                        bool(ceil_mode), bool(count_include_pad),
                                        divisor_override)
    if divisor < 0:  # ATen divides by any nonzero override: a sum divided (src/nn/pool_nd.c)
        return _C._nn_pool_nd(1, input, 2, k, s, _pair(padding, "padding", "avg_pool2d"), (1, 1),
                              bool(ceil_mode), not count_include_pad, divisor, False, 0.0)
    return _C._nn_pool2d(True, input, k, s, _pair(padding, "padding", "avg_pool2d"), (1, 1),
                         bool(ceil_mode), not count_include_pad, divisor)


def adaptive_avg_pool2d(input, output_size):
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    oh = input.shape[-2] if oh is None else oh
    ow = input.shape[-1] if ow is None else ow
    if getattr(input, "is_quantized", False):  # ts_quantized_adaptive_avg_pool2d
        return _C._quantized_adaptive_avg_pool2d(input, (oh, ow))
    return _C._nn_adaptive_avg_pool2d(input, (oh, ow))


def dropout(input, p=0.5, training=True, inplace=False):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return _C._nn_dropout(input, float(p), bool(training), bool(inplace))  # ts_dropout(_)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    return _C._nn_batch_norm(input, running_mean, running_var, weight, bias, bool(training),
                             float(momentum), float(eps))


def _shape(normalized_shape):
    return (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return _C._nn_layer_norm(False, input, _shape(normalized_shape), weight, bias, float(eps))


def rms_norm(input, normalized_shape, weight=None, eps=None):
    # the C call's eps: +0.0 is None (the default), -0.0 an eps of exactly zero
    eps = 0.0 if eps is None else -0.0 if float(eps) == 0 else float(eps)
    return _C._nn_layer_norm(True, input, _shape(normalized_shape), weight, None, eps)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """one C call (ts_embedding_ex): a negative padding_idx counts from the end; max_norm renorms
    the rows used of weight in place first (ts_embedding_renorm_, outside autograd)"""
    if scale_grad_by_freq or sparse:
        _unsupported("embedding(scale_grad_by_freq / sparse)")
    try:
        return _C._nn_embedding(input, weight, None if padding_idx is None else int(padding_idx),
                                None if max_norm is None else float(max_norm), float(norm_type))
    except ValueError as e:  # PyTorch's exception type for this message
        if "Padding_idx must be within num_embeddings" in str(e):
            raise AssertionError("Padding_idx must be within num_embeddings") from None
        raise


def one_hot(tensor, num_classes=-1):
    return _C._nn_one_hot(tensor, int(num_classes))


# ------------------------------------------------------------------ losses
def _loss(kind, input, target, reduction, weight=None, ignore_index=None, label_smoothing=0.0,
          beta=0.0, pos_weight=None):
    return _C._nn_loss(kind, input, target, reduction, weight, ignore_index,
                       float(label_smoothing), float(beta), pos_weight)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    return _loss(_CE, input, target, _reduction(reduction, size_average, reduce), weight,
                 int(ignore_index), label_smoothing)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    return _loss(_NLL, input, target, _reduction(reduction, size_average, reduce), weight,
                 int(ignore_index))


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    return _loss(_MSE, input, target, _reduction(reduction, size_average, reduce), weight)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return _loss(_L1, input, target, _reduction(reduction, size_average, reduce))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    # ts_smooth_l1_loss_beta: beta 0 is the L1 loss, a negative beta an error, as PyTorch
    return _loss(_SMOOTH_L1, input, target, _reduction(reduction, size_average, reduce),
                 beta=beta)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    return _loss(_BCE_LOGITS, input, target, _reduction(reduction, size_average, reduce), weight,
                 pos_weight=pos_weight)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """PyTorch's loss -(t log(p) + (1 - t) log(1 - p)), each log clamped at -100, and its gradient
    (p - t) / max(p (1 - p), 1e-12), finite where p is exactly 0 or 1 (src/nn/loss_bce.c). An input
    or target outside [0, 1] (NaN too) raises PyTorch's RuntimeError "all elements of input should
    be between 0 and 1" on cpu and sim; on cuda an input outside gives NaN, a target goes untested.
    """
    return _loss(_BCE, input, target, _reduction(reduction, size_average, reduce), weight)


# --- issue 52: norm-type functions (src/ops/reduce_norm.c)
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    if out is not None:
        raise TypeError("normalize(): out= is not supported")
    return _C._normalize(input, p, dim, eps)


cosine_similarity = _C.cosine_similarity
pairwise_distance = _C.pairwise_distance


# --- issue 52: padding and resampling (src/ops/pad_resample.c)
from .functional_resample import (pad, interpolate, upsample, upsample_nearest,  # noqa: E402,F401
                                  upsample_bilinear, pixel_shuffle, pixel_unshuffle)

# --- issue 52: the other losses (src/nn/loss_pointwise.c, loss_margin.c)
from .functional_loss import (kl_div, huber_loss, soft_margin_loss,  # noqa: E402,F401
                              margin_ranking_loss, hinge_embedding_loss, cosine_embedding_loss,
                              triplet_margin_loss, triplet_margin_with_distance_loss,
                              poisson_nll_loss, gaussian_nll_loss, multilabel_margin_loss,
                              multilabel_soft_margin_loss, multi_margin_loss)

# --- issue 52: more activations (src/ops/activation.c)
from .functional_act import (elu, elu_, celu, celu_, selu, selu_, hardtanh,  # noqa: E402,F401
                             hardtanh_, relu6, threshold, threshold_, hardshrink, softshrink,
                             tanhshrink, softsign, logsigmoid, mish, hardsigmoid, hardswish, glu,
                             prelu, softmin, leaky_relu, leaky_relu_)

# --- issue 52: attention (functional_attn.py), bilinear (functional_bilinear.py), embedding_bag
# (functional_embedding_bag.py), rrelu and the alpha and feature dropouts (functional_dropout.py),
# ctc_loss (functional_ctc.py)
from .functional_attn import (scaled_dot_product_attention,  # noqa: E402,F401
                              multi_head_attention_forward)
from .functional_bilinear import bilinear  # noqa: E402,F401
from .functional_embedding_bag import embedding_bag  # noqa: E402,F401
from .functional_dropout import (rrelu, rrelu_, alpha_dropout,  # noqa: E402,F401
                                 feature_alpha_dropout, dropout1d, dropout2d, dropout3d)
from .functional_ctc import ctc_loss  # noqa: E402,F401
from .._numeric_forms import pdist  # noqa: E402,F401  (ts_pdist, issue 76)

# --- issue 52: conv1d / conv3d, the transposed convolutions, unfold / fold, channel_shuffle
# (functional_conv.py over include/tessera/conv.h)
from .functional_conv import (conv1d, conv2d, conv3d, conv_transpose1d,  # noqa: E402,F401
                              conv_transpose2d, conv_transpose3d, unfold, fold, channel_shuffle)

# --- issue 52: 1-d / 3-d / adaptive / power-average pooling, unpooling, group / instance / local
# response norms (src/nn/pool_nd.c, src/nn/group_norm.c)
from .functional_pool_norm import (  # noqa: E402,F401
    max_pool1d, max_pool3d, max_pool1d_with_indices, max_pool3d_with_indices, avg_pool1d,
    avg_pool3d, lp_pool1d, lp_pool2d, lp_pool3d, adaptive_avg_pool1d, adaptive_avg_pool3d,
    adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d,
    adaptive_max_pool1d_with_indices, adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d_with_indices, max_unpool1d, max_unpool2d, max_unpool3d, group_norm,
    instance_norm, local_response_norm)

# --- issue 52: fractional max pooling (functional_fractional.py)
from .functional_fractional import (  # noqa: E402,F401
    fractional_max_pool2d, fractional_max_pool3d, fractional_max_pool2d_with_indices,
    fractional_max_pool3d_with_indices)

# --- issue 52: affine_grid, grid_sample (4-D), linear_cross_entropy (functional_grid.py)
from .functional_grid import affine_grid, grid_sample, linear_cross_entropy  # noqa: E402,F401
