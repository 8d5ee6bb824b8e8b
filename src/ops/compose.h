/* compose.h — what the ops composed from public differentiable ops share (scatter.c, take.c,
 * nonzero.c, rearrange.c, diagonal.c, repeat.c, sort.c, statistics.c...): the scope-closing
 * result, the in-place result, index and mask tensors on an operand's device, and host reads of an
 * index or mask (the index plans that depend on values are built on the host, then gathered on
 * the tensor's device). */
#ifndef TS_OPS_COMPOSE_H
#define TS_OPS_COMPOSE_H

#include <stdlib.h>

#include "autograd/autograd.h"

static inline ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

/* t's values replaced by y's (the result of an in-place form); closes a scope of its own */
static inline ts_tensor *in_place_result(ts_tensor *t, ts_tensor *y) {
    ts_scope_begin();
    ts_tensor *r = y ? ts_copy_(t, y) : NULL;
    return finish(r);
}

static inline ts_opts opts_on(ts_tensor *t, ts_dtype dt) {
    ts_opts o = {0};
    o.dtype = dt;
    o.device = ts_device_of(t);
    return o;
}

/* a 1-D int64 tensor on t's device holding v[0..n) (inside a scope) */
static inline ts_tensor *index_on(ts_tensor *t, const int64_t *v, int64_t n) {
    static const int64_t none = 0;
    return ts_from_data(TS_SHAPE(n), TS_I64, n ? v : &none, opts_on(t, TS_I64));
}

/* a bool tensor of shape s on t's device from v (inside a scope) */
static inline ts_tensor *mask_on(ts_tensor *t, ts_shape s, const bool *v) {
    static const bool none = false;
    return ts_from_data(s, TS_BOOL, tsi_numel(s) ? v : &none, opts_on(t, TS_BOOL));
}

/* false (TS_ERR_DEVICE naming op) when t is a meta tensor and the op's result size depends on
 * values, which it has none of (nonzero, masked_select, unique, bincount); true for a t without
 * elements (an empty result, whatever the device) */
static inline bool meta_sized_by_data(const char *op, ts_tensor *t) {
    if (tsi_device(t).type != TS_META || tsi_numel(t->shape) == 0) return true;
    tsi_error_set(TS_ERR_DEVICE,
                  "%s: the size of its result depends on the values, which a meta tensor (%s) "
                  "does not have",
                  op, tsi_desc(t));
    return false;
}

static inline void *host_alloc(const char *op, int64_t n, size_t elem) {
    void *p = malloc((size_t)(n > 0 ? n : 1) * elem);
    if (!p) tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %lld elements", op, (long long)n);
    return p;
}

/* t's values as int64 on the host, row-major (malloc'ed; NULL with the error set); inside a
 * scope */
static inline int64_t *host_i64(const char *op, ts_tensor *t) {
    const int64_t n = ts_numel(t);
    int64_t *v = host_alloc(op, n, sizeof *v);
    if (!v || n == 0) return v;
    ts_tensor *x = ts_contiguous(ts_to(ts_to_dtype(t, TS_I64), ts_cpu()));
    if (!x || ts_copy_to_host(x, v, (size_t)n * sizeof *v) != TS_OK) return free(v), NULL;
    return v;
}

/* t != 0 on the host, row-major (malloc'ed); inside a scope */
static inline bool *host_bool(const char *op, ts_tensor *t) {
    const int64_t n = ts_numel(t);
    bool *v = host_alloc(op, n, sizeof *v);
    if (!v || n == 0) return v;
    ts_tensor *x = ts_to_dtype(t, TS_BOOL);
    x = x ? ts_contiguous(ts_to(x, ts_cpu())) : NULL;
    if (!x || ts_copy_to_host(x, v, (size_t)n) != TS_OK) return free(v), NULL;
    return v;
}

static inline bool check_index_dtype(const char *op, ts_tensor *index, const char *what) {
    if (tsi_is_int(index->dtype)) return true;
    tsi_error_set(TS_ERR_DTYPE, "%s: expected an integer tensor for %s, got %s", op, what,
                  ts_dtype_name(index->dtype));
    return false;
}

static inline bool check_two(const char *op, ts_tensor *a, const char *an, ts_tensor *b,
                             const char *bn) {
    if (!tsi_check_input(op, a, an) || !tsi_check_input(op, b, bn)) return false;
    ts_tensor *ops[2] = {a, b};
    ts_device dev;
    return tsi_same_device(op, ops, 2, false, &dev);
}

static inline ts_shape reshape1(ts_tensor *t) { return TS_SHAPE(ts_numel(t)); }

#endif /* TS_OPS_COMPOSE_H */
