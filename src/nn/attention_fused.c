/* attention_fused.c — scaled_dot_product_attention through the backend's fused kernels: the
 * views they take, the output laid out as PyTorch's flash attention lays it out, dropout's Philox
 * counters, and the backward node that recomputes the weights from the saved log-sum-exp (under
 * create_graph: from q and k by public ops, dropout's keep mask drawn again from its counters). */
#include <math.h>

#include "nn/functional_internal.h"

static const char *OP = "scaled_dot_product_attention";

/* Batch dims B.. shared by q, k and v (the fused kernels do not broadcast them). */
static bool same_batch(const ts_tensor *q, const ts_tensor *t) {
    if (t->shape.ndim != q->shape.ndim) return false;
    for (int d = 0; d < q->shape.ndim - 2; d++)
        if (t->shape.dims[d] != q->shape.dims[d]) return false;
    return true;
}

/* The kernels' argument block for these inputs (views only; no outputs yet). */
static ts_sdpa_args base_args(ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *mask,
                              double dropout_p, bool is_causal, double scale) {
    const int nd = q->shape.ndim;
    ts_sdpa_args a = {.causal = is_causal, .dropout_p = dropout_p};
    a.scale = scale > 0 ? scale : 1.0 / sqrt((double)q->shape.dims[nd - 1]);
    tsi_kview_fill(&a.q, q);
    tsi_kview_fill(&a.k, k);
    tsi_kview_fill(&a.v, v);
    if (mask) {
        ts_shape ms = q->shape;
        ms.dims[nd - 1] = k->shape.dims[nd - 2]; /* [B.., L, S] */
        tsi_kview_fill_broadcast(&a.mask, mask, &ms);
        a.has_mask = true;
    }
    return a;
}

bool tsi_sdpa_fused_applies(ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *mask,
                            double dropout_p) {
    const ts_backend *be = tsi_be(q);
    if (!be->sdpa_forward || !be->sdpa_backward || !be->sdpa_supports || !be->sdpa_workspace)
        return false;
    if (!same_batch(q, k) || !same_batch(q, v)) return false;
    if (tsi_numel(q->shape) == 0 || tsi_numel(k->shape) == 0 || tsi_numel(v->shape) == 0)
        return false;
    if (mask) {
        /* a mask that wants a gradient, or one of more dims than the scores, goes the long way */
        if (mask->requires_grad && tsi_grad_mode()) return false;
        if (mask->shape.ndim > q->shape.ndim) return false;
        ts_shape ms = q->shape, out;
        ms.dims[ms.ndim - 1] = k->shape.dims[k->shape.ndim - 2];
        if (!tsi_broadcast_shapes(OP, mask->shape, ms, &out)) {
            ts_error_clear(); /* the reference composition words the error */
            return false;
        }
        for (int d = 0; d < ms.ndim; d++)
            if (out.dims[d] != ms.dims[d]) return false;
    }
    (void)dropout_p;
    ts_sdpa_args a = base_args(q, k, v, mask, 0, false, 0);
    return be->sdpa_supports(be, tsi_dev_index(q), &a);
}

/* The kernels read rows through their stride but need unit stride along the last dim. */
static ts_tensor *unit_last(ts_tensor *t) {
    if (t->shape.dims[t->shape.ndim - 1] <= 1 || t->strides[t->shape.ndim - 1] == 1)
        return ts_retain(t);
    return tsi_contiguous(OP, t);
}

/* A workspace the kernels may use: device memory from the allocator (counted in the memory
 * statistics), NULL with TS_ERR_OOM when it cannot be had. *ws_out stays NULL for 0 bytes. */
static bool workspace(ts_tensor *like, size_t bytes, ts_tensor **ws_out) {
    *ws_out = NULL;
    if (!bytes) return true;
    *ws_out = tsi_new(OP, TS_SHAPE((int64_t)bytes), TS_U8, tsi_device(like));
    return *ws_out != NULL;
}

/* The saved q, k or v (slot 0, 1, 2) as the forward got it: slots 6, 7, 8 hold the inputs
 * themselves where the kernels read copies (which carry no history). */
static ts_tensor *saved_input(ts_node *n, int slot) {
    return tsi_node_has_saved(n, slot + 6) ? tsi_node_saved(n, slot + 6) : tsi_node_saved(n, slot);
}

/* Dropout's scaled keep mask D [B.., L, S] of the forward (a constant: no graph): the kernels'
 * Philox draws (backend.h: weight (b, i, j) at stream position offset + (b L + i) S + j, kept
 * when u24 < 1 - p), which are the backend's bernoulli draws from the same seed and offset (as
 * ts_dropout's mask on the reference's weights), times 1 / (1 - p) (0 for p = 1). */
