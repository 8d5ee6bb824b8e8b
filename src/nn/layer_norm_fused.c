/* layer_norm_fused.c — layer_norm through the backend's fused kernels (PyTorch's
 * native_layer_norm): one pass writes the output and each row's mean and rstd, and the backward
 * node (NativeLayerNormBackward0) keeps only the input, the weight and those two per-row values,
 * where the composition keeps several tensors of the input's size. */
#include "nn/norm_rows.h"

static const char *OP = "layer_norm";

/* rows = the product of the leading dims, cols = that of the last `nnorm` */
void tsi_norm_rows_cols(const ts_tensor *x, int nnorm, int64_t *rows, int64_t *cols) {
    int64_t r = 1, c = 1;
    for (int d = 0; d < x->shape.ndim; d++) {
        if (d < x->shape.ndim - nnorm)
            r *= x->shape.dims[d];
        else
            c *= x->shape.dims[d];
    }
    *rows = r, *cols = c;
}

/* The kernels' view of a contiguous tensor as [d0, d1] (d0 = 0: one dim of d1); t NULL: absent. */
void tsi_norm_view2(ts_kview *v, const ts_tensor *t, int64_t d0, int64_t d1) {
    *v = (ts_kview){.dtype = t ? t->dtype : TS_F32};
    if (!t) return;
    v->data = t->storage->data + t->offset * (int64_t)tsi_dtype_size(t->dtype);
    for (int i = 0; i < TS_MAX_DIMS; i++) v->shape[i] = 1;
    if (d0) {
        v->ndim = 2;
        v->shape[0] = d0, v->shape[1] = d1;
        v->strides[0] = d1, v->strides[1] = 1;
    } else {
        v->ndim = 1;
        v->shape[0] = d1, v->strides[0] = 1;
    }
}

static ts_layer_norm_args base_args(ts_tensor *x, int nnorm, ts_tensor *w, ts_tensor *b) {
    ts_layer_norm_args a = {0};
    tsi_norm_rows_cols(x, nnorm, &a.rows, &a.cols);
    tsi_norm_view2(&a.x, x, a.rows, a.cols);
    tsi_norm_view2(&a.weight, w, 0, a.cols);
    tsi_norm_view2(&a.bias, b, 0, a.cols);
    return a;
}

bool tsi_norm_rows_take(ts_tensor *x, int nnorm, ts_dtype dt, bool rms) {
    const ts_backend *be = tsi_be(x);
    if (!be->layer_norm_supports || !be->layer_norm_workspace || !be->layer_norm_forward ||
        !be->layer_norm_backward)
        return false;
    ts_layer_norm_args a = {.rms = rms};
    tsi_norm_rows_cols(x, nnorm, &a.rows, &a.cols);
    if (a.rows < 1 || a.cols < 1) return false;
    a.x.dtype = dt;
    return be->layer_norm_supports(be, tsi_dev_index(x), &a);
}

bool tsi_layer_norm_fused_takes(ts_tensor *x, int nnorm, ts_dtype dt) {
    return tsi_norm_rows_take(x, nnorm, dt, false);
}

ts_dtype tsi_norm_stat_dtype(ts_dtype dt) { return dt == TS_F64 ? TS_F64 : TS_F32; }

void tsi_norm_rows_backward(const char *op, ts_node *n, ts_tensor *x, ts_tensor *g,
                            ts_layer_norm_args *a, ts_tensor **gi) {
    tsi_norm_grads r;
    if (!tsi_norm_grads_begin(op, n, x, g, &r)) return;
    tsi_norm_view2(&a->dy, r.dy, a->rows, a->cols);
    tsi_norm_view2(&a->dx, r.g[0], a->rows, a->cols);
    tsi_norm_view2(&a->dweight, r.g[1], 0, a->cols);
    tsi_norm_view2(&a->dbias, r.g[2], 0, a->cols);
    const ts_backend *be = tsi_be(x);
    const int idx = tsi_dev_index(x);
    /* the partial sums' workspace (none for 0 bytes); TS_ERR_OOM when it cannot be had */
    const size_t bytes = be->layer_norm_workspace(be, idx, a);
    ts_tensor *ws = bytes ? tsi_new(op, TS_SHAPE((int64_t)bytes), TS_U8, tsi_device(x)) : NULL;
    const bool ok = !bytes || ws;
    if (ok) be->layer_norm_backward(be, idx, a, ws ? ws->storage->data + ws->offset : NULL);
    ts_release(ws);
    tsi_norm_grads_end(&r, ok, gi);
}

/* The backward as public ops over statistics recomputed from x (the saved ones carry no history),
 * so that under create_graph it records the gradients' graph: with xh = (x - mean) rstd and
 * gh = g w, dx = rstd (gh - mean(gh) - xh mean(gh xh)), dw = sum of g xh, db = sum of g. g has y's
 * dtype, which is x's (the engine casts every gradient to its tensor's dtype). */
