/* tessera/quant.h — quantized tensors and the int8 linear layer (torch.quantize_per_tensor,
 * torch.ao.nn.quantized; docs/QUANTIZATION.md, decision 0042).
 *
 * A quantized tensor (TS_QINT8, TS_QUINT8, TS_QINT32, TS_QUINT4X2) stores integers q and carries
 * affine parameters: its value is (q - zero_point) * scale, with one (scale, zero_point) for the
 * whole tensor (per tensor), one per index along a dim (per channel, along `axis`), or one per
 * group of `group_size` consecutive elements of the last dim (per group: int4 weights). quint4x2
 * packs two values a byte along the last dim (even element in the low nibble, as PyTorch), so its
 * last dim must be even.
 *
 * Rounding is PyTorch's (fbgemm's): q = clamp(zero_point + nearbyint(x * (1.0f / (float)scale)),
 * qmin, qmax) in float32 with ties to even; +-inf go to the ends of the range and NaN to qmax
 * (qint32: qmin). (PyTorch's x86 results for inf and NaN depend on where the element falls, its
 * vector body or its scalar tail: not a rule to copy.) Dequantize: per tensor (float)scale *
 * (float)(q - zero_point) in float32, per channel / group (float)((double)(q - zero_point) *
 * scale), each PyTorch's formula (the same bits).
 *
 * Only the functions here (and queries that read no element: ts_dtype_of, ts_shape_of, numel...)
 * take a quantized tensor; every other op refuses it with TS_ERR_DTYPE naming the op ("take
 * ts_dequantize first"). Quantized tensors are made contiguous and are not views; there are no
 * views, copies or device moves of them yet. The kernels run on cpu and sim; other devices refuse
 * with TS_ERR_UNSUPPORTED. Each function returns a new tensor, or NULL (a number: NAN / -1; a
 * status: the error's code) with the error set; argument errors name the op and the argument. */
#ifndef TESSERA_QUANT_H
#define TESSERA_QUANT_H

#include "tessera.h"

typedef enum ts_qscheme {
    TS_QSCHEME_NONE = 0,   /* not quantized (what ts_qscheme gives with the error set) */
    TS_PER_TENSOR_AFFINE,  /* torch.per_tensor_affine */
    TS_PER_CHANNEL_AFFINE, /* torch.per_channel_affine */
    TS_PER_GROUP_AFFINE,   /* groups of the last dim (torchao's int4 weights; no torch qscheme) */
} ts_qscheme;

/* torch.quantize_per_tensor(x, scale, zero_point, dtype): x float32 (as PyTorch: other dtypes
 * are refused), scale > 0 and finite (and 1 / (float)scale finite), zero_point within the dtype's
 * range (qint32: PyTorch's rule, any int32), dtype qint8 / quint8 / qint32 / quint4x2 */
TS_API ts_tensor *ts_quantize_per_tensor(ts_tensor *x, double scale, int64_t zero_point,
                                         ts_dtype dtype);
/* torch.quantize_per_channel(x, scales, zero_points, axis, dtype): scales a 1-D floating tensor
 * and zero_points a 1-D integer tensor, each of x.size(axis) elements, read to the host; each
 * scale and zero point checked as above, naming the channel */
TS_API ts_tensor *ts_quantize_per_channel(ts_tensor *x, ts_tensor *scales, ts_tensor *zero_points,
                                          int axis, ts_dtype dtype);
/* Groups of group_size elements along the last dim (which group_size divides): scales and
 * zero_points of shape x.shape[:-1] + [last / group_size]; dtype quint4x2 (int4 weights), qint8
 * or quint8 */
TS_API ts_tensor *ts_quantize_per_group(ts_tensor *x, ts_tensor *scales, ts_tensor *zero_points,
                                        int64_t group_size, ts_dtype dtype);
/* torch.dequantize / Tensor.dequantize: float32 of q's shape */
TS_API ts_tensor *ts_dequantize(ts_tensor *q);
/* Tensor.int_repr: the integers, as int8 / uint8 / int32 (quint4x2: uint8, one value each) */
TS_API ts_tensor *ts_int_repr(ts_tensor *q);

/* torch.qscheme; TS_QSCHEME_NONE with TS_ERR_DTYPE for a tensor that is not quantized */
TS_API ts_qscheme ts_qscheme_of(ts_tensor *q);
/* Tensor.q_scale / q_zero_point: per-tensor tensors only (TS_ERR_ARG otherwise) */
TS_API double ts_q_scale(ts_tensor *q);
TS_API ts_status ts_q_zero_point(ts_tensor *q, int64_t *zero_point);
/* Tensor.q_per_channel_scales (float64) / _zero_points (int64) / _axis: per-channel tensors;
 * per-group ones give their parameters of shape q.shape[:-1] + [groups] (axis: the last dim).
 * The tensors are on the cpu. */
