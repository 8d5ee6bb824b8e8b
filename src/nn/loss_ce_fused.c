/* loss_ce_fused.c — cross_entropy's per-row losses through the backend's fused kernels
 * (cross_entropy_forward / _backward, ts_cross_entropy_args in backend.h), for class-index
 * targets without class weights on an [N, C] or [C] input: one pass over the logits writes each
 * row's loss and log-sum-exp, and the backward node (CrossEntropyLossBackward0) keeps only the
 * logits, the targets and those log-sum-exps, where the composition (loss_ce.c) writes and keeps
 * the whole [N, C] log-softmax. The losses come in the logits' compute dtype (float32 for float16
 * and bfloat16, float64 for float64): loss_ce.c reduces them with the composition's ops and
 * rounds the result once to the logits' dtype. Under create_graph the backward is public ops over
 * the softmax recomputed from the logits, so it is differentiable again. */
#include "nn/functional_internal.h"

static const char *OP = "cross_entropy";

static ts_dtype row_dtype(ts_dtype dt) { return dt == TS_F64 ? TS_F64 : TS_F32; }

bool tsi_cross_entropy_fused_takes(ts_tensor *x, ts_tensor *weight) {
    const ts_backend *be = tsi_be(x);
    const int nd = x->shape.ndim;
    return be->cross_entropy_forward && be->cross_entropy_backward && !weight &&
           (nd == 1 || nd == 2) && tsi_is_float(x->dtype) && tsi_numel(x->shape) > 0;
}

/* The kernels' view of a contiguous tensor as [rows, cols], or [rows] for cols 0. */
static ts_kview view_rows(const ts_tensor *t, int64_t rows, int64_t cols) {
    ts_kview v = tsi_kview(t);
    v.ndim = cols ? 2 : 1;
    v.shape[0] = rows, v.strides[0] = cols ? cols : 1;
    v.shape[1] = cols ? cols : 1, v.strides[1] = cols ? 1 : 0;
    return v;
}

/* The arguments both passes share, for contiguous x ([N, C] or [C]), target and lse. */
static ts_cross_entropy_args base_args(ts_tensor *x, ts_tensor *tg, ts_tensor *lse,
                                       int64_t ignore_index, double label_smoothing) {
    ts_cross_entropy_args a = {0};
    a.classes = x->shape.dims[x->shape.ndim - 1];
    a.rows = x->shape.ndim == 2 ? x->shape.dims[0] : 1;
    a.logits = view_rows(x, a.rows, a.classes);
    a.target = view_rows(tg, a.rows, 0);
    a.lse = view_rows(lse, a.rows, 0);
    a.ignore_index = ignore_index;
    a.label_smoothing = label_smoothing;
    return a;
}

/* The backward as public ops over the softmax recomputed from the logits (the saved log-sum-exp
 * carries no history), so that under create_graph it records the gradient's graph: per row with
 * upstream g, smoothing e and C classes, dx = g (softmax(x) - (1 - e) onehot(t) - e / C), zero in
 * an ignored row (the kernels' formula, backend.h). Slot 3 holds the logits themselves where the
 * kernels read a copy (which carries no history). */
static void cross_entropy_backward_composite(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *x = tsi_node_has_saved(n, 3) ? tsi_node_saved(n, 3) : tsi_node_saved(n, 0);
    ts_tensor *tg = tsi_node_saved(n, 1);
    if (!x || !tg || !go[0] || !tsi_node_needs(n, 0)) return;
    const int cd = x->shape.ndim - 1;
    const int64_t classes = x->shape.dims[cd];
    const double e = n->p[0];
    const ts_dtype rd = row_dtype(x->dtype);
    ts_tensor *xf = x->dtype == rd ? x : ts_to_dtype(x, rd);
    ts_tensor *g = ts_unsqueeze(go[0]->dtype == rd ? go[0] : ts_to_dtype(go[0], rd), cd);
    ts_tensor *ign = ts_eq_scalar(tg, (double)n->ip[0]);
    ts_tensor *t = ts_clamp(ts_masked_fill(tg, ign, 0), 0, (double)(classes - 1));
    ts_tensor *d = ts_mul(g, ts_add_scalar(ts_softmax(xf, cd), -e / (double)classes));
    d = ts_scatter_add(d, cd, ts_unsqueeze(t, cd), ts_mul_scalar(g, e - 1));
    d = ts_masked_fill(d, ts_unsqueeze(ign, cd), 0);
    gi[0] = d && d->dtype != x->dtype ? ts_to_dtype(d, x->dtype) : d;
}

static void cross_entropy_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (tsi_create_graph_active()) {
        cross_entropy_backward_composite(n, go, gi);
        return;
    }
    ts_tensor *x = tsi_node_saved(n, 0), *tg = tsi_node_saved(n, 1), *lse = tsi_node_saved(n, 2);
    if (!x || !tg || !lse || !go[0] || !tsi_node_needs(n, 0)) return;
    /* the rows' gradient may come broadcast (a sum's backward): contiguous, in lse's dtype */
    ts_tensor *gc = tsi_cast(OP, go[0], lse->dtype);
    ts_tensor *dloss = gc ? tsi_contiguous(OP, gc) : NULL;
    ts_release(gc);
    ts_tensor *dx = dloss ? tsi_new(OP, x->shape, x->dtype, tsi_device(x)) : NULL;
    if (dx) {
        ts_cross_entropy_args a = base_args(x, tg, lse, n->ip[0], n->p[0]);
        a.dloss = view_rows(dloss, a.rows, 0);
        a.dlogits = view_rows(dx, a.rows, a.classes);
        const ts_backend *be = tsi_be(x);
        be->cross_entropy_backward(be, tsi_dev_index(x), &a);
    }
    ts_release(dloss);
    gi[0] = tsi_own(dx);
}

ts_tensor *tsi_cross_entropy_fused(ts_tensor *x0, ts_tensor *target, int64_t ignore_index,
                                   double label_smoothing) {
    const ts_device dev = tsi_device(x0);
    tsi_log_op(OP, dev);
    ts_tensor *x = tsi_contiguous(OP, x0);
    ts_tensor *tg = x ? tsi_contiguous(OP, target) : NULL;
    ts_shape rows = x0->shape; /* [N], or 0-dim for an unbatched [C] */
    rows.ndim--;
    ts_tensor *loss = tg ? tsi_new(OP, rows, row_dtype(x0->dtype), dev) : NULL;
    ts_tensor *lse = loss ? tsi_new(OP, rows, row_dtype(x0->dtype), dev) : NULL;
    if (lse) {
        ts_cross_entropy_args a = base_args(x, tg, lse, ignore_index, label_smoothing);
        a.loss = view_rows(loss, a.rows, 0);
        const ts_backend *be = tsi_be(x);
        be->cross_entropy_forward(be, tsi_dev_index(x), &a);
    } else {
        ts_release(loss), loss = NULL;
    }
    ts_tensor *ins[1] = {x0};
    if (loss && tsi_needs_graph(ins, 1)) {
        /* x0 itself too where the kernels read a copy: the composite backward differentiates
         * through it */
        ts_tensor *saves[4] = {x, tg, lse, x != x0 ? x0 : NULL};
        ts_node *n = tsi_record("CrossEntropyLossBackward0", OP, cross_entropy_backward, ins, 1,
                                loss, saves, 4);
        if (n) n->ip[0] = ignore_index, n->p[0] = label_smoothing, n->flags |= TSI_NODE_TWICE;
    }
    ts_release(lse), ts_release(x), ts_release(tg);
    return tsi_own(loss);
}
