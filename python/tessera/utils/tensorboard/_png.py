"""A minimal PNG encoder (8-bit grey, RGB or RGBA; filter 0; zlib) for TensorBoard image summaries.

tessera.vision's PNG writer (ts_image_save_png, stb_image_write) writes only to a path and is absent
from builds without libstb-dev, while an image summary needs the PNG bytes in memory in every build.
"""
import struct
import zlib

_COLOR_TYPE = {1: 0, 3: 2, 4: 6}  # channels -> PNG colour type (grey, truecolour, truecolour+alpha)


def _chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def encode_png(pixels, height, width, channels):
    """pixels: bytes of an interleaved [height, width, channels] uint8 image, rows top first."""
    if channels not in _COLOR_TYPE:
        raise ValueError(f"encode_png: channels must be 1, 3 or 4, got {channels}")
    if height < 1 or width < 1:
        raise ValueError(f"encode_png: cannot encode a {height} x {width} image")
    stride = width * channels
    if len(pixels) != height * stride:
        raise ValueError(f"encode_png: {len(pixels)} bytes for a {height}x{width}x{channels} image")
    raw = b"".join(b"\x00" + pixels[y * stride:(y + 1) * stride] for y in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, _COLOR_TYPE[channels], 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(raw, 6)) +
            _chunk(b"IEND", b""))
