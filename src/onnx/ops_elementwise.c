/* ops_elementwise.c — ONNX's elementwise operators (arithmetic, comparisons, logic, activations,
 * Cast) on Tessera's differentiable elementwise ops; broadcasting is NumPy's, as Tessera's. */
#include <math.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* ------------------------------------------------------------------ unary */
/* r converted back to x's type: ONNX keeps an integer input's type where Tessera (as PyTorch)
 * computes a float function of it in float32 (Erf takes integers) */
static ts_tensor *keep_type(ts_tensor *x, ts_tensor *r) {
    return r && ts_dtype_of(r) != ts_dtype_of(x) ? ts_to_dtype(r, ts_dtype_of(x)) : r;
}

#define UNARY(fname, expr)                                                                         \
    TSO_RUN(fname) {                                                                               \
        (void)c;                                                                                   \
        ts_tensor *x = in[0];                                                                      \
        TSO_DONE(expr);                                                                            \
    }
UNARY(run_identity, tsi_own(ts_retain(x)))
UNARY(run_neg, ts_neg(x))
UNARY(run_abs, ts_abs(x))
UNARY(run_exp, ts_exp(x))
UNARY(run_log, ts_log(x))
UNARY(run_sqrt, ts_sqrt(x))
UNARY(run_sin, ts_sin(x))
UNARY(run_cos, ts_cos(x))
UNARY(run_tan, ts_tan(x))
UNARY(run_asin, ts_asin(x))
UNARY(run_acos, ts_acos(x))
UNARY(run_atan, ts_atan(x))
UNARY(run_sinh, ts_sinh(x))
UNARY(run_cosh, ts_cosh(x))
UNARY(run_asinh, ts_asinh(x))
UNARY(run_acosh, ts_acosh(x))
UNARY(run_atanh, ts_atanh(x))
UNARY(run_erf, keep_type(x, ts_erf(x)))
UNARY(run_tanh, ts_tanh(x))
UNARY(run_sigmoid, ts_sigmoid(x))
UNARY(run_relu, ts_relu(x))
UNARY(run_floor, ts_floor(x))
UNARY(run_ceil, ts_ceil(x))
UNARY(run_round, ts_round(x))
UNARY(run_reciprocal, ts_reciprocal(x))
UNARY(run_sign, ts_sign(x))
UNARY(run_not, ts_logical_not(x))
UNARY(run_softplus, ts_log1p(ts_exp(x)))
UNARY(run_softsign, ts_div(x, ts_add_scalar(ts_abs(x), 1)))
UNARY(run_isnan, ts_ne(x, x))

TSO_RUN(run_leaky_relu) {
    (void)c;
    TSO_DONE(ts_leaky_relu(in[0], tso_attr_float(n, "alpha", 0.01f)));
}

TSO_RUN(run_prelu) {
    (void)c;
    ts_tensor *x = in[0], *slope = in[1];
    /* opset 6 and older exporters give one slope per channel ([C] for [N, C, ...]): that is a
     * [C, 1, ...] slope under the unidirectional broadcasting of opset 7 */
    int nd = ts_ndim(x);
    if (ts_ndim(slope) == 1 && nd > 2 && ts_size(slope, 0) == ts_size(x, 1) &&
        ts_size(slope, 0) != ts_size(x, -1) && ts_size(slope, 0) != 1) {
        ts_shape s = {.ndim = nd - 1};
        s.dims[0] = ts_size(slope, 0);
        for (int d = 1; d < nd - 1; d++) s.dims[d] = 1;
        slope = ts_reshape(slope, s);
    }
    TSO_DONE(ts_where(ts_ge_scalar(x, 0), x, ts_mul(x, slope)));
}

TSO_RUN(run_elu) {
    (void)c;
    double a = tso_attr_float(n, "alpha", 1.0f);
    ts_tensor *x = in[0];
    TSO_DONE(ts_where(ts_gt_scalar(x, 0), x, ts_mul_scalar(ts_sub_scalar(ts_exp(x), 1), a)));
}

