"""tessera.nn.functional's bilinear, embedding_bag, rrelu and the alpha / feature dropouts
(dropout1d/2d/3d, alpha_dropout, feature_alpha_dropout): PyTorch's definitions composed from
tensor ops, so autograd, devices and dtypes come from those ops."""
import math
import warnings

from .. import _C

_SELU_ALPHA = 1.7580993408473766  # -selu's alpha * scale: the value alpha dropout drops to


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]
    (ts_bilinear, src/nn/bilinear.c)"""
    return _C._nn_bilinear(input1, input2, weight, bias)


_BAG_MODES = {"sum": 0, "mean": 1, "max": 2}


def _bags(input, offsets, include_last_offset):
    """the bags as lists of positions into input.flatten(): [[i, ...], ...]"""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated "
                             "is a mini-batch of fixed length sequences. However, found offsets "
                             f"of type {type(offsets).__name__}")
        b, n = input.shape
        return [list(range(r * n, (r + 1) * n)) for r in range(b)]
    if input.ndim != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.ndim}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    if offsets.ndim != 1:
        raise ValueError("offsets has to be a 1D Tensor")
    off = _check_offsets(input, offsets)
    n = input.shape[0]
    ends = off[1:] if include_last_offset else off[1:] + [n]
    starts = off[:-1] if include_last_offset else off
    return [list(range(s, e)) for s, e in zip(starts, ends)]


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """PyTorch's F.embedding_bag: each bag's rows of weight reduced by sum, mean or max (an empty
    bag gives zeros); entries equal to padding_idx are left out of their bag."""
    if mode not in _BAG_MODES:
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("tessera: embedding_bag(scale_grad_by_freq / sparse) is not "
                                  "supported")
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.ndim}")
    if input.is_floating_point() or input.dtype == _C.bool:
        raise RuntimeError(f"embedding_bag: expected input of an integer dtype, got "
                           f"{input.dtype}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                      f"per_sample_weights is only supported for mode='sum' "
                                      f"(got mode='{mode}'). Please open a feature request on "
                                      "GitHub.")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(f"embedding_bag: per_sample_weights ({tuple(per_sample_weights.shape)}"
                             f") and input ({tuple(input.shape)}) must have the same shape")
    rows, dim = weight.shape
    if padding_idx is not None:
        if not -rows <= padding_idx < rows:
            raise AssertionError("padding_idx must be within the number of embeddings")
        padding_idx = padding_idx % rows
    if mode != "max" and max_norm is None:
        return _bag_c(input, weight, offsets, mode, per_sample_weights, padding_idx,
                      include_last_offset)
    if input.ndim == 2 and offsets is None and max_norm is None:
        return _bag_fixed(input, weight, mode, per_sample_weights, padding_idx)
    bags = _bags(input, offsets, include_last_offset)
    flat = input.reshape(-1)
    idx = [int(v) for v in flat.tolist()]
    if any(i < 0 or i >= rows for i in idx):
        raise IndexError(f"embedding_bag: index out of range [0, {rows}) in input")
    if max_norm is not None:
        _renorm_rows(weight, sorted(set(idx)), max_norm, norm_type)
    nb, width = len(bags), max((len(b) for b in bags), default=0)
    dev = weight.device
    if nb == 0 or width == 0:
        return _C.zeros(nb, dim, dtype=weight.dtype, device=dev)
    # [nb, width] positions into flat (0 where absent) and a mask of the present, non-padding
    pos = [b + [0] * (width - len(b)) for b in bags]
    keep = [[k < len(b) and idx[b[k]] != padding_idx for k in range(width)] for b in bags]
    pos_t = _C.tensor(pos, dtype=_C.int64, device=dev)
    keep_t = _C.tensor(keep, dtype=_C.bool, device=dev)
    rows_t = flat.index_select(0, pos_t.reshape(-1))
    emb = weight.index_select(0, rows_t).reshape(nb, width, dim)
    if mode == "max":
        emb = emb.masked_fill(keep_t.logical_not().unsqueeze(-1), float("-inf"))
        vals = emb.max(dim=1)[0]
        nonempty = _C.tensor([any(k) for k in keep], dtype=_C.bool, device=dev).unsqueeze(-1)
        return _C.where(nonempty, vals, _C.zeros_like(vals))
    w = keep_t.to(weight.dtype)
    if per_sample_weights is not None:
        psw = per_sample_weights.reshape(-1).index_select(0, pos_t.reshape(-1))
        w = w * psw.reshape(nb, width)
    y = (emb * w.unsqueeze(-1)).sum(dim=1)
    if mode == "mean":
        counts = [max(sum(k), 1) for k in keep]
        y = y / _C.tensor(counts, dtype=weight.dtype, device=dev).unsqueeze(-1)
    return y


def _bag_c(input, weight, offsets, mode, per_sample_weights, padding_idx, include_last_offset):
    """sum and mean through the C op (one pass, no [bags, width, dim] gather): the offsets
    checked here first for their messages (_bags'), an index out of range an IndexError"""
    if input.ndim == 1 and offsets is not None and offsets.ndim == 1:
        _check_offsets(input, offsets)
    elif input.ndim != 2 or offsets is not None:
        _bags(input, offsets, include_last_offset)  # raises _bags' error for these arguments
    if input.dtype not in (_C.int64, _C.int32):
        input = input.to(_C.int64)
    if offsets is not None and offsets.dtype not in (_C.int64, _C.int32):
        offsets = offsets.to(_C.int64)
    psw = per_sample_weights
    if psw is not None and psw.dtype != weight.dtype:
        psw = psw.to(weight.dtype)
    try:
        return _C._nn_embedding_bag(input, weight, offsets, _BAG_MODES[mode], psw,
                                    -1 if padding_idx is None else padding_idx,
                                    include_last_offset)
    except ValueError as e:
        if "out of range in self" in str(e):
            raise IndexError(f"embedding_bag: index out of range [0, {weight.shape[0]}) in "
                             "input") from None
        raise


def _check_offsets(input, offsets):
    """1-D offsets checked (PyTorch's messages), as a list"""
    off = [int(v) for v in offsets.tolist()]
    n = input.shape[0]
    if off and off[0] != 0:
        raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
                           f"has to start from position 0. However, got {off[0]}")
    if any(o > n or o < 0 for o in off) or any(a > b for a, b in zip(off, off[1:])):
        raise RuntimeError(f"embedding_bag: offsets must be non-decreasing and in [0, {n}], got "
                           f"{off}")
    return off


