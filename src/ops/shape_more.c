/* shape_more.c — PyTorch's shape, view and indexing forms (issue 52) composed from the
 * differentiable ops (index_select, cat, narrow, permute, reshape, masked_fill, amax...), so that
 * they run and differentiate on every device: flip / fliplr / flipud / rot90 / roll, tril / triu,
 * diagonal / diag / diag_embed / diagflat, repeat_interleave, movedim, unfold, split_with_sizes /
 * tensor_split, take / take_along_dim, index_add / index_copy / index_fill, scatter /
 * scatter_reduce, nonzero, masked_select / masked_scatter, block_diag. Index plans that depend on
 * the values of an index or mask are built on the host (one read of the index), then gathered on
 * the tensor's device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "ops/index_check.h"

/* ------------------------------------------------------------------ helpers */
static ts_tensor *finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

static ts_opts opts_on(ts_tensor *t, ts_dtype dt) {
    ts_opts o = {0};
    o.dtype = dt;
    o.device = ts_device_of(t);
    return o;
}

/* a 1-D int64 tensor on t's device holding v[0..n) (inside a scope) */
static ts_tensor *index_on(ts_tensor *t, const int64_t *v, int64_t n) {
    static const int64_t none = 0;
    return ts_from_data(TS_SHAPE(n), TS_I64, n ? v : &none, opts_on(t, TS_I64));
}

/* a bool tensor of shape s on t's device from v (inside a scope) */
static ts_tensor *mask_on(ts_tensor *t, ts_shape s, const bool *v) {
    static const bool none = false;
    return ts_from_data(s, TS_BOOL, tsi_numel(s) ? v : &none, opts_on(t, TS_BOOL));
}

static void *host_alloc(const char *op, int64_t n, size_t elem) {
    void *p = malloc((size_t)(n > 0 ? n : 1) * elem);
    if (!p) tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %lld elements", op, (long long)n);
    return p;
}

/* t's values as int64 on the host, row-major (malloc'ed; NULL with the error set); inside a
 * scope */
static int64_t *host_i64(const char *op, ts_tensor *t) {
    const int64_t n = ts_numel(t);
    int64_t *v = host_alloc(op, n, sizeof *v);
    if (!v || n == 0) return v;
    ts_tensor *x = ts_contiguous(ts_to(ts_to_dtype(t, TS_I64), ts_cpu()));
    if (!x || ts_copy_to_host(x, v, (size_t)n * sizeof *v) != TS_OK) return free(v), NULL;
    return v;
}

/* t != 0 on the host, row-major (malloc'ed); inside a scope */
static bool *host_bool(const char *op, ts_tensor *t) {
    const int64_t n = ts_numel(t);
    bool *v = host_alloc(op, n, sizeof *v);
    if (!v || n == 0) return v;
    ts_tensor *x = ts_to_dtype(t, TS_BOOL);
    x = x ? ts_contiguous(ts_to(x, ts_cpu())) : NULL;
    if (!x || ts_copy_to_host(x, v, (size_t)n) != TS_OK) return free(v), NULL;
    return v;
}

static bool check_index_dtype(const char *op, ts_tensor *index, const char *what) {
    if (tsi_is_int(index->dtype)) return true;
    tsi_error_set(TS_ERR_DTYPE, "%s: expected an integer tensor for %s, got %s", op, what,
                  ts_dtype_name(index->dtype));
    return false;
}

static bool check_two(const char *op, ts_tensor *a, const char *an, ts_tensor *b, const char *bn) {
    if (!tsi_check_input(op, a, an) || !tsi_check_input(op, b, bn)) return false;
    ts_tensor *ops[2] = {a, b};
    ts_device dev;
    return tsi_same_device(op, ops, 2, false, &dev);
}

