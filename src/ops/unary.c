/* unary.c — unary elementwise front ends (neg, exp, sigmoid, ...), their in-place forms and clamp.
 */
#include "amp/autocast.h"
#include "autograd/trace.h"
#include "ops/complex.h"
#include "ops/elementwise.h"

/* each op's dtype rule is a case below or the default (the input's dtype, any dtype) */
_Static_assert(TS_U_COUNT == 81, "a ts_unary_op was added or removed: give it its dtype rule in "
                                 "unary_dtype (the default takes every dtype); then update the "
                                 "count");

/* The result dtype of u on t (PyTorch's): float functions make integers f32, rounding is the
 * identity on integers. *copy_only: the result is t converted, no kernel to run. */
static bool unary_dtype(const char *op, ts_unary_op u, const ts_tensor *t, ts_dtype *r,
                        bool *copy_only) {
    const ts_dtype d = t->dtype;
    *r = d;
    *copy_only = false;
    switch (u) {
    case TS_U_LOGICAL_NOT:
        *r = TS_BOOL;
        return true;
    case TS_U_EXP:
    case TS_U_LOG:
    case TS_U_LOG1P:
    case TS_U_SQRT:
    case TS_U_RSQRT:
    case TS_U_SIN:
    case TS_U_COS:
    case TS_U_TAN:
    case TS_U_ASIN:
    case TS_U_ACOS:
    case TS_U_ATAN:
    case TS_U_SINH:
    case TS_U_COSH:
    case TS_U_ASINH:
    case TS_U_ACOSH:
    case TS_U_ATANH:
    case TS_U_ERF:
    case TS_U_TANH:
    case TS_U_SIGMOID:
    case TS_U_RECIPROCAL:
    case TS_U_EXPM1:
    case TS_U_EXP2:
    case TS_U_LOG2:
    case TS_U_LOG10:
    case TS_U_ERFC:
    case TS_U_LGAMMA:
    case TS_U_DIGAMMA:
    case TS_U_POLYGAMMA:
    case TS_U_ERFINV:
    case TS_U_I0:
    case TS_U_I0E:
    case TS_U_I1:
    case TS_U_I1E:
    case TS_U_SINC:
    case TS_U_DEG2RAD:
    case TS_U_RAD2DEG:
    case TS_U_LOGIT:
        if (!tsi_is_float(d)) *r = TS_F32;
        return true;
    case TS_U_NAN_TO_NUM: /* integers and bool have no NaN or inf: a copy */
    case TS_U_NEGINF_TO:
    case TS_U_NAN_TO_NUM_SYM:
        *copy_only = !tsi_is_float(d);
        return true;
    case TS_U_FRAC:
    /* issue 52's activations (activation.c takes hardtanh's and threshold's integers elsewhere) */
    case TS_U_ELU:
    case TS_U_SELU:
    case TS_U_HARDTANH:
    case TS_U_HARDSHRINK:
    case TS_U_SOFTSHRINK:
    case TS_U_THRESHOLD:
    case TS_U_LOGSIGMOID:
    case TS_U_MISH:
    case TS_U_HARDSIGMOID:
    case TS_U_HARDSWISH:
    case TS_U_LEAKY_RELU:
    case TS_U_GELU:
    case TS_U_SILU:
    case TS_U_SOFTPLUS:
        if (tsi_is_float(d)) return true;
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: not implemented for '%s': expected a floating point tensor "
                             "(input: %s)",
                             op, tsi_torch_scalar_name(d), tsi_desc(t)),
               false;
    case TS_U_NEG:
        if (d != TS_BOOL) return true;
        return tsi_error_set(
                   TS_ERR_DTYPE,
                   "%s: Negation, the `-` operator, on a bool tensor is not supported. If "
                   "you are trying to invert a mask, use the `~` or `logical_not()` "
                   "operator instead. (input: %s)",
                   op, tsi_desc(t)),
               false;
    case TS_U_FLOOR:
    case TS_U_CEIL:
    case TS_U_ROUND:
    case TS_U_TRUNC:
        *copy_only = tsi_is_int(d); /* fall through */
    case TS_U_ABS:
    case TS_U_RELU:
        if (d != TS_BOOL) return true;
        return tsi_error_set(TS_ERR_DTYPE, "%s: not implemented for 'Bool' (input: %s)", op,
                             tsi_desc(t)),
               false;
    case TS_U_SIGN:
        *copy_only = d == TS_BOOL;
        return true;
    case TS_U_SQUARE: /* pow(t, 2): bool with a Python int is int64 */
        if (d == TS_BOOL) *r = TS_I64;
        return true;
    default:
        return true;
    }
}