TS_API ts_tensor *ts_q_per_channel_scales(ts_tensor *q);
TS_API ts_tensor *ts_q_per_channel_zero_points(ts_tensor *q);
TS_API int ts_q_per_channel_axis(ts_tensor *q);
/* The group size of a per-group tensor (TS_ERR_ARG for other schemes) */
TS_API int64_t ts_q_group_size(ts_tensor *q);

/* torch._choose_qparams_per_tensor / fbgemm's ChooseQuantizationParams over x's min and max
 * (widened to contain 0) for dtype's range (quint8, qint8; reduce_range halves it, as PyTorch's x86
 * backend does for activations): the scale (double, at least 6.1e-5, as PyTorch's; the kernels use
 * it as float32) and the zero point. x float32, not empty, no NaN (TS_ERR_ARG naming the argument).
 */
TS_API ts_status ts_choose_qparams_per_tensor(ts_tensor *x, ts_dtype dtype, bool reduce_range,
                                              double *scale, int64_t *zero_point);

/* ------------------------------------------------------------------ int8 linear */
/* The exact accumulators of a quantized linear layer: out[.., n] = bias[n] + sum_k (x[.., k] -
 * x_zp) * (w[n, k] - w_zp[n]) as int32 (wrapping if the exact value is outside int32, as ONNX's
 * MatMulInteger). x quint8 or qint8 per tensor [.., K]; w qint8 [N, K] per tensor or per channel
 * (axis 0); bias NULL or int32 [N] (plain TS_I32, in units of x_scale * w_scale[n]); K at most
 * 65536 (past it an int32 partial sum could overflow). */
TS_API ts_tensor *ts_quantized_linear_acc(ts_tensor *x, ts_tensor *w, ts_tensor *bias);
/* torch.ao.nn.quantized.Linear's arithmetic with an int32 bias: the accumulators above requantized
 * to out_scale / out_zero_point, y = clamp(out_zero_point + round_half_even(acc * x_scale *
 * w_scale[n] / out_scale), qmin, qmax) (the multiplier and the product in float64; relu: qmin
 * raised to out_zero_point), of x's dtype, per tensor */
TS_API ts_tensor *ts_quantized_linear(ts_tensor *x, ts_tensor *w, ts_tensor *bias, double out_scale,
                                      int64_t out_zero_point, bool relu);
/* torch.ao.nn.quantized.dynamic.Linear's forward: x float32 [.., K] quantized per tensor to
 * quint8 with ts_choose_qparams_per_tensor(reduce_range), multiplied with w (qint8 [N, K] per
 * tensor or per channel) in int32, y = acc * x_scale * w_scale[n] + bias[n] in float32; bias NULL
 * or float32 [N]. Each output within one quantum (x_scale * w_scale[n]) of PyTorch's fbgemm. */
TS_API ts_tensor *ts_dynamic_quantized_linear(ts_tensor *x, ts_tensor *w, ts_tensor *bias,
                                              bool reduce_range);

/* ------------------------------------------------------------------ making and reading params */
/* torch._make_per_tensor_quantized_tensor(int_repr, scale, zero_point): a quantized tensor of
 * the integers r (int8 -> qint8, uint8 -> quint8, int32 -> qint32), copied; the parameters
 * checked as ts_quantize_per_tensor's. What the .pt reader uses for PyTorch's quantized tensors. */
TS_API ts_tensor *ts_make_per_tensor_quantized_tensor(ts_tensor *r, double scale,
                                                      int64_t zero_point);
/* torch._make_per_channel_quantized_tensor(int_repr, scales, zero_points, axis) */
TS_API ts_tensor *ts_make_per_channel_quantized_tensor(ts_tensor *r, ts_tensor *scales,
                                                       ts_tensor *zero_points, int axis);
/* A per-tensor quantized tensor of a new shape (torch.reshape / flatten on a quantized tensor):
 * the same integers and parameters, a copy (quantized tensors are not views) */
TS_API ts_tensor *ts_quantized_reshape(ts_tensor *q, ts_shape shape);

