/* batch_norm_fused.c — batch_norm in training mode through the backend's fused kernels (PyTorch's
 * native_batch_norm): one pass over the input for each channel's mean and variance and one that
 * writes the output, and a backward node (NativeBatchNormBackward0) that keeps only the input, the
 * weight and the per-channel mean and invstd, where the composition keeps several tensors of the
 * input's size and its backward reads and writes them many times. A channels_last input (one that
 * prefers it) stays channels_last where the backend has NHWC kernels: x is read in place, y, dy and
 * dx are channels_last too, and no reorder runs between the convolutions around it. */
#include "nn/functional_internal.h"

static const char *OP = "batch_norm";

/* The kernels' view of a contiguous tensor (its data and dtype is all they read); absent: NULL
 * data. */
static ts_kview view(const ts_tensor *t, ts_dtype dt) {
    return t ? tsi_kview(t) : (ts_kview){.dtype = dt};
}

static ts_batch_norm_args base_args(ts_tensor *x, ts_tensor *w, ts_tensor *b) {
    ts_batch_norm_args a = {.n = x->shape.dims[0], .c = x->shape.dims[1], .hw = 1};
    for (int d = 2; d < x->shape.ndim; d++) a.hw *= x->shape.dims[d];
    a.x = view(x, x->dtype);
    a.weight = view(w, x->dtype);
    a.bias = view(b, x->dtype);
    return a;
}

bool tsi_batch_norm_fused_takes(ts_tensor *x, ts_dtype dt) {
    const ts_backend *be = tsi_be(x);
    if (!be->batch_norm_supports || !be->batch_norm_forward || !be->batch_norm_backward)
        return false;
    if (tsi_numel(x->shape) == 0) return false;
    ts_batch_norm_args a = base_args(x, NULL, NULL);
    a.x = (ts_kview){.dtype = dt};
    return be->batch_norm_supports(be, tsi_dev_index(x), &a);
}

/* Whether x (channels_last, x0 of tsi_batch_norm_fused) runs through the backend's NHWC kernels */
static bool takes_channels_last(ts_tensor *x) {
    if (!tsi_prefers_channels_last(x)) return false;
    const ts_backend *be = tsi_be(x);
    ts_batch_norm_args a = base_args(x, NULL, NULL);
    a.channels_last = true;
    return be->batch_norm_supports(be, tsi_dev_index(x), &a);
}

static ts_dtype stat_dtype(ts_dtype dt) { return dt == TS_F64 ? TS_F64 : TS_F32; }

/* The saved input (slot 0: x, 1: w) as the forward got it: slots 4 and 5 hold the inputs
 * themselves where the kernels read copies (contiguous or channels_last: no history). NULL when
 * none was saved (no weight); NULL + error when it changed since. */
static ts_tensor *saved_input(ts_node *n, int slot) {
    if (tsi_node_has_saved(n, slot + 4)) return tsi_node_saved(n, slot + 4);
    return tsi_node_has_saved(n, slot) ? tsi_node_saved(n, slot) : NULL;
}

/* The backward as public ops over statistics recomputed from x (the saved ones carry no history),
 * so that under create_graph it records the gradients' graph. Over the reduced dims R (all but
 * the channels', M values each), with xh = (x - mean) invstd and gh = g w: dx = invstd (gh -
 * mean_R(gh) - xh mean_R(gh xh)), dw = sum_R(g xh), db = sum_R(g). A float16 / bfloat16 x is
 * computed in float32 as the kernels do, each gradient then cast to its input's dtype. */
static void batch_norm_backward_composite(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *x = saved_input(n, 0), *w = saved_input(n, 1);
    if (!x || (tsi_node_has_saved(n, 1) && !w) || !go[0]) return;
    const int nd = x->shape.ndim;
    ts_dims red = {.n = 0};
    ts_shape cs = {.ndim = nd}; /* [1, C, 1, ...] */
    for (int i = 0; i < nd; i++) {
        cs.dims[i] = i == 1 ? x->shape.dims[1] : 1;
        if (i != 1) red.d[red.n++] = i;
    }
    const ts_dtype sd = stat_dtype(x->dtype);
    ts_tensor *xf = x->dtype == sd ? x : ts_to_dtype(x, sd);
    ts_tensor *g = go[0]->dtype == sd ? go[0] : ts_to_dtype(go[0], sd);
    ts_tensor *xc = ts_sub(xf, ts_mean_dims(xf, red, true));
    ts_tensor *invstd = ts_rsqrt(ts_add_scalar(ts_mean_dims(ts_square(xc), red, true), n->p[0]));
    ts_tensor *xh = ts_mul(xc, invstd);
    ts_tensor *r[3] = {0};
    if (tsi_node_needs(n, 0)) {
        ts_tensor *gh = w ? ts_mul(g, ts_reshape(w->dtype == sd ? w : ts_to_dtype(w, sd), cs)) : g;
        ts_tensor *inner = ts_sub(ts_sub(gh, ts_mean_dims(gh, red, true)),
                                  ts_mul(xh, ts_mean_dims(ts_mul(gh, xh), red, true)));
        r[0] = ts_mul(invstd, inner);
    }
    if (tsi_node_needs(n, 1)) r[1] = ts_sum_dims(ts_mul(g, xh), red, false);
    if (tsi_node_needs(n, 2)) r[2] = ts_sum_dims(g, red, false);
    for (int i = 0; i < 3; i++)
        gi[i] = r[i] && r[i]->dtype != n->in_dtype[i] ? ts_to_dtype(r[i], n->in_dtype[i]) : r[i];
}

