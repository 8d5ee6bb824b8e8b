/* tessera/vision_ops.h — torchvision.ops in C (issue 75): non-maximum suppression, the box ops,
 * roi_align and roi_pool. Included by tessera.h.
 *
 * Boxes are float tensors [..., 4]; xyxy boxes are (x1, y1, x2, y2) with x1 <= x2, y1 <= y2.
 * Every function returns a new tensor in the innermost scope, or NULL with the error set
 * (TS_ERR_SHAPE, TS_ERR_DTYPE, TS_ERR_DEVICE, TS_ERR_ARG naming the op and the argument). The box
 * ops are compositions of public ops (differentiable where torchvision's are); nms, roi_align and
 * roi_pool are backend kernels (cpu, sim, cuda), with torchvision's arithmetic. */
#ifndef TESSERA_VISION_OPS_H
#define TESSERA_VISION_OPS_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* box formats (torchvision's box_convert names) */
typedef enum ts_box_fmt {
    TS_BOX_XYXY = 0, /* x1, y1, x2, y2 */
    TS_BOX_XYWH,     /* x1, y1, width, height */
    TS_BOX_CXCYWH,   /* centre x, centre y, width, height */
} ts_box_fmt;

/* torchvision.ops.nms: boxes [N, 4] xyxy and scores [N] of one float dtype (float32 / float64),
 * on one device. Returns the int64 indices of the boxes kept, by decreasing score (ties in the
 * boxes' order: a stable sort): a box is dropped when a kept box of higher score overlaps it with
 * IoU > iou_threshold. Reads the result's size on the host (not under a capture). */
TS_API ts_tensor *ts_nms(ts_tensor *boxes, ts_tensor *scores, double iou_threshold);
/* torchvision.ops.batched_nms: nms within each category of idxs [N] (an integer tensor); boxes of
 * different categories never suppress each other. Indices by decreasing score. */
TS_API ts_tensor *ts_batched_nms(ts_tensor *boxes, ts_tensor *scores, ts_tensor *idxs,
                                 double iou_threshold);

/* box_area(boxes [..., 4], fmt): [...] (xyxy: (x2 - x1) * (y2 - y1); xywh / cxcywh: w * h);
 * float16 / bfloat16 computed in float32, int8 / int16 / uint8 in int32 (torchvision's _upcast) */
TS_API ts_tensor *ts_box_area(ts_tensor *boxes, ts_box_fmt fmt);
/* box_iou(boxes1 [..., N, 4], boxes2 [..., M, 4], fmt): the IoU matrix [..., N, M] */
TS_API ts_tensor *ts_box_iou(ts_tensor *boxes1, ts_tensor *boxes2, ts_box_fmt fmt);
/* generalized_box_iou (xyxy): IoU - (enclosing area - union) / enclosing area, [..., N, M] */
TS_API ts_tensor *ts_generalized_box_iou(ts_tensor *boxes1, ts_tensor *boxes2);
/* distance_box_iou (xyxy): IoU - centres' squared distance / (enclosing diagonal^2 + eps) */
TS_API ts_tensor *ts_distance_box_iou(ts_tensor *boxes1, ts_tensor *boxes2, double eps);
/* complete_box_iou (xyxy): distance IoU - alpha v (v the aspect ratios' term, alpha without
 * gradient, as torchvision) */
TS_API ts_tensor *ts_complete_box_iou(ts_tensor *boxes1, ts_tensor *boxes2, double eps);
/* box_convert(boxes [..., 4], in_fmt, out_fmt): a new tensor (a copy when the formats agree) */
TS_API ts_tensor *ts_box_convert(ts_tensor *boxes, ts_box_fmt in_fmt, ts_box_fmt out_fmt);
/* clip_boxes_to_image(boxes [..., 4] xyxy, height, width): x clamped to [0, width], y to [0,
 * height] */
TS_API ts_tensor *ts_clip_boxes_to_image(ts_tensor *boxes, int64_t height, int64_t width);
/* remove_small_boxes(boxes [N, 4] xyxy, min_size): int64 indices of the boxes whose width and
 * height are both >= min_size */
TS_API ts_tensor *ts_remove_small_boxes(ts_tensor *boxes, double min_size);