TSO_RUN(run_celu) {
    (void)c;
    double a = tso_attr_float(n, "alpha", 1.0f);
    ts_tensor *x = in[0];
    /* max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) */
    TSO_DONE(
        ts_add(ts_clamp_min(x, 0),
               ts_clamp_max(ts_mul_scalar(ts_sub_scalar(ts_exp(ts_div_scalar(x, a)), 1), a), 0)));
}

TSO_RUN(run_selu) {
    (void)c;
    double a = tso_attr_float(n, "alpha", 1.67326319217681884765625f);
    double g = tso_attr_float(n, "gamma", 1.05070102214813232421875f);
    ts_tensor *x = in[0];
    TSO_DONE(ts_mul_scalar(
        ts_where(ts_gt_scalar(x, 0), x, ts_mul_scalar(ts_sub_scalar(ts_exp(x), 1), a)), g));
}

TSO_RUN(run_hard_sigmoid) {
    (void)c;
    double a = tso_attr_float(n, "alpha", 0.2f), b = tso_attr_float(n, "beta", 0.5f);
    TSO_DONE(ts_clamp(ts_add_scalar(ts_mul_scalar(in[0], a), b), 0, 1));
}

TSO_RUN(run_hard_swish) {
    (void)c;
    ts_tensor *x = in[0];
    TSO_DONE(ts_mul(x, ts_clamp(ts_add_scalar(ts_mul_scalar(x, 1.0 / 6.0), 0.5), 0, 1)));
}

TSO_RUN(run_thresholded_relu) {
    (void)c;
    double a = tso_attr_float(n, "alpha", 1.0f);
    ts_tensor *x = in[0];
    TSO_DONE(ts_where(ts_gt_scalar(x, a), x, ts_zeros_like(x)));
}

TSO_RUN(run_shrink) {
    (void)c;
    double bias = tso_attr_float(n, "bias", 0.0f), l = tso_attr_float(n, "lambd", 0.5f);
    ts_tensor *x = in[0];
    ts_tensor *zero = ts_zeros_like(x);
    ts_tensor *r = ts_where(ts_lt_scalar(x, -l), ts_add_scalar(x, bias),
                            ts_where(ts_gt_scalar(x, l), ts_sub_scalar(x, bias), zero));
    TSO_DONE(r);
}

/* Clip: attributes min / max before opset 11, optional inputs from 11 */
TSO_RUN(run_clip6) {
    (void)c;
    TSO_DONE(
        ts_clamp(in[0], tso_attr_float(n, "min", -INFINITY), tso_attr_float(n, "max", INFINITY)));
}

TSO_RUN(run_clip11) {
    (void)c;
    double lo = NAN, hi = NAN;
    if (n->n_in > 1 && in[1] && !tso_read_scalar(n, in[1], &lo, "min")) return false;
    if (n->n_in > 2 && in[2] && !tso_read_scalar(n, in[2], &hi, "max")) return false;
    if (isnan(lo) && isnan(hi)) TSO_DONE(ts_clone(in[0]));
    if (!isnan(lo) && !isnan(hi) && lo > hi) {
        /* ONNX (as NumPy's clip): every element becomes max */
        TSO_DONE(ts_full_like(in[0], hi));
    }
    TSO_DONE(ts_clamp(in[0], lo, hi));
}

/* ------------------------------------------------------------------ binary */
/* ONNX's binary operators take operands of one type and keep it (no promotion): a mixed pair is
 * the model's error, which Tessera's promotion would hide; an integer division truncates. */
static bool same_types(const tso_node *n, ts_tensor *a, ts_tensor *b) {
    if (ts_dtype_of(a) == ts_dtype_of(b)) return true;
    return tso_fail(n, TS_ERR_DTYPE, "operands of different types: %s and %s", tsi_desc(a),
                    tsi_desc(b));
}

#define BINARY(fname, expr)                                                                        \
    TSO_RUN(fname) {                                                                               \
        (void)c;                                                                                   \
        ts_tensor *a = in[0], *b = in[1];                                                          \
        if (!same_types(n, a, b)) return false;                                                    \
        TSO_DONE(expr);                                                                            \
    }