static ts_shape reshape1(ts_tensor *t) { return TS_SHAPE(ts_numel(t)); }

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
    const int64_t n = t->shape.dims[a], m = t->shape.dims[b];
    int64_t len =
        offset >= 0 ? (n < m - offset ? n : m - offset) : (n + offset < m ? n + offset : m);
    if (len < 0) len = 0;
    const int64_t r0 = offset >= 0 ? 0 : -offset, c0 = offset >= 0 ? offset : 0;
    int64_t *v = host_alloc(op, len, sizeof *v);
    if (!v) return NULL;
    for (int64_t i = 0; i < len; i++) v[i] = (i + r0) * m + (i + c0);
    ts_dims p = {.n = nd};
    ts_shape s = {.ndim = nd - 1};
    for (int d = 0, j = 0; d < nd; d++)
        if (d != a && d != b) p.d[j] = d, s.dims[j] = t->shape.dims[d], j++;
    p.d[nd - 2] = a, p.d[nd - 1] = b, s.dims[nd - 2] = n * m;
    ts_scope_begin();
    ts_tensor *idx = index_on(t, v, len);
    free(v);
    ts_tensor *x = idx ? ts_reshape(ts_permute(t, p), s) : NULL;
    return finish(x ? ts_index_select(x, nd - 2, idx) : NULL);
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

/* the pieces [start[i], start[i] + len[i]) along d */
static int emit(ts_tensor *t, int d, const int64_t *start, const int64_t *len, int64_t count,
                ts_tensor **out, int max_out) {
    if (count > 1 << 20)
        return tsi_error_set(TS_ERR_ARG, "split: %lld pieces are too many", (long long)count), -1;
    for (int64_t i = 0; i < count && i < max_out; i++) {
        out[i] = ts_narrow(t, d, start[i], len[i]);
        if (!out[i]) return -1; /* as ts_split: the pieces written belong to the caller */
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
    const int r = emit(t, d, start, sizes, n, out, max_out);
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
    const int r = emit(t, d, start, len, (int64_t)n + 1, out, max_out);
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
    const int r = emit(t, d, start, len, sections, out, max_out);
    free(start);
    return r;
}

/* ------------------------------------------------------------------ take */
ts_tensor *ts_take(ts_tensor *t, ts_tensor *index) {
    const char *op = "take";
    tsi_init();
    if (!check_two(op, t, "input", index, "index") || !check_index_dtype(op, index, "index"))
        return NULL;
    const int64_t n = ts_numel(t), e = ts_numel(index);
    ts_scope_begin();
    int64_t *v = host_i64(op, index);
    for (int64_t i = 0; v && i < e; i++) {
        if (v[i] < -n || v[i] >= n) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: out of range: tried to access index %lld on a tensor of "
                          "%lld elements",
                          op, (long long)v[i], (long long)n);
            break;
        }
        if (v[i] < 0) v[i] += n;
    }
    ts_tensor *idx = v && ts_error() == TS_OK ? index_on(t, v, e) : NULL;
    free(v);
    ts_tensor *y = idx ? ts_index_select(ts_reshape(t, TS_SHAPE(n)), 0, idx) : NULL;
    return finish(y ? ts_reshape(y, index->shape) : NULL);
}

/* int64 indices with the negative ones counted from the end (size); inside a scope */
static ts_tensor *wrap_negative(ts_tensor *i, int64_t size) {
    ts_tensor *neg = i ? ts_lt_scalar(i, 0) : NULL;
    ts_tensor *up = neg ? ts_add_scalar(i, (double)size) : NULL;
    if (up && ts_dtype_of(up) != TS_I64) up = ts_to_dtype(up, TS_I64);
    return up ? ts_where(neg, up, i) : NULL;
}

ts_tensor *ts_take_along_dim(ts_tensor *t, ts_tensor *index, bool has_dim, int dim) {
    const char *op = "take_along_dim";
    tsi_init();
    if (!check_two(op, t, "input", index, "indices")) return NULL;
    if (index->dtype != TS_I64)
        return tsi_error_set(TS_ERR_DTYPE, "%s: dtype of indices should be int64 but got %s", op,
                             ts_dtype_name(index->dtype)),
               NULL;
    if (!has_dim) {
        ts_scope_begin();
        ts_tensor *x = ts_reshape(t, reshape1(t));
        ts_tensor *i = wrap_negative(ts_reshape(index, reshape1(index)), ts_numel(t));
        return finish(x && i ? ts_gather(x, 0, i) : NULL);
    }
    if (t->shape.ndim != index->shape.ndim)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: input and indices should have the same number of dimensions, "
                             "but got %d dimensions for input, and %d dimensions for indices",
                             op, t->shape.ndim, index->shape.ndim),
               NULL;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0) return NULL;
    ts_shape ts_ = t->shape, is = index->shape;
    for (int k = 0; k < t->shape.ndim; k++) {
        if (k == d) continue;
        const int64_t a = t->shape.dims[k], b = index->shape.dims[k];
        if (a != b && a != 1 && b != 1)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: input %s and indices %s cannot be broadcast apart from "
                                 "dim %d",
                                 op, tsi_shape_str(t->shape), tsi_shape_str(index->shape), d),
                   NULL;
        ts_.dims[k] = is.dims[k] = a == 1 ? b : a;
    }
    ts_scope_begin();
    ts_tensor *x = ts_expand(t, ts_), *i = ts_expand(wrap_negative(index, t->shape.dims[d]), is);
    return finish(x && i ? ts_gather(x, d, i) : NULL);
}

