/* search.c — PyTorch's value-dependent selection ops (issue 52): searchsorted / bucketize, isin,
 * unique / unique_consecutive (flattened or along a dim), histc, bincount. Their results depend
 * on the values (and their sizes too), so they are computed on the host from exact keys
 * (sort_host.h) and written to the operands' device; none is differentiable (as in PyTorch). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/sync_debug.h"
#include "ops/compose.h"
#include "ops/sort_host.h"

static ts_tensor *ints_on(ts_tensor *t, ts_shape s, const int64_t *v, ts_dtype dt) {
    ts_tensor *y =
        ts_from_data(s, TS_I64, tsi_numel(s) ? (const void *)v : (const void *)&(int64_t){0},
                     opts_on(t, TS_I64));
    return y && dt != TS_I64 ? ts_to_dtype(y, dt) : y;
}

/* a meta operand has no values: the ops whose results' shapes do not depend on them give those */
static bool is_meta(ts_tensor *t) { return tsi_device(t).type == TS_META; }

/* ------------------------------------------------------------------ searchsorted, bucketize */
/* PyTorch's cus_lower_bound / cus_upper_bound over row `b` of the boundaries (NaN: past the end) */
static int64_t bound(const tsi_keys *b, const int64_t *sorter, int64_t row, int64_t n,
                     const tsi_keys *v, int64_t vi, bool right) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + ((hi - lo) >> 1);
        const int64_t at = row * n + (sorter ? sorter[row * n + mid] : mid);
        bool go_right;
        if (b->is_float) {
            const double m = b->f[at], x = v->f[vi];
            go_right = right ? !(m > x) : !(m >= x);
        } else {
            const int64_t m = b->i[at], x = v->i[vi];
            go_right = right ? !(m > x) : !(m >= x);
        }
        if (go_right)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool search_checks(const char *op, ts_tensor *seq, ts_tensor *values, ts_tensor *sorter) {
    if (!tsi_check_input(op, seq, "sorted_sequence") || !tsi_check_input(op, values, "input") ||
        (sorter && !tsi_check_input(op, sorter, "sorter")))
        return false;
    ts_tensor *ops[3] = {seq, values, sorter};
    ts_device dev;
    if (!tsi_same_device(op, ops, sorter ? 3 : 2, false, &dev)) return false;
    if (seq->shape.ndim == 0)
        return tsi_error_set(TS_ERR_SHAPE,
                             "torch.searchsorted(): boundaries tensor should have positive "
                             "dimension, but got 0 dimension"),
               false;
    if (seq->shape.ndim > 1) {
        bool ok = values->shape.ndim == seq->shape.ndim;
        for (int i = 0; ok && i < seq->shape.ndim - 1; i++)
            ok = values->shape.dims[i] == seq->shape.dims[i];
        if (!ok)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "torch.searchsorted(): boundaries tensor should be 1 dimension or "
                                 "the first N-1 dimensions of boundaries tensor and input value "
                                 "tensor must match"),
                   false;
    }
    if (tsi_is_float(seq->dtype) != tsi_is_float(values->dtype) && seq->dtype == TS_BOOL)
        return tsi_error_set(TS_ERR_DTYPE, "%s: boolean boundaries are not supported", op), false;
    if (sorter) {
        if (sorter->dtype != TS_I64)
            return tsi_error_set(TS_ERR_DTYPE,
                                 "torch.searchsorted(): sorter must be a tensor of long dtype but "
                                 "got dtype %s",
                                 ts_dtype_name(sorter->dtype)),
                   false;
        bool same = sorter->shape.ndim == seq->shape.ndim;
        for (int i = 0; same && i < seq->shape.ndim; i++)
            same = sorter->shape.dims[i] == seq->shape.dims[i];
        if (!same)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "torch.searchsorted(): boundary and sorter must have the same "
                                 "size"),
                   false;
    }
    return true;
}