static void layer_norm_backward_composite(ts_node *n, ts_tensor *x, ts_tensor *w, ts_tensor *g,
                                          ts_tensor **gi) {
    const int nnorm = (int)n->ip[0], nd = x->shape.ndim;
    ts_dims dims = {.n = nnorm};
    for (int i = 0; i < nnorm; i++) dims.d[i] = nd - nnorm + i;
    ts_tensor *xc = ts_sub(x, ts_mean_dims(x, dims, true));
    ts_tensor *rstd = ts_rsqrt(ts_add_scalar(ts_mean_dims(ts_square(xc), dims, true), n->p[0]));
    ts_tensor *xh = ts_mul(xc, rstd);
    if (tsi_node_needs(n, 0)) {
        ts_tensor *gh = w ? ts_mul(g, w) : g;
        ts_tensor *inner = ts_sub(ts_sub(gh, ts_mean_dims(gh, dims, true)),
                                  ts_mul(xh, ts_mean_dims(ts_mul(gh, xh), dims, true)));
        gi[0] = ts_mul(rstd, inner);
    }
    if (tsi_node_needs(n, 1)) gi[1] = tsi_sum_to(ts_mul(g, xh), n->in_shape[1]);
    if (tsi_node_needs(n, 2)) gi[2] = tsi_sum_to(g, n->in_shape[2]);
}

static void layer_norm_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *x = tsi_node_saved(n, 0),
              *w = tsi_node_has_saved(n, 1) ? tsi_node_saved(n, 1) : NULL;
    if (tsi_create_graph_active()) {
        if (x && (!tsi_node_has_saved(n, 1) || w) && go[0])
            layer_norm_backward_composite(n, x, w, go[0], gi);
        return;
    }
    ts_tensor *mean = tsi_node_saved(n, 2), *rstd = tsi_node_saved(n, 3);
    if (!x || (tsi_node_has_saved(n, 1) && !w) || !mean || !rstd || !go[0]) return;
    ts_layer_norm_args a = base_args(x, (int)n->ip[0], w, NULL);
    tsi_norm_view2(&a.mean, mean, 0, a.rows);
    tsi_norm_view2(&a.rstd, rstd, 0, a.rows);
    tsi_norm_rows_backward(OP, n, x, go[0], &a, gi);
}

void tsi_layer_norm_fused_record(ts_tensor *const *ins, ts_tensor *x, ts_tensor *w, ts_tensor *mean,
                                 ts_tensor *rstd, ts_tensor *y, int nnorm, double eps) {
    if (!tsi_needs_graph(ins, 3)) return;
    ts_tensor *saves[4] = {x, w, mean, rstd};
    ts_node *n =
        tsi_record("NativeLayerNormBackward0", OP, layer_norm_backward, ins, 3, y, saves, 4);
    if (n) n->ip[0] = nnorm, n->p[0] = eps;
    /* the composite backward differentiates again when x and w were saved as themselves (not as
     * contiguous copies, which carry no history) */
    if (n && x == ins[0] && w == ins[1]) n->flags |= TSI_NODE_TWICE;
}

ts_tensor *tsi_layer_norm_fused(ts_tensor *x0, int nnorm, ts_tensor *w0, ts_tensor *b0,
                                double eps) {
    const ts_device dev = tsi_device(x0);
    tsi_log_op(OP, dev);
    ts_tensor *x = tsi_contiguous(OP, x0);
    ts_tensor *w = x && w0 ? tsi_contiguous(OP, w0) : NULL;
    ts_tensor *b = x && b0 ? tsi_contiguous(OP, b0) : NULL;
    ts_tensor *y = NULL, *mean = NULL, *rstd = NULL;
    if (x && (!w0 || w) && (!b0 || b)) y = tsi_new(OP, x->shape, x->dtype, dev);
    ts_layer_norm_args a = {0};
    if (y) {
        a = base_args(x, nnorm, w, b);
        mean = tsi_new(OP, TS_SHAPE(a.rows), tsi_norm_stat_dtype(x->dtype), dev);
        rstd = mean ? tsi_new(OP, TS_SHAPE(a.rows), tsi_norm_stat_dtype(x->dtype), dev) : NULL;
    }
    if (rstd) {
        tsi_norm_view2(&a.y, y, a.rows, a.cols);
        tsi_norm_view2(&a.mean, mean, 0, a.rows);
        tsi_norm_view2(&a.rstd, rstd, 0, a.rows);
        a.eps = eps;
        const ts_backend *be = tsi_be(x);
        be->layer_norm_forward(be, tsi_dev_index(x), &a);
    } else {
        ts_release(y), y = NULL;
    }
    ts_tensor *ins[3] = {x0, w0, b0};
    if (y) tsi_layer_norm_fused_record(ins, x, w, mean, rstd, y, nnorm, eps);
    ts_release(mean), ts_release(rstd);
    ts_release(x), ts_release(w), ts_release(b);
    return tsi_own(y);
}