static void batch_norm_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (tsi_create_graph_active()) {
        batch_norm_backward_composite(n, go, gi);
        return;
    }
    ts_tensor *x = tsi_node_saved(n, 0),
              *w = tsi_node_has_saved(n, 1) ? tsi_node_saved(n, 1) : NULL;
    ts_tensor *mean = tsi_node_saved(n, 2), *invstd = tsi_node_saved(n, 3);
    if (!x || (tsi_node_has_saved(n, 1) && !w) || !mean || !invstd || !go[0]) return;
    tsi_norm_grads r;
    if (!tsi_norm_grads_begin(OP, n, x, go[0], &r)) return;
    ts_batch_norm_args a = base_args(x, w, NULL);
    /* the forward ran NHWC exactly when the saved x is channels_last (it is x0 then); r.dy and
     * dx have x's layout (tsi_norm_grads_begin) */
    a.channels_last = tsi_prefers_channels_last(x);
    a.mean = view(mean, mean->dtype);
    a.invstd = view(invstd, invstd->dtype);
    a.dy = view(r.dy, x->dtype);
    a.dx = view(r.g[0], x->dtype);
    a.dweight = view(r.g[1], x->dtype);
    a.dbias = view(r.g[2], x->dtype);
    const ts_backend *be = tsi_be(x);
    be->batch_norm_backward(be, tsi_dev_index(x), &a);
    tsi_norm_grads_end(&r, true, gi);
}

ts_tensor *tsi_batch_norm_fused(ts_tensor *x0, ts_tensor *w0, ts_tensor *b0, double eps,
                                ts_tensor **mean_out, ts_tensor **var_out) {
    const ts_device dev = tsi_device(x0);
    tsi_log_op(OP, dev);
    const bool nhwc = takes_channels_last(x0);
    ts_tensor *x = nhwc ? tsi_channels_last(OP, x0) : tsi_contiguous(OP, x0);
    ts_tensor *w = x && w0 ? tsi_contiguous(OP, w0) : NULL;
    ts_tensor *b = x && b0 ? tsi_contiguous(OP, b0) : NULL;
    ts_tensor *y = NULL, *mean = NULL, *invstd = NULL, *var = NULL;
    const ts_dtype sd = stat_dtype(x0->dtype);
    const ts_shape cs = TS_SHAPE(x0->shape.dims[1]);
    if (x && (!w0 || w) && (!b0 || b))
        y = nhwc ? tsi_new_channels_last(OP, x->shape, x->dtype, dev)
                 : tsi_new(OP, x->shape, x->dtype, dev);
    if (y) mean = tsi_new(OP, cs, sd, dev);
    if (mean) invstd = tsi_new(OP, cs, sd, dev);
    if (invstd && var_out) var = tsi_new(OP, cs, sd, dev);
    if (invstd && (var || !var_out)) {
        ts_batch_norm_args a = base_args(x, w, b);
        a.channels_last = nhwc;
        a.y = view(y, x->dtype);
        a.mean = view(mean, sd);
        a.invstd = view(invstd, sd);
        a.var = view(var, sd);
        a.eps = eps;
        const ts_backend *be = tsi_be(x);
        const ts_status before = ts_error();
        be->batch_norm_forward(be, tsi_dev_index(x), &a);
        /* a kernel without memory for its scratch (the NHWC kernels' block sums) reports it and
         * writes nothing: no result then (its statistics were never written) */
        if (before == TS_OK && ts_error() != TS_OK) ts_release(y), y = NULL;
    } else {
        ts_release(y), y = NULL;
    }
    ts_tensor *ins[3] = {x0, w0, b0};
    if (y && tsi_needs_graph(ins, 3)) {
        /* the inputs themselves too where the kernels read copies: the composite backward
         * (create_graph) differentiates through them */
        ts_tensor *saves[6] = {x, w, mean, invstd, x != x0 ? x0 : NULL, w != w0 ? w0 : NULL};
        ts_node *n =
            tsi_record("NativeBatchNormBackward0", OP, batch_norm_backward, ins, 3, y, saves, 6);
        if (n) n->p[0] = eps, n->flags |= TSI_NODE_TWICE; /* batch_norm_backward_composite */
    }
    if (y && mean_out) *mean_out = tsi_own(ts_retain(mean));
    if (y && var_out) *var_out = tsi_own(ts_retain(var));
    ts_release(mean), ts_release(invstd), ts_release(var);
    ts_release(x), ts_release(w), ts_release(b);
    return tsi_own(y);
}
