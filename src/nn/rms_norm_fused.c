/* rms_norm_fused.c — rms_norm through the backend's fused layer-norm kernels with the rms flag
 * (decision 0028): one pass writes the output and each row's rstd, and the backward node
 * (RmsNormBackward0) keeps only the input, the weight and rstd, where the composition keeps
 * several tensors of the input's size and runs five or six kernels each way. */
#include "nn/rms_norm_fused.h"
#include "nn/norm_rows.h"

static const char *OP = "rms_norm";

static ts_layer_norm_args base_args(ts_tensor *x, int nnorm, ts_tensor *w) {
    ts_layer_norm_args a = {.rms = true};
    tsi_norm_rows_cols(x, nnorm, &a.rows, &a.cols);
    tsi_norm_view2(&a.x, x, a.rows, a.cols);
    tsi_norm_view2(&a.weight, w, 0, a.cols);
    return a;
}

bool tsi_rms_norm_fused_takes(ts_tensor *x, int nnorm, ts_dtype dt) {
    return tsi_norm_rows_take(x, nnorm, dt, true);
}

/* The backward as public ops over rstd recomputed from x (the saved one carries no history), so
 * that under create_graph it records the gradients' graph: with gw = g w,
 * dx = rstd (gw - x rstd^2 mean(gw x)), dw = the sum of g x rstd. g has y's dtype, which is x's
 * (the engine casts every gradient to its tensor's dtype). */
static void rms_norm_backward_composite(ts_node *n, ts_tensor *x, ts_tensor *w, ts_tensor *g,
                                        ts_tensor **gi) {
    const int nnorm = (int)n->ip[0], nd = x->shape.ndim;
    ts_dims dims = {.n = nnorm};
    for (int i = 0; i < nnorm; i++) dims.d[i] = nd - nnorm + i;
    ts_tensor *rstd = ts_rsqrt(ts_add_scalar(ts_mean_dims(ts_square(x), dims, true), n->p[0]));
    if (tsi_node_needs(n, 0)) {
        ts_tensor *gw = w ? ts_mul(g, w) : g;
        ts_tensor *c = ts_mul(ts_square(rstd), ts_mean_dims(ts_mul(gw, x), dims, true));
        gi[0] = ts_mul(rstd, ts_sub(gw, ts_mul(x, c)));
    }
    if (tsi_node_needs(n, 1)) gi[1] = tsi_sum_to(ts_mul(ts_mul(g, x), rstd), n->in_shape[1]);
}

static void rms_norm_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *x = tsi_node_saved(n, 0),
              *w = tsi_node_has_saved(n, 1) ? tsi_node_saved(n, 1) : NULL;
    if (tsi_create_graph_active()) {
        if (x && (!tsi_node_has_saved(n, 1) || w) && go[0])
            rms_norm_backward_composite(n, x, w, go[0], gi);
        return;
    }
    ts_tensor *rstd = tsi_node_saved(n, 2);
    if (!x || (tsi_node_has_saved(n, 1) && !w) || !rstd || !go[0]) return;
    /* the node's third input (layer norm's bias) is always NULL: no dbias */
    ts_layer_norm_args a = base_args(x, (int)n->ip[0], w);
    tsi_norm_view2(&a.rstd, rstd, 0, a.rows);
    tsi_norm_rows_backward(OP, n, x, go[0], &a, gi);
}

void tsi_rms_norm_fused_record(ts_tensor *const *ins, ts_tensor *x, ts_tensor *w, ts_tensor *rstd,
                               ts_tensor *y, int nnorm, double eps) {
    if (!tsi_needs_graph(ins, 3)) return;
    ts_tensor *saves[3] = {x, w, rstd};
    ts_node *n = tsi_record("RmsNormBackward0", OP, rms_norm_backward, ins, 3, y, saves, 3);
    if (n) n->ip[0] = nnorm, n->p[0] = eps;
    /* the composite backward differentiates again when x and w were saved as themselves (not as
     * contiguous copies, which carry no history) */
    if (n && x == ins[0] && w == ins[1]) n->flags |= TSI_NODE_TWICE;
}

ts_tensor *tsi_rms_norm_fused(ts_tensor *x0, int nnorm, ts_tensor *w0, double eps) {
    const ts_device dev = tsi_device(x0);
    tsi_log_op(OP, dev);
    ts_tensor *x = tsi_contiguous(OP, x0);
    ts_tensor *w = x && w0 ? tsi_contiguous(OP, w0) : NULL;
    ts_tensor *y = NULL, *rstd = NULL;
    if (x && (!w0 || w)) y = tsi_new(OP, x->shape, x->dtype, dev);
    ts_layer_norm_args a = {0};
    if (y) {
        a = base_args(x, nnorm, w);
        rstd = tsi_new(OP, TS_SHAPE(a.rows), tsi_norm_stat_dtype(x->dtype), dev);
    }
    if (rstd) {
        tsi_norm_view2(&a.y, y, a.rows, a.cols);
        tsi_norm_view2(&a.rstd, rstd, 0, a.rows);
        a.eps = eps;
        const ts_backend *be = tsi_be(x);
        be->layer_norm_forward(be, tsi_dev_index(x), &a);
    } else {
        ts_release(y), y = NULL;
    }
    /* three inputs as layer norm's node (tsi_norm_grads' gradients), the third always NULL */
    ts_tensor *ins[3] = {x0, w0, NULL};
    if (y) tsi_rms_norm_fused_record(ins, x, w, rstd, y, nnorm, eps);
    ts_release(rstd);
    ts_release(x), ts_release(w);
    return tsi_own(y);
}
