"""Issue 52: F.affine_grid, F.grid_sample (4-D input: bilinear / nearest, zeros / border /
reflection padding) and F.linear_cross_entropy, as exact compositions over Tessera's ops (gather,
matmul, linear, cross_entropy): they run on every device and differentiate in input, grid and
theta as PyTorch does."""
import itertools
import math

from .. import _C

__all__ = ["affine_grid", "grid_sample", "linear_cross_entropy"]


def _base(n, align_corners, dtype, device):
    """PyTorch's linspace_from_neg_one: n points over [-1, 1] (pixel centres unless aligned)"""
    if n <= 1:
        return _C.zeros(max(n, 0), dtype=dtype, device=device)
    r = _C.linspace(-1.0, 1.0, n, dtype=dtype, device=device)
    return r if align_corners else r * ((n - 1) / n)


def affine_grid(theta, size, align_corners=None):
    """F.affine_grid: the sampling grid (N, H, W, 2) / (N, D, H, W, 3) of affine matrices theta
    (N, 2, 3) / (N, 3, 4) for an output of size (N, C, H, W) / (N, C, D, H, W)"""
    ac = bool(align_corners)
    size = tuple(size)
    if not theta.dtype.is_floating_point:
        raise ValueError("Expected theta to have floating point type, but got %s" % theta.dtype)
    if len(size) == 4:
        if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
            raise ValueError("Expected a batch of 2D affine matrices of shape Nx2x3 for size %s. "
                             "Got %s." % (list(size), list(theta.shape)))
        spatial = size[2:]
    elif len(size) == 5:
        if theta.ndim != 3 or tuple(theta.shape[1:]) != (3, 4):
            raise ValueError("Expected a batch of 3D affine matrices of shape Nx3x4 for size %s. "
                             "Got %s." % (list(size), list(theta.shape)))
        spatial = size[2:]
    else:
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  "affine transforms, respectively. Got size %s." % (list(size),))
    if min(size) <= 0:
        raise ValueError("Expected non-zero, positive output size. Got %s" % (list(size),))
    if theta.shape[0] != size[0]:
        raise ValueError("affine_grid(): theta has %d matrices, size a batch of %d"
                         % (theta.shape[0], size[0]))
    dt, dev = theta.dtype, theta.device
    nd = len(spatial)
    # coordinates ordered x (last dim), y, z, then the constant 1
    axes = [_base(spatial[nd - 1 - k], ac, dt, dev) for k in range(nd)]
    cols = []
    for k, a in enumerate(axes):
        view = [1] * nd
        view[nd - 1 - k] = a.shape[0]
        cols.append(a.reshape(view).expand(spatial))
    cols.append(_C.ones(spatial, dtype=dt, device=dev))
    base = _C.stack(cols, -1).reshape(1, -1, nd + 1)
    grid = base.matmul(theta.transpose(1, 2))
    return grid.reshape((size[0],) + tuple(spatial) + (nd,))


def _unnormalize(c, n, ac):
    return (c + 1) * ((n - 1) / 2) if ac else ((c + 1) * n - 1) / 2


def _reflect(c, lo2, hi2):
    """PyTorch's reflect_coordinates over [lo2 / 2, hi2 / 2]"""
    if lo2 == hi2:
        return c * 0
    mn, span = lo2 / 2, (hi2 - lo2) / 2
    c = (c - mn).abs()
    flips = (c / span).floor().detach()
    extra = c - flips * span
    odd = (flips - 2 * (flips / 2).floor()) > 0.5
    return _C.where(odd, span - extra + mn, extra + mn)


def _pad(c, n, padding_mode, ac):
    """PyTorch's compute_coordinates: border clips, reflection reflects then clips"""
    if padding_mode == "border":
        c = c.clamp(0, n - 1)
    elif padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (n - 1)) if ac else _reflect(c, -1, 2 * n - 1)
        c = c.clamp(0, n - 1)
    return c


