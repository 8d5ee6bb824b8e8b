/* ops_quant.c — ONNX's integer and quantized operators on uint8 and int8: MatMulInteger,
 * ConvInteger, QLinearMatMul, QLinearConv. The products are summed in float64, where sums of 8-bit
 * products are exact integers (below 2^53), then converted through int64 to int32 (wrapping as
 * ONNX's int32 accumulation does) or requantized with ONNX's rounding (half to even, then
 * saturation to [0, 255] for uint8 or [-128, 127] for int8, the output zero point's type). */
#include <stdlib.h>
#include <string.h>

#include "onnx/ops_nn.h"

/* ------------------------------------------------------------------ operands */
static bool check_u8(const tso_node *n, ts_tensor *t, const char *what) {
    if (!t) return tso_fail(n, TS_ERR_ARG, "the input %s is required", what);
    if (ts_dtype_of(t) != TS_U8 && ts_dtype_of(t) != TS_I8)
        return tso_fail(n, TS_ERR_DTYPE, "%s must be uint8 or int8, got %s", what, tsi_desc(t));
    return true;
}

/* whether q has x's rank and dims, but 1 at dim `one` (the N-D per-row / per-column form) */
static bool nd_form(ts_tensor *q, ts_tensor *x, int one) {
    if (one < 0 || ts_ndim(q) != ts_ndim(x)) return false;
    for (int d = 0; d < ts_ndim(x); d++)
        if (ts_size(q, d) != (d == one ? 1 : ts_size(x, d))) return false;
    return true;
}

/* A zero point or scale q of operand x, shaped to broadcast against it: one value (per tensor),
 * a vector with one value per index of x's dim `dim` (per row, column or channel; dim < 0: none
 * allowed), or (nd_one >= 0) x's shape with 1 at dim nd_one. NULL with the error otherwise. */
static ts_tensor *quant_param(const tso_node *n, ts_tensor *q, ts_tensor *x, int dim, int nd_one,
                              const char *what) {
    if (ts_numel(q) == 1) return ts_reshape(q, TS_SHAPE());
    int r = ts_ndim(x);
    if (dim >= 0 && ts_ndim(q) == 1 && ts_size(q, 0) == ts_size(x, dim))
        return ts_reshape(q, tso_nn_along(r, dim, ts_size(q, 0)));
    if (nd_form(q, x, nd_one)) return q;
    tso_fail(n, TS_ERR_SHAPE, "%s %s does not fit %s (one value%s expected)", what, tsi_desc(q),
             tsi_desc(x), dim >= 0 ? ", or one per row / column / channel," : "");
    return NULL;
}

/* x - zero_point in float64 (exact); zp NULL: x */
static ts_tensor *centered(ts_tensor *x, ts_tensor *zp) {
    ts_tensor *x64 = ts_to_dtype(x, TS_F64);
    return zp ? ts_sub(x64, ts_to_dtype(zp, TS_F64)) : x64;
}

/* an integer sum held exactly in float64 -> int32, wrapping past 2^31 as int32 sums do */
static ts_tensor *to_int32(ts_tensor *acc) { return ts_to_dtype(ts_to_dtype(acc, TS_I64), TS_I32); }

/* saturate(round_half_even(acc * mult) + zp) as zp's type (uint8 or int8) */
static ts_tensor *requantize(ts_tensor *acc, ts_tensor *mult, ts_tensor *zp) {
    ts_tensor *y = ts_add(ts_round(ts_mul(acc, mult)), ts_to_dtype(zp, TS_F64));
    const bool s8 = ts_dtype_of(zp) == TS_I8;
    return ts_to_dtype(ts_clamp(y, s8 ? -128 : 0, s8 ? 127 : 255), s8 ? TS_I8 : TS_U8);
}

/* a float32 scale (ONNX's type for them) */
static bool check_scale(const tso_node *n, ts_tensor *t, const char *what) {
    if (!t) return tso_fail(n, TS_ERR_ARG, "the input %s is required", what);
    if (ts_dtype_of(t) != TS_F32)
        return tso_fail(n, TS_ERR_DTYPE, "%s must be float32, got %s", what, tsi_desc(t));
    return true;
}

