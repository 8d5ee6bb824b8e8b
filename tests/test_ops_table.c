/* test_ops_table.c — the op table (DESIGN §9.1): one row per op, run by tests/support/op_table.c.
 */
#include <math.h>

#include "op_table.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ apply wrappers */
/* each wrapper ends in a declaration so that a use reads like one: AP1(ts_neg); */
#define OT_END extern int ot_wrapper_end_
#define AP1(fn)                                                                                    \
    static ts_tensor *ap_##fn(ts_tensor **in, const ot_args *a) {                                  \
        (void)a;                                                                                   \
        return fn(in[0]);                                                                          \
    }                                                                                              \
    OT_END
#define AP2(fn)                                                                                    \
    static ts_tensor *ap_##fn(ts_tensor **in, const ot_args *a) {                                  \
        (void)a;                                                                                   \
        return fn(in[0], in[1]);                                                                   \
    }                                                                                              \
    OT_END
#define APS(fn)                                                                                    \
    static ts_tensor *ap_##fn(ts_tensor **in, const ot_args *a) { return fn(in[0], a->s); }        \
    OT_END
#define APDIM(fn)                                                                                  \
    static ts_tensor *ap_##fn(ts_tensor **in, const ot_args *a) {                                  \
        return fn(in[0], a->dim, a->keepdim);                                                      \
    }                                                                                              \
    OT_END
#define APDIMS(fn)                                                                                 \
    static ts_tensor *ap_##fn(ts_tensor **in, const ot_args *a) {                                  \
        return fn(in[0], a->dims, a->keepdim);                                                     \
    }                                                                                              \
    OT_END
#define APCORR(fn)                                                                                 \
    static ts_tensor *ap_##fn(ts_tensor **in, const ot_args *a) {                                  \
        return fn(in[0], a->dim, a->keepdim, a->s);                                                \
    }                                                                                              \
    OT_END
#define APCORRS(fn)                                                                                \
    static ts_tensor *ap_##fn(ts_tensor **in, const ot_args *a) {                                  \
        return fn(in[0], a->dims, a->keepdim, a->s);                                               \
    }                                                                                              \
    OT_END

AP1(ts_neg);
AP1(ts_abs);
AP1(ts_exp);
AP1(ts_log);
AP1(ts_log1p);
AP1(ts_sqrt);
AP1(ts_rsqrt);
AP1(ts_sin);
AP1(ts_cos);
AP1(ts_tan);
AP1(ts_asin);
AP1(ts_acos);
AP1(ts_atan);
AP1(ts_sinh);
AP1(ts_cosh);
AP1(ts_asinh);
AP1(ts_acosh);
AP1(ts_atanh);
AP1(ts_erf);
AP1(ts_tanh);
AP1(ts_sigmoid);
AP1(ts_relu);
AP1(ts_gelu);
AP1(ts_silu);
AP1(ts_softplus);
AP1(ts_sign);
AP1(ts_floor);
AP1(ts_ceil);
AP1(ts_round);
AP1(ts_reciprocal);
AP1(ts_square);
AP1(ts_logical_not);
AP1(ts_neg_);
AP1(ts_abs_);
AP1(ts_exp_);
AP1(ts_log_);
AP1(ts_sqrt_);
AP1(ts_sigmoid_);
AP1(ts_relu_);
AP1(ts_tanh_);
AP1(ts_zero_);
APS(ts_fill_);
AP2(ts_add);
AP2(ts_sub);
AP2(ts_mul);
AP2(ts_div);
AP2(ts_pow);
AP2(ts_maximum);
AP2(ts_minimum);
AP2(ts_fmod);
AP2(ts_eq);
AP2(ts_ne);
AP2(ts_lt);
AP2(ts_le);
AP2(ts_gt);
AP2(ts_ge);
AP2(ts_logical_and);
AP2(ts_logical_or);
AP2(ts_add_);
AP2(ts_sub_);
AP2(ts_mul_);
AP2(ts_div_);
AP2(ts_pow_);
APS(ts_add_scalar);
APS(ts_sub_scalar);
APS(ts_rsub_scalar);
APS(ts_mul_scalar);
APS(ts_div_scalar);
APS(ts_pow_scalar);
APS(ts_rpow_scalar);
APS(ts_maximum_scalar);
APS(ts_minimum_scalar);
APS(ts_fmod_scalar);
APS(ts_eq_scalar);
APS(ts_ne_scalar);
APS(ts_lt_scalar);
APS(ts_le_scalar);
APS(ts_gt_scalar);
APS(ts_ge_scalar);
APS(ts_add_scalar_);
APS(ts_sub_scalar_);
APS(ts_mul_scalar_);
APS(ts_div_scalar_);
APS(ts_pow_scalar_);
AP1(ts_sum);
AP1(ts_mean);
AP1(ts_prod);
AP1(ts_max);
AP1(ts_min);
AP1(ts_var);
AP1(ts_std);
AP1(ts_argmax);
AP1(ts_argmin);
AP1(ts_logsumexp);
APDIM(ts_sum_dim);
APDIM(ts_mean_dim);
APDIM(ts_prod_dim);
APDIM(ts_amax_dim);
APDIM(ts_amin_dim);
APDIM(ts_argmax_dim);
APDIM(ts_argmin_dim);
APDIM(ts_logsumexp_dim);
APDIMS(ts_sum_dims);
APDIMS(ts_mean_dims);
APDIMS(ts_amax_dims);
APDIMS(ts_amin_dims);
APDIMS(ts_logsumexp_dims);
APCORR(ts_var_dim);
APCORR(ts_std_dim);
APCORRS(ts_var_dims);
APCORRS(ts_std_dims);
AP2(ts_mm);
AP2(ts_bmm);
AP2(ts_matmul);

