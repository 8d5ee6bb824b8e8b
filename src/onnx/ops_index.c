/* ops_index.c — ONNX's indexing operators (Gather*, Scatter*, OneHot, NonZero, Compress, ...) on
 * Tessera's index_select / gather / scatter_add; index arithmetic stays on the device. */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* ------------------------------------------------------------------ helpers */
/* host values as an i64 vector on x's device */
static ts_tensor *i64_vector(ts_tensor *x, const int64_t *v, int64_t count) {
    return ts_from_data(TS_SHAPE(count), TS_I64, v, tso_opts_of(x, TS_I64));
}

static bool index_type(const tso_node *n, ts_tensor *idx, const char *what) {
    ts_dtype dt = ts_dtype_of(idx);
    if (dt == TS_I64 || dt == TS_I32) return true;
    return tso_fail(n, TS_ERR_DTYPE, "%s must be int32 or int64, got %s", what, tsi_desc(idx));
}

/* i64 indices with the negative ones counted from the end of a dim of `size` (a tensor of sizes
 * broadcasting against idx when `sizes` is given) */
static ts_tensor *wrap_index(ts_tensor *idx, int64_t size, ts_tensor *sizes) {
    ts_tensor *i = ts_dtype_of(idx) == TS_I64 ? idx : ts_to_dtype(idx, TS_I64);
    ts_tensor *up = sizes ? ts_add(i, sizes) : ts_add_scalar(i, (double)size);
    return ts_where(ts_lt_scalar(i, 0), up, i);
}

static int64_t prod(const int64_t *d, int from, int to) {
    int64_t p = 1;
    for (int k = from; k < to; k++) p *= d[k];
    return p;
}

/* a shape from dims a[0..na) followed by b[0..nb); false when more than TS_MAX_DIMS */
static bool join_shape(const tso_node *n, const int64_t *a, int na, const int64_t *b, int nb,
                       ts_shape *s) {
    if (na + nb > TS_MAX_DIMS)
        return tso_fail(n, TS_ERR_SHAPE, "the result would have %d dims (Tessera has at most %d)",
                        na + nb, TS_MAX_DIMS);
    s->ndim = na + nb;
    for (int k = 0; k < na; k++) s->dims[k] = a[k];
    for (int k = 0; k < nb; k++) s->dims[na + k] = b[k];
    return true;
}

/* Row-major positions of the index tuples in the last dim of idx ([..., k], i64) into the dims
 * dims[0..k) (negative components wrapped), plus base when given (broadcast): shape idx[:-1]. A
 * tuple with a component out of its dim gets position -1, which the index_select or scatter_add
 * reading the positions refuses (an error, never another element). */
static ts_tensor *linear_index(tso_ctx *c, ts_tensor *idx, const int64_t *dims, int k,
                               ts_tensor *base) {
    int64_t stride[TS_MAX_DIMS], step = 1;
    for (int j = k - 1; j >= 0; j--) {
        stride[j] = step;
        step *= dims[j];
    }
    ts_tensor *size = tso_ints_tensor(c, dims, k, true);
    ts_tensor *w = wrap_index(idx, 0, size);
    ts_tensor *lin = ts_sum_dim(ts_mul(w, tso_ints_tensor(c, stride, k, true)), -1, false);
    if (base) lin = ts_add(lin, base);
    ts_tensor *bad = ts_to_dtype(ts_logical_or(ts_lt_scalar(w, 0), ts_ge(w, size)), TS_I64);
    return ts_where(ts_gt_scalar(ts_sum_dim(bad, -1, false), 0), ts_full_like(lin, -1), lin);
}

/* ------------------------------------------------------------------ Gather family */
/* data's axis replaced by the indices' dims: an index_select of the flattened indices */
TSO_RUN(run_gather) {
    (void)c;
    ts_tensor *x = in[0], *idx = in[1];
    if (!index_type(n, idx, "indices")) return false;
    ts_shape s = ts_shape_of(x), is = ts_shape_of(idx);
    if (s.ndim < 1)
        return tso_fail(n, TS_ERR_SHAPE, "needs data of rank >= 1, got %s", tsi_desc(x));
    int axis = tso_wrap_axis(n, tso_attr_int(n, "axis", 0), s.ndim, false);
    if (axis < 0) return false;
    ts_shape o, head;
    if (!join_shape(n, s.dims, axis, is.dims, is.ndim, &head) ||
        !join_shape(n, head.dims, head.ndim, s.dims + axis + 1, s.ndim - axis - 1, &o))
        return false;
    ts_tensor *flat = ts_reshape(wrap_index(idx, s.dims[axis], NULL), TS_SHAPE(ts_numel(idx)));
    TSO_DONE(ts_reshape(ts_index_select(x, axis, flat), o));
}