/* ------------------------------------------------------------------ scatter family core */
enum sc_mode { SC_LAST, SC_SUM, SC_PROD, SC_MEAN, SC_AMAX, SC_AMIN };

static int nd1(const ts_tensor *t) { return t->shape.ndim > 0 ? t->shape.ndim : 1; }
static int64_t sz1(const ts_tensor *t, int k) { return t->shape.ndim > 0 ? t->shape.dims[k] : 1; }

/* For each index element (row-major) the flat positions it writes (in t) and reads (in src,
 * contiguous); inside a scope. false with the error set. */
static bool sc_positions(const char *op, ts_tensor *t, int d, ts_tensor *index, ts_tensor *src,
                         int64_t *opos, int64_t *spos) {
    const int64_t e = ts_numel(index);
    if (e == 0) return true;
    int64_t *iv = host_i64(op, index);
    if (!iv) return false;
    const int nd = nd1(t);
    int64_t tst[TS_MAX_DIMS], sst[TS_MAX_DIMS], c[TS_MAX_DIMS] = {0};
    int64_t ta = 1, sa = 1;
    for (int k = nd - 1; k >= 0; k--) tst[k] = ta, sst[k] = sa, ta *= sz1(t, k), sa *= sz1(src, k);
    const int64_t size = sz1(t, d);
    bool ok = true;
    for (int64_t i = 0; i < e; i++) {
        if (iv[i] < 0 || iv[i] >= size) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: index %lld is out of bounds for dimension %d with size "
                          "%lld",
                          op, (long long)iv[i], d, (long long)size);
            ok = false;
            break;
        }
        int64_t o = 0, s = 0;
        for (int k = 0; k < nd; k++) o += (k == d ? iv[i] : c[k]) * tst[k], s += c[k] * sst[k];
        opos[i] = o, spos[i] = s;
        for (int k = nd - 1; k >= 0; k--) {
            if (++c[k] < sz1(index, k)) break;
            c[k] = 0;
        }
    }
    free(iv);
    return ok;
}

/* scatter with mode: SC_LAST writes (the last of repeated positions wins, as PyTorch's CPU);
 * the others reduce the sources of each position (with t's value when include_self). Every
 * position gathers its candidates from [src, t, sentinel] and reduces them along a row. */
