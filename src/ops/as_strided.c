/* as_strided.c — torch.as_strided: a view of a tensor's storage with a size, strides and storage
 * offset of the caller's (writes through it reach the storage), checked against the storage's
 * extent; and its gradient, PyTorch's as_strided_backward: the output's gradient summed into a
 * buffer the size of the storage span both geometries touch (elements the view reads more than
 * once get each read's share), then read at the input's own elements — divided by how many of them
 * share a storage element where the input overlaps itself (an expanded tensor). */
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "autograd/copy_slices.h"
#include "autograd/trace.h"

/* the two geometries over the storage, for the backward */
typedef struct strided_geom {
    ts_shape in_shape, out_shape;
    int64_t in_strides[TS_MAX_DIMS], out_strides[TS_MAX_DIMS];
    int64_t in_offset, out_offset;
} strided_geom;

/* storage position of every element of (s, strides, offset), row-major, into pos[numel(s)];
 * returns the largest (-1 when there is none) */
static int64_t positions(ts_shape s, const int64_t *strides, int64_t offset, int64_t *pos) {
    int64_t n = 1, idx[TS_MAX_DIMS] = {0}, top = -1;
    for (int d = 0; d < s.ndim; d++) n *= s.dims[d];
    for (int64_t e = 0; e < n; e++) {
        int64_t p = offset;
        for (int d = 0; d < s.ndim; d++) p += idx[d] * strides[d];
        pos[e] = p;
        top = p > top ? p : top;
        for (int d = s.ndim - 1; d >= 0 && ++idx[d] == s.dims[d]; d--) idx[d] = 0;
    }
    return top;
}

static int64_t numel_of(ts_shape s) {
    int64_t n = 1;
    for (int d = 0; d < s.ndim; d++) n *= s.dims[d];
    return n;
}

static void as_strided_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const strided_geom *g = n->ctx;
    if (!go[0] || !g) return;
    const int64_t ni = numel_of(g->in_shape), no = numel_of(g->out_shape);
    const ts_opts o = {.dtype = go[0]->dtype, .device = tsi_device(go[0])};
    const ts_opts oi = {.dtype = TS_I64, .device = tsi_device(go[0])};
    int64_t *ip = malloc((size_t)(ni ? ni : 1) * sizeof *ip);
    int64_t *op = malloc((size_t)(no ? no : 1) * sizeof *op);
    if (!ip || !op) {
        free(ip), free(op);
        tsi_error_set(TS_ERR_OOM, "as_strided: out of host memory for the backward's positions");
        return;
    }
    int64_t top = positions(g->in_shape, g->in_strides, g->in_offset, ip);
    const int64_t otop = positions(g->out_shape, g->out_strides, g->out_offset, op);
    top = (otop > top ? otop : top) + 1;
    ts_tensor *in_pos = ts_tensor_i64(TS_SHAPE(ni), ip, oi);
    ts_tensor *out_pos = ts_tensor_i64(TS_SHAPE(no), op, oi);
    /* does the input hold some storage element twice? */
    bool overlap = false;
    for (int d = 0; d < g->in_shape.ndim; d++)
        overlap |= g->in_shape.dims[d] > 1 && g->in_strides[d] == 0;
    if (!overlap && ni > 1) {
        char *seen = calloc((size_t)top, 1);
        for (int64_t e = 0; seen && e < ni && !overlap; e++) overlap = seen[ip[e]]++ != 0;
        free(seen);
    }
    free(ip), free(op);
    ts_tensor *buf = ts_index_add(ts_zeros(TS_SHAPE(top), o), 0, out_pos,
                                  ts_reshape(ts_contiguous(go[0]), TS_SHAPE(no)), 1.0);
    ts_tensor *gin = ts_take(buf, in_pos);
    if (overlap) {
        ts_tensor *count =
            ts_index_add(ts_zeros(TS_SHAPE(top), o), 0, in_pos, ts_ones(TS_SHAPE(ni), o), 1.0);
        gin = ts_div(gin, ts_take(count, in_pos));
    }
    gi[0] = ts_reshape(gin, g->in_shape);
}

ts_tensor *ts_as_strided(ts_tensor *t, ts_shape size, const int64_t *stride,
                         int64_t storage_offset) {
    const char *op = "as_strided";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (size.ndim < 0 || size.ndim > TS_MAX_DIMS || (size.ndim > 0 && !stride))
        return tsi_error_set(TS_ERR_ARG, "%s: size of %d dims needs a stride of as many", op,
                             size.ndim),
               NULL;
    const int64_t off = storage_offset < 0 ? t->offset : storage_offset;
    int64_t last = off; /* the last element the view reaches */
    bool empty = false;
    for (int d = 0; d < size.ndim; d++) {
        if (size.dims[d] < 0 || stride[d] < 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: negative sizes or strides are not supported, got size %lld "
                                 "and stride %lld at dim %d",
                                 op, (long long)size.dims[d], (long long)stride[d], d),
                   NULL;
        empty |= size.dims[d] == 0;
        last += size.dims[d] > 0 ? (size.dims[d] - 1) * stride[d] : 0;
    }
    const int64_t elems = (int64_t)(t->storage->nbytes / tsi_dtype_size(t->dtype));
    if (!empty && last >= elems)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: size %s, stride and storage offset %lld need a storage of %lld "
                             "elements, the input's holds %lld",
                             op, tsi_shape_str(size), (long long)off, (long long)(last + 1),
                             (long long)elems),
               NULL;
    ts_tensor *out = tsi_view_of(t, size, stride, off);
    if (!out) return NULL;
    tsi_view_attach(t, out); /* in-place writes through it reach t's history (copy_slices.h) */
    ts_node *n = tsi_record("AsStridedBackward0", op, as_strided_backward, &t, 1, out, NULL, 0);
    if (n) {
        strided_geom *g = calloc(1, sizeof *g);
        if (!g) {
            ts_release(out);
            return tsi_error_set(TS_ERR_OOM, "%s: out of memory for the gradient's record", op),
                   NULL;
        }
        g->in_shape = t->shape, g->out_shape = size;
        memcpy(g->in_strides, t->strides, sizeof g->in_strides);
        for (int d = 0; d < size.ndim; d++) g->out_strides[d] = stride[d];
        g->in_offset = t->offset, g->out_offset = off;
        n->ctx = g, n->ctx_free = free;
        n->flags |= TSI_NODE_TWICE; /* index_add and take of g: linear */
    }
    return tsi_own(tsi_trace(op, &t, 1, out, NULL, 0, NULL, 0));
}