/* x_scale * w_scale / y_scale in float32 (as ONNX's reference), then float64 */
static ts_tensor *multiplier(ts_tensor *sa, ts_tensor *sb, ts_tensor *sy) {
    return ts_to_dtype(ts_div(ts_mul(sa, sb), sy), TS_F64);
}

/* one value: the per-tensor output scale and zero point */
static bool check_one(const tso_node *n, ts_tensor *t, const char *what) {
    if (ts_numel(t) != 1)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "%s must be one value (per tensor), got %s", what,
                        tsi_desc(t));
    return true;
}

/* ------------------------------------------------------------------ matrix products */
/* (a - a_zp) @ (b - b_zp) exactly in float64; zero points per tensor, per row of a, per column of
 * b */
static ts_tensor *int_matmul(const tso_node *n, ts_tensor *a, ts_tensor *azp, ts_tensor *b,
                             ts_tensor *bzp) {
    int ra = ts_ndim(a), rb = ts_ndim(b);
    if (azp && !(azp = quant_param(n, azp, a, ra - 2, ra >= 2 ? ra - 1 : -1, "a_zero_point")))
        return NULL;
    if (bzp && !(bzp = quant_param(n, bzp, b, rb - 1, rb >= 2 ? rb - 2 : -1, "b_zero_point")))
        return NULL;
    return ts_matmul(centered(a, azp), centered(b, bzp));
}

TSO_RUN(run_matmul_integer) {
    (void)c;
    ts_tensor *azp = tso_nn_opt(n, in, 2), *bzp = tso_nn_opt(n, in, 3);
    if (!check_u8(n, in[0], "A") || !check_u8(n, in[1], "B") ||
        (azp && !check_u8(n, azp, "a_zero_point")) || (bzp && !check_u8(n, bzp, "b_zero_point")))
        return false;
    ts_tensor *acc = int_matmul(n, in[0], azp, in[1], bzp);
    out[0] = acc ? to_int32(acc) : NULL;
    return out[0] || tso_fail_pending(n);
}

/* the scales of QLinearMatMul's a and b shaped like their zero points */
static bool matmul_scales(const tso_node *n, ts_tensor *const *in, ts_tensor **sa, ts_tensor **sb) {
    int ra = ts_ndim(in[0]), rb = ts_ndim(in[3]);
    *sa = quant_param(n, in[1], in[0], ra - 2, ra >= 2 ? ra - 1 : -1, "a_scale");
    *sb = *sa ? quant_param(n, in[4], in[3], rb - 1, rb >= 2 ? rb - 2 : -1, "b_scale") : NULL;
    return *sb != NULL;
}

TSO_RUN(run_qlinear_matmul) {
    (void)c;
    if (!check_u8(n, in[0], "a") || !check_scale(n, in[1], "a_scale") ||
        !check_u8(n, in[2], "a_zero_point") || !check_u8(n, in[3], "b") ||
        !check_scale(n, in[4], "b_scale") || !check_u8(n, in[5], "b_zero_point") ||
        !check_scale(n, in[6], "y_scale") || !check_u8(n, in[7], "y_zero_point") ||
        !check_one(n, in[6], "y_scale") || !check_one(n, in[7], "y_zero_point"))
        return false;
    ts_tensor *sa, *sb;
    if (!matmul_scales(n, in, &sa, &sb)) return false;
    ts_tensor *acc = int_matmul(n, in[0], in[2], in[3], in[5]);
    if (!acc) return false;
    ts_tensor *mult = multiplier(sa, sb, ts_reshape(in[6], TS_SHAPE()));
    out[0] = requantize(acc, mult, ts_reshape(in[7], TS_SHAPE()));
    return out[0] || tso_fail_pending(n);
}

/* ------------------------------------------------------------------ convolutions */
/* Conv's attributes (pads, strides, dilations, group, auto_pad) and checks, on (x - x_zp) and
 * (w - w_zp) in float64; x_zp per tensor, w_zp per tensor or per output channel. bias: float64 [M]
 * or NULL. */
