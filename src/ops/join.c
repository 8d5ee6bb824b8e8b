/* join.c — joining and splitting front ends: cat, stack, split, chunk, unbind,
 * split_with_sizes, tensor_split. */
#include <limits.h>
#include <stdio.h>

#include "amp/autocast.h"
#include "autograd/autograd.h"
#include "autograd/copy_slices.h"
#include "autograd/trace.h"
#include "ops/compose.h"
#include "ops/shape_grad.h"

/* NULL checks for a list of operands, naming the offending entry */
static bool check_list(const char *op, ts_tensor *const *ts, int n) {
    if (!ts || n <= 0) {
        tsi_error_set(TS_ERR_ARG, "%s: expected a non-empty list of tensors", op);
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (ts[i]) continue;
        char what[32];
        snprintf(what, sizeof what, "tensors[%d]", i);
        tsi_check_input(op, ts[i], what);
        return false;
    }
    return true;
}

/* Records cat/stack over the n inputs (dim d) when the graph needs it; returns out owned. */
static ts_tensor *record_join(const char *name, const char *op, tsi_backward_fn fn,
                              ts_tensor *const *ts, int n, ts_tensor *out, int d) {
    if (out && (tsi_is_float(out->dtype) || tsi_is_complex(out->dtype)) && tsi_needs_graph(ts, n)) {
        ts_node *node = tsi_record(name, op, fn, ts, n, out, NULL, 0);
        if (node) node->ip[0] = d, node->flags |= TSI_NODE_TWICE; /* narrow / select of g */
    }
    return tsi_own(tsi_trace(op, ts, n, out, (int64_t[]){d}, 1, NULL, 0));
}

/* torch.cat skips legacy 1-D empty tensors whatever their dtype */
static bool cat_skip(const ts_tensor *t) { return t->shape.ndim == 1 && t->shape.dims[0] == 0; }

static ts_tensor *cat_op(ts_tensor *const *ts, int n, int dim) {
    const char *op = "cat";
    tsi_init();
    if (!check_list(op, ts, n)) return NULL;
    ts_device dev;
    if (!tsi_same_device(op, ts, n, false, &dev)) return NULL;
    ts_dtype dt = ts[0]->dtype;
    int ref = -1;
    for (int i = 0; i < n; i++) {
        if (ts[i]->shape.ndim == 0) {
            tsi_error_set(TS_ERR_SHAPE,
                          "%s: zero-dimensional tensor (at position %d) cannot be concatenated", op,
                          i);
            return NULL;
        }
        const ts_dtype pd = ts_promote_types(dt, ts[i]->dtype);
        if (!tsi_check_promotion(op, pd, dt, ts[i]->dtype)) return NULL;
        dt = pd;
        if (ref < 0 && !cat_skip(ts[i])) ref = i;
    }
    if (ref < 0) { /* only legacy empties: the result is one too */
        if (tsi_wrap_dim(op, dim, 1) < 0) return NULL;
        tsi_log_op(op, dev);
        ts_tensor *out = tsi_new(op, TS_SHAPE(0), dt, dev);
        return record_join("CatBackward0", op, tsi_cat_backward, ts, n, out, 0);
    }
    const int nd = ts[ref]->shape.ndim;
    const int d = tsi_wrap_dim(op, dim, nd);
    if (d < 0) return NULL;
    ts_shape os = ts[ref]->shape;
    os.dims[d] = 0;
    for (int i = 0; i < n; i++) {
        const ts_tensor *t = ts[i];
        if (cat_skip(t)) continue;
        if (t->shape.ndim != nd) {
            tsi_error_set(TS_ERR_SHAPE,
                          "%s: Tensors must have same number of dimensions: got %d and %d", op, nd,
                          t->shape.ndim);
            return NULL;
        }
        for (int k = 0; k < nd; k++) {
            if (k == d || t->shape.dims[k] == os.dims[k]) continue;
            tsi_error_set(TS_ERR_SHAPE,
                          "%s: Sizes of tensors must match except in dimension %d. Expected size "
                          "%lld but got size %lld for tensor number %d in the list.",
                          op, d, (long long)os.dims[k], (long long)t->shape.dims[k], i);
            return NULL;
        }
        os.dims[d] += t->shape.dims[d];
    }
    tsi_log_op(op, dev);
    ts_tensor *out = tsi_new(op, os, dt, dev);
    if (!out) return NULL;
    /* each input is copied (and cast) into its slice of the output */
    const ts_kview ko = tsi_kview(out);
    const size_t es = tsi_dtype_size(dt);
    const ts_backend *be = tsi_be(out);
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        const ts_tensor *t = ts[i];
        if (cat_skip(t)) continue;
        int64_t len = t->shape.dims[d];
        if (tsi_numel(t->shape) > 0) {
            ts_kview dst = ko, src = tsi_kview(t);
            dst.shape[d] = len;
            dst.data += (size_t)(off * ko.strides[d]) * es;
            be->copy(be, tsi_dev_index(out), &dst, &src);
        }
        off += len;
    }
    return record_join("CatBackward0", op, tsi_cat_backward, ts, n, out, d);
}

