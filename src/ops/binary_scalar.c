/* binary_scalar.c — tensor-with-number front ends (add_scalar, pow_scalar, eq_scalar...), their
 * in-place forms, and the scalar core that binary ops also use for a 0-dim cpu operand. */
#include "amp/autocast.h"
#include "autograd/trace.h"
#include "ops/complex.h"
#include "ops/elementwise.h"

/* New tensor a op s: a computes in c (through the output when the output has dtype c). */
static ts_tensor *scalar_new(const char *op, ts_binary_op bop, ts_tensor *a, double s, ts_dtype c,
                             ts_dtype o) {
    ts_tensor *out = tsi_new_like(op, a->shape, o, tsi_device(a), a);
    if (!out || tsi_numel(a->shape) == 0) return out;
    const ts_backend *be = tsi_be(a);
    const int idx = tsi_dev_index(a);
    ts_kview ko = tsi_kview(out);
    if (a->dtype == c) {
        ts_kview ka = tsi_kview(a);
        be->binary_scalar(be, idx, bop, &ko, &ka, s);
    } else if (o == c) {
        ts_kview ka = tsi_kview(a);
        be->copy(be, idx, &ko, &ka);
        be->binary_scalar(be, idx, bop, &ko, &ko, s);
    } else {
        ts_tensor *ca = tsi_cast(op, a, c);
        if (!ca) {
            ts_release(out);
            return NULL;
        }
        ts_kview ka = tsi_kview(ca);
        be->binary_scalar(be, idx, bop, &ko, &ka, s);
        ts_release(ca);
    }
    return out;
}

ts_tensor *tsi_ew_scalar(const char *op, ts_binary_op bop, ts_tensor *a, double s, ts_dtype r,
                         ts_tensor *dst) {
    const ts_dtype c = tsi_ew_compute_dtype(bop, r);
    const ts_dtype o = tsi_ew_bool_out(bop) ? TS_BOOL : c;
    if (bop == TS_B_POW && !tsi_is_float(c) && s < 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Integers to negative integer powers are not allowed. (a: %s, "
                             "exponent %g)",
                             op, tsi_desc(a), s),
               NULL;
    if (bop == TS_B_FMOD && !tsi_is_float(c) && s == 0)
        return tsi_error_set(TS_ERR_ARG, "%s: ZeroDivisionError: integer fmod by zero (a: %s)", op,
                             tsi_desc(a)),
               NULL;
    if (dst && !tsi_ew_check_inplace(op, dst, o, NULL)) return NULL;
    tsi_log_op(op, tsi_device(a));
    if (!dst) return scalar_new(op, bop, a, s, c, o);

    /* in place: dst is a */
    const ts_backend *be = tsi_be(dst);
    const int idx = tsi_dev_index(dst);
    const bool any = tsi_numel(dst->shape) > 0;
    if (o == dst->dtype && a->dtype == c) {
        if (any) {
            ts_kview kd = tsi_kview(dst);
            be->binary_scalar(be, idx, bop, &kd, &kd, s);
        }
    } else {
        ts_tensor *out = scalar_new(op, bop, a, s, c, o);
        if (!out) return NULL;
        if (any) {
            ts_kview kd = tsi_kview(dst), ko = tsi_kview(out);
            be->copy(be, idx, &kd, &ko);
        }
        ts_release(out);
    }
    tsi_bump_version(dst);
    return ts_retain(dst);
}

static ts_tensor *scalar_rec(const char *op, ts_binary_op bop, ts_tensor *a, double s,
                             bool inplace) {
    tsi_init();
    if (!tsi_check_input(op, a, "a")) return NULL;
    const ts_dtype r = tsi_ew_scalar_result(a->dtype, s);
    if (!tsi_ew_check_binary_dtypes(op, bop, a, NULL, r)) return NULL;
    if (tsi_ew_bool_out(bop) || !tsi_needs_graph(&a, 1))
        return tsi_own(tsi_ew_scalar(op, bop, a, s, r, inplace ? a : NULL));
    if (!inplace)
        return tsi_own(tsi_ew_record_scalar(op, bop, a, s, tsi_ew_scalar(op, bop, a, s, r, NULL)));
    ts_node *n = tsi_ew_begin_scalar(op, bop, a, s);
    return n ? tsi_own(tsi_ew_finish(n, tsi_ew_scalar(op, bop, a, s, r, a))) : NULL;
}

/* autocast's policy decides by name (pow_scalar and rpow_scalar run in f32) */
static ts_tensor *scalar_op(const char *op, ts_binary_op bop, ts_tensor *a, double s,
                            bool inplace) {
    if (tsi_complex_in(a, NULL)) /* complex_arith.c: refused where there is no complex path */
        return inplace ? tsi_complex_scalar_(op, bop, a, s) : tsi_complex_scalar(op, bop, a, s);
    ts_tensor *const in = a;
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, op, &a);
    ts_tensor *y = tsi_autocast_exit(&ac, scalar_rec(op, bop, a, s, inplace));
    return tsi_trace(op, &in, 1, y, NULL, 0, &s, 1);
}

