/* diagonal.c — triangles and diagonals, composed from the differentiable ops so that they run and
 * differentiate on every device: tril / triu (+ in place), diagonal (a view with its own
 * backward), diag_embed, diag, diagflat, block_diag. */
#include <stdlib.h>

#include "autograd/autograd.h"
#include "autograd/copy_slices.h"
#include "autograd/trace.h"
#include "ops/compose.h"

/* ------------------------------------------------------------------ tril, triu */
static ts_tensor *tri_op(const char *op, ts_tensor *t, int64_t k, bool lower, bool in_place) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (t->shape.ndim < 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: input tensor must have at least 2 dimensions (%s)",
                             op, tsi_desc(t)),
               NULL;
    const int64_t n = t->shape.dims[t->shape.ndim - 2], m = t->shape.dims[t->shape.ndim - 1];
    bool *zero = host_alloc(op, n * m, sizeof *zero);
    if (!zero) return NULL;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) zero[i * m + j] = lower ? j - i > k : j - i < k;
    ts_scope_begin();
    ts_tensor *mask = mask_on(t, TS_SHAPE(n, m), zero);
    free(zero);
    ts_tensor *y = NULL;
    if (mask) y = in_place ? ts_masked_fill_(t, mask, 0.0) : ts_masked_fill(t, mask, 0.0);
    return finish(y);
}

ts_tensor *ts_tril(ts_tensor *t, int64_t k) { return tri_op("tril", t, k, true, false); }
ts_tensor *ts_triu(ts_tensor *t, int64_t k) { return tri_op("triu", t, k, false, false); }
ts_tensor *ts_tril_(ts_tensor *t, int64_t k) { return tri_op("tril_", t, k, true, true); }
ts_tensor *ts_triu_(ts_tensor *t, int64_t k) { return tri_op("triu_", t, k, false, true); }

/* ------------------------------------------------------------------ diagonals */

/* The diagonal's shape, strides and storage offset as a view of t (dims a and b removed, the
 * diagonal last): PyTorch's as_strided form, so writes through it reach t. */
static ts_shape diagonal_geometry(const ts_tensor *t, int64_t offset, int a, int b, int64_t *st,
                                  int64_t *at) {
    const int nd = t->shape.ndim;
    const int64_t n = t->shape.dims[a], m = t->shape.dims[b];
    int64_t len =
        offset >= 0 ? (n < m - offset ? n : m - offset) : (n + offset < m ? n + offset : m);
    if (len < 0) len = 0;
    ts_shape s = {.ndim = nd - 1};
    for (int d = 0, j = 0; d < nd; d++)
        if (d != a && d != b) s.dims[j] = t->shape.dims[d], st[j] = t->strides[d], j++;
    s.dims[nd - 2] = len;
    st[nd - 2] = t->strides[a] + t->strides[b];
    *at = t->offset;
    if (len > 0) *at += offset >= 0 ? offset * t->strides[b] : -offset * t->strides[a];
    return s;
}

/* diagonal_backward is linear in g, so its own backward is diagonal again (PyTorch's
 * DiagonalBackwardBackward0): gg's diagonal, recorded (ip as the diagonal's node) */
static void diagonal_backward_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (go[0]) gi[0] = ts_diagonal(go[0], n->ip[0], (int)n->ip[1], (int)n->ip[2]);
}

/* zeros of the input's shape with the gradient written along the diagonal (ip: offset, a, b);
 * the copy runs without a graph, so under create_graph the result gets
 * diagonal_backward_backward's node instead */