BINARY(run_add, ts_add(a, b))
BINARY(run_sub, ts_sub(a, b))
BINARY(run_mul, ts_mul(a, b))
BINARY(run_equal, ts_eq(a, b))
BINARY(run_greater, ts_gt(a, b))
BINARY(run_less, ts_lt(a, b))
BINARY(run_greater_equal, ts_ge(a, b))
BINARY(run_less_equal, ts_le(a, b))
BINARY(run_and, ts_logical_and(a, b))
BINARY(run_or, ts_logical_or(a, b))
BINARY(run_xor, ts_ne(a, b))

TSO_RUN(run_div) {
    (void)c;
    ts_tensor *a = in[0], *b = in[1];
    if (!same_types(n, a, b)) return false;
    ts_dtype dt = ts_dtype_of(a);
    if (ts_dtype_is_floating(dt)) TSO_DONE(ts_div(a, b));
    /* integers: the quotient truncated toward zero, computed in float64 */
    TSO_DONE(ts_to_dtype(ts_div(ts_to_dtype(a, TS_F64), ts_to_dtype(b, TS_F64)), dt));
}

TSO_RUN(run_mod) {
    (void)c;
    ts_tensor *a = in[0], *b = in[1];
    if (!same_types(n, a, b)) return false;
    if (tso_attr_int(n, "fmod", 0)) TSO_DONE(ts_fmod(a, b));
    if (ts_dtype_is_floating(ts_dtype_of(a)))
        return tso_fail(n, TS_ERR_ARG, "fmod=0 needs integer operands, got %s", tsi_desc(a));
    /* Python's modulo: the sign of the divisor */
    ts_tensor *r = ts_fmod(a, b);
    ts_tensor *fix =
        ts_logical_and(ts_ne_scalar(r, 0), ts_ne(ts_lt_scalar(r, 0), ts_lt_scalar(b, 0)));
    TSO_DONE(ts_where(fix, ts_add(r, b), r));
}

TSO_RUN(run_pow) {
    (void)c;
    ts_tensor *a = in[0], *b = in[1];
    ts_dtype dt = ts_dtype_of(a);
    if (ts_dtype_of(b) == dt) TSO_DONE(ts_pow(a, b));
    /* the exponent may have another type; the result keeps the base's */
    if (ts_dtype_is_floating(dt)) TSO_DONE(ts_pow(a, ts_to_dtype(b, dt)));
    TSO_DONE(ts_to_dtype(ts_pow(ts_to_dtype(a, TS_F64), ts_to_dtype(b, TS_F64)), dt));
}

/* BitShift on the unsigned types: x * 2^y (LEFT, wrapping) and x // 2^y (RIGHT) in x's type,
 * where 2^y wraps to 0 from y = bits on, giving 0 as a shift by that much does. */
static bool bitshift_left(const tso_node *n, bool *left) {
    char buf[16];
    const char *d = tso_attr_string(n, "direction", "", buf, sizeof buf);
    *left = strcmp(d, "LEFT") == 0;
    if (*left || strcmp(d, "RIGHT") == 0) return true;
    return tso_fail(n, TS_ERR_FORMAT, "direction '%s': expected LEFT or RIGHT", d);
}

static bool check_bitshift(const tso_node *n) {
    bool left;
    return bitshift_left(n, &left);
}

TSO_RUN(run_bitshift) {
    (void)c;
    ts_tensor *x = in[0], *y = in[1];
    bool left;
    if (!same_types(n, x, y) || !bitshift_left(n, &left)) return false;
    const ts_dtype dt = ts_dtype_of(x);
    if (dt != TS_U8 && dt != TS_U16 && dt != TS_U32 && dt != TS_U64)
        return tso_fail(n, TS_ERR_DTYPE, "needs unsigned integers, got %s", tsi_desc(x));
    ts_tensor *p = ts_pow(ts_full_like(y, 2), y);
    TSO_DONE(left ? ts_mul(x, p) : ts_floor_divide(x, p));
}

