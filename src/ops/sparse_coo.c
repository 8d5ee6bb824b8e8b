/* sparse_coo.c — sparse COO tensors in C (include/tessera/sparse.h, decision 0048, issue 76):
 * construction with PyTorch's checks, coalescing, the conversion from dense, transpose, products
 * with scalars and dense tensors, sums and sparse @ dense. A COO tensor is its int64 indices
 * [sparse_dim, nnz] and values [nnz, *dense]: each op composes dense differentiable ops over them
 * (linear positions by a dot with row-major strides, unique, index_add, index_select, nonzero),
 * so every device and the values' gradients come with them. Index bounds are read on the host
 * (always checked: an index out of range would be a wrong number). */
#include <stdio.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/internal.h"
#include "tessera/sparse.h"

static ts_status fail(void) {
    const ts_status s = ts_error();
    return s == TS_OK ? tsi_error_set(TS_ERR_STATE, "sparse: an op failed without an error") : s;
}

/* the scope's results moved out into *out (in kept): TS_OK or the error */
static ts_status finish_coo(ts_coo r, ts_coo *out) {
    ts_status s = ts_error();
    if (s == TS_OK && (!r.indices || !r.values)) s = fail();
    if (s == TS_OK) {
        r.indices = ts_keep(r.indices);
        r.values = ts_keep(r.values);
        if (!r.indices || !r.values) s = fail();
    }
    ts_scope_end();
    if (s == TS_OK) *out = r;
    return s;
}

static int64_t numel_dims(const int64_t *d, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= d[i];
    return p;
}

static int sparse_dim(ts_coo c) { return (int)c.indices->shape.dims[0]; }
static int64_t nnz(ts_coo c) { return c.indices->shape.dims[1]; }

static bool check_coo(const char *op, ts_coo c) {
    if (!c.indices || !c.values) {
        tsi_error_set(TS_ERR_ARG, "%s: the sparse tensor's indices or values are NULL", op);
        return false;
    }
    return tsi_check_input(op, c.indices, "indices") && tsi_check_input(op, c.values, "values");
}

/* the row-major linear position [nnz] (int64) of each column of indices over sizes[0..sd) */
static ts_tensor *linear(ts_tensor *indices, const int64_t *sizes, int sd) {
    int64_t st[TS_MAX_DIMS], acc = 1;
    for (int k = sd - 1; k >= 0; k--) {
        st[k] = acc;
        if (sizes[k] && acc > INT64_MAX / sizes[k]) {
            tsi_error_set(TS_ERR_ARG,
                          "sparse: the sparse sizes have more than 2**63 positions (the linear "
                          "index would overflow int64)");
            return NULL;
        }
        acc *= sizes[k] ? sizes[k] : 1;
    }
    const ts_device d = ts_device_of(indices);
    if (sd == 0)
        return ts_zeros(TS_SHAPE(indices->shape.dims[1]), (ts_opts){.dtype = TS_I64, .device = d});
    ts_tensor *s = ts_tensor_i64(TS_SHAPE(sd, 1), st, (ts_opts){.dtype = TS_I64, .device = d});
    return s ? ts_sum_dims(ts_mul(indices, s), (ts_dims){.n = 1, .d = {0}}, false) : NULL;
}

/* indices [sd, n] of the linear positions lin [n] */
static ts_tensor *unravel(ts_tensor *lin, const int64_t *sizes, int sd) {
    const ts_opts o = {.dtype = TS_I64, .device = ts_device_of(lin)};
    if (sd == 0) return ts_zeros(TS_SHAPE(0, lin->shape.dims[0]), o);
    ts_tensor *rows[TS_MAX_DIMS];
    int64_t acc = 1;
    for (int k = sd - 1; k >= 0; k--) {
        ts_tensor *q = ts_floor_divide(lin, ts_scalar((double)acc, o));
        rows[k] = q ? ts_remainder(q, ts_scalar((double)(sizes[k] ? sizes[k] : 1), o)) : NULL;
        if (!rows[k]) return NULL;
        acc *= sizes[k] ? sizes[k] : 1;
    }
    return ts_stack(rows, sd, 0);
}

