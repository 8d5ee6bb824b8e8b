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

/* zeros of g's dtype and device, shaped like g but `len` along dim */
static ts_tensor *zeros_along(ts_tensor *g, int dim, int64_t len) {
    ts_shape s = g->shape;
    s.dims[dim] = len;
    return ts_zeros(s, (ts_opts){.dtype = g->dtype, .device = tsi_device(g)});
}

/* The slice's gradient as joins of g with zeros (create_graph: differentiable in g, where the
 * copy into a zero tensor below is not): every step-th place from start along dim. */
static ts_tensor *slice_grad_joined(const ts_node *n, ts_tensor *g) {
    const int dim = (int)n->ip[0];
    const int64_t start = n->ip[1], step = n->ip[2], size = n->in_shape[0].dims[dim];
    if (n->ip[3]) g = ts_unsqueeze(g, dim); /* select: a slice of length 1 */
    if (!g) return NULL;
    const int64_t m = g->shape.dims[dim];
    if (step > 1 && m > 0) { /* g_i at i * step: each element followed by step - 1 zeros */
        ts_tensor *parts[2] = {ts_unsqueeze(g, dim + 1), NULL};
        if (!parts[0] || !(parts[1] = zeros_along(parts[0], dim + 1, step - 1))) return NULL;
        ts_shape s = g->shape;
        s.dims[dim] = m * step;
        g = ts_narrow(ts_reshape(ts_cat(parts, 2, dim + 1), s), dim, 0, (m - 1) * step + 1);
        if (!g) return NULL;
    }
    const int64_t len = g->shape.dims[dim], after = size - start - len;
    ts_tensor *parts[3];
    int k = 0;
    if (start > 0) parts[k++] = zeros_along(g, dim, start);
    parts[k++] = g;
    if (after > 0) parts[k++] = zeros_along(g, dim, after);
    for (int i = 0; i < k; i++)
        if (!parts[i]) return NULL;
    return k == 1 ? g : ts_cat(parts, k, dim);
}

void tsi_slice_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *g = go[0];
    if (!g) return;
    if (tsi_create_graph_active()) {
        gi[0] = slice_grad_joined(n, g);
        return;
    }
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