static ts_tensor *dropout_scaled_keep(ts_node *n, ts_tensor *p) {
    const double dp = n->p[1];
    ts_tensor *keep = tsi_new(OP, p->shape, p->dtype, tsi_device(p));
    if (!keep) return NULL;
    const ts_kview kv = tsi_kview(keep);
    const ts_backend *be = tsi_be(keep);
    be->random(be, tsi_dev_index(keep), TS_RAND_BERNOULLI, &kv, 1 - dp, 0, (uint64_t)n->ip[1],
               (uint64_t)n->ip[2]);
    return ts_mul_scalar(tsi_own(keep), dp >= 1 ? 0 : 1 / (1 - dp));
}

/* The backward as public ops over the attention weights P recomputed by the reference's ops
 * (attention.c), so that under create_graph it records the gradients' graph. With dropout's
 * scaled keep mask D (1 without dropout): dv = (P D)^T g, dP = (g v^T) D, dS = P (dP -
 * rowsum(dP P)), dq = scale dS k, dk = scale dS^T q. */
static void sdpa_backward_composite(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *q = saved_input(n, 0), *k = saved_input(n, 1), *v = saved_input(n, 2);
    ts_tensor *mask = tsi_node_has_saved(n, 3) ? tsi_node_saved(n, 3) : NULL;
    if (!q || !k || !v || (tsi_node_has_saved(n, 3) && !mask) || !go[0]) return;
    const double scale = n->p[0];
    ts_tensor *g = go[0]->dtype == q->dtype ? go[0] : ts_to_dtype(go[0], q->dtype);
    ts_tensor *p = tsi_sdpa_probs(q, k, mask, n->ip[0] != 0, scale);
    ts_tensor *drop = p && n->p[1] > 0 ? dropout_scaled_keep(n, p) : NULL;
    if (n->p[1] > 0 && !drop) return;
    if (tsi_node_needs(n, 2))
        gi[2] = ts_matmul(ts_transpose(drop ? ts_mul(p, drop) : p, -2, -1), g);
    if (!tsi_node_needs(n, 0) && !tsi_node_needs(n, 1)) return;
    ts_tensor *dp = ts_matmul(g, ts_transpose(v, -2, -1));
    if (drop) dp = ts_mul(dp, drop);
    ts_tensor *ds = ts_mul(p, ts_sub(dp, ts_sum_dim(ts_mul(dp, p), -1, true)));
    if (tsi_node_needs(n, 0)) gi[0] = ts_mul_scalar(ts_matmul(ds, k), scale);
    if (tsi_node_needs(n, 1)) gi[1] = ts_mul_scalar(ts_matmul(ts_transpose(ds, -2, -1), q), scale);
}

static void sdpa_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (tsi_create_graph_active()) {
        sdpa_backward_composite(n, go, gi);
        return;
    }
    ts_tensor *q = tsi_node_saved(n, 0), *k = tsi_node_saved(n, 1), *v = tsi_node_saved(n, 2);
    ts_tensor *mask = tsi_node_has_saved(n, 3) ? tsi_node_saved(n, 3) : NULL;
    ts_tensor *out = tsi_node_saved(n, 4), *lse = tsi_node_saved(n, 5);
    if (!q || !k || !v || !out || !lse || (tsi_node_has_saved(n, 3) && !mask) || !go[0]) return;
    ts_tensor *gc = tsi_cast(OP, go[0], q->dtype);
    ts_tensor *g = gc ? unit_last(gc) : NULL;
    ts_release(gc);
    ts_tensor *dq = g ? tsi_new(OP, q->shape, q->dtype, tsi_device(q)) : NULL;
    ts_tensor *dk = dq ? tsi_new(OP, k->shape, k->dtype, tsi_device(k)) : NULL;
    ts_tensor *dv = dk ? tsi_new(OP, v->shape, v->dtype, tsi_device(v)) : NULL;
    ts_tensor *ws = NULL;
    if (dv) {
        ts_sdpa_args a = base_args(q, k, v, mask, n->p[1], n->ip[0] != 0, n->p[0]);
        a.seed = (uint64_t)n->ip[1], a.offset = (uint64_t)n->ip[2];
        tsi_kview_fill(&a.out, out);
        tsi_kview_fill(&a.lse, lse);
        tsi_kview_fill(&a.dout, g);
        tsi_kview_fill(&a.dq, dq);
        tsi_kview_fill(&a.dk, dk);
        tsi_kview_fill(&a.dv, dv);
        const ts_backend *be = tsi_be(q);
        const int idx = tsi_dev_index(q);
        if (workspace(q, be->sdpa_workspace(be, idx, &a, true), &ws))
            be->sdpa_backward(be, idx, &a, ws ? ws->storage->data + ws->offset : NULL);
        else
            ts_release(dv), dv = NULL;
    }
    ts_release(ws);
    ts_release(g);
    if (!dv) {
        ts_release(dq), ts_release(dk);
        return;
    }
    gi[0] = tsi_own(dq);
    gi[1] = tsi_own(dk);
    gi[2] = tsi_own(dv);
}

