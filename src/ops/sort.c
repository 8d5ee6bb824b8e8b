/* sort.c — PyTorch's sorting and selection along a dim (issue 52): sort / argsort / msort, topk,
 * kthvalue, median / nanmedian (whole tensor and dim forms), mode. The order is planned on the
 * host (sort_keys.h: a stable sort of order keys, NaN above every number), the values are gathered
 * on the tensor's device, and their gradient is scattered back through the indices. Where PyTorch
 * leaves the index of equal values to the implementation (unstable sort, topk, kthvalue, median,
 * mode), Tessera's is the one the stable sort gives: an index of an element with that value. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "ops/compose.h"
#include "ops/sort_host.h"
#include "ops/sort_keys.h"

/* ------------------------------------------------------------------ backward */
/* the values were t.gather(dim, idx): their gradient goes back to the gathered elements */
static void take_dim_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *idx = tsi_node_saved(n, 0);
    if (!go[0] || !idx) return;
    ts_tensor *z =
        ts_zeros(n->in_shape[0], (ts_opts){.dtype = go[0]->dtype, .device = n->in_device[0]});
    gi[0] = ts_scatter_add(z, (int)n->ip[0], idx, go[0]);
}

/* median() / nanmedian() of the whole tensor: PyTorch's evenly_distribute_backward, the gradient
 * shared among the elements equal to the result (the NaNs when it is NaN) */
static void median_all_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *x = tsi_node_saved(n, 0), *r = tsi_node_saved(n, 1);
    if (!go[0] || !x || !r) return;
    /* on meta only the shape matters (and r has no value to read) */
    ts_tensor *hit = tsi_device(r).type != TS_META && isnan(ts_item(r)) ? ts_ne(x, x) : ts_eq(x, r);
    gi[0] = ts_mul(ts_div(go[0], ts_sum(hit)), hit);
}

/* ------------------------------------------------------------------ taking rows */
/* t.gather(dim, idx) for idx planned on the host: pos holds rows x m indices along dim, the rows
 * in the order of t with dim swapped last (tsi_okeys); NULL for a meta t (no values, so no plan:
 * the indices are a meta tensor of their shape). Returns the values (inside the caller's scope),
 * *idx_out the int64 indices; keepdim false: dim removed (m is 1). */
static ts_tensor *take_rows(const char *op, const char *name, ts_tensor *t, int dim,
                            const int64_t *pos, int64_t m, bool keepdim, ts_tensor **idx_out) {
    const int last = t->shape.ndim - 1;
    ts_shape s = t->shape;
    s.dims[dim] = s.dims[last];
    s.dims[last] = m;
    static const int64_t none = 0;
    ts_tensor *idx = pos ? ts_from_data(s, TS_I64, tsi_numel(s) ? pos : &none, opts_on(t, TS_I64))
                         : ts_empty(s, opts_on(t, TS_I64));
    if (idx && dim != last) idx = ts_contiguous(ts_transpose(idx, dim, last));
    if (!idx) return NULL;
    ts_no_grad_begin();
    ts_tensor *v = ts_gather(t, dim, idx);
    ts_no_grad_end();
    if (!v) return NULL;
    if (name && tsi_needs_graph(&t, 1)) {
        ts_node *node = tsi_record(name, op, take_dim_backward, &t, 1, v, &idx, 1);
        if (node) node->ip[0] = dim, node->flags |= TSI_NODE_TWICE; /* a scatter_add of g */
    }
    if (!keepdim) v = ts_squeeze_dim(v, dim), idx = ts_squeeze_dim(idx, dim);
    *idx_out = idx;
    return v;
}

/* what select_along takes from each row's order */
typedef enum sel_kind {
    SEL_FIRST, /* its first m places (sort, argsort, topk) */
    SEL_RANK,  /* the place of rank arg (sort_keys.h: a rank, or TSI_RANK_*): kthvalue, median */
    SEL_MODE,  /* the mode's place (mode_places) */
} sel_kind;

static bool mode_places(const char *op, const tsi_okeys *k, const int64_t *perm, int64_t *pos);

/* The selection behind every op here: t's keys along dim in their stable order (descending or
 * not), then per row its first m places (SEL_FIRST) or one place (m 1, SEL_RANK / SEL_MODE). Sets
 * *vo and *io to new tensors in no scope (the public functions own them, own_pair); false with the
 * error set. */
