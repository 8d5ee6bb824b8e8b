/* double_backward.c — create_graph (PyTorch's higher-order gradients): the thread's flag that the
 * engine sets for a pass, and the DelayedError node given to the gradients of a backward that is
 * not differentiable again.
 *
 * A backward function is differentiable again when it computes its gradients with public ops on
 * its incoming gradients, its saved inputs and its saved outputs: run with grad mode on, those ops
 * record the gradient's own graph. The site that records a node says so (TSI_NODE_TWICE) next to
 * the formula; a node that saved a detached copy (an in-place op's old value) or an output of
 * unknown number is marked TSI_NODE_ONCE (a checkpoint's or a saved-tensor hook's placeholder
 * keeps its tensor's history: checkpoint.c). Every other node's
 * gradients get a DelayedError node: correct values, and a clear error if a second backward
 * reaches them, never a second derivative that silently lacks a term. */
#include <stdlib.h>

#include "autograd/double_backward.h"

static _Thread_local bool create_graph_on;

bool tsi_create_graph_active(void) { return create_graph_on; }

bool tsi_create_graph_swap(bool on) {
    bool old = create_graph_on;
    create_graph_on = on;
    return old;
}

static void delayed_error_backward(ts_node *n, ts_tensor *const *g, ts_tensor **gi) {
    (void)g, (void)gi;
    tsi_error_set(TS_ERR_UNSUPPORTED,
                  "backward: double backward through %s is not implemented in Tessera: the "
                  "gradient it produced is correct, but it cannot be differentiated again",
                  n->op);
}

ts_tensor *tsi_delayed_error(ts_node *n, ts_tensor *const *grad_out, ts_tensor *g) {
    int n_in = n->n_in + n->n_out;
    ts_tensor **ins = calloc((size_t)n_in, sizeof *ins);
    if (!ins) return tsi_error_set(TS_ERR_OOM, "backward: out of host memory"), NULL;
    /* the incoming gradients as inputs; n's own edges copied in after */
    for (int i = 0; i < n->n_out; i++) ins[n->n_in + i] = grad_out[i];
    ts_node *e = tsi_node_new("DelayedError", n->name, delayed_error_backward, ins, n_in, 1, 0);
    free(ins);
    ts_tensor *a = e ? tsi_view_of(g, g->shape, g->strides, g->offset) : NULL;
    if (!a) {
        if (e) tsi_node_release(e);
        return e ? (tsi_error_set(TS_ERR_OOM, "backward: out of host memory"), NULL) : NULL;
    }
    for (int i = 0; i < n->n_in; i++) {
        e->next[i].fn = tsi_node_retain(n->next[i].fn);
        e->next[i].output_nr = n->next[i].output_nr;
        e->next[i].leaf = ts_retain(n->next[i].leaf);
        e->in_shape[i] = n->in_shape[i];
        e->in_dtype[i] = n->in_dtype[i];
        e->in_device[i] = n->in_device[i];
    }
    a->is_view = g->is_view;
    tsi_node_set_output(e, a, 0);
    tsi_node_release(e);
    return tsi_own(a);
}
