/* norm_forms.c — PyTorch's ops that are a vector norm in another form (issue 76): dist (the norm
 * of a difference) and renorm (slices scaled down to a maximum norm). Each checks its operands
 * under its own name, then composes the differentiable ops (sub, vector_norm, where, mul), so
 * autograd and every device come with them; the formulas are ATen's (ReduceOps.cpp). */
#include "autograd/autograd.h"
#include "ops/compose.h"

static bool check_float(const char *op, ts_tensor *t, const char *name) {
    if (tsi_is_float(t->dtype)) return true;
    tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating-point %s, got %s", op, name,
                  ts_dtype_name(t->dtype));
    return false;
}

ts_tensor *ts_dist(ts_tensor *a, ts_tensor *b, double p) {
    const char *op = "dist";
    tsi_init();
    if (!check_two(op, a, "input", b, "other") || !check_float(op, a, "input") ||
        !check_float(op, b, "other"))
        return NULL;
    ts_shape s;
    if (!tsi_broadcast_shapes(op, a->shape, b->shape, &s)) return NULL;
    ts_scope_begin();
    ts_tensor *d = ts_sub(a, b);
    return finish(d ? ts_vector_norm(d, p, (ts_dims){0}, false, TS_DTYPE_DEFAULT) : NULL);
}

ts_tensor *ts_renorm(ts_tensor *t, double p, int dim, double maxnorm) {
    const char *op = "renorm";
    tsi_init();
    if (!tsi_check_input(op, t, "input") || !check_float(op, t, "input")) return NULL;
    if (t->shape.ndim < 2)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: input needs at least 2 dimensions, got %d dimensions", op,
                             t->shape.ndim),
               NULL;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return NULL;
    if (!(p > 0))
        return tsi_error_set(TS_ERR_ARG, "%s: non-positive-norm not supported (p = %g)", op, p),
               NULL;
    if (!(maxnorm >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: expected maxnorm to be >= 0 but got %g", op, maxnorm),
               NULL;
    ts_dims others = {0};
    for (int k = 0; k < t->shape.ndim; k++)
        if (k != d) others.d[others.n++] = k;
    ts_scope_begin();
    /* factor = maxnorm / (norm + 1e-7) where norm > maxnorm, else 1 */
    ts_tensor *norm = ts_vector_norm(t, p, others, true, TS_DTYPE_DEFAULT);
    ts_tensor *scaled =
        norm ? ts_div(ts_full_like(norm, maxnorm), ts_add_scalar(norm, 1e-7)) : NULL;
    ts_tensor *factor =
        scaled ? ts_where(ts_gt_scalar(norm, maxnorm), scaled, ts_ones_like(norm)) : NULL;
    return finish(factor ? ts_mul(t, factor) : NULL);
}