/* out [B.., L, Ev]; for [B, H, L, E] inputs it is stored as [B, L, H, Ev] and returned as the
 * transposed view, as PyTorch's flash attention does: the usual next step (heads back together,
 * [B, L, H * Ev]) is then a free reshape instead of a copy. */
static ts_tensor *new_output(ts_tensor *q, ts_tensor *v) {
    const int nd = q->shape.ndim;
    ts_shape s = q->shape;
    s.dims[nd - 1] = v->shape.dims[nd - 1];
    if (nd != 4) return tsi_new(OP, s, q->dtype, tsi_device(q));
    ts_tensor *blhe =
        tsi_new(OP, TS_SHAPE(s.dims[0], s.dims[2], s.dims[1], s.dims[3]), q->dtype, tsi_device(q));
    if (!blhe) return NULL;
    const int64_t st[4] = {blhe->strides[0], blhe->strides[2], blhe->strides[1], 1};
    ts_tensor *view = tsi_view_of(blhe, s, st, blhe->offset);
    if (view) view->is_view = false; /* it owns the storage's only handle: a plain result */
    ts_release(blhe);
    return view; /* NULL with TS_ERR_OOM when the view's struct could not be had */
}

ts_tensor *tsi_sdpa_fused(ts_tensor *q0, ts_tensor *k0, ts_tensor *v0, ts_tensor *mask,
                          double dropout_p, bool is_causal, double scale) {
    const ts_device dev = tsi_device(q0);
    tsi_log_op(OP, dev);
    ts_tensor *q = unit_last(q0), *k = q ? unit_last(k0) : NULL, *v = k ? unit_last(v0) : NULL;
    ts_tensor *out = v ? new_output(q, v) : NULL, *lse = NULL, *ws = NULL;
    if (out) {
        ts_shape ls = q->shape;
        ls.ndim--; /* [B.., L] */
        lse = tsi_new(OP, ls, q->dtype == TS_F64 ? TS_F64 : TS_F32, dev);
    }
    ts_sdpa_args a = {0};
    if (lse) {
        a = base_args(q, k, v, mask, dropout_p, is_causal, scale);
        tsi_kview_fill(&a.out, out);
        tsi_kview_fill(&a.lse, lse);
        if (dropout_p > 0) { /* the reference's dropout reserves one counter per weight */
            const int nd = q->shape.ndim;
            tsi_rng_reserve_on(
                dev,
                (uint64_t)(tsi_numel(q->shape) / q->shape.dims[nd - 1] * k->shape.dims[nd - 2]),
                &a.seed, &a.offset);
        }
        const ts_backend *be = tsi_be(q);
        const int idx = tsi_dev_index(q);
        if (workspace(q, be->sdpa_workspace(be, idx, &a, false), &ws))
            be->sdpa_forward(be, idx, &a, ws ? ws->storage->data + ws->offset : NULL);
        else
            ts_release(out), out = NULL;
    }
    ts_release(ws);
    ts_tensor *ins[3] = {q0, k0, v0};
    if (out && lse && tsi_needs_graph(ins, 3)) {
        /* q, k, v themselves too where the kernels read copies: sdpa_backward_composite
         * (create_graph) differentiates through them */
        ts_tensor *saves[9] = {q, k, v, mask, NULL, lse, NULL, NULL, NULL};
        for (int i = 0; i < 3; i++)
            if (saves[i] != ins[i]) saves[6 + i] = ins[i];
        ts_node *n = tsi_record("ScaledDotProductFlashAttentionBackward0", OP, sdpa_backward, ins,
                                3, out, saves, 9);
        if (n) {
            n->flags |= TSI_NODE_TWICE; /* sdpa_backward_composite under create_graph */
            tsi_node_save_output(n, 4, out);
            n->p[0] = a.scale;
            n->p[1] = dropout_p;
            n->ip[0] = is_causal;
            n->ip[1] = (int64_t)a.seed;
            n->ip[2] = (int64_t)a.offset;
        }
    }
    ts_release(lse);
    ts_release(q), ts_release(k), ts_release(v);
    return tsi_own(out);
}
