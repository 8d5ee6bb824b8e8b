/* quantile.c — quantile / nanquantile (issue 52): PyTorch's quantile_compute composed of
 * differentiable ops on the tensor's device: the sorted values (sort.c), ranks q * (count - 1) in
 * float64, the values at floor / ceil of the ranks gathered and interpolated as
 * torch.lerp. Gradients reach the input through the gathers and the sort. */
#include <math.h>
#include <string.h>

#include "autograd/autograd.h"
#include "ops/compose.h"

typedef enum { Q_LINEAR, Q_LOWER, Q_HIGHER, Q_MIDPOINT, Q_NEAREST } q_interp;

static bool parse_interp(const char *op, const char *s, q_interp *m) {
    static const char *const names[] = {"linear", "lower", "higher", "midpoint", "nearest"};
    for (int i = 0; i < 5; i++)
        if (s && strcmp(s, names[i]) == 0) return *m = (q_interp)i, true;
    tsi_error_set(TS_ERR_ARG,
                  "%s() interpolation must be one of linear, lower, higher, midpoint or nearest. "
                  "Got %s",
                  op, s ? s : "(null)");
    return false;
}

/* torch.lerp(a, b, w) as PyTorch's CPU kernel: fma(w, b - a, a) for |w| < 0.5, else
 * fma(w - 1, b - a, b), b - a rounded in the dtype. float32: the fused product-sum in float64 (the
 * product of two float32 is exact there), rounded once to float32 */
static ts_tensor *lerp(ts_tensor *a, ts_tensor *b, ts_tensor *w) {
    ts_tensor *d = ts_sub(b, a), *small = ts_lt_scalar(ts_abs(w), 0.5);
    ts_tensor *coeff = ts_where(small, w, ts_sub_scalar(w, 1.0)), *base = ts_where(small, a, b);
    if (!d || d->dtype != TS_F32) return ts_add(base, ts_mul(coeff, d));
    ts_tensor *wide = ts_add(ts_to_dtype(base, TS_F64),
                             ts_mul(ts_to_dtype(coeff, TS_F64), ts_to_dtype(d, TS_F64)));
    return ts_to_dtype(wide, TS_F32);
}

