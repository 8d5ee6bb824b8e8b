"""tessera.nn.functional's padding and resampling (issue 52): pad, interpolate, upsample*,
pixel_shuffle, pixel_unshuffle under PyTorch's names and argument forms; each is one C call
(src/ops/pad_resample.c: ts_pad, ts_interpolate, ts_pixel_shuffle / ts_pixel_unshuffle)."""
import numbers
import warnings

from .. import _C

_PAD_MODES = {"constant": 0, "reflect": 1, "replicate": 2, "circular": 3}
_INTERP_MODES = {"nearest": 0, "nearest-exact": 1, "linear": 2, "bilinear": 3, "bicubic": 4,
                 "trilinear": 5, "area": 6}
_NEEDS = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}


def pad(input, pad, mode="constant", value=None):
    """torch.nn.functional.pad: pad is (left, right, top, bottom, front, back...) from the last dim"""
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if isinstance(pad, numbers.Integral):
        raise TypeError("pad(): argument 'pad' must be tuple of ints, not int")
    pad = tuple(int(p) for p in pad)
    return _C._nn_pad(input, pad, _PAD_MODES[mode], 0.0 if value is None else float(value))


def _is_integer(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) or (
        hasattr(x, "dtype") and not x.is_floating_point() and x.numel() == 1)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """torch.nn.functional.interpolate with PyTorch's index arithmetic (ts_interpolate, which also
    computes the output size from scale_factor, recomputed or not)"""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.dim() - 2
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "Input and output must have the same number of spatial dimensions, but got "
                    f"input with spatial dimensions of {list(input.shape[2:])} and output size of "
                    f"{size}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                    "output size in (o1, o2, ...,oK) format.")
            if not all(_is_integer(x) for x in size):
                raise TypeError("expected size to be one of int or Tuple[int] or Tuple[int, int] "
                                "or Tuple[int, int, int], but got size with types "
                                f"{[type(x) for x in size]}")
            size = tuple(int(s) for s in size)
        else:
            size = int(size)  # one size for every spatial dim
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(
                    "Input and scale_factor must have the same number of spatial dimensions, but "
                    f"got input with spatial dimensions of {list(input.shape[2:])} and "
                    f"scale_factor of shape {scale_factor}. Please provide input tensor in (N, C, "
                    "d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.")
            scale_factor = tuple(float(s) for s in scale_factor)
        else:
            scale_factor = float(scale_factor)
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and input.ndim == 4):
        raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes "
                         "and requires a 4-D tensor as input")
    if mode not in _INTERP_MODES or input.dim() not in (3, 4, 5):
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) for the "
            f"modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact "
            f"(got {mode})")
    if mode in _NEEDS and input.dim() != _NEEDS[mode]:
        raise NotImplementedError(
            f"Got {input.dim()}D input, but {mode} mode needs {_NEEDS[mode]}D input")
    return _C._nn_interpolate(input, size, scale_factor, _INTERP_MODES[mode], bool(align_corners),
                              bool(recompute_scale_factor), bool(antialias))


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def pixel_shuffle(input, upscale_factor):
    return _C._nn_pixel_shuffle(input, int(upscale_factor), False)


def pixel_unshuffle(input, downscale_factor):
    return _C._nn_pixel_shuffle(input, int(downscale_factor), True)
