/* mlp_fused.c — linear2(act(linear1(x))) as one node (decision 0032), the transformer's
 * feed-forward block (its middle dropout the identity) and Sequential(Linear, ReLU or
 * GELU('tanh'), [Dropout,] Linear), when a graph is recorded. The forward is linear_act_fused.c's
 * slot call saving the activation's aux (relu: the bit mask; gelu_tanh: the pre-activation), then
 * linear2 as ts_linear computes it. The backward: dW2 and db2 from g and the activation's output
 * (matmul_bgrad where the backend has it); dz = (g @ W2) act'(z) and db1 in one backend call,
 * matmul_dact_bgrad (cuBLASLt's DRELU_BGRAD / DGELU_BGRAD on CUDA), where the backend has it and
 * takes them; then dW1 = dz^T x and dx = dz W1 as linear's backward makes them. Whatever the slot
 * declines composes: g @ W2, the activation's gradient as the composition's nodes compute it,
 * AddmmBackward0's gradients. Under create_graph every gradient is public ops of a forward
 * recomputed with a graph. Under autocast the five tensors are cast to the lower dtype as the two
 * linears cast them (not where the products widen to float32). Everything else (no slot, a trace,
 * the erf GELU, a dropout that drops, hooks, checkpointing, mixed dtypes or devices, no bias)
 * runs the modules. */
#include "amp/autocast.h"
#include "autograd/trace.h"
#include "core/profiler_hooks.h"
#include "nn/functional_internal.h"
#include "nn/layers_internal.h"
#include "nn/linear_act_internal.h"
#include "nn/module_internal.h"
#include "nn/transformer_internal.h"

static const char *OP = "linear";

enum { IN_X, IN_W1, IN_B1, IN_W2, IN_B2, N_INS };
/* saved: the inputs the gradients read, the activation's output h (dW2's operand; relu's composed
 * gradient reads it too) and the slot's aux (relu: the mask; gelu_tanh: the pre-activation) */
enum { SAVE_X, SAVE_W1, SAVE_B1, SAVE_W2, SAVE_H, SAVE_AUX, N_SAVES };

/* dz = (g @ w2) act'(z) and db1 its column sums in one backend call (matmul_dact_bgrad); false,
 * nothing set, where the backend declines (or out of memory, recorded): the composition follows. */
static bool dact_fused(ts_activation act, ts_tensor *g, ts_tensor *w2, ts_tensor *aux,
                       ts_tensor **dz, ts_tensor **db) {
    const ts_backend *be = tsi_be(g);
    if (!be->matmul_dact_bgrad || g->dtype != w2->dtype || g->shape.ndim != 2 ||
        !tsi_device_eq(tsi_device(g), tsi_device(w2)) ||
        !tsi_device_eq(tsi_device(g), tsi_device(aux)))
        return false;
    const int64_t m = g->shape.dims[0], n1 = w2->shape.dims[1];
    const ts_device dev = tsi_device(g);
    tsi_log_op(OP, dev);
    ts_tensor *z = tsi_new(OP, TS_SHAPE(m, n1), g->dtype, dev);
    ts_tensor *b = z ? tsi_new(OP, TS_SHAPE(n1), g->dtype, dev) : NULL;
    const ts_kview kz = z ? tsi_kview(z) : (ts_kview){0}, kb = b ? tsi_kview(b) : kz;
    const ts_kview kg = tsi_kview(g), kw = tsi_kview(w2), ka = tsi_kview(aux);
    /* ts_epi_aux's ld: the mask's in bits, the pre-activation's in elements (its row stride) */
    const ts_epi_aux ea = {ka.data, act == TS_ACT_RELU ? ka.shape[1] * 8 : ka.strides[0]};
    const ts_epi_act eact = act == TS_ACT_RELU ? TS_EPI_RELU : TS_EPI_GELU_TANH;
    if (!b || !be->matmul_dact_bgrad(be, tsi_dev_index(g), eact, &kz, &kb, &kg, &kw, &ea)) {
        ts_release(z), ts_release(b);
        TSI_PROF_OP_END(); /* the op ends here: the composition follows */
        return false;
    }
    *dz = tsi_own(z), *db = tsi_own(b);
    if (*dz && *db) return true;
    *dz = *db = NULL; /* out of host memory, recorded */
    return false;
}