/* Opsets 1 to 6: without broadcast=1 the operands have one shape; with it, B's dims are a run of
 * A's starting at axis (default: A's last dims), which trailing 1s turn into NumPy's rule. */
static bool same_shape(ts_tensor *a, ts_tensor *b) {
    ts_shape sa = ts_shape_of(a), sb = ts_shape_of(b);
    return sa.ndim == sb.ndim && !memcmp(sa.dims, sb.dims, (size_t)sa.ndim * sizeof sa.dims[0]);
}

static bool legacy_operand(const tso_node *n, ts_tensor *a, ts_tensor **b) {
    if (!tso_attr_int(n, "broadcast", 0)) {
        if (same_shape(a, *b)) return true;
        return tso_fail(n, TS_ERR_SHAPE, "operands %s and %s without broadcast=1", tsi_desc(a),
                        tsi_desc(*b));
    }
    if (!tso_attr(n, "axis")) return true;
    const int na = ts_ndim(a), nb = ts_ndim(*b);
    int64_t axis = tso_attr_int(n, "axis", 0);
    if (axis < 0) axis += na;
    if (axis < 0 || axis + nb > na)
        return tso_fail(n, TS_ERR_SHAPE, "axis %lld does not place %s inside %s",
                        (long long)tso_attr_int(n, "axis", 0), tsi_desc(*b), tsi_desc(a));
    ts_shape s = ts_shape_of(*b);
    while (s.ndim < na - axis) s.dims[s.ndim++] = 1;
    *b = ts_reshape(*b, s);
    return *b != NULL || tso_fail_pending(n);
}

/* the opset 1-6 row of a binary operator: its operands made NumPy's, then the row of opset 7 */
#define LEGACY(fname, modern)                                                                      \
    TSO_RUN(fname) {                                                                               \
        ts_tensor *ab[2] = {in[0], in[1]};                                                         \
        return legacy_operand(n, ab[0], &ab[1]) && modern(c, n, ab, out);                          \
    }
LEGACY(run_add1, run_add)
LEGACY(run_sub1, run_sub)
LEGACY(run_mul1, run_mul)
LEGACY(run_div1, run_div)
LEGACY(run_pow1, run_pow)
LEGACY(run_equal1, run_equal)
LEGACY(run_greater1, run_greater)
LEGACY(run_less1, run_less)
LEGACY(run_and1, run_and)
LEGACY(run_or1, run_or)
LEGACY(run_xor1, run_xor)

/* Sum / Mean / Max / Min: any number of operands, broadcast together (before opset 8 they have
 * one shape, which broadcasting leaves as it is) */
static bool variadic(const tso_node *n, ts_tensor *const *in, ts_tensor **out,
                     ts_tensor *(*f)(ts_tensor *, ts_tensor *)) {
    if (n->n_in < 1 || !in[0]) return tso_fail(n, TS_ERR_ARG, "needs at least one input");
    ts_tensor *acc = in[0];
    for (int i = 1; i < n->n_in; i++) {
        if (!in[i]) continue;
        if (!same_types(n, acc, in[i])) return false;
        acc = f(acc, in[i]);
    }
    out[0] = n->n_in == 1 ? ts_mul_scalar(acc, 1) : acc; /* a new tensor, never the input itself */
    return out[0] != NULL || tso_fail_pending(n);
}
TSO_RUN(run_sum) {
    (void)c;
    return variadic(n, in, out, ts_add);
}
TSO_RUN(run_max) {
    (void)c;
    return variadic(n, in, out, ts_maximum);
}
TSO_RUN(run_min) {
    (void)c;
    return variadic(n, in, out, ts_minimum);
}
TSO_RUN(run_mean) {
    (void)c;
    if (!variadic(n, in, out, ts_add)) return false;
    TSO_DONE(ts_div_scalar(out[0], n->n_in));
}

