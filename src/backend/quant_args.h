/* quant_args.h — the operands of the quantization kernels (backend.h's quant and qlinear). */
#ifndef TS_BACKEND_QUANT_ARGS_H
#define TS_BACKEND_QUANT_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera.h"

typedef enum ts_quant_kind {
    TS_QK_QUANTIZE,   /* x (float32) -> q */
    TS_QK_DEQUANTIZE, /* q -> x (float32) */
    TS_QK_INT_REPR,   /* q (quint4x2) -> u (uint8, one value each) */
    TS_QK_FAKE,       /* x (float32) -> y (float32) and u (the gradient's mask, 0 / 1): fake
                       * quantize with qmin / qmax given (src/ops/fake_quantize.c) */
} ts_quant_kind;

/* Contiguous operands seen as [outer, channels, inner] elements. Parameter of element (o, c, i):
 * index c (per tensor: channels 1; per channel: the axis), or o * channels + c when grouped (per
 * group: o a row, c its group, inner the group size). quint4x2 data packs element e into byte e / 2
 * (low nibble for even e). Scales are double as the descriptor keeps them; the kernels use the
 * formulas of include/tessera/quant.h (per_tensor: float32 dequantize). */
typedef struct ts_quant_args {
    ts_quant_kind kind;
    ts_dtype qdtype;
    void *q;
    float *x;
    uint8_t *u;
    float *y; /* TS_QK_FAKE's output */
    int64_t outer, channels, inner;
    bool grouped, per_tensor;
    const double *scales;
    const int64_t *zero_points;
    int64_t qmin, qmax;
} ts_quant_args;

/* The int8 product of a quantized linear layer: x [m, k] (uint8 when x_unsigned, else int8,
 * contiguous rows), w [n, k] int8 contiguous; acc = sum_k (x - x_zp)(w - w_zp[n]) + bias[n]
 * (bias NULL: 0), exact (k <= 65536: int32 partial sums never overflow; the corrections in int64).
 * Then one of: out_acc (int32 [m, n], the value wrapped to int32); out_q (uint8 / int8 [m, n] as
 * out_unsigned) = clamp(out_zp + nearbyint((double)acc * mult[n]), out_min, out_max), or with
 * fmult PyTorch's x86 requantization (fbgemm's float bias: bias NULL, acc wrapped to int32,
 * clamp(out_zp + nearbyintf(((float)acc + acc_fbias[n]) * fmult[n])), each step one float32
 * rounding; acc_fbias NULL: no add); out_f (float32 [m, n]) = (float)((double)acc * fscale[n] +
 * fbias[n]) (fbias NULL: 0). w_zp, mult, fmult, acc_fbias, fscale: one value per column n. */
typedef struct ts_qlinear_args {
    int64_t m, n, k;
    const void *x;
    bool x_unsigned;
    int32_t x_zp;
    const int8_t *w;
    const int32_t *w_zp;
    const int32_t *bias;
    int32_t *out_acc;
    void *out_q;
    bool out_unsigned;
    int32_t out_zp, out_min, out_max;
    const double *mult;
    const float *fmult, *acc_fbias;
    float *out_f;
    const double *fscale;
    const float *fbias;
    /* the weight's identity for the cache of packed weights (as ts_qconv_args'); w_uid 0: none */
    uint64_t w_uid, w_version;
    int64_t w_offset;
    /* ONNX's MatMulInteger -> Cast -> Mul [-> Add] (ts_matmul_integer_to_float): with fmul set,
     * out_f = (float)acc * fmul[n] (+ fadd[n] when fadd is set), acc wrapped to int32, each step
     * one float32 operation (fscale, fbias and bias unused) */
    const float *fmul, *fadd;
    /* w_strided: w is read as the byte at w[n * w_sn + k * w_sk] xor w_flip (a [k, n] weight read
     * where it lies; w_flip 0x80: uint8 bytes moved down by 128, w_zp moved by the caller) */
    bool w_strided;
    int64_t w_sn, w_sk;
    uint8_t w_flip;
    /* x_sums (NULL: the kernel sums them): each row's byte sum of an unsigned x, made where x was
     * (ts_dynamic_quantize_matmul_to_float quantizes x and sums its rows in one pass) */
    const int64_t *x_sums;
} ts_qlinear_args;

/* A quantized 2-D convolution (backend.h's qconv): x [N, C, H, W] contiguous bytes (uint8 when
 * x_unsigned, else int8), w int8 [Cout, C / groups * KH * KW] contiguous, out [N, Cout, OH, OW]
 * bytes (uint8 when out_unsigned, else int8). acc = bias[co] + sum (x - x_zp)(w - w_zp[co]) over
 * the window, a padded position counting as x_zp (zero); out = clamp(out_zp + nearbyint((double)acc
 * * mult[co]), out_min, out_max). With fmult (ONNX Runtime's QLinearConv): acc wrapped to int32
 * first, out = clamp(out_zp + nearbyintf((float)acc * fmult[co]), out_min, out_max) in float32
 * (mult unused); with acc_fbias too (PyTorch's x86 requantization, fbgemm's float bias; bias
 * NULL), nearbyintf(((float)acc + acc_fbias[co]) * fmult[co]), each step one float32 rounding.
 * C / groups * KH * KW <= 65536 (int32 partial sums). */
