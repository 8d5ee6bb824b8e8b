/* unary.c — unary elementwise front ends (neg, exp, sigmoid, ...), their in-place forms and clamp.
 */
#include "amp/autocast.h"
#include "autograd/trace.h"
#include "ops/complex.h"
#include "ops/elementwise.h"

/* unary_ops.def's dtype column, one rule per op */
typedef enum unary_rule {
    R_ANY,
    R_TO_FLOAT,
    R_FLOAT_ONLY,
    R_NO_BOOL,
    R_NEG,
    R_ROUNDING,
    R_SIGN,
    R_SQUARE,
    R_BOOL,
    R_NONFINITE
} unary_rule;
static const unsigned char unary_rules[] = {
#define X(ID, name, front, dtype, ...) R_##dtype,
#include "backend/unary_ops.def"
#undef X
};
_Static_assert(sizeof unary_rules == TS_U_COUNT, "one dtype rule per unary op");

/* The result dtype of u on t (PyTorch's): float functions make integers f32, rounding is the
 * identity on integers. *copy_only: the result is t converted, no kernel to run. */
static bool unary_dtype(const char *op, ts_unary_op u, const ts_tensor *t, ts_dtype *r,
                        bool *copy_only) {
    const ts_dtype d = t->dtype;
    *r = d;
    *copy_only = false;
    switch ((unary_rule)unary_rules[u]) {
    case R_BOOL:
        *r = TS_BOOL;
        return true;
    case R_TO_FLOAT:
        if (!tsi_is_float(d)) *r = TS_F32;
        return true;
    case R_NONFINITE: /* integers and bool have no NaN or inf: a copy */
        *copy_only = !tsi_is_float(d);
        return true;
    case R_FLOAT_ONLY:
        if (tsi_is_float(d)) return true;
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: not implemented for '%s': expected a floating point tensor "
                             "(input: %s)",
                             op, tsi_torch_scalar_name(d), tsi_desc(t)),
               false;
    case R_NEG:
        if (d != TS_BOOL) return true;
        return tsi_error_set(
                   TS_ERR_DTYPE,
                   "%s: Negation, the `-` operator, on a bool tensor is not supported. If "
                   "you are trying to invert a mask, use the `~` or `logical_not()` "
                   "operator instead. (input: %s)",
                   op, tsi_desc(t)),
               false;
    case R_ROUNDING:
        *copy_only = tsi_is_int(d); /* fall through */
    case R_NO_BOOL:
        if (d != TS_BOOL) return true;
        return tsi_error_set(TS_ERR_DTYPE, "%s: not implemented for 'Bool' (input: %s)", op,
                             tsi_desc(t)),
               false;
    case R_SIGN:
        *copy_only = d == TS_BOOL;
        return true;
    case R_SQUARE: /* pow(t, 2): bool with a Python int is int64 */
        if (d == TS_BOOL) *r = TS_I64;
        return true;
    case R_ANY:
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
#define FRONT_PLAIN(NAME, U)         UNARY(NAME, U)
#define FRONT_PLAIN_INPLACE(NAME, U) UNARY(NAME, U)
#define FRONT_SPECIAL(NAME, U)
#define FRONT_OWN(NAME, U)
#define X(ID, name, front, ...) FRONT_##front(name, TS_U_##ID)
#include "backend/unary_ops.def"
#undef X
#undef UNARY
ts_tensor *ts_fix(ts_tensor *t) { return unary_op("fix", TS_U_TRUNC, t, false); }
/* sgn is sign on real tensors */
ts_tensor *ts_sgn(ts_tensor *t) { return unary_op("sgn", TS_U_SIGN, t, false); }

#define UNARY_INPLACE(NAME, U)                                                                     \
    ts_tensor *ts_##NAME##_(ts_tensor *t) { return unary_op(#NAME "_", U, t, true); }
#undef FRONT_PLAIN_INPLACE
#define FRONT_PLAIN_INPLACE(NAME, U) UNARY_INPLACE(NAME, U)
#undef FRONT_PLAIN
#define FRONT_PLAIN(NAME, U)
#define X(ID, name, front, ...) FRONT_##front(name, TS_U_##ID)
#include "backend/unary_ops.def"
#undef X
#undef FRONT_PLAIN
#undef FRONT_PLAIN_INPLACE
#undef FRONT_SPECIAL
#undef FRONT_OWN
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
