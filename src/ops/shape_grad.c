/* shape_grad.c — backward of mm/bmm/matmul, index_select, gather, scatter_add, cat, stack and
 * split/chunk, written with the public ops (grad mode is off while they run). */
#include <stdlib.h>

#include "ops/shape_grad.h"

static ts_tensor *zeros_of(const ts_node *n, ts_shape s) {
    return ts_zeros(s, (ts_opts){.dtype = n->in_dtype[0], .device = n->in_device[0]});
}

/* ------------------------------------------------------------------ matmul */
/* ga = g @ b^T and gb = a^T @ g on the operands with their 1-D dims promoted (a row for a, a column
 * for b), then summed over the batch dims that were broadcast. */
void tsi_matmul_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *g = go[0];
    if (!g) return;
    const int da = n->in_shape[0].ndim, db = n->in_shape[1].ndim;
    if (da == 1) g = ts_unsqueeze(g, g->shape.ndim - (db >= 2 ? 1 : 0));
    if (db == 1) g = ts_unsqueeze(g, g->shape.ndim);
    if (!g) return;
    if (tsi_node_needs(n, 0)) {
        ts_tensor *b = tsi_node_saved(n, 1);
        if (!b) return;
        if (db == 1) b = ts_unsqueeze(b, 1);
        ts_tensor *ga = ts_matmul(g, ts_transpose(b, -1, -2));
        if (da == 1) ga = ts_squeeze_dim(ga, -2);
        gi[0] = tsi_sum_to(ga, n->in_shape[0]);
    }
    if (tsi_node_needs(n, 1)) {
        ts_tensor *a = tsi_node_saved(n, 0);
        if (!a) return;
        if (da == 1) a = ts_unsqueeze(a, 0);
        ts_tensor *gb;
        /* PyTorch's mm_mat2_backward: when b is a transposed matrix (a linear layer's weight
         * seen through t(); the forward noted it in ip[0]), compute (g^T a)^T so the gradient has
         * b's layout and the transpose's backward hands the weight a contiguous gradient */
        bool b_transposed = db == 2 && n->ip[0] != 0;
        if (da > 2 && db <= 2) {
            /* b was shared by every batch: one GEMM over all the rows instead of a batch of small
             * ones and a sum */
            const int64_t k = n->in_shape[0].dims[da - 1], cols = g->shape.dims[g->shape.ndim - 1];
            int64_t rows = 1; /* explicit: -1 is ambiguous when k or cols is 0 */
            for (int i = 0; i < da - 1; i++) rows *= n->in_shape[0].dims[i];
            ts_tensor *af = ts_reshape(a, TS_SHAPE(rows, k)),
                      *gf = ts_reshape(g, TS_SHAPE(rows, cols));
            gb = b_transposed ? ts_t(ts_mm(ts_t(gf), af)) : ts_mm(ts_t(af), gf);
        } else if (b_transposed && da <= 2) {
            gb = ts_t(ts_mm(ts_t(g), a));
        } else {
            gb = ts_matmul(ts_transpose(a, -1, -2), g);
        }
        if (db == 1) gb = ts_squeeze_dim(gb, -1);
        gi[1] = tsi_sum_to(gb, n->in_shape[1]);
    }
}

/* ------------------------------------------------------------------ indexing */
/* zeros.index_add(dim, index, g), as a scatter_add with the index broadcast along the other dims */
void tsi_index_select_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *idx = tsi_node_saved(n, 0);
    if (!go[0] || !idx) return;
    const ts_shape s = n->in_shape[0];
    if (s.ndim == 0) { /* one index (0) into a 0-dim tensor */
        gi[0] = ts_reshape(go[0], s);
        return;
    }
    const int d = (int)n->ip[0];
    ts_shape is = {.ndim = s.ndim};
    for (int k = 0; k < s.ndim; k++) is.dims[k] = k == d ? tsi_numel(idx->shape) : 1;
    ts_tensor *wide = ts_expand(ts_reshape(idx, is), go[0]->shape);
    gi[0] = ts_scatter_add(zeros_of(n, s), d, wide, go[0]);
}