static void diagonal_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *g = go[0];
    if (!g) return;
    ts_tensor *z = ts_zeros(n->in_shape[0], (ts_opts){.dtype = g->dtype, .device = tsi_device(g)});
    if (!z) return;
    int64_t st[TS_MAX_DIMS], at;
    ts_shape s = diagonal_geometry(z, n->ip[0], (int)n->ip[1], (int)n->ip[2], st, &at);
    ts_tensor *part = tsi_own(tsi_view_of(z, s, st, at));
    ts_no_grad_begin();
    const bool ok = part && ts_copy_(part, g);
    ts_no_grad_end();
    if (!ok) return;
    ts_node *e = tsi_record("DiagonalBackwardBackward0", n->op, diagonal_backward_backward, &g, 1,
                            z, NULL, 0);
    if (e) {
        for (int i = 0; i < 3; i++) e->ip[i] = n->ip[i];
        e->flags |= TSI_NODE_TWICE; /* a diagonal of gg */
    }
    gi[0] = z;
}

ts_tensor *ts_diagonal(ts_tensor *t, int64_t offset, int dim1, int dim2) {
    const char *op = "diagonal";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    const int nd = t->shape.ndim;
    if (nd < 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: expected a tensor of at least 2 dims, got %s", op,
                             tsi_desc(t)),
               NULL;
    const int a = tsi_wrap_dim(op, dim1, nd), b = tsi_wrap_dim(op, dim2, nd);
    if (a < 0 || b < 0) return NULL;
    if (a == b)
        return tsi_error_set(TS_ERR_ARG, "%s: diagonal dimensions cannot be identical %d, %d", op,
                             dim1, dim2),
               NULL;
    int64_t st[TS_MAX_DIMS], at;
    ts_shape s = diagonal_geometry(t, offset, a, b, st, &at);
    ts_tensor *v = tsi_view_of(t, s, st, at);
    if (!v) return NULL;
    tsi_view_attach(t, v); /* in-place writes through it reach t's history (copy_slices.h) */
    ts_node *node = tsi_record("DiagonalBackward0", op, diagonal_backward, &t, 1, v, NULL, 0);
    if (node) node->ip[0] = offset, node->ip[1] = a, node->ip[2] = b, node->flags |= TSI_NODE_TWICE;
    const int64_t ip[3] = {offset, a, b};
    return tsi_own(tsi_trace(op, &t, 1, v, ip, 3, NULL, 0));
}

ts_tensor *ts_diag_embed(ts_tensor *t, int64_t offset, int dim1, int dim2) {
    const char *op = "diag_embed";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    const int nd = t->shape.ndim, od = nd + 1;
    if (nd < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: expected a tensor of at least 1 dim, got %s", op,
                             tsi_desc(t)),
               NULL;
    if (od > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_SHAPE, "%s: the result would have more than %d dims", op,
                             TS_MAX_DIMS),
               NULL;
    const int a = tsi_wrap_dim(op, dim1, od), b = tsi_wrap_dim(op, dim2, od);
    if (a < 0 || b < 0) return NULL;
    if (a == b)
        return tsi_error_set(TS_ERR_ARG, "%s: diagonal dimensions cannot be identical %d, %d", op,
                             dim1, dim2),
               NULL;
    const int64_t n = t->shape.dims[nd - 1], m = n + (offset < 0 ? -offset : offset);
    int64_t *v = host_alloc(op, m * m, sizeof *v);
    if (!v) return NULL;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < m; j++)
            v[i * m + j] = j - i == offset ? (offset >= 0 ? i : j) : n; /* n: the zero */
    ts_shape zs = t->shape, rs = t->shape;
    zs.dims[nd - 1] = 1;
    rs.ndim = od, rs.dims[nd - 1] = m, rs.dims[nd] = m;
    ts_scope_begin();
    ts_tensor *idx = index_on(t, v, m * m);
    free(v);
    ts_tensor *parts[2] = {t, ts_zeros(zs, opts_on(t, t->dtype))};
    ts_tensor *y = idx && parts[1] ? ts_index_select(ts_cat(parts, 2, nd - 1), nd - 1, idx) : NULL;
    y = y ? ts_reshape(y, rs) : NULL;
    return finish(y ? ts_movedim(y, TS_DIMS(od - 2, od - 1), TS_DIMS(a, b)) : NULL);
}