TSO_RUN(run_gather_elements) {
    (void)c;
    ts_tensor *x = in[0], *idx = in[1];
    if (!index_type(n, idx, "indices")) return false;
    int axis = tso_wrap_axis(n, tso_attr_int(n, "axis", 0), ts_ndim(x), false);
    if (axis < 0) return false;
    if (ts_ndim(idx) != ts_ndim(x))
        return tso_fail(n, TS_ERR_SHAPE, "indices %s and data %s differ in rank", tsi_desc(idx),
                        tsi_desc(x));
    TSO_DONE(ts_gather(x, axis, wrap_index(idx, ts_size(x, axis), NULL)));
}

/* data [b..., g..., rest...] (batch_dims b, opset 12) read at index tuples [b..., q..., k]: the
 * tuples become positions in data flattened to [B * G, rest...], one index_select. */
TSO_RUN(run_gather_nd) {
    ts_tensor *x = in[0], *idx = in[1];
    if (!index_type(n, idx, "indices")) return false;
    ts_shape s = ts_shape_of(x), is = ts_shape_of(idx);
    int64_t bd = tso_attr_int(n, "batch_dims", 0);
    if (is.ndim < 1 || bd < 0 || bd >= is.ndim || bd >= s.ndim)
        return tso_fail(n, TS_ERR_SHAPE, "batch_dims %lld does not fit indices %s and data %s",
                        (long long)bd, tsi_desc(idx), tsi_desc(x));
    int b = (int)bd;
    int64_t k = is.dims[is.ndim - 1];
    if (k < 1 || b + k > s.ndim)
        return tso_fail(n, TS_ERR_SHAPE, "index tuples of %lld values do not fit data %s",
                        (long long)k, tsi_desc(x));
    for (int d = 0; d < b; d++)
        if (is.dims[d] != s.dims[d])
            return tso_fail(n, TS_ERR_SHAPE, "batch dims of indices %s and data %s differ",
                            tsi_desc(idx), tsi_desc(x));
    int end = b + (int)k, n_rest = s.ndim - end;
    int64_t batch = prod(s.dims, 0, b), group = prod(s.dims, b, end);
    ts_shape flat, o;
    if (!join_shape(n, (int64_t[]){batch * group}, 1, s.dims + end, n_rest, &flat) ||
        !join_shape(n, is.dims, is.ndim - 1, s.dims + end, n_rest, &o))
        return false;
    /* each batch's block starts at batch_index * group */
    ts_tensor *base = ts_reshape(
        ts_mul_scalar(ts_arange(0, (double)batch, 1, tso_opts_of(x, TS_I64)), (double)group),
        TS_SHAPE(batch, 1));
    ts_tensor *pos =
        linear_index(c, ts_reshape(idx, TS_SHAPE(batch, -1, k)), s.dims + b, (int)k, base);
    ts_tensor *lin = ts_reshape(pos, TS_SHAPE(-1));
    TSO_DONE(ts_reshape(ts_index_select(ts_reshape(x, flat), 0, lin), o));
}

/* ------------------------------------------------------------------ Scatter family */
typedef enum reduction { RED_NONE, RED_ADD, RED_MUL } reduction;

static bool reduction_of(const tso_node *n, reduction *r) {
    static const char *const names[] = {"none", "add", "mul"};
    int i = tso_attr_choice(n, "reduction", "none", names, 3);
    if (i < 0) return false;
    *r = (reduction)i;
    return true;
}

static bool check_scatter(const tso_node *n) {
    reduction r = RED_NONE;
    return reduction_of(n, &r);
}