void tsi_gather_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *idx = tsi_node_saved(n, 0);
    if (!go[0] || !idx) return;
    gi[0] = ts_scatter_add(zeros_of(n, n->in_shape[0]), (int)n->ip[0], idx, go[0]);
}

/* self gets g; src gets g.gather(dim, index), zero where src reaches past the index */
void tsi_scatter_add_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *g = go[0];
    if (!g) return;
    if (tsi_node_needs(n, 0)) gi[0] = g;
    if (!tsi_node_needs(n, 1)) return;
    ts_tensor *idx = tsi_node_saved(n, 0);
    if (!idx) return;
    const ts_shape ss = n->in_shape[1];
    const ts_opts o = {.dtype = n->in_dtype[1], .device = n->in_device[1]};
    const int64_t ni = tsi_numel(idx->shape);
    if (ni == 0) {
        gi[1] = ts_zeros(ss, o);
        return;
    }
    ts_tensor *picked = ts_gather(g, (int)n->ip[0], idx);
    if (ni == tsi_numel(ss)) { /* the same shape, up to 0-dim against [1] */
        gi[1] = ts_reshape(picked, ss);
        return;
    }
    /* copied into zeros: no history for a second backward */
    if (tsi_create_graph_active()) n->flags |= TSI_NODE_ONCE;
    ts_tensor *full = ts_zeros(ss, o), *part = full;
    for (int k = 0; k < ss.ndim; k++) part = ts_narrow(part, k, 0, idx->shape.dims[k]);
    ts_copy_(part, picked);
    gi[1] = full;
}

/* ------------------------------------------------------------------ joining */
void tsi_cat_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (!go[0]) return;
    const int d = (int)n->ip[0];
    int64_t off = 0;
    for (int i = 0; i < n->n_in; i++) {
        const ts_shape s = n->in_shape[i];
        /* legacy 1-D empties were skipped by the forward */
        const bool skipped = s.ndim == 1 && s.dims[0] == 0 && go[0]->shape.ndim != 1;
        const int64_t len = skipped ? 0 : s.dims[d];
        if (tsi_node_needs(n, i))
            gi[i] = skipped
                        ? ts_zeros(s, (ts_opts){.dtype = n->in_dtype[i], .device = n->in_device[i]})
                        : ts_narrow(go[0], d, off, len);
        off += len;
    }
}

void tsi_stack_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (!go[0]) return;
    for (int i = 0; i < n->n_in; i++)
        if (tsi_node_needs(n, i)) gi[i] = ts_select(go[0], (int)n->ip[0], i);
}

/* the pieces' gradients joined again, zeros for pieces that got none */
void tsi_split_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const int count = n->n_out, d = (int)n->ip[0];
    const int64_t len = n->ip[1], size = n->in_shape[0].dims[d];
    bool any = false;
    for (int i = 0; i < count; i++) any = any || go[i];
    if (!any) return;
    if (count == 1) {
        gi[0] = go[0];
        return;
    }
    ts_tensor *small[16], **parts = count <= 16 ? small : malloc(sizeof *parts * (size_t)count);
    if (!parts) {
        tsi_error_set(TS_ERR_OOM, "backward: out of host memory for %d split pieces", count);
        return;
    }
    for (int i = 0; i < count; i++) {
        parts[i] = go[i];
        if (parts[i]) continue;
        int64_t start = (int64_t)i * len < size ? (int64_t)i * len : size;
        ts_shape s = n->in_shape[0];
        s.dims[d] = size - start < len ? size - start : len;
        parts[i] = zeros_of(n, s);
    }
    gi[0] = ts_cat(parts, count, d);
    if (parts != small) free(parts);
}
