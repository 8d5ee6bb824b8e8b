/* linalg_internal.h — what the torch.linalg files share (linalg*.c): argument checks with
 * PyTorch's messages, shape helpers, multi-output autograd records and the backward functions of
 * linalg_grad.c. */
#ifndef TS_OPS_LINALG_INTERNAL_H
#define TS_OPS_LINALG_INTERNAL_H

#include "autograd/autograd.h"
#include "ops/linalg_lapack.h"
#include "tessera/linalg.h"

/* A non-NULL, ndim >= 2 (PyTorch's "The input tensor A must have at least 2 dimensions."),
 * float32/float64 ("Expected a floating point ... Got Long", "Low precision dtypes not
 * supported"), square when asked; LAPACKE present. TS_ERR_* set, false. */
bool tsl_check(const char *op, ts_tensor *A, const char *name, bool square);
/* the batch dims of s (all but the last two), then m x n */
ts_shape tsl_shape(ts_shape batch, int64_t m, int64_t n);
ts_shape tsl_batch(ts_shape s);
ts_shape tsl_batch_vec(ts_shape batch, int64_t n); /* batch then n */
static inline int64_t tsl_rows(ts_tensor *t) { return t->shape.dims[t->shape.ndim - 2]; }
static inline int64_t tsl_cols(ts_tensor *t) { return t->shape.dims[t->shape.ndim - 1]; }
static inline ts_tensor *tsl_mT(ts_tensor *t) { return ts_transpose(t, -2, -1); }
/* "(Batch element b): " when the batch has more than one dim of matrices, else "" */
const char *tsl_batch_prefix(ts_tensor *A, int64_t b);
/* A and B expanded to their broadcast batch shape (last two dims kept) */
bool tsl_broadcast_batch(const char *op, ts_tensor **A, ts_tensor **B);

/* Records one node for outputs outs[0..n_out) (NULL entries: outputs without gradient) of an op
 * with inputs ins; saves[i] is saved in slot i, as an output when it is one of outs. No-op
 * without a graph. Returns the node (borrowed) or NULL. */
ts_node *tsl_record(const char *name, const char *op, tsi_backward_fn fn, ts_tensor *const *ins,
                    int n_in, ts_tensor *const *outs, int n_out, ts_tensor *const *saves,
                    int n_saves);
/* n marked differentiable again (TSI_NODE_TWICE): for a backward of public ops over saved inputs
 * and outputs only (linalg_grad.c), never over a value computed without a graph (lu_factor's L
 * and U, eig's pairs). Returns n. */
static inline ts_node *tsl_twice(ts_node *n) {
    if (n) n->flags |= TSI_NODE_TWICE;
    return n;
}

/* the result of a scope: y kept into the enclosing one (NULL with an error pending) */
static inline ts_tensor *tsl_finish(ts_tensor *y) {
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}

/* matrix_norm's orders nuc, 2 and -2 over dims (a, b) (wrapped, distinct) from the singular
 * values (linalg_func.c; reduce_norm.c's ts_matrix_norm) */
ts_tensor *tsl_matrix_norm_sv(const char *op, ts_tensor *t, const char *ord, int a, int b,
                              bool keepdim, ts_dtype dtype);

/* backward functions (linalg_grad.c), named after PyTorch's nodes */
void tsl_inv_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);      /* saved: inv */
void tsl_solve_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);    /* A, X */
void tsl_det_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);      /* A, det */
void tsl_slogdet_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);  /* A */
void tsl_cholesky_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi); /* L */
/* A, X; ip[0] upper, ip[1] unitriangular (left only) */
void tsl_trisolve_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
/* L, X; ip[0] upper: PyTorch's dense gradient of L (linalg_tri.c's ts_cholesky_solve) */
void tsl_cholesky_solve_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
void tsl_qr_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);   /* Q, R */
void tsl_svd_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);  /* U, S, Vh; ip[0] full */
void tsl_eigh_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi); /* L, V */
void tsl_pinv_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi); /* A, pinv */
void tsl_lu_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);   /* P, L, U */
/* lu_factor's packed LU: P, L, U saved, the gradient of output 0 split into L's and U's */
void tsl_lu_factor_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
/* eig: L and V as (real, imaginary) pairs [..., n, 2] / [..., n, n, 2] (linalg_eig_grad.c) */
void tsl_eig_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);

#endif /* TS_OPS_LINALG_INTERNAL_H */
