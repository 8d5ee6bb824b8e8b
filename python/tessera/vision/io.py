"""tessera.vision.io — torchvision.io's read_image, decode_image and write_png through the C
library (stb_image: PNG, JPEG, BMP, GIF, TGA, PNM; ts_image_read / ts_image_decode /
ts_image_save_png). Images are uint8 [C,H,W] cpu tensors."""
import enum
import os

import tessera as ts

__all__ = ["ImageReadMode", "read_image", "decode_image", "decode_png", "decode_jpeg", "read_file",
           "write_png", "write_file"]


class ImageReadMode(enum.Enum):
    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4
    RGBA = 4


def _mode(mode, fn):
    if isinstance(mode, str):
        try:
            mode = ImageReadMode[mode.upper()]
        except KeyError:
            raise ValueError("%s: unknown mode %r" % (fn, mode)) from None
    if not isinstance(mode, ImageReadMode):
        raise TypeError("%s: mode must be an ImageReadMode, got %r" % (fn, mode))
    return mode.value


def read_file(path):
    """The file's bytes as a 1-D uint8 tensor."""
    with open(path, "rb") as f:
        data = f.read()
    import numpy as np

    return ts.from_numpy(np.frombuffer(data, dtype=np.uint8).copy())


def write_file(filename, data):
    """Writes a 1-D uint8 tensor's bytes."""
    with open(filename, "wb") as f:
        f.write(bytes(data.cpu().numpy().tobytes()))


def read_image(path, mode=ImageReadMode.UNCHANGED, apply_exif_orientation=False):
    """Decodes an image file to uint8 [C,H,W]; mode converts the channels (GRAY, RGB, ...)."""
    return ts._C._image_read(os.fspath(path), _mode(mode, "read_image"))


def decode_image(input, mode=ImageReadMode.UNCHANGED, apply_exif_orientation=False):
    """Decodes encoded image bytes (a 1-D uint8 tensor, or bytes; a path is read first)."""
    if isinstance(input, (str, os.PathLike)):
        return read_image(input, mode)
    if isinstance(input, ts.Tensor):
        if input.dtype != ts.uint8 or input.dim() != 1:
            raise ValueError("decode_image: expected a 1-D uint8 tensor of encoded bytes, got %s "
                             "%s" % (input.dtype, tuple(input.shape)))
        input = input.cpu().numpy().tobytes()
    return ts._C._image_decode(bytes(input), _mode(mode, "decode_image"))


decode_png = decode_image
decode_jpeg = decode_image


def write_png(input, filename, compression_level=6):
    """Writes a uint8 [C,H,W] tensor (C 1, 3 or 4) as a PNG file."""
    ts._C._image_save_png(os.fspath(filename), input)
