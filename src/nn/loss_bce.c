/* loss_bce.c — binary_cross_entropy on probabilities, with PyTorch's formulas and its own
 * backward node (BinaryCrossEntropyBackward0):
 *
 *   loss = w ((t - 1) max(log1p(-x), -100) - t max(log x, -100))
 *   dx   = g (x - t) / max((1 - x) x, 1e-12) w
 *   dt   = g (log1p(-x) - log x) w            (PyTorch's -logit(x))
 *   dw   = g loss / w, summed to w's shape    (the unweighted loss; PyTorch refuses it)
 *
 * The composition of the clamped logs (what Python's F.binary_cross_entropy did before) has the
 * same forward but a NaN gradient where an input is exactly 0 or 1 (a float32 sigmoid saturates
 * there past 17): the log's derivative is infinite and the clamp's mask multiplies it by 0.
 * PyTorch's 1e-12 floor keeps that gradient finite. The backward's steps are public ops, so it
 * runs on every device and is differentiable again (TSI_NODE_TWICE).
 *
 * The forward runs the backend's bce kernel where there is one (cpu, sim): the loss of every
 * element in one pass, which also tests that input and target lie in [0, 1] (NaN not) and refuses
 * them as PyTorch does ("all elements of input should be between 0 and 1", TS_ERR_ARG; input
 * before target), without reading them again. Elsewhere the forward is the composition of the
 * same formula, which tests no value: meta (no values, as PyTorch's meta kernel), a captured step
 * and an ONNX trace (their ops are recorded, nothing is read on the host), CUDA (PyTorch's check
 * there is an asynchronous device assert; the composition's logs give NaN for an input outside
 * [0, 1], a target outside is not tested). */
#include "amp/autocast.h"
#include "autograd/trace.h"
#include "backend/bce_math.h"
#include "nn/functional_internal.h"
#include "ops/elementwise.h"

static const char *OP = "binary_cross_entropy";

static bool bce_prob_check(ts_tensor *x, ts_tensor *t, ts_loss_opts o) {
    if (!tsi_check_input(OP, x, "input") || !tsi_check_input(OP, t, "target")) return false;
    ts_tensor *all[3] = {x, t, o.weight};
    ts_device dev;
    if (!tsi_same_device(OP, all, 3, false, &dev) || !tsi_check_reduction(OP, o.reduction))
        return false;
    bool same = x->shape.ndim == t->shape.ndim;
    for (int i = 0; same && i < x->shape.ndim; i++) same = x->shape.dims[i] == t->shape.dims[i];
    if (!same)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Using a target size (%s) that is different to the input size "
                             "(%s) is deprecated. Please ensure they have the same size.",
                             OP, tsi_shape_str(t->shape), tsi_shape_str(x->shape)),
               false;
    const char *names[3] = {"input", "target", "weight"};
    for (int i = 0; i < 3; i++) {
        if (!all[i]) continue;
        if (!tsi_is_float(all[i]->dtype))
            return tsi_error_set(TS_ERR_DTYPE, "%s: expected a floating point %s, got %s", OP,
                                 names[i], tsi_desc(all[i])),
                   false;
    }
    ts_shape bs;
    if (o.weight && (!tsi_broadcast_shapes(OP, x->shape, o.weight->shape, &bs) ||
                     bs.ndim != x->shape.ndim || tsi_numel(bs) != tsi_numel(x->shape)))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: weight %s does not broadcast to the input's shape %s", OP,
                             tsi_shape_str(o.weight->shape), tsi_shape_str(x->shape)),
               false;
    return true;
}

/* (t - 1) max(log1p(-x), -100) - t max(log x, -100), scope-owned */
static ts_tensor *unweighted(ts_tensor *x, ts_tensor *t) {
    ts_tensor *lx = ts_clamp_min(ts_log(x), -100);
    ts_tensor *lq = ts_clamp_min(ts_log1p(ts_neg(x)), -100);
    return ts_sub(ts_mul(ts_sub_scalar(t, 1), lq), ts_mul(t, lx));
}