ts_tensor *ts_add_scalar(ts_tensor *a, double s) {
    return scalar_op("add_scalar", TS_B_ADD, a, s, false);
}
ts_tensor *ts_sub_scalar(ts_tensor *a, double s) {
    return scalar_op("sub_scalar", TS_B_SUB, a, s, false);
}
ts_tensor *ts_rsub_scalar(ts_tensor *a, double s) {
    return scalar_op("rsub_scalar", TS_B_RSUB, a, s, false);
}
ts_tensor *ts_mul_scalar(ts_tensor *a, double s) {
    return scalar_op("mul_scalar", TS_B_MUL, a, s, false);
}
ts_tensor *ts_div_scalar(ts_tensor *a, double s) {
    return scalar_op("div_scalar", TS_B_DIV, a, s, false);
}
ts_tensor *ts_pow_scalar(ts_tensor *a, double s) {
    return scalar_op("pow_scalar", TS_B_POW, a, s, false);
}
ts_tensor *ts_rpow_scalar(ts_tensor *a, double s) {
    return scalar_op("rpow_scalar", TS_B_RPOW, a, s, false);
}
ts_tensor *ts_maximum_scalar(ts_tensor *a, double s) {
    return scalar_op("maximum_scalar", TS_B_MAX, a, s, false);
}
ts_tensor *ts_minimum_scalar(ts_tensor *a, double s) {
    return scalar_op("minimum_scalar", TS_B_MIN, a, s, false);
}
ts_tensor *ts_fmod_scalar(ts_tensor *a, double s) {
    return scalar_op("fmod_scalar", TS_B_FMOD, a, s, false);
}
ts_tensor *ts_eq_scalar(ts_tensor *a, double s) {
    return scalar_op("eq_scalar", TS_B_EQ, a, s, false);
}
ts_tensor *ts_ne_scalar(ts_tensor *a, double s) {
    return scalar_op("ne_scalar", TS_B_NE, a, s, false);
}
ts_tensor *ts_lt_scalar(ts_tensor *a, double s) {
    return scalar_op("lt_scalar", TS_B_LT, a, s, false);
}
ts_tensor *ts_le_scalar(ts_tensor *a, double s) {
    return scalar_op("le_scalar", TS_B_LE, a, s, false);
}
ts_tensor *ts_gt_scalar(ts_tensor *a, double s) {
    return scalar_op("gt_scalar", TS_B_GT, a, s, false);
}
ts_tensor *ts_ge_scalar(ts_tensor *a, double s) {
    return scalar_op("ge_scalar", TS_B_GE, a, s, false);
}

ts_tensor *ts_add_scalar_(ts_tensor *a, double s) {
    return scalar_op("add_scalar_", TS_B_ADD, a, s, true);
}
ts_tensor *ts_sub_scalar_(ts_tensor *a, double s) {
    return scalar_op("sub_scalar_", TS_B_SUB, a, s, true);
}
ts_tensor *ts_mul_scalar_(ts_tensor *a, double s) {
    return scalar_op("mul_scalar_", TS_B_MUL, a, s, true);
}
ts_tensor *ts_div_scalar_(ts_tensor *a, double s) {
    return scalar_op("div_scalar_", TS_B_DIV, a, s, true);
}
ts_tensor *ts_pow_scalar_(ts_tensor *a, double s) {
    return scalar_op("pow_scalar_", TS_B_POW, a, s, true);
}
