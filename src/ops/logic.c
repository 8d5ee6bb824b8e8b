/* logic.c — issue 52's predicates and truth reductions, composed from comparisons and sums:
 * isnan / isinf / isfinite / isposinf / isneginf / isreal, logical_xor, heaviside, any / all,
 * isclose / allclose / equal (PyTorch's TensorCompare.cpp formulas). Results are bool tensors
 * (no gradient), on every device. */
#include <math.h>

#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "ops/complex.h"

static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

/* a bool tensor of t's shape and device filled with v */
static ts_tensor *bool_full(ts_tensor *t, bool v) {
    ts_opts o = {.dtype = TS_BOOL, .device = ts_device_of(t)};
    return v ? ts_ones(t->shape, o) : ts_zeros(t->shape, o);
}

typedef enum { P_NAN, P_INF, P_FINITE, P_POSINF, P_NEGINF, P_REAL } pred_kind;

static ts_tensor *predicate(const char *op, ts_tensor *t, pred_kind k) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (tsi_is_complex(t->dtype)) { /* over the parts (isposinf / isneginf: refused by the gate) */
        ts_scope_begin();
        ts_tensor *x = ts_detach(t), *re = ts_real(x), *im = ts_imag(x);
        return finish(k == P_REAL     ? ts_eq_scalar(im, 0)
                      : k == P_FINITE ? ts_logical_and(ts_isfinite(re), ts_isfinite(im))
                      : k == P_NAN    ? ts_logical_or(ts_isnan(re), ts_isnan(im))
                                      : ts_logical_or(ts_isinf(re), ts_isinf(im)));
    }
    if (!tsi_is_float(t->dtype) || k == P_REAL) /* integers and bool: finite, never NaN */
        return bool_full(t, k == P_FINITE || k == P_REAL);
    ts_scope_begin();
    ts_tensor *x = ts_detach(t), *y = NULL;
    switch (k) {
    case P_NAN:
        y = ts_ne(x, x);
        break;
    case P_INF:
        y = ts_logical_or(ts_eq_scalar(x, INFINITY), ts_eq_scalar(x, -INFINITY));
        break;
    case P_FINITE: /* NaN < inf is false */
        y = ts_lt_scalar(ts_abs(x), INFINITY);
        break;
    case P_POSINF:
        y = ts_eq_scalar(x, INFINITY);
        break;
    default:
        y = ts_eq_scalar(x, -INFINITY);
        break;
    }
    return finish(y);
}

ts_tensor *ts_isnan(ts_tensor *t) { return predicate("isnan", t, P_NAN); }
ts_tensor *ts_isinf(ts_tensor *t) { return predicate("isinf", t, P_INF); }
ts_tensor *ts_isfinite(ts_tensor *t) { return predicate("isfinite", t, P_FINITE); }
ts_tensor *ts_isposinf(ts_tensor *t) { return predicate("isposinf", t, P_POSINF); }
ts_tensor *ts_isneginf(ts_tensor *t) { return predicate("isneginf", t, P_NEGINF); }
ts_tensor *ts_isreal(ts_tensor *t) { return predicate("isreal", t, P_REAL); }

ts_tensor *ts_logical_xor(ts_tensor *a, ts_tensor *b) {
    const char *op = "logical_xor";
    tsi_init();
    bool ok = tsi_check_input(op, a, "input");
    if (!(tsi_check_input(op, b, "other") && ok)) return NULL;
    ts_scope_begin();
    return finish(ts_ne(ts_ne_scalar(ts_detach(a), 0), ts_ne_scalar(ts_detach(b), 0)));
}

ts_tensor *ts_heaviside(ts_tensor *t, ts_tensor *values) {
    const char *op = "heaviside";
    tsi_init();
    bool ok = tsi_check_input(op, t, "input");
    if (!(tsi_check_input(op, values, "values") && ok)) return NULL;
    if (t->dtype != values->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: heaviside is not yet implemented for tensors with different "
                             "dtypes (%s and %s)",
                             op, tsi_desc(t), tsi_desc(values)),
               NULL;
    ts_scope_begin();
    ts_tensor *x = ts_detach(t), *v = ts_detach(values);
    ts_tensor *pos = ts_to_dtype(ts_gt_scalar(x, 0), t->dtype);
    return finish(ts_where(ts_eq_scalar(x, 0), v, pos));
}

