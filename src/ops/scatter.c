/* scatter.c — the scatter family composed from the differentiable ops (index_select, gather,
 * sum / prod / amax / amin along a row...), so that it runs and differentiates on every device:
 * scatter / scatter_reduce (+ in place, a value form), index_add / index_copy / index_fill /
 * index_reduce, put. The plans that depend on the index's values are built on the host (one read
 * of the index), then gathered on the tensor's device. scatter_add is index.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "ops/compose.h"
#include "ops/index_check.h"

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

/* The scatter's result from its plan: gi holds n x k candidates per position of t, flat positions
 * into [src, t, sentinel] (sentinel: the reduction's identity); cnt the count of each position's
 * values (SC_MEAN), has whether a source reaches it (!include_self). Inside a scope. */
static ts_tensor *scatter_apply(ts_tensor *t, ts_tensor *src, int mode, bool include_self,
                                int64_t k, ts_tensor *gi, ts_tensor *cnt, ts_tensor *has) {
    const int64_t n = ts_numel(t), s = ts_numel(src);
    const bool is_float = tsi_is_float(t->dtype);
    double sv = 0;
    if (mode == SC_PROD) sv = 1;
    if (mode == SC_AMAX) sv = is_float ? -INFINITY : 0;
    if (mode == SC_AMIN) sv = is_float ? INFINITY : 0;
    ts_tensor *parts[3] = {ts_reshape(ts_contiguous(src), TS_SHAPE(s)), ts_reshape(t, TS_SHAPE(n)),
                           ts_full(TS_SHAPE(1), sv, opts_on(t, t->dtype))};
    if (!parts[0] || !parts[1] || !parts[2] || !gi) return NULL;
    ts_tensor *v = ts_index_select(ts_cat(parts, 3, 0), 0, gi), *y = NULL;
    if (mode == SC_LAST) return v ? ts_reshape(v, t->shape) : NULL;
    v = v ? ts_reshape(v, TS_SHAPE(n, k)) : NULL;
    if (mode == SC_SUM || mode == SC_MEAN) y = v ? ts_sum_dim(v, 1, false) : NULL;
    if (mode == SC_PROD) y = v ? ts_prod_dim(v, 1, false) : NULL;
    if (mode == SC_AMAX) y = v ? ts_amax_dim(v, 1, false) : NULL;
    if (mode == SC_AMIN) y = v ? ts_amin_dim(v, 1, false) : NULL;
    if (y && ts_dtype_of(y) != t->dtype) y = ts_to_dtype(y, t->dtype);
    if (y && mode == SC_MEAN) {
        ts_tensor *c = cnt ? ts_to_dtype(cnt, t->dtype) : NULL;
        y = c ? (is_float ? ts_div(y, c) : ts_floor_divide(y, c)) : NULL;
    }
    if (y && !include_self) y = has ? ts_where(has, y, parts[1]) : NULL;
    return y ? ts_reshape(y, t->shape) : NULL;
}

/* scatter with mode: SC_LAST writes (the last of repeated positions wins, as PyTorch's CPU);
 * the others reduce the sources of each position (with t's value when include_self). Every
 * position gathers its candidates from [src, t, sentinel] and reduces them along a row. A meta t
 * has no index values to plan with: the plan's tensors are meta tensors of their shapes. */
