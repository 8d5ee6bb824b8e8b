"""tessera.vision.ops.poolers — torchvision.ops.MultiScaleRoIAlign: each box pooled by roi_align
(the C op) from the feature map of its pyramid level (Feature Pyramid Networks, eq. 1: level =
floor(4 + log2(sqrt(area) / 224) + eps), clamped to the levels present). The level mapping is
glue in Python over box_area, as in torchvision."""
import tessera as _t
from tessera import nn

from .boxes import box_area
from .roi import roi_align

__all__ = ["MultiScaleRoIAlign", "LevelMapper", "initLevelMapper"]


class LevelMapper:
    """Maps each box of a list of box lists to its FPN level, counted from k_min."""

    def __init__(self, k_min, k_max, canonical_scale=224, canonical_level=4, eps=1e-6):
        self.k_min = k_min
        self.k_max = k_max
        self.s0 = canonical_scale
        self.lvl0 = canonical_level
        self.eps = eps

    def __call__(self, boxlists):
        s = _t.sqrt(_t.cat([box_area(b) for b in boxlists]))
        target = _t.floor(self.lvl0 + _t.log2(s / self.s0) + _t.tensor(self.eps, dtype=s.dtype))
        target = _t.clamp(target, min=self.k_min, max=self.k_max)
        return (target.to(_t.int64) - self.k_min).to(_t.int64)


def initLevelMapper(k_min, k_max, canonical_scale=224, canonical_level=4, eps=1e-6):
    return LevelMapper(k_min, k_max, canonical_scale, canonical_level, eps)


def _infer_scale(feature, original_size):
    possible = []
    for s1, s2 in zip(feature.shape[-2:], original_size):
        approx = float(s1) / float(s2)
        possible.append(2 ** float(_t.tensor(approx).log2().round()))
    return possible[0]


def _setup_scales(features, image_shapes, canonical_scale, canonical_level):
    if not image_shapes:
        raise ValueError("images list should not be empty")
    max_x = max(int(s[0]) for s in image_shapes)
    max_y = max(int(s[1]) for s in image_shapes)
    scales = [_infer_scale(f, (max_x, max_y)) for f in features]
    lvl_min = -_t.log2(_t.tensor(scales[0], dtype=_t.float32)).item()
    lvl_max = -_t.log2(_t.tensor(scales[-1], dtype=_t.float32)).item()
    return scales, initLevelMapper(int(lvl_min), int(lvl_max), canonical_scale=canonical_scale,
                                   canonical_level=canonical_level)


class MultiScaleRoIAlign(nn.Module):
    """Multi-scale RoIAlign pooling (torchvision.ops.MultiScaleRoIAlign).

    forward(x: dict of feature maps [N, C, H_l, W_l], boxes: list of Tensor[L_i, 4] (one per
    image, in image coordinates), image_shapes: list of (height, width)) -> [sum L_i, C, out_h,
    out_w]. Only the maps named in featmap_names are used, in x's order (highest resolution
    first); their scales are inferred from image_shapes on the first call and kept."""

    def __init__(self, featmap_names, output_size, sampling_ratio, *, canonical_scale=224,
                 canonical_level=4):
        super().__init__()
        if isinstance(output_size, int):
            output_size = (output_size, output_size)
        self.featmap_names = featmap_names
        self.sampling_ratio = sampling_ratio
        self.output_size = tuple(output_size)
        self.scales = None
        self.map_levels = None
        self.canonical_scale = canonical_scale
        self.canonical_level = canonical_level

    def forward(self, x, boxes, image_shapes):
        feats = [v for k, v in x.items() if k in self.featmap_names]
        if not feats:
            raise ValueError("MultiScaleRoIAlign: none of featmap_names %r is in the input"
                             % (self.featmap_names,))
        if self.scales is None or self.map_levels is None:
            self.scales, self.map_levels = _setup_scales(feats, image_shapes,
                                                         self.canonical_scale,
                                                         self.canonical_level)
        rois = _t._C._vision_boxes_to_rois(list(boxes))
        if len(feats) == 1:
            return roi_align(feats[0], rois, self.output_size, self.scales[0],
                             self.sampling_ratio)
        levels = self.map_levels(boxes)
        first = feats[0]
        result = _t.zeros((rois.shape[0], first.shape[1]) + self.output_size, dtype=first.dtype,
                          device=first.device)
        for level, (feat, scale) in enumerate(zip(feats, self.scales)):
            idx = _t.nonzero(levels == level).reshape(-1)
            if idx.numel() == 0:
                continue
            r = roi_align(feat, rois[idx], self.output_size, scale, self.sampling_ratio)
            result = result.index_copy(0, idx, r.to(result.dtype))
        return result

    def __repr__(self):
        return (f"{self.__class__.__name__}(featmap_names={self.featmap_names}, "
                f"output_size={self.output_size}, sampling_ratio={self.sampling_ratio})")
