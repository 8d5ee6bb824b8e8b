/* optimize.c — the inference rewrites of ts_onnx_opts.optimize, run after constant folding: the
 * convolution rewrites (rewrite_conv.c: BatchNormalization folded into the Conv before it, Conv +
 * Relu / Clip fused) and the transformer ones (rewrite_xformer.c: MatMul + Add as one linear,
 * GELU's erf form as one op, attention as scaled_dot_product_attention), then the blocked layout
 * between convolutions (rewrite_blocked.c). Each rewrite marks the
 * nodes it replaces dead; tso_graph_drop_dead removes them. */
#include <stdlib.h>

#include "onnx/onnx_internal.h"

void tso_graph_drop_dead(tso_graph *g, const bool *dead) {
    int kept = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        if (dead[k])
            tso_node_free(&g->nodes[k]);
        else
            g->nodes[kept++] = g->nodes[k];
    }
    g->n_nodes = kept;
    for (int k = 0; k < g->n_nodes; k++)
        for (int i = 0; i < g->nodes[k].n_out; i++)
            if (g->nodes[k].out[i] >= 0) g->values[g->nodes[k].out[i]].producer = k;
    tso_graph_count_uses(g);
}

bool tso_optimize(tso_model *m) {
    return tso_rewrite_conv(m) && tso_rewrite_xformer(m) && tso_rewrite_blocked(m);
}