static bool select_along(const char *op, const char *name, ts_tensor *t, int dim, bool keepdim,
                         bool descending, int64_t m, sel_kind sel, int64_t arg, ts_tensor **vo,
                         ts_tensor **io) {
    *vo = *io = NULL;
    ts_tensor *v = NULL, *i = NULL;
    ts_scope_begin();
    if (t->shape.ndim == 0) { /* a 0-dim tensor is one row of one element; results 0-dim */
        ts_tensor *one = ts_reshape(t, TS_SHAPE(1));
        if (one && select_along(op, name, one, 0, true, descending, m, sel, arg, &v, &i)) {
            tsi_own(v), tsi_own(i);
            const ts_shape s = m ? TS_SHAPE() : TS_SHAPE(0);
            v = ts_reshape(v, s), i = ts_reshape(i, s);
        }
    } else if (tsi_device(t).type == TS_META) { /* no values to order: the results' shapes */
        if (tsi_sort_dtype_ok(op, t)) v = take_rows(op, name, t, dim, NULL, m, keepdim, &i);
    } else {
        tsi_okeys k;
        if (tsi_okeys_read(op, t, dim, &k)) {
            /* topk's few and kthvalue's / median's one place need no full sort of the row; a full
             * sort is its own plan */
            const bool top = sel == SEL_FIRST && m < k.n && m <= TSI_OKEYS_TOP_MAX;
            const bool all = sel == SEL_FIRST && m == k.n;
            int64_t *perm =
                top || sel == SEL_RANK ? NULL : host_alloc(op, k.rows * k.n, sizeof *perm);
            int64_t *pos = all ? perm : host_alloc(op, k.rows * m, sizeof *pos);
            bool ok = pos && (perm || top || sel == SEL_RANK);
            if (ok && top)
                ok = tsi_okeys_top(op, &k, descending, m, pos);
            else if (ok && sel == SEL_RANK)
                ok = tsi_okeys_nth(op, &k, arg, pos);
            else if (ok && (ok = tsi_okeys_argsort(op, &k, descending, perm))) {
                if (sel == SEL_MODE)
                    ok = mode_places(op, &k, perm, pos);
                else if (!all)
                    for (int64_t r = 0; r < k.rows; r++)
                        memcpy(pos + r * m, perm + r * k.n, (size_t)m * sizeof *pos);
            }
            if (ok) v = take_rows(op, name, t, dim, pos, m, keepdim, &i);
            if (pos != perm) free(pos);
            free(perm);
            tsi_okeys_free(&k);
        }
    }
    const bool ok = v && i && ts_error() == TS_OK;
    if (ok) *vo = ts_retain(v), *io = ts_retain(i);
    ts_scope_end();
    return ok;
}

/* the results of select_along to the caller's scope; indices NULL: not wanted */
static ts_tensor *own_pair(ts_tensor *v, ts_tensor *i, ts_tensor **indices) {
    v = tsi_own(v); /* first: the profiler's op span ends at it, with the values' shape */
    if (indices)
        *indices = tsi_own(i);
    else
        ts_release(i);
    return v;
}

/* select_along for a public function: values, and *indices when wanted */
static ts_tensor *selected(const char *op, const char *name, ts_tensor *t, int dim, bool keepdim,
                           bool descending, int64_t m, sel_kind sel, int64_t arg,
                           ts_tensor **indices) {
    ts_tensor *v, *i;
    tsi_log_op(op, tsi_device(t)); /* the op starts: its checks passed */
    if (!select_along(op, name, t, dim, keepdim, descending, m, sel, arg, &v, &i)) return NULL;
    return own_pair(v, i, indices);
}

static int wrap(const char *op, ts_tensor *t, int dim) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return -1;
    return tsi_wrap_dim(op, dim, t->shape.ndim);
}
static int64_t dim_size(ts_tensor *t, int d) { return t->shape.ndim ? t->shape.dims[d] : 1; }

/* ------------------------------------------------------------------ sort, argsort, msort, topk */
ts_tensor *ts_sort(ts_tensor *t, int dim, bool descending, bool stable, ts_tensor **indices) {
    (void)stable; /* always stable: a valid order for stable=False too */
    if (indices) *indices = NULL;
    int d = wrap("sort", t, dim);
    if (d < 0) return NULL;
    return selected("sort", "SortBackward0", t, d, true, descending, dim_size(t, d), SEL_FIRST, 0,
                    indices);
}

ts_tensor *ts_argsort(ts_tensor *t, int dim, bool descending, bool stable) {
    (void)stable;
    int d = wrap("argsort", t, dim);
    if (d < 0) return NULL;
    ts_tensor *v, *i;
    tsi_log_op("argsort", tsi_device(t));
    if (!select_along("argsort", NULL, t, d, true, descending, dim_size(t, d), SEL_FIRST, 0, &v,
                      &i))
        return NULL;
    ts_release(v);
    return tsi_own(i);
}

ts_tensor *ts_msort(ts_tensor *t) {
    int d = wrap("msort", t, 0);
    if (d < 0) return NULL;
    return selected("msort", "SortBackward0", t, d, true, false, dim_size(t, d), SEL_FIRST, 0,
                    NULL);
}

ts_tensor *ts_topk(ts_tensor *t, int64_t k, int dim, bool largest, bool sorted,
                   ts_tensor **indices) {
    (void)sorted; /* the k are always returned in sorted order, which sorted=False allows */
    if (indices) *indices = NULL;
    int d = wrap("topk", t, dim);
    if (d < 0) return NULL;
    if (k < 0 || k > dim_size(t, d)) {
        tsi_error_set(TS_ERR_ARG, "topk: selected index k out of range (k = %lld, dim size %lld)",
                      (long long)k, (long long)dim_size(t, d));
        return NULL;
    }
    return selected("topk", "TopkBackward0", t, d, true, largest, k, SEL_FIRST, 0, indices);
}

