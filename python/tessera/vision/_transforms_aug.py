"""torchvision's augmentation transforms on tessera tensors ([..., C, H, W]): ColorJitter,
RandomResizedCrop, RandomRotation, RandomAffine, GaussianBlur, RandomErasing, with torchvision's
parameter draws (their order and ranges) from tessera's generator and the kernels of
transforms_functional.py. A PIL image in becomes a tensor first (to_tensor's uint8 values, as
pil_to_tensor) and goes back to PIL after, where torchvision would return PIL."""
import math
import numbers

import tessera as ts

from . import transforms_functional as TF
from ._transforms_py import _as_chw  # a data set's uint8 [H, W, C] sample in and out

__all__ = ["ColorJitter", "RandomResizedCrop", "RandomRotation", "RandomAffine", "GaussianBlur",
           "RandomErasing"]


def _uniform(lo, hi):
    return float(lo) + (float(hi) - float(lo)) * float(ts.rand(1))


def _randint(lo, hi):
    """an int in [lo, hi)"""
    return int(ts.randint(lo, hi, (1,)))


def _pil_wrap(fn, img):
    if TF._is_pil(img):
        return TF.to_pil_image(fn(TF.pil_to_tensor(img)), img.mode)
    return fn(img)


def _range(value, name, center=1.0, bound=(0, float("inf")), clip_first_on_zero=True):
    if isinstance(value, numbers.Number):
        if value < 0:
            raise ValueError(f"If {name} is a single number, it must be non negative.")
        value = [center - float(value), center + float(value)]
        if clip_first_on_zero:
            value[0] = max(value[0], 0.0)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        value = [float(value[0]), float(value[1])]
    else:
        raise TypeError(f"{name} should be a single number or a list/tuple with length 2.")
    if not bound[0] <= value[0] <= value[1] <= bound[1]:
        raise ValueError(f"{name} values should be between {bound}, but got {value}.")
    return None if value[0] == value[1] == center else tuple(value)


class ColorJitter:
    """brightness, contrast, saturation (factors around 1) and hue (a shift in [-0.5, 0.5]),
    applied in a random order, each with a factor drawn uniformly from its range"""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        self.brightness = _range(brightness, "brightness")
        self.contrast = _range(contrast, "contrast")
        self.saturation = _range(saturation, "saturation")
        self.hue = _range(hue, "hue", center=0, bound=(-0.5, 0.5), clip_first_on_zero=False)

    @staticmethod
    def get_params(brightness, contrast, saturation, hue):
        order = ts.randperm(4).tolist()
        draw = [None if r is None else _uniform(r[0], r[1])
                for r in (brightness, contrast, saturation, hue)]
        return (order, *draw)

    def _apply(self, img):
        order, b, c, s, h = self.get_params(self.brightness, self.contrast, self.saturation,
                                            self.hue)
        fns = (TF.adjust_brightness, TF.adjust_contrast, TF.adjust_saturation, TF.adjust_hue)
        for k in order:
            factor = (b, c, s, h)[k]
            if factor is not None:
                img = fns[k](img, factor)
        return img

    @_as_chw
    def __call__(self, img):
        return _pil_wrap(self._apply, img)

    def __repr__(self):
        return (f"ColorJitter(brightness={self.brightness}, contrast={self.contrast}, "
                f"saturation={self.saturation}, hue={self.hue})")


def _hw(size, fn):
    if isinstance(size, int):
        return (size, size)
    if isinstance(size, (tuple, list)) and len(size) in (1, 2):
        return (size[0], size[0]) if len(size) == 1 else (size[0], size[1])
    raise TypeError(f"{fn}: size should be an int or a sequence of 1 or 2 ints, got {size!r}")