/* zeros [n, *dense] with values[j] added at row index[j] (bool: logical or) */
static ts_tensor *accumulate(int64_t n, const int64_t *dense, int nd, ts_tensor *index,
                             ts_tensor *values) {
    if (values->dtype == TS_BOOL) {
        ts_tensor *a = accumulate(n, dense, nd, index, ts_to_dtype(values, TS_I64));
        return a ? ts_ne_scalar(a, 0) : NULL;
    }
    ts_shape s = {.ndim = nd + 1};
    s.dims[0] = n;
    for (int i = 0; i < nd; i++) s.dims[i + 1] = dense[i];
    return ts_index_add(
        ts_zeros(s, (ts_opts){.dtype = values->dtype, .device = ts_device_of(values)}), 0, index,
        values, 1.0);
}

/* one int64 per row of a [rows, n] tensor reduced by amax / amin (n > 0) into host v */
static bool row_extrema(ts_tensor *indices, bool max, int64_t *v) {
    ts_tensor *r = max ? ts_amax_dim(indices, 1, false) : ts_amin_dim(indices, 1, false);
    r = r ? ts_contiguous(r) : NULL;
    return r && ts_copy_to_host(r, v, (size_t)indices->shape.dims[0] * sizeof *v) == TS_OK;
}

ts_status ts_sparse_coalesce(ts_coo in, ts_coo *out) {
    const char *op = "coalesce";
    tsi_init();
    if (!out) return tsi_error_set(TS_ERR_ARG, "%s: out is NULL", op);
    if (!check_coo(op, in)) return ts_error();
    if (in.coalesced || nnz(in) == 0) {
        in.coalesced = true;
        ts_scope_begin();
        in.indices = tsi_own(ts_retain(in.indices)); /* into the scope: kept out again */
        in.values = tsi_own(ts_retain(in.values));
        return finish_coo(in, out);
    }
    const int sd = sparse_dim(in);
    ts_scope_begin();
    ts_tensor *inverse = NULL;
    ts_tensor *lin = linear(in.indices, in.size.dims, sd);
    ts_tensor *uniq = lin ? ts_unique(lin, true, false, 0, &inverse, NULL) : NULL;
    ts_coo r = in;
    r.coalesced = true;
    r.values = uniq ? accumulate(uniq->shape.dims[0], in.size.dims + sd, in.size.ndim - sd, inverse,
                                 in.values)
                    : NULL;
    r.indices = r.values ? unravel(uniq, in.size.dims, sd) : NULL;
    return finish_coo(r, out);
}