TSO_RUN(run_where) {
    (void)c;
    if (ts_dtype_of(in[0]) != TS_BOOL)
        return tso_fail(n, TS_ERR_DTYPE, "condition must be bool, got %s", tsi_desc(in[0]));
    if (!same_types(n, in[1], in[2])) return false;
    TSO_DONE(ts_where(in[0], in[1], in[2]));
}

/* ------------------------------------------------------------------ casts */
static bool check_cast(const tso_node *n) {
    int64_t to = tso_attr_int(n, "to", -1);
    if (tso_dtype_from_onnx((int32_t)to) == TS_DTYPE_DEFAULT)
        return tso_fail(n, TS_ERR_UNSUPPORTED, "cast to %s, which Tessera lacks",
                        tso_onnx_type_name((int32_t)to));
    return true;
}

TSO_RUN(run_cast) {
    (void)c;
    ts_dtype to = tso_dtype_from_onnx((int32_t)tso_attr_int(n, "to", -1));
    ts_tensor *x = in[0];
    if (ts_dtype_of(x) == to) TSO_DONE(ts_clone(x));
    TSO_DONE(ts_to_dtype(x, to));
}

TSO_RUN(run_cast_like) {
    (void)c;
    ts_dtype to = ts_dtype_of(in[1]);
    if (ts_dtype_of(in[0]) == to) TSO_DONE(ts_clone(in[0]));
    TSO_DONE(ts_to_dtype(in[0], to));
}

TSO_RUN(run_isinf) {
    (void)c;
    ts_tensor *x = in[0];
    bool pos = tso_attr_int(n, "detect_positive", 1), neg = tso_attr_int(n, "detect_negative", 1);
    ts_tensor *p = pos ? ts_eq_scalar(x, INFINITY)
                       : ts_zeros(ts_shape_of(x), (ts_opts){.dtype = TS_BOOL, .device = c->device});
    ts_tensor *m = neg ? ts_eq_scalar(x, -INFINITY)
                       : ts_zeros(ts_shape_of(x), (ts_opts){.dtype = TS_BOOL, .device = c->device});
    TSO_DONE(ts_logical_or(p, m));
}

/* Dropout: the identity in inference (the mask output all true); with training_mode true (opset
 * 12 inputs: data, ratio, training_mode) Tessera's dropout draws its own mask. */
TSO_RUN(run_dropout) {
    (void)c;
    double ratio = tso_attr_float(n, "ratio", 0.5f);
    double training = 0;
    if (n->n_in > 1 && in[1] && !tso_read_scalar(n, in[1], &ratio, "ratio")) return false;
    if (n->n_in > 2 && in[2] && !tso_read_scalar(n, in[2], &training, "training_mode"))
        return false;
    ts_tensor *x = in[0];
    if (training && ratio > 0) {
        /* the mask as Tessera draws it: kept elements scaled by 1 / (1 - ratio) */
        ts_tensor *keep = ts_bernoulli_p(ts_empty_like(x), 1 - ratio);
        out[0] = ts_div_scalar(ts_mul(x, keep), 1 - ratio);
        if (n->n_out > 1 && n->out[1] >= 0) out[1] = ts_ne_scalar(keep, 0);
    } else {
        out[0] = ts_clone(x);
        if (n->n_out > 1 && n->out[1] >= 0)
            out[1] =
                ts_ones(ts_shape_of(x), (ts_opts){.dtype = TS_BOOL, .device = ts_device_of(x)});
    }
    return (out[0] && (n->n_out < 2 || n->out[1] < 0 || out[1])) || tso_fail_pending(n);
}

