"""tessera.vision.transforms — torchvision.transforms that run in C on the loader's threads.

Each transform describes itself as a spec (_spec) that the C library builds; calling one on a
Tensor applies it at once. Lambda (any Python callable) makes the DataLoader use Python threads.
"""
from tessera import _C

__all__ = ["Compose", "ToTensor", "Normalize", "RandomCrop", "RandomHorizontalFlip", "Pad",
           "Grayscale", "Lambda",
           "Resize", "CenterCrop", "RandomVerticalFlip", "ConvertImageDtype", "RandomApply",
           "RandomChoice", "ColorJitter", "RandomResizedCrop", "RandomRotation", "RandomAffine",
           "GaussianBlur", "RandomErasing", "PILToTensor", "ToPILImage", "functional", "v2"]


def _pil_in(t, img):
    """a C transform given a PIL image, on PIL / NumPy as torchvision's PIL path: ToTensor
    converts; flips, crops, pads and Grayscale give a PIL image; Normalize takes tensors only"""
    import numpy as np
    from PIL import Image
    from . import transforms_functional as TF
    if isinstance(t, ToTensor):
        return TF.to_tensor(img)
    if isinstance(t, RandomHorizontalFlip):
        return img.transpose(Image.FLIP_LEFT_RIGHT) if float(_C.rand(1)) < t.p else img
    if isinstance(t, Grayscale):
        g = img.convert("L")
        return Image.merge("RGB", (g, g, g)) if t.num_output_channels == 3 else g
    if isinstance(t, Pad):
        return _pad_pil(img, t._ltrb, t.fill, t.padding_mode)
    if isinstance(t, RandomCrop):
        a = np.asarray(img)
        p = t.padding
        if p:
            a = np.pad(a, ((p, p), (p, p)) + ((0, 0),) * (a.ndim - 2))
        if isinstance(t, RandomCrop):
            h, w = a.shape[0], a.shape[1]
            if t.size > h or t.size > w:
                raise ValueError("RandomCrop: crop size %d is larger than the padded image %dx%d"
                                 % (t.size, h, w))
            i = int(_C.randint(0, h - t.size + 1, (1,)))
            j = int(_C.randint(0, w - t.size + 1, (1,)))
            a = a[i:i + t.size, j:j + t.size]
        return Image.fromarray(np.ascontiguousarray(a), img.mode)
    raise TypeError("%s: img should be a Tensor, got a PIL image (put it after ToTensor)"
                    % type(t).__name__)


def _chw_u8(img):
    """a uint8 [C, H, W] image (ImageFolder's loader, io.read_image, Resize / CenterCrop of one):
    C in (1, 3, 4) and a last dimension that is not a channel count. The C transforms take uint8
    images as [H, W, C], as the built-in data sets' samples (torchvision's PIL images) are."""
    from tessera import uint8
    return (getattr(img, "dtype", None) == uint8 and img.dim() == 3
            and img.shape[0] in (1, 3, 4) and img.shape[2] not in (1, 3, 4))


def _apply(spec, img):
    """a C transform on img; a uint8 [C, H, W] image goes through as [H, W, C] and a uint8
    result comes back as [C, H, W] (ToTensor gives float32 [C, H, W] either way)"""
    if not _chw_u8(img):
        return _C._apply_transform(spec, img)
    out = _C._apply_transform(spec, img.permute(1, 2, 0).contiguous())
    return out.permute(2, 0, 1).contiguous() if out.dtype == img.dtype and out.dim() == 3 else out


class _Transform:
    def _spec(self):
        raise NotImplementedError

    def __call__(self, img):
        if type(img).__module__.startswith("PIL."):
            return _pil_in(self, img)
        return _apply(self._spec(), img)

    def __repr__(self):
        return "%s()" % type(self).__name__