ts_status ts_sparse_coo_tensor(ts_tensor *indices, ts_tensor *values, const ts_shape *size,
                               int is_coalesced, bool check_invariants, ts_coo *out) {
    const char *op = "sparse_coo_tensor";
    tsi_init();
    if (!out) return tsi_error_set(TS_ERR_ARG, "%s: out is NULL", op);
    if (!tsi_check_input(op, indices, "indices") || !tsi_check_input(op, values, "values"))
        return ts_error();
    if (indices->dtype == TS_BOOL || tsi_is_complex(indices->dtype))
        return tsi_error_set(TS_ERR_DTYPE, "%s(): indices must be an int64 tensor", op);
    if (!tsi_device_eq(tsi_device(indices), tsi_device(values))) {
        char a[64];
        snprintf(a, sizeof a, "%s", ts_device_str(ts_device_of(indices)));
        return tsi_error_set(TS_ERR_DEVICE,
                             "device of indices (%s) must match device of values (%s)", a,
                             ts_device_str(ts_device_of(values)));
    }
    if (indices->shape.ndim != 2)
        return tsi_error_set(TS_ERR_SHAPE, "indices must be sparse_dim x nnz, but got: %s",
                             tsi_shape_str(indices->shape));
    if (values->shape.ndim == 0)
        return tsi_error_set(TS_ERR_SHAPE,
                             "values must have at least one dimension (nnz), got a 0-dim tensor");
    const int64_t sd = indices->shape.dims[0], n = indices->shape.dims[1];
    if (values->shape.dims[0] != n)
        return tsi_error_set(TS_ERR_SHAPE,
                             "indices and values must have same nnz, but got nnz from indices: "
                             "%lld, nnz from values: %lld",
                             (long long)n, (long long)values->shape.dims[0]);
    const int nd = values->shape.ndim - 1;
    if (sd + nd > TS_MAX_DIMS)
        return tsi_error_set(TS_ERR_SHAPE, "%s(): %lld dims, at most %d are supported", op,
                             (long long)(sd + nd), TS_MAX_DIMS);
    ts_scope_begin();
    ts_coo r = {.indices = ts_to_dtype(indices, TS_I64), .values = values};
    r.values = ts_retain(values), r.values = tsi_own(r.values);
    int64_t hi[TS_MAX_DIMS] = {0}, lo[TS_MAX_DIMS] = {0};
    if (r.indices && n && (!row_extrema(r.indices, true, hi) || !row_extrema(r.indices, false, lo)))
        return finish_coo((ts_coo){0}, out);
    if (size) {
        for (int i = 0; i < size->ndim; i++)
            if (size->dims[i] < 0) {
                tsi_error_set(TS_ERR_ARG, "%s(): size must be non-negative, got %s", op,
                              tsi_shape_str(*size));
                return finish_coo((ts_coo){0}, out);
            }
        if (size->ndim != sd + nd) {
            tsi_error_set(TS_ERR_SHAPE,
                          "'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = "
                          "%d, sparse_dim = %lld, dense_dim = %d",
                          size->ndim, (long long)sd, nd);
            return finish_coo((ts_coo){0}, out);
        }
        bool same = true;
        for (int i = 0; i < nd; i++) same &= size->dims[sd + i] == values->shape.dims[1 + i];
        if (!same) {
            ts_shape want = {.ndim = nd + 1};
            want.dims[0] = n;
            for (int i = 0; i < nd; i++) want.dims[1 + i] = size->dims[sd + i];
            char w[TSI_FMT_BUF_LEN];
            snprintf(w, sizeof w, "%s", tsi_shape_str(want));
            tsi_error_set(TS_ERR_SHAPE, "values has incorrect size, expected %s, got %s", w,
                          tsi_shape_str(values->shape));
            return finish_coo((ts_coo){0}, out);
        }
        r.size = *size;
    } else {
        r.size.ndim = (int)(sd + nd);
        for (int i = 0; i < sd; i++) r.size.dims[i] = n ? hi[i] + 1 : 0;
        for (int i = 0; i < nd; i++) r.size.dims[sd + i] = values->shape.dims[1 + i];
    }
    for (int i = 0; i < sd && n; i++) {
        if (lo[i] < 0) {
            tsi_error_set(TS_ERR_ARG, "found negative index %lld for dim %d", (long long)lo[i], i);
            return finish_coo((ts_coo){0}, out);
        }
        if (hi[i] >= r.size.dims[i]) {
            tsi_error_set(TS_ERR_ARG,
                          "size is inconsistent with indices: for dim %d, size is %lld but found "
                          "index %lld",
                          i, (long long)r.size.dims[i], (long long)hi[i]);
            return finish_coo((ts_coo){0}, out);
        }
    }
    r.coalesced = is_coalesced < 0 ? n <= 1 : is_coalesced != 0;
    if (is_coalesced > 0 && check_invariants && r.indices) {
        ts_coo c;
        ts_coo u = r;
        u.coalesced = false;
        if (ts_sparse_coalesce(u, &c) != TS_OK) return finish_coo((ts_coo){0}, out);
        bool ok = nnz(c) == n;
        if (ok) {
            ts_tensor *eq = ts_all(ts_eq(c.indices, r.indices), (ts_dims){0}, false);
            ok = eq && ts_item(eq) != 0;
        }
        if (!ok) {
            tsi_error_set(TS_ERR_ARG,
                          "%s(): is_coalesced=True but the indices are not sorted and unique", op);
            return finish_coo((ts_coo){0}, out);
        }
    }
    return finish_coo(r, out);
}

