/* statistics.c — PyTorch's moment statistics of variables (issue 76): cov (with frequency and
 * observation weights) and corrcoef, and the cross product. Each checks its operands under its own
 * name, then composes the differentiable ops (mul, sum, matmul, sqrt, clamp, roll), so autograd
 * and every device come with them; the formulas are ATen's (Correlation.cpp, Cross.cpp). */
#include <math.h>

#include "autograd/autograd.h"
#include "ops/compose.h"

/* ------------------------------------------------------------------ cov, corrcoef */
/* a weight vector of cov: NULL or 0-/1-D on x's device with one value per observation, integral
 * (fweights) or floating (aweights), none negative (one host read); false with the error set */
static bool cov_weights(const char *op, ts_tensor *x, ts_tensor *w, const char *name, bool integral,
                        int64_t n_obs) {
    if (!w) return true;
    if (!check_two(op, x, "input", w, name)) return false;
    if (w->shape.ndim > 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected %s to have one or fewer dimensions but got %s with %d "
                             "dimensions",
                             op, name, name, w->shape.ndim),
               false;
    if (ts_numel(w) != n_obs)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected %s to have the same numel as there are observations in "
                             "the input but got %lld != %lld",
                             op, name, (long long)ts_numel(w), (long long)n_obs),
               false;
    if (integral ? !tsi_is_int(w->dtype) : !tsi_is_float(w->dtype))
        return tsi_error_set(
                   TS_ERR_DTYPE, "%s: expected %s to have %s dtype but got %s with %s dtype", op,
                   name, integral ? "integral" : "floating point", name, ts_dtype_name(w->dtype)),
               false;
    if (tsi_device(w).type == TS_META || n_obs == 0) return true;
    ts_scope_begin();
    const double lo = ts_item(ts_min(w));
    ts_scope_end();
    if (ts_error() != TS_OK) return false;
    if (lo < 0) return tsi_error_set(TS_ERR_ARG, "%s: %s cannot be negative", op, name), false;
    return true;
}

ts_tensor *ts_cov(ts_tensor *t, int64_t correction, ts_tensor *fweights, ts_tensor *aweights) {
    const char *op = "cov";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (t->shape.ndim > 2)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected input to have two or fewer dimensions but got an input "
                             "with %d dimensions",
                             op, t->shape.ndim),
               NULL;
    if (t->dtype == TS_BOOL)
        return tsi_error_set(TS_ERR_DTYPE, "%s: bool dtype is not supported for input", op), NULL;
    const int64_t n_obs = t->shape.ndim < 2 ? ts_numel(t) : t->shape.dims[1];
    if (!cov_weights(op, t, fweights, "fweights", true, n_obs) ||
        !cov_weights(op, t, aweights, "aweights", false, n_obs))
        return NULL;
    ts_scope_begin();
    ts_tensor *x = t->shape.ndim < 2 ? ts_reshape(t, TS_SHAPE(1, n_obs)) : t;
    if (x && !tsi_is_float(x->dtype)) x = ts_to_dtype(x, TS_F32);
    ts_tensor *w = fweights;
    if (aweights) w = w ? ts_mul(w, aweights) : aweights;
    ts_tensor *w_sum = NULL, *avg = NULL, *norm = NULL;
    if (x && w) {
        w_sum = ts_sum(w);
        const bool meta = tsi_device(t).type == TS_META;
        if (w_sum && !meta && ts_item(w_sum) == 0 && ts_error() == TS_OK)
            tsi_error_set(TS_ERR_ARG, "%s: weights sum to zero, can't be normalized", op);
        avg = ts_error() == TS_OK ? ts_div(ts_sum_dim(ts_mul(x, w), 1, false), w_sum) : NULL;
        if (correction != 0 && aweights)
            norm =
                ts_sub(w_sum, ts_div(ts_mul_scalar(ts_sum(ts_mul(w, aweights)), (double)correction),
                                     w_sum));
        else
            norm = ts_sub_scalar(w_sum, (double)correction);
    } else if (x) {
        avg = ts_mean_dim(x, 1, false);
        norm = ts_full(TS_SHAPE(), (double)(n_obs - correction), opts_on(t, TS_F64));
    }
    /* degrees of freedom <= 0: PyTorch's factor 0 (its warning is the caller's to give) */
    if (norm && tsi_device(t).type != TS_META && ts_item(norm) <= 0) norm = ts_zeros_like(norm);
    ts_tensor *xc = avg ? ts_sub(x, ts_unsqueeze(avg, 1)) : NULL;
    ts_tensor *rhs = xc && w ? ts_mul(xc, w) : xc;
    ts_tensor *c = rhs ? ts_matmul(xc, ts_t(rhs)) : NULL;
    if (c && norm && ts_dtype_of(norm) != ts_dtype_of(c)) norm = ts_to_dtype(norm, ts_dtype_of(c));
    c = c && norm ? ts_div(c, norm) : NULL;
    return finish(c ? ts_squeeze(c) : NULL);
}

