/* shape_more.c — PyTorch's shape and view forms (issue 52) composed from the differentiable ops
 * (index_select, cat, narrow, permute, reshape...), so that they run and differentiate on every
 * device: flip / fliplr / flipud / rot90 / roll, tril / triu, diagonal / diag / diag_embed /
 * diagflat, repeat_interleave, movedim, unfold, split_with_sizes / tensor_split, block_diag. The
 * indexing forms are index_more.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "autograd/copy_slices.h"
#include "autograd/trace.h"
#include "ops/shape_more_internal.h"

/* ------------------------------------------------------------------ flip, rot90, roll */
ts_tensor *ts_flip(ts_tensor *t, ts_dims dims) {
    const char *op = "flip";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (dims.n < 0 || dims.n > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_ARG, "%s: dims has %d entries", op, dims.n), NULL;
    bool seen[TS_MAX_DIMS] = {0};
    int wd[TS_MAX_DIMS];
    for (int i = 0; i < dims.n; i++) {
        wd[i] = tsi_wrap_dim(op, dims.d[i], t->shape.ndim);
        if (wd[i] < 0) return NULL;
        if (seen[wd[i]])
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: dim %d appears multiple times in the list of dims", op,
                                 wd[i]),
                   NULL;
        seen[wd[i]] = true;
    }
    ts_scope_begin();
    ts_tensor *y = t;
    for (int i = 0; i < dims.n && y && t->shape.ndim > 0; i++) {
        const int64_t n = t->shape.dims[wd[i]];
        if (n <= 1) continue;
        int64_t *v = host_alloc(op, n, sizeof *v);
        if (!v) break;
        for (int64_t k = 0; k < n; k++) v[k] = n - 1 - k;
        y = ts_index_select(y, wd[i], index_on(t, v, n));
        free(v);
    }
    if (y == t) y = ts_clone(t);
    return finish(y);
}

ts_tensor *ts_fliplr(ts_tensor *t) {
    tsi_init();
    if (!tsi_check_input("fliplr", t, "input")) return NULL;
    if (t->shape.ndim < 2)
        return tsi_error_set(TS_ERR_SHAPE, "fliplr: Input must be >= 2-d (input: %s)", tsi_desc(t)),
               NULL;
    return ts_flip(t, TS_DIMS(1));
}

ts_tensor *ts_flipud(ts_tensor *t) {
    tsi_init();
    if (!tsi_check_input("flipud", t, "input")) return NULL;
    if (t->shape.ndim < 1)
        return tsi_error_set(TS_ERR_SHAPE, "flipud: Input must be >= 1-d (input: %s)", tsi_desc(t)),
               NULL;
    return ts_flip(t, TS_DIMS(0));
}

ts_tensor *ts_rot90(ts_tensor *t, int64_t k, int d0, int d1) {
    const char *op = "rot90";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (t->shape.ndim < 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: expected total dims >= 2, but got total dims = %d",
                             op, t->shape.ndim),
               NULL;
    const int a = tsi_wrap_dim(op, d0, t->shape.ndim), b = tsi_wrap_dim(op, d1, t->shape.ndim);
    if (a < 0 || b < 0) return NULL;
    if (a == b)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: expected rotation dims to be different, got %d and %d", op, d0,
                             d1),
               NULL;
    const int64_t q = ((k % 4) + 4) % 4;
    ts_scope_begin();
    ts_tensor *y;
    if (q == 1)
        y = ts_transpose(ts_flip(t, TS_DIMS(b)), a, b);
    else if (q == 2)
        y = ts_flip(t, TS_DIMS(a, b));
    else if (q == 3)
        y = ts_transpose(ts_flip(t, TS_DIMS(a)), a, b);
    else
        y = ts_clone(t);
    return finish(y);
}

static ts_tensor *roll_dim(ts_tensor *x, int d, int64_t shift) {
    const int64_t n = ts_shape_of(x).dims[d];
    if (n == 0) return x;
    const int64_t s = ((shift % n) + n) % n;
    if (s == 0) return x;
    ts_tensor *parts[2] = {ts_narrow(x, d, n - s, s), ts_narrow(x, d, 0, n - s)};
    return parts[0] && parts[1] ? ts_cat(parts, 2, d) : NULL;
}

