/* take.c — take (t flattened, at an index's positions) and take_along_dim (gather along a dim,
 * the index broadcast), composed from the differentiable gather / index_select so that they run
 * and differentiate on every device. */
#include "autograd/autograd.h"
#include "ops/compose.h"

/* int64 indices with the negative ones counted from the end (size); inside a scope */
static ts_tensor *wrap_negative(ts_tensor *i, int64_t size) {
    ts_tensor *neg = i ? ts_lt_scalar(i, 0) : NULL;
    ts_tensor *up = neg ? ts_add_scalar(i, (double)size) : NULL;
    if (up && ts_dtype_of(up) != TS_I64) up = ts_to_dtype(up, TS_I64);
    return up ? ts_where(neg, up, i) : NULL;
}

/* ------------------------------------------------------------------ take */
ts_tensor *ts_take(ts_tensor *t, ts_tensor *index) {
    const char *op = "take";
    tsi_init();
    if (!check_two(op, t, "input", index, "index") || !check_index_dtype(op, index, "index"))
        return NULL;
    const int64_t n = ts_numel(t), e = ts_numel(index);
    const bool meta = tsi_device(t).type == TS_META; /* no index values to check or wrap */
    ts_scope_begin();
    int64_t *v = meta ? NULL : host_i64(op, index);
    for (int64_t i = 0; v && i < e; i++) {
        if (v[i] < -n || v[i] >= n) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: out of range: tried to access index %lld on a tensor of "
                          "%lld elements",
                          op, (long long)v[i], (long long)n);
            break;
        }
        if (v[i] < 0) v[i] += n;
    }
    ts_tensor *idx = meta                       ? ts_empty(TS_SHAPE(e), opts_on(t, TS_I64))
                     : v && ts_error() == TS_OK ? index_on(t, v, e)
                                                : NULL;
    free(v);
    ts_tensor *y = idx ? ts_index_select(ts_reshape(t, TS_SHAPE(n)), 0, idx) : NULL;
    return finish(y ? ts_reshape(y, index->shape) : NULL);
}

ts_tensor *ts_take_along_dim(ts_tensor *t, ts_tensor *index, bool has_dim, int dim) {
    const char *op = "take_along_dim";
    tsi_init();
    if (!check_two(op, t, "input", index, "indices")) return NULL;
    if (index->dtype != TS_I64)
        return tsi_error_set(TS_ERR_DTYPE, "%s: dtype of indices should be int64 but got %s", op,
                             ts_dtype_name(index->dtype)),
               NULL;
    if (!has_dim) {
        ts_scope_begin();
        ts_tensor *x = ts_reshape(t, reshape1(t));
        ts_tensor *i = wrap_negative(ts_reshape(index, reshape1(index)), ts_numel(t));
        return finish(x && i ? ts_gather(x, 0, i) : NULL);
    }
    if (t->shape.ndim != index->shape.ndim)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: input and indices should have the same number of dimensions, "
                             "but got %d dimensions for input, and %d dimensions for indices",
                             op, t->shape.ndim, index->shape.ndim),
               NULL;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return NULL;
    ts_shape ts_ = t->shape, is = index->shape;
    for (int k = 0; k < t->shape.ndim; k++) {
        if (k == d) continue;
        const int64_t a = t->shape.dims[k], b = index->shape.dims[k];
        if (a != b && a != 1 && b != 1)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: input %s and indices %s cannot be broadcast apart from "
                                 "dim %d",
                                 op, tsi_shape_str(t->shape), tsi_shape_str(index->shape), d),
                   NULL;
        ts_.dims[k] = is.dims[k] = a == 1 ? b : a;
    }
    ts_scope_begin();
    ts_tensor *x = ts_expand(t, ts_), *i = ts_expand(wrap_negative(index, t->shape.dims[d]), is);
    return finish(x && i ? ts_gather(x, d, i) : NULL);
}