static void mlp_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *g = go[0];
    if (!g) return;
    const ts_activation act = (ts_activation)n->ip[0];
    const bool nx = tsi_node_needs(n, IN_X), nw1 = tsi_node_needs(n, IN_W1),
               nb1 = tsi_node_needs(n, IN_B1), nw2 = tsi_node_needs(n, IN_W2),
               nb2 = tsi_node_needs(n, IN_B2), graph = tsi_create_graph_active();
    ts_tensor *x = NULL, *w1 = NULL, *b1 = NULL, *h;
    if (graph) { /* the forward again, with a graph reaching x, w1 and b1 */
        x = tsi_node_saved(n, SAVE_X), w1 = tsi_node_saved(n, SAVE_W1);
        b1 = tsi_node_saved(n, SAVE_B1);
        if (!x || !w1 || !b1) return;
        h = tsi_transformer_activate(act, ts_linear(x, w1, b1));
    } else {
        h = tsi_node_saved(n, SAVE_H);
    }
    if (!h) return;
    if (nw2 || nb2) /* linear2's weight and bias: matmul_bgrad where the backend has it */
        tsi_linear_grads(g, h, NULL, n->in_shape[IN_B2], NULL, nw2 ? &gi[IN_W2] : NULL,
                         nb2 ? &gi[IN_B2] : NULL);
    if (!nx && !nw1 && !nb1) return;
    ts_tensor *w2 = tsi_node_saved(n, SAVE_W2);
    if (!w2) return;
    ts_tensor *dz = NULL, *db1 = NULL;
    if (graph) {
        dz = tsi_linear_act_grad_graph(act, x, w1, b1, ts_mm(g, w2));
    } else {
        ts_tensor *aux = tsi_node_saved(n, SAVE_AUX);
        if (!aux) return;
        if (!dact_fused(act, g, w2, aux, &dz, &db1)) /* the composition's arithmetic */
            dz = tsi_linear_act_grad(act, act == TS_ACT_RELU ? h : aux, ts_mm(g, w2));
        if (nx) w1 = tsi_node_saved(n, SAVE_W1);
        if (nw1) x = tsi_node_saved(n, SAVE_X);
        if ((nx && !w1) || (nw1 && !x)) return;
    }
    if (!dz) return;
    tsi_linear_grads(dz, x, w1, n->in_shape[IN_B1], nx ? &gi[IN_X] : NULL, nw1 ? &gi[IN_W1] : NULL,
                     nb1 && !db1 ? &gi[IN_B1] : NULL);
    if (nb1 && db1) gi[IN_B1] = db1;
}

/* The node for x2 [rows, in]; NULL with *declined set where matmul_bias_act declines. */
static ts_tensor *mlp_rows(ts_tensor *const *ins, ts_activation act, bool *declined) {
    ts_tensor *aux = NULL;
    ts_tensor *h =
        tsi_linear_act_slot(ins[IN_X], ins[IN_W1], ins[IN_B1], act, true, &aux, declined);
    if (!h || !aux) return NULL;
    ts_no_grad_begin(); /* linear2's product and bias as ts_linear makes them; the node is ours */
    ts_tensor *y = ts_linear(h, ins[IN_W2], ins[IN_B2]);
    ts_no_grad_end();
    if (!y) return NULL;
    ts_node *n = tsi_node_new("MlpBackward", OP, mlp_backward, ins, N_INS, 1, N_SAVES);
    if (!n) return NULL;
    n->ip[0] = act;
    n->flags |= TSI_NODE_TWICE; /* public ops throughout under create_graph */
    tsi_node_save(n, SAVE_X, ins[IN_X]);
    tsi_node_save(n, SAVE_W1, ins[IN_W1]);
    tsi_node_save(n, SAVE_B1, ins[IN_B1]);
    tsi_node_save(n, SAVE_W2, ins[IN_W2]);
    tsi_node_save(n, SAVE_H, h);
    tsi_node_save(n, SAVE_AUX, aux);
    tsi_node_set_output(n, y, 0);
    tsi_node_release(n); /* y owns it now */
    return y;
}

/* Whether one node may take them (of the lower dtype under autocast): the slot takes linear1 and
 * act, linear2 matches them and a graph is recorded. */