static ts_tensor *stack_op(ts_tensor *const *ts, int n, int dim) {
    const char *op = "stack";
    tsi_init();
    if (!check_list(op, ts, n)) return NULL;
    ts_device dev;
    if (!tsi_same_device(op, ts, n, false, &dev)) return NULL;
    const ts_shape s = ts[0]->shape;
    ts_dtype dt = ts[0]->dtype;
    for (int i = 1; i < n; i++) {
        if (!tsi_shape_equal(ts[i]->shape, s)) {
            const char *s0 = tsi_shape_str(s);
            tsi_error_set(TS_ERR_SHAPE,
                          "%s: stack expects each tensor to be equal size, but got %s at entry 0 "
                          "and %s at entry %d",
                          op, s0, tsi_shape_str(ts[i]->shape), i);
            return NULL;
        }
        const ts_dtype pd = ts_promote_types(dt, ts[i]->dtype);
        if (!tsi_check_promotion(op, pd, dt, ts[i]->dtype)) return NULL;
        dt = pd;
    }
    const int d = tsi_wrap_dim(op, dim, s.ndim + 1);
    if (d < 0) return NULL;
    if (s.ndim + 1 > TS_MAX_DIMS) {
        tsi_error_set(TS_ERR_SHAPE, "%s: result would have %d dims (at most %d)", op, s.ndim + 1,
                      TS_MAX_DIMS);
        return NULL;
    }
    ts_shape os = {.ndim = s.ndim + 1};
    for (int k = 0, j = 0; k < os.ndim; k++) os.dims[k] = k == d ? n : s.dims[j++];
    tsi_log_op(op, dev);
    ts_tensor *out = tsi_new(op, os, dt, dev);
    if (!out) return NULL;
    const ts_kview ko = tsi_kview(out);
    const size_t es = tsi_dtype_size(dt);
    const ts_backend *be = tsi_be(out);
    if (tsi_numel(s) > 0) {
        /* entry i goes to out.select(d, i): drop dim d from the output's view */
        ts_kview dst = ko;
        dst.ndim = s.ndim;
        for (int k = 0, j = 0; k < os.ndim; k++) {
            if (k == d) continue;
            dst.shape[j] = ko.shape[k];
            dst.strides[j] = ko.strides[k];
            j++;
        }
        for (int i = 0; i < n; i++) {
            ts_kview di = dst, src = tsi_kview(ts[i]);
            di.data = ko.data + (size_t)(i * ko.strides[d]) * es;
            be->copy(be, tsi_dev_index(out), &di, &src);
        }
    }
    return record_join("StackBackward0", op, tsi_stack_backward, ts, n, out, d);
}

/* autocast's promote policy: the inputs in the widest of their floating dtypes */
ts_tensor *ts_cat(ts_tensor *const *ts, int n, int dim) {
    tsi_ac_frame ac;
    tsi_autocast_enter_list(&ac, "cat", &ts, n);
    return tsi_autocast_exit(&ac, cat_op(ts, n, dim));
}

ts_tensor *ts_stack(ts_tensor *const *ts, int n, int dim) {
    tsi_ac_frame ac;
    tsi_autocast_enter_list(&ac, "stack", &ts, n);
    return tsi_autocast_exit(&ac, stack_op(ts, n, dim));
}

/* Writes up to max_out narrow views of `len` elements each (the last possibly shorter) and
 * returns how many pieces there are. */