#define ALPHA 2.0
static ts_tensor *ap_add_alpha(ts_tensor **in, const ot_args *a) {
    (void)a;
    return ts_add_alpha(in[0], in[1], ALPHA);
}
static ts_tensor *ap_where(ts_tensor **in, const ot_args *a) {
    (void)a;
    return ts_where(in[0], in[1], in[2]);
}
static ts_tensor *ap_clamp(ts_tensor **in, const ot_args *a) {
    return ts_clamp(in[0], a->s, a->s2);
}
static ts_tensor *ap_clamp_(ts_tensor **in, const ot_args *a) {
    return ts_clamp_(in[0], a->s, a->s2);
}
static ts_tensor *ap_clamp_min(ts_tensor **in, const ot_args *a) {
    return ts_clamp_min(in[0], a->s);
}
static ts_tensor *ap_clamp_max(ts_tensor **in, const ot_args *a) {
    return ts_clamp_max(in[0], a->s2);
}
static ts_tensor *ap_masked_fill(ts_tensor **in, const ot_args *a) {
    return ts_masked_fill(in[0], in[1], a->s);
}
static ts_tensor *ap_masked_fill_(ts_tensor **in, const ot_args *a) {
    return ts_masked_fill_(in[0], in[1], a->s);
}
static ts_tensor *ap_max_dim(ts_tensor **in, const ot_args *a) {
    return ts_max_dim(in[0], a->dim, a->keepdim, NULL);
}
static ts_tensor *ap_min_dim(ts_tensor **in, const ot_args *a) {
    return ts_min_dim(in[0], a->dim, a->keepdim, NULL);
}
static ts_tensor *ap_max_dim_idx(ts_tensor **in, const ot_args *a) {
    ts_tensor *idx = NULL;
    return ts_max_dim(in[0], a->dim, a->keepdim, &idx) ? idx : NULL;
}
static ts_tensor *ap_min_dim_idx(ts_tensor **in, const ot_args *a) {
    ts_tensor *idx = NULL;
    return ts_min_dim(in[0], a->dim, a->keepdim, &idx) ? idx : NULL;
}
static ts_tensor *ap_cat(ts_tensor **in, const ot_args *a) { return ts_cat(in, a->n_in, a->dim); }
static ts_tensor *ap_stack(ts_tensor **in, const ot_args *a) {
    return ts_stack(in, a->n_in, a->dim);
}
static ts_tensor *ap_index_select(ts_tensor **in, const ot_args *a) {
    return ts_index_select(in[0], a->dim, in[1]);
}
static ts_tensor *ap_gather(ts_tensor **in, const ot_args *a) {
    return ts_gather(in[0], a->dim, in[1]);
}
static ts_tensor *ap_scatter_add(ts_tensor **in, const ot_args *a) {
    return ts_scatter_add(in[0], a->dim, in[1], in[2]);
}
static ts_tensor *ap_scatter_add_(ts_tensor **in, const ot_args *a) {
    return ts_scatter_add_(in[0], a->dim, in[1], in[2]);
}
static ts_tensor *ap_softmax(ts_tensor **in, const ot_args *a) { return ts_softmax(in[0], a->dim); }
static ts_tensor *ap_log_softmax(ts_tensor **in, const ot_args *a) {
    return ts_log_softmax(in[0], a->dim);
}
static ts_tensor *ap_one_hot(ts_tensor **in, const ot_args *a) { return ts_one_hot(in[0], a->n); }