static ts_tensor *scatter_core(const char *op, ts_tensor *t, int d, ts_tensor *index,
                               ts_tensor *src, int mode, bool include_self) {
    const int64_t n = ts_numel(t), s = ts_numel(src), e = ts_numel(index);
    const bool is_float = tsi_is_float(t->dtype);
    int64_t *opos = host_alloc(op, 2 * e, sizeof *opos), *spos = opos ? opos + e : NULL;
    int64_t *cnt = calloc((size_t)(n > 0 ? n : 1), sizeof *cnt);
    bool *has = host_alloc(op, n, sizeof *has);
    int64_t *g = NULL;
    ts_tensor *y = NULL;
    ts_scope_begin();
    if (!opos || !cnt || !has || !sc_positions(op, t, d, index, src, opos, spos)) {
        if (!cnt) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        goto done;
    }
    for (int64_t i = 0; i < e; i++) cnt[opos[i]]++;
    int64_t k = 0;
    for (int64_t o = 0; o < n; o++) {
        has[o] = cnt[o] > 0;
        k = cnt[o] > k ? cnt[o] : k;
    }
    if (mode == SC_LAST)
        k = 1;
    else
        k += include_self ? 1 : 0;
    if (k == 0) k = 1;
    if (!(g = host_alloc(op, n * k, sizeof *g))) goto done;
    const int64_t sentinel = s + n;
    if (mode == SC_LAST) {
        for (int64_t o = 0; o < n; o++) g[o] = s + o;
        for (int64_t i = 0; i < e; i++) g[opos[i]] = spos[i];
    } else {
        int64_t *fill = calloc((size_t)(n > 0 ? n : 1), sizeof *fill);
        if (!fill) {
            tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
            goto done;
        }
        for (int64_t i = 0; i < e; i++) g[opos[i] * k + fill[opos[i]]++] = spos[i];
        for (int64_t o = 0; o < n; o++) {
            int64_t j = fill[o];
            if (include_self) g[o * k + j++] = s + o;
            /* integers (no gradient) pad amax / amin with the row's first candidate */
            const bool own = !is_float && (mode == SC_AMAX || mode == SC_AMIN) && j > 0;
            for (int64_t r = j; r < k; r++) g[o * k + r] = own ? g[o * k] : sentinel;
        }
        free(fill);
    }
    double sv = 0;
    if (mode == SC_PROD) sv = 1;
    if (mode == SC_AMAX) sv = is_float ? -INFINITY : 0;
    if (mode == SC_AMIN) sv = is_float ? INFINITY : 0;
    ts_tensor *parts[3] = {ts_reshape(ts_contiguous(src), TS_SHAPE(s)), ts_reshape(t, TS_SHAPE(n)),
                           ts_full(TS_SHAPE(1), sv, opts_on(t, t->dtype))};
    ts_tensor *gi = index_on(t, g, n * k);
    if (!parts[0] || !parts[1] || !parts[2] || !gi) goto done;
    ts_tensor *v = ts_index_select(ts_cat(parts, 3, 0), 0, gi);
    if (mode == SC_LAST) {
        y = v;
    } else {
        v = v ? ts_reshape(v, TS_SHAPE(n, k)) : NULL;
        if (mode == SC_SUM || mode == SC_MEAN) y = v ? ts_sum_dim(v, 1, false) : NULL;
        if (mode == SC_PROD) y = v ? ts_prod_dim(v, 1, false) : NULL;
        if (mode == SC_AMAX) y = v ? ts_amax_dim(v, 1, false) : NULL;
        if (mode == SC_AMIN) y = v ? ts_amin_dim(v, 1, false) : NULL;
        if (y && ts_dtype_of(y) != t->dtype) y = ts_to_dtype(y, t->dtype);
        if (y && mode == SC_MEAN) {
            for (int64_t o = 0; o < n; o++) cnt[o] += include_self ? 1 : 0;
            for (int64_t o = 0; o < n; o++) cnt[o] = cnt[o] > 0 ? cnt[o] : 1;
            ts_tensor *c = ts_to_dtype(index_on(t, cnt, n), t->dtype);
            y = c ? (is_float ? ts_div(y, c) : ts_floor_divide(y, c)) : NULL;
        }
        if (y && !include_self) {
            ts_tensor *m = mask_on(t, TS_SHAPE(n), has);
            y = m ? ts_where(m, y, parts[1]) : NULL;
        }
    }
    y = y ? ts_reshape(y, t->shape) : NULL;
done:
    free(opos), free(cnt), free(has), free(g);
    return finish(y);
}

static int reduce_mode(const char *op, const char *reduce, bool scatter_form) {
    static const char *const names[] = {"sum", "prod", "mean", "amax", "amin"};
    static const int modes[] = {SC_SUM, SC_PROD, SC_MEAN, SC_AMAX, SC_AMIN};
    if (scatter_form) {
        if (!reduce) return SC_LAST;
        if (!strcmp(reduce, "add")) return SC_SUM;
        if (!strcmp(reduce, "multiply")) return SC_PROD;
        return tsi_error_set(TS_ERR_ARG,
                             "%s: reduce argument must be either add or multiply, got %s", op,
                             reduce),
               -1;
    }
    for (int i = 0; reduce && i < 5; i++)
        if (!strcmp(reduce, names[i])) return modes[i];
    return tsi_error_set(TS_ERR_ARG,
                         "%s: reduce argument must be either sum, prod, mean, amax or amin, got %s",
                         op, reduce ? reduce : "NULL"),
           -1;
}

