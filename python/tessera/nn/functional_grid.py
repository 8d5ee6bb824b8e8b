"""F.affine_grid, F.grid_sample and F.linear_cross_entropy: PyTorch's argument forms read, then one
C call each (src/nn/grid_sample.c, src/nn/loss_linear_ce.c): every device, differentiable in
input, grid and theta as PyTorch's."""
from .. import _C

__all__ = ["affine_grid", "grid_sample", "linear_cross_entropy"]

_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}  # ts_grid_mode
_PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}  # ts_grid_padding


def affine_grid(theta, size, align_corners=None):
    """F.affine_grid: the sampling grid (N, H, W, 2) / (N, D, H, W, 3) of affine matrices theta
    (N, 2, 3) / (N, 3, 4) for an output of size (N, C, H, W) / (N, C, D, H, W) (ts_affine_grid)"""
    size = tuple(size)
    if len(size) not in (4, 5):
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  "affine transforms, respectively. Got size %s." % (list(size),))
    return _C._nn_affine_grid(theta, size, bool(align_corners))


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """F.grid_sample: input (N, C, H, W) with grid (N, Ho, Wo, 2), or (N, C, D, H, W) with grid
    (N, Do, Ho, Wo, 3), of (x, y[, z]) in [-1, 1]; bilinear (trilinear), nearest, bicubic (4-D);
    zeros / border / reflection padding (ts_grid_sample)"""
    if mode not in _MODES:
        raise ValueError("nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         "'nearest' or 'bicubic', but got: '%s'" % mode)
    if padding_mode not in _PADDINGS:
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         "'border', or 'reflection', but got: '%s'" % padding_mode)
    return _C._nn_grid_sample(input, grid, _MODES[mode], _PADDINGS[padding_mode],
                              bool(align_corners))


def _chunk_rows(options, input):
    """rows per chunk of the chunked form for PyTorch's LinearCrossEntropyOptions (0: the
    reference composition, options None): batch_chunk_size, else chunking_method
    "aspect_ratio[:f]" / "auto" (f * in_features rows), None: one chunk"""
    if options is None:
        return 0
    n = input.shape[0] if input.ndim == 2 else 1
    b = getattr(options, "batch_chunk_size", None)
    if b is None:
        method = getattr(options, "chunking_method", "auto")
        if method is None:
            b = n
        else:
            f = float(method.split(":", 1)[1]) if ":" in method else 1.0
            b = int(f * input.shape[-1])
    return max(1, min(int(b), max(n, 1)))


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,
                         reduction="mean", ignore_index=None, label_smoothing=0.0, options=None):
    """F.linear_cross_entropy: cross_entropy of linear(input, W, b)'s logits (src/nn/
    loss_linear_ce.c); with options (PyTorch's LinearCrossEntropyOptions) the chunked form, which
    never holds more than one chunk of logits, forward or backward"""
    from . import functional as F
    return _C._nn_linear_cross_entropy(input, linear_weight, target, linear_bias, weight,
                                       F._reduction(reduction), ignore_index,
                                       float(label_smoothing), _chunk_rows(options, input))