/* The product of the updates landing on each element (1 where none does), differentiable:
 * exp of the scattered log |u|, the sign from the count of negative factors, 0 where a factor is
 * 0 (whose own gradient is then taken as 0). Integers go through float64 and are rounded back. */
static ts_tensor *scatter_product(ts_tensor *data, int axis, ts_tensor *idx, ts_tensor *upd) {
    ts_dtype dt = ts_dtype_of(data);
    ts_dtype fdt = ts_dtype_is_floating(dt) ? dt : TS_F64;
    ts_tensor *u = fdt == dt ? upd : ts_to_dtype(upd, fdt);
    ts_tensor *zero_u = ts_eq_scalar(u, 0);
    ts_tensor *logs = ts_log(ts_where(zero_u, ts_ones_like(u), ts_abs(u)));
    ts_shape s = ts_shape_of(data);
    ts_tensor *mag = ts_exp(ts_scatter_add(ts_zeros(s, tso_opts_of(data, fdt)), axis, idx, logs));
    ts_tensor *zeros_i = ts_zeros(s, tso_opts_of(data, TS_I64));
    ts_tensor *negs = ts_scatter_add(zeros_i, axis, idx, ts_to_dtype(ts_lt_scalar(u, 0), TS_I64));
    ts_tensor *nils = ts_scatter_add(zeros_i, axis, idx, ts_to_dtype(zero_u, TS_I64));
    ts_tensor *signed_mag = ts_where(ts_eq_scalar(ts_fmod_scalar(negs, 2), 1), ts_neg(mag), mag);
    ts_tensor *p = ts_where(ts_gt_scalar(nils, 0), ts_zeros_like(mag), signed_mag);
    return fdt == dt ? p : ts_to_dtype(ts_round(p), dt);
}

/* data with updates written (none), added or multiplied in at idx along axis (idx: i64, in range,
 * the updates' shape). Duplicate indices are undefined for "none" in ONNX; here they add up. */
static ts_tensor *scatter(ts_tensor *data, int axis, ts_tensor *idx, ts_tensor *upd, reduction r) {
    if (r == RED_ADD) return ts_scatter_add(data, axis, idx, upd);
    ts_tensor *hits = ts_scatter_add(ts_zeros(ts_shape_of(data), tso_opts_of(data, TS_I64)), axis,
                                     idx, ts_ones(ts_shape_of(idx), tso_opts_of(data, TS_I64)));
    ts_tensor *hit = ts_gt_scalar(hits, 0);
    ts_tensor *v = r == RED_MUL ? ts_mul(data, scatter_product(data, axis, idx, upd))
                                : ts_scatter_add(ts_zeros_like(data), axis, idx, upd);
    return ts_where(hit, v, data);
}

static bool same_types(const tso_node *n, ts_tensor *data, ts_tensor *upd) {
    if (ts_dtype_of(data) == ts_dtype_of(upd)) return true;
    return tso_fail(n, TS_ERR_DTYPE, "updates %s and data %s differ in type", tsi_desc(upd),
                    tsi_desc(data));
}

/* ScatterElements (and Scatter, opsets 9-10): reduction from opset 16 */
TSO_RUN(run_scatter_elements) {
    (void)c;
    ts_tensor *x = in[0], *idx = in[1], *upd = in[2];
    reduction r = RED_NONE;
    if (!reduction_of(n, &r) || !index_type(n, idx, "indices") || !same_types(n, x, upd))
        return false;
    int axis = tso_wrap_axis(n, tso_attr_int(n, "axis", 0), ts_ndim(x), false);
    if (axis < 0) return false;
    if (ts_ndim(idx) != ts_ndim(x) || !tsi_shape_equal(ts_shape_of(idx), ts_shape_of(upd)))
        return tso_fail(n, TS_ERR_SHAPE, "indices %s, updates %s and data %s do not fit",
                        tsi_desc(idx), tsi_desc(upd), tsi_desc(x));
    TSO_DONE(scatter(x, axis, wrap_index(idx, ts_size(x, axis), NULL), upd, r));
}

/* data [g..., rest...] with updates [q..., rest...] at index tuples [q..., k]: a scatter along dim
 * 0 of data flattened to [G, rest...], the tuples' positions broadcast over rest */