static ts_tensor *in_place_result(ts_tensor *t, ts_tensor *y) {
    ts_scope_begin();
    ts_tensor *r = y ? ts_copy_(t, y) : NULL;
    return finish(r);
}

ts_tensor *ts_scatter(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src, const char *reduce) {
    const int d = tsi_scatter_check("scatter", t, dim, index, src);
    const int mode = d < 0 ? -1 : reduce_mode("scatter", reduce, true);
    return mode < 0 ? NULL : scatter_core("scatter", t, d, index, src, mode, true);
}

ts_tensor *ts_scatter_(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src,
                       const char *reduce) {
    ts_scope_begin();
    ts_tensor *y = ts_scatter(t, dim, index, src, reduce);
    return finish(y ? in_place_result(t, y) : NULL);
}

ts_tensor *ts_scatter_value(ts_tensor *t, int dim, ts_tensor *index, double value,
                            const char *reduce) {
    tsi_init();
    if (!check_two("scatter", t, "self", index, "index")) return NULL;
    ts_scope_begin();
    ts_tensor *src = ts_full(index->shape, value, opts_on(t, t->dtype));
    return finish(src ? ts_scatter(t, dim, index, src, reduce) : NULL);
}

ts_tensor *ts_scatter_value_(ts_tensor *t, int dim, ts_tensor *index, double value,
                             const char *reduce) {
    ts_scope_begin();
    ts_tensor *y = ts_scatter_value(t, dim, index, value, reduce);
    return finish(y ? in_place_result(t, y) : NULL);
}

ts_tensor *ts_scatter_reduce(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src,
                             const char *reduce, bool include_self) {
    const int d = tsi_scatter_check("scatter_reduce", t, dim, index, src);
    const int mode = d < 0 ? -1 : reduce_mode("scatter_reduce", reduce, false);
    return mode < 0 ? NULL : scatter_core("scatter_reduce", t, d, index, src, mode, include_self);
}

ts_tensor *ts_scatter_reduce_(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src,
                              const char *reduce, bool include_self) {
    ts_scope_begin();
    ts_tensor *y = ts_scatter_reduce(t, dim, index, src, reduce, include_self);
    return finish(y ? in_place_result(t, y) : NULL);
}

/* ------------------------------------------------------------------ index_add / copy / fill */
/* index_X's checks: the wrapped dim or -1 */
static int index_check(const char *op, ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src) {
    tsi_init();
    if (!tsi_check_input(op, t, "self") || !tsi_check_input(op, index, "index") ||
        (src && !tsi_check_input(op, src, "source")))
        return -1;
    ts_tensor *ops[3] = {t, index, src};
    ts_device dev;
    if (!tsi_same_device(op, ops, src ? 3 : 2, false, &dev)) return -1;
    if (index->dtype != TS_I64 && index->dtype != TS_I32)
        return tsi_error_set(TS_ERR_DTYPE, "%s: Expected dtype int32/int64 for index, got %s", op,
                             ts_dtype_name(index->dtype)),
               -1;
    if (index->shape.ndim > 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: Index is supposed to be a vector, got %s", op,
                             tsi_shape_str(index->shape)),
               -1;
    const int d = tsi_wrap_dim(op, dim, t->shape.ndim);
    if (d < 0 || !src) return d;
    if (src->dtype != t->dtype)
        return tsi_error_set(TS_ERR_DTYPE, "%s: self (%s) and source (%s) must have the same dtype",
                             op, ts_dtype_name(t->dtype), ts_dtype_name(src->dtype)),
               -1;
    bool ok = nd1(src) == nd1(t) && sz1(src, d) == ts_numel(index);
    for (int k = 0; ok && k < nd1(t); k++) ok = k == d || sz1(src, k) == sz1(t, k);
    if (!ok)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: source %s should have self's shape %s apart from dim %d, of size "
                             "the number of indices (%lld)",
                             op, tsi_shape_str(src->shape), tsi_shape_str(t->shape), d,
                             (long long)ts_numel(index)),
               -1;
    return d;
}

/* index broadcast over src's shape along d (int64, contiguous); inside a scope */
static ts_tensor *index_spread(ts_tensor *index, int d, ts_tensor *src) {
    ts_shape vs = src->shape;
    for (int k = 0; k < vs.ndim; k++) vs.dims[k] = k == d ? ts_numel(index) : 1;
    ts_tensor *i = ts_to_dtype(index, TS_I64);
    i = i ? ts_reshape(i, vs) : NULL;
    return i ? ts_contiguous(ts_expand(i, src->shape)) : NULL;
}