typedef struct ts_qconv_args {
    int64_t n, c, h, w, cout, kh, kw, oh, ow, groups;
    int64_t stride[2], pad[2], dil[2];
    const void *x;
    bool x_unsigned;
    int32_t x_zp;
    const int8_t *wt;
    const int32_t *w_zp;
    const int32_t *bias;
    const double *mult;
    const float *fmult, *acc_fbias;
    void *out;
    bool out_unsigned;
    int32_t out_zp, out_min, out_max;
    /* channels_last: x is [N, H, W, C] dense bytes (x_nhwc), out is [N, OH, OW, Cout] (out_nhwc)
     * instead of the NCHW arrays above; either, both or neither (decision 0053) */
    bool x_nhwc, out_nhwc;
    /* the weight's identity for the cache of packed weights (backend/cpu/conv_dnnl.h's
     * tsi_conv_weight_id: its storage's uid, version and offset); w_uid 0: none */
    uint64_t w_uid, w_version;
    int64_t w_offset;
} ts_qconv_args;

/* ONNX Runtime's QLinearAdd (com.microsoft) on n bytes: a [n] and b [n] (or one value when
 * b_scalar), uint8 or int8 (is_signed) alike, out [n] of that type: out = saturate(
 * round_half_even(fma(a, ra, fma(b, rb, fixed)))), each fma rounded once to float32.
 * With torch: ts_quantized_add's arithmetic instead (its dequantize -> add [-> relu] -> quantize
 * in one pass, quant_math.h's formulas): s = sa * (float)(a - za) + sb * (float)(b - zb), each
 * product and the sum one float32 rounding, relu: max(s, 0), out = clamp(zp + nearbyintf(s *
 * inv)) in float32 (b_scalar, ra, rb and fixed unused). */
typedef struct ts_qlinear_add_args {
    int64_t n;
    const void *a, *b;
    void *out;
    bool is_signed, b_scalar;
    float ra, rb, fixed;
    bool torch, relu;
    float sa, sb, inv, zp;
    int32_t za, zb;
} ts_qlinear_add_args;

/* Pooling over quantized integers (backend.h's qpool), planes [planes, H, W] -> [planes, OH, OW],
 * contiguous, elements of qdtype (qint8 / quint8 / qint32). max: the largest element of each
 * window (kernel, stride, pad, dil; padding never chosen; every window holds an element).
 * adaptive average: rows [floor(o H / OH), ceil((o + 1) H / OH)) and likewise columns, out =
 * nearbyint((float)sum * (float)(1.0 / count)) (PyTorch's NCHW kernel). avg (kernel, stride,
 * pad; dil 1): the window [o s - pad, min(o s - pad + k, H + pad)) clipped to the input, acc =
 * sum(q - zp) over its elements, out = clamp(zp + nearbyint((float)acc * (1.0f / (float)d))) with
 * d = divisor (> 0), else the window's size before clipping (count_include_pad) or after (PyTorch's
 * channels_last kernel's vector body). */
typedef struct ts_qpool_args {
    bool adaptive_avg;
    bool avg, count_include_pad;
    int64_t divisor; /* avg: divisor_override, 0: none */
    int64_t zp;      /* avg: the zero point of input and output */
    ts_dtype qdtype;
    int64_t planes, h, w, oh, ow;
    /* channels_last: x [planes / c, H, W, c] -> out [planes / c, OH, OW, c] (dense NHWC) */
    bool nhwc;
    int64_t c;
    int64_t kernel[2], stride[2], pad[2], dil[2];
    const void *x;
    void *out;
} ts_qpool_args;

/* A weight-only quantized linear layer (backend.h's wo_linear): y[m][n] = sum_k x[m][k] *
 * (w[n][k] - zp) * scale + bias[n] in float32, x [m, k] float32 contiguous rows, y [m, n]. int4:
 * w quint4x2 [n, k / 2] bytes (element k in byte k / 2, the low nibble for even k), one (scale,
 * zp) per group of group_size elements of a row: index n * (k / group_size) + k / group_size;
 * group_size a multiple of 32 that divides k. int8: w int8 [n, k], one (scale, zp) per row n.
 * For each group (int8: the row) the kernels sum x * (float)(q - zp) in float32 and add scale *
 * that sum to the row's float32 accumulator; the weight is never dequantized in memory. */
typedef struct ts_wo_args {
    int64_t m, n, k;
    bool int4;
    int64_t group_size; /* int4 */
    const float *x;
    const uint8_t *w;
    const float *scales;
    const int32_t *zero_points;
    const float *bias; /* NULL: none */
    float *y;
    /* int8 dynamic activations (torchao's 8da8w / 8da4w; kern_qdynamic_act.c): each row of x
     * quantized to int8 per token, symmetric (sx = max(max|x| / 127, 1e-5), q = clamp(
     * round_half_even(x * (1 / sx)), -127, 127) in float32), the exact int32 sums acc = sum_k q
     * (w - zp) per group (int8: per row, k at most 65536), then y = ((float)acc * sx) * scale +
     * bias (int4: 16 lanes of 8 elements a 128, y = tree16(sum over units of fma((float)lane sum,
     * its scale)) * sx + bias: kern_qdynamic_act.c); a row of x holding NaN or inf gives NaN. */
    bool act_int8;
    bool uniform_zp; /* every zero point is zero_points[0] (the act_int8 kernel reads one) */
    /* int4: the scales as float16 bits when every one is exactly a float16 (the values of
     * scales; tsi_quant_kparams' scales_f16), else NULL. The act_int8 kernel reads these. */
    const uint16_t *scales_h;
} ts_wo_args;

#endif /* TS_BACKEND_QUANT_ARGS_H */