TSO_RUN(run_scatter_nd) {
    ts_tensor *x = in[0], *idx = in[1], *upd = in[2];
    reduction r = RED_NONE;
    if (!reduction_of(n, &r) || !index_type(n, idx, "indices") || !same_types(n, x, upd))
        return false;
    ts_shape s = ts_shape_of(x), is = ts_shape_of(idx);
    int64_t k = is.ndim ? is.dims[is.ndim - 1] : 0;
    if (is.ndim < 1 || k < 1 || k > s.ndim)
        return tso_fail(n, TS_ERR_SHAPE, "indices %s do not fit data %s", tsi_desc(idx),
                        tsi_desc(x));
    int n_rest = s.ndim - (int)k;
    int64_t count = prod(is.dims, 0, is.ndim - 1);
    ts_shape flat, uflat, ushape;
    if (!join_shape(n, (int64_t[]){prod(s.dims, 0, (int)k)}, 1, s.dims + k, n_rest, &flat) ||
        !join_shape(n, &count, 1, s.dims + k, n_rest, &uflat))
        return false;
    if (!join_shape(n, is.dims, is.ndim - 1, s.dims + k, n_rest, &ushape) ||
        !tsi_shape_equal(ushape, ts_shape_of(upd)))
        return tso_fail(n, TS_ERR_SHAPE, "updates %s do not fit indices %s and data %s",
                        tsi_desc(upd), tsi_desc(idx), tsi_desc(x));
    ts_tensor *pos = linear_index(c, ts_reshape(idx, TS_SHAPE(count, k)), s.dims, (int)k, NULL);
    ts_shape one = uflat;
    for (int d = 1; d < one.ndim; d++) one.dims[d] = 1;
    ts_tensor *full = ts_contiguous(ts_expand(ts_reshape(pos, one), uflat));
    ts_tensor *y = scatter(ts_reshape(x, flat), 0, full, ts_reshape(upd, uflat), r);
    TSO_DONE(ts_reshape(y, s));
}

/* ------------------------------------------------------------------ OneHot */
/* indices compared with the classes 0..depth-1 laid along the new axis (negative indices wrap,
 * those out of range match none), then on / off values chosen (differentiable in values) */
TSO_RUN(run_one_hot) {
    (void)c;
    ts_tensor *idx = in[0], *values = in[2];
    double depth_v;
    if (!tso_read_scalar(n, in[1], &depth_v, "depth")) return false;
    int64_t depth = (int64_t)depth_v;
    if (depth < 1) return tso_fail(n, TS_ERR_ARG, "depth must be positive, got %g", depth_v);
    if (ts_numel(values) != 2)
        return tso_fail(n, TS_ERR_SHAPE, "values must hold [off, on], got %s", tsi_desc(values));
    int r = ts_ndim(idx) + 1;
    if (r > TS_MAX_DIMS)
        return tso_fail(n, TS_ERR_SHAPE, "the result would have %d dims (Tessera has at most %d)",
                        r, TS_MAX_DIMS);
    int axis = tso_wrap_axis(n, tso_attr_int(n, "axis", -1), r, false);
    if (axis < 0) return false;
    ts_tensor *i = ts_dtype_is_floating(ts_dtype_of(idx)) ? ts_to_dtype(idx, TS_I64) : idx;
    ts_tensor *w = ts_unsqueeze(wrap_index(i, depth, NULL), axis);
    ts_shape cs = {.ndim = r};
    for (int d = 0; d < r; d++) cs.dims[d] = d == axis ? depth : 1;
    ts_tensor *classes = ts_reshape(ts_arange(0, (double)depth, 1, tso_opts_of(idx, TS_I64)), cs);
    ts_tensor *v = ts_reshape(values, TS_SHAPE(2));
    TSO_DONE(ts_where(ts_eq(w, classes), ts_select(v, 0, 1), ts_select(v, 0, 0)));
}

/* ------------------------------------------------------------------ data-dependent shapes */
/* A tensor's truth values on the host (n bytes, 0 or 1). NonZero's and Compress's result shapes
 * depend on the data, which only the host can size the result from: these two operators read it. */