static bool check_args(const char *op, ts_tensor *t, ts_tensor *q, double qs) {
    if (!tsi_check_input(op, t, "input") || (q && !tsi_check_input(op, q, "q"))) return false;
    if (ts_numel(t) == 0)
        return tsi_error_set(TS_ERR_ARG, "%s() input tensor must be non-empty", op), false;
    if (t->dtype != TS_F32 && t->dtype != TS_F64)
        return tsi_error_set(TS_ERR_DTYPE, "%s() input tensor must be either float or double dtype",
                             op),
               false;
    if (!q) {
        if (!(qs >= 0 && qs <= 1))
            return tsi_error_set(TS_ERR_ARG, "%s() q must be in the range [0, 1] but got %g", op,
                                 qs),
                   false;
        return true;
    }
    if (q->shape.ndim > 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s() q must be a scalar or 1D tensor", op), false;
    if (q->dtype != t->dtype)
        return tsi_error_set(TS_ERR_DTYPE, "%s() q tensor must be same dtype as the input tensor",
                             op),
               false;
    ts_tensor *ops[2] = {t, q};
    ts_device dev;
    if (!tsi_same_device(op, ops, 2, false, &dev)) return false;
    /* a meta q has no values to check (PyTorch checks a cpu q's only) */
    if (ts_numel(q) == 0 || tsi_device(q).type == TS_META) return true;
    ts_scope_begin();
    bool ok = ts_item(ts_min(q)) >= 0 && ts_item(ts_max(q)) <= 1;
    ts_scope_end();
    if (!ok) tsi_error_set(TS_ERR_ARG, "%s() q values must be in the range [0, 1]", op);
    return ok && ts_error() == TS_OK;
}

static ts_tensor *quantile(const char *op, ts_tensor *t, ts_tensor *q, double qs, bool has_dim,
                           int dim, bool keepdim, const char *interpolation, bool ignore_nan) {
    tsi_init();
    q_interp mode;
    if (!check_args(op, t, q, qs) || !parse_interp(op, interpolation, &mode)) return NULL;
    const int nd = t->shape.ndim;
    if (has_dim && (dim = tsi_wrap_dim(op, dim, nd)) < 0) return NULL;
    if (nd == 0) has_dim = false;
    ts_shape out = t->shape; /* the result's shape without q's dim */
    if (!has_dim)
        for (int i = 0; i < nd; i++) out.dims[i] = 1;
    else
        out.dims[dim] = 1;
    if (!keepdim) {
        int k = 0;
        for (int i = 0; i < nd; i++)
            if (has_dim && i != dim) out.dims[k++] = t->shape.dims[i];
        out.ndim = k;
    }
    const bool q1 = q && q->shape.ndim == 1;
    const int64_t nq = q1 ? ts_numel(q) : 1;
    if (q1) { /* q's dim first */
        memmove(out.dims + 1, out.dims, (size_t)out.ndim * sizeof out.dims[0]);
        out.dims[0] = nq, out.ndim++;
    }
    ts_scope_begin();
    /* sorted: [*kept, n] with the quantile dim last (kept: t's shape with that dim 1) */
    ts_tensor *x =
        has_dim ? ts_transpose(ts_unsqueeze(t, nd), dim, nd) : ts_reshape(t, TS_SHAPE(ts_numel(t)));
    ts_tensor *sorted = x ? ts_sort(x, -1, false, false, NULL) : NULL;
    /* the ranks and weights in float64, as PyTorch's (q in the input's dtype widened), the weights
     * rounded to the input's dtype for the interpolation */
    ts_tensor *qv =
        q ? ts_reshape(q, TS_SHAPE(nq)) : ts_full(TS_SHAPE(1), qs, opts_on(t, t->dtype));
    qv = ts_to_dtype(qv, TS_F64);
    ts_tensor *y = NULL;
    if (sorted && qv) {
        const int last = sorted->shape.ndim - 1;
        const int64_t n = sorted->shape.dims[last];
        ts_tensor *isnan_ = ts_ne(sorted, sorted), *ranks;
        if (ignore_nan) { /* q * (number of non-NaN - 1), at least 0 */
            ts_tensor *cnt = ts_sum_dim(ts_logical_not(isnan_), last, true);
            ranks = ts_mul(qv, ts_sub_scalar(cnt, 1));
            ranks = ts_masked_fill(ranks, ts_lt_scalar(ranks, 0), 0);
        } else { /* q * (n - 1); n - 1 where the slice holds a NaN (sorted last) */
            ts_shape rs = sorted->shape;
            rs.dims[last] = nq;
            ranks = ts_expand(ts_mul_scalar(qv, (double)(n - 1)), rs);
            ts_tensor *any = ts_gt_scalar(ts_sum_dim(isnan_, last, true), 0);
            ranks = ts_masked_fill(ranks, any, (double)(n - 1));
        }
        if (mode == Q_LOWER) ranks = ts_floor(ranks);
        if (mode == Q_HIGHER) ranks = ts_ceil(ranks);
        if (mode == Q_NEAREST) ranks = ts_round(ranks);
        ts_tensor *below = ts_to_dtype(ranks, TS_I64);
        y = ts_gather(sorted, last, below);
        if (mode == Q_LINEAR || mode == Q_MIDPOINT) {
            ts_tensor *w = mode == Q_MIDPOINT ? ts_full_like(ranks, 0.5)
                                              : ts_sub(ranks, ts_to_dtype(below, TS_F64));
            w = ts_to_dtype(w, t->dtype);
            ts_tensor *above = ts_gather(sorted, last, ts_to_dtype(ts_ceil(ranks), TS_I64));
            y = lerp(y, above, w);
        }
        if (y && q1) y = ts_movedim(y, TS_DIMS(y->shape.ndim - 1), TS_DIMS(0));
        if (y) y = ts_reshape(ts_contiguous(y), out);
    }
    return finish(y);
}

ts_tensor *ts_quantile(ts_tensor *t, ts_tensor *q, double q_scalar, bool has_dim, int dim,
                       bool keepdim, const char *interpolation) {
    return quantile("quantile", t, q, q_scalar, has_dim, dim, keepdim, interpolation, false);
}
ts_tensor *ts_nanquantile(ts_tensor *t, ts_tensor *q, double q_scalar, bool has_dim, int dim,
                          bool keepdim, const char *interpolation) {
    return quantile("nanquantile", t, q, q_scalar, has_dim, dim, keepdim, interpolation, true);
}
