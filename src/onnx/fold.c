/* fold.c — constant folding at load: a node whose inputs are all constants (Constant nodes, integer
 * initializers, earlier folded results) runs once on the cpu and its outputs become constants, so
 * the shape sub-graphs exporters emit (Shape / Gather / Concat / Reshape chains on fixed values)
 * cost nothing per run. Floating initializers are parameters that training changes: never folded.
 */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

static bool is_const(const tso_graph *g, int v) {
    if (v < 0) return true;
    const tso_value *val = &g->values[v];
    if (val->kind == TSO_V_CONST) return val->tensor != NULL;
    if (val->kind == TSO_V_PARAM)
        return val->tensor && !ts_dtype_is_floating(ts_dtype_of(val->tensor));
    return false;
}

static bool foldable(const tso_graph *g, const tso_node *n) {
    if (n->def->not_foldable || n->n_sub) return false;
    for (int i = 0; i < n->n_in; i++)
        if (!is_const(g, n->in[i])) return false;
    return true;
}

/* A failure at node k: the nodes not visited yet move down after the kept ones, so the graph
 * holds each node once (the folded ones are freed) and tso_graph_free frees it right. */
static bool fold_fail(tso_graph *g, int kept, int k) {
    for (int j = k; j < g->n_nodes; j++) g->nodes[kept++] = g->nodes[j];
    g->n_nodes = kept;
    return false;
}

static bool fold_graph(tso_model *m, tso_graph *g) {
    int kept = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        tso_node *n = &g->nodes[k];
        ts_tensor *in[64] = {0}, *out[64] = {0}; /* NULL past n_in: absent trailing inputs */
        for (int s = 0; s < n->n_sub; s++)
            if (!fold_graph(m, n->sub[s])) return fold_fail(g, kept, k);
        if (!foldable(g, n) || n->n_in > 64 || n->n_out > 64) {
            g->nodes[kept++] = *n;
            continue;
        }
        for (int i = 0; i < n->n_in; i++) in[i] = n->in[i] >= 0 ? g->values[n->in[i]].tensor : NULL;
        tso_ctx ctx = {.model = m, .graph = g, .device = ts_cpu()};
        int depth = ts_scope_depth();
        ts_scope_begin();
        if (ts_scope_depth() != depth + 1) return fold_fail(g, kept, k);
        ts_no_grad_begin();
        bool ok = n->def->run(&ctx, n, in, out);
        ts_no_grad_end();
        if (ok)
            for (int i = 0; i < n->n_out; i++)
                if (n->out[i] >= 0) {
                    tso_value *v = &g->values[n->out[i]];
                    if (!out[i]) {
                        ok = tso_fail(n, TS_ERR_ARG, "output %d was not produced", i);
                        break;
                    }
                    v->kind = TSO_V_CONST;
                    v->producer = -1;
                    v->tensor = ts_retain(out[i]);
                }
        ts_scope_end();
        if (!ok) {
            /* an error in a constant sub-graph is the model's error: report it at load */
            tso_fail_pending(n);
            return fold_fail(g, kept, k);
        }
        tso_node_free(n);
    }
    g->n_nodes = kept;
    for (int k = 0; k < g->n_nodes; k++)
        for (int i = 0; i < g->nodes[k].n_out; i++)
            if (g->nodes[k].out[i] >= 0) g->values[g->nodes[k].out[i]].producer = k;
    tso_graph_count_uses(g);
    return true;
}

bool tso_fold_constants(tso_model *m) { return fold_graph(m, m->graph); }
