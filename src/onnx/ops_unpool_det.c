/* ops_unpool_det.c — ONNX operators outside the families of the other ops_*.c files: MaxUnpool and
 * Det, composed from Tessera's differentiable ops so they run on any device. */
#include "onnx/onnx_internal.h"

/* ------------------------------------------------------------------ MaxUnpool */
static bool check_max_unpool(const tso_node *n) {
    const int64_t *k, *p, *s;
    int nk = tso_attr_ints(n, "kernel_shape", &k);
    int np = tso_attr_ints(n, "pads", &p), ns = tso_attr_ints(n, "strides", &s);
    if (nk < 1 || nk > TS_MAX_DIMS - 2 || (np >= 0 && np != 2 * nk) || (ns >= 0 && ns != nk))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "kernel_shape, pads and strides must agree");
    return true;
}

/* t with `extra` zeros appended along dim */
static ts_tensor *pad_end(ts_tensor *t, int dim, int64_t extra) {
    if (!t || extra == 0) return t;
    ts_shape s = ts_shape_of(t);
    s.dims[dim] = extra;
    ts_tensor *parts[2] = {t, ts_zeros(s, tso_opts_of(t, ts_dtype_of(t)))};
    return ts_cat(parts, 2, dim);
}

/* Y's default shape: what MaxPool with these attributes maps back from X's shape */
static bool unpool_shape(const tso_node *n, ts_tensor *x, ts_shape *s) {
    const int64_t *k, *p, *st;
    int nk = tso_attr_ints(n, "kernel_shape", &k);
    int np = tso_attr_ints(n, "pads", &p), ns = tso_attr_ints(n, "strides", &st);
    *s = ts_shape_of(x);
    if (s->ndim != nk + 2)
        return tso_fail(n, TS_ERR_SHAPE, "X %s does not match kernel_shape", tsi_desc(x));
    for (int d = 0; d < nk; d++) {
        int64_t stride = ns > 0 ? st[d] : 1, pad = np > 0 ? p[d] + p[nk + d] : 0;
        s->dims[d + 2] = (s->dims[d + 2] - 1) * stride - pad + k[d];
        if (s->dims[d + 2] < 0) return tso_fail(n, TS_ERR_SHAPE, "negative output size");
    }
    return true;
}

/* The indices are MaxPool's, into the whole flattened tensor: X is scattered into zeros of the
 * inferred shape, which output_shape then extends with zeros at the end of each dim. */
TSO_RUN(run_max_unpool) {
    (void)c;
    ts_tensor *x = in[0];
    ts_shape s;
    if (!unpool_shape(n, x, &s)) return false;
    int64_t total = 1;
    for (int d = 0; d < s.ndim; d++) total *= s.dims[d];
    ts_tensor *flat =
        ts_scatter_add(ts_zeros(TS_SHAPE(total), tso_opts_of(x, ts_dtype_of(x))), 0,
                       ts_flatten(ts_to_dtype(in[1], TS_I64), 0, -1), ts_flatten(x, 0, -1));
    ts_tensor *y = ts_reshape(flat, s);
    if (in[2]) {
        int64_t want[TS_MAX_DIMS];
        int count = tso_read_ints(n, in[2], want, TS_MAX_DIMS, "output_shape");
        if (count < 0) return false;
        if (count != s.ndim) return tso_fail(n, TS_ERR_SHAPE, "output_shape has %d dims", count);
        for (int d = 0; d < s.ndim; d++) {
            if (want[d] < s.dims[d])
                return tso_fail(n, TS_ERR_SHAPE, "output_shape smaller than the unpooled shape");
            y = pad_end(y, d, want[d] - s.dims[d]);
        }
    }
    TSO_DONE(y);
}

/* ------------------------------------------------------------------ Det */
/* One step of Gaussian elimination on a [B, M, M]: the row with the largest |a[:, i, k]| (i >= k)
 * is swapped into row k (the sign flips when it moves), the pivot multiplies *det and the rows
 * below lose their multiple of row k. */
static ts_tensor *lu_step(ts_tensor *a, int64_t k, ts_tensor *rows, ts_tensor **det) {
    int64_t b = ts_size(a, 0), m = ts_size(a, 1);
    ts_opts io = tso_opts_of(a, TS_I64);
    ts_tensor *col = ts_select(ts_slice(a, 1, k, m, 1), 2, k);
    ts_tensor *p = ts_add_scalar(ts_argmax_dim(ts_abs(col), 1, true), (double)k); /* [B, 1] */
    ts_tensor *perm = ts_where(ts_eq_scalar(rows, (double)k), p,
                               ts_where(ts_eq(rows, p), ts_scalar((double)k, io), rows));
    a = ts_gather(a, 1, ts_expand(ts_unsqueeze(perm, 2), TS_SHAPE(b, m, m)));
    ts_tensor *flip = ts_to_dtype(ts_ne_scalar(ts_flatten(p, 0, -1), (double)k), ts_dtype_of(a));
    ts_tensor *prow = ts_slice(a, 1, k, k + 1, 1);   /* [B, 1, M] */
    ts_tensor *piv = ts_slice(prow, 2, k, k + 1, 1); /* [B, 1, 1] */
    *det = ts_mul(ts_mul(*det, ts_rsub_scalar(ts_mul_scalar(flip, 2), 1)), ts_flatten(piv, 0, -1));
    if (k + 1 == m) return a;
    /* a zero pivot (singular) already made det 0: dividing by 1 keeps the rest finite */
    ts_tensor *safe = ts_where(ts_eq_scalar(piv, 0), ts_ones_like(piv), piv);
    ts_tensor *below = ts_slice(a, 1, k + 1, m, 1);
    ts_tensor *f = ts_div(ts_slice(below, 2, k, k + 1, 1), safe);
    ts_tensor *parts[2] = {ts_slice(a, 1, 0, k + 1, 1), ts_sub(below, ts_mul(f, prow))};
    return ts_cat(parts, 2, 1);
}

TSO_RUN(run_det) {
    (void)c;
    ts_tensor *a = in[0];
    ts_shape s = ts_shape_of(a);
    ts_dtype dt = ts_dtype_of(a);
    if (s.ndim < 2 || s.dims[s.ndim - 1] != s.dims[s.ndim - 2])
        return tso_fail(n, TS_ERR_SHAPE, "Det needs [..., M, M], got %s", tsi_desc(a));
    if (!ts_dtype_is_floating(dt))
        return tso_fail(n, TS_ERR_DTYPE, "Det needs a float tensor, got %s", tsi_desc(a));
    int64_t m = s.dims[s.ndim - 1], b = 1;
    ts_shape bs = {.ndim = s.ndim - 2};
    for (int d = 0; d < bs.ndim; d++) b *= (bs.dims[d] = s.dims[d]);
    a = ts_reshape(a, TS_SHAPE(b, m, m));
    ts_tensor *rows =
        ts_reshape(ts_arange(0, (double)m, 1, tso_opts_of(a, TS_I64)), TS_SHAPE(1, m));
    ts_tensor *det = ts_ones(TS_SHAPE(b), tso_opts_of(a, dt));
    for (int64_t k = 0; k < m && a; k++) a = lu_step(a, k, rows, &det);
    TSO_DONE(a ? ts_reshape(det, bs) : NULL);
}

const tso_op_def tso_ops_unpool_det[] = {
    {"MaxUnpool", 9, run_max_unpool, check_max_unpool, false},
    {"Det", 11, run_det, NULL, false},
    {NULL, 0, NULL, NULL, false},
};
