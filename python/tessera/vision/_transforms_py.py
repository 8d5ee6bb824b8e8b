"""torchvision.transforms that run in Python on tessera tensors ([..., C, H, W]): Resize,
CenterCrop, RandomVerticalFlip, ConvertImageDtype, RandomApply, RandomChoice. Random draws come
from tessera's generator (tessera.manual_seed makes them reproducible)."""
import tessera as ts
from tessera.nn import functional as F

__all__ = ["Resize", "CenterCrop", "RandomVerticalFlip", "ConvertImageDtype", "RandomApply",
           "RandomChoice"]


def _hwc_u8(img):
    """a uint8 [H, W, C] image, as the built-in data sets' samples are (torchvision's PIL images):
    C in (1, 3, 4) and a first dimension that is not a channel count"""
    return (isinstance(img, ts.Tensor) and img.dtype == ts.uint8 and img.dim() == 3
            and img.shape[2] in (1, 3, 4) and img.shape[0] not in (1, 3, 4))


def _as_chw(fn):
    """__call__ on [..., C, H, W] made to take a uint8 [H, W, C] image too, giving one back (as
    torchvision's PIL path keeps a PIL image): CIFAR10's samples through Resize / CenterCrop"""
    def call(self, img):
        if _hwc_u8(img):
            return fn(self, img.permute(2, 0, 1)).permute(1, 2, 0).contiguous()
        return fn(self, img)
    call.__doc__, call.__name__ = fn.__doc__, fn.__name__
    return call


def _rand():
    return float(ts.rand(1))


def _hw(size, fn):
    if isinstance(size, int):
        return size, size
    if isinstance(size, (tuple, list)) and len(size) in (1, 2):
        return (size[0], size[0]) if len(size) == 1 else (size[0], size[1])
    raise TypeError("%s: size must be an int or a (h, w) sequence, got %r" % (fn, size))


class Resize:
    """Resize(size, interpolation="bilinear"|"nearest"): an int matches the smaller edge (the
    other keeps the aspect ratio, truncated), (h, w) is exact. Tensors: bilinear with
    align_corners=False, antialias=False unless antialias=True is given; uint8 is rounded back
    to uint8. A PIL image is resized by PIL (torchvision's PIL path)."""

    def __init__(self, size, interpolation="bilinear", max_size=None, antialias=None):
        if hasattr(interpolation, "value"):
            interpolation = interpolation.value
        if interpolation not in ("bilinear", "nearest"):
            raise ValueError("Resize: interpolation must be 'bilinear' or 'nearest', got %r"
                             % (interpolation,))
        if max_size is not None:
            raise ValueError("Resize: max_size is not supported")
        # antialias=None keeps this Resize's antialias=False default (torchvision >= 0.17 reads
        # None as True: pass antialias=True for its numbers when shrinking)
        self.size, self.interpolation, self.antialias = size, interpolation, bool(antialias)

    def _out_size(self, h, w):
        if isinstance(self.size, int) or (isinstance(self.size, (list, tuple))
                                          and len(self.size) == 1):
            s = self.size if isinstance(self.size, int) else self.size[0]
            return (s, int(s * w / h)) if h <= w else (int(s * h / w), s)
        return _hw(self.size, "Resize")

    @_as_chw
    def __call__(self, img):
        if type(img).__module__.startswith("PIL."):
            return self._pil(img)
        if img.dim() < 3:
            raise ValueError("Resize: expected [..., C, H, W], got %d dims" % img.dim())
        oh, ow = self._out_size(img.shape[-2], img.shape[-1])
        lead = tuple(img.shape[:-3])
        x = img.reshape(-1, *img.shape[-3:])
        dtype = x.dtype
        if not dtype.is_floating_point:
            x = x.to(ts.float32)
        if self.antialias and self.interpolation == "bilinear":
            from .transforms_functional import resize_antialias
            y = resize_antialias(x, oh, ow)
        else:
            kw = {"align_corners": False} if self.interpolation == "bilinear" else {}
            y = F.interpolate(x, size=(oh, ow), mode=self.interpolation, **kw)
        if not dtype.is_floating_point:
            y = y.round().clamp(0, 255 if dtype == ts.uint8 else None).to(dtype)
        return y.reshape(*lead, *y.shape[-3:])

    def _pil(self, img):
        from PIL import Image
        oh, ow = self._out_size(img.size[1], img.size[0])
        mode = Image.BILINEAR if self.interpolation == "bilinear" else Image.NEAREST
        return img.resize((ow, oh), mode)

    def __repr__(self):
        return "Resize(size=%s, interpolation=%s)" % (self.size, self.interpolation)


class CenterCrop:
    """The centre (h, w) window (torchvision's rounding: top = round((H - h) / 2))."""

    def __init__(self, size):
        self.size = _hw(size, "CenterCrop")

    @_as_chw
    def __call__(self, img):
        pil = type(img).__module__.startswith("PIL.")
        h, w = (img.size[1], img.size[0]) if pil else (img.shape[-2], img.shape[-1])
        th, tw = self.size
        if th > h or tw > w:
            raise ValueError("CenterCrop: crop %dx%d is larger than the image %dx%d"
                             % (th, tw, h, w))
        top, left = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
        if pil:
            return img.crop((left, top, left + tw, top + th))
        return img[..., top:top + th, left:left + tw]

    def __repr__(self):
        return "CenterCrop(size=%s)" % (self.size,)


class RandomVerticalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        if _rand() >= self.p:
            return img
        if type(img).__module__.startswith("PIL."):
            from PIL import Image
            return img.transpose(Image.FLIP_TOP_BOTTOM)
        return img.flip(-2)

    def __repr__(self):
        return "RandomVerticalFlip(p=%s)" % self.p


class ConvertImageDtype:
    """torchvision's convert_image_dtype (ts_convert_image_dtype): int -> float over the integer
    maximum, float -> int x (max + 1 - 1e-3) truncated, int -> int by a power-of-two factor."""

    def __init__(self, dtype):
        self.dtype = dtype

    def __call__(self, img):
        from .transforms_functional import convert_image_dtype
        return convert_image_dtype(img, self.dtype)

    def __repr__(self):
        return "ConvertImageDtype(%s)" % (self.dtype,)


class RandomApply:
    def __init__(self, transforms, p=0.5):
        self.transforms, self.p = list(transforms), p

    def __call__(self, img):
        if self.p < _rand():
            return img
        for t in self.transforms:
            img = t(img)
        return img


class RandomChoice:
    def __init__(self, transforms, p=None):
        self.transforms = list(transforms)
        if p is not None and len(p) != len(self.transforms):
            raise ValueError("RandomChoice: %d probabilities for %d transforms"
                             % (len(p), len(self.transforms)))
        self.p = p

    def __call__(self, img):
        w = self.p or [1.0] * len(self.transforms)
        u, acc = _rand() * sum(w), 0.0
        for t, wi in zip(self.transforms, w):
            acc += wi
            if u < acc:
                return t(img)
        return self.transforms[-1](img)
