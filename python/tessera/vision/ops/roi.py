"""tessera.vision.ops.roi — torchvision.ops.roi_align / roi_pool and their modules RoIAlign /
RoIPool over the C library's ts_roi_align / ts_roi_pool (CPU and CUDA kernels with torchvision's
arithmetic; differentiable in the input). boxes: Tensor[K, 5] (batch index, x1, y1, x2, y2) or a
list of Tensor[L, 4], one per image."""
import tessera as _t
from tessera import _C, nn

__all__ = ["roi_align", "RoIAlign", "roi_pool", "RoIPool"]


def _pair(v, name):
    if isinstance(v, int):
        return v, v
    v = tuple(int(e) for e in v)
    if len(v) == 1:
        return v[0], v[0]
    if len(v) != 2:
        raise ValueError("%s: output_size must be an int or a pair of ints, got %r" % (name, v))
    return v


def _rois(boxes, name):
    if isinstance(boxes, (list, tuple)):
        for b in boxes:
            if b.dim() != 2 or b.size(1) != 4:
                raise ValueError("%s: the shape of the tensor in the boxes list is not correct as "
                                 "List[Tensor[L, 4]], got %s" % (name, list(b.shape)))
        return _C._vision_boxes_to_rois(list(boxes))
    if not isinstance(boxes, _t.Tensor):
        raise TypeError("%s: boxes is expected to be a Tensor[L, 5] or a List[Tensor[K, 4]]" % name)
    return boxes


def roi_align(input, boxes, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False):
    """Region of interest pooling by bilinear sampling (Mask R-CNN): [K, C, out_h, out_w]."""
    oh, ow = _pair(output_size, "roi_align")
    return _C._vision_roi_align(input, _rois(boxes, "roi_align"), oh, ow, float(spatial_scale),
                                int(sampling_ratio), bool(aligned))


def roi_pool(input, boxes, output_size, spatial_scale=1.0):
    """Region of interest max pooling (Fast R-CNN): [K, C, out_h, out_w]."""
    oh, ow = _pair(output_size, "roi_pool")
    return _C._vision_roi_pool(input, _rois(boxes, "roi_pool"), oh, ow, float(spatial_scale))


class RoIAlign(nn.Module):
    """roi_align as a module."""

    def __init__(self, output_size, spatial_scale, sampling_ratio, aligned=False):
        super().__init__()
        self.output_size = output_size
        self.spatial_scale = spatial_scale
        self.sampling_ratio = sampling_ratio
        self.aligned = aligned

    def forward(self, input, rois):
        return roi_align(input, rois, self.output_size, self.spatial_scale, self.sampling_ratio,
                         self.aligned)

    def __repr__(self):
        return (f"{self.__class__.__name__}(output_size={self.output_size}, "
                f"spatial_scale={self.spatial_scale}, sampling_ratio={self.sampling_ratio}, "
                f"aligned={self.aligned})")


class RoIPool(nn.Module):
    """roi_pool as a module."""

    def __init__(self, output_size, spatial_scale):
        super().__init__()
        self.output_size = output_size
        self.spatial_scale = spatial_scale

    def forward(self, input, rois):
        return roi_pool(input, rois, self.output_size, self.spatial_scale)

    def __repr__(self):
        return (f"{self.__class__.__name__}(output_size={self.output_size}, "
                f"spatial_scale={self.spatial_scale})")