def _cubic_weights(t):
    """the cubic convolution weights (A = -0.75) of taps -1, 0, 1, 2 at fraction t"""
    A = -0.75

    def cc1(x):
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def cc2(x):
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
    return [cc2(t + 1), cc1(t), cc1(1 - t), cc2(2 - t)]


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """F.grid_sample: input (N, C, H, W) with grid (N, Ho, Wo, 2), or (N, C, D, H, W) with grid
    (N, Do, Ho, Wo, 3), of (x, y[, z]) in [-1, 1]; bilinear (trilinear), nearest, bicubic
    (tensor-product cubic, A = -0.75);
    zeros / border / reflection padding"""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError("nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         "'nearest' or 'bicubic', but got: '%s'" % mode)
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         "'border', or 'reflection', but got: '%s'" % padding_mode)
    if input.ndim not in (4, 5):
        raise RuntimeError("grid_sample(): expected 4-D or 5-D input, got %d-D" % input.ndim)
    nd = input.ndim - 2
    if grid.ndim != input.ndim or grid.shape[-1] != nd or grid.shape[0] != input.shape[0]:
        raise RuntimeError("grid_sample(): expected grid of shape (%d, ..., %d) with %d dims, "
                           "got %s" % (input.shape[0], nd, input.ndim, list(grid.shape)))
    if grid.device != input.device:
        raise _C.DeviceError("grid_sample(): grid on %s, input on %s"
                             % (grid.device, input.device))
    if grid.dtype != input.dtype:
        raise RuntimeError("grid_sample(): expected grid and input to have the same dtype, got "
                           "%s and %s" % (grid.dtype, input.dtype))
    ac = bool(align_corners)
    N, C = input.shape[0], input.shape[1]
    S = tuple(input.shape[2:])
    out_sp = tuple(grid.shape[1:-1])
    P = math.prod(out_sp)
    numel = math.prod(S)
    flat = input.reshape(N, C, numel)
    # coordinate of spatial dim k (0: the outermost) is grid[..., nd - 1 - k]
    raw = [_unnormalize(grid[..., nd - 1 - k], S[k], ac).reshape(N, 1, P) for k in range(nd)]

    def tap(ints):
        """input at integer coordinates (float tensors, one a spatial dim), 0 outside"""
        valid, lin = None, None
        for k, i in enumerate(ints):
            ok = (i >= 0) & (i <= S[k] - 1)
            valid = ok if valid is None else valid & ok
            ic = i.clamp(0, S[k] - 1)
            lin = ic if lin is None else lin * S[k] + ic
        if numel == 0:
            return _C.zeros((N, C, P), dtype=input.dtype, device=input.device)
        v = flat.gather(2, lin.to(_C.int64).expand(N, C, P))
        return v * valid.to(input.dtype)

    if mode == "bicubic":
        lo = [c.detach().floor() for c in raw]
        ws = [_cubic_weights(c - f) for c, f in zip(raw, lo)]
        out = None
        for taps in itertools.product(range(4), repeat=nd):
            ints = [_pad(lo[k] + (t - 1), S[k], padding_mode, ac) for k, t in enumerate(taps)]
            w = None
            for k, t in enumerate(taps):
                w = ws[k][t] if w is None else w * ws[k][t]
            term = tap(ints) * w
            out = term if out is None else out + term
    else:
        src = [_pad(c, S[k], padding_mode, ac) for k, c in enumerate(raw)]
        if mode == "nearest":
            out = tap([c.detach().round() for c in src])
        else:
            lo = [c.detach().floor() for c in src]
            w1 = [c - f for c, f in zip(src, lo)]
            out = None
            for corner in range(1 << nd):
                bits = [(corner >> (nd - 1 - k)) & 1 for k in range(nd)]
                w = None
                for k, b in enumerate(bits):
                    wk = w1[k] if b else 1 - w1[k]
                    w = wk if w is None else w * wk
                term = tap([lo[k] + bits[k] for k in range(nd)]) * w
                out = term if out is None else out + term
    return out.reshape((N, C) + out_sp)


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