static uint8_t *truth_on_host(const tso_node *n, ts_tensor *x, int64_t count) {
    uint8_t *v = malloc((size_t)(count > 0 ? count : 1));
    if (!v) return tso_fail(n, TS_ERR_OOM, "out of host memory"), NULL;
    ts_tensor *h = ts_to_dtype(ts_to(ts_to_dtype(x, TS_BOOL), ts_cpu()), TS_U8);
    if (!h || ts_copy_to_host(h, v, (size_t)count) != TS_OK) {
        free(v);
        tso_fail_pending(n);
        return NULL;
    }
    return v;
}

/* [rank, count] i64: the coordinates of the non-zero elements in row-major order */
TSO_RUN(run_non_zero) {
    (void)c;
    ts_tensor *x = in[0];
    ts_shape s = ts_shape_of(x);
    int64_t total = ts_numel(x), hits = 0;
    uint8_t *t = truth_on_host(n, x, total);
    if (!t) return false;
    for (int64_t i = 0; i < total; i++) hits += t[i];
    int64_t *coord = malloc((size_t)(s.ndim * hits > 0 ? s.ndim * hits : 1) * sizeof *coord);
    if (!coord) {
        free(t);
        return tso_fail(n, TS_ERR_OOM, "out of host memory");
    }
    for (int64_t i = 0, j = 0; i < total; i++) {
        if (!t[i]) continue;
        int64_t rem = i;
        for (int d = s.ndim - 1; d >= 0; d--) {
            coord[(int64_t)d * hits + j] = rem % s.dims[d];
            rem /= s.dims[d];
        }
        j++;
    }
    free(t);
    ts_shape o = TS_SHAPE(s.ndim, hits); /* a 0-dim input gives [0, count], as NumPy's */
    out[0] = ts_from_data(o, TS_I64, coord, tso_opts_of(x, TS_I64));
    free(coord);
    return out[0] != NULL || tso_fail_pending(n);
}

/* the slices along axis (of the flattened input without one) whose condition is true */
TSO_RUN(run_compress) {
    ts_tensor *x = in[0], *cond = in[1];
    if (ts_ndim(cond) != 1)
        return tso_fail(n, TS_ERR_SHAPE, "condition must be 1-D, got %s", tsi_desc(cond));
    const Onnx__AttributeProto *a = tso_attr(n, "axis");
    int axis = 0;
    if (a) {
        axis = tso_wrap_axis(n, a->i, ts_ndim(x), false);
        if (axis < 0) return false;
    } else {
        x = ts_reshape(x, TS_SHAPE(-1));
        if (!x) return tso_fail_pending(n);
    }
    int64_t dim = ts_size(x, axis), len = ts_numel(cond), kept = 0;
    uint8_t *t = truth_on_host(n, cond, len);
    if (!t) return false;
    int64_t *pos = malloc((size_t)(len > 0 ? len : 1) * sizeof *pos);
    bool ok = pos != NULL || tso_fail(n, TS_ERR_OOM, "out of host memory");
    for (int64_t i = 0; ok && i < len; i++) {
        if (!t[i]) continue;
        if (i >= dim)
            ok = tso_fail(n, TS_ERR_SHAPE, "condition selects index %lld of a dim of %lld",
                          (long long)i, (long long)dim);
        else
            pos[kept++] = i;
    }
    ts_tensor *sel = ok ? i64_vector(x, pos, kept) : NULL;
    free(t);
    free(pos);
    (void)c;
    if (!ok) return false;
    TSO_DONE(ts_index_select(x, axis, sel));
}