ts_status ts_dense_to_sparse(ts_tensor *x, int sparse_dim_, ts_coo *out) {
    const char *op = "dense_to_sparse";
    tsi_init();
    if (!out) return tsi_error_set(TS_ERR_ARG, "%s: out is NULL", op);
    if (!tsi_check_input(op, x, "input")) return ts_error();
    const int n = x->shape.ndim, sd = sparse_dim_ < 0 ? n : sparse_dim_;
    if (sd > n)
        return tsi_error_set(TS_ERR_ARG,
                             "dense_to_sparse: sparse_dim argument must be in [0,%d] range, but %d "
                             "is given",
                             n, sd);
    const ts_opts o = {.dtype = TS_I64, .device = ts_device_of(x)};
    ts_scope_begin();
    ts_coo r = {.size = x->shape, .coalesced = true};
    if (sd == 0) {
        r.indices = ts_zeros(TS_SHAPE(0, 1), o);
        r.values = ts_unsqueeze(x, 0);
        return finish_coo(r, out);
    }
    ts_tensor *mask = ts_ne_scalar(x, 0); /* NaN counts as nonzero */
    if (mask && sd < n) {
        ts_shape s = {.ndim = sd + 1};
        for (int i = 0; i < sd; i++) s.dims[i] = x->shape.dims[i];
        s.dims[sd] = -1;
        mask = ts_any(ts_reshape(mask, s), (ts_dims){.n = 1, .d = {sd}}, false);
    }
    r.indices = mask ? ts_contiguous(ts_t(ts_nonzero(mask))) : NULL;
    ts_tensor *lin = r.indices ? linear(r.indices, x->shape.dims, sd) : NULL;
    if (lin) {
        ts_shape rows = {.ndim = n - sd + 1};
        rows.dims[0] = numel_dims(x->shape.dims, sd);
        for (int i = sd; i < n; i++) rows.dims[i - sd + 1] = x->shape.dims[i];
        r.values = ts_index_select(ts_reshape(x, rows), 0, lin);
    }
    return finish_coo(r, out);
}

ts_status ts_sparse_transpose(ts_coo in, int dim0, int dim1, ts_coo *out) {
    const char *op = "transpose";
    tsi_init();
    if (!out) return tsi_error_set(TS_ERR_ARG, "%s: out is NULL", op);
    if (!check_coo(op, in)) return ts_error();
    const int nd = in.size.ndim, sd = sparse_dim(in);
    const int d0 = tsi_wrap_dim(op, dim0, nd), d1 = d0 < 0 ? -1 : tsi_wrap_dim(op, dim1, nd);
    if (d0 < 0 || d1 < 0) return ts_error();
    ts_scope_begin();
    ts_coo r = in;
    const int64_t t = r.size.dims[d0];
    r.size.dims[d0] = r.size.dims[d1], r.size.dims[d1] = t;
    if (d0 == d1) {
        r.indices = tsi_own(ts_retain(in.indices)), r.values = tsi_own(ts_retain(in.values));
    } else if (d0 < sd && d1 < sd) {
        int64_t perm[TS_MAX_DIMS];
        for (int i = 0; i < sd; i++) perm[i] = i;
        perm[d0] = d1, perm[d1] = d0;
        r.indices = ts_index_select(
            in.indices, 0,
            ts_tensor_i64(TS_SHAPE(sd), perm,
                          (ts_opts){.dtype = TS_I64, .device = ts_device_of(in.indices)}));
        r.values = tsi_own(ts_retain(in.values));
        r.coalesced = false;
    } else if (d0 >= sd && d1 >= sd) {
        r.indices = tsi_own(ts_retain(in.indices));
        r.values = ts_transpose(in.values, d0 - sd + 1, d1 - sd + 1);
    } else {
        tsi_error_set(TS_ERR_ARG,
                      "transpose: cannot transpose a sparse dimension with a dense dimension "
                      "(sparse_dim %d)",
                      sd);
    }
    return finish_coo(r, out);
}

