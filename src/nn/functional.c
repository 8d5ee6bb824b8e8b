/* functional.c — linear, dropout and embedding, composed from differentiable primitives, and the
 * helpers the norms and losses share. */
#include <stdlib.h>

#include "amp/autocast.h"
#include "autograd/trace.h"
#include "core/capture.h"
#include "nn/functional_internal.h"

/* ------------------------------------------------------------------ shared helpers */
bool tsi_nn_index_scan(const char *op, ts_tensor *idx, int64_t size, bool has_ignore,
                       int64_t ignore, int64_t *n_ignored, int64_t *bad) {
    int64_t n = tsi_numel(idx->shape), small[256], ign = 0;
    *bad = 0;
    if (n_ignored) *n_ignored = 0;
    /* a meta index has no values to check (PyTorch's meta kernels check none) */
    if (n == 0 || tsi_device(idx).type == TS_META) return true;
    /* read before and all within [0, size): none bad, none ignored unless ignore is a class */
    if ((!has_ignore || ignore < 0 || ignore >= size) && tsi_index_range_known(idx, size))
        return true;
    ts_tensor *c = tsi_cast(op, idx, TS_I64);
    int64_t *v = n <= 256 ? small : malloc((size_t)n * sizeof *v);
    if (!c || !v) {
        if (c && !v)
            tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %lld indices", op, (long long)n);
        ts_release(c);
        if (v != small) free(v);
        return false;
    }
    bool ok = ts_copy_to_host(c, v, (size_t)n * sizeof *v) == TS_OK;
    ts_release(c);
    for (int64_t i = 0; ok && i < n; i++) {
        if (has_ignore && v[i] == ignore) {
            ign++;
        } else if (v[i] < 0 || v[i] >= size) {
            *bad = v[i];
            ok = false;
        }
    }
    if (n_ignored) *n_ignored = ign;
    if (v != small) free(v);
    if (ok && ign == 0) tsi_index_range_note(idx, size);
    return ok;
}

ts_tensor *tsi_loss_reduce(ts_tensor *loss, ts_reduction r) {
    switch (r) {
    case TS_REDUCTION_SUM:
        return ts_sum(loss);
    case TS_REDUCTION_MEAN:
        return ts_mean(loss);
    default:
        return loss;
    }
}

bool tsi_check_reduction(const char *op, ts_reduction r) {
    if (r == TS_REDUCTION_MEAN || r == TS_REDUCTION_SUM || r == TS_REDUCTION_NONE) return true;
    tsi_error_set(TS_ERR_ARG, "%s: %d is not a valid value for reduction (mean, sum or none)", op,
                  (int)r);
    return false;
}

static bool can_write_into(ts_tensor *a, ts_tensor *b) {
    if (!a || !b || a->dtype != b->dtype || b->shape.ndim > a->shape.ndim) return false;
    ts_tensor *both[2] = {a, b};
    if (tsi_needs_graph(both, 2)) return false;
    for (int i = 1; i <= b->shape.ndim; i++) {
        int64_t db = b->shape.dims[b->shape.ndim - i];
        if (db != 1 && db != a->shape.dims[a->shape.ndim - i]) return false;
    }
    return true;
}

ts_tensor *tsi_nn_mul_into(ts_tensor *a, ts_tensor *b) {
    return can_write_into(a, b) ? ts_mul_(a, b) : ts_mul(a, b);
}

ts_tensor *tsi_nn_add_into(ts_tensor *a, ts_tensor *b) {
    return can_write_into(a, b) ? ts_add_(a, b) : ts_add(a, b);
}