/* ------------------------------------------------------------------ ReverseSequence */
/* a gather along the time axis: position t of batch b reads lens[b] - 1 - t while t < lens[b] */
TSO_RUN(run_reverse_sequence) {
    (void)c;
    ts_tensor *x = in[0], *lens = in[1];
    if (!index_type(n, lens, "sequence_lens")) return false;
    int r = ts_ndim(x);
    int ta = tso_wrap_axis(n, tso_attr_int(n, "time_axis", 0), r, false);
    int ba = tso_wrap_axis(n, tso_attr_int(n, "batch_axis", 1), r, false);
    if (ta < 0 || ba < 0) return false;
    if (ta == ba || ts_ndim(lens) != 1 || ts_numel(lens) != ts_size(x, ba))
        return tso_fail(n, TS_ERR_SHAPE,
                        "sequence_lens %s does not fit %s (batch axis %d, time axis %d)",
                        tsi_desc(lens), tsi_desc(x), ba, ta);
    int64_t steps = ts_size(x, ta), batch = ts_size(x, ba);
    ts_shape tshape = {.ndim = r}, bshape = {.ndim = r};
    for (int d = 0; d < r; d++) {
        tshape.dims[d] = d == ta ? steps : 1;
        bshape.dims[d] = d == ba ? batch : 1;
    }
    ts_tensor *t = ts_reshape(ts_arange(0, (double)steps, 1, tso_opts_of(x, TS_I64)), tshape);
    ts_tensor *l =
        ts_reshape(ts_dtype_of(lens) == TS_I64 ? lens : ts_to_dtype(lens, TS_I64), bshape);
    ts_tensor *src = ts_where(ts_lt(t, l), ts_sub(ts_sub_scalar(l, 1), t), t);
    TSO_DONE(ts_gather(x, ta, ts_contiguous(ts_expand(src, ts_shape_of(x)))));
}

/* ------------------------------------------------------------------ Unique */
/* Unique's outputs are sized by the data, so the input is read to the host and sorted there (as
 * for NonZero); Y is then an index_select of the input at the first occurrences, which keeps it
 * on the device and differentiable. */
typedef struct slices {
    const double *f;  /* floating input as float64 ... */
    const int64_t *i; /* ... or integers as int64 (exact) */
    int64_t len;      /* values per slice (1 without an axis) */
} slices;

/* lexicographic order of slices a and b; NaN sorts last and equals NaN (NumPy's unique) */
static int cmp_slices(const slices *s, int64_t a, int64_t b) {
    for (int64_t k = 0; k < s->len; k++) {
        int64_t p = a * s->len + k, q = b * s->len + k;
        if (s->i) {
            if (s->i[p] != s->i[q]) return s->i[p] < s->i[q] ? -1 : 1;
            continue;
        }
        double x = s->f[p], y = s->f[q];
        bool xn = x != x, yn = y != y;
        if (xn != yn) return xn ? 1 : -1;
        if (!xn && x != y) return x < y ? -1 : 1;
    }
    return 0;
}

/* a stable merge sort of the slice numbers v[0..m) (ties keep the first occurrence first) */
static void sort_slices(const slices *s, int64_t *v, int64_t *tmp, int64_t m) {
    if (m < 2) return;
    int64_t h = m / 2, i = 0, j = h, k = 0;
    sort_slices(s, v, tmp, h);
    sort_slices(s, v + h, tmp, m - h);
    while (i < h && j < m) tmp[k++] = cmp_slices(s, v[j], v[i]) < 0 ? v[j++] : v[i++];
    while (i < h) tmp[k++] = v[i++];
    while (j < m) tmp[k++] = v[j++];
    memcpy(v, tmp, (size_t)m * sizeof *v);
}

typedef struct uniq {
    int64_t u;                         /* unique slices */
    int64_t *first, *counts, *inverse; /* [u], [u], [m] */
    int64_t *buf;
} uniq;

/* first[g] (each unique slice's first occurrence, in output order), counts[g], inverse[k] (the
 * unique of slice k); sorted order, or the order of first occurrence */
static bool find_unique(const tso_node *n, const slices *s, int64_t m, bool sorted, uniq *q) {
    size_t cells = (size_t)(m > 0 ? m : 1);
    q->buf = malloc(6 * cells * sizeof *q->buf);
    if (!q->buf) return tso_fail(n, TS_ERR_OOM, "out of host memory");
    int64_t *order = q->buf, *tmp = order + cells, *first = tmp + cells, *counts = first + cells;
    q->inverse = counts + cells;
    int64_t *renum = q->inverse + cells;
    for (int64_t k = 0; k < m; k++) order[k] = k;
    sort_slices(s, order, tmp, m);
    q->u = 0;
    for (int64_t p = 0; p < m; p++) { /* runs of equal slices, numbered in sorted order */
        if (p == 0 || cmp_slices(s, order[p - 1], order[p])) {
            first[q->u] = order[p];
            counts[q->u++] = 0;
        }
        counts[q->u - 1]++;
        q->inverse[order[p]] = q->u - 1;
    }
    for (int64_t g = 0; g < q->u; g++) renum[g] = sorted ? g : -1;
    for (int64_t k = 0, next = 0; !sorted && k < m; k++) /* numbered by first occurrence */
        if (renum[q->inverse[k]] < 0) renum[q->inverse[k]] = next++;
    /* order and tmp are free now: they take first and counts in output order */
    for (int64_t g = 0; g < q->u; g++) {
        order[renum[g]] = first[g];
        tmp[renum[g]] = counts[g];
    }
    for (int64_t k = 0; k < m; k++) q->inverse[k] = renum[q->inverse[k]];
    q->first = order;
    q->counts = tmp;
    return true;
}

