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
 * ts_dequantize first"). The view ops (view, transpose, permute, narrow, slice, select,
 * split, chunk, unbind, squeeze, unsqueeze, expand, movedim, t, contiguous, detach) take a tensor
 * quantized per tensor: the result carries its scale and zero point and is a contiguous copy of
 * those integers (a view where the layout is the same: detach, contiguous), so every quantized
 * tensor a user holds is contiguous; no op writes a quantized tensor in place, so a copy reads as
 * a view would (decision 0057). Per-channel / per-group tensors take detach and contiguous only;
 * a channels_last copy of a quantized tensor is refused. ts_to / ts_to_async move qint8 / quint8 /
 * qint32 tensors between devices with their parameters (quint4x2: TS_ERR_UNSUPPORTED). The
 * kernels run on cpu and sim; other devices refuse with TS_ERR_UNSUPPORTED. Each function returns a
 * new tensor, or NULL (a number: NAN / -1; a status: the error's code) with the error set; argument
 * errors name the op and the argument. */
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
/* torch.ao.nn.quantized.Linear: the accumulators above (without bias) requantized to out_scale /
 * out_zero_point, of x's dtype, per tensor (relu: qmin raised to out_zero_point). bias selects the
 * arithmetic:
 *  - float32 [N] (what PyTorch's modules hold): PyTorch's x86 engine (fbgemm) bit for bit, in
 *    float32: atws = (float)x_scale * (float)w_scale[n], y = clamp(out_zero_point +
 *    round_half_even(((float)acc + bias[n] / atws) * (atws / (float)out_scale))) (weights per
 *    tensor: bias[n] * (float)(1 / atws)); a bias of zeros gives this arithmetic without a bias;
 *  - int32 [N] (in units of x_scale * w_scale[n]) or NULL: y = clamp(out_zero_point +
 *    round_half_even((acc + bias[n]) * x_scale * w_scale[n] / out_scale)) in float64.
 * The two differ by one quantum at rounding ties (docs/QUANTIZATION.md). */
TS_API ts_tensor *ts_quantized_linear(ts_tensor *x, ts_tensor *w, ts_tensor *bias, double out_scale,
                                      int64_t out_zero_point, bool relu);
/* torch.ao.nn.quantized.dynamic.Linear's forward: x float32 [.., K] quantized per tensor to
 * quint8 with ts_choose_qparams_per_tensor(reduce_range), multiplied with w (qint8 [N, K] per
 * tensor or per channel) in int32, y = acc * x_scale * w_scale[n] + bias[n] in float32; bias NULL
 * or float32 [N]. Each output within one quantum (x_scale * w_scale[n]) of PyTorch's fbgemm. */
TS_API ts_tensor *ts_dynamic_quantized_linear(ts_tensor *x, ts_tensor *w, ts_tensor *bias,
                                              bool reduce_range);

/* ONNX's DynamicQuantizeLinear (opset 11): x float32 (any shape) -> uint8 y of x's shape, with
 * *scale (float32, 0-dim) = (max(0, max x) - min(0, min x)) / 255 (1 when that range is 0) and
 * *zero_point (uint8, 0-dim) = round_half_even(clamp(-min(0, min x) / scale, 0, 255)); y =
 * saturate(round_half_even(x / scale) + zero_point). Each step one float32 operation. Any device
 * (the cpu: two passes over x); NaN and infinities as ts_max / ts_div / ts_clamp take them. */
TS_API ts_tensor *ts_dynamic_quantize_linear(ts_tensor *x, ts_tensor **scale,
                                             ts_tensor **zero_point);

/* ONNX's QuantizeLinear of float32 on the cpu: y = saturate(round_half_even(x / scale) +
 * zero_point) as zero_point's type (uint8 or int8; NULL: uint8, zero point 0), x / scale one
 * float32 division; a NaN gives 0, +-inf the range's end. scale (float32) and zero_point: one
 * value, or 1-D with one per element of x's dim axis (negative: from the end). The bytes of the
 * ONNX importer's composed route; other dtypes and devices take that route (TS_ERR_DTYPE /
 * TS_ERR_UNSUPPORTED here). */
TS_API ts_tensor *ts_quantize_linear(ts_tensor *x, ts_tensor *scale, ts_tensor *zero_point,
                                     int axis);

/* com.microsoft's QLinearGlobalAveragePool as ONNX Runtime 1.32's MLAS computes it: x [N, C,
 * spatial...] uint8 / int8 (any strides) -> y [N, C, 1, ...] of x's type; per image and channel
 * acc = the sum of x less x_zp * size (wrapped to int32), y = saturate(round_half_even((float)acc
 * * (x_scale / (y_scale * (float)size))) + y_zp), each step in float32. Image sizes from 2^24 and
 * ratios outside [2^-32, 256): TS_ERR_UNSUPPORTED, as MLAS refuses them. */
TS_API ts_tensor *ts_qlinear_global_average_pool(ts_tensor *x, float x_scale, int64_t x_zp,
                                                 float y_scale, int64_t y_zp);

/* ONNX's MatMulInteger -> Cast(float) -> Mul(a_scale * b_scale) [-> Add(bias)] in one call (ONNX
 * Runtime's com.microsoft MatMulIntegerToFloat): a uint8 / int8 [.., K] (plain bytes), b uint8 /
 * int8 [K, N] (read where it lies; a constant b's packed form is cached across calls); a_scale
 * float32 one value, b_scale float32 one value or N (per column); a_zero_point NULL (0) or
 * uint8 / int8 one value, b_zero_point NULL (0) or uint8 / int8 one value or N; bias NULL or
 * float32 of N values. acc = sum_k (a - a_zp)(b - b_zp[n]) exact, wrapped to int32 as
 * MatMulInteger's; y = (float)acc * (a_scale * b_scale[n]) (+ bias[n]), float32 [.., N], each step
 * one float32 operation in that order: the unfused ONNX ops' bits. K at most 65536. No autograd
 * (a scale or bias that requires grad is refused, TS_ERR_UNSUPPORTED). cpu and sim. */
TS_API ts_tensor *ts_matmul_integer_to_float(ts_tensor *a, ts_tensor *a_scale,
                                             ts_tensor *a_zero_point, ts_tensor *b,
                                             ts_tensor *b_scale, ts_tensor *b_zero_point,
                                             ts_tensor *bias);

/* ONNX's DynamicQuantizeLinear(x) -> (y, s, z) read by count ts_matmul_integer_to_float(y, s, z,
 * b[i], b_scale[i], b_zero_point[i], bias[i]) products (ONNX Runtime's DynamicQuantizeMatMul; the
 * Q, K and V projections of one input), in one call: out[i] (float32 [.., N_i]) the same bits as
 * the two ops. x float32 [.., K]; b_zero_point and bias may be NULL (arrays) or hold NULLs. On the
 * cpu x is quantized once, its rows' sums made in the same pass; other devices and non-finite
 * values of x run the two ops. On error every out[i] is NULL. No autograd. */
TS_API ts_status ts_dynamic_quantize_matmul_to_float(ts_tensor *x, int count, ts_tensor *const *b,
                                                     ts_tensor *const *b_scale,
                                                     ts_tensor *const *b_zero_point,
                                                     ts_tensor *const *bias, ts_tensor **out);

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
 * the same integers and parameters, a copy */
TS_API ts_tensor *ts_quantized_reshape(ts_tensor *q, ts_shape shape);

/* torch.mean of a quantized tensor (qint8 / quint8 / qint32 per tensor; ts_mean, ts_mean_dim and
 * ts_mean_dims take this route): PyTorch's reference path, the float32 mean of the dequantized
 * values over dims (none: all) quantized per tensor with the input's scale and zero point, of its
 * dtype. PyTorch takes a faster path for a contiguous NCHW input reduced over its innermost dims,
 * nearbyint(sum of the integers / count) in float32: the same value up to the rounding of a tie
 * (one quantum at most); its quantized convolutions write channels_last, so a model's global pool
 * takes the reference path there too. An empty input: TS_ERR_ARG. */
TS_API ts_tensor *ts_quantized_mean(ts_tensor *q, ts_dims dims, bool keepdim);

/* torch.ops.quantized.mul / mul_relu (QFunctional.mul): a and b quantized per tensor, one dtype
 * (qint8 / quint8), broadcast; c = (a - za)(b - zb) exactly, y = clamp(out_zero_point +
 * nearbyint((float)c * m)) with m = (float)a_scale * (float)b_scale * (1.0f / (float)out_scale) in
 * float32 in that order (relu: the lower bound raised to out_zero_point): PyTorch's x86 bits. */
TS_API ts_tensor *ts_quantized_mul(ts_tensor *a, ts_tensor *b, double out_scale,
                                   int64_t out_zero_point, bool relu);
/* nn.quantized.Hardswish: quantize(hardswish(dequantize(x)), out_scale, out_zero_point) per
 * tensor in float32 (PyTorch's vector body dequantizes with an fma: one quantum at a tie) */
TS_API ts_tensor *ts_quantized_hardswish(ts_tensor *x, double out_scale, int64_t out_zero_point);
/* F.hardsigmoid of a quantized tensor: quantize(hardsigmoid(dequantize(x))) with PyTorch's fixed
 * output parameters, scale 2^-8 (qint32: 2^-32) and zero point 0 (qint8: -128); x's dtype */
TS_API ts_tensor *ts_quantized_hardsigmoid(ts_tensor *x);

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
/* fbgemm's ChooseQuantizationParams element by element over min_val / max_val (float32 of one
 * shape, 0-d or 1-D; finite, min_val <= max_val): the qparams PyTorch's fused moving-average fake
 * quant (FusedMovingAvgObsFakeQuantize, QAT's default) trains with. The range widened to contain
 * 0; preserve_sparsity (its symmetric schemes) makes it symmetric over [-(n + 1), n] quanta with n
 * = (quant_max - quant_min) / 2 in integers and the zero point the midpoint (quant_min +
 * quant_max) / 2 rounded half to even; scale = (max - min) / (quant_max - quant_min) in float64,
 * 0.1 where it is 0, at least 6.1e-5 (the range rescaled), stored as float32; zero point from
 * the end with the smaller rounding error, rounded and clamped. *scale float32, *zero_point int64,
 * of shape [1] for a 0-d input, else min_val's. */
TS_API ts_status ts_choose_qparams_minmax(ts_tensor *min_val, ts_tensor *max_val, int64_t quant_min,
                                          int64_t quant_max, bool preserve_sparsity,
                                          ts_tensor **scale, ts_tensor **zero_point);

/* ------------------------------------------------------------------ int8 convolution */
/* torch.ops.quantized.conv2d (nn.quantized.Conv2d / ConvReLU2d): x quint8 or qint8 per tensor
 * [N, C, H, W]; w qint8 [Cout, C / groups, KH, KW] per tensor or per channel (axis 0). The exact
 * accumulator acc = sum (x - x_zp)(w - w_zp[co]) over the window (padding reads x_zp: a zero),
 * then requantized as ts_quantized_linear's: bias float32 [Cout], PyTorch's x86 arithmetic; int32
 * [Cout] (units of x_scale * w_scale[co]) or NULL, the float64 one (relu: the lower bound raised
 * to out_zero_point), of x's dtype [N, Cout, OH, OW] with OH = (H + 2 pad - dil (KH - 1) - 1) /
 * stride + 1. Depthwise convolutions (groups = C = Cout) run a direct kernel, the rest im2col and
 * the int8 GEMM. stride, dilation >= 1, padding >= 0, groups dividing C and Cout; C / groups * KH *
 * KW at most 65536. The output is channels_last where the device's int8 route prefers it (the CPU
 * with oneDNN and AVX512-VNNI), as PyTorch's x86 conv answers; its values read as any tensor's. */
TS_API ts_tensor *ts_quantized_conv2d(ts_tensor *x, ts_tensor *w, ts_tensor *bias,
                                      const int64_t stride[2], const int64_t padding[2],
                                      const int64_t dilation[2], int64_t groups, double out_scale,
                                      int64_t out_zero_point, bool relu);
/* ONNX's QLinearConv (2-D) in ONNX Runtime's arithmetic, on ts_quantized_conv2d's kernels: x, w,
 * bias and the geometry as there (only the zero points of x and w are read, not their scales);
 * acc = bias[co] + sum (x - x_zp)(w - w_zp[co]) wrapped to int32, then y = clamp(y_zero_point +
 * round_half_even((float)acc * multiplier[co])) in float32 (MLAS's MlasRequantizeOutput; relu:
 * the lower bound raised to y_zero_point) as a plain y_dtype (TS_U8 / TS_I8) tensor [N, Cout, OH,
 * OW]. multiplier: float32, one value or one per output channel (x_scale * w_scale / y_scale). */
TS_API ts_tensor *ts_qlinear_conv2d(ts_tensor *x, ts_tensor *w, ts_tensor *bias,
                                    const int64_t stride[2], const int64_t padding[2],
                                    const int64_t dilation[2], int64_t groups,
                                    ts_tensor *multiplier, int64_t y_zero_point, ts_dtype y_dtype,
                                    bool relu);

/* ------------------------------------------------------------------ add, cat, pooling */
/* ONNX Runtime's QLinearAdd (com.microsoft) given its float32 rates: a and b plain uint8 or int8
 * tensors of one dtype, b of a's shape or one value; out (a's shape and dtype) = saturate(
 * round_half_even(fma(a, a_rate, fma(b, b_rate, fixed)))), each fma rounded once to float32 (MLAS's
 * AVX2 kernel: a_rate = A_scale / C_scale, b_rate = B_scale / C_scale, fixed = (float)C_zp -
 * (a_rate * A_zp + b_rate * B_zp), all float32). */
TS_API ts_tensor *ts_qlinear_add(ts_tensor *a, ts_tensor *b, float a_rate, float b_rate,
                                 float fixed);
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
/* torch.nn.functional.avg_pool2d on a quantized (per tensor) [N, C, H, W] or [C, H, W] tensor:
 * the window [o s - pad, min(o s - pad + k, H + pad)) per dim clipped to the input, acc = sum of
 * (q - zp) over it, y = clamp(zp + nearbyint((float)acc * (1.0f / (float)d))), the input's
 * parameters; d = divisor_override (> 0), else the window's size before clipping
 * (count_include_pad) or after. That is PyTorch's channels-last kernel's vector body, what its
 * quantized convolutions' outputs take (its scalar tail rounds acc * (1 / (1 / m)): one quantum at
 * a tie). kernel, stride >= 1, 0 <= padding <= kernel / 2; ceil_mode as max pooling's. */
TS_API ts_tensor *ts_quantized_avg_pool2d(ts_tensor *x, const int64_t kernel[2],
                                          const int64_t stride[2], const int64_t padding[2],
                                          bool ceil_mode, bool count_include_pad,
                                          int64_t divisor_override);

/* ------------------------------------------------------------------ fake quantization (QAT) */
/* torch.fake_quantize_per_tensor_affine(x, scale, zero_point, quant_min, quant_max): x float32,
 * y = (clamp(qval, quant_min, quant_max) - zero_point) * sc with sc = (float)scale and qval =
 * zero_point + nearbyint(x * (1.0f / sc)) (the sum in float32, ties to even; the product in
 * float64 rounded once), PyTorch's CPU kernel to the bit. Autograd: the straight-through
 * estimator, dx = dy * mask with mask = quant_min <= qval <= quant_max
 * (FakeQuantizePerTensorAffineCachemaskBackward0). NaN gives NaN with mask 0; +-inf saturate to
 * the ends with mask 0 (PyTorch's x86 cast of those is undefined). Checks, naming the op and the
 * argument: quant_min <= quant_max within int32, scale positive, finite and a normal float32,
 * quant_min <= zero_point <= quant_max. cpu and sim (the quant slot); TS_ERR_UNSUPPORTED
 * elsewhere. */
TS_API ts_tensor *ts_fake_quantize_per_tensor_affine(ts_tensor *x, double scale, int64_t zero_point,
                                                     int64_t quant_min, int64_t quant_max);
/* torch.fake_quantize_per_tensor_affine_cachemask: y as above and the mask (bool), both owned by
 * the scope */
TS_API ts_status ts_fake_quantize_per_tensor_affine_cachemask(ts_tensor *x, double scale,
                                                              int64_t zero_point, int64_t quant_min,
                                                              int64_t quant_max, ts_tensor **y,
                                                              ts_tensor **mask);
/* torch.fake_quantize_per_channel_affine(x, scale, zero_point, axis, quant_min, quant_max): one
 * (scale, zero point) per index along axis; scales a 1-D floating tensor (used as float32) and
 * zero_points a 1-D integer tensor of x.size(axis) elements, each checked as above naming the
 * channel (float zero points, the learnable variant's, are refused) */
TS_API ts_tensor *ts_fake_quantize_per_channel_affine(ts_tensor *x, ts_tensor *scales,
                                                      ts_tensor *zero_points, int axis,
                                                      int64_t quant_min, int64_t quant_max);
TS_API ts_status ts_fake_quantize_per_channel_affine_cachemask(ts_tensor *x, ts_tensor *scales,
                                                               ts_tensor *zero_points, int axis,
                                                               int64_t quant_min, int64_t quant_max,
                                                               ts_tensor **y, ts_tensor **mask);

/* ------------------------------------------------------------------ weight-only linear */
/* torchao's int8_weight_only / int4_weight_only linear layer: y = x @ dequant(w)^T + bias in
 * float32, x float32 (or bfloat16: computed in float32, the output bfloat16) [.., K]; w either
 * qint8 [N, K] per channel along axis 0 (or per tensor), or quint4x2 [N, K] per group along K with
 * a group size of 32, 64, 128 or 256; bias NULL or [N] of x's dtype. The kernels unpack the
 * integers in registers (the weight is never dequantized in memory): per group (int8: per row)
 * sum_k x * (float)(q - zp) in float32, then scale * that sum into the row's float32 accumulator
 * (int4 on AVX-512: sum_k x * ((float)(q - zp) * scale), the dequantized values from a table).
 * Autograd: gradients reach x (g @ dequant(w)) and bias; the weight is frozen (quantized tensors
 * take no gradient). cpu and sim; other devices refuse with TS_ERR_UNSUPPORTED. */
TS_API ts_tensor *ts_weight_only_linear(ts_tensor *x, ts_tensor *w, ts_tensor *bias);
/* torchao's int8_weight_only recipe: w float32 [N, K] quantized to qint8 per output feature,
 * symmetric: scale[n] = max(max_k |w[n][k]|, 0) / 127.5 in float32 (at least float32's eps, as
 * torchao's), zero point 0 (ts_quantize_per_channel's rounding). NaN or inf weights are refused. */
TS_API ts_tensor *ts_quantize_int8_weight_only(ts_tensor *w);
/* int4 weight-only, asymmetric per group of group_size (32, 64, 128, 256; dividing K) along K:
 * lo = min(min(group), 0), hi = max(max(group), 0), scale = max((hi - lo) / 15, 1e-6) in float32,
 * zero_point = clamp(-round_half_even(lo / scale), 0, 15) (an integer, Tessera's quint4x2 format:
 * torchao's int4_weight_only keeps a float zero point and does not widen the range to 0; see
 * docs/QUANTIZATION.md); ts_quantize_per_group's rounding. */
TS_API ts_tensor *ts_quantize_int4_weight_only(ts_tensor *w, int64_t group_size);
/* torchao's int8_dynamic_activation_int8_weight / int8_dynamic_activation_int4_weight linear
 * layer ("8da8w" / "8da4w"): x float32 [.., K] quantized per token (each row of the last dim),
 * symmetric, to int8 as torchao's _int8_symm_per_token_reduced_range_quant: sx = max(max_k |x_k| /
 * 127, 1e-5), xq = clamp(round_half_even(x * (1 / sx)), -127, 127), all in float32; w as
 * ts_weight_only_linear's (qint8 [N, K] per channel along axis 0 or per tensor, or quint4x2 [N, K]
 * per group of 32, 64, 128 or 256); the exact int32 sums acc = sum_k xq (q - zp) per row (int8),
 * then y = ((float)acc * sx) * scale[n] + bias[n] (torchao's order); int4: per lane of 8
 * elements (lane l of each 128: elements 8l..8l+7, one group) its exact int32 sum L, 16 float32
 * partial sums f[l] = fmaf((float)L, scale, f[l]) over the 128s in order, y = tree(f) * sx +
 * bias[n] (tree: f[l] + f[l + 8], then + 4, + 2, + 1); float32 of shape x.shape[:-1] + [N]; bias
 * NULL or float32 [N]. Every kernel gives these bits. A row of x holding NaN or inf gives NaN
 * outputs. K at most 65536. AVX512-VNNI (vpdpbusd) where the CPU has it, else portable C: the
 * same bits.
 * No autograd (the rounding has no gradient): an input or bias that requires grad is refused
 * (TS_ERR_UNSUPPORTED). torchao's 8da4w quantizes activations asymmetrically by default
 * (act_mapping_type=ASYMMETRIC); this is its act_mapping_type=SYMMETRIC. cpu and sim. */
TS_API ts_tensor *ts_int8_dynamic_activation_linear(ts_tensor *x, ts_tensor *w, ts_tensor *bias);
/* torchao's 8da4w weight recipe: w float32 [N, K] quantized per group of group_size (32, 64, 128,
 * 256; dividing K) along K, symmetric to [-8, 7]: scale = max(max|group| / 7.5, float32 eps) in
 * float32, rounded to float16 (to nearest even: torchao's scales_precision=float16, llama.cpp's
 * q4_0 scale type), then the weights quantized with that rounded scale (ts_quantize_per_group's
 * rounding, x * (1.0f / scale) in float32), stored as quint4x2 with zero point 8; dequantize uses
 * exactly the stored scale. A group whose scale rounds past 65504 (max |w| >= 491400) is refused
 * (TS_ERR_ARG). Decision 0051. */
TS_API ts_tensor *ts_quantize_int4_symmetric_weight(ts_tensor *w, int64_t group_size);

/* ------------------------------------------------------------------ observers' statistics */
/* PyTorch 2.15's observers (torch.ao.quantization.observer) in its CPU float32 arithmetic and
 * order; the Python modules keep the state as buffers with PyTorch's state-dict keys. */
/* HistogramObserver.forward: histogram float32 [bins], min_val / max_val float32 0-d, updated in
 * place by x (any floating dtype, read as float32). The first batch (min_val +inf or max_val -inf):
 * torch.histc over [min(x), max(x)]; later ones: histc over the grown range, added as is when the
 * range did not grow, else the old histogram upscaled (16 sub-bins at their mid-points, bucketized
 * into the new bins) or, when it held one value, histc of that value times its count. inf values
 * are dropped (PyTorch drops them with a warning); NaN is refused (PyTorch's histc raises). */
TS_API ts_status ts_histogram_observer_update(ts_tensor *histogram, ts_tensor *min_val,
                                              ts_tensor *max_val, ts_tensor *x);
/* HistogramObserver._non_linear_param_search: the L2-error search over bin ranges (dst_nbins:
 * 2^bits of the target dtype, 256 for quint8 / qint8), giving *new_min / *new_max (float32 0-d) to
 * pass to ts_calculate_qparams. min_val / max_val must be a finite range. */
TS_API ts_status ts_histogram_observer_search(ts_tensor *histogram, ts_tensor *min_val,
                                              ts_tensor *max_val, int64_t dst_nbins,
                                              ts_tensor **new_min, ts_tensor **new_max);
/* HistogramObserver.calculate_qparams: the search, then ts_calculate_qparams on its range (same
 * arguments); an observer that has seen nothing (min_val +inf, max_val -inf) gives scale 1, zero
 * point 0 as PyTorch's (which also warns). */
TS_API ts_status ts_histogram_observer_qparams(ts_tensor *histogram, ts_tensor *min_val,
                                               ts_tensor *max_val, int64_t dst_nbins,
                                               int64_t quant_min, int64_t quant_max, bool symmetric,
                                               int64_t symmetric_zero_point, double eps,
                                               ts_tensor **scale, ts_tensor **zero_point);
/* MovingAverageMinMaxObserver.forward: min_val / max_val float32 0-d in place; the first batch sets
 * them to aminmax(x), later ones min + c * (batch min - min) in float32 (NaN propagates). */
TS_API ts_status ts_moving_average_minmax_update(ts_tensor *min_val, ts_tensor *max_val,
                                                 ts_tensor *x, double averaging_constant);
/* PerChannelMinMaxObserver.forward: the min / max of x per index along ch_axis, combined with
 * min_val / max_val (float32 [C], or [0] before the first batch) into new *new_min / *new_max
 * (NaN propagates, as torch.aminmax / torch.min) */
TS_API ts_status ts_per_channel_minmax_update(ts_tensor *min_val, ts_tensor *max_val, ts_tensor *x,
                                              int64_t ch_axis, ts_tensor **new_min,
                                              ts_tensor **new_max);
/* MovingAveragePerChannelMinMaxObserver.forward: as above, the first batch (min_val / max_val [0])
 * taken as it is, later ones min + c * (batch min - min) per channel in float32 (NaN propagates).
 * A channel still at (+inf, -inf) (how ts_qat_prepare's observers start) takes the batch's values,
 * where PyTorch's arithmetic would give NaN. */
TS_API ts_status ts_moving_average_per_channel_minmax_update(ts_tensor *min_val, ts_tensor *max_val,
                                                             ts_tensor *x, int64_t ch_axis,
                                                             double averaging_constant,
                                                             ts_tensor **new_min,
                                                             ts_tensor **new_max);

/* ------------------------------------------------------------------ QAT of C modules */
/* torch.ao.quantization.prepare_qat with PyTorch's x86 QAT qconfig on a C module tree
 * (src/nn/qat.c, decision 0049): every built-in Linear and Conv2d fake-quantizes its weight
 * (per-channel symmetric qint8 along the output channels, -128..127, a moving-average per-channel
 * observer) and its output (per-tensor affine quint8, 0..127 with x86's reduce_range, a
 * moving-average observer), with the fake-quant ops' straight-through gradient. Each forward:
 * observe (training mode and observer enabled only), the qparams, then fake quantize (when
 * enabled). The state is buffers under PyTorch's QAT state-dict names ("conv1.weight_fake_quant.
 * scale", ".zero_point", ".fake_quant_enabled", ".observer_enabled", ".activation_post_process.
 * {eps,min_val,max_val}", "conv1.activation_post_process.*"); per-channel ones have one value a
 * channel from the start (PyTorch's grow from [1] / [0] on the first batch). Float32 weights on
 * cpu or sim. Errors: a module other than Linear / Conv2d owning a parameter of 2+ dims
 * (TS_ERR_UNSUPPORTED: it would stay float), a model already prepared (TS_ERR_STATE), no layer to
 * prepare (TS_ERR_ARG); the model is checked whole before anything changes. */
typedef struct ts_qat_opts {
    double averaging_constant; /* the observers' moving average; 0: PyTorch's 0.01 */
    bool no_reduce_range;      /* activations over 0..255 (the qnnpack qconfig's); else 0..127 */
} ts_qat_opts;
TS_API ts_status ts_qat_prepare(ts_module *model, ts_qat_opts opts);
/* torch.ao.quantization.disable_observer / enable_observer over the whole tree: frozen observers
 * keep their statistics and the qparams stay as they are */
TS_API ts_status ts_qat_freeze_observers(ts_module *model, bool frozen);
/* enable_fake_quant / disable_fake_quant: off, the layers compute in float (observers still run) */
TS_API ts_status ts_qat_enable_fake_quant(ts_module *model, bool on);

/* ------------------------------------------------------------------ dynamic int8 LSTM */
/* torch.ao.nn.quantized.dynamic.LSTM's forward (aten's quantized_lstm on plain tensors): per layer
 * and direction, the input projection W_ih x + b_ih is one ts_dynamic_quantized_linear over the
 * whole sequence [T*B, in] (x quantized once, from the layer input's min and max), the recurrent
 * one W_hh h + b_hh one per step over h [B, H]; the gates (i, f, g, o) and the cell in float32.
 * params: per layer l and direction (forward, then reverse) w_ih qint8 [4H, in], w_hh qint8
 * [4H, H] (per tensor or per channel along dim 0), then with o.bias b_ih, b_hh float32 [4H]:
 * 4 (2 without bias) tensors a layer-direction. input float32 on cpu [T, B, I] ([B, T, I]
 * batch_first) or unbatched [T, I]; h0 / c0 [L*D, B, H] ([L*D, H] unbatched) or NULL (zeros).
 * Returns the output [T, B, D*H] (input's layout); *h_n, *c_n [L*D, B, H] when not NULL.
 * proj_size, sequence lengths and packed sequences are not supported. */
typedef struct ts_dqlstm_opts {
    int64_t num_layers; /* 0 -> 1 */
    bool bidirectional;
    bool batch_first;
    bool bias;
    bool reduce_range; /* the activations' range halved: PyTorch's x86 / fbgemm (its default) */
} ts_dqlstm_opts;
TS_API ts_tensor *ts_dynamic_quantized_lstm(ts_tensor *input, ts_tensor *h0, ts_tensor *c0,
                                            ts_tensor *const *params, int64_t n_params,
                                            ts_dqlstm_opts o, ts_tensor **h_n, ts_tensor **c_n);

#endif /* TESSERA_QUANT_H */