/* ------------------------------------------------------------------ linear */
static bool linear_check(const char *op, ts_tensor *x, ts_tensor *w, ts_tensor *b) {
    if (!tsi_check_input(op, x, "input") || !tsi_check_input(op, w, "weight")) return false;
    ts_tensor *all[3] = {x, w, b};
    ts_device dev;
    if (!tsi_same_device(op, all, 3, false, &dev)) return false;
    /* a 1-D weight [in_features] is PyTorch's x @ w (no out_features dim), its bias 0-d */
    const int wd = w->shape.ndim;
    if (wd != 2 && wd != 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: weight must be 2-D [out_features, in_features] or 1-D "
                             "[in_features], got %s",
                             op, tsi_desc(w)),
               false;
    const int64_t in_f = w->shape.dims[wd - 1];
    if (x->shape.ndim == 0 || x->shape.dims[x->shape.ndim - 1] != in_f)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: input %s does not fit weight %s (expected input [..., %lld])", op,
                             tsi_shape_str(x->shape), tsi_shape_str(w->shape), (long long)in_f),
               false;
    if (b && wd == 1 && b->shape.ndim != 0)
        return tsi_error_set(TS_ERR_SHAPE, "%s: bias %s does not fit a 1-D weight (expected 0-d)",
                             op, tsi_shape_str(b->shape)),
               false;
    if (b && wd == 2 && (b->shape.ndim != 1 || b->shape.dims[0] != w->shape.dims[0]))
        return tsi_error_set(TS_ERR_SHAPE, "%s: bias %s does not fit weight %s (expected [%lld])",
                             op, tsi_shape_str(b->shape), tsi_shape_str(w->shape),
                             (long long)w->shape.dims[0]),
               false;
    if (x->dtype != w->dtype || (b && b->dtype != x->dtype))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected input, weight and bias of one dtype, got %s, %s and %s",
                             op, ts_dtype_name(x->dtype), ts_dtype_name(w->dtype),
                             b ? ts_dtype_name(b->dtype) : "(none)"),
               false;
    return true;
}

static ts_tensor *keep_and_end(ts_tensor *y) {
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

/* x2 [rows, in] or 1-D/2-D x: product and bias in one backend call where it has one
 * (linear_fused.c, PyTorch's addmm); else the bias goes in place into the fresh product, before
 * any view of it: one output buffer (the product's backward needs only x and w, so autograd
 * allows it). NULL x2 (a failed reshape, error already set) gives NULL. */
static ts_tensor *linear_rows(ts_tensor *x2, ts_tensor *w, ts_tensor *b) {
    if (!x2) return NULL;
    if (tsi_linear_fused_takes(x2, w, b)) return tsi_linear_fused(x2, w, b);
    ts_tensor *wt = ts_t(w);
    ts_tensor *y = x2->shape.ndim == 2 ? ts_mm(x2, wt) : ts_matmul(x2, wt);
    return b ? ts_add_(y, b) : y;
}

static ts_tensor *linear_op(ts_tensor *x, ts_tensor *w, ts_tensor *b) {
    const char *op = "linear";
    tsi_init();
    if (!linear_check(op, x, w, b)) return NULL;
    if (w->shape.ndim == 1) { /* x @ w (+ b): the last dim contracted away */
        ts_scope_begin();
        ts_tensor *y = ts_matmul(x, w);
        return keep_and_end(b ? ts_add(y, b) : y);
    }
    const int nd = x->shape.ndim;
    const int64_t in = w->shape.dims[1], out_f = w->shape.dims[0];
    ts_scope_begin();
    ts_tensor *y;
    if (nd <= 2) {
        y = linear_rows(x, w, b);
    } else {
        /* fold the leading dims into rows: one GEMM instead of a batch of small ones */
        int64_t rows = 1;
        for (int i = 0; i < nd - 1; i++) rows *= x->shape.dims[i];
        ts_tensor *y2 = linear_rows(ts_reshape(x, TS_SHAPE(rows, in)), w, b);
        ts_shape os = x->shape;
        os.dims[nd - 1] = out_f;
        y = y2 ? ts_view(y2, os) : NULL;
    }
    return keep_and_end(y);
}

ts_tensor *ts_linear(ts_tensor *x, ts_tensor *w, ts_tensor *b) {
    ts_tensor *const ins[3] = {x, w, b};
    tsi_ac_frame ac; /* autocast: lower precision */
    TSI_AUTOCAST_ENTER(&ac, "linear", &x, &w, &b);
    ts_tensor *y = tsi_autocast_exit(&ac, linear_op(x, w, b));
    return tsi_trace("linear", ins, 3, y, NULL, 0, NULL, 0);
}

/* ------------------------------------------------------------------ dropout */
ts_tensor *ts_dropout(ts_tensor *x, double p, bool training) {
    const char *op = "dropout";
    tsi_init();
    if (!tsi_check_input(op, x, "input")) return NULL;
    if (!(p >= 0 && p <= 1))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: dropout probability has to be between 0 and 1, but got %g", op,
                             p),
               NULL;
    if (tsi_is_quantized(x->dtype) && training && p > 0)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: a quantized input is passed through in eval mode only "
                             "(training with p %g: take ts_dequantize first; got %s)",
                             op, p, tsi_desc(x)),
               NULL;
    if (!tsi_is_float(x->dtype) && !tsi_is_quantized(x->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating point input, got %s", op,
                             tsi_desc(x)),
               NULL;
    /* PyTorch returns the input itself when nothing is dropped */
    if (!training || p == 0 || tsi_numel(x->shape) == 0) return tsi_own(ts_retain(x));
    /* the trace records the dropout that runs (random: it has no inference form) */
    ts_scope_begin();
    ts_tensor *y;
    if (p == 1) {
        y = ts_mul_scalar(x, 0.0); /* keeps NaN and the graph, as PyTorch's input * 0 */
    } else {
        ts_tensor *noise = ts_bernoulli_p(x, 1 - p);
        ts_div_scalar_(noise, 1 - p);
        y = ts_mul(x, noise);
    }
    y = ts_keep(y);
    ts_scope_end();
    return tsi_trace(op, &x, 1, y, NULL, 0, &p, 1);
}

