/* view_grad.c — backward functions of views and copies. */
#include "ops/view_grad.h"

void tsi_reshape_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (go[0]) gi[0] = ts_reshape(go[0], n->in_shape[0]);
}

void tsi_permute_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (!go[0]) return;
    ts_dims inv = {.n = n->in_shape[0].ndim};
    for (int i = 0; i < inv.n; i++) inv.d[n->ip[i]] = i;
    gi[0] = ts_permute(go[0], inv);
}

void tsi_transpose_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (go[0]) gi[0] = ts_transpose(go[0], (int)n->ip[0], (int)n->ip[1]);
}

void tsi_slice_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *g = go[0];
    if (!g) return;
    ts_tensor *z = ts_zeros(n->in_shape[0], (ts_opts){.dtype = g->dtype, .device = tsi_device(g)});
    if (!z) return;
    int dim = (int)n->ip[0];
    ts_tensor *part =
        n->ip[3] ? ts_select(z, dim, n->ip[1])
                 : ts_slice(z, dim, n->ip[1], n->ip[1] + g->shape.dims[dim] * n->ip[2], n->ip[2]);
    if (ts_copy_(part, g)) gi[0] = z;
}

void tsi_expand_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (go[0]) gi[0] = tsi_sum_to(go[0], n->in_shape[0]);
}

void tsi_identity_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    (void)n;
    gi[0] = go[0];
}

void tsi_to_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (go[0]) gi[0] = ts_to(go[0], n->in_device[0]);
}

void tsi_copy_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (!go[0] || !tsi_node_needs(n, 1)) return;
    gi[1] = ts_to(tsi_sum_to(go[0], n->in_shape[1]), n->in_device[1]);
}