/* New tensor u(t) of dtype r; a t of another dtype is cast through the output first. */
static ts_tensor *unary_new(const char *op, ts_unary_op u, ts_tensor *t, ts_dtype r, bool copy_only,
                            double p0, double p1) {
    ts_tensor *out = tsi_new_like(op, t->shape, r, tsi_device(t), t);
    if (!out || tsi_numel(t->shape) == 0) return out;
    const ts_backend *be = tsi_be(t);
    const int idx = tsi_dev_index(t);
    ts_kview ko, kt;
    tsi_kview_fill(&ko, out);
    tsi_kview_fill(&kt, t);
    if (copy_only) {
        be->copy(be, idx, &ko, &kt);
    } else if (t->dtype == r || u == TS_U_LOGICAL_NOT) {
        be->unary(be, idx, u, &ko, &kt, p0, p1);
    } else {
        be->copy(be, idx, &ko, &kt);
        be->unary(be, idx, u, &ko, &ko, p0, p1);
    }
    return out;
}

/* Runs u with result dtype r on t, or in place into t. */
static ts_tensor *unary_exec(const char *op, ts_unary_op u, ts_tensor *t, ts_dtype r,
                             bool copy_only, bool inplace, double p0, double p1) {
    if (inplace && !tsi_ew_check_inplace(op, t, r, NULL)) return NULL;
    tsi_log_op(op, tsi_device(t));
    if (!inplace) return unary_new(op, u, t, r, copy_only, p0, p1);
    if (tsi_numel(t->shape) > 0 && !copy_only) {
        const ts_backend *be = tsi_be(t);
        const int idx = tsi_dev_index(t);
        ts_kview kt;
        tsi_kview_fill(&kt, t);
        if (r == t->dtype) {
            be->unary(be, idx, u, &kt, &kt, p0, p1);
        } else { /* castable but wider: compute there, round back */
            ts_tensor *out = unary_new(op, u, t, r, copy_only, p0, p1);
            if (!out) return NULL;
            ts_kview ko = tsi_kview(out);
            be->copy(be, idx, &kt, &ko);
            ts_release(out);
        }
    }
    tsi_bump_version(t);
    return ts_retain(t);
}

/* unary_exec plus the autograd node when the graph needs one (in place: made before the op). */
static ts_tensor *unary_run(const char *op, ts_unary_op u, ts_tensor *t, ts_dtype r, bool copy_only,
                            bool inplace, double p0, double p1) {
    if (!tsi_is_float(r) || !tsi_needs_graph(&t, 1))
        return unary_exec(op, u, t, r, copy_only, inplace, p0, p1);
    if (!inplace)
        return tsi_ew_record_unary(op, u, t, unary_exec(op, u, t, r, copy_only, false, p0, p1), p0,
                                   p1);
    ts_node *n = tsi_ew_begin_unary(op, u, t, p0, p1);
    return n ? tsi_ew_finish(n, unary_exec(op, u, t, r, copy_only, true, p0, p1)) : NULL;
}

static ts_tensor *unary_checked(const char *op, ts_unary_op u, ts_tensor *t, bool inplace) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    ts_dtype r;
    bool copy_only;
    if (!unary_dtype(op, u, t, &r, &copy_only)) return NULL;
    ts_tensor *y = unary_run(op, u, t, r, copy_only, inplace, 0, 0);
    return tsi_own(tsi_trace(op, &t, 1, y, NULL, 0, NULL, 0));
}

/* autocast's policy decides by name: exp, log, rsqrt... run in f32; in-place forms never cast */
static ts_tensor *unary_op(const char *op, ts_unary_op u, ts_tensor *t, bool inplace) {
    if (tsi_complex_in(t, NULL))
        return inplace ? tsi_complex_unary_(op, u, t) : tsi_complex_unary(op, u, t);
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, op, &t);
    return tsi_autocast_exit(&ac, unary_checked(op, u, t, inplace));
}