ts_tensor *ts_dropout_(ts_tensor *x, double p, bool training) {
    ts_scope_begin();
    ts_tensor *y = ts_dropout(x, p, training);
    const bool ok = y && (y == x || ts_copy_(x, y) != NULL);
    ts_scope_end();
    return ok ? tsi_own(ts_retain(x)) : NULL;
}

/* ------------------------------------------------------------------ embedding */
/* padding_idx: a row of weight whose gradient stays zero, or -1 */
static ts_tensor *embedding_op(ts_tensor *weight, ts_tensor *indices, int64_t padding_idx) {
    const char *op = "embedding";
    tsi_init();
    if (!tsi_check_input(op, weight, "weight") || !tsi_check_input(op, indices, "indices"))
        return NULL;
    ts_tensor *all[2] = {weight, indices};
    ts_device dev;
    if (!tsi_same_device(op, all, 2, false, &dev)) return NULL;
    if (weight->shape.ndim != 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: weight must be 2-D [num_embeddings, dim], got %s",
                             op, tsi_desc(weight)),
               NULL;
    if (indices->dtype != TS_I64 && indices->dtype != TS_I32)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected indices of dtype int64 or int32, but got %s", op,
                             tsi_desc(indices)),
               NULL;
    ts_shape os = indices->shape;
    if (os.ndim + 1 > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_SHAPE, "%s: indices %s would give more than %d dims", op,
                             tsi_shape_str(os), TS_MAX_DIMS),
               NULL;
    int64_t bad;
    /* a captured step reads nothing on the host: index_select's rule (docs/CAPTURE.md) */
    if (!tsi_capturing_on(tsi_device(indices)) &&
        !tsi_nn_index_scan(op, indices, weight->shape.dims[0], false, 0, NULL, &bad)) {
        tsi_error_set(TS_ERR_ARG,
                      "%s: index %lld is out of range for weight %s (index out of "
                      "range in self)",
                      op, (long long)bad, tsi_shape_str(weight->shape));
        return NULL;
    }
    if (padding_idx < -1 || padding_idx >= weight->shape.dims[0])
        return tsi_error_set(TS_ERR_ARG,
                             "%s: padding_idx must be within num_embeddings (%lld rows), or -1 for "
                             "none, got %lld",
                             op, (long long)weight->shape.dims[0], (long long)padding_idx),
               NULL;
    os.dims[os.ndim++] = weight->shape.dims[1];
    ts_scope_begin();
    ts_tensor *flat = ts_reshape(indices, TS_SHAPE(tsi_numel(indices->shape)));
    ts_tensor *rows = ts_index_select(weight, 0, flat);
    /* the padding row's uses pass no gradient (PyTorch's embedding_backward): their values come
     * through a detached copy of the rows, the rest through the rows themselves */
    if (rows && padding_idx >= 0 && tsi_needs_graph(&weight, 1)) {
        ts_tensor *pad = ts_unsqueeze(ts_eq_scalar(flat, (double)padding_idx), 1);
        rows = ts_where(pad, ts_detach(rows), rows);
    }
    ts_tensor *y = ts_keep(rows ? ts_view(rows, os) : NULL);
    ts_scope_end();
    return tsi_trace(op, all, 2, y, NULL, 0, NULL, 0);
}

ts_tensor *ts_embedding(ts_tensor *weight, ts_tensor *indices) {
    return embedding_op(weight, indices, -1);
}

ts_tensor *ts_embedding_padded(ts_tensor *weight, ts_tensor *indices, int64_t padding_idx) {
    return embedding_op(weight, indices, padding_idx);
}