/* ------------------------------------------------------------------ any, all */
static ts_tensor *any_all(const char *op, ts_tensor *t, ts_dims dims, bool keepdim, bool all) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (dims.n < 0 || dims.n > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_ARG, "%s: %d dims given", op, dims.n), NULL;
    ts_scope_begin();
    ts_tensor *x = ts_detach(t);
    /* any: some element != 0; all: no element == 0 (NaN != 0) */
    ts_tensor *hit = all ? ts_eq_scalar(x, 0) : ts_ne_scalar(x, 0), *s;
    if (dims.n == 0 && (!keepdim || t->shape.ndim == 0)) {
        s = ts_sum(hit);
    } else {
        ts_dims every = {.n = t->shape.ndim};
        for (int i = 0; i < every.n; i++) every.d[i] = i;
        s = ts_sum_dims(hit, dims.n ? dims : every, keepdim);
    }
    ts_tensor *y = all ? ts_eq_scalar(s, 0) : ts_gt_scalar(s, 0);
    if (y && t->dtype == TS_U8) y = ts_to_dtype(y, TS_U8); /* PyTorch keeps uint8 */
    return finish(y);
}

ts_tensor *ts_any(ts_tensor *t, ts_dims dims, bool keepdim) {
    return any_all("any", t, dims, keepdim, false);
}
ts_tensor *ts_all(ts_tensor *t, ts_dims dims, bool keepdim) {
    return any_all("all", t, dims, keepdim, true);
}

/* ------------------------------------------------------------------ isclose, allclose, equal */
ts_tensor *ts_isclose(ts_tensor *a, ts_tensor *b, double rtol, double atol, bool equal_nan) {
    const char *op = "isclose";
    tsi_init();
    bool ok = tsi_check_input(op, a, "input");
    if (!(tsi_check_input(op, b, "other") && ok)) return NULL;
    if (a->dtype != b->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected both inputs to have the same dtype, but got %s and %s",
                             op, tsi_torch_scalar_name(a->dtype), tsi_torch_scalar_name(b->dtype)),
               NULL;
    if (!(rtol >= 0) || !(atol >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: %s must be greater than or equal to zero, but got %g",
                             op, !(rtol >= 0) ? "rtol" : "atol", !(rtol >= 0) ? rtol : atol),
               NULL;
    ts_scope_begin();
    ts_tensor *x = ts_detach(a), *y = ts_detach(b);
    ts_tensor *close = ts_eq(x, y);
    if (equal_nan && (tsi_is_float(a->dtype) || tsi_is_complex(a->dtype)))
        close = ts_logical_or(close, ts_logical_and(ts_ne(x, x), ts_ne(y, y)));
    if (rtol == 0 && atol == 0) return finish(close);
    if (a->dtype == TS_BOOL) x = ts_to_dtype(x, TS_F32), y = ts_to_dtype(y, TS_F32);
    ts_tensor *allowed = ts_add_scalar(ts_abs(ts_mul_scalar(y, rtol)), atol);
    ts_tensor *actual = ts_abs(ts_sub(x, y));
    ts_tensor *fin =
        tsi_is_float(ts_dtype_of(actual)) ? ts_lt_scalar(ts_abs(actual), INFINITY) : NULL;
    ts_tensor *within = ts_le(actual, allowed);
    if (fin) within = ts_logical_and(fin, within);
    return finish(ts_logical_or(close, within));
}

int ts_allclose(ts_tensor *a, ts_tensor *b, double rtol, double atol, bool equal_nan) {
    ts_scope_begin();
    ts_tensor *c = ts_isclose(a, b, rtol, atol, equal_nan);
    ts_tensor *all = c ? ts_all(c, (ts_dims){0}, false) : NULL;
    double v = all ? ts_item(all) : NAN;
    ts_scope_end();
    return ts_error() != TS_OK || isnan(v) ? -1 : v != 0;
}

int ts_equal(ts_tensor *a, ts_tensor *b) {
    const char *op = "equal";
    tsi_init();
    bool ok = tsi_check_input(op, a, "input");
    if (!(tsi_check_input(op, b, "other") && ok)) return -1;
    ts_tensor *both[2] = {a, b};
    ts_device dev;
    if (!tsi_same_device(op, both, 2, false, &dev)) return -1;
    if (a->shape.ndim != b->shape.ndim) return 0;
    for (int i = 0; i < a->shape.ndim; i++)
        if (a->shape.dims[i] != b->shape.dims[i]) return 0;
    if (tsi_numel(a->shape) == 0) return 1;
    /* PyTorch's fast path: the same elements of the same storage are equal (NaN too) */
    bool same = a->storage == b->storage && a->offset == b->offset && a->dtype == b->dtype;
    for (int i = 0; same && i < a->shape.ndim; i++)
        same = a->shape.dims[i] == 1 || a->strides[i] == b->strides[i];
    if (same) return 1;
    ts_scope_begin();
    ts_tensor *all = ts_all(ts_eq(ts_detach(a), ts_detach(b)), (ts_dims){0}, false);
    double v = all ? ts_item(all) : NAN;
    ts_scope_end();
    return ts_error() != TS_OK || isnan(v) ? -1 : v != 0;
}