/* ------------------------------------------------------------------ small references */
static bool ref_fill(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    (void)row;
    out->shape = in->shape[0];
    for (int64_t i = 0; i < ot_numel(out->shape); i++) out->v[i] = a->s;
    return true;
}
static bool ref_zero(const ot_row *row, const ot_ref_in *in, const ot_args *a, ot_ref_out *out) {
    ot_args z = *a;
    z.s = 0;
    return ref_fill(row, in, &z, out);
}
static bool ref_clamp_min(const ot_row *row, const ot_ref_in *in, const ot_args *a,
                          ot_ref_out *out) {
    ot_args c = *a;
    c.s2 = NAN;
    return !isnan(a->s) && ot_ref_clamp(row, in, &c, out); /* no bound at all: PyTorch's error */
}
static bool ref_clamp_max(const ot_row *row, const ot_ref_in *in, const ot_args *a,
                          ot_ref_out *out) {
    ot_args c = *a;
    c.s = NAN;
    return !isnan(a->s2) && ot_ref_clamp(row, in, &c, out);
}

/* ------------------------------------------------------------------ the table */
#define BOOLB  OT_BIT(TS_BOOL)
#define NOBOOL (OT_INTS | BOOLB)
#define ROW(nm, fn, refn, opc, dts, rej, rule, kind)                                               \
    .name = nm, .apply = ap_##fn, .ref = refn, .op = opc, .dtypes = dts, .rejects = rej,           \
    .out = rule, .samples = kind
#define UN(nm, fn, opc, dts, rej, rule, dom, spec)                                                 \
    {                                                                                              \
        ROW(nm, fn, ot_ref_unary, opc, dts, rej, rule, OT_S_UNARY), .domain = {dom},               \
                                                                    .specials = spec               \
    }
#define UN_(nm, fn, opc, dts, rej, dom)                                                            \
    {                                                                                              \
        ROW(nm, fn, ot_ref_unary, opc, dts, rej, OT_OUT_SAME, OT_S_UNARY), .domain = {dom},        \
                                                                           .inplace = true         \
    }
#define BIN(nm, fn, opc, dts, rej, rule, d0, d1, spec)                                             \
    {                                                                                              \
        ROW(nm, fn, ot_ref_binary, opc, dts, rej, rule, OT_S_BINARY),                              \
            .arity = 2, .domain = {d0, d1}, .specials = spec                                       \
    }
#define BIN_(nm, fn, opc, dts, rej, d0, d1)                                                        \
    {                                                                                              \
        ROW(nm, fn, ot_ref_binary, opc, dts, rej, OT_OUT_SAME, OT_S_BINARY),                       \
            .arity = 2, .domain = {d0, d1}, .inplace = true                                        \
    }
#define SC(nm, fn, opc, dts, rej, rule, dom, s0, s1, spec)                                         \
    {                                                                                              \
        ROW(nm, fn, ot_ref_binary_scalar, opc, dts, rej, rule, OT_S_SCALAR),                       \
            .domain = {dom}, .scalars = {s0, s1}, .nscalars = 2, .specials = spec                  \
    }
#define SC_(nm, fn, opc, dts, rej, dom, s0, s1, ns)                                                \
    {                                                                                              \
        ROW(nm, fn, ot_ref_binary_scalar, opc, dts, rej, OT_OUT_SAME, OT_S_SCALAR),                \
            .domain = {dom}, .scalars = {s0, s1}, .nscalars = ns, .inplace = true                  \
    }
#define RED(nm, fn, opc, dts, rej, rule, kind, dom)                                                \
    {                                                                                              \
        ROW(nm, fn, ot_ref_reduce, opc, dts, rej, rule, kind), .domain = { dom }                   \
    }