static bool mlp_takes(ts_tensor *const *ins, ts_activation act) {
    ts_tensor *x = ins[IN_X], *w2 = ins[IN_W2], *b2 = ins[IN_B2];
    if (!tsi_linear_act_takes(x, ins[IN_W1], ins[IN_B1], act) || !w2 || !b2 ||
        !tsi_needs_graph(ins, N_INS))
        return false;
    const ts_dtype dt = x->dtype;
    const ts_device d = tsi_device(x);
    return w2->dtype == dt && b2->dtype == dt && tsi_device_eq(d, tsi_device(w2)) &&
           tsi_device_eq(d, tsi_device(b2)) && w2->shape.ndim == 2 && b2->shape.ndim == 1 &&
           w2->shape.dims[1] == ins[IN_W1]->shape.dims[0] &&
           b2->shape.dims[0] == w2->shape.dims[0] && w2->shape.dims[0] > 0;
}

/* a built-in module whose ts_forward runs its forward alone */
static bool plain(const ts_module *m) {
    return !m->impl->hooks && !m->impl->place_input && !m->impl->checkpoint;
}

static ts_tensor *compose(ts_module *linear1, ts_activation act, ts_module *dropout,
                          ts_module *linear2, ts_tensor *x) {
    ts_tensor *h = tsi_forward_linear_act(linear1, act, x);
    if (dropout) h = ts_forward(dropout, h);
    return ts_forward(linear2, h);
}

/* The node over x folded to rows; NULL with *declined set where matmul_bias_act declines. */
static ts_tensor *mlp_op(ts_tensor **ins, ts_activation act, bool *declined) {
    ts_tensor *x = ins[IN_X];
    const int nd = x->shape.ndim;
    const int64_t in = ins[IN_W1]->shape.dims[1];
    ts_scope_begin();
    if (nd > 2) ins[IN_X] = ts_reshape(x, TS_SHAPE(tsi_numel(x->shape) / in, in));
    ts_tensor *y = ins[IN_X] ? mlp_rows(ins, act, declined) : NULL;
    if (y && nd > 2) {
        ts_shape os = x->shape;
        os.dims[nd - 1] = ins[IN_W2]->shape.dims[0];
        y = ts_view(y, os);
    }
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

ts_tensor *tsi_forward_mlp(ts_module *linear1, ts_activation act, ts_module *dropout,
                           ts_module *linear2, ts_tensor *x) {
    ts_tensor *ins[N_INS] = {x};
    if (!x || (dropout && !tsi_module_dropout_identity(dropout)) ||
        !tsi_linear_parts_of(linear1, &ins[IN_W1], &ins[IN_B1]) ||
        !tsi_linear_parts_of(linear2, &ins[IN_W2], &ins[IN_B2]) || !plain(linear1) ||
        !plain(linear2) || !tsi_check_input(OP, x, "input"))
        return compose(linear1, act, dropout, linear2, x);
    /* autocast: the lower dtype for all five, as the two linears' casts give them; where the
     * products widen to float32 (round_to) the composition rounds h, which one node would not */
    tsi_ac_frame ac;
    TSI_AUTOCAST_ENTER(&ac, OP, &ins[IN_X], &ins[IN_W1], &ins[IN_B1], &ins[IN_W2], &ins[IN_B2]);
    bool declined = true;
    ts_tensor *y = NULL;
    if (!(ac.active && ac.round_to != TS_DTYPE_DEFAULT) && mlp_takes(ins, act)) {
        declined = false;
        y = mlp_op(ins, act, &declined);
    }
    y = tsi_autocast_exit(&ac, y);
    return declined ? compose(linear1, act, dropout, linear2, x) : y;
}

int tsi_mlp_span(ts_module *const *ms, int n, ts_activation *act, ts_module **dropout) {
    ts_tensor *w, *b;
    if (n < 3 || !tsi_linear_act_span(ms, n, act)) return 0;
    *dropout = NULL;
    int k = 2;
    if (ms[k] && tsi_module_dropout_identity(ms[k])) *dropout = ms[k++];
    if (k >= n || !tsi_linear_parts_of(ms[k], &w, &b)) return 0;
    return k + 1;
}