static ts_tensor *index_add_run(const char *op, ts_tensor *t, int dim, ts_tensor *index,
                                ts_tensor *src, double alpha, bool in_place) {
    const int d = index_check(op, t, dim, index, src);
    if (d < 0) return NULL;
    ts_scope_begin();
    ts_tensor *sv = alpha == 1.0 ? src : ts_mul_scalar(src, alpha);
    if (sv && ts_dtype_of(sv) != t->dtype) sv = ts_to_dtype(sv, t->dtype);
    ts_tensor *i = sv ? index_spread(index, d, src) : NULL;
    ts_tensor *y = NULL;
    if (i) y = in_place ? ts_scatter_add_(t, d, i, sv) : ts_scatter_add(t, d, i, sv);
    return finish(y);
}

ts_tensor *ts_index_add(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src, double alpha) {
    return index_add_run("index_add", t, dim, index, src, alpha, false);
}
ts_tensor *ts_index_add_(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src, double alpha) {
    return index_add_run("index_add_", t, dim, index, src, alpha, true);
}

ts_tensor *ts_index_copy(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src) {
    const char *op = "index_copy";
    const int d = index_check(op, t, dim, index, src);
    if (d < 0) return NULL;
    ts_scope_begin();
    ts_tensor *i = index_spread(index, d, src);
    return finish(i ? scatter_core(op, t, d, i, src, SC_LAST, true) : NULL);
}

ts_tensor *ts_index_copy_(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src) {
    ts_scope_begin();
    ts_tensor *y = ts_index_copy(t, dim, index, src);
    return finish(y ? in_place_result(t, y) : NULL);
}

static ts_tensor *index_fill_run(const char *op, ts_tensor *t, int dim, ts_tensor *index,
                                 double value, bool in_place) {
    const int d = index_check(op, t, dim, index, NULL);
    if (d < 0) return NULL;
    const int64_t n = sz1(t, d), e = ts_numel(index);
    ts_shape ms = t->shape;
    for (int k = 0; k < ms.ndim; k++) ms.dims[k] = k == d ? n : 1;
    ts_scope_begin();
    int64_t *v = host_i64(op, index);
    bool *m = v ? host_alloc(op, n, sizeof *m) : NULL;
    if (m) memset(m, 0, (size_t)n);
    for (int64_t i = 0; m && i < e; i++) {
        if (v[i] < -n || v[i] >= n) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: index %lld is out of bounds for dimension %d with size "
                          "%lld",
                          op, (long long)v[i], d, (long long)n);
            break;
        }
        m[v[i] < 0 ? v[i] + n : v[i]] = true;
    }
    ts_tensor *mask = m && ts_error() == TS_OK ? mask_on(t, ms, m) : NULL;
    free(v), free(m);
    ts_tensor *y = NULL;
    if (mask) y = in_place ? ts_masked_fill_(t, mask, value) : ts_masked_fill(t, mask, value);
    return finish(y);
}

ts_tensor *ts_index_fill(ts_tensor *t, int dim, ts_tensor *index, double value) {
    return index_fill_run("index_fill", t, dim, index, value, false);
}
ts_tensor *ts_index_fill_(ts_tensor *t, int dim, ts_tensor *index, double value) {
    return index_fill_run("index_fill_", t, dim, index, value, true);
}

/* ------------------------------------------------------------------ nonzero, masks */
ts_tensor *ts_nonzero(ts_tensor *t) {
    const char *op = "nonzero";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    const int64_t n = ts_numel(t);
    const int nd = t->shape.ndim;
    ts_scope_begin();
    bool *m = host_bool(op, t);
    int64_t c = 0;
    for (int64_t i = 0; m && i < n; i++) c += m[i];
    int64_t *v = m ? host_alloc(op, c * nd, sizeof *v) : NULL;
    ts_tensor *y = NULL;
    if (v) {
        for (int64_t i = 0, r = 0; i < n; i++) {
            if (!m[i]) continue;
            for (int64_t k = nd - 1, f = i; k >= 0; k--)
                v[r * nd + k] = f % t->shape.dims[k], f /= t->shape.dims[k];
            r++;
        }
        static const int64_t none = 0;
        y = ts_from_data(TS_SHAPE(c, nd), TS_I64, c * nd != 0 ? v : &none, opts_on(t, TS_I64));
    }
    free(m), free(v);
    return finish(y);
}

