/* pointwise_more.c — issue 52's pointwise and shape forms composed from differentiable ops (every
 * device, gradients as PyTorch's): addcmul, addcdiv, lerp, fmax / fmin, nansum / nanmean, diff,
 * repeat / tile, gcd / lcm (integers; Euclid's steps until every pair is done). */
#include <math.h>
#include <stdlib.h>

#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "ops/elementwise.h"

static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

static bool check2(const char *op, ts_tensor *a, const char *na, ts_tensor *b, const char *nb) {
    tsi_init();
    bool ok = tsi_check_input(op, a, na);
    return tsi_check_input(op, b, nb) && ok;
}

/* ------------------------------------------------------------------ one pass where it can
 * addcmul, addcdiv and lerp run the backend's ternary kernel in one pass when no gradient is
 * recorded, no ONNX trace runs, the three operands share one floating dtype and one device, and
 * the backend has the kernel; otherwise (and for every gradient) they are composed from the
 * binary ops below, which give the same values (the same formula, term for term). NULL with no
 * error set: not taken. */
static ts_tensor *fused3(const char *op, ts_ternary_op top, ts_tensor *a, ts_tensor *b,
                         ts_tensor *c, double pv) {
    ts_tensor *const ins[3] = {a, b, c};
    const int n = c ? 3 : 2;
    if (tsi_trace_active || tsi_needs_graph(ins, n) || !tsi_is_float(a->dtype)) return NULL;
    const ts_device dev = tsi_device(a);
    for (int i = 1; i < n; i++) {
        const ts_device d = tsi_device(ins[i]);
        if (ins[i]->dtype != a->dtype || d.type != dev.type || d.index != dev.index) return NULL;
    }
    const ts_backend *be = tsi_be(a);
    if (!be->ternary) return NULL;
    ts_shape ab, s;
    if (!tsi_broadcast_shapes(op, a->shape, b->shape, &ab) ||
        !tsi_broadcast_shapes(op, ab, c ? c->shape : ab, &s))
        return NULL; /* error set: the caller returns it */
    tsi_log_op(op, dev);
    ts_tensor *out = tsi_new(op, s, a->dtype, dev);
    if (out && tsi_numel(s) > 0) {
        const ts_kview ko = tsi_kview(out), ka = tsi_ew_kview_to(a, &s),
                       kb = tsi_ew_kview_to(b, &s), kc = c ? tsi_ew_kview_to(c, &s) : kb;
        be->ternary(be, tsi_dev_index(out), top, &ko, &ka, &kb, &kc, pv);
    }
    return tsi_own(out);
}

