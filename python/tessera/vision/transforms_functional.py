"""tessera.vision.transforms.functional: torchvision.transforms.functional's tensor kernels, with
torchvision's formulas (images are [..., C, H, W] tensors, float in [0, 1] or uint8):
adjust_brightness / contrast / saturation / hue, rgb_to_grayscale, gaussian_blur, affine, rotate
(torchvision's own sampling grid and fill mask), crop, resized_crop, resize, center_crop,
hflip, vflip, erase, pad, normalize, to_tensor, pil_to_tensor, to_pil_image. PIL images are
converted to tensors where torchvision does the same; a kernel torchvision runs on PIL itself
takes the tensor path here (to_tensor first)."""
import math

import tessera as ts
from tessera.nn import functional as F

_INT_TYPES = ("uint8", "int8", "int16", "int32", "int64")


def _is_int(img):
    return not img.dtype.is_floating_point


def _bound(img):
    return 1.0 if not _is_int(img) else 255.0


def _check(img, fn, channels=None):
    if not isinstance(img, ts.Tensor):
        raise TypeError(f"{fn}: img should be a Tensor, got {type(img).__name__}")
    if img.dim() < 3:
        raise TypeError(f"{fn}: expected a tensor of at least 3 dims [..., C, H, W], got "
                        f"{img.dim()}")
    if channels is not None and img.shape[-3] not in channels:
        raise TypeError(f"{fn}: input image tensor permitted channel values are {channels}, "
                        f"but found {img.shape[-3]}")


def rgb_to_grayscale(img, num_output_channels=1):
    """0.2989 R + 0.587 G + 0.114 B (an integer image truncated back to its dtype;
    ts_rgb_to_grayscale)"""
    _check(img, "rgb_to_grayscale", (1, 3))
    if num_output_channels not in (1, 3):
        raise ValueError("num_output_channels should be either 1 or 3")
    return ts._C._vision_rgb_to_grayscale(img, num_output_channels)


def adjust_brightness(img, brightness_factor):
    _check(img, "adjust_brightness", (1, 3))
    return ts._C._vision_adjust("brightness", img, float(brightness_factor))


def adjust_contrast(img, contrast_factor):
    _check(img, "adjust_contrast", (1, 3))
    return ts._C._vision_adjust("contrast", img, float(contrast_factor))


def adjust_saturation(img, saturation_factor):
    _check(img, "adjust_saturation", (1, 3))
    return ts._C._vision_adjust("saturation", img, float(saturation_factor))


def adjust_hue(img, hue_factor):
    _check(img, "adjust_hue", (1, 3))
    return ts._C._vision_adjust("hue", img, float(hue_factor))


def _blur_args(kernel_size, sigma):
    """torchvision's kernel_size and sigma forms, as two pairs"""
    if isinstance(kernel_size, int):
        kernel_size = [kernel_size, kernel_size]
    kernel_size = list(kernel_size)
    if len(kernel_size) != 2:
        raise ValueError(f"If kernel_size is a sequence its length should be 2. Got "
                         f"{len(kernel_size)}")
    for k in kernel_size:
        if k % 2 == 0 or k < 0:
            raise ValueError(f"kernel_size should have odd and positive integers. Got "
                             f"{kernel_size}")
    if sigma is None:
        sigma = [k * 0.15 + 0.35 for k in kernel_size]
    if isinstance(sigma, (int, float)):
        sigma = [float(sigma), float(sigma)]
    sigma = list(sigma)
    if len(sigma) == 1:
        sigma = [sigma[0], sigma[0]]
    if any(s <= 0 for s in sigma):
        raise ValueError(f"sigma should have positive values. Got {sigma}")
    return kernel_size, sigma


def gaussian_blur(img, kernel_size, sigma=None):
    """a separable Gaussian (torchvision's kernel), reflect padding, per channel
    (ts_gaussian_blur)"""
    (kx, ky), (sx, sy) = _blur_args(kernel_size, sigma)
    _check(img, "gaussian_blur")
    return ts._C._vision_gaussian_blur(img, kx, ky, float(sx), float(sy))


def _get_inverse_affine_matrix(center, angle, translate, scale, shear):
    rot = math.radians(angle)
    sx, sy = math.radians(shear[0]), math.radians(shear[1])
    cx, cy = center
    tx, ty = translate
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    m = [x / scale for x in (d, -b, 0.0, -c, a, 0.0)]
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty) + cx
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty) + cy
    return m


