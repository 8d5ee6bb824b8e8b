"""tessera.vision.models.detection.anchor_utils — AnchorGenerator (R-CNN / RetinaNet / FCOS
anchors: per level, sizes x aspect ratios centred on a grid of the level's stride) and
DefaultBoxGenerator (SSD's default boxes)."""
import math

import tessera as ts
from tessera import nn

__all__ = ["AnchorGenerator", "DefaultBoxGenerator"]


class AnchorGenerator(nn.Module):
    """sizes[l] x aspect_ratios[l] anchors per location of feature map l; anchors of an image are
    the concatenation over levels, (x1, y1, x2, y2) in the padded image's pixels."""

    def __init__(self, sizes=((128, 256, 512),), aspect_ratios=((0.5, 1.0, 2.0),)):
        super().__init__()
        if not isinstance(sizes[0], (list, tuple)):
            sizes = tuple((s,) for s in sizes)
        if not isinstance(aspect_ratios[0], (list, tuple)):
            aspect_ratios = (aspect_ratios,) * len(sizes)
        self.sizes = sizes
        self.aspect_ratios = aspect_ratios
        self.cell_anchors = [self.generate_anchors(s, a) for s, a in zip(sizes, aspect_ratios)]

    def generate_anchors(self, scales, aspect_ratios, dtype=ts.float32, device="cpu"):
        """[len(ratios) * len(scales), 4] zero-centred anchors, rounded: h / w = ratio, area
        scale**2."""
        scales = ts.as_tensor(scales, dtype=dtype, device=device)
        aspect_ratios = ts.as_tensor(aspect_ratios, dtype=dtype, device=device)
        h_ratios = ts.sqrt(aspect_ratios)
        w_ratios = 1 / h_ratios
        ws = (w_ratios[:, None] * scales[None, :]).reshape(-1)
        hs = (h_ratios[:, None] * scales[None, :]).reshape(-1)
        return (ts.stack([-ws, -hs, ws, hs], dim=1) / 2).round()

    def set_cell_anchors(self, dtype, device):
        self.cell_anchors = [a.to(dtype=dtype, device=device) for a in self.cell_anchors]

    def num_anchors_per_location(self):
        return [len(s) * len(a) for s, a in zip(self.sizes, self.aspect_ratios)]

    def grid_anchors(self, grid_sizes, strides):
        if not (len(grid_sizes) == len(strides) == len(self.cell_anchors)):
            raise ValueError(
                "AnchorGenerator: %d feature maps but %d sizes / aspect ratios; each feature map "
                "needs its own tuple of sizes and ratios" % (len(grid_sizes),
                                                           len(self.cell_anchors)))
        anchors = []
        for (gh, gw), (sh, sw), base in zip(grid_sizes, strides, self.cell_anchors):
            device = base.device
            shifts_x = ts.arange(0, gw, dtype=ts.int32, device=device) * sw
            shifts_y = ts.arange(0, gh, dtype=ts.int32, device=device) * sh
            shift_y, shift_x = ts.meshgrid(shifts_y, shifts_x, indexing="ij")
            shift_x = shift_x.reshape(-1)
            shift_y = shift_y.reshape(-1)
            shifts = ts.stack((shift_x, shift_y, shift_x, shift_y), dim=1).to(base.dtype)
            anchors.append((shifts.reshape(-1, 1, 4) + base.reshape(1, -1, 4)).reshape(-1, 4))
        return anchors

    def forward(self, image_list, feature_maps):
        grid_sizes = [tuple(f.shape[-2:]) for f in feature_maps]
        image_size = image_list.tensors.shape[-2:]
        dtype, device = feature_maps[0].dtype, feature_maps[0].device
        strides = [(image_size[0] // g[0], image_size[1] // g[1]) for g in grid_sizes]
        self.set_cell_anchors(dtype, device)
        over_levels = self.grid_anchors(grid_sizes, strides)
        return [ts.cat(list(over_levels)) for _ in range(len(image_list.image_sizes))]


class DefaultBoxGenerator(nn.Module):
    """SSD's default boxes: per level k, scales s_k (linear between min_ratio and max_ratio
    unless given), boxes s_k, sqrt(s_k s_k+1) and s_k * sqrt(ar) x s_k / sqrt(ar) (both ways)
    per aspect ratio, centred at (i + 0.5) / f_k."""

    def __init__(self, aspect_ratios, min_ratio=0.15, max_ratio=0.9, scales=None, steps=None,
                 clip=True):
        super().__init__()
        if steps is not None and len(aspect_ratios) != len(steps):
            raise ValueError("aspect_ratios and steps should have the same length")
        self.aspect_ratios = aspect_ratios
        self.steps = steps
        self.clip = clip
        num_outputs = len(aspect_ratios)
        if scales is None:
            if num_outputs > 1:
                r = max_ratio - min_ratio
                self.scales = [min_ratio + r * k / (num_outputs - 1.0)
                               for k in range(num_outputs)]
                self.scales.append(1.0)
            else:
                self.scales = [min_ratio, max_ratio]
        else:
            self.scales = scales
        self._wh_pairs = self._generate_wh_pairs(num_outputs)

    def _generate_wh_pairs(self, num_outputs, dtype=ts.float32, device="cpu"):
        out = []
        for k in range(num_outputs):
            s_k = self.scales[k]
            s_prime = math.sqrt(self.scales[k] * self.scales[k + 1])
            pairs = [[s_k, s_k], [s_prime, s_prime]]
            for ar in self.aspect_ratios[k]:
                sq = math.sqrt(ar)
                w, h = s_k * sq, s_k / sq
                pairs.extend([[w, h], [h, w]])
            out.append(ts.as_tensor(pairs, dtype=dtype, device=device))
        return out

    def num_anchors_per_location(self):
        return [2 + 2 * len(r) for r in self.aspect_ratios]

    def _grid_default_boxes(self, grid_sizes, image_size, dtype=ts.float32):
        boxes = []
        for k, f_k in enumerate(grid_sizes):
            if self.steps is not None:
                x_f = image_size[1] / self.steps[k]
                y_f = image_size[0] / self.steps[k]
            else:
                y_f, x_f = f_k
            sx = ((ts.arange(0, f_k[1]) + 0.5) / x_f).to(dtype=dtype)
            sy = ((ts.arange(0, f_k[0]) + 0.5) / y_f).to(dtype=dtype)
            shift_y, shift_x = ts.meshgrid(sy, sx, indexing="ij")
            shift_x = shift_x.reshape(-1)
            shift_y = shift_y.reshape(-1)
            n = len(self._wh_pairs[k])
            shifts = ts.stack((shift_x, shift_y) * n, dim=-1).reshape(-1, 2)
            wh = self._wh_pairs[k].clamp(min=0, max=1) if self.clip else self._wh_pairs[k]
            wh = wh.to(dtype).repeat(f_k[0] * f_k[1], 1)
            boxes.append(ts.cat((shifts, wh), dim=1))
        return ts.cat(boxes, dim=0)

    def __repr__(self):
        return (f"{self.__class__.__name__}(aspect_ratios={self.aspect_ratios}, clip={self.clip}, "
                f"scales={self.scales}, steps={self.steps})")

    def forward(self, image_list, feature_maps):
        grid_sizes = [tuple(f.shape[-2:]) for f in feature_maps]
        image_size = tuple(image_list.tensors.shape[-2:])
        dtype, device = feature_maps[0].dtype, feature_maps[0].device
        d = self._grid_default_boxes(grid_sizes, image_size, dtype=dtype).to(device)
        xy = ts.tensor([image_size[1], image_size[0]], dtype=dtype, device=device)
        box = ts.cat([(d[:, :2] - 0.5 * d[:, 2:]) * xy, (d[:, :2] + 0.5 * d[:, 2:]) * xy], -1)
        return [box for _ in image_list.image_sizes]