ts_tensor *ts_roll(ts_tensor *t, const int64_t *shifts, int nshifts, ts_dims dims) {
    const char *op = "roll";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (nshifts < 1 || !shifts) return tsi_error_set(TS_ERR_ARG, "%s: `shifts` required", op), NULL;
    if (dims.n < 0 || dims.n > TS_MAX_DIMS || (dims.n == 0 && nshifts != 1) ||
        (dims.n > 0 && nshifts != dims.n))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: shifts and dimensions must align. shifts: %d, dims:%d", op,
                             nshifts, dims.n),
               NULL;
    int wd[TS_MAX_DIMS];
    for (int i = 0; i < dims.n; i++)
        if ((wd[i] = tsi_wrap_dim(op, dims.d[i], t->shape.ndim)) < 0) return NULL;
    ts_scope_begin();
    ts_tensor *y;
    if (dims.n == 0) {
        y = roll_dim(ts_reshape(t, reshape1(t)), 0, shifts[0]);
        y = y ? ts_reshape(y, t->shape) : NULL;
    } else {
        ts_tensor *x = t->shape.ndim == 0 ? ts_reshape(t, TS_SHAPE(1)) : t;
        y = x;
        for (int i = 0; i < dims.n && y; i++) y = roll_dim(y, t->shape.ndim ? wd[i] : 0, shifts[i]);
        if (y && t->shape.ndim == 0) y = ts_reshape(y, t->shape);
    }
    if (y && ts_shares_storage(y, t)) y = ts_clone(y);
    return finish(y);
}

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
ts_tensor *ts_movedim(ts_tensor *t, ts_dims src, ts_dims dst) {
    const char *op = "movedim";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    const int nd = t->shape.ndim;
    if (src.n != dst.n || src.n < 0 || src.n > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Invalid source or destination dims: source (%d dims) should "
                             "contain the same number of dims as destination (%d dims)",
                             op, src.n, dst.n),
               NULL;
    int perm[TS_MAX_DIMS], used_src[TS_MAX_DIMS] = {0};
    for (int i = 0; i < TS_MAX_DIMS; i++) perm[i] = -1;
    for (int i = 0; i < src.n; i++) {
        const int s = tsi_wrap_dim(op, src.d[i], nd), d = tsi_wrap_dim(op, dst.d[i], nd);
        if (s < 0 || d < 0) return NULL;
        if (nd == 0) continue;
        if (used_src[s])
            return tsi_error_set(TS_ERR_ARG, "%s: repeated dim in `source` (%d)", op, src.d[i]),
                   NULL;
        if (perm[d] >= 0)
            return tsi_error_set(TS_ERR_ARG, "%s: repeated dim in `destination` (%d)", op,
                                 dst.d[i]),
                   NULL;
        used_src[s] = 1, perm[d] = s;
    }
    if (nd == 0) return ts_view(t, t->shape);
    int next = 0;
    for (int d = 0; d < nd; d++) {
        if (perm[d] >= 0) continue;
        while (used_src[next]) next++;
        perm[d] = next++;
    }
    ts_dims p = {.n = nd};
    for (int d = 0; d < nd; d++) p.d[d] = perm[d];
    return ts_permute(t, p);
}

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

/* ------------------------------------------------------------------ repeat_interleave, unfold */
/* x repeated along d by reps (one value: every element; else one per element) */
static ts_tensor *repeat_run(const char *op, ts_tensor *t, const int64_t *reps, int64_t nreps,
                             bool has_dim, int dim) {
    ts_tensor *x = t;
    int d = 0;
    if (!has_dim || t->shape.ndim == 0) {
        if (has_dim && tsi_wrap_dim(op, dim, t->shape.ndim) < 0) return NULL;
        x = NULL;
    } else if ((d = tsi_wrap_dim(op, dim, t->shape.ndim)) < 0)
        return NULL;
    const int64_t n = x ? t->shape.dims[d] : ts_numel(t);
    if (nreps != 1 && nreps != n)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: repeats must have the same size as input along dim, but got "
                             "repeats.size(0) = %lld and input.size(%d) = %lld",
                             op, (long long)nreps, d, (long long)n),
               NULL;
    int64_t total = 0;
    for (int64_t i = 0; i < nreps; i++) {
        if (reps[i] < 0)
            return tsi_error_set(TS_ERR_ARG, "%s: repeats can not be negative (got %lld)", op,
                                 (long long)reps[i]),
                   NULL;
        total += reps[i];
    }
    if (nreps == 1) total = reps[0] * n;
    int64_t *v = host_alloc(op, total, sizeof *v);
    if (!v) return NULL;
    for (int64_t i = 0, k = 0; i < n; i++)
        for (int64_t r = 0; r < reps[nreps == 1 ? 0 : i]; r++) v[k++] = i;
    ts_scope_begin();
    ts_tensor *idx = index_on(t, v, total);
    free(v);
    if (!x) x = ts_reshape(t, reshape1(t));
    return finish(idx && x ? ts_index_select(x, d, idx) : NULL);
}