class RandomResizedCrop:
    """a crop of random area (scale of the image's) and aspect ratio, resized to size"""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation="bilinear", antialias=True):
        self.size = _hw(size, "RandomResizedCrop")
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            raise ValueError("RandomResizedCrop: scale and ratio should be of kind (min, max)")
        self.scale, self.ratio = tuple(scale), tuple(ratio)
        self.interpolation, self.antialias = interpolation, antialias

    @staticmethod
    def get_params(img, scale, ratio):
        height, width = _image_hw(img)
        area = height * width
        log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
        for _ in range(10):
            target_area = area * _uniform(scale[0], scale[1])
            aspect = math.exp(_uniform(log_ratio[0], log_ratio[1]))
            w = int(round(math.sqrt(target_area * aspect)))
            h = int(round(math.sqrt(target_area / aspect)))
            if 0 < w <= width and 0 < h <= height:
                return _randint(0, height - h + 1), _randint(0, width - w + 1), h, w
        in_ratio = float(width) / float(height)
        if in_ratio < min(ratio):
            w, h = width, int(round(width / min(ratio)))
        elif in_ratio > max(ratio):
            h, w = height, int(round(height * max(ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    @_as_chw
    def __call__(self, img):
        i, j, h, w = self.get_params(img, self.scale, self.ratio)
        return _pil_wrap(lambda x: TF.resized_crop(x, i, j, h, w, list(self.size),
                                                   self.interpolation, self.antialias), img)

    def __repr__(self):
        return f"RandomResizedCrop(size={self.size}, scale={self.scale}, ratio={self.ratio})"


def _image_hw(img):
    if TF._is_pil(img):
        return img.size[1], img.size[0]
    return img.shape[-2], img.shape[-1]


def _degrees(degrees, name):
    if isinstance(degrees, numbers.Number):
        if degrees < 0:
            raise ValueError(f"If {name} is a single number, it must be positive.")
        return [-float(degrees), float(degrees)]
    if not isinstance(degrees, (tuple, list)) or len(degrees) != 2:
        raise ValueError(f"If {name} is a sequence, it must be of len 2.")
    return [float(d) for d in degrees]


class RandomRotation:
    """rotate by an angle drawn uniformly from degrees (torchvision's fill=0 mask)"""

    def __init__(self, degrees, interpolation="nearest", expand=False, center=None, fill=0):
        self.degrees = _degrees(degrees, "degrees")
        self.interpolation, self.expand, self.center, self.fill = (interpolation, expand,
                                                                   center, fill)

    @staticmethod
    def get_params(degrees):
        return _uniform(degrees[0], degrees[1])

    @_as_chw
    def __call__(self, img):
        angle = self.get_params(self.degrees)
        return _pil_wrap(lambda x: TF.rotate(x, angle, self.interpolation, self.expand,
                                             self.center, self.fill), img)

    def __repr__(self):
        return f"RandomRotation(degrees={self.degrees}, interpolation={self.interpolation})"


class RandomAffine:
    """rotation, translation (fractions of the width / height), scale and shear drawn as
    torchvision draws them, one affine resampling"""

    def __init__(self, degrees, translate=None, scale=None, shear=None, interpolation="nearest",
                 fill=0, center=None):
        self.degrees = _degrees(degrees, "degrees")
        if translate is not None:
            if len(translate) != 2 or not all(0.0 <= t <= 1.0 for t in translate):
                raise ValueError("translate should be a sequence of 2 values between 0 and 1")
        if scale is not None:
            if len(scale) != 2 or any(s <= 0 for s in scale):
                raise ValueError("scale values should be positive")
        if shear is not None:
            if isinstance(shear, numbers.Number):
                shear = _degrees(shear, "shear")
            elif len(shear) not in (2, 4):
                raise ValueError("shear should be a sequence of length 2 or 4")
            shear = [float(s) for s in shear]
        self.translate, self.scale, self.shear = translate, scale, shear
        self.interpolation, self.fill, self.center = interpolation, fill, center

    @staticmethod
    def get_params(degrees, translate, scale_ranges, shears, img_size):
        angle = _uniform(degrees[0], degrees[1])
        if translate is not None:
            max_dx, max_dy = float(translate[0] * img_size[0]), float(translate[1] * img_size[1])
            tx = int(round(_uniform(-max_dx, max_dx)))
            ty = int(round(_uniform(-max_dy, max_dy)))
            translations = (tx, ty)
        else:
            translations = (0, 0)
        scale = _uniform(scale_ranges[0], scale_ranges[1]) if scale_ranges is not None else 1.0
        shear_x = shear_y = 0.0
        if shears is not None:
            shear_x = _uniform(shears[0], shears[1])
            if len(shears) == 4:
                shear_y = _uniform(shears[2], shears[3])
        return angle, translations, scale, (shear_x, shear_y)

    @_as_chw
    def __call__(self, img):
        h, w = _image_hw(img)
        angle, tr, sc, sh = self.get_params(self.degrees, self.translate, self.scale,
                                            self.shear, [w, h])
        return _pil_wrap(lambda x: TF.affine(x, angle, list(tr), sc, list(sh),
                                             self.interpolation, self.fill, self.center), img)

    def __repr__(self):
        return (f"RandomAffine(degrees={self.degrees}, translate={self.translate}, "
                f"scale={self.scale}, shear={self.shear})")


class GaussianBlur:
    """a Gaussian blur with sigma drawn uniformly from sigma (a number: that sigma)"""

    def __init__(self, kernel_size, sigma=(0.1, 2.0)):
        ks = _hw(kernel_size, "GaussianBlur")
        for k in ks:
            if k <= 0 or k % 2 == 0:
                raise ValueError("Kernel size value should be an odd and positive number.")
        self.kernel_size = ks
        if isinstance(sigma, numbers.Number):
            if sigma <= 0:
                raise ValueError("If sigma is a single number, it must be positive.")
            sigma = (float(sigma), float(sigma))
        elif isinstance(sigma, (tuple, list)) and len(sigma) == 2:
            if not 0.0 < sigma[0] <= sigma[1]:
                raise ValueError("sigma values should be positive and of the form (min, max).")
        else:
            raise ValueError("sigma should be a single number or a list/tuple with length 2.")
        self.sigma = tuple(float(s) for s in sigma)

    @staticmethod
    def get_params(sigma_min, sigma_max):
        return _uniform(sigma_min, sigma_max)

    @_as_chw
    def __call__(self, img):
        s = self.get_params(self.sigma[0], self.sigma[1])
        return _pil_wrap(lambda x: TF.gaussian_blur(x, list(self.kernel_size), [s, s]),
                         img)

    def __repr__(self):
        return f"GaussianBlur(kernel_size={self.kernel_size}, sigma={self.sigma})"


class RandomErasing:
    """with probability p, a rectangle of random area (scale) and aspect ratio (ratio) set to
    value (a number, per-channel numbers, or 'random': standard normal values). Tensors only."""

    def __init__(self, p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0, inplace=False):
        if not isinstance(value, (numbers.Number, str, tuple, list)):
            raise TypeError("Argument value should be either a number or str or a sequence")
        if isinstance(value, str) and value != "random":
            raise ValueError("If value is str, it should be 'random'")
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            raise ValueError("Scale and ratio should be of kind (min, max)")
        if scale[0] < 0 or scale[1] > 1:
            raise ValueError("Scale should be between 0 and 1")
        if p < 0 or p > 1:
            raise ValueError("Random erasing probability should be between 0 and 1")
        self.p, self.scale, self.ratio, self.value, self.inplace = p, scale, ratio, value, inplace

    @staticmethod
    def get_params(img, scale, ratio, value=None):
        c, img_h, img_w = img.shape[-3], img.shape[-2], img.shape[-1]
        area = img_h * img_w
        log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
        for _ in range(10):
            erase_area = area * _uniform(scale[0], scale[1])
            aspect = math.exp(_uniform(log_ratio[0], log_ratio[1]))
            h = int(round(math.sqrt(erase_area * aspect)))
            w = int(round(math.sqrt(erase_area / aspect)))
            if not (h < img_h and w < img_w):
                continue
            if value is None:
                v = ts.randn(c, h, w, dtype=img.dtype if img.dtype.is_floating_point
                             else ts.float32).to(img.dtype).to(img.device)
            else:
                v = ts.tensor(value, dtype=img.dtype).view(-1, 1, 1).to(img.device)
            return _randint(0, img_h - h + 1), _randint(0, img_w - w + 1), h, w, v
        return 0, 0, img_h, img_w, img

    @_as_chw
    def __call__(self, img):
        if TF._is_pil(img):
            raise TypeError("RandomErasing: img should be a Tensor (torchvision erases tensors "
                            "only); put it after ToTensor")
        if float(ts.rand(1)) >= self.p:
            return img
        value = self.value
        if isinstance(value, numbers.Number):
            value = [float(value)]
        elif isinstance(value, str):
            value = None
        elif isinstance(value, (tuple, list)):
            value = [float(v) for v in value]
        if value is not None and len(value) not in (1, img.shape[-3]):
            raise ValueError("If value is a sequence, it should have either a single value or "
                             f"{img.shape[-3]} (number of input channels)")
        i, j, h, w, v = self.get_params(img, self.scale, self.ratio, value)
        return TF.erase(img, i, j, h, w, v, self.inplace)

    def __repr__(self):
        return (f"RandomErasing(p={self.p}, scale={self.scale}, ratio={self.ratio}, "
                f"value={self.value}, inplace={self.inplace})")