static ts_tensor *scatter_core(const char *op, ts_tensor *t, int d, ts_tensor *index,
                               ts_tensor *src, int mode, bool include_self) {
    const int64_t n = ts_numel(t), s = ts_numel(src), e = ts_numel(index);
    const bool is_float = tsi_is_float(t->dtype);
    if (tsi_device(t).type == TS_META) {
        ts_scope_begin();
        const int64_t k = mode == SC_LAST ? 1 : include_self ? 2 : 1;
        ts_tensor *gi = ts_empty(TS_SHAPE(n * k), opts_on(t, TS_I64));
        ts_tensor *cnt = mode == SC_MEAN ? ts_empty(TS_SHAPE(n), opts_on(t, TS_I64)) : NULL;
        ts_tensor *has = include_self ? NULL : ts_empty(TS_SHAPE(n), opts_on(t, TS_BOOL));
        return finish(scatter_apply(t, src, mode, include_self, k, gi, cnt, has));
    }
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
    for (int64_t o = 0; mode == SC_MEAN && o < n; o++) {
        cnt[o] += include_self ? 1 : 0;
        cnt[o] = cnt[o] > 0 ? cnt[o] : 1;
    }
    y = scatter_apply(t, src, mode, include_self, k, index_on(t, g, n * k),
                      mode == SC_MEAN ? index_on(t, cnt, n) : NULL,
                      include_self ? NULL : mask_on(t, TS_SHAPE(n), has));
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

/* index_reduce: src's slices reduced into t's rows index along dim (prod, mean, amax, amin;
 * include_self false leaves t's own value out of the rows indexed): scatter_reduce's plan with the
 * 1-D index spread over src's shape */
static ts_tensor *index_reduce_run(const char *op, ts_tensor *t, int dim, ts_tensor *index,
                                   ts_tensor *src, const char *reduce, bool include_self,
                                   bool in_place) {
    const int d = index_check(op, t, dim, index, src);
    if (d < 0) return NULL;
    const bool sum = reduce && !strcmp(reduce, "sum");
    const int mode = sum ? -1 : reduce_mode(op, reduce, false);
    if (sum)
        tsi_error_set(TS_ERR_ARG,
                      "%s: Expected reduce to be one of prod, mean, amax or amin but got sum", op);
    if (mode < 0) return NULL;
    ts_scope_begin();
    ts_tensor *i = index_spread(index, d, src);
    ts_tensor *y = i ? scatter_core(op, t, d, i, src, mode, include_self) : NULL;
    return finish(y && in_place ? in_place_result(t, y) : y);
}

ts_tensor *ts_index_reduce(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src,
                           const char *reduce, bool include_self) {
    return index_reduce_run("index_reduce", t, dim, index, src, reduce, include_self, false);
}

ts_tensor *ts_index_reduce_(ts_tensor *t, int dim, ts_tensor *index, ts_tensor *src,
                            const char *reduce, bool include_self) {
    return index_reduce_run("index_reduce_", t, dim, index, src, reduce, include_self, true);
}

/* ------------------------------------------------------------------ put */
/* put: source's values written (accumulate: added) at t's flat positions index (negatives count
 * from the end); index_copy / index_add over t flattened */
static ts_tensor *put_run(const char *op, ts_tensor *t, ts_tensor *index, ts_tensor *source,
                          bool accumulate, bool in_place) {
    tsi_init();
    if (!check_two(op, t, "input", index, "index") || !check_two(op, t, "input", source, "source"))
        return NULL;
    if (index->dtype != TS_I64)
        return tsi_error_set(TS_ERR_DTYPE, "%s: Expected a long tensor for index, but got %s", op,
                             ts_dtype_name(index->dtype)),
               NULL;
    if (source->dtype != t->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: self and source expected to have the same dtype, but got "
                             "self.dtype = %s and source.dtype = %s",
                             op, ts_dtype_name(t->dtype), ts_dtype_name(source->dtype)),
               NULL;
    const int64_t n = ts_numel(t), e = ts_numel(index);
    if (ts_numel(source) != e)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: Expected source and index to have the same number of elements, "
                             "but got source.numel() = %lld, index.numel() = %lld",
                             op, (long long)ts_numel(source), (long long)e),
               NULL;
    const bool meta = tsi_device(t).type == TS_META;
    ts_scope_begin();
    int64_t *v = meta ? NULL : host_i64(op, index);
    for (int64_t i = 0; v && i < e; i++) {
        if (v[i] < -n || v[i] >= n) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: out of range: tried to access index %lld on a tensor of %lld "
                          "elements",
                          op, (long long)v[i], (long long)n);
            break;
        }
        if (v[i] < 0) v[i] += n;
    }
    ts_tensor *idx = meta                       ? ts_empty(TS_SHAPE(e), opts_on(t, TS_I64))
                     : v && ts_error() == TS_OK ? index_on(t, v, e)
                                                : NULL;
    free(v);
    ts_tensor *flat = idx ? ts_reshape(t, TS_SHAPE(n)) : NULL;
    ts_tensor *sv = flat ? ts_reshape(source, TS_SHAPE(e)) : NULL;
    ts_tensor *y = NULL;
    if (sv) y = accumulate ? ts_index_add(flat, 0, idx, sv, 1.0) : ts_index_copy(flat, 0, idx, sv);
    y = y ? ts_reshape(y, t->shape) : NULL;
    return finish(y && in_place ? in_place_result(t, y) : y);
}

ts_tensor *ts_put(ts_tensor *t, ts_tensor *index, ts_tensor *source, bool accumulate) {
    return put_run("put", t, index, source, accumulate, false);
}

ts_tensor *ts_put_(ts_tensor *t, ts_tensor *index, ts_tensor *source, bool accumulate) {
    return put_run("put_", t, index, source, accumulate, true);
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