static int emit_pieces(const char *op, ts_tensor *t, int d, int64_t count, int64_t len,
                       ts_tensor **out, int max_out) {
    if (count > INT_MAX) {
        tsi_error_set(TS_ERR_ARG, "%s: %lld pieces are too many", op, (long long)count);
        return -1;
    }
    const int64_t size = t->shape.dims[d];
    for (int64_t i = 0; i < count && i < max_out; i++) {
        int64_t start = i * len < size ? i * len : size;
        int64_t l = size - start < len ? size - start : len;
        out[i] = ts_narrow(t, d, start, l);
        if (!out[i]) return -1;
        tsi_view_mark_multi(out[i], "Split", (int)i); /* PyTorch's name for split and chunk */
    }
    /* one node for all the pieces (PyTorch's SplitBackward0) rather than a narrow per piece: its
     * backward joins the pieces' gradients in one pass */
    if (max_out > 0 && (tsi_is_float(t->dtype) || tsi_is_complex(t->dtype)) &&
        tsi_needs_graph(&t, 1)) {
        ts_node *n = tsi_node_new("SplitBackward0", op, tsi_split_backward, &t, 1, (int)count, 0);
        if (!n) return -1;
        n->ip[0] = d;
        n->ip[1] = len;
        n->flags |= TSI_NODE_TWICE; /* cat of the pieces' gradients */
        for (int64_t i = 0; i < count && i < max_out; i++) tsi_node_set_output(n, out[i], (int)i);
        tsi_node_release(n);
    }
    return (int)count;
}

static bool check_split_args(const char *op, ts_tensor *t, ts_tensor **out, int max_out) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return false;
    if (max_out < 0 || (max_out > 0 && !out)) {
        tsi_error_set(TS_ERR_ARG, "%s: out is NULL or max_out (%d) is negative", op, max_out);
        return false;
    }
    if (t->shape.ndim == 0) {
        tsi_error_set(TS_ERR_SHAPE, "%s: %s expects at least a 1-dimensional tensor", op, op);
        return false;
    }
    return true;
}

int ts_split(ts_tensor *t, int64_t split_size, int dim, ts_tensor **out, int max_out) {
    const char *op = "split";
    if (!check_split_args(op, t, out, max_out)) return -1;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return -1;
    const int64_t size = t->shape.dims[d];
    if (split_size < 0) {
        tsi_error_set(TS_ERR_ARG,
                      "%s: split expects split_size be non-negative, but got split_size=%lld", op,
                      (long long)split_size);
        return -1;
    }
    if (split_size == 0 && size != 0) {
        tsi_error_set(TS_ERR_ARG,
                      "%s: split_size can only be 0 if dimension size is 0, but got dimension "
                      "size of %lld",
                      op, (long long)size);
        return -1;
    }
    int64_t count = split_size == 0 ? 1 : (size + split_size - 1) / split_size;
    if (count < 1) count = 1;
    return emit_pieces(op, t, d, count, split_size, out, max_out);
}

int ts_unbind(ts_tensor *t, int dim, ts_tensor **out, int max_out) {
    const char *op = "unbind";
    if (!check_split_args(op, t, out, max_out)) return -1;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return -1;
    const int64_t n = t->shape.dims[d];
    if (n > INT_MAX) {
        tsi_error_set(TS_ERR_ARG, "%s: %lld pieces are too many", op, (long long)n);
        return -1;
    }
    for (int64_t i = 0; i < n && i < max_out; i++) {
        out[i] = ts_select(t, d, i);
        if (!out[i]) return -1; /* as ts_split: the pieces written belong to the caller */
        tsi_view_mark_multi(out[i], "Unbind", (int)i);
    }
    return (int)n;
}

int ts_chunk(ts_tensor *t, int chunks, int dim, ts_tensor **out, int max_out) {
    const char *op = "chunk";
    if (!check_split_args(op, t, out, max_out)) return -1;
    if (chunks <= 0) {
        tsi_error_set(TS_ERR_ARG, "%s: chunk expects `chunks` to be greater than 0, got: %d", op,
                      chunks);
        return -1;
    }
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return -1;
    const int64_t size = t->shape.dims[d];
    const int64_t len = (size + chunks - 1) / chunks;
    /* torch.chunk: an empty dim still gives `chunks` (empty) pieces; otherwise pieces of ceil(n /
     * chunks), which may be fewer than asked for */
    int64_t count = len == 0 ? chunks : (size + len - 1) / len;
    return emit_pieces(op, t, d, count, len, out, max_out);
}

/* ------------------------------------------------------------------ splits */
static int split_check(const char *op, ts_tensor *t, int dim, ts_tensor **out, int max_out) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return -1;
    if (max_out < 0 || (max_out > 0 && !out))
        return tsi_error_set(TS_ERR_ARG, "%s: out is NULL or max_out (%d) is negative", op,
                             max_out),
               -1;
    if (t->shape.ndim == 0)
        return tsi_error_set(
                   TS_ERR_SHAPE,
                   "%s: expected at least a 1-dimensional tensor, but got a tensor with 0 "
                   "dims",
                   op),
               -1;
    return tsi_wrap_dim(op, dim, t->shape.ndim);
}