ts_status ts_sparse_mul(ts_coo in, ts_tensor *other, ts_coo *out) {
    const char *op = "mul";
    tsi_init();
    if (!out) return tsi_error_set(TS_ERR_ARG, "%s: out is NULL", op);
    if (!check_coo(op, in) || !tsi_check_input(op, other, "other")) return ts_error();
    const int sd = sparse_dim(in);
    ts_scope_begin();
    ts_coo r = in;
    r.indices = tsi_own(ts_retain(in.indices));
    if (other->shape.ndim == 0) {
        r.values = ts_mul(in.values, ts_to(other, ts_device_of(in.values)));
        return finish_coo(r, out);
    }
    if (!tsi_shape_equal(other->shape, in.size) || sd != in.size.ndim) {
        char a[TSI_FMT_BUF_LEN];
        snprintf(a, sizeof a, "%s", tsi_shape_str(in.size));
        tsi_error_set(TS_ERR_UNSUPPORTED,
                      "mul(sparse, dense) other than of one shape without dense dims (sizes %s "
                      "and %s): sparse tensors (layout tessera.sparse_coo) are not supported "
                      "there; convert with .to_dense() first",
                      a, tsi_shape_str(other->shape));
        return finish_coo((ts_coo){0}, out);
    }
    if (!tsi_device_eq(tsi_device(other), tsi_device(in.values))) {
        char a[64];
        snprintf(a, sizeof a, "%s", ts_device_str(ts_device_of(in.values)));
        tsi_error_set(TS_ERR_DEVICE, "%s: sparse operand on %s, dense on %s", op, a,
                      ts_device_str(ts_device_of(other)));
        return finish_coo((ts_coo){0}, out);
    }
    ts_tensor *lin = linear(in.indices, in.size.dims, sd);
    ts_tensor *picked =
        lin ? ts_index_select(ts_reshape(other, TS_SHAPE(ts_numel(other))), 0, lin) : NULL;
    r.values = picked ? ts_mul(in.values, picked) : NULL;
    return finish_coo(r, out);
}

ts_status ts_sparse_sum(ts_coo in, const ts_dims *dims, ts_dtype dtype, ts_coo *out,
                        ts_tensor **dense) {
    const char *op = "sum";
    tsi_init();
    if (!out || !dense) return tsi_error_set(TS_ERR_ARG, "%s: out or dense is NULL", op);
    *dense = NULL;
    *out = (ts_coo){0};
    if (!check_coo(op, in)) return ts_error();
    const int nd = in.size.ndim, sd = sparse_dim(in);
    ts_scope_begin();
    ts_tensor *v = dtype == TS_DTYPE_DEFAULT ? in.values : ts_to_dtype(in.values, dtype);
    if (!dims || dims->n == 0) {
        ts_tensor *s = v ? ts_sum(v) : NULL;
        *dense = s && ts_error() == TS_OK ? ts_keep(s) : NULL;
        ts_scope_end();
        return *dense ? TS_OK : fail();
    }
    bool red[TS_MAX_DIMS] = {false};
    const int rank = nd > 1 ? nd : 1;
    for (int i = 0; i < dims->n; i++) {
        const int d = tsi_wrap_dim(op, dims->d[i], rank);
        if (d < 0) return finish_coo((ts_coo){0}, out);
        red[d] = true;
    }
    ts_dims dsum = {0};
    for (int d = sd; d < nd; d++)
        if (red[d]) dsum.d[dsum.n++] = d - sd + 1;
    if (v && dsum.n) v = ts_sum_dims(v, dsum, false);
    int64_t keep[TS_MAX_DIMS];
    int nk = 0;
    for (int d = 0; d < sd; d++)
        if (!red[d]) keep[nk++] = d;
    if (nk == 0) {
        ts_tensor *s = v ? ts_sum_dims(v, (ts_dims){.n = 1, .d = {0}}, false) : NULL;
        *dense = s && ts_error() == TS_OK ? ts_keep(s) : NULL;
        ts_scope_end();
        return *dense ? TS_OK : fail();
    }
    ts_coo r = {.values = v, .coalesced = false};
    for (int i = 0; i < nk; i++) r.size.dims[r.size.ndim++] = in.size.dims[keep[i]];
    for (int d = sd; d < nd; d++)
        if (!red[d]) r.size.dims[r.size.ndim++] = in.size.dims[d];
    r.indices = ts_index_select(
        in.indices, 0,
        ts_tensor_i64(TS_SHAPE(nk), keep,
                      (ts_opts){.dtype = TS_I64, .device = ts_device_of(in.indices)}));
    ts_coo c = {0};
    if (r.indices && r.values && ts_sparse_coalesce(r, &c) != TS_OK) c = (ts_coo){0};
    return finish_coo(c, out);
}