ts_tensor *ts_searchsorted(ts_tensor *seq, ts_tensor *values, bool out_int32, bool right,
                           ts_tensor *sorter) {
    const char *op = "searchsorted";
    tsi_init();
    if (!search_checks(op, seq, values, sorter)) return NULL;
    const bool fl = tsi_is_float(seq->dtype) || tsi_is_float(values->dtype);
    const int64_t n = seq->shape.dims[seq->shape.ndim - 1], nv = ts_numel(values);
    const int64_t vrow = values->shape.ndim ? values->shape.dims[values->shape.ndim - 1] : 1;
    ts_scope_begin();
    if (is_meta(values)) /* no values to search: the result's shape (sorter not range-checked) */
        return finish(ts_empty(values->shape, opts_on(values, out_int32 ? TS_I32 : TS_I64)));
    tsi_keys b = {0}, v = {0};
    int64_t *s = NULL, *out = NULL;
    ts_tensor *y = NULL;
    bool ok = tsi_keys_read_flat(op, seq, fl, &b) && tsi_keys_read_flat(op, values, fl, &v);
    if (ok && sorter) {
        s = host_i64(op, sorter);
        for (int64_t i = 0; s && i < ts_numel(sorter); i++)
            if (s[i] < 0 || s[i] >= n) {
                tsi_error_set(TS_ERR_ARG, "torch.searchsorted(): sorter index out of range");
                free(s), s = NULL;
            }
        ok = s != NULL;
    }
    out = ok ? host_alloc(op, nv, sizeof *out) : NULL;
    if (out) {
        for (int64_t i = 0; i < nv; i++)
            out[i] = bound(&b, s, seq->shape.ndim > 1 ? i / vrow : 0, n, &v, i, right);
        y = ints_on(values, values->shape, out, out_int32 ? TS_I32 : TS_I64);
    }
    tsi_keys_free(&b), tsi_keys_free(&v);
    free(s), free(out);
    return finish(y);
}

ts_tensor *ts_bucketize(ts_tensor *input, ts_tensor *boundaries, bool out_int32, bool right) {
    tsi_init();
    if (!tsi_check_input("bucketize", boundaries, "boundaries")) return NULL;
    if (boundaries->shape.ndim != 1) {
        tsi_error_set(TS_ERR_SHAPE,
                      "bucketize: boundaries tensor must be 1 dimension, but got "
                      "dim(%d)",
                      boundaries->shape.ndim);
        return NULL;
    }
    return ts_searchsorted(boundaries, input, out_int32, right, NULL);
}

/* ------------------------------------------------------------------ isin */
static bool key_lt(const void *ctx, int64_t a, int64_t b) { return tsi_key_less(ctx, a, b); }