/* the input's values on the host, slice after slice along axis (moved first) */
static bool values_on_host(const tso_node *n, ts_tensor *x, slices *s, void **buf) {
    bool fl = ts_dtype_is_floating(ts_dtype_of(x));
    int64_t count = ts_numel(x);
    *buf = malloc((size_t)(count > 0 ? count : 1) * 8);
    if (!*buf) return tso_fail(n, TS_ERR_OOM, "out of host memory");
    ts_tensor *h = ts_to_dtype(ts_to(x, ts_cpu()), fl ? TS_F64 : TS_I64);
    if (!h || ts_copy_to_host(h, *buf, (size_t)count * 8) != TS_OK) return tso_fail_pending(n);
    s->f = fl ? *buf : NULL;
    s->i = fl ? NULL : *buf;
    return true;
}

TSO_RUN(run_unique) {
    (void)c;
    ts_tensor *x = in[0];
    const Onnx__AttributeProto *a = tso_attr(n, "axis");
    int axis = 0;
    ts_tensor *src = x; /* what Y selects from along axis */
    ts_tensor *moved = NULL;
    if (a) {
        axis = tso_wrap_axis(n, a->i, ts_ndim(x), false);
        if (axis < 0) return false;
        ts_dims perm = {.n = ts_ndim(x)};
        for (int d = 0, j = 1; d < perm.n; d++) perm.d[d == axis ? 0 : j++] = d;
        moved = ts_permute(x, perm);
    } else {
        src = moved = ts_reshape(x, TS_SHAPE(-1));
    }
    if (!moved) return tso_fail_pending(n);
    int64_t m = ts_size(src, axis);
    slices s = {.len = m ? ts_numel(x) / m : 1};
    void *vals = NULL;
    uniq q = {0};
    bool ok = values_on_host(n, moved, &s, &vals) &&
              find_unique(n, &s, m, tso_attr_int(n, "sorted", 1) != 0, &q);
    ts_tensor *first = ok ? i64_vector(x, q.first, q.u) : NULL;
    if (ok) out[0] = ts_index_select(src, axis, first);
    if (ok && n->n_out > 1) out[1] = first;
    if (ok && n->n_out > 2) out[2] = i64_vector(x, q.inverse, m);
    if (ok && n->n_out > 3) out[3] = i64_vector(x, q.counts, q.u);
    free(vals);
    free(q.buf);
    for (int i = 0; ok && i < n->n_out && i < 4; i++)
        if (!out[i]) ok = tso_fail_pending(n);
    return ok;
}

const tso_op_def tso_ops_index[] = {
    {"Gather", 1, run_gather, NULL, false},
    {"GatherElements", 11, run_gather_elements, NULL, false},
    {"GatherND", 11, run_gather_nd, NULL, false},
    {"Scatter", 9, run_scatter_elements, NULL, false},
    {"ScatterElements", 11, run_scatter_elements, check_scatter, false},
    {"ScatterND", 11, run_scatter_nd, check_scatter, false},
    {"OneHot", 9, run_one_hot, NULL, false},
    {"NonZero", 9, run_non_zero, NULL, false},
    {"Compress", 9, run_compress, NULL, false},
    {"ReverseSequence", 10, run_reverse_sequence, NULL, false},
    {"Unique", 11, run_unique, NULL, false},
    {NULL, 0, NULL, NULL, false},
};