/* The observers' qparams (torch.ao.quantization's UniformQuantizationObserverBase.
 * _calculate_qparams) in PyTorch's float32 arithmetic, element by element over min_val /
 * max_val (float32, one shape: 0-d per tensor or [C] per channel; min_val <= max_val):
 * min_neg = min(min_val, 0), max_pos = max(max_val, 0);
 * symmetric: scale = max(max(-min_neg, max_pos) / ((quant_max - quant_min) / 2), eps),
 *   zero_point = symmetric_zero_point (PyTorch: 0 for qint8, 128 for quint8 or the midpoint
 *   (quant_min + quant_max) / 2 of a customised range);
 * affine: scale = max((max_pos - min_neg) / (quant_max - quant_min), eps), zero_point =
 *   clamp(quant_min - round_half_even(min_neg / scale), quant_min, quant_max).
 * A 0-d pair that has seen nothing (min +inf, max -inf) gives scale 1, zero point 0, as PyTorch's.
 * *scale: float32 and *zero_point: int64, of shape [1] for a 0-d input, else min_val's. */
TS_API ts_status ts_calculate_qparams(ts_tensor *min_val, ts_tensor *max_val, int64_t quant_min,
                                      int64_t quant_max, bool symmetric,
                                      int64_t symmetric_zero_point, double eps, ts_tensor **scale,
                                      ts_tensor **zero_point);

/* ------------------------------------------------------------------ int8 convolution */
/* torch.ops.quantized.conv2d (nn.quantized.Conv2d / ConvReLU2d) with an int32 bias: x quint8 or
 * qint8 per tensor [N, C, H, W]; w qint8 [Cout, C / groups, KH, KW] per tensor or per channel
 * (axis 0); bias NULL or int32 [Cout] in units of x_scale * w_scale[co]. The exact accumulator
 * acc = bias[co] + sum (x - x_zp)(w - w_zp[co]) over the window (padding reads x_zp: a zero), then
 * y = clamp(out_zero_point + round_half_even(acc * x_scale * w_scale[co] / out_scale)) in float64
 * as ts_quantized_linear's (relu: the lower bound raised to out_zero_point), of x's dtype [N, Cout,
 * OH, OW] with OH = (H + 2 pad - dil (KH - 1) - 1) / stride + 1. Depthwise convolutions (groups = C
 * = Cout) run a direct kernel, the rest im2col and the int8 GEMM. stride, dilation >= 1, padding
 * >= 0, groups dividing C and Cout; C / groups * KH * KW at most 65536. */
TS_API ts_tensor *ts_quantized_conv2d(ts_tensor *x, ts_tensor *w, ts_tensor *bias,
                                      const int64_t stride[2], const int64_t padding[2],
                                      const int64_t dilation[2], int64_t groups, double out_scale,
                                      int64_t out_zero_point, bool relu);

/* ------------------------------------------------------------------ add, cat, pooling */
/* torch.ops.quantized.add / add_relu: a and b quantized per tensor, of one dtype (quint8 / qint8 /
 * qint32) and shape; y = quantize(relu?(dequantize(a) + dequantize(b)), out_scale, out_zp) with
 * ts_dequantize / ts_quantize_per_tensor's float32 formulas (PyTorch's scalar path; its vector body
 * dequantizes with an fma, which can move a tie: within one quantum). */
TS_API ts_tensor *ts_quantized_add(ts_tensor *a, ts_tensor *b, double out_scale,
                                   int64_t out_zero_point, bool relu);
/* torch.ops.quantized.cat: the tensors (n >= 1, quantized per tensor, one dtype) dequantized,
 * concatenated along dim and quantized to out_scale / out_zero_point: PyTorch's own arithmetic, the
 * same bits */
TS_API ts_tensor *ts_quantized_cat(ts_tensor *const *ts, int n, int dim, double out_scale,
                                   int64_t out_zero_point);
/* torch.max_pool2d on a quantized (per tensor) [N, C, H, W] or [C, H, W] tensor: the largest
 * integer of each window (padding never chosen), the input's parameters; ceil_mode as PyTorch's
 * (a window must start inside the input or its left padding) */
TS_API ts_tensor *ts_quantized_max_pool2d(ts_tensor *x, const int64_t kernel[2],
                                          const int64_t stride[2], const int64_t padding[2],
                                          const int64_t dilation[2], bool ceil_mode);
/* torch.adaptive_avg_pool2d on a quantized (per tensor) contiguous [N, C, H, W] or [C, H, W]
 * tensor, PyTorch's NCHW arithmetic: window rows [floor(o H / OH), ceil((o + 1) H / OH)), y =
 * nearbyint((float)sum(q) * (float)(1.0 / count)), the input's parameters. (PyTorch's channels-last
 * kernel, which its quantized conv outputs feed, subtracts the zero point first and rounds
 * acc * (1 / (1 / multiplier)): it can differ by one at ties.) */
TS_API ts_tensor *ts_quantized_adaptive_avg_pool2d(ts_tensor *x, int64_t out_h, int64_t out_w);

#endif /* TESSERA_QUANT_H */