ts_tensor *ts_isin(ts_tensor *elements, ts_tensor *test, bool assume_unique, bool invert) {
    const char *op = "isin";
    (void)assume_unique; /* a hint only */
    tsi_init();
    if (!check_two(op, elements, "elements", test, "test_elements")) return NULL;
    const bool fl = tsi_is_float(elements->dtype) || tsi_is_float(test->dtype);
    const int64_t ne = ts_numel(elements), nt = ts_numel(test);
    ts_scope_begin();
    if (is_meta(elements)) return finish(ts_empty(elements->shape, opts_on(elements, TS_BOOL)));
    tsi_keys e = {0}, k = {0};
    int64_t *order = NULL;
    bool *hit = NULL;
    ts_tensor *y = NULL;
    if (tsi_keys_read_flat(op, elements, fl, &e) && tsi_keys_read_flat(op, test, fl, &k) &&
        (order = host_alloc(op, nt, sizeof *order)) && (hit = host_alloc(op, ne, sizeof *hit))) {
        for (int64_t i = 0; i < nt; i++) order[i] = i;
        if (tsi_stable_sort(op, order, nt, key_lt, &k)) {
            for (int64_t i = 0; i < ne; i++) {
                int64_t lo = 0, hi = nt; /* first test value not below e[i] */
                while (lo < hi) {
                    int64_t mid = lo + ((hi - lo) >> 1);
                    bool below = fl ? k.f[order[mid]] < e.f[i] : k.i[order[mid]] < e.i[i];
                    if (below)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                bool found = lo < nt && (fl ? k.f[order[lo]] == e.f[i] : k.i[order[lo]] == e.i[i]);
                hit[i] = found != invert;
            }
            y = mask_on(elements, elements->shape, hit);
        }
    }
    tsi_keys_free(&e), tsi_keys_free(&k);
    free(order), free(hit);
    return finish(y);
}

/* ------------------------------------------------------------------ histc */
#define HISTC_BODY(T)                                                                              \
    do {                                                                                           \
        const T left = (T)lo, right = (T)hi, span = right - left;                                  \
        for (int64_t i = 0; i < n; i++) {                                                          \
            const T x = (T)v[i];                                                                   \
            if (!(x >= left && x <= right)) continue;                                              \
            int64_t pos = (int64_t)((x - left) * (T)bins / span);                                  \
            if (pos == bins) pos--;                                                                \
            h[pos] = (double)((T)h[pos] + (T)1);                                                   \
        }                                                                                          \
    } while (0)

ts_tensor *ts_histc(ts_tensor *t, int64_t bins, double min, double max) {
    const char *op = "histc";
    tsi_init();
    if (!tsi_check_input(op, t, "input")) return NULL;
    if (t->dtype != TS_F32 && t->dtype != TS_F64) {
        tsi_error_set(TS_ERR_DTYPE, "\"histogram_cpu\" not implemented for '%s'",
                      tsi_torch_scalar_name(t->dtype));
        return NULL;
    }
    if (bins <= 0) {
        tsi_error_set(TS_ERR_ARG, "torch.histc(): bins must be > 0, but got %lld", (long long)bins);
        return NULL;
    }
    const int64_t n = ts_numel(t);
    ts_scope_begin();
    /* bins counts whatever the values (the range checks need them: none on meta, as PyTorch's) */
    if (is_meta(t)) return finish(ts_empty(TS_SHAPE(bins), opts_on(t, t->dtype)));
    tsi_keys k = {0};
    double *h = NULL;
    ts_tensor *y = NULL;
    if (!tsi_keys_read_flat(op, t, true, &k)) goto done;
    const double *v = k.f;
    double lo = min, hi = max;
    if (lo == hi && n > 0) {
        lo = hi = v[0];
        for (int64_t i = 0; i < n; i++) {
            if (isnan(v[i])) lo = hi = NAN;
            if (isnan(lo)) break;
            lo = v[i] < lo ? v[i] : lo, hi = v[i] > hi ? v[i] : hi;
        }
    }
    if (lo == hi) lo -= 1, hi += 1;
    if (!isfinite(lo) || !isfinite(hi)) {
        tsi_error_set(TS_ERR_ARG, "torch.histc: range of [%g, %g] is not finite", lo, hi);
        goto done;
    }
    if (!(lo < hi)) {
        tsi_error_set(TS_ERR_ARG, "torch.histc: max must be larger than min");
        goto done;
    }
    h = host_alloc(op, bins, sizeof *h);
    if (!h) goto done;
    memset(h, 0, (size_t)bins * sizeof *h);
    if (t->dtype == TS_F32)
        HISTC_BODY(float);
    else
        HISTC_BODY(double);
    y = ts_from_data(TS_SHAPE(bins), TS_F64, h, opts_on(t, TS_F64));
    y = y ? ts_to_dtype(y, t->dtype) : NULL;
done:
    tsi_keys_free(&k);
    free(h);
    return finish(y);
}

/* ------------------------------------------------------------------ bincount */
ts_tensor *ts_bincount(ts_tensor *t, ts_tensor *weights, int64_t minlength) {
    const char *op = "bincount";
    tsi_init();
    if (!tsi_check_input(op, t, "input") ||
        (weights && !check_two(op, t, "input", weights, "weights")))
        return NULL;
    if (minlength < 0) return tsi_error_set(TS_ERR_ARG, "minlength should be >= 0"), NULL;
    if (t->shape.ndim != 1 || !(tsi_is_int(t->dtype) || t->dtype == TS_BOOL))
        return tsi_error_set(TS_ERR_ARG,
                             "bincount only supports 1-d non-negative integral inputs."),
               NULL;
    const int64_t n = t->shape.dims[0];
    if (weights && (weights->shape.ndim != 1 || weights->shape.dims[0] != n))
        return tsi_error_set(TS_ERR_SHAPE,
                             "weights should be 1-d and have the same length as input"),
               NULL;
    if (!meta_sized_by_data(op, t)) return NULL;
    ts_scope_begin();
    ts_tensor *y = NULL;
    double *w = NULL, *h = NULL;
    int64_t *v = NULL;
    if (n == 0) { /* PyTorch: int64 zeros, with weights too */
        y = ts_zeros(TS_SHAPE(minlength), opts_on(t, TS_I64));
        return finish(y);
    }
    v = host_i64(op, t);
    int64_t top = -1;
    for (int64_t i = 0; v && i < n; i++) {
        if (v[i] < 0) {
            tsi_error_set(TS_ERR_ARG, "bincount only supports 1-d non-negative integral inputs.");
            goto done;
        }
        top = v[i] > top ? v[i] : top;
    }
    if (!v) goto done;
    const int64_t len = top + 1 > minlength ? top + 1 : minlength;
    const ts_dtype wdt = weights ? (weights->dtype == TS_F32 ? TS_F32 : TS_F64) : TS_I64;
    if (weights) {
        ts_tensor *wc = ts_contiguous(ts_to(ts_to_dtype(weights, TS_F64), ts_cpu()));
        w = host_alloc(op, n, sizeof *w);
        if (!wc || !w || ts_copy_to_host(wc, w, (size_t)n * sizeof *w) != TS_OK) goto done;
    }
    h = host_alloc(op, len, sizeof *h);
    if (!h) goto done;
    memset(h, 0, (size_t)len * sizeof *h);
    for (int64_t i = 0; i < n; i++) { /* float32 weights add up in float32, as PyTorch */
        const double add = w ? w[i] : 1.0;
        h[v[i]] = wdt == TS_F32 ? (double)((float)h[v[i]] + (float)add) : h[v[i]] + add;
    }
    y = ts_from_data(TS_SHAPE(len), TS_F64, h, opts_on(t, TS_F64));
    y = y ? ts_to_dtype(y, wdt) : NULL;
done:
    free(v), free(w), free(h);
    return finish(y);
}

/* ------------------------------------------------------------------ unique */
/* slices of `len` keys (row-major, slice s at s * len): lexicographic order and equality */
typedef struct slices {
    const tsi_keys *k;
    int64_t len;
} slices;
static bool slice_before(const void *ctx, int64_t a, int64_t b) {
    const slices *s = ctx;
    for (int64_t j = 0; j < s->len; j++) {
        const int64_t x = a * s->len + j, y = b * s->len + j;
        if (tsi_key_less(s->k, x, y)) return true;
        if (tsi_key_less(s->k, y, x)) return false;
    }
    return false;
}
static bool slice_equal(const slices *s, int64_t a, int64_t b) {
    for (int64_t j = 0; j < s->len; j++)
        if (!tsi_key_equal(s->k, a * s->len + j, b * s->len + j)) return false;
    return true;
}

/* The groups of equal slices of t (along dim, or its elements), sorted first (unique) or as they
 * come (unique_consecutive): the first slice of each group, its group per slice, its size. */
static ts_tensor *unique_impl(const char *op, ts_tensor *t, bool sort, bool has_dim, int dim,
                              ts_tensor **inverse, ts_tensor **counts) {
    if (inverse) *inverse = NULL;
    if (counts) *counts = NULL;
    tsi_init();
    if (!tsi_check_input(op, t, "input") || !meta_sized_by_data(op, t)) return NULL;
    if (has_dim && (dim = tsi_wrap_dim(op, dim, t->shape.ndim)) < 0) return NULL;
    if (has_dim && t->shape.ndim == 0) has_dim = false;
    const int64_t n = has_dim ? t->shape.dims[dim] : ts_numel(t);
    ts_scope_begin();
    ts_no_grad_begin();
    tsi_keys k = {0};
    int64_t *order = NULL, *first = NULL, *inv = NULL, *cnt = NULL, g = 0;
    ts_tensor *y = NULL, *yi = NULL, *yc = NULL;
    ts_tensor *x = has_dim ? ts_movedim(t, TS_DIMS(dim), TS_DIMS(0)) : t;
    if (!x || !tsi_keys_read_flat(op, x, false, &k)) goto done;
    const slices sl = {&k, n ? ts_numel(t) / n : 0};
    order = host_alloc(op, n, sizeof *order), first = host_alloc(op, n, sizeof *first);
    inv = host_alloc(op, n, sizeof *inv), cnt = host_alloc(op, n, sizeof *cnt);
    if (!order || !first || !inv || !cnt) goto done;
    for (int64_t i = 0; i < n; i++) order[i] = i;
    if (sort && !tsi_stable_sort(op, order, n, slice_before, &sl)) goto done;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || !slice_equal(&sl, order[i - 1], order[i])) first[g] = order[i], cnt[g++] = 0;
        inv[order[i]] = g - 1, cnt[g - 1]++;
    }
    ts_tensor *fi = index_on(t, first, g);
    if (has_dim)
        y = ts_index_select(t, dim, fi);
    else
        y = ts_take(t, fi);
    yi = ints_on(t, has_dim ? TS_SHAPE(n) : t->shape, inv, TS_I64);
    yc = ints_on(t, TS_SHAPE(g), cnt, TS_I64);