class Compose(_Transform):
    """Applies each transform in turn."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def _spec(self):
        if any(isinstance(t, Grayscale) for t in self._before_to_tensor()):
            return None  # Grayscale of the uint8 image (_gray_u8) runs in Python
        specs = [getattr(t, "_spec", None) for t in self.transforms]
        if not all(callable(s) for s in specs):
            return None  # a Python callable inside: the whole pipeline runs in Python
        built = [s() for s in specs]
        if any(b is None for b in built):
            return None  # a transform with no C form (Pad's other modes): Python
        return ("compose", built)

    def _before_to_tensor(self):
        out = []
        for t in self.transforms:
            if isinstance(t, ToTensor):
                return out
            out.append(t)
        return out

    def __call__(self, img):
        spec = None if type(img).__module__.startswith("PIL.") else self._spec()
        if spec is not None:
            return _apply(spec, img)
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self):
        return "Compose(%s)" % ", ".join(repr(t) for t in self.transforms)


class ToTensor(_Transform):
    """uint8 HWC image -> float32 CHW in [0, 1]."""

    def _spec(self):
        return ("to_tensor",)


class Normalize(_Transform):
    """(x - mean[c]) / std[c] per channel of a CHW image."""

    def __init__(self, mean, std, inplace=False):
        self.mean, self.std = tuple(float(m) for m in mean), tuple(float(s) for s in std)

    def _spec(self):
        return ("normalize", self.mean, self.std)

    def __repr__(self):
        return "Normalize(mean=%s, std=%s)" % (self.mean, self.std)


class RandomCrop(_Transform):
    """Pads by `padding` zeros on each side, then crops size x size at random."""

    def __init__(self, size, padding=0):
        if isinstance(size, (tuple, list)):
            if len(size) != 2 or size[0] != size[1]:
                raise ValueError("RandomCrop: only square crops are supported, got %r" % (size,))
            size = size[0]
        self.size, self.padding = int(size), int(padding or 0)

    def _spec(self):
        return ("random_crop", self.size, self.padding)


class RandomHorizontalFlip(_Transform):
    def __init__(self, p=0.5):
        self.p = float(p)

    def _spec(self):
        return ("hflip", self.p)


class Pad(_Transform):
    """torchvision's Pad: `padding` an int (every side), (left/right, top/bottom) or (left, top,
    right, bottom); `fill` a number (a tuple too for PIL images); `padding_mode` "constant",
    "edge", "reflect" or "symmetric" (numpy.pad's modes of those names). Tensors are [..., H, W]
    (uint8 samples of the built-in data sets [H, W, C], as elsewhere here). Zeros of one int on
    every side run in C on the loader's threads; the other forms in Python."""

    _MODES = ("constant", "edge", "reflect", "symmetric")

    def __init__(self, padding, fill=0, padding_mode="constant"):
        p = (padding,) if isinstance(padding, int) else padding
        if not isinstance(p, (tuple, list)) or len(p) not in (1, 2, 4) or \
                not all(isinstance(v, int) and not isinstance(v, bool) for v in p):
            raise TypeError("Pad: padding must be an int or a sequence of 1, 2 or 4 ints, got %r"
                            % (padding,))
        if padding_mode not in self._MODES:
            raise ValueError("Pad: padding_mode should be constant, edge, reflect or symmetric, "
                             "got %r" % (padding_mode,))
        if not isinstance(fill, (int, float, tuple, list)) or isinstance(fill, bool):
            raise TypeError("Pad: fill must be a number or a tuple, got %r" % (fill,))
        if padding_mode != "constant" and min(p) < 0:
            raise ValueError("Pad: padding can be negative only with padding_mode='constant'")
        self.padding, self.fill, self.padding_mode = padding, fill, padding_mode
        # left, top, right, bottom
        self._ltrb = tuple(p) * 4 if len(p) == 1 else \
            (p[0], p[1], p[0], p[1]) if len(p) == 2 else tuple(p)

    def _simple(self):
        return isinstance(self.padding, int) and self.padding >= 0 and self.fill == 0 and \
            self.padding_mode == "constant"

    def _spec(self):
        return ("pad", self.padding) if self._simple() else None

    def __call__(self, img):
        if type(img).__module__.startswith("PIL."):
            return _pad_pil(img, self._ltrb, self.fill, self.padding_mode)
        if self._simple():
            return _apply(self._spec(), img)
        return _pad_tensor(img, self._ltrb, self.fill, self.padding_mode)

    def __repr__(self):
        return "Pad(padding=%r, fill=%r, padding_mode=%s)" % (self.padding, self.fill,
                                                             self.padding_mode)


def _pad_pil(img, ltrb, fill, mode):
    import numpy as np
    from PIL import Image
    left, top, right, bottom = ltrb
    a = np.asarray(img)
    if min(ltrb) < 0:  # torchvision crops a negative side of a PIL image
        a = a[max(-top, 0):a.shape[0] - max(-bottom, 0), max(-left, 0):a.shape[1] - max(-right, 0)]
        left, top, right, bottom = (max(v, 0) for v in ltrb)
    widths = ((top, bottom), (left, right)) + ((0, 0),) * (a.ndim - 2)
    if mode != "constant":
        a = np.pad(a, widths, mode=mode)
    elif isinstance(fill, (tuple, list)) and a.ndim == 3:
        a = np.stack([np.pad(a[..., k], widths[:2], constant_values=fill[k % len(fill)])
                      for k in range(a.shape[2])], axis=2)
    else:
        a = np.pad(a, widths, constant_values=fill)
    return Image.fromarray(np.ascontiguousarray(a), img.mode)


def _pad_tensor(img, ltrb, fill, mode):
    """Pad of a [..., H, W] tensor (a uint8 [H, W, C] one through [C, H, W])"""
    import tessera
    from tessera import uint8
    from tessera.nn import functional as F
    if not isinstance(fill, (int, float)):
        raise TypeError("Pad: a tensor image takes a number as fill, got %r" % (fill,))
    if img.dim() < 2:
        raise ValueError("Pad: expected an image of at least 2 dims [..., H, W], got %d"
                         % img.dim())
    hwc = img.dtype == uint8 and img.dim() == 3 and not _chw_u8(img)
    x = img.permute(2, 0, 1) if hwc else img
    left, top, right, bottom = ltrb
    if mode == "symmetric":
        def sym(t, dim, a, b):
            n = t.shape[dim]
            if a > n or b > n:
                raise ValueError("Pad: symmetric padding of %d / %d is larger than the dim %d"
                                 % (a, b, n))
            parts = [t.narrow(dim, 0, a).flip(dim)] if a else []
            parts.append(t)
            if b:
                parts.append(t.narrow(dim, n - b, b).flip(dim))
            return tessera.cat(parts, dim)
        x = sym(sym(x, x.dim() - 1, left, right), x.dim() - 2, top, bottom)
    elif mode == "constant":
        x = F.pad(x, (left, right, top, bottom), mode="constant", value=fill)
    else:
        lead = x.shape[:-2]
        x3 = x.reshape((-1,) + tuple(x.shape[-2:]))
        m = "replicate" if mode == "edge" else "reflect"
        x3 = F.pad(x3, (left, right, top, bottom), mode=m)
        x = x3.reshape(tuple(lead) + tuple(x3.shape[-2:]))
    return x.permute(1, 2, 0).contiguous() if hwc else x


class Grayscale(_Transform):
    """Luminance of a CHW image (1 or 3 channels) repeated num_output_channels times."""

    def __init__(self, num_output_channels=1):
        if num_output_channels not in (1, 3):
            raise ValueError("Grayscale: num_output_channels must be 1 or 3")
        self.num_output_channels = num_output_channels

    def _spec(self):
        return ("gray", self.num_output_channels)

    def __call__(self, img):
        from tessera import Tensor, uint8
        if isinstance(img, Tensor) and img.dtype == uint8 and img.dim() in (2, 3):
            return _gray_u8(img, self.num_output_channels)
        return super().__call__(img)


def _gray_u8(img, n):
    """Grayscale of a uint8 image before ToTensor, as torchvision's PIL path: PIL's "L" of an RGB
    image ((19595 R + 38470 G + 7471 B + 2**15) >> 16); [H, W] (an "L" image) or [H, W, C] in,
    [H, W] (n 1) or [H, W, 3] (n 3) out; a [C, H, W] image gives [n, H, W]."""
    import numpy as np
    from tessera import tensor
    a = img.numpy()
    chw = _chw_u8(img)
    if chw:
        a = a.transpose(1, 2, 0)
    if a.ndim == 3 and a.shape[2] not in (1, 3, 4):
        raise ValueError("Grayscale: a uint8 image is [H, W], [H, W, C] or [C, H, W] with C 1, 3 "
                         "or 4, got %s" % (list(img.shape),))
    if a.ndim == 2 or a.shape[2] == 1:
        g = a if a.ndim == 2 else a[:, :, 0]
    else:
        c = a[:, :, :3].astype(np.int64)
        g = ((c[:, :, 0] * 19595 + c[:, :, 1] * 38470 + c[:, :, 2] * 7471 + 0x8000) >> 16)
        g = g.astype(np.uint8)
    out = np.repeat(g[:, :, None], 3, axis=2) if n == 3 else g
    if chw:
        out = out[None] if n == 1 else out.transpose(2, 0, 1)
    return tensor(np.ascontiguousarray(out))


class Lambda:
    """A Python function as a transform (the DataLoader then runs the data set on Python
    threads)."""

    def __init__(self, lambd):
        if not callable(lambd):
            raise TypeError("Lambda: argument should be callable, got %s" % type(lambd).__name__)
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)


from ._transforms_py import (CenterCrop, ConvertImageDtype, RandomApply, RandomChoice,  # noqa: E402
                             RandomVerticalFlip, Resize)
from ._transforms_aug import (ColorJitter, GaussianBlur, RandomAffine,  # noqa: E402
                              RandomErasing, RandomResizedCrop, RandomRotation)
from . import transforms_functional as functional  # noqa: E402
from ._interpolation import InterpolationMode  # noqa: E402,F401  (issue 75)


class PILToTensor:
    """a PIL image -> uint8 [C, H, W]"""

    def __call__(self, pic):
        return functional.pil_to_tensor(pic)

    def __repr__(self):
        return "PILToTensor()"


class ToPILImage:
    def __init__(self, mode=None):
        self.mode = mode

    def __call__(self, pic):
        return functional.to_pil_image(pic, self.mode)

    def __repr__(self):
        return "ToPILImage()"


from . import _transforms_v2 as v2  # noqa: E402
import sys as _sys  # noqa: E402

# import tessera.vision.transforms.functional / .v2 as torchvision's submodules import
_sys.modules[__name__ + ".functional"] = functional
_sys.modules[__name__ + ".v2"] = v2
