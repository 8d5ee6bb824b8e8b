"""tessera.nn.functional.embedding_bag (issue 52): sum, mean and max through ts_embedding_bag
(src/nn/embedding_bag.c) in one call of ts_embedding_bag_ex, the offsets checked here first for
PyTorch's messages; max_norm renorms the used rows of weight in place first (PyTorch's
embedding_renorm_, in C)."""
from .. import _C


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
    bag gives zeros); entries equal to padding_idx are left out of their bag (ts_embedding_bag)."""
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
    return _bag_c(input, weight, offsets, mode, per_sample_weights, padding_idx,
                  include_last_offset, max_norm, norm_type)


def _bag_c(input, weight, offsets, mode, per_sample_weights, padding_idx, include_last_offset,
           max_norm=None, norm_type=2.0):
    """one C call (ts_embedding_bag_ex: padding_idx normalised, max_norm's renorm of the rows
    used, then the bags): the offsets checked here first for their messages (_bags'), an index
    out of range an IndexError, a padding_idx out of range an AssertionError (PyTorch's)"""
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
                                    None if padding_idx is None else int(padding_idx),
                                    include_last_offset,
                                    None if max_norm is None else float(max_norm),
                                    float(norm_type))
    except ValueError as e:
        if "padding_idx must be within the number of embeddings" in str(e):
            raise AssertionError("padding_idx must be within the number of embeddings") from None
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


