/* as_strided_copy.c — the functional forms of torch.as_strided (issue 76): as_strided_copy (the
 * elements of an as_strided view of t's storage, as a new tensor) and as_strided_scatter (t with
 * the elements of such a view replaced by src). The view may read only t's own storage elements
 * (checked on the host from the two geometries: a wrong number is never read from storage t does
 * not cover). Composed of index_copy and take over a buffer the size of the storage span, so both
 * are differentiable (in t and src) on every device, as the Python forms they replace. */
#include <stdlib.h>

#include "autograd/autograd.h"
#include "core/internal.h"

/* storage position of every element of (s, strides, offset), row-major, into pos */
static void positions(ts_shape s, const int64_t *strides, int64_t offset, int64_t *pos) {
    int64_t n = 1, idx[TS_MAX_DIMS] = {0};
    for (int d = 0; d < s.ndim; d++) n *= s.dims[d];
    for (int64_t e = 0; e < n; e++) {
        int64_t p = offset;
        for (int d = 0; d < s.ndim; d++) p += idx[d] * strides[d];
        pos[e] = p;
        for (int d = s.ndim - 1; d >= 0; d--) {
            if (++idx[d] < s.dims[d]) break;
            idx[d] = 0;
        }
    }
}

typedef struct strided_plan {
    int64_t nin, nout, top; /* t's elements, the view's, the storage span t covers */
    int64_t *in_pos, *out_pos;
} strided_plan;

static void plan_free(strided_plan *p) { free(p->in_pos), free(p->out_pos); }

/* the checks and both position lists; false with the error set */
static bool plan(const char *op, ts_tensor *t, ts_shape size, const int64_t *stride,
                 int64_t storage_offset, strided_plan *p) {
    *p = (strided_plan){0};
    if (!stride && size.ndim > 0) {
        tsi_error_set(TS_ERR_ARG, "%s(): stride is NULL", op);
        return false;
    }
    if (size.ndim < 0 || size.ndim > TS_MAX_DIMS) {
        tsi_error_set(TS_ERR_SHAPE, "%s(): size has %d dims, at most %d are supported", op,
                      size.ndim, TS_MAX_DIMS);
        return false;
    }
    for (int d = 0; d < size.ndim; d++)
        if (size.dims[d] < 0 || stride[d] < 0) {
            tsi_error_set(TS_ERR_ARG, "%s(): negative sizes or strides are not supported", op);
            return false;
        }
    const int64_t off = storage_offset < 0 ? t->offset : storage_offset;
    p->nin = tsi_numel(t->shape);
    p->nout = tsi_numel(size);
    p->in_pos = malloc((size_t)(p->nin + 1) * sizeof *p->in_pos);
    p->out_pos = malloc((size_t)(p->nout + 1) * sizeof *p->out_pos);
    char *known = NULL;
    bool ok = p->in_pos && p->out_pos;
    if (ok) {
        positions(t->shape, t->strides, t->offset, p->in_pos);
        positions(size, stride, off, p->out_pos);
        for (int64_t i = 0; i < p->nin; i++)
            p->top = p->in_pos[i] + 1 > p->top ? p->in_pos[i] + 1 : p->top;
        ok = (known = calloc((size_t)(p->top + 1), 1)) != NULL;
    }
    if (!ok) {
        tsi_error_set(TS_ERR_OOM, "%s(): out of host memory", op);
        return plan_free(p), false;
    }
    for (int64_t i = 0; i < p->nin; i++) known[p->in_pos[i]] = 1;
    for (int64_t i = 0; i < p->nout && ok; i++) {
        const int64_t q = p->out_pos[i];
        if (q >= p->top || !known[q]) {
            tsi_error_set(TS_ERR_ARG,
                          "%s(): the view reads storage element %lld, outside the %lld elements "
                          "the input covers (only its own elements can be read)",
                          op, (long long)q, (long long)p->top);
            ok = false;
        }
    }
    free(known);
    if (!ok) plan_free(p);
    return ok;
}

static ts_tensor *index_of(const int64_t *pos, int64_t n, ts_tensor *t) {
    return ts_tensor_i64(TS_SHAPE(n), pos, (ts_opts){.dtype = TS_I64, .device = ts_device_of(t)});
}

static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

ts_tensor *ts_as_strided_copy(ts_tensor *t, ts_shape size, const int64_t *stride,
                              int64_t storage_offset) {
    const char *op = "as_strided_copy";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    strided_plan p;
    if (!plan(op, t, size, stride, storage_offset, &p)) return NULL;
    ts_scope_begin();
    const ts_opts o = {.dtype = t->dtype, .device = ts_device_of(t)};
    ts_tensor *y;
    if (p.nout == 0) {
        y = ts_zeros(size, o);
    } else {
        ts_tensor *buf =
            ts_index_copy(ts_zeros(TS_SHAPE(p.top), o), 0, index_of(p.in_pos, p.nin, t),
                          ts_reshape(t, TS_SHAPE(p.nin)));
        y = buf ? ts_reshape(ts_take(buf, index_of(p.out_pos, p.nout, t)), size) : NULL;
    }
    plan_free(&p);
    return finish(y);
}

ts_tensor *ts_as_strided_scatter(ts_tensor *t, ts_tensor *src, ts_shape size, const int64_t *stride,
                                 int64_t storage_offset) {
    const char *op = "as_strided_scatter";
    tsi_init();
    if (!tsi_check_input(op, t, "input") || !tsi_check_input(op, src, "src")) return NULL;
    if (!tsi_shape_equal(src->shape, size)) {
        tsi_error_set(TS_ERR_SHAPE, "%s(): src has shape %s, the view %s", op,
                      tsi_shape_str(src->shape), tsi_shape_str(size));
        return NULL;
    }
    if (src->dtype != t->dtype || !tsi_device_eq(tsi_device(src), tsi_device(t))) {
        tsi_error_set(TS_ERR_ARG, "%s(): src must have input's dtype and device", op);
        return NULL;
    }
    strided_plan p;
    if (!plan(op, t, size, stride, storage_offset, &p)) return NULL;
    ts_scope_begin();
    const ts_opts o = {.dtype = t->dtype, .device = ts_device_of(t)};
    ts_tensor *y;
    if (p.nout == 0 || p.nin == 0) {
        y = ts_clone(t);
    } else {
        ts_tensor *in_idx = index_of(p.in_pos, p.nin, t);
        ts_tensor *buf =
            ts_index_copy(ts_zeros(TS_SHAPE(p.top), o), 0, in_idx, ts_reshape(t, TS_SHAPE(p.nin)));
        buf = buf ? ts_index_copy(buf, 0, index_of(p.out_pos, p.nout, t),
                                  ts_reshape(src, TS_SHAPE(p.nout)))
                  : NULL;
        y = buf ? ts_reshape(ts_take(buf, in_idx), t->shape) : NULL;
    }
    plan_free(&p);
    return finish(y);
}
