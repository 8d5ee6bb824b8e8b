/* nonzero.c — selections by a mask's values: nonzero (the positions of the non-zero elements),
 * masked_select, masked_scatter (+ in place). The result's size depends on the values: the mask is
 * read on the host (a reported device sync), the plan gathered on the tensor's device with the
 * differentiable ops. */
#include <stdlib.h>

#include "autograd/autograd.h"
#include "core/sync_debug.h"
#include "ops/compose.h"

/* ------------------------------------------------------------------ nonzero, masks */
static ts_tensor *nonzero_impl(ts_tensor *t) {
    const char *op = "nonzero";
    tsi_init();
    if (!tsi_check_input(op, t, "input") || !meta_sized_by_data(op, t)) return NULL;
    const int64_t n = ts_numel(t);
    const int nd = t->shape.ndim;
    ts_scope_begin();
    bool *m = host_bool(op, t);
    int64_t c = 0;
    for (int64_t i = 0; m && i < n; i++) c += m[i];
    int64_t *v = m ? host_alloc(op, c * nd, sizeof *v) : NULL;
    ts_tensor *y = NULL;
    if (v) {
        for (int64_t i = 0, r = 0; i < n; i++) {
            if (!m[i]) continue;
            for (int64_t k = nd - 1, f = i; k >= 0; k--)
                v[r * nd + k] = f % t->shape.dims[k], f /= t->shape.dims[k];
            r++;
        }
        static const int64_t none = 0;
        y = ts_from_data(TS_SHAPE(c, nd), TS_I64, c * nd != 0 ? v : &none, opts_on(t, TS_I64));
    }
    free(m), free(v);
    return finish(y);
}

static bool check_mask(const char *op, ts_tensor *t, ts_tensor *mask, ts_shape *bs) {
    tsi_init();
    if (!check_two(op, t, "input", mask, "mask")) return false;
    if (mask->dtype != TS_BOOL)
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected BoolTensor for mask, got %s", op,
                             ts_dtype_name(mask->dtype)),
               false;
    return tsi_broadcast_shapes(op, t->shape, mask->shape, bs);
}

/* The result's size depends on device data: the host reads are reported under the op's name. */
ts_tensor *ts_nonzero(ts_tensor *t) {
    tsi_sync_ctx sync = tsi_sync_enter("nonzero", TSI_CALLER);
    ts_tensor *y = nonzero_impl(t);
    tsi_sync_leave(sync);
    return y;
}

static ts_tensor *masked_select_impl(ts_tensor *t, ts_tensor *mask) {
    const char *op = "masked_select";
    ts_shape bs;
    if (!check_mask(op, t, mask, &bs) || !meta_sized_by_data(op, t)) return NULL;
    const int64_t n = tsi_numel(bs);
    ts_scope_begin();
    ts_tensor *mb = ts_expand(mask, bs);
    bool *m = mb ? host_bool(op, mb) : NULL;
    int64_t c = 0, *v = m ? host_alloc(op, n, sizeof *v) : NULL;
    /* without a branch: a random mask mispredicts one in two (more than half of the op's time) */
    for (int64_t i = 0; v && i < n; i++) {
        v[c] = i;
        c += m[i];
    }
    ts_tensor *idx = v ? index_on(t, v, c) : NULL;
    free(m), free(v);
    ts_tensor *x = idx ? ts_reshape(ts_expand(t, bs), TS_SHAPE(n)) : NULL;
    return finish(x ? ts_index_select(x, 0, idx) : NULL);
}

ts_tensor *ts_masked_select(ts_tensor *t, ts_tensor *mask) {
    tsi_sync_ctx sync = tsi_sync_enter("masked_select", TSI_CALLER);
    ts_tensor *y = masked_select_impl(t, mask);
    tsi_sync_leave(sync);
    return y;
}

ts_tensor *ts_masked_scatter(ts_tensor *t, ts_tensor *mask, ts_tensor *src) {
    const char *op = "masked_scatter";
    ts_shape bs;
    if (!check_mask(op, t, mask, &bs) || !check_two(op, t, "input", src, "source")) return NULL;
    if (src->dtype != t->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected self and source to have same dtypes but got %s and %s",
                             op, ts_dtype_name(t->dtype), ts_dtype_name(src->dtype)),
               NULL;
    const int64_t n = tsi_numel(bs), s = ts_numel(src);
    /* a meta mask has no values: the plan is a meta index of its shape (no source counted) */
    const bool meta = tsi_device(t).type == TS_META;
    ts_scope_begin();
    ts_tensor *mb = ts_expand(mask, bs);
    bool *m = mb && !meta ? host_bool(op, mb) : NULL;
    int64_t c = 0, *g = m ? host_alloc(op, n, sizeof *g) : NULL;
    for (int64_t i = 0; g && i < n; i++) c += m[i];
    if (g && c > s)
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: Number of elements of source < number of ones in mask (%lld < %lld)", op,
                      (long long)s, (long long)c);
    for (int64_t i = 0, k = 0; g && i < n; i++) g[i] = m[i] ? k++ : c + i;
    ts_tensor *idx = meta && mb                 ? ts_empty(TS_SHAPE(n), opts_on(t, TS_I64))
                     : g && ts_error() == TS_OK ? index_on(t, g, n)
                                                : NULL;
    free(m), free(g);
    ts_tensor *parts[2] = {NULL, NULL};
    if (idx) {
        parts[0] = ts_narrow(ts_reshape(src, TS_SHAPE(s)), 0, 0, c);
        parts[1] = ts_reshape(ts_expand(t, bs), TS_SHAPE(n));
    }
    ts_tensor *y = parts[0] && parts[1] ? ts_index_select(ts_cat(parts, 2, 0), 0, idx) : NULL;
    return finish(y ? ts_reshape(y, bs) : NULL);
}

ts_tensor *ts_masked_scatter_(ts_tensor *t, ts_tensor *mask, ts_tensor *src) {
    const char *op = "masked_scatter_";
    ts_shape bs;
    if (!check_mask(op, t, mask, &bs)) return NULL;
    bool same = bs.ndim == t->shape.ndim;
    for (int k = 0; same && k < bs.ndim; k++) same = bs.dims[k] == t->shape.dims[k];
    if (!same)
        return tsi_error_set(TS_ERR_SHAPE, "%s: mask %s does not broadcast to self %s", op,
                             tsi_shape_str(mask->shape), tsi_shape_str(t->shape)),
               NULL;
    ts_scope_begin();
    ts_tensor *y = ts_masked_scatter(t, mask, src);
    return finish(y ? in_place_result(t, y) : NULL);
}