done:
    ts_no_grad_end();
    tsi_keys_free(&k);
    free(order), free(first), free(inv), free(cnt);
    bool ok = y && yi && yc && ts_error() == TS_OK;
    y = ok ? ts_keep(y) : NULL;
    yi = ok && inverse ? ts_keep(yi) : NULL;
    yc = ok && counts ? ts_keep(yc) : NULL;
    ts_scope_end();
    if (inverse) *inverse = yi;
    if (counts) *counts = yc;
    return y;
}

ts_tensor *ts_unique(ts_tensor *t, bool sorted, bool has_dim, int dim, ts_tensor **inverse,
                     ts_tensor **counts) {
    (void)sorted; /* always sorted, which sorted=False allows (PyTorch's CPU sorts too) */
    const char *op = has_dim ? "unique_dim" : "unique";
    tsi_sync_ctx sync = tsi_sync_enter(op, TSI_CALLER); /* the result's size is data-dependent */
    ts_tensor *y = unique_impl(op, t, true, has_dim, dim, inverse, counts);
    tsi_sync_leave(sync);
    return y;
}

ts_tensor *ts_unique_consecutive(ts_tensor *t, bool has_dim, int dim, ts_tensor **inverse,
                                 ts_tensor **counts) {
    tsi_sync_ctx sync = tsi_sync_enter("unique_consecutive", TSI_CALLER);
    ts_tensor *y = unique_impl("unique_consecutive", t, false, has_dim, dim, inverse, counts);
    tsi_sync_leave(sync);
    return y;
}