ts_tensor *ts_sparse_to_dense(ts_coo in) {
    const char *op = "to_dense";
    tsi_init();
    if (!check_coo(op, in)) return NULL;
    const int sd = sparse_dim(in);
    ts_scope_begin();
    ts_tensor *lin = linear(in.indices, in.size.dims, sd);
    ts_tensor *flat = lin ? accumulate(numel_dims(in.size.dims, sd), in.size.dims + sd,
                                       in.size.ndim - sd, lin, in.values)
                          : NULL;
    ts_tensor *y = flat ? ts_reshape(flat, in.size) : NULL;
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

ts_tensor *ts_sparse_mm(ts_coo sp, ts_tensor *dense) {
    const char *op = "mm";
    tsi_init();
    if (!check_coo(op, sp) || !tsi_check_input(op, dense, "mat2")) return NULL;
    if (sp.size.ndim != 2 || sparse_dim(sp) != 2) {
        tsi_error_set(TS_ERR_UNSUPPORTED,
                      "%s with a sparse operand of %d dims (%d sparse): only 2-D sparse matrices",
                      op, sp.size.ndim, sparse_dim(sp));
        return NULL;
    }
    if (dense->shape.ndim != 1 && dense->shape.ndim != 2) {
        tsi_error_set(TS_ERR_SHAPE, "%s: the dense operand must be 1-D or 2-D, got %d dims", op,
                      dense->shape.ndim);
        return NULL;
    }
    if (dense->shape.dims[0] != sp.size.dims[1]) {
        char a[TSI_FMT_BUF_LEN];
        snprintf(a, sizeof a, "%s", tsi_shape_str(sp.size));
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: sparse operand of size %s and dense operand of size %s cannot be "
                      "multiplied",
                      op, a, tsi_shape_str(dense->shape));
        return NULL;
    }
    if (dense->dtype != sp.values->dtype) {
        tsi_error_set(TS_ERR_DTYPE,
                      "%s: expected the sparse and dense operands to have the same dtype, but "
                      "got: %s != %s",
                      op, ts_dtype_name(sp.values->dtype), ts_dtype_name(dense->dtype));
        return NULL;
    }
    if (!tsi_device_eq(tsi_device(dense), tsi_device(sp.values))) {
        tsi_error_set(TS_ERR_DEVICE, "%s: sparse and dense operands on different devices", op);
        return NULL;
    }
    ts_scope_begin();
    ts_tensor *rows = ts_select(sp.indices, 0, 0), *cols = ts_select(sp.indices, 0, 1);
    ts_tensor *g = cols ? ts_index_select(dense, 0, cols) : NULL;
    g = g ? ts_mul(g, dense->shape.ndim == 1 ? sp.values : ts_unsqueeze(sp.values, 1)) : NULL;
    ts_tensor *y =
        g ? accumulate(sp.size.dims[0], dense->shape.dims + 1, dense->shape.ndim - 1, rows, g)
          : NULL;
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

ts_tensor *ts_sparse_addmm(ts_tensor *mat, ts_coo mat1, ts_tensor *mat2, double beta,
                           double alpha) {
    const char *op = "sparse.addmm";
    tsi_init();
    if (!tsi_check_input(op, mat, "input")) return NULL;
    ts_scope_begin();
    ts_tensor *p = ts_sparse_mm(mat1, mat2);
    ts_tensor *y = p ? ts_mul_scalar(p, alpha) : NULL;
    if (y && beta != 0) y = ts_add(ts_mul_scalar(mat, beta), y);
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
