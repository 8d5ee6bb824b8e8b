/* coordinates.c — tables of coordinates (issue 76): tril_indices / triu_indices (the (row, col)
 * pairs of a triangle, row-major, made on the host as PyTorch's CPU kernel makes them, then put on
 * the device asked for) and meshgrid (each 0-/1-D input viewed along its own dim and expanded over
 * the grid: views that differentiate through expand, as PyTorch's). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "ops/compose.h"

/* ------------------------------------------------------------------ tril / triu indices */
static ts_tensor *tri_indices(const char *op, int64_t row, int64_t col, int64_t offset, ts_opts o,
                              bool lower) {
    tsi_init();
    if (row < 0 || col < 0)
        return tsi_error_set(TS_ERR_ARG, "%s: %s must be non-negative, got %lld", op,
                             row < 0 ? "row" : "col", (long long)(row < 0 ? row : col)),
               NULL;
    const ts_dtype dt = o.dtype == TS_DTYPE_DEFAULT ? TS_I64 : o.dtype;
    if (dt != TS_I64 && dt != TS_I32)
        return tsi_error_set(TS_ERR_DTYPE, "%s: not implemented for %s (int64 or int32)", op,
                             ts_dtype_name(dt)),
               NULL;
    int64_t count = 0;
    for (int64_t i = 0; i < row; i++) {
        /* lower: j < i + offset + 1; upper: j >= i + offset; both within [0, col) */
        int64_t lo = lower ? 0 : i + offset, hi = lower ? i + offset + 1 : col;
        lo = lo < 0 ? 0 : lo > col ? col : lo;
        hi = hi < lo ? lo : hi > col ? col : hi;
        count += hi - lo;
    }
    int64_t *v = host_alloc(op, 2 * count, sizeof *v);
    if (!v) return NULL;
    int64_t k = 0;
    for (int64_t i = 0; i < row; i++) {
        int64_t lo = lower ? 0 : i + offset, hi = lower ? i + offset + 1 : col;
        lo = lo < 0 ? 0 : lo > col ? col : lo;
        hi = hi < lo ? lo : hi > col ? col : hi;
        for (int64_t j = lo; j < hi; j++, k++) v[k] = i, v[count + k] = j;
    }
    ts_scope_begin();
    ts_opts host = o;
    host.dtype = TS_I64;
    host.requires_grad = false;
    static const int64_t none = 0;
    ts_tensor *y = ts_from_data(TS_SHAPE(2, count), TS_I64, count ? v : &none, host);
    free(v);
    if (y && dt != TS_I64) y = ts_to_dtype(y, dt);
    return finish(y);
}

ts_tensor *ts_tril_indices(int64_t row, int64_t col, int64_t offset, ts_opts o) {
    return tri_indices("tril_indices", row, col, offset, o, true);
}

ts_tensor *ts_triu_indices(int64_t row, int64_t col, int64_t offset, ts_opts o) {
    return tri_indices("triu_indices", row, col, offset, o, false);
}

/* ------------------------------------------------------------------ meshgrid */
int ts_meshgrid(ts_tensor *const *ts, int n, const char *indexing, ts_tensor **out, int max_out) {
    const char *op = "meshgrid";
    tsi_init();
    if (n <= 0 || !ts)
        return tsi_error_set(TS_ERR_ARG, "%s: expects a non-empty list of tensors", op), -1;
    if (n > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_ARG, "%s: at most %d tensors, got %d", op, TS_MAX_DIMS, n), -1;
    if (!indexing) indexing = "ij";
    const bool xy = !strcmp(indexing, "xy");
    if (!xy && strcmp(indexing, "ij"))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: indexing must be one of \"xy\" or \"ij\", but received: %s", op,
                             indexing),
               -1;
    for (int i = 0; i < n; i++) {
        if (!tsi_check_input(op, ts[i], "tensors")) return -1;
        if (ts[i]->shape.ndim > 1)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: Expected 0D or 1D tensor in the tensor list but got %s", op,
                                 tsi_desc(ts[i])),
                   -1;
        if (ts[i]->dtype != ts[0]->dtype)
            return tsi_error_set(TS_ERR_DTYPE,
                                 "%s: expects all tensors to have the same dtype (%s and %s)", op,
                                 ts_dtype_name(ts[0]->dtype), ts_dtype_name(ts[i]->dtype)),
                   -1;
    }
    ts_device dev;
    if (!tsi_same_device(op, ts, n, false, &dev)) return -1;
    if (!out || max_out < n) return n;
    /* xy: the first two inputs trade places in the grid's dims (and back among the results) */
    int order[TS_MAX_DIMS];
    for (int i = 0; i < n; i++) order[i] = i;
    if (xy && n >= 2) order[0] = 1, order[1] = 0;
    ts_shape s = {.ndim = n};
    for (int g = 0; g < n; g++) s.dims[g] = ts_numel(ts[order[g]]);
    ts_tensor *r[TS_MAX_DIMS] = {0};
    ts_scope_begin();
    for (int g = 0; g < n; g++) {
        ts_shape v = s;
        for (int k = 0; k < n; k++) v.dims[k] = k == g ? s.dims[g] : 1;
        ts_tensor *x = ts_reshape(ts[order[g]], v);
        r[order[g]] = x ? ts_expand(x, s) : NULL;
    }
    const bool ok = ts_error() == TS_OK;
    for (int i = 0; i < n; i++) out[i] = ok && r[i] ? ts_keep(r[i]) : NULL;
    ts_scope_end();
    /* as ts_split: results written before a failure belong to the caller */
    for (int i = 0; i < n; i++)
        if (!out[i])
            return ts_error() == TS_OK ? (tsi_error_set(TS_ERR_OOM, "%s: failed", op), -1) : -1;
    return n;
}
