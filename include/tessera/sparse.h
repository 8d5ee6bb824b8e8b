/* tessera/sparse.h — sparse COO tensors in C (issue 76; decision 0048; via tessera.h): a sparse
 * tensor is an int64 `indices` tensor [sparse_dim, nnz] and a `values` tensor [nnz, *dense_sizes]
 * on one device, with its full size (sparse sizes, then the dense sizes) and whether its indices
 * are known sorted and unique (coalesced). The struct holds references owned like any result
 * (the innermost scope, or the caller); the ops compose dense differentiable ops (index_add,
 * index_select, unique, nonzero), so they run on every device and differentiate through the
 * values. python/tessera/sparse.py's SparseTensor holds the same four fields. */
#ifndef TESSERA_SPARSE_H
#define TESSERA_SPARSE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ts_coo {
    ts_tensor *indices; /* int64 [sparse_dim, nnz] */
    ts_tensor *values;  /* [nnz, *dense_sizes] */
    ts_shape size;      /* sparse sizes then dense sizes */
    bool coalesced;
} ts_coo;

/* torch.sparse_coo_tensor: checks indices (integral, 2-D, on values' device) against values (nnz,
 * dense sizes) and size (NULL: the largest index + 1 per sparse dim); indices become int64 and
 * are always checked against the size. is_coalesced: -1 unknown (coalesced when nnz <= 1), 0 or
 * 1 as given; with check_invariants a claimed coalesced tensor is verified. TS_OK or the error. */
TS_API ts_status ts_sparse_coo_tensor(ts_tensor *indices, ts_tensor *values, const ts_shape *size,
                                      int is_coalesced, bool check_invariants, ts_coo *out);
/* duplicates summed (bool: or), indices sorted row-major and unique */
TS_API ts_status ts_sparse_coalesce(ts_coo in, ts_coo *out);
/* Tensor.to_sparse(sparse_dim) (sparse_dim < 0: x.ndim): the nonzero entries (NaN counts), or with
 * sparse_dim < ndim the sub-tensors of the last dims that hold a nonzero; coalesced */
TS_API ts_status ts_dense_to_sparse(ts_tensor *x, int sparse_dim, ts_coo *out);
/* transpose of two sparse dims (indices rows swapped, not coalesced) or two dense dims */
TS_API ts_status ts_sparse_transpose(ts_coo in, int dim0, int dim1, ts_coo *out);
/* sparse * other: other 0-dim (a scalar on any device) or dense of in's size without dense dims
 * (the values times other at the indices) */
TS_API ts_status ts_sparse_mul(ts_coo in, ts_tensor *other, ts_coo *out);
/* torch.sparse.sum: dims NULL (or none): the sum of the values, a dense 0-dim tensor in *dense;
 * else over dims: sparse and coalesced in *out, or dense in *dense once every sparse dim is
 * summed (the other pointer set NULL). dtype TS_DTYPE_DEFAULT: the values'. */
TS_API ts_status ts_sparse_sum(ts_coo in, const ts_dims *dims, ts_dtype dtype, ts_coo *out,
                               ts_tensor **dense);
/* the dense tensor of in's size (duplicates summed; bool: or), differentiable in the values */
TS_API ts_tensor *ts_sparse_to_dense(ts_coo in);
/* sparse [n, m] (2 sparse dims) @ dense [m, k] or [m]: dense, differentiable in both */
TS_API ts_tensor *ts_sparse_mm(ts_coo sp, ts_tensor *dense);
/* torch.sparse.addmm: beta * mat + alpha * (mat1 @ mat2) (beta 0: mat ignored) */
TS_API ts_tensor *ts_sparse_addmm(ts_tensor *mat, ts_coo mat1, ts_tensor *mat2, double beta,
                                  double alpha);

#endif /* TESSERA_SPARSE_H */