/* unweighted() in one pass of the backend's bce kernel, with the domain test; NULL with no error
 * set where there is no kernel to run (the caller composes), NULL with the error for a value
 * outside [0, 1]. Scope-owned. */
static ts_tensor *fused(ts_tensor *x, ts_tensor *t) {
    const ts_backend *be = tsi_be(x);
    if (!be->bce || tsi_trace_active) return NULL;
    const ts_dtype dt = tsi_ew_result_type2(x, t); /* (PyTorch refuses two dtypes; Tessera casts) */
    x = ts_to_dtype(x, dt), t = ts_to_dtype(t, dt);
    if (!x || !t) return NULL;
    ts_tensor *out = tsi_own(tsi_new(OP, x->shape, dt, tsi_device(x)));
    if (!out) return NULL;
    const ts_kview ko = tsi_kview(out), kx = tsi_kview(x), kt = tsi_kview(t);
    const int bad = tsi_numel(x->shape) ? be->bce(be, tsi_dev_index(out), &ko, &kx, &kt) : 0;
    if (bad)
        return tsi_error_set(TS_ERR_ARG, "%s: all elements of %s should be between 0 and 1", OP,
                             bad & TS_BCE_BAD_INPUT ? "input" : "target"),
               NULL;
    return out;
}

static void bce_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *x = tsi_node_saved(n, 0), *t = tsi_node_saved(n, 1);
    const bool weighted = n->n_saved > 2; /* recorded with the weight as a third input */
    ts_tensor *w = weighted ? tsi_node_saved(n, 2) : NULL;
    if (!x || !t || !go[0] || (weighted && !w)) return;
    ts_tensor *g = go[0];
    if (tsi_node_needs(n, 0)) {
        ts_tensor *den = ts_clamp_min(ts_mul(ts_rsub_scalar(x, 1), x), 1e-12);
        ts_tensor *dx = ts_div(ts_mul(g, ts_sub(x, t)), den);
        gi[0] = w ? ts_mul(dx, w) : dx;
    }
    if (tsi_node_needs(n, 1)) {
        ts_tensor *dt = ts_mul(g, ts_sub(ts_log1p(ts_neg(x)), ts_log(x)));
        gi[1] = w ? ts_mul(dt, w) : dt;
    }
    if (weighted && tsi_node_needs(n, 2)) gi[2] = tsi_sum_to(ts_mul(g, unweighted(x, t)), w->shape);
}

static ts_tensor *bce_body(ts_tensor *input, ts_tensor *target, ts_loss_opts o) {
    tsi_init();
    if (!bce_prob_check(input, target, o)) return NULL;
    ts_tensor *ins[3] = {input, target, o.weight};
    const bool graph = tsi_needs_graph(ins, 3);
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *loss = fused(input, target);
    if (!loss && ts_error() == TS_OK) loss = unweighted(input, target);
    if (o.weight) loss = ts_mul(loss, o.weight);
    ts_no_grad_end();
    if (loss && graph) {
        ts_node *n = tsi_record("BinaryCrossEntropyBackward0", OP, bce_backward, ins,
                                o.weight ? 3 : 2, loss, ins, o.weight ? 3 : 2);
        if (!n)
            loss = NULL;
        else
            n->flags |= TSI_NODE_TWICE;
    }
    ts_tensor *y = loss ? tsi_loss_reduce(loss, o.reduction) : NULL;
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

/* autocast: the CPU's fp32 list; CUDA's bans it (the error, autocast_policy.c) */
ts_tensor *ts_binary_cross_entropy(ts_tensor *input, ts_tensor *target, ts_loss_opts o) {
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, OP, &input, &target, &o.weight);
    return tsi_autocast_exit(&ac, bce_body(input, target, o));
}