const tso_op_def tso_ops_elementwise[] = {
    {"Identity", 1, run_identity, NULL, false},
    {"Neg", 1, run_neg, NULL, false},
    {"Abs", 1, run_abs, NULL, false},
    {"Exp", 1, run_exp, NULL, false},
    {"Log", 1, run_log, NULL, false},
    {"Sqrt", 1, run_sqrt, NULL, false},
    {"Sin", 7, run_sin, NULL, false},
    {"Cos", 7, run_cos, NULL, false},
    {"Tan", 7, run_tan, NULL, false},
    {"Asin", 7, run_asin, NULL, false},
    {"Acos", 7, run_acos, NULL, false},
    {"Atan", 7, run_atan, NULL, false},
    {"Sinh", 9, run_sinh, NULL, false},
    {"Cosh", 9, run_cosh, NULL, false},
    {"Asinh", 9, run_asinh, NULL, false},
    {"Acosh", 9, run_acosh, NULL, false},
    {"Atanh", 9, run_atanh, NULL, false},
    {"Erf", 9, run_erf, NULL, false},
    {"Tanh", 1, run_tanh, NULL, false},
    {"Sigmoid", 1, run_sigmoid, NULL, false},
    {"Relu", 1, run_relu, NULL, false},
    {"Floor", 1, run_floor, NULL, false},
    {"Ceil", 1, run_ceil, NULL, false},
    {"Round", 11, run_round, NULL, false},
    {"Reciprocal", 1, run_reciprocal, NULL, false},
    {"Sign", 9, run_sign, NULL, false},
    {"Not", 1, run_not, NULL, false},
    {"Softplus", 1, run_softplus, NULL, false},
    {"Softsign", 1, run_softsign, NULL, false},
    {"IsNaN", 9, run_isnan, NULL, false},
    {"IsInf", 10, run_isinf, NULL, false},
    {"LeakyRelu", 1, run_leaky_relu, NULL, false},
    {"PRelu", 1, run_prelu, NULL, false},
    {"Elu", 1, run_elu, NULL, false},
    {"Celu", 12, run_celu, NULL, false},
    {"Selu", 1, run_selu, NULL, false},
    {"HardSigmoid", 1, run_hard_sigmoid, NULL, false},
    {"HardSwish", 14, run_hard_swish, NULL, false},
    {"ThresholdedRelu", 10, run_thresholded_relu, NULL, false},
    {"Shrink", 9, run_shrink, NULL, false},
    {"Clip", 1, run_clip6, NULL, false},
    {"Clip", 11, run_clip11, NULL, false},
    {"Add", 1, run_add1, NULL, false},
    {"Add", 7, run_add, NULL, false},
    {"Sub", 1, run_sub1, NULL, false},
    {"Sub", 7, run_sub, NULL, false},
    {"Mul", 1, run_mul1, NULL, false},
    {"Mul", 7, run_mul, NULL, false},
    {"Div", 1, run_div1, NULL, false},
    {"Div", 7, run_div, NULL, false},
    {"Mod", 10, run_mod, NULL, false},
    {"Pow", 1, run_pow1, NULL, false},
    {"Pow", 7, run_pow, NULL, false},
    {"BitShift", 11, run_bitshift, check_bitshift, false},
    {"Equal", 1, run_equal1, NULL, false},
    {"Equal", 7, run_equal, NULL, false},
    {"Greater", 1, run_greater1, NULL, false},
    {"Greater", 7, run_greater, NULL, false},
    {"Less", 1, run_less1, NULL, false},
    {"Less", 7, run_less, NULL, false},
    {"GreaterOrEqual", 12, run_greater_equal, NULL, false},
    {"LessOrEqual", 12, run_less_equal, NULL, false},
    {"And", 1, run_and1, NULL, false},
    {"And", 7, run_and, NULL, false},
    {"Or", 1, run_or1, NULL, false},
    {"Or", 7, run_or, NULL, false},
    {"Xor", 1, run_xor1, NULL, false},
    {"Xor", 7, run_xor, NULL, false},
    {"Sum", 1, run_sum, NULL, false},
    {"Mean", 1, run_mean, NULL, false},
    {"Max", 1, run_max, NULL, false},
    {"Min", 1, run_min, NULL, false},
    {"Where", 9, run_where, NULL, false},
    {"Cast", 6, run_cast, check_cast, false},
    {"CastLike", 15, run_cast_like, NULL, false},
    {"Dropout", 7, run_dropout, NULL, true},
    {NULL, 0, NULL, NULL, false},
};