static ts_tensor *int_conv(tso_ctx *c, const tso_node *n, ts_tensor *x, ts_tensor *xzp,
                           ts_tensor *w, ts_tensor *wzp, ts_tensor *bias) {
    if (ts_ndim(x) < 3 || ts_ndim(w) != ts_ndim(x))
        return tso_fail(n, TS_ERR_SHAPE,
                        "expected x [N, C, D1, ...] and w [M, C / group, k1, ...], "
                        "got %s and %s",
                        tsi_desc(x), tsi_desc(w)),
               NULL;
    if (xzp && !(xzp = quant_param(n, xzp, x, -1, -1, "x_zero_point"))) return NULL;
    if (wzp && !(wzp = quant_param(n, wzp, w, 0, -1, "w_zero_point"))) return NULL;
    ts_tensor *args[16] = {centered(x, xzp), centered(w, wzp), bias};
    ts_tensor *res[16] = {0};
    if (!args[0] || !args[1]) return tso_fail_pending(n), NULL;
    return tso_nn_run_conv(c, n, args, res) ? res[0] : NULL;
}

TSO_RUN(run_conv_integer) {
    ts_tensor *xzp = tso_nn_opt(n, in, 2), *wzp = tso_nn_opt(n, in, 3);
    if (!check_u8(n, in[0], "x") || !check_u8(n, in[1], "w") ||
        (xzp && !check_u8(n, xzp, "x_zero_point")) || (wzp && !check_u8(n, wzp, "w_zero_point")))
        return false;
    ts_tensor *acc = int_conv(c, n, in[0], xzp, in[1], wzp, NULL);
    out[0] = acc ? to_int32(acc) : NULL;
    return out[0] || tso_fail_pending(n);
}

/* QLinearConv's bias: int32 [M], added before requantization (its scale is x_scale * w_scale) */
static bool conv_bias(const tso_node *n, ts_tensor *b, ts_tensor *w, ts_tensor **b64) {
    *b64 = NULL;
    if (!b) return true;
    if (ts_dtype_of(b) != TS_I32 || ts_ndim(b) != 1 || ts_size(b, 0) != ts_size(w, 0))
        return tso_fail(n, TS_ERR_SHAPE, "the bias B must be int32 [%lld], got %s",
                        (long long)ts_size(w, 0), tsi_desc(b));
    *b64 = ts_to_dtype(b, TS_F64);
    return *b64 || tso_fail_pending(n);
}

TSO_RUN(run_qlinear_conv) {
    if (!check_u8(n, in[0], "x") || !check_scale(n, in[1], "x_scale") ||
        !check_u8(n, in[2], "x_zero_point") || !check_u8(n, in[3], "w") ||
        !check_scale(n, in[4], "w_scale") || !check_u8(n, in[5], "w_zero_point") ||
        !check_scale(n, in[6], "y_scale") || !check_u8(n, in[7], "y_zero_point") ||
        !check_one(n, in[1], "x_scale") || !check_one(n, in[2], "x_zero_point") ||
        !check_one(n, in[6], "y_scale") || !check_one(n, in[7], "y_zero_point"))
        return false;
    ts_tensor *bias;
    if (!conv_bias(n, tso_nn_opt(n, in, 8), in[3], &bias)) return false;
    ts_tensor *acc = int_conv(c, n, in[0], in[2], in[3], in[5], bias);
    if (!acc) return false;
    /* w_scale per output channel applies to dim 1 of y [N, M, ...] */
    ts_tensor *sw = ts_numel(in[4]) == 1 ? ts_reshape(in[4], TS_SHAPE())
                                         : quant_param(n, in[4], acc, 1, -1, "w_scale");
    if (!sw) return false;
    ts_tensor *mult = multiplier(ts_reshape(in[1], TS_SHAPE()), sw, ts_reshape(in[6], TS_SHAPE()));
    out[0] = requantize(acc, mult, ts_reshape(in[7], TS_SHAPE()));
    return out[0] || tso_fail_pending(n);
}

/* ------------------------------------------------------------------ the table */
const tso_op_def tso_ops_quant[] = {
    {"MatMulInteger", 10, run_matmul_integer, NULL, false},
    {"QLinearMatMul", 10, run_qlinear_matmul, NULL, false},
    {"ConvInteger", 10, run_conv_integer, tso_nn_check_conv, false},
    {"QLinearConv", 10, run_qlinear_conv, tso_nn_check_conv, false},
    {NULL, 0, NULL, NULL, false},
};