/* ------------------------------------------------------------------ addcmul, addcdiv */
static ts_tensor *addc(const char *op, ts_tensor *t, ts_tensor *a, ts_tensor *b, double value,
                       bool div) {
    tsi_init();
    bool ok = tsi_check_input(op, t, "input");
    ok = tsi_check_input(op, a, "tensor1") && ok;
    if (!(tsi_check_input(op, b, "tensor2") && ok)) return NULL;
    ts_tensor *const ins[3] = {t, a, b};
    ts_device dev;
    if (!tsi_same_device(op, ins, 3, true, &dev)) return NULL;
    if (div && !tsi_is_float(a->dtype) && !tsi_is_float(b->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: Integer division with addcdiv is no longer supported (%s and "
                             "%s); convert the tensors to a floating dtype",
                             op, tsi_desc(a), tsi_desc(b)),
               NULL;
    ts_dtype ab = tsi_ew_result_type2(a, b);
    if (!tsi_check_promotion(op, ab, a->dtype, b->dtype)) return NULL;
    ts_tensor *y = fused3(op, div ? TS_T_ADDCDIV : TS_T_ADDCMUL, t, a, b, value);
    if (y || ts_error() != TS_OK) return y;
    /* an integer result takes value converted to its type (PyTorch's Scalar::to: truncated) */
    if (!tsi_is_float(ab) && !tsi_is_float(t->dtype)) value = trunc(value);
    ts_scope_begin();
    /* PyTorch's order: input + value * tensor1 op tensor2, in the operands' common dtype */
    ts_tensor *x = a->dtype == ab ? a : ts_to_dtype(a, ab);
    if (value != 1) x = ts_mul_scalar(x, value);
    x = div ? ts_div(x, b) : ts_mul(x, b);
    return finish(ts_add(t, x));
}

ts_tensor *ts_addcmul(ts_tensor *t, ts_tensor *a, ts_tensor *b, double value) {
    return addc("addcmul", t, a, b, value, false);
}
ts_tensor *ts_addcdiv(ts_tensor *t, ts_tensor *a, ts_tensor *b, double value) {
    return addc("addcdiv", t, a, b, value, true);
}

/* ------------------------------------------------------------------ lerp */
static bool lerp_check(const char *op, ts_tensor *s, ts_tensor *e, ts_tensor *w) {
    if (!check2(op, s, "input", e, "end") || (w && !tsi_check_input(op, w, "weight"))) return false;
    ts_tensor *const ins[3] = {s, e, w};
    ts_device dev;
    if (!tsi_same_device(op, ins, w ? 3 : 2, true, &dev)) return false;
    ts_tensor *bad = e->dtype != s->dtype ? e : w && w->dtype != s->dtype ? w : NULL;
    if (bad) {
        tsi_error_set(TS_ERR_DTYPE, "%s: expected dtype %s for `%s` but got dtype %s", op,
                      ts_dtype_name(s->dtype), bad == e ? "end" : "weight",
                      ts_dtype_name(bad->dtype));
        return false;
    }
    if (!tsi_is_float(s->dtype)) {
        tsi_error_set(TS_ERR_DTYPE, "%s: \"lerp_kernel\" not implemented for '%s'", op,
                      tsi_torch_scalar_name(s->dtype));
        return false;
    }
    return true;
}

ts_tensor *ts_lerp(ts_tensor *start, ts_tensor *end, ts_tensor *weight) {
    const char *op = "lerp";
    if (!lerp_check(op, start, end, weight)) return NULL;
    ts_tensor *y = fused3(op, TS_T_LERP, start, end, weight, 0);
    if (y || ts_error() != TS_OK) return y;
    ts_scope_begin();
    /* |w| < 0.5: start + w * (end - start); else end - (end - start) * (1 - w) */
    ts_tensor *d = ts_sub(end, start);
    ts_tensor *lo = ts_add(start, ts_mul(weight, d));
    ts_tensor *hi = ts_sub(end, ts_mul(d, ts_rsub_scalar(weight, 1)));
    ts_tensor *small = ts_lt_scalar(ts_abs(ts_detach(weight)), 0.5);
    return finish(ts_where(small, lo, hi));
}

ts_tensor *ts_lerp_scalar(ts_tensor *start, ts_tensor *end, double weight) {
    const char *op = "lerp";
    if (!lerp_check(op, start, end, NULL)) return NULL;
    ts_tensor *y = fused3(op, TS_T_LERP_SCALAR, start, end, NULL, weight);
    if (y || ts_error() != TS_OK) return y;
    ts_scope_begin();
    ts_tensor *d = ts_sub(end, start);
    if (fabs(weight) < 0.5)
        y = ts_add(start, ts_mul_scalar(d, weight));
    else
        y = ts_sub(end, ts_mul_scalar(d, 1 - weight));
    /* the result must span both operands' shapes even where weight is 0 or 1 */
    return finish(y);
}

/* ------------------------------------------------------------------ fmax, fmin */
static ts_tensor *fmaxmin(const char *op, ts_tensor *a, ts_tensor *b, bool max) {
    if (!check2(op, a, "input", b, "other")) return NULL;
    ts_scope_begin();
    ts_tensor *x = ts_detach(a), *y = ts_detach(b);
    /* a where a >= b (a <= b) or b is NaN, else b: NaN only when both are; PyTorch's gradient */
    ts_tensor *keep_a = ts_logical_or(max ? ts_ge(x, y) : ts_le(x, y), ts_ne(y, y));
    return finish(ts_where(keep_a, a, b));
}

ts_tensor *ts_fmax(ts_tensor *a, ts_tensor *b) { return fmaxmin("fmax", a, b, true); }
ts_tensor *ts_fmin(ts_tensor *a, ts_tensor *b) { return fmaxmin("fmin", a, b, false); }

/* ------------------------------------------------------------------ nansum, nanmean */
static ts_tensor *sum_over(ts_tensor *x, ts_dims dims, bool keepdim, int ndim) {
    if (dims.n == 0 && (!keepdim || ndim == 0)) return ts_sum(x);
    ts_dims every = {.n = ndim};
    for (int i = 0; i < ndim; i++) every.d[i] = i;
    return ts_sum_dims(x, dims.n ? dims : every, keepdim);
}

static ts_tensor *nan_zeroed(ts_tensor *t) {
    if (!tsi_is_float(t->dtype)) return t;
    ts_tensor *z = ts_scalar(0, (ts_opts){.dtype = t->dtype, .device = ts_device_of(t)});
    ts_tensor *d = ts_detach(t);
    return ts_where(ts_ne(d, d), z, t);
}

ts_tensor *ts_nansum(ts_tensor *t, ts_dims dims, bool keepdim) {
    const char *op = "nansum";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    ts_scope_begin();
    return finish(sum_over(nan_zeroed(t), dims, keepdim, t->shape.ndim));
}

ts_tensor *ts_nanmean(ts_tensor *t, ts_dims dims, bool keepdim) {
    const char *op = "nanmean";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (!tsi_is_float(t->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected input to have floating point or complex dtype but got "
                             "%s",
                             op, tsi_torch_scalar_name(t->dtype)),
               NULL;
    ts_scope_begin();
    ts_tensor *d = ts_detach(t);
    ts_tensor *count = sum_over(ts_eq(d, d), dims, keepdim, t->shape.ndim);
    return finish(ts_div(sum_over(nan_zeroed(t), dims, keepdim, t->shape.ndim), count));
}

/* ------------------------------------------------------------------ diff */
ts_tensor *ts_diff(ts_tensor *t, int64_t n, int dim, ts_tensor *prepend, ts_tensor *append) {
    const char *op = "diff";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if ((prepend && !tsi_check_input(op, prepend, "prepend")) ||
        (append && !tsi_check_input(op, append, "append")))
        return NULL;
    if (t->shape.ndim < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: diff expects input to be at least one-dimensional",
                             op),
               NULL;
    if (n < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: order must be non-negative but got %lld", op,
                             (long long)n),
               NULL;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return NULL;
    ts_scope_begin();
    if (n == 0) return finish(ts_clone(t)); /* PyTorch: prepend and append are ignored then */
    ts_tensor *x = t;
    if (prepend || append) {
        ts_tensor *parts[3];
        int k = 0;
        if (prepend) parts[k++] = prepend;
        parts[k++] = t;
        if (append) parts[k++] = append;
        x = ts_cat(parts, k, d);
    }
    if (!x) return finish(NULL);
    const bool is_bool = ts_dtype_of(x) == TS_BOOL;
    int64_t len = ts_size(x, d) - 1;
    if (n > len + 1) n = len + 1;
    for (int64_t i = 0; i < n && x; i++, len--) {
        ts_tensor *hi = ts_narrow(x, d, 1, len), *lo = ts_narrow(x, d, 0, len);
        x = is_bool ? ts_logical_xor(hi, lo) : ts_sub(hi, lo);
    }
    return finish(x);
}

/* ------------------------------------------------------------------ repeat, tile */
/* x tiled r times along dim d: index_select with 0..s-1 repeated (differentiable, any device) */
static ts_tensor *tile_dim(ts_tensor *x, int d, int64_t r) {
    const int64_t s = ts_size(x, d);
    if (r == 1) return x;
    int64_t m = s * r;
    int64_t *idx = malloc(sizeof *idx * (size_t)(m > 0 ? m : 1));
    if (!idx) return tsi_error_set(TS_ERR_OOM, "repeat: out of host memory"), NULL;
    for (int64_t i = 0; i < m; i++) idx[i] = i % s;
    ts_tensor *it = ts_tensor_i64((ts_shape){1, {m}}, idx, (ts_opts){.device = ts_device_of(x)});
    free(idx);
    return it ? ts_index_select(x, d, it) : NULL;
}

static ts_tensor *repeat_run(const char *op, ts_tensor *t, const int64_t *reps, int n) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (!reps && n > 0) return tsi_error_set(TS_ERR_ARG, "%s: reps is NULL", op), NULL;
    if (n < t->shape.ndim || n > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Number of dimensions of repeat dims (%d) can not be smaller than "
                             "number of dimensions of tensor (%d)%s",
                             op, n, t->shape.ndim, n > TS_MAX_DIMS ? " or larger than 8" : ""),
               NULL;
    ts_shape out = {.ndim = n};
    double total = 1;
    for (int i = 0; i < n; i++) {
        if (reps[i] < 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: Trying to create tensor with negative dimension %lld", op,
                                 (long long)reps[i]),
                   NULL;
        int64_t s = i < n - t->shape.ndim ? 1 : t->shape.dims[i - (n - t->shape.ndim)];
        out.dims[i] = s * reps[i];
        total *= (double)out.dims[i];
    }
    if (total > 9e18) return tsi_error_set(TS_ERR_ARG, "%s: the result is too large", op), NULL;
    ts_scope_begin();
    ts_shape padded = {.ndim = n};
    for (int i = 0; i < n; i++)
        padded.dims[i] = i < n - t->shape.ndim ? 1 : t->shape.dims[i - (n - t->shape.ndim)];
    ts_tensor *x = ts_reshape(t, padded);
    for (int i = 0; i < n && x; i++) x = tile_dim(x, i, reps[i]);
    if (x && x == t) x = ts_clone(x); /* a new tensor, as PyTorch's repeat */
    return finish(x);
}

ts_tensor *ts_repeat(ts_tensor *t, const int64_t *reps, int n) {
    return repeat_run("repeat", t, reps, n);
}

ts_tensor *ts_tile(ts_tensor *t, const int64_t *reps, int n) {
    const char *op = "tile";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (n < 0 || n > TS_MAX_DIMS || (!reps && n > 0))
        return tsi_error_set(TS_ERR_ARG, "%s: %d dims given", op, n), NULL;
    int64_t full[TS_MAX_DIMS];
    int m = n < t->shape.ndim ? t->shape.ndim : n;
    for (int i = 0; i < m; i++) full[i] = i < m - n ? 1 : reps[i - (m - n)];
    return repeat_run(op, t, full, m);
}

/* ------------------------------------------------------------------ gcd, lcm */
static ts_tensor *gcd_run(const char *op, ts_tensor *a, ts_tensor *b) {
    if (!check2(op, a, "input", b, "other")) return NULL;
    const ts_dtype r = tsi_ew_result_type2(a, b);
    if (!tsi_check_promotion(op, r, a->dtype, b->dtype)) return NULL;
    if (!tsi_is_int(r))
        return tsi_error_set(TS_ERR_DTYPE, "%s: \"%s_cpu\" not implemented for '%s'", op, op,
                             tsi_torch_scalar_name(r)),
               NULL;
    ts_shape s;
    if (!tsi_broadcast_shapes(op, a->shape, b->shape, &s)) return NULL;
    /* C's loop on every pair at once: while (x != 0) { c = x; x = y % x; y = c; } return y */
    ts_tensor *x = ts_abs(ts_expand(ts_to_dtype(ts_detach(a), r), s));
    ts_tensor *y = ts_abs(ts_expand(ts_to_dtype(ts_detach(b), r), s));
    if (!x || !y || tsi_numel(s) == 0) return ts_clone(y);
    for (int it = 0; it < 200 && x; it++) {
        ts_tensor *nz = ts_ne_scalar(x, 0);
        ts_tensor *any = ts_any(nz, (ts_dims){0}, false);
        if (!any || ts_item(any) == 0) break;
        ts_tensor *c = x, *safe = ts_where(nz, x, ts_ones_like(x));
        x = ts_where(nz, ts_fmod(y, safe), x); /* C's %: the dividend's sign */
        y = ts_where(nz, c, y);
    }
    return x ? ts_clone(y) : NULL;
}

ts_tensor *ts_gcd(ts_tensor *a, ts_tensor *b) {
    ts_scope_begin();
    return finish(gcd_run("gcd", a, b));
}

ts_tensor *ts_lcm(ts_tensor *a, ts_tensor *b) {
    ts_scope_begin();
    ts_tensor *g = gcd_run("lcm", a, b);
    if (!g) return finish(NULL);
    /* g == 0 ? 0 : |a / g * b| */
    ts_tensor *zero = ts_eq_scalar(g, 0);
    ts_tensor *gs = ts_where(zero, ts_ones_like(g), g);
    ts_tensor *q =
        ts_div_rounding(ts_to_dtype(ts_detach(a), ts_dtype_of(g)), gs, TS_ROUNDING_TRUNC);
    ts_tensor *y = ts_abs(ts_mul(q, ts_to_dtype(ts_detach(b), ts_dtype_of(g))));
    return finish(ts_where(zero, ts_zeros_like(g), y));
}
