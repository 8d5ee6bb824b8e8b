"""torchvision.models.optical_flow._utils: grid_sample on absolute pixel coordinates, the
coordinate grid and the (convex or bilinear) flow upsampling, through Tessera's ops."""
import tessera as ts
from tessera.nn import functional as F


def grid_sample(img, absolute_grid, mode="bilinear", align_corners=None):
    """F.grid_sample with absolute pixel coordinates (x, y) instead of [-1, 1] ones"""
    h, w = img.shape[-2:]
    xgrid, ygrid = absolute_grid.split([1, 1], dim=-1)
    xgrid = 2 * xgrid / (w - 1) - 1
    if h > 1:
        ygrid = 2 * ygrid / (h - 1) - 1
    return F.grid_sample(img, ts.cat([xgrid, ygrid], dim=-1), mode=mode,
                         align_corners=align_corners)


def make_coords_grid(batch_size, h, w, device="cpu", dtype=None):
    """[batch_size, 2, h, w]: (x, y) of each pixel. dtype: torchvision's is always float32
    (so its RAFT cannot run under .double()); here the caller passes the feature maps' dtype"""
    ys, xs = ts.meshgrid(ts.arange(h, device=device), ts.arange(w, device=device), indexing="ij")
    coords = ts.stack([xs, ys], dim=0).to(dtype if dtype is not None else ts.float32)
    return coords[None].repeat(batch_size, 1, 1, 1)


def upsample_flow(flow, up_mask=None, factor=8):
    """flow [N, 2, h, w] -> [N, 2, h * factor, w * factor]: bilinear (align_corners=True) without
    up_mask, else the convex combination of each 3x3 neighbourhood by softmax(up_mask)"""
    n, c, h, w = flow.shape
    if up_mask is None:
        return factor * F.interpolate(flow, size=(h * factor, w * factor), mode="bilinear",
                                      align_corners=True)
    up_mask = ts.softmax(up_mask.view(n, 1, 9, factor, factor, h, w), dim=2)
    up = F.unfold(factor * flow, kernel_size=3, padding=1).view(n, c, 9, 1, 1, h, w)
    up = ts.sum(up_mask * up, dim=2)
    return up.permute(0, 1, 4, 2, 5, 3).reshape(n, c, h * factor, w * factor)