static const ot_row rows[] = {
    /* unary */
    UN("neg", ts_neg, TS_U_NEG, OT_NUMERIC, BOOLB, OT_OUT_SAME, OT_D_ANY, true),
    UN("abs", ts_abs, TS_U_ABS, OT_NUMERIC, 0, OT_OUT_SAME, OT_D_ANY, true),
    UN("exp", ts_exp, TS_U_EXP, OT_ALL, 0, OT_OUT_FLOAT, OT_D_ANY, true),
    UN("log", ts_log, TS_U_LOG, OT_ALL, 0, OT_OUT_FLOAT, OT_D_POS, true),
    UN("log1p", ts_log1p, TS_U_LOG1P, OT_ALL, 0, OT_OUT_FLOAT, OT_D_POS, true),
    UN("sqrt", ts_sqrt, TS_U_SQRT, OT_ALL, 0, OT_OUT_FLOAT, OT_D_POS, true),
    UN("rsqrt", ts_rsqrt, TS_U_RSQRT, OT_ALL, 0, OT_OUT_FLOAT, OT_D_POS, false),
    UN("sin", ts_sin, TS_U_SIN, OT_ALL, 0, OT_OUT_FLOAT, OT_D_ANY, true),
    UN("cos", ts_cos, TS_U_COS, OT_ALL, 0, OT_OUT_FLOAT, OT_D_ANY, true),
    UN("tan", ts_tan, TS_U_TAN, OT_ALL, 0, OT_OUT_FLOAT, OT_D_ANY, true),
    UN("asin", ts_asin, TS_U_ASIN, OT_ALL, 0, OT_OUT_FLOAT, OT_D_UNIT, true),
    UN("acos", ts_acos, TS_U_ACOS, OT_ALL, 0, OT_OUT_FLOAT, OT_D_UNIT, true),
    UN("atan", ts_atan, TS_U_ATAN, OT_ALL, 0, OT_OUT_FLOAT, OT_D_ANY, true),
    UN("sinh", ts_sinh, TS_U_SINH, OT_ALL, 0, OT_OUT_FLOAT, OT_D_ANY, true),
    UN("cosh", ts_cosh, TS_U_COSH, OT_ALL, 0, OT_OUT_FLOAT, OT_D_ANY, true),
    UN("asinh", ts_asinh, TS_U_ASINH, OT_ALL, 0, OT_OUT_FLOAT, OT_D_ANY, true),
    UN("acosh", ts_acosh, TS_U_ACOSH, OT_ALL, 0, OT_OUT_FLOAT, OT_D_GE1, true),
    UN("atanh", ts_atanh, TS_U_ATANH, OT_ALL, 0, OT_OUT_FLOAT, OT_D_UNIT, true),
    UN("erf", ts_erf, TS_U_ERF, OT_ALL, 0, OT_OUT_FLOAT, OT_D_ANY, true),
    UN("tanh", ts_tanh, TS_U_TANH, OT_ALL, 0, OT_OUT_FLOAT, OT_D_ANY, true),
    UN("sigmoid", ts_sigmoid, TS_U_SIGMOID, OT_ALL, 0, OT_OUT_FLOAT, OT_D_ANY, true),
    UN("relu", ts_relu, TS_U_RELU, OT_NUMERIC, 0, OT_OUT_SAME, OT_D_ANY, true),
    UN("gelu", ts_gelu, TS_U_GELU, OT_FLOATS, NOBOOL, OT_OUT_SAME, OT_D_ANY, false),
    UN("silu", ts_silu, TS_U_SILU, OT_FLOATS, NOBOOL, OT_OUT_SAME, OT_D_ANY, false),
    UN("softplus", ts_softplus, TS_U_SOFTPLUS, OT_FLOATS, NOBOOL, OT_OUT_SAME, OT_D_ANY, false),
    UN("sign", ts_sign, TS_U_SIGN, OT_ALL, 0, OT_OUT_SAME, OT_D_ANY, false),
    UN("floor", ts_floor, TS_U_FLOOR, OT_NUMERIC, 0, OT_OUT_SAME, OT_D_ANY, true),
    UN("ceil", ts_ceil, TS_U_CEIL, OT_NUMERIC, 0, OT_OUT_SAME, OT_D_ANY, true),
    UN("round", ts_round, TS_U_ROUND, OT_NUMERIC, 0, OT_OUT_SAME, OT_D_ANY, true),
    UN("reciprocal", ts_reciprocal, TS_U_RECIPROCAL, OT_ALL, 0, OT_OUT_FLOAT, OT_D_NONZERO, true),
    UN("square", ts_square, TS_U_SQUARE, OT_NUMERIC, 0, OT_OUT_SAME, OT_D_ANY, true),
    UN("logical_not", ts_logical_not, TS_U_LOGICAL_NOT, OT_ALL, 0, OT_OUT_BOOL, OT_D_ANY, true),
    UN_("neg_", ts_neg_, TS_U_NEG, OT_NUMERIC, BOOLB, OT_D_ANY),
    UN_("abs_", ts_abs_, TS_U_ABS, OT_NUMERIC, 0, OT_D_ANY),
    UN_("exp_", ts_exp_, TS_U_EXP, OT_FLOATS, NOBOOL, OT_D_ANY),
    UN_("log_", ts_log_, TS_U_LOG, OT_FLOATS, OT_INTS, OT_D_POS),
    UN_("sqrt_", ts_sqrt_, TS_U_SQRT, OT_FLOATS, OT_INTS, OT_D_POS),
    UN_("sigmoid_", ts_sigmoid_, TS_U_SIGMOID, OT_FLOATS, OT_INTS, OT_D_ANY),
    UN_("relu_", ts_relu_, TS_U_RELU, OT_NUMERIC, 0, OT_D_ANY),
    UN_("tanh_", ts_tanh_, TS_U_TANH, OT_FLOATS, OT_INTS, OT_D_ANY),
    {ROW("zero_", ts_zero_, ref_zero, 0, OT_ALL, 0, OT_OUT_SAME, OT_S_SCALAR), .arity = 1,
     .scalars = {0}, .nscalars = 1, .inplace = true},
    {ROW("fill_", ts_fill_, ref_fill, 0, OT_ALL, 0, OT_OUT_SAME, OT_S_SCALAR), .arity = 1,
     .scalars = {2, 0}, .nscalars = 2, .inplace = true},

    /* binary */
    BIN("add", ts_add, TS_B_ADD, OT_ALL, 0, OT_OUT_PROMOTE, OT_D_ANY, OT_D_ANY, true),
    BIN("sub", ts_sub, TS_B_SUB, OT_NUMERIC, BOOLB, OT_OUT_PROMOTE, OT_D_ANY, OT_D_ANY, true),
    BIN("mul", ts_mul, TS_B_MUL, OT_ALL, 0, OT_OUT_PROMOTE, OT_D_ANY, OT_D_ANY, true),
    BIN("div", ts_div, TS_B_DIV, OT_ALL, 0, OT_OUT_PROMOTE_FLOAT, OT_D_ANY, OT_D_NONZERO, true),
    BIN("pow", ts_pow, TS_B_POW, OT_NUMERIC, 0, OT_OUT_PROMOTE, OT_D_POS, OT_D_SMALL, false),
    BIN("maximum", ts_maximum, TS_B_MAX, OT_ALL, 0, OT_OUT_PROMOTE, OT_D_ANY, OT_D_ANY, true),
    BIN("minimum", ts_minimum, TS_B_MIN, OT_ALL, 0, OT_OUT_PROMOTE, OT_D_ANY, OT_D_ANY, true),
    BIN("fmod", ts_fmod, TS_B_FMOD, OT_NUMERIC, 0, OT_OUT_PROMOTE, OT_D_ANY, OT_D_NONZERO, true),
    BIN("eq", ts_eq, TS_B_EQ, OT_ALL, 0, OT_OUT_BOOL, OT_D_ANY, OT_D_ANY, true),
    BIN("ne", ts_ne, TS_B_NE, OT_ALL, 0, OT_OUT_BOOL, OT_D_ANY, OT_D_ANY, true),
    BIN("lt", ts_lt, TS_B_LT, OT_ALL, 0, OT_OUT_BOOL, OT_D_ANY, OT_D_ANY, true),
    BIN("le", ts_le, TS_B_LE, OT_ALL, 0, OT_OUT_BOOL, OT_D_ANY, OT_D_ANY, true),
    BIN("gt", ts_gt, TS_B_GT, OT_ALL, 0, OT_OUT_BOOL, OT_D_ANY, OT_D_ANY, true),
    BIN("ge", ts_ge, TS_B_GE, OT_ALL, 0, OT_OUT_BOOL, OT_D_ANY, OT_D_ANY, true),
    BIN("logical_and", ts_logical_and, TS_B_AND, OT_ALL, 0, OT_OUT_BOOL, OT_D_ANY, OT_D_ANY, true),
    BIN("logical_or", ts_logical_or, TS_B_OR, OT_ALL, 0, OT_OUT_BOOL, OT_D_ANY, OT_D_ANY, true),
    {ROW("add_alpha", add_alpha, ot_ref_add_alpha, TS_B_ADD, OT_NUMERIC, 0, OT_OUT_PROMOTE,
         OT_S_BINARY),
     .arity = 2, .scalars = {ALPHA}, .nscalars = 1},
    BIN_("add_", ts_add_, TS_B_ADD, OT_NUMERIC, 0, OT_D_ANY, OT_D_ANY),
    BIN_("sub_", ts_sub_, TS_B_SUB, OT_NUMERIC, BOOLB, OT_D_ANY, OT_D_ANY),
    BIN_("mul_", ts_mul_, TS_B_MUL, OT_NUMERIC, 0, OT_D_ANY, OT_D_ANY),
    BIN_("div_", ts_div_, TS_B_DIV, OT_FLOATS, OT_INTS, OT_D_ANY, OT_D_NONZERO),
    BIN_("pow_", ts_pow_, TS_B_POW, OT_FLOATS, 0, OT_D_POS, OT_D_SMALL),

    /* scalar forms: an integral and a fractional weak scalar each */
    SC("add_scalar", ts_add_scalar, TS_B_ADD, OT_ALL, 0, OT_OUT_PROMOTE, OT_D_ANY, 2, -1.5, true),
    SC("sub_scalar", ts_sub_scalar, TS_B_SUB, OT_NUMERIC, BOOLB, OT_OUT_PROMOTE, OT_D_ANY, 2, 0.5,
       true),
    SC("rsub_scalar", ts_rsub_scalar, TS_B_RSUB, OT_NUMERIC, BOOLB, OT_OUT_PROMOTE, OT_D_ANY, 2,
       0.5, true),
    SC("mul_scalar", ts_mul_scalar, TS_B_MUL, OT_ALL, 0, OT_OUT_PROMOTE, OT_D_ANY, 2, -1.5, true),
    SC("div_scalar", ts_div_scalar, TS_B_DIV, OT_ALL, 0, OT_OUT_PROMOTE_FLOAT, OT_D_ANY, 2, -0.5,
       true),
    SC("pow_scalar", ts_pow_scalar, TS_B_POW, OT_NUMERIC, 0, OT_OUT_PROMOTE, OT_D_POS, 2, 0.5,
       false),
    SC("rpow_scalar", ts_rpow_scalar, TS_B_RPOW, OT_NUMERIC, 0, OT_OUT_PROMOTE, OT_D_NONNEG, 2, 1.5,
       false),
    SC("maximum_scalar", ts_maximum_scalar, TS_B_MAX, OT_NUMERIC, 0, OT_OUT_PROMOTE, OT_D_ANY, 1,
       -0.5, true),
    SC("minimum_scalar", ts_minimum_scalar, TS_B_MIN, OT_NUMERIC, 0, OT_OUT_PROMOTE, OT_D_ANY, 1,
       -0.5, true),
    SC("fmod_scalar", ts_fmod_scalar, TS_B_FMOD, OT_NUMERIC, 0, OT_OUT_PROMOTE, OT_D_ANY, 2, 1.5,
       true),
    SC("eq_scalar", ts_eq_scalar, TS_B_EQ, OT_ALL, 0, OT_OUT_BOOL, OT_D_ANY, 1, 0.5, true),
    SC("ne_scalar", ts_ne_scalar, TS_B_NE, OT_ALL, 0, OT_OUT_BOOL, OT_D_ANY, 1, 0.5, true),
    SC("lt_scalar", ts_lt_scalar, TS_B_LT, OT_ALL, 0, OT_OUT_BOOL, OT_D_ANY, 1, 0.5, true),
    SC("le_scalar", ts_le_scalar, TS_B_LE, OT_ALL, 0, OT_OUT_BOOL, OT_D_ANY, 1, 0.5, true),
    SC("gt_scalar", ts_gt_scalar, TS_B_GT, OT_ALL, 0, OT_OUT_BOOL, OT_D_ANY, 1, 0.5, true),
    SC("ge_scalar", ts_ge_scalar, TS_B_GE, OT_ALL, 0, OT_OUT_BOOL, OT_D_ANY, 1, 0.5, true),
    SC_("add_scalar_", ts_add_scalar_, TS_B_ADD, OT_NUMERIC, 0, OT_D_ANY, 2, 0, 1),
    SC_("sub_scalar_", ts_sub_scalar_, TS_B_SUB, OT_NUMERIC, BOOLB, OT_D_ANY, 2, 0, 1),
    SC_("mul_scalar_", ts_mul_scalar_, TS_B_MUL, OT_NUMERIC, 0, OT_D_ANY, 2, 0, 1),
    SC_("div_scalar_", ts_div_scalar_, TS_B_DIV, OT_FLOATS, OT_INTS, OT_D_ANY, 2, -0.5, 2),
    SC_("pow_scalar_", ts_pow_scalar_, TS_B_POW, OT_FLOATS, 0, OT_D_POS, 2, 0.5, 2),

    /* selection */
    {ROW("where", where, ot_ref_where, 0, OT_ALL, 0, OT_OUT_PROMOTE, OT_S_WHERE), .arity = 3},
    {ROW("clamp", clamp, ot_ref_clamp, 0, OT_NUMERIC, 0, OT_OUT_SAME, OT_S_CLAMP), .arity = 1,
     .specials = true},
    {ROW("clamp_min", clamp_min, ref_clamp_min, 0, OT_NUMERIC, 0, OT_OUT_SAME, OT_S_CLAMP),
     .arity = 1},
    {ROW("clamp_max", clamp_max, ref_clamp_max, 0, OT_NUMERIC, 0, OT_OUT_SAME, OT_S_CLAMP),
     .arity = 1},
    {ROW("clamp_", clamp_, ot_ref_clamp, 0, OT_NUMERIC, 0, OT_OUT_SAME, OT_S_CLAMP), .arity = 1,
     .inplace = true},
    {ROW("masked_fill", masked_fill, ot_ref_masked_fill, 0, OT_ALL, 0, OT_OUT_SAME,
         OT_S_MASKED_FILL),
     .arity = 2},
    {ROW("masked_fill_", masked_fill_, ot_ref_masked_fill, 0, OT_ALL, 0, OT_OUT_SAME,
         OT_S_MASKED_FILL),
     .arity = 2, .inplace = true},

    /* reductions */
    RED("sum", ts_sum, TS_R_SUM, OT_ALL, 0, OT_OUT_SUM, OT_S_REDUCE_ALL, OT_D_ANY),
    RED("sum_dim", ts_sum_dim, TS_R_SUM, OT_ALL, 0, OT_OUT_SUM, OT_S_REDUCE_DIM, OT_D_ANY),
    RED("sum_dims", ts_sum_dims, TS_R_SUM, OT_ALL, 0, OT_OUT_SUM, OT_S_REDUCE_DIMS, OT_D_ANY),
    RED("mean", ts_mean, TS_R_MEAN, OT_FLOATS, NOBOOL, OT_OUT_SAME, OT_S_REDUCE_ALL, OT_D_ANY),
    RED("mean_dim", ts_mean_dim, TS_R_MEAN, OT_FLOATS, NOBOOL, OT_OUT_SAME, OT_S_REDUCE_DIM,
        OT_D_ANY),
    RED("mean_dims", ts_mean_dims, TS_R_MEAN, OT_FLOATS, NOBOOL, OT_OUT_SAME, OT_S_REDUCE_DIMS,
        OT_D_ANY),
    RED("prod", ts_prod, TS_R_PROD, OT_ALL, 0, OT_OUT_SUM, OT_S_REDUCE_ALL, OT_D_PROD),
    RED("prod_dim", ts_prod_dim, TS_R_PROD, OT_ALL, 0, OT_OUT_SUM, OT_S_REDUCE_DIM, OT_D_PROD),
    RED("max", ts_max, TS_R_MAX, OT_ALL, 0, OT_OUT_SAME, OT_S_REDUCE_ALL, OT_D_ANY),
    RED("min", ts_min, TS_R_MIN, OT_ALL, 0, OT_OUT_SAME, OT_S_REDUCE_ALL, OT_D_ANY),
    RED("amax_dim", ts_amax_dim, TS_R_MAX, OT_ALL, 0, OT_OUT_SAME, OT_S_REDUCE_DIM, OT_D_ANY),
    RED("amin_dim", ts_amin_dim, TS_R_MIN, OT_ALL, 0, OT_OUT_SAME, OT_S_REDUCE_DIM, OT_D_ANY),
    RED("amax_dims", ts_amax_dims, TS_R_MAX, OT_ALL, 0, OT_OUT_SAME, OT_S_REDUCE_DIMS, OT_D_ANY),
    RED("amin_dims", ts_amin_dims, TS_R_MIN, OT_ALL, 0, OT_OUT_SAME, OT_S_REDUCE_DIMS, OT_D_ANY),
    RED("max_dim", max_dim, TS_R_MAX, OT_ALL, 0, OT_OUT_SAME, OT_S_REDUCE_DIM, OT_D_ANY),
    RED("min_dim", min_dim, TS_R_MIN, OT_ALL, 0, OT_OUT_SAME, OT_S_REDUCE_DIM, OT_D_ANY),
    RED("max_dim.indices", max_dim_idx, OT_REF_MAX_IDX, OT_ALL, 0, OT_OUT_I64, OT_S_REDUCE_DIM,
        OT_D_ANY),
    RED("min_dim.indices", min_dim_idx, OT_REF_MIN_IDX, OT_ALL, 0, OT_OUT_I64, OT_S_REDUCE_DIM,
        OT_D_ANY),
    RED("argmax", ts_argmax, TS_R_ARGMAX, OT_NUMERIC, 0, OT_OUT_I64, OT_S_REDUCE_ALL, OT_D_ANY),
    RED("argmin", ts_argmin, TS_R_ARGMIN, OT_NUMERIC, 0, OT_OUT_I64, OT_S_REDUCE_ALL, OT_D_ANY),
    RED("argmax_dim", ts_argmax_dim, TS_R_ARGMAX, OT_NUMERIC, 0, OT_OUT_I64, OT_S_REDUCE_DIM,
        OT_D_ANY),
    RED("argmin_dim", ts_argmin_dim, TS_R_ARGMIN, OT_NUMERIC, 0, OT_OUT_I64, OT_S_REDUCE_DIM,
        OT_D_ANY),
    RED("var", ts_var, TS_R_VAR, OT_FLOATS, NOBOOL, OT_OUT_SAME, OT_S_REDUCE_ALL, OT_D_ANY),
    RED("var_dim", ts_var_dim, TS_R_VAR, OT_FLOATS, NOBOOL, OT_OUT_SAME, OT_S_REDUCE_DIM, OT_D_ANY),
    RED("var_dims", ts_var_dims, TS_R_VAR, OT_FLOATS, NOBOOL, OT_OUT_SAME, OT_S_REDUCE_DIMS,
        OT_D_ANY),
    RED("std", ts_std, TS_R_STD, OT_FLOATS, NOBOOL, OT_OUT_SAME, OT_S_REDUCE_ALL, OT_D_ANY),
    RED("std_dim", ts_std_dim, TS_R_STD, OT_FLOATS, NOBOOL, OT_OUT_SAME, OT_S_REDUCE_DIM, OT_D_ANY),
    RED("std_dims", ts_std_dims, TS_R_STD, OT_FLOATS, NOBOOL, OT_OUT_SAME, OT_S_REDUCE_DIMS,
        OT_D_ANY),
    RED("logsumexp", ts_logsumexp, TS_R_LOGSUMEXP, OT_FLOATS, 0, OT_OUT_SAME, OT_S_REDUCE_ALL,
        OT_D_ANY),
    RED("logsumexp_dim", ts_logsumexp_dim, TS_R_LOGSUMEXP, OT_FLOATS, 0, OT_OUT_SAME,
        OT_S_REDUCE_DIM, OT_D_ANY),
    RED("logsumexp_dims", ts_logsumexp_dims, TS_R_LOGSUMEXP, OT_FLOATS, 0, OT_OUT_SAME,
        OT_S_REDUCE_DIMS, OT_D_ANY),

    /* linear algebra */
    {ROW("mm", ts_mm, ot_ref_matmul, 0, OT_FLOATS, 0, OT_OUT_SAME, OT_S_MM), .arity = 2},
    {ROW("bmm", ts_bmm, ot_ref_matmul, 0, OT_FLOATS, 0, OT_OUT_SAME, OT_S_BMM), .arity = 2},
    {ROW("matmul", ts_matmul, ot_ref_matmul, 0, OT_FLOATS, 0, OT_OUT_SAME, OT_S_MATMUL),
     .arity = 2},

    /* joining, indexing */
    {ROW("cat", cat, ot_ref_cat, 0, OT_ALL, 0, OT_OUT_SAME, OT_S_CAT), .arity = -1},
    {ROW("stack", stack, ot_ref_stack, 0, OT_ALL, 0, OT_OUT_SAME, OT_S_STACK), .arity = -1},
    {ROW("index_select", index_select, ot_ref_index_select, 0, OT_ALL, 0, OT_OUT_SAME,
         OT_S_INDEX_SELECT),
     .arity = 2},
    {ROW("gather", gather, ot_ref_gather, 0, OT_ALL, 0, OT_OUT_SAME, OT_S_GATHER), .arity = 2},
    {ROW("scatter_add", scatter_add, ot_ref_scatter_add, 0, OT_NUMERIC, 0, OT_OUT_SAME,
         OT_S_SCATTER_ADD),
     .arity = 3},
    {ROW("scatter_add_", scatter_add_, ot_ref_scatter_add, 0, OT_NUMERIC, 0, OT_OUT_SAME,
         OT_S_SCATTER_ADD),
     .arity = 3, .inplace = true},
    {ROW("softmax", softmax, ot_ref_softmax, 0, OT_FLOATS, NOBOOL, OT_OUT_SAME, OT_S_SOFTMAX)},
    {ROW("log_softmax", log_softmax, ot_ref_softmax, 1, OT_FLOATS, NOBOOL, OT_OUT_SAME,
         OT_S_SOFTMAX)},
    {ROW("one_hot", one_hot, ot_ref_one_hot, 0, OT_BIT(TS_I64),
         OT_FLOATS | OT_BIT(TS_I32) | OT_BIT(TS_U8) | BOOLB, OT_OUT_I64, OT_S_ONE_HOT),
     .arity = 1, .domain = {OT_D_CLASS}},
};

int main(void) {
    if (ts_test_isa_gate()) return 77;
    return ot_run_table(rows, (int)(sizeof rows / sizeof rows[0]));
}