ts_tensor *ts_corrcoef(ts_tensor *t) {
    tsi_init();
    if (!tsi_check_input("corrcoef", t, "input")) return NULL;
    if (t->shape.ndim > 2)
        return tsi_error_set(TS_ERR_SHAPE,
                             "corrcoef: expected input to have two or fewer dimensions but got an "
                             "input with %d dimensions",
                             t->shape.ndim),
               NULL;
    ts_scope_begin();
    ts_tensor *c = ts_cov(t, 1, NULL, NULL);
    if (c && c->shape.ndim == 0) return finish(ts_div(c, c));
    ts_tensor *sd = c ? ts_sqrt(ts_diagonal(c, 0, 0, 1)) : NULL;
    c = sd ? ts_div(c, ts_unsqueeze(sd, 1)) : NULL;
    c = c ? ts_div(c, ts_unsqueeze(sd, 0)) : NULL;
    return finish(c ? ts_clamp(c, -1.0, 1.0) : NULL);
}

/* ------------------------------------------------------------------ cross */
static ts_tensor *cross_run(const char *op, ts_tensor *a, ts_tensor *b, bool has_dim, int dim) {
    tsi_init();
    if (!check_two(op, a, "input", b, "other")) return NULL;
    if (a->shape.ndim != b->shape.ndim)
        return tsi_error_set(TS_ERR_SHAPE, "%s: inputs must have the same number of dimensions.",
                             op),
               NULL;
    if (a->dtype != b->dtype)
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected both inputs of one dtype, got %s and %s",
                             op, ts_dtype_name(a->dtype), ts_dtype_name(b->dtype)),
               NULL;
    ts_shape s;
    if (!tsi_broadcast_shapes(op, a->shape, b->shape, &s)) return NULL;
    int d = -1;
    if (has_dim) {
        d = tsi_wrap_dim(op, dim, s.ndim);
        if (d < 0) return NULL;
    } else {
        for (int k = 0; k < s.ndim && d < 0; k++)
            if (s.dims[k] == 3) d = k;
        if (d < 0)
            return tsi_error_set(TS_ERR_SHAPE, "%s: no dimension of size 3 in input", op), NULL;
    }
    if (a->shape.dims[d] != 3 || b->shape.dims[d] != 3)
        return tsi_error_set(
                   TS_ERR_SHAPE, "%s: inputs dimension %d must have length 3. Got %lld and %lld",
                   op, has_dim ? dim : d, (long long)a->shape.dims[d], (long long)b->shape.dims[d]),
               NULL;
    ts_scope_begin();
    ts_tensor *x = ts_expand(a, s), *y = ts_expand(b, s);
    const ts_dims dd = TS_DIMS(d);
    const int64_t one = 1, two = 2;
    /* (a1 b2 - a2 b1) with a1 = roll(a, -1), a2 = roll(a, -2): component i is
     * a[i+1] b[i+2] - a[i+2] b[i+1] */
    ts_tensor *a1 = x ? ts_roll(x, (int64_t[]){-one}, 1, dd) : NULL;
    ts_tensor *a2 = x ? ts_roll(x, (int64_t[]){-two}, 1, dd) : NULL;
    ts_tensor *b1 = y ? ts_roll(y, (int64_t[]){-one}, 1, dd) : NULL;
    ts_tensor *b2 = y ? ts_roll(y, (int64_t[]){-two}, 1, dd) : NULL;
    ts_tensor *r = a1 && a2 && b1 && b2 ? ts_sub(ts_mul(a1, b2), ts_mul(a2, b1)) : NULL;
    return finish(r);
}

ts_tensor *ts_cross(ts_tensor *a, ts_tensor *b, bool has_dim, int dim) {
    return cross_run("cross", a, b, has_dim, dim);
}

ts_tensor *ts_linalg_cross(ts_tensor *a, ts_tensor *b, int dim) {
    return cross_run("linalg.cross", a, b, true, dim);
}