/* the pieces [start[i], start[i] + len[i]) along d; multi: PyTorch's name of the op when its
 * pieces are the outputs of one multi-output view op (not modifiable in place when recorded),
 * NULL when they are separate slices (tensor_split) */
static int emit(ts_tensor *t, int d, const int64_t *start, const int64_t *len, int64_t count,
                ts_tensor **out, int max_out, const char *multi) {
    if (count > 1 << 20)
        return tsi_error_set(TS_ERR_ARG, "split: %lld pieces are too many", (long long)count), -1;
    for (int64_t i = 0; i < count && i < max_out; i++) {
        out[i] = ts_narrow(t, d, start[i], len[i]);
        if (!out[i]) return -1; /* as ts_split: the pieces written belong to the caller */
        if (multi) tsi_view_mark_multi(out[i], multi, (int)i);
    }
    return (int)count;
}

int ts_split_with_sizes(ts_tensor *t, const int64_t *sizes, int n, int dim, ts_tensor **out,
                        int max_out) {
    const char *op = "split_with_sizes";
    const int d = split_check(op, t, dim, out, max_out);
    if (d < 0) return -1;
    if (n < 0 || (n > 0 && !sizes))
        return tsi_error_set(TS_ERR_ARG, "%s: split_sizes is NULL or n (%d) is negative", op, n),
               -1;
    const int64_t size = t->shape.dims[d];
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: split_sizes must be non-negative, but got split_sizes[%d] = "
                                 "%lld",
                                 op, i, (long long)sizes[i]),
                   -1;
        sum += sizes[i];
    }
    if (sum != size)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: split_with_sizes expects split_sizes to sum exactly to %lld "
                             "(input tensor's size at dimension %d), but got a sum of %lld",
                             op, (long long)size, d, (long long)sum),
               -1;
    int64_t *start = host_alloc(op, n, sizeof *start);
    if (!start) return -1;
    if (n > 0) start[0] = 0;
    for (int i = 1; i < n; i++) start[i] = start[i - 1] + sizes[i - 1];
    const int r = emit(t, d, start, sizes, n, out, max_out, "SplitWithSizes");
    free(start);
    return r;
}

int ts_tensor_split_indices(ts_tensor *t, const int64_t *indices, int n, int dim, ts_tensor **out,
                            int max_out) {
    const char *op = "tensor_split";
    const int d = split_check(op, t, dim, out, max_out);
    if (d < 0) return -1;
    if (n < 0 || (n > 0 && !indices))
        return tsi_error_set(TS_ERR_ARG, "%s: indices is NULL or n (%d) is negative", op, n), -1;
    const int64_t size = t->shape.dims[d];
    int64_t *start = host_alloc(op, 2 * ((int64_t)n + 1), sizeof *start), *len = start + n + 1;
    if (!start) return -1;
    for (int i = 0; i <= n; i++) {
        int64_t a = i == 0 ? 0 : indices[i - 1], b = i == n ? size : indices[i];
        a = a < 0 ? (a + size < 0 ? 0 : a + size) : (a > size ? size : a);
        b = b < 0 ? (b + size < 0 ? 0 : b + size) : (b > size ? size : b);
        start[i] = a, len[i] = b > a ? b - a : 0;
    }
    const int r = emit(t, d, start, len, (int64_t)n + 1, out, max_out, NULL);
    free(start);
    return r;
}

int ts_tensor_split_sections(ts_tensor *t, int64_t sections, int dim, ts_tensor **out,
                             int max_out) {
    const char *op = "tensor_split";
    const int d = split_check(op, t, dim, out, max_out);
    if (d < 0) return -1;
    if (sections <= 0 || sections > 1 << 20)
        return tsi_error_set(TS_ERR_ARG, "%s: number of sections must be larger than 0, got %lld",
                             op, (long long)sections),
               -1;
    const int64_t size = t->shape.dims[d], base = size / sections, extra = size % sections;
    int64_t *start = host_alloc(op, 2 * sections, sizeof *start), *len = start + sections;
    if (!start) return -1;
    for (int64_t i = 0, s = 0; i < sections; i++) {
        len[i] = base + (i < extra ? 1 : 0);
        start[i] = s, s += len[i];
    }
    const int r = emit(t, d, start, len, sections, out, max_out, NULL);
    free(start);
    return r;
}
