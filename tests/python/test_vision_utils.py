"""tessera.vision.utils.make_grid (exact layout against a NumPy construction) and save_image /
tessera.vision.io (the PNG decoded here with zlib: PNG is zlib-compressed filtered scanlines)."""
import io as pyio
import struct
import zlib

import numpy as np
import pytest

import tessera as ts
from tessera.vision import io as vio
from tessera.vision import utils


def _grid_ref(x, nrow, padding, pad_value):
    b, c, h, w = x.shape
    if c == 1:
        x = np.repeat(x, 3, 1)
        c = 3
    cols = min(nrow, b)
    rows = -(-b // cols)
    g = np.full((c, rows * (h + padding) + padding, cols * (w + padding) + padding), pad_value,
                x.dtype)
    for k in range(b):
        y0, x0 = (k // cols) * (h + padding) + padding, (k % cols) * (w + padding) + padding
        g[:, y0:y0 + h, x0:x0 + w] = x[k]
    return g


@pytest.mark.parametrize("b,c,nrow,padding,pad_value", [
    (5, 3, 2, 1, 0.5), (8, 1, 8, 2, 0.0), (3, 3, 4, 0, 1.0), (7, 1, 3, 3, 0.25)])
def test_make_grid_layout(b, c, nrow, padding, pad_value):
    x = np.random.default_rng(0).random((b, c, 4, 5)).astype(np.float32)
    got = utils.make_grid(ts.tensor(x), nrow=nrow, padding=padding, pad_value=pad_value).numpy()
    np.testing.assert_array_equal(got, _grid_ref(x, nrow, padding, pad_value))


def test_make_grid_inputs_and_normalize():
    x = np.random.default_rng(1).random((3, 3, 4, 4)).astype(np.float32) * 4 - 1
    lst = utils.make_grid([ts.tensor(t) for t in x], nrow=3).numpy()
    np.testing.assert_array_equal(lst, _grid_ref(x, 3, 2, 0.0))
    one = utils.make_grid(ts.tensor(x[0])).numpy()  # a single image is returned as is
    np.testing.assert_array_equal(one, x[0])
    grey = utils.make_grid(ts.tensor(x[0, :1])).numpy()
    np.testing.assert_array_equal(grey, np.repeat(x[0, :1], 3, 0))
    got = utils.make_grid(ts.tensor(x), nrow=3, padding=0, normalize=True).numpy()
    want = (x - x.min()) / (x.max() - x.min())
    np.testing.assert_allclose(got, _grid_ref(want, 3, 0, 0.0), atol=1e-6)
    got = utils.make_grid(ts.tensor(x), padding=0, normalize=True, value_range=(0.0, 2.0)).numpy()
    np.testing.assert_allclose(got, _grid_ref(np.clip(x, 0, 2) / 2, 8, 0, 0.0), atol=1e-6)
    got = utils.make_grid(ts.tensor(x), padding=0, normalize=True, scale_each=True).numpy()
    each = np.stack([(t - t.min()) / (t.max() - t.min()) for t in x])
    np.testing.assert_allclose(got, _grid_ref(each, 8, 0, 0.0), atol=1e-6)
    with pytest.raises(TypeError, match="value_range"):
        utils.make_grid(ts.tensor(x), normalize=True, value_range=[0, 1])


def _decode_png(data):
    """8-bit non-interlaced PNG -> uint8 [H, W, C] (all five scanline filters)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        assert zlib.crc32(kind + body) == struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    assert depth == 8 and interlace == 0
    c = {0: 1, 2: 3, 4: 2, 6: 4}[ctype]
    raw = zlib.decompress(idat)
    out = np.zeros((h, w * c), np.int64)
    stride = w * c + 1
    for y in range(h):
        f, line = raw[y * stride], np.frombuffer(raw[y * stride + 1:(y + 1) * stride], np.uint8)
        prev = out[y - 1] if y else np.zeros(w * c, np.int64)
        cur = np.zeros(w * c, np.int64)
        for i in range(w * c):
            a = cur[i - c] if i >= c else 0
            b, d = prev[i], prev[i - c] if i >= c else 0
            if f == 0:
                p = 0
            elif f == 1:
                p = a
            elif f == 2:
                p = b
            elif f == 3:
                p = (a + b) // 2
            else:
                pa, pb, pc = abs(b - d), abs(a - d), abs(a + b - 2 * d)
                p = a if pa <= pb and pa <= pc else (b if pb <= pc else d)
            cur[i] = (int(line[i]) + p) % 256
        out[y] = cur
    return out.reshape(h, w, c).astype(np.uint8)


def test_save_image_png_reads_back(tmp_path):
    x = np.random.default_rng(2).random((4, 3, 5, 6)).astype(np.float32)
    x[0, 0, 0, 0], x[0, 0, 0, 1] = -0.2, 1.3  # clamped
    path = tmp_path / "grid.png"
    utils.save_image(ts.tensor(x), str(path), nrow=2, padding=1)
    grid = _grid_ref(x, 2, 1, 0.0)
    want = np.clip(np.floor(grid.astype(np.float64) * 255 + 0.5), 0, 255).astype(np.uint8)
    got = _decode_png(path.read_bytes())
    np.testing.assert_array_equal(got, want.transpose(1, 2, 0))
    # the C decoder (stb_image) agrees; a file object gets the same bytes
    np.testing.assert_array_equal(vio.read_image(path).numpy(), want)
    buf = pyio.BytesIO()
    utils.save_image(ts.tensor(x), buf, nrow=2, padding=1)
    np.testing.assert_array_equal(_decode_png(buf.getvalue()), want.transpose(1, 2, 0))


def test_write_png_grey_rgba_and_decode(tmp_path):
    g = (np.arange(35).reshape(5, 7) * 7 % 256).astype(np.uint8)
    vio.write_png(ts.tensor(g[None]), tmp_path / "g.png")
    np.testing.assert_array_equal(_decode_png((tmp_path / "g.png").read_bytes())[..., 0], g)
    rgba = (np.arange(4 * 3 * 2).reshape(4, 3, 2) * 11 % 256).astype(np.uint8)
    vio.write_png(ts.tensor(rgba), tmp_path / "a.png")
    np.testing.assert_array_equal(_decode_png((tmp_path / "a.png").read_bytes()),
                                  rgba.transpose(1, 2, 0))
    data = vio.read_file(tmp_path / "a.png")
    np.testing.assert_array_equal(vio.decode_image(data).numpy(), rgba)
    rgb = vio.decode_image(data, vio.ImageReadMode.RGB).numpy()
    np.testing.assert_array_equal(rgb, rgba[:3])


def test_errors(tmp_path):
    with pytest.raises(ts.DtypeError, match="uint8"):
        vio.write_png(ts.rand(3, 4, 4), tmp_path / "x.png")
    with pytest.raises(ts.TesseraError, match="C must be 1, 3 or 4"):
        vio.write_png(ts.zeros(2, 4, 4, dtype=ts.uint8), tmp_path / "x.png")
    with pytest.raises(ValueError, match="only PNG"):
        utils.save_image(ts.rand(3, 4, 4), str(tmp_path / "x.jpg"))
    with pytest.raises(ts.TesseraError, match="No such file"):
        vio.read_image(tmp_path / "missing.png")
    with pytest.raises(ts.TesseraError, match="not an image"):
        vio.decode_image(b"definitely not an image")