ts_tensor *ts_diag(ts_tensor *t, int64_t diagonal) {
    tsi_init();
    if (!tsi_check_input("diag", t, "input")) return NULL;
    if (t->shape.ndim == 1) return ts_diag_embed(t, diagonal, 0, 1);
    if (t->shape.ndim == 2) return ts_diagonal(t, diagonal, 0, 1);
    return tsi_error_set(TS_ERR_SHAPE, "diag(): Supports 1D or 2D tensors. Got %dD", t->shape.ndim),
           NULL;
}

ts_tensor *ts_diagflat(ts_tensor *t, int64_t offset) {
    tsi_init();
    if (!tsi_check_input("diagflat", t, "input")) return NULL;
    ts_scope_begin();
    ts_tensor *x = ts_reshape(t, reshape1(t));
    return finish(x ? ts_diag_embed(x, offset, 0, 1) : NULL);
}

/* ------------------------------------------------------------------ block_diag */
ts_tensor *ts_block_diag(ts_tensor *const *ts, int n) {
    const char *op = "block_diag";
    tsi_init();
    if (n < 1 || !ts)
        return tsi_error_set(TS_ERR_ARG, "%s: expected at least one tensor (got %d)", op, n), NULL;
    if (n > 1 << 16) return tsi_error_set(TS_ERR_ARG, "%s: %d tensors are too many", op, n), NULL;
    ts_dtype dt = TS_DTYPE_DEFAULT;
    int64_t rows = 0, cols = 0;
    for (int i = 0; i < n; i++) {
        if (!tsi_check_input(op, ts[i], "tensors")) return NULL;
        if (ts[i]->shape.ndim > 2)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: Input tensors must have 2 or fewer dimensions. Input %d has "
                                 "%d dimensions",
                                 op, i, ts[i]->shape.ndim),
                   NULL;
        const ts_dtype r = i == 0 ? ts[i]->dtype : ts_promote_types(dt, ts[i]->dtype);
        if (i > 0 && !tsi_check_promotion(op, r, dt, ts[i]->dtype)) return NULL;
        dt = r;
    }
    ts_device dev;
    if (!tsi_same_device(op, ts, n, false, &dev)) return NULL;
    ts_tensor **blocks = calloc((size_t)n, sizeof *blocks);
    if (!blocks) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op), NULL;
    ts_scope_begin();
    for (int i = 0; i < n; i++) {
        const ts_shape s = ts[i]->shape;
        const int64_t r = s.ndim == 2 ? s.dims[0] : 1, c = s.ndim == 0 ? 1 : s.dims[s.ndim - 1];
        blocks[i] = ts_reshape(ts_to_dtype(ts[i], dt), TS_SHAPE(r, c));
        rows += r, cols += c;
    }
    ts_tensor *rowv[3], **bands = calloc((size_t)n, sizeof *bands), *y = NULL;
    int nb = 0;
    for (int64_t i = 0, before = 0; bands && i < n && blocks[i]; i++) {
        const ts_shape s = ts_shape_of(blocks[i]);
        int np = 0;
        if (before > 0) rowv[np++] = ts_zeros(TS_SHAPE(s.dims[0], before), opts_on(ts[0], dt));
        rowv[np++] = blocks[i];
        if (cols - before - s.dims[1] > 0)
            rowv[np++] =
                ts_zeros(TS_SHAPE(s.dims[0], cols - before - s.dims[1]), opts_on(ts[0], dt));
        before += s.dims[1];
        if (s.dims[0] > 0) bands[nb++] = np == 1 ? rowv[0] : ts_cat(rowv, np, 1);
    }
    if (bands && ts_error() == TS_OK)
        y = nb > 0 ? ts_cat(bands, nb, 0) : ts_zeros(TS_SHAPE(0, cols), opts_on(ts[0], dt));
    free(blocks), free(bands);
    (void)rows;
    return finish(y);
}