#define UNARY(NAME, U)                                                                             \
    ts_tensor *ts_##NAME(ts_tensor *t) { return unary_op(#NAME, U, t, false); }
UNARY(neg, TS_U_NEG)
UNARY(abs, TS_U_ABS)
UNARY(exp, TS_U_EXP)
UNARY(log, TS_U_LOG)
UNARY(log1p, TS_U_LOG1P)
UNARY(sqrt, TS_U_SQRT)
UNARY(rsqrt, TS_U_RSQRT)
UNARY(sin, TS_U_SIN)
UNARY(cos, TS_U_COS)
UNARY(tan, TS_U_TAN)
UNARY(asin, TS_U_ASIN)
UNARY(acos, TS_U_ACOS)
UNARY(atan, TS_U_ATAN)
UNARY(sinh, TS_U_SINH)
UNARY(cosh, TS_U_COSH)
UNARY(asinh, TS_U_ASINH)
UNARY(acosh, TS_U_ACOSH)
UNARY(atanh, TS_U_ATANH)
UNARY(erf, TS_U_ERF)
UNARY(tanh, TS_U_TANH)
UNARY(sigmoid, TS_U_SIGMOID)
UNARY(relu, TS_U_RELU)
UNARY(gelu, TS_U_GELU)
UNARY(silu, TS_U_SILU)
UNARY(softplus, TS_U_SOFTPLUS)
UNARY(sign, TS_U_SIGN)
UNARY(floor, TS_U_FLOOR)
UNARY(ceil, TS_U_CEIL)
UNARY(round, TS_U_ROUND)
UNARY(reciprocal, TS_U_RECIPROCAL)
UNARY(square, TS_U_SQUARE)
UNARY(logical_not, TS_U_LOGICAL_NOT)
/* issue 52 */
UNARY(expm1, TS_U_EXPM1)
UNARY(exp2, TS_U_EXP2)
UNARY(log2, TS_U_LOG2)
UNARY(log10, TS_U_LOG10)
UNARY(erfc, TS_U_ERFC)
UNARY(lgamma, TS_U_LGAMMA)
UNARY(trunc, TS_U_TRUNC)
UNARY(digamma, TS_U_DIGAMMA)
UNARY(erfinv, TS_U_ERFINV)
UNARY(i0, TS_U_I0)
UNARY(i0e, TS_U_I0E)
UNARY(i1, TS_U_I1)
UNARY(i1e, TS_U_I1E)
UNARY(sinc, TS_U_SINC)
UNARY(frac, TS_U_FRAC)
UNARY(deg2rad, TS_U_DEG2RAD)
UNARY(rad2deg, TS_U_RAD2DEG)
#undef UNARY
ts_tensor *ts_fix(ts_tensor *t) { return unary_op("fix", TS_U_TRUNC, t, false); }
/* sgn is sign on real tensors */
ts_tensor *ts_sgn(ts_tensor *t) { return unary_op("sgn", TS_U_SIGN, t, false); }

#define UNARY_INPLACE(NAME, U)                                                                     \
    ts_tensor *ts_##NAME##_(ts_tensor *t) { return unary_op(#NAME "_", U, t, true); }
UNARY_INPLACE(neg, TS_U_NEG)
UNARY_INPLACE(abs, TS_U_ABS)
UNARY_INPLACE(exp, TS_U_EXP)
UNARY_INPLACE(log, TS_U_LOG)
UNARY_INPLACE(sqrt, TS_U_SQRT)
UNARY_INPLACE(sigmoid, TS_U_SIGMOID)
UNARY_INPLACE(relu, TS_U_RELU)
UNARY_INPLACE(tanh, TS_U_TANH)
#undef UNARY_INPLACE

/* ------------------------------------------------------------------ clamp */
/* torch.clamp: the bounds are Python numbers, so they take part in the promotion (an integer
 * tensor clamped to 0.5 becomes f32); NAN leaves a side unbounded. */