ts_tensor *ts_repeat_interleave(ts_tensor *t, int64_t repeats, bool has_dim, int dim) {
    tsi_init();
    if (!tsi_check_input("repeat_interleave", t, "input")) return NULL;
    return repeat_run("repeat_interleave", t, &repeats, 1, has_dim, dim);
}

ts_tensor *ts_repeat_interleave_tensor(ts_tensor *t, ts_tensor *repeats, bool has_dim, int dim) {
    const char *op = "repeat_interleave";
    tsi_init();
    if (!check_two(op, t, "input", repeats, "repeats") ||
        !check_index_dtype(op, repeats, "repeats"))
        return NULL;
    if (repeats->shape.ndim > 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: repeats must be 0-dim or 1-dim tensor (got %s)", op,
                             tsi_shape_str(repeats->shape)),
               NULL;
    ts_scope_begin();
    int64_t *r = host_i64(op, repeats);
    ts_tensor *y = r ? repeat_run(op, t, r, ts_numel(repeats), has_dim, dim) : NULL;
    free(r);
    return finish(y);
}

ts_tensor *ts_unfold(ts_tensor *t, int dim, int64_t size, int64_t step) {
    const char *op = "unfold";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return NULL;
    const int64_t n = t->shape.ndim ? t->shape.dims[d] : 1;
    if (step <= 0)
        return tsi_error_set(TS_ERR_ARG, "%s: step is %lld but must be > 0", op, (long long)step),
               NULL;
    if (size < 0 || size > n)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: maximum size for tensor at dimension %d is %lld but size is %lld",
                             op, d, (long long)n, (long long)size),
               NULL;
    if (t->shape.ndim >= TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_SHAPE, "%s: the result would have more than %d dims", op,
                             TS_MAX_DIMS),
               NULL;
    const int64_t windows = (n - size) / step + 1;
    int64_t *v = host_alloc(op, windows * size, sizeof *v);
    if (!v) return NULL;
    for (int64_t w = 0; w < windows; w++)
        for (int64_t j = 0; j < size; j++) v[w * size + j] = w * step + j;
    ts_scope_begin();
    ts_tensor *idx = index_on(t, v, windows * size);
    free(v);
    ts_tensor *y = NULL;
    if (idx && t->shape.ndim == 0) {
        y = ts_index_select(ts_reshape(t, TS_SHAPE(1)), 0, idx);
    } else if (idx) {
        y = ts_index_select(t, d, idx);
        ts_shape s = {.ndim = t->shape.ndim + 1};
        for (int i = 0, j = 0; i < t->shape.ndim; i++) {
            if (i == d)
                s.dims[j++] = windows, s.dims[j++] = size;
            else
                s.dims[j++] = t->shape.dims[i];
        }
        y = y ? ts_reshape(y, s) : NULL;
        y = y ? ts_movedim(y, TS_DIMS(d + 1), TS_DIMS(-1)) : NULL;
    }
    return finish(y);
}

/* ------------------------------------------------------------------ splits */
static int split_check(const char *op, ts_tensor *t, int dim, ts_tensor **out, int max_out) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return -1;
    if (max_out < 0 || (max_out > 0 && !out))
        return tsi_error_set(TS_ERR_ARG, "%s: out is NULL or max_out (%d) is negative", op,
                             max_out),
               -1;
    if (t->shape.ndim == 0)
        return tsi_error_set(
                   TS_ERR_SHAPE,
                   "%s: expected at least a 1-dimensional tensor, but got a tensor with 0 "
                   "dims",
                   op),
               -1;
    return tsi_wrap_dim(op, dim, t->shape.ndim);
}