def _affine_output_size(m, w, h):
    """rotate(expand=True): torchvision's _compute_affine_output_size (the corners through the
    matrix, shifted to [0, w] x [0, h], rounded at 1e-4)"""
    pts = [(-0.5 * w, -0.5 * h), (-0.5 * w, 0.5 * h), (0.5 * w, 0.5 * h), (0.5 * w, -0.5 * h)]
    xs = [m[0] * x + m[1] * y + m[2] + 0.5 * w for x, y in pts]
    ys = [m[3] * x + m[4] * y + m[5] + 0.5 * h for x, y in pts]
    tol = 1e-4
    size = [math.ceil(math.trunc(max(v) / tol) * tol) - math.floor(math.trunc(min(v) / tol) * tol)
            for v in (xs, ys)]
    return int(size[0]), int(size[1])


def _affine_grid(m, w, h, ow, oh, dtype, device):
    """torchvision's _gen_affine_grid: output pixel centres through the inverse matrix, then
    normalised by the input size (align_corners=False)"""
    xs = ts.linspace(-ow * 0.5 + 0.5, ow * 0.5 - 0.5, steps=ow, dtype=ts.float64)
    ys = ts.linspace(-oh * 0.5 + 0.5, oh * 0.5 - 0.5, steps=oh, dtype=ts.float64)
    gy, gx = ts.meshgrid(ys, xs, indexing="ij")
    ix = (m[0] * gx + m[1] * gy + m[2]) / (0.5 * w)
    iy = (m[3] * gx + m[4] * gy + m[5]) / (0.5 * h)
    return ts.stack((ix, iy), dim=-1).unsqueeze(0).to(dtype).to(device)


def _grid_transform(img, m, interpolation, fill, ow=None, oh=None):
    if hasattr(interpolation, "value"):
        interpolation = interpolation.value
    if interpolation not in ("nearest", "bilinear"):
        raise ValueError(f"interpolation should be 'nearest' or 'bilinear', got "
                         f"{interpolation!r}")
    h, w = img.shape[-2], img.shape[-1]
    ow, oh = ow or w, oh or h
    lead = tuple(img.shape[:-3])
    x = img.reshape(-1, *img.shape[-3:])
    dtype = x.dtype if not _is_int(x) else ts.float32
    x = x.to(dtype)
    n, c = x.shape[0], x.shape[1]
    grid = _affine_grid(m, w, h, ow, oh, dtype, x.device).expand(n, oh, ow, 2)
    if fill is not None:
        x = ts.cat((x, ts.ones(n, 1, h, w, dtype=dtype, device=x.device)), dim=1)
    y = F.grid_sample(x, grid, mode=interpolation, padding_mode="zeros", align_corners=False)
    if fill is not None:
        mask = y[:, -1:].expand(n, c, oh, ow)
        y = y[:, :-1]
        fills = [float(fill)] * c if isinstance(fill, (int, float)) else [float(v) for v in fill]
        if len(fills) == 1:
            fills = fills * c
        if len(fills) != c:
            raise ValueError(f"The number of elements in 'fill' does not match the number of "
                             f"channels of the image ({len(fills)} != {c})")
        fimg = ts.tensor(fills, dtype=dtype, device=y.device).view(1, c, 1, 1).expand(n, c, oh,
                                                                                      ow)
        if interpolation == "nearest":
            y = ts.where(mask < 0.5, fimg, y)
        else:
            y = y * mask + (1.0 - mask) * fimg
    if _is_int(img):
        y = y.round().to(img.dtype)
    return y.reshape(*lead, c, oh, ow)


def _center_f(center, w, h):
    if center is None:
        return [0.0, 0.0]
    return [1.0 * (c - s * 0.5) for c, s in zip(center, (w, h))]


def rotate(img, angle, interpolation="nearest", expand=False, center=None, fill=None):
    """counter-clockwise by `angle` degrees about the centre (or `center`, in pixels)"""
    _check(img, "rotate")
    h, w = img.shape[-2], img.shape[-1]
    m = _get_inverse_affine_matrix(_center_f(center, w, h), -float(angle), [0.0, 0.0], 1.0,
                                   [0.0, 0.0])
    ow, oh = _affine_output_size(m, w, h) if expand else (w, h)
    return _grid_transform(img, m, interpolation, fill, ow, oh)


def affine(img, angle, translate, scale, shear, interpolation="nearest", fill=None,
           center=None):
    _check(img, "affine")
    if not isinstance(translate, (list, tuple)) or len(translate) != 2:
        raise ValueError("affine: translate should be a sequence of length 2")
    if scale <= 0.0:
        raise ValueError("affine: scale should be positive")
    if isinstance(shear, (int, float)):
        shear = [float(shear), 0.0]
    shear = list(shear)
    if len(shear) == 1:
        shear = [shear[0], shear[0]]
    h, w = img.shape[-2], img.shape[-1]
    m = _get_inverse_affine_matrix(_center_f(center, w, h), float(angle),
                                   [float(t) for t in translate], float(scale),
                                   [float(s) for s in shear])
    return _grid_transform(img, m, interpolation, fill)