/* ------------------------------------------------------------------ kthvalue, median, mode */
/* pos[r] = the mode's place in row r's stable order perm: the most frequent value, the smallest
 * of those most frequent, at its last place (PyTorch's CPU scan over its sort); every NaN counts
 * as a value of its own */
static bool mode_places(const char *op, const tsi_okeys *k, const int64_t *perm, int64_t *pos) {
    uint64_t *key = host_alloc(op, k->n, sizeof *key);
    if (!key) return false;
    for (int64_t r = 0; r < k->rows; r++) {
        const int64_t *p = perm + r * k->n;
        tsi_okeys_row(k, r, key);
        int64_t best = 0, best_count = 0, run = 0;
        for (int64_t j = 0; j < k->n; j++) {
            run++;
            const uint64_t x = key[p[j]];
            if (j == k->n - 1 || x != key[p[j + 1]] || tsi_okey_isnan(k, x)) {
                if (run > best_count) best = j, best_count = run;
                run = 0;
            }
        }
        pos[r] = p[best];
    }
    free(key);
    return true;
}

static bool nonempty_dim(const char *op, ts_tensor *t, int d) {
    if (dim_size(t, d) > 0) return true;
    tsi_error_set(TS_ERR_ARG, "%s(): Expected reduction dim %d to have non-zero size.", op, d);
    return false;
}

ts_tensor *ts_kthvalue(ts_tensor *t, int64_t k, int dim, bool keepdim, ts_tensor **indices) {
    if (indices) *indices = NULL;
    int d = wrap("kthvalue", t, dim);
    if (d < 0) return NULL;
    if (k < 1 || k > dim_size(t, d)) {
        tsi_error_set(TS_ERR_ARG,
                      "kthvalue(): selected number k out of range for dimension %d (k = %lld, "
                      "dim size %lld)",
                      d, (long long)k, (long long)dim_size(t, d));
        return NULL;
    }
    return selected("kthvalue", "KthvalueBackward0", t, d, keepdim, false, 1, SEL_RANK, k - 1,
                    indices);
}

/* the lower median, or the first NaN when the row has any (median); nanmedian skips the NaNs, and
 * takes the first when they are all NaN */
static int64_t median_rank(bool ignore_nan) {
    return ignore_nan ? TSI_RANK_NANMEDIAN : TSI_RANK_MEDIAN;
}

static ts_tensor *median_dim(const char *op, const char *name, ts_tensor *t, int dim, bool keepdim,
                             bool ignore_nan, ts_tensor **indices) {
    if (indices) *indices = NULL;
    int d = wrap(op, t, dim);
    if (d < 0 || !nonempty_dim(op, t, d)) return NULL;
    return selected(op, name, t, d, keepdim, false, 1, SEL_RANK, median_rank(ignore_nan), indices);
}
ts_tensor *ts_median_dim(ts_tensor *t, int dim, bool keepdim, ts_tensor **indices) {
    return median_dim("median", "MedianBackward1", t, dim, keepdim, false, indices);
}
ts_tensor *ts_nanmedian_dim(ts_tensor *t, int dim, bool keepdim, ts_tensor **indices) {
    return median_dim("nanmedian", "NanmedianBackward1", t, dim, keepdim, true, indices);
}

static ts_tensor *median_all(const char *op, const char *name, ts_tensor *t, bool ignore_nan) {
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    ts_tensor *v = NULL, *i = NULL;
    if (ts_numel(t) == 0) {
        if (!tsi_is_float(t->dtype))
            return tsi_error_set(TS_ERR_ARG, "%s() input tensor cannot be empty", op), NULL;
        ts_scope_begin();
        v = ts_full(TS_SHAPE(), NAN, opts_on(t, t->dtype));
        return finish(v);
    }
    tsi_log_op(op, tsi_device(t));
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *flat = ts_reshape(t, TS_SHAPE(ts_numel(t)));
    bool ok = flat && select_along(op, NULL, flat, 0, false, false, 1, SEL_RANK,
                                   median_rank(ignore_nan), &v, &i);
    ts_no_grad_end();
    ts_scope_end();
    if (!ok) return NULL;
    ts_release(i);
    if (tsi_needs_graph(&t, 1)) {
        ts_tensor *saves[2] = {t, NULL};
        ts_node *n = tsi_record(name, op, median_all_backward, &t, 1, v, saves, 2);
        if (n) tsi_node_save_output(n, 1, v), n->flags |= TSI_NODE_TWICE; /* g's share: linear */
    }
    return tsi_own(v);
}
ts_tensor *ts_median(ts_tensor *t) { return median_all("median", "MedianBackward0", t, false); }
ts_tensor *ts_nanmedian(ts_tensor *t) {
    return median_all("nanmedian", "NanmedianBackward0", t, true);
}

ts_tensor *ts_mode(ts_tensor *t, int dim, bool keepdim, ts_tensor **indices) {
    if (indices) *indices = NULL;
    int d = wrap("mode", t, dim);
    if (d < 0 || !nonempty_dim("mode", t, d)) return NULL;
    return selected("mode", "ModeBackward0", t, d, keepdim, false, 1, SEL_MODE, 0, indices);
}