/* the pieces [start[i], start[i] + len[i]) along d; multi: PyTorch's name of the op when its
 * pieces are the outputs of one multi-output view op (not modifiable in place when recorded),
 * NULL when they are separate slices (tensor_split) */
static int emit(ts_tensor *t, int d, const int64_t *start, const int64_t *len, int64_t count,
                ts_tensor **out, int max_out, const char *multi) {
    if (count > 1 << 20)
        return tsi_error_set(TS_ERR_ARG, "split: %lld pieces are too many", (long long)count), -1;
    for (int64_t i = 0; i < count && i < max_out; i++) {
        out[i] = ts_narrow(t, d, start[i], len[i]);
        if (!out[i]) return -1; /* as ts_split: the pieces written belong to the caller */
        if (multi) tsi_view_mark_multi(out[i], multi, (int)i);
    }
    return (int)count;
}

int ts_split_with_sizes(ts_tensor *t, const int64_t *sizes, int n, int dim, ts_tensor **out,
                        int max_out) {
    const char *op = "split_with_sizes";
    const int d = split_check(op, t, dim, out, max_out);
    if (d < 0) return -1;
    if (n < 0 || (n > 0 && !sizes))
        return tsi_error_set(TS_ERR_ARG, "%s: split_sizes is NULL or n (%d) is negative", op, n),
               -1;
    const int64_t size = t->shape.dims[d];
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: split_sizes must be non-negative, but got split_sizes[%d] = "
                                 "%lld",
                                 op, i, (long long)sizes[i]),
                   -1;
        sum += sizes[i];
    }
    if (sum != size)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: split_with_sizes expects split_sizes to sum exactly to %lld "
                             "(input tensor's size at dimension %d), but got a sum of %lld",
                             op, (long long)size, d, (long long)sum),
               -1;
    int64_t *start = host_alloc(op, n, sizeof *start);
    if (!start) return -1;
    if (n > 0) start[0] = 0;
    for (int i = 1; i < n; i++) start[i] = start[i - 1] + sizes[i - 1];
    const int r = emit(t, d, start, sizes, n, out, max_out, "SplitWithSizes");
    free(start);
    return r;
}

int ts_tensor_split_indices(ts_tensor *t, const int64_t *indices, int n, int dim, ts_tensor **out,
                            int max_out) {
    const char *op = "tensor_split";
    const int d = split_check(op, t, dim, out, max_out);
    if (d < 0) return -1;
    if (n < 0 || (n > 0 && !indices))
        return tsi_error_set(TS_ERR_ARG, "%s: indices is NULL or n (%d) is negative", op, n), -1;
    const int64_t size = t->shape.dims[d];
    int64_t *start = host_alloc(op, 2 * ((int64_t)n + 1), sizeof *start), *len = start + n + 1;
    if (!start) return -1;
    for (int i = 0; i <= n; i++) {
        int64_t a = i == 0 ? 0 : indices[i - 1], b = i == n ? size : indices[i];
        a = a < 0 ? (a + size < 0 ? 0 : a + size) : (a > size ? size : a);
        b = b < 0 ? (b + size < 0 ? 0 : b + size) : (b > size ? size : b);
        start[i] = a, len[i] = b > a ? b - a : 0;
    }
    const int r = emit(t, d, start, len, (int64_t)n + 1, out, max_out, NULL);
    free(start);
    return r;
}

int ts_tensor_split_sections(ts_tensor *t, int64_t sections, int dim, ts_tensor **out,
                             int max_out) {
    const char *op = "tensor_split";
    const int d = split_check(op, t, dim, out, max_out);
    if (d < 0) return -1;
    if (sections <= 0 || sections > 1 << 20)
        return tsi_error_set(TS_ERR_ARG, "%s: number of sections must be larger than 0, got %lld",
                             op, (long long)sections),
               -1;
    const int64_t size = t->shape.dims[d], base = size / sections, extra = size % sections;
    int64_t *start = host_alloc(op, 2 * sections, sizeof *start), *len = start + sections;
    if (!start) return -1;
    for (int64_t i = 0, s = 0; i < sections; i++) {
        len[i] = base + (i < extra ? 1 : 0);
        start[i] = s, s += len[i];
    }
    const int r = emit(t, d, start, len, sections, out, max_out, NULL);
    free(start);
    return r;
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