def _bag_fixed(input, weight, mode, per_sample_weights, padding_idx):
    """embedding_bag of a 2-D input (bags of one length) in tensor ops, no Python loop over the
    indices: the general path's products and sums, with its weights of 1 left out"""
    nb, width = input.shape
    rows, dim = weight.shape
    dev = weight.device
    if nb == 0 or width == 0:
        return _C.zeros(nb, dim, dtype=weight.dtype, device=dev)
    flat = input.reshape(-1)
    if flat.min().item() < 0 or flat.max().item() >= rows:
        raise IndexError(f"embedding_bag: index out of range [0, {rows}) in input")
    emb = weight.index_select(0, flat).reshape(nb, width, dim)
    keep = None if padding_idx is None else input != padding_idx
    if mode == "max":
        if keep is None:
            return emb.max(dim=1)[0]
        emb = emb.masked_fill(keep.logical_not().unsqueeze(-1), float("-inf"))
        vals = emb.max(dim=1)[0]
        nonempty = (keep.to(_C.int64).sum(dim=1) > 0).unsqueeze(-1)
        return _C.where(nonempty, vals, _C.zeros_like(vals))
    w = None if keep is None else keep.to(weight.dtype)
    if per_sample_weights is not None:
        w = per_sample_weights if w is None else w * per_sample_weights
    y = (emb if w is None else emb * w.unsqueeze(-1)).sum(dim=1)
    if mode == "mean":
        if keep is None:
            return y / width
        counts = keep.to(weight.dtype).sum(dim=1).clamp(min=1)
        y = y / counts.unsqueeze(-1)
    return y


def _renorm_rows(weight, rows, max_norm, norm_type):
    """PyTorch's embedding_renorm_: each listed row whose norm exceeds max_norm is scaled, in
    place and outside autograd, to max_norm / (norm + 1e-7)"""
    from ..autograd import no_grad
    with no_grad():
        for r in rows:
            row = weight[r]
            norm = float(row.norm(p=norm_type))
            if norm > max_norm:
                row.mul_(max_norm / (norm + 1e-7))


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """x > 0: x; else a * x with a ~ U(lower, upper) per element in training, (lower + upper) / 2
    in evaluation (ts_rrelu, src/nn/rrelu.c)"""
    return _C._nn_rrelu(input, float(lower), float(upper), bool(training), bool(inplace))


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


def _check_p(p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout_impl(input, p, training, inplace, feature, alpha):
    """ATen's _dropout_impl: a Bernoulli(1 - p) mask (one per channel when feature), scaled by
    1 / (1 - p); alpha: the SELU-preserving affine form of alpha dropout"""
    _check_p(p)
    if p == 0 or not training or input.numel() == 0:
        return input
    if p == 1:
        y = input * 0.0
    else:
        shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2) if feature else \
            tuple(input.shape)
        if feature and input.ndim < 2:
            raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
        noise = _C.bernoulli(_C.full(shape, 1.0 - p, dtype=input.dtype, device=input.device))
        if alpha:
            a = 1.0 / math.sqrt((_SELU_ALPHA * _SELU_ALPHA * p + 1) * (1 - p))
            b = (noise - 1) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p
            y = input * (noise * a) + b
        else:
            y = input * (noise / (1.0 - p))
    if inplace:
        input.copy_(y)
        return input
    return y


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _dropout_impl(input, p, training, inplace, False, True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _dropout_impl(input, p, training, inplace, True, True)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """channel-wise dropout of [N, C, L] or the unbatched [C, L]"""
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D "
                           "input. Note that dropout1d exists to provide channel-wise dropout on "
                           "inputs with 1 spatial dimension, a channel dimension, and an optional "
                           "batch dimension (i.e. 2D or 3D inputs).")
    # ts_feature_dropout (src/nn/feature_dropout.c): the unbatched [C, L] draws one mask of [C, 1]
    return _C._nn_feature_dropout(input, float(p), bool(training), input.ndim == 2, bool(inplace))


def dropout2d(input, p=0.5, training=True, inplace=False):
    _check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead. Note "
                      "that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 3D or 4D inputs).")
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise"
                      " 1D dropout behavior is desired - input is interpreted as shape (N, C, L)"
                      ", where C is the channel dim. This behavior will change in a future "
                      "release to interpret the input as one without a batch dimension, i.e. "
                      "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please "
                      "switch to using dropout1d instead.")
    return _dropout_impl(input, p, training, inplace, True, False)


def dropout3d(input, p=0.5, training=True, inplace=False):
    _check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead. Note "
                      "that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 4D or 5D inputs).")
    # ts_feature_dropout (src/nn/feature_dropout.c): all but a 5-D input are unbatched, as PyTorch
    return _C._nn_feature_dropout(input, float(p), bool(training), input.ndim != 5, bool(inplace))