static bool check_mask(const char *op, ts_tensor *t, ts_tensor *mask, ts_shape *bs) {
    tsi_init();
    if (!check_two(op, t, "input", mask, "mask")) return false;
    if (mask->dtype != TS_BOOL)
        return tsi_error_set(TS_ERR_DTYPE, "%s: expected BoolTensor for mask, got %s", op,
                             ts_dtype_name(mask->dtype)),
               false;
    return tsi_broadcast_shapes(op, t->shape, mask->shape, bs);
}

ts_tensor *ts_masked_select(ts_tensor *t, ts_tensor *mask) {
    const char *op = "masked_select";
    ts_shape bs;
    if (!check_mask(op, t, mask, &bs)) return NULL;
    const int64_t n = tsi_numel(bs);
    ts_scope_begin();
    ts_tensor *mb = ts_expand(mask, bs);
    bool *m = mb ? host_bool(op, mb) : NULL;
    int64_t c = 0, *v = m ? host_alloc(op, n, sizeof *v) : NULL;
    for (int64_t i = 0; v && i < n; i++)
        if (m[i]) v[c++] = i;
    ts_tensor *idx = v ? index_on(t, v, c) : NULL;
    free(m), free(v);
    ts_tensor *x = idx ? ts_reshape(ts_expand(t, bs), TS_SHAPE(n)) : NULL;
    return finish(x ? ts_index_select(x, 0, idx) : NULL);
}

ts_tensor *ts_masked_scatter(ts_tensor *t, ts_tensor *mask, ts_tensor *src) {
    const char *op = "masked_scatter";
    ts_shape bs;
    if (!check_mask(op, t, mask, &bs) || !check_two(op, t, "input", src, "source")) return NULL;
    if (src->dtype != t->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected self and source to have same dtypes but got %s and %s",
                             op, ts_dtype_name(t->dtype), ts_dtype_name(src->dtype)),
               NULL;
    const int64_t n = tsi_numel(bs), s = ts_numel(src);
    ts_scope_begin();
    ts_tensor *mb = ts_expand(mask, bs);
    bool *m = mb ? host_bool(op, mb) : NULL;
    int64_t c = 0, *g = m ? host_alloc(op, n, sizeof *g) : NULL;
    for (int64_t i = 0; g && i < n; i++) c += m[i];
    if (g && c > s)
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: Number of elements of source < number of ones in mask (%lld < %lld)", op,
                      (long long)s, (long long)c);
    for (int64_t i = 0, k = 0; g && i < n; i++) g[i] = m[i] ? k++ : c + i;
    ts_tensor *idx = g && ts_error() == TS_OK ? index_on(t, g, n) : NULL;
    free(m), free(g);
    ts_tensor *parts[2] = {NULL, NULL};
    if (idx) {
        parts[0] = ts_narrow(ts_reshape(src, TS_SHAPE(s)), 0, 0, c);
        parts[1] = ts_reshape(ts_expand(t, bs), TS_SHAPE(n));
    }
    ts_tensor *y = parts[0] && parts[1] ? ts_index_select(ts_cat(parts, 2, 0), 0, idx) : NULL;
    return finish(y ? ts_reshape(y, bs) : NULL);
}

ts_tensor *ts_masked_scatter_(ts_tensor *t, ts_tensor *mask, ts_tensor *src) {
    const char *op = "masked_scatter_";
    ts_shape bs;
    if (!check_mask(op, t, mask, &bs)) return NULL;
    bool same = bs.ndim == t->shape.ndim;
    for (int k = 0; same && k < bs.ndim; k++) same = bs.dims[k] == t->shape.dims[k];
    if (!same)
        return tsi_error_set(TS_ERR_SHAPE, "%s: mask %s does not broadcast to self %s", op,
                             tsi_shape_str(mask->shape), tsi_shape_str(t->shape)),
               NULL;
    ts_scope_begin();
    ts_tensor *y = ts_masked_scatter(t, mask, src);
    return finish(y ? in_place_result(t, y) : NULL);
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