def crop(img, top, left, height, width):
    """img[..., top:top+height, left:left+width], zero-padded where the box leaves the image"""
    h, w = img.shape[-2], img.shape[-1]
    right, bottom = left + width, top + height
    if left < 0 or top < 0 or right > w or bottom > h:
        pad = [max(-left, 0), max(right - w, 0), max(-top, 0), max(bottom - h, 0)]
        x = F.pad(img.to(ts.float32) if _is_int(img) else img, pad)
        x = x.to(img.dtype)
        top, left = max(top, 0), max(left, 0)
        return x[..., top:top + height, left:left + width]
    return img[..., top:bottom, left:right]


def resize_antialias(x, oh, ow):
    """x [..., H, W] (floating) resized as interpolate(mode='bilinear', antialias=True,
    align_corners=False): one weight matrix per axis (ts_resize_antialias)"""
    return ts._C._vision_resize_antialias(x, int(oh), int(ow))


def resize(img, size, interpolation="bilinear", max_size=None, antialias=True):
    from .transforms import Resize
    return Resize(size, interpolation, max_size, antialias)(img)


def resized_crop(img, top, left, height, width, size, interpolation="bilinear", antialias=True):
    return resize(crop(img, top, left, height, width), size, interpolation, antialias=antialias)


def center_crop(img, output_size):
    from .transforms import CenterCrop
    return CenterCrop(output_size)(img)


def hflip(img):
    return img.flip(-1)


def vflip(img):
    return img.flip(-2)


def erase(img, i, j, h, w, v, inplace=False):
    if not inplace:
        img = img.clone()
    img[..., i:i + h, j:j + w] = v
    return img


def normalize(tensor, mean, std, inplace=False):
    """(tensor - mean) / std per channel (ts_image_normalize)"""
    if isinstance(mean, (int, float)):
        mean = [mean]
    if isinstance(std, (int, float)):
        std = [std]
    return ts._C._vision_normalize(tensor, [float(x) for x in mean], [float(x) for x in std],
                                   bool(inplace))


def convert_image_dtype(image, dtype=ts.float32):
    """torchvision's convert_image_dtype (ts_convert_image_dtype)"""
    return ts._C._vision_convert_image_dtype(image, dtype)


def pad(img, padding, fill=0, padding_mode="constant"):
    if isinstance(padding, int):
        padding = [padding] * 4
    padding = list(padding)
    if len(padding) == 2:
        padding = [padding[0], padding[1], padding[0], padding[1]]
    if len(padding) != 4:
        raise ValueError("pad: padding must be an int or a sequence of 1, 2 or 4 ints")
    left, top, right, bottom = padding
    x = img.to(ts.float32) if _is_int(img) else img
    y = F.pad(x, [left, right, top, bottom], mode=padding_mode,
              value=float(fill) if padding_mode == "constant" else None)
    return y.to(img.dtype)


# ---------------------------------------------------------------- PIL images (Pillow optional)

def _is_pil(img):
    return type(img).__module__.startswith("PIL.")


def pil_to_tensor(pic):
    """a PIL image -> uint8 [C, H, W] (torchvision's pil_to_tensor)"""
    import numpy as np
    a = np.asarray(pic)
    if a.ndim == 2:
        a = a[:, :, None]
    return ts.tensor(np.ascontiguousarray(a.transpose(2, 0, 1)))


def to_tensor(pic):
    """a PIL image or an HWC NumPy array -> float32 [C, H, W] in [0, 1] (uint8 / 255)"""
    import numpy as np
    if _is_pil(pic):
        if pic.mode == "1":
            return pil_to_tensor(pic.convert("L")).to(ts.float32) / 255.0
        t = pil_to_tensor(pic)
        return t.to(ts.float32) / 255.0 if t.dtype == ts.uint8 else t.to(ts.float32)
    if isinstance(pic, np.ndarray):
        a = pic[:, :, None] if pic.ndim == 2 else pic
        t = ts.tensor(np.ascontiguousarray(a.transpose(2, 0, 1)))
        return t.to(ts.float32) / 255.0 if t.dtype == ts.uint8 else t
    raise TypeError(f"pic should be PIL Image or ndarray. Got {type(pic)}")


def to_pil_image(pic, mode=None):
    """a [C, H, W] tensor (float in [0, 1] or uint8) -> a PIL image"""
    import numpy as np
    from PIL import Image
    if isinstance(pic, ts.Tensor):
        if pic.dim() == 2:
            pic = pic.unsqueeze(0)
        if pic.dtype.is_floating_point:
            pic = (pic * 255).to(ts.uint8)
        a = pic.permute(1, 2, 0).contiguous().numpy()
    else:
        a = np.asarray(pic)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    return Image.fromarray(a, mode)


from ._interpolation import InterpolationMode  # noqa: E402,F401  (issue 75)