static ts_tensor *clamp_op(const char *op, ts_tensor *t, double lo, double hi, bool inplace) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (isnan(lo) && isnan(hi))
        return tsi_error_set(
                   TS_ERR_ARG,
                   "%s: At least one of 'min' or 'max' must not be None (NAN) (input: %s)", op,
                   tsi_desc(t)),
               NULL;
    ts_dtype r = t->dtype;
    if (!isnan(lo)) r = tsi_ew_scalar_result(r, lo);
    if (!isnan(hi)) r = tsi_ew_scalar_result(r, hi);
    ts_tensor *y = unary_run(op, TS_U_CLAMP, t, r, false, inplace, lo, hi);
    return tsi_own(tsi_trace(op, &t, 1, y, NULL, 0, (double[]){lo, hi}, 2));
}

ts_tensor *ts_clamp(ts_tensor *t, double min, double max) {
    return clamp_op("clamp", t, min, max, false);
}
ts_tensor *ts_clamp_min(ts_tensor *t, double min) {
    return clamp_op("clamp_min", t, min, NAN, false);
}
ts_tensor *ts_clamp_max(ts_tensor *t, double max) {
    return clamp_op("clamp_max", t, NAN, max, false);
}
ts_tensor *ts_clamp_(ts_tensor *t, double min, double max) {
    return clamp_op("clamp_", t, min, max, true);
}

/* ------------------------------------------------------------------ special ops with numbers */
/* u with the numbers p0, p1 (checked by the caller), autocast by name, traced with `nums` */
ts_tensor *tsi_unary_param(const char *op, ts_unary_op u, ts_tensor *t, double p0, double p1,
                           bool inplace, const double *nums, int n_nums) {
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, op, &t);
    ts_tensor *y = NULL;
    ts_dtype r;
    bool copy_only;
    tsi_init();
    if (tsi_check_input(op, t, "input") && unary_dtype(op, u, t, &r, &copy_only))
        y = unary_run(op, u, t, r, copy_only, inplace, p0, p1);
    y = tsi_autocast_exit(&ac, y);
    return tsi_own(tsi_trace(op, &t, 1, y, NULL, 0, nums, n_nums));
}

static ts_tensor *unary_param_op(const char *op, ts_unary_op u, ts_tensor *t, double p0, double p1,
                                 const double *nums, int n_nums) {
    return tsi_unary_param(op, u, t, p0, p1, false, nums, n_nums);
}

ts_tensor *ts_polygamma(int n, ts_tensor *t) {
    tsi_init();
    if (n < 0)
        return tsi_error_set(TS_ERR_ARG,
                             "polygamma: polygamma(n, x) does not support negative n "
                             "(n = %d)",
                             n),
               NULL;
    const double nn = n;
    return unary_param_op("polygamma", TS_U_POLYGAMMA, t, nn, 0, &nn, 1);
}

ts_tensor *ts_logit(ts_tensor *t, double eps) {
    const double e = isnan(eps) || eps < 0 ? -1 : eps;
    return unary_param_op("logit", TS_U_LOGIT, t, e, 0, &e, 1);
}

/* The largest finite value of a float dtype (nan_to_num's default for +inf) */
static double float_max(ts_dtype d) {
    switch (d) {
    case TS_F16:
        return 65504.0;
    case TS_BF16:
        return 3.38953138925153547590470800371487866880e38;
    case TS_F32:
        return 3.40282346638528859811704183484516925440e38;
    default:
        return 1.79769313486231570815e308;
    }
}

/* One pass of the kernel where -inf's value is -(+inf's) (the defaults); otherwise two: NaN and
 * +inf, then -inf (the backend's unary takes two numbers) */
ts_tensor *ts_nan_to_num(ts_tensor *t, double nan, double posinf, double neginf) {
    tsi_init();
    if (!tsi_check_input("nan_to_num", t, "input")) return NULL;
    const double m = float_max(t->dtype);
    const double pos = isnan(posinf) ? m : posinf, neg = isnan(neginf) ? -m : neginf;
    const double nums[3] = {nan, pos, neg};
    if (neg == -pos) return unary_param_op("nan_to_num", TS_U_NAN_TO_NUM_SYM, t, nan, pos, nums, 3);
    ts_scope_begin();
    ts_tensor *a = unary_param_op("nan_to_num", TS_U_NAN_TO_NUM, t, nan, pos, nums, 3);
    ts_tensor *y =
        a ? ts_keep(unary_param_op("nan_to_num", TS_U_NEGINF_TO, a, neg, 0, nums + 2, 1)) : NULL;
    ts_scope_end();
    return y;
}
