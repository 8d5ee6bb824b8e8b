"""tessera.vision.utils — torchvision.utils' make_grid and save_image (PNG through the C library's
stb_image_write: ts_image_save_png)."""
import math
import os
import tempfile

import tessera as ts

__all__ = ["make_grid", "save_image"]


def _norm_range(t, value_range):
    low, high = value_range if value_range is not None else (float(t.min()), float(t.max()))
    return (t.clamp(min=low, max=high) - low) / max(high - low, 1e-5)


def make_grid(tensor, nrow=8, padding=2, normalize=False, value_range=None, scale_each=False,
              pad_value=0.0):
    """Tiles a batch [B,C,H,W] (or a list of [C,H,W]) into one image [C, rows*(H+p)+p,
    cols*(W+p)+p], nrow images per row, as torchvision.utils.make_grid: grey inputs become
    3 channels; normalize maps value_range (or each image's / the batch's min..max) to [0, 1]."""
    if isinstance(tensor, (list, tuple)):
        tensor = ts.stack(list(tensor), 0)
    if not isinstance(tensor, ts.Tensor):
        raise TypeError("make_grid: tensor or list of tensors expected, got %s" % type(tensor))
    if tensor.dim() == 2:
        tensor = tensor.unsqueeze(0)
    if tensor.dim() == 3:
        if tensor.shape[0] == 1:
            tensor = ts.cat([tensor, tensor, tensor], 0)
        tensor = tensor.unsqueeze(0)
    if tensor.dim() != 4:
        raise ValueError("make_grid: expected a 2-, 3- or 4-dim tensor, got %d dims" % tensor.dim())
    if tensor.shape[1] == 1:
        tensor = ts.cat([tensor, tensor, tensor], 1)
    if normalize:
        if value_range is not None and not isinstance(value_range, tuple):
            raise TypeError("make_grid: value_range has to be a tuple (min, max) if specified")
        if scale_each:
            tensor = ts.stack([_norm_range(t, value_range) for t in tensor], 0)
        else:
            tensor = _norm_range(tensor, value_range)
    if tensor.shape[0] == 1:
        return tensor.squeeze(0)
    nmaps, c, h, w = tensor.shape
    xmaps = min(nrow, nmaps)
    ymaps = int(math.ceil(float(nmaps) / xmaps))
    height, width = int(h + padding), int(w + padding)
    grid = ts.full((c, height * ymaps + padding, width * xmaps + padding), pad_value,
                   dtype=tensor.dtype, device=tensor.device)
    k = 0
    for y in range(ymaps):
        for x in range(xmaps):
            if k >= nmaps:
                break
            grid[:, y * height + padding:(y + 1) * height,
                 x * width + padding:(x + 1) * width] = tensor[k]
            k += 1
    return grid


def _to_uint8(grid):
    if grid.dtype == ts.uint8:
        return grid
    return (grid * 255 + 0.5).clamp(0, 255).to(ts.uint8)


def save_image(tensor, fp, format=None, **kwargs):
    """Writes make_grid(tensor, **kwargs) as a PNG file (values in [0, 1] map to 0..255 as
    torchvision: x*255+0.5 clamped, truncated). fp: a path or a binary file object."""
    if format is not None and str(format).lower() != "png":
        raise ValueError("save_image: only PNG is supported, got format=%r" % (format,))
    if isinstance(fp, (str, bytes, os.PathLike)):
        ext = os.path.splitext(os.fsdecode(fp))[1].lower()
        if format is None and ext not in ("", ".png"):
            raise ValueError("save_image: only PNG is supported, got a %r file name (%s)"
                             % (ext, os.fsdecode(fp)))
    with ts.no_grad():
        img = _to_uint8(make_grid(tensor, **kwargs).detach())
    if img.dim() == 3 and img.shape[0] == 2:
        raise ValueError("save_image: 2-channel images cannot be written as PNG")
    if isinstance(fp, (str, bytes, os.PathLike)):
        ts._C._image_save_png(fp, img)
        return
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "image.png")
        ts._C._image_save_png(path, img)
        with open(path, "rb") as f:
            fp.write(f.read())