/* The rois [K, 5] (batch index, x1, y1, x2, y2) of a list of n per-image boxes [K_i, 4]
 * (torchvision's convert_boxes_to_roi_format): image i's boxes get batch index i. One dtype and
 * device; n >= 1. */
TS_API ts_tensor *ts_boxes_to_rois(ts_tensor *const *boxes, int n);

/* torchvision.ops.roi_align: input [N, C, H, W] (float32 / float64), rois [K, 5] of its dtype and
 * device (batch index in [0, N), x1, y1, x2, y2 in input coordinates / spatial_scale). Returns
 * [K, C, out_h, out_w]: each bin the mean of sampling_ratio^2 bilinear samples (sampling_ratio <=
 * 0: ceil(roi size / bins) per side); aligned shifts the coordinates by -0.5 pixel. Differentiable
 * in input (RoiAlignBackward0; once: its backward has no gradient). */
TS_API ts_tensor *ts_roi_align(ts_tensor *input, ts_tensor *rois, int64_t out_h, int64_t out_w,
                               double spatial_scale, int sampling_ratio, bool aligned);
/* torchvision.ops.roi_pool: each bin the max over its window of the rounded roi (0 for an empty
 * bin); differentiable in input (RoiPoolBackward0, the gradient going to each bin's max) */
TS_API ts_tensor *ts_roi_pool(ts_tensor *input, ts_tensor *rois, int64_t out_h, int64_t out_w,
                              double spatial_scale);

/* torchvision.transforms.functional's colour and blur kernels (src/ops/vision_color.c) on
 * images [..., C, H, W], float in [0, 1] or integer in [0, max] (uint8: 255), with torchvision's
 * formulas and dtype handling; C must be 1 or 3 (any for gaussian_blur). rgb_to_grayscale:
 * 0.2989 R + 0.587 G + 0.114 B back in the image's dtype (truncated), expanded to 3 channels when
 * asked. adjust_brightness / contrast / saturation: (f img + (1 - f) other).clamp(0, max) with
 * other zeros / the grayscale's mean / the grayscale. adjust_hue: the hue rotated by hue_factor
 * in [-0.5, 0.5] through HSV, in float32. gaussian_blur: a kx by ky Gaussian of sigma_x, sigma_y
 * over the reflect-padded image, per channel (an integer image rounded back). A 1-channel image
 * passes saturation and hue unchanged (the same tensor, retained). */
TS_API ts_tensor *ts_rgb_to_grayscale(ts_tensor *img, int num_output_channels);
TS_API ts_tensor *ts_adjust_brightness(ts_tensor *img, double factor);
TS_API ts_tensor *ts_adjust_contrast(ts_tensor *img, double factor);
TS_API ts_tensor *ts_adjust_saturation(ts_tensor *img, double factor);
TS_API ts_tensor *ts_adjust_hue(ts_tensor *img, double hue_factor);
TS_API ts_tensor *ts_gaussian_blur(ts_tensor *img, int64_t kx, int64_t ky, double sigma_x,
                                   double sigma_y);
/* convert_image_dtype: float -> float a cast; integer -> float over the integer maximum; float
 * -> integer x (max + 1 - 1e-3), truncated (float32 -> int32 / int64 and float64 -> int64
 * refused as torchvision does); integer -> integer by the power-of-two factor between their
 * maxima. The same dtype: img itself, retained. */
TS_API ts_tensor *ts_convert_image_dtype(ts_tensor *img, ts_dtype dtype);
/* normalize: (img - mean[c]) / std[c] over channels, the values taken in img's (float) dtype; a
 * std that is zero there is TS_ERR_ARG; inplace writes img and returns it (retained). */
TS_API ts_tensor *ts_image_normalize(ts_tensor *img, const double *mean, int n_mean,
                                     const double *std, int n_std, bool inplace);
/* x [..., H, W] (float) resized to oh x ow as interpolate(mode='bilinear', antialias=True,
 * align_corners=False): PyTorch's antialiasing weights, one matrix per axis */
TS_API ts_tensor *ts_resize_antialias(ts_tensor *x, int64_t oh, int64_t ow);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_VISION_OPS_H */
