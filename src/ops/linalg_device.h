/* linalg_device.h — torch.linalg's factorizations on the operand's own device, through its
 * backend's linalg slot (backend.h; CUDA: cuSOLVER, src/backend/cuda/cuda_linalg.cu), in its dtype
 * (linalg_device.c). The ops (linalg.c, linalg_tri.c, linalg_decomp.c) take this path when
 * tsl_dev_ok says so, and the host's (linalg_lapack.h) otherwise: cpu and sim, backends without the
 * slot, a graph capture in progress, and empty operands (nothing to factorise: the host path's
 * shapes and identities). Every function runs inside the caller's scope, returns its tensors in
 * it, and returns false (NULL) with the error set naming `op`. info (when non-NULL): the caller's
 * host array of one int32 per matrix, LAPACK's meaning as on the host path. */
#ifndef TS_OPS_LINALG_DEVICE_H
#define TS_OPS_LINALG_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera.h"

/* A (and B when non-NULL: same device) non-empty float32 / float64 on a device whose backend has
 * the linalg slot, and no graph being captured */
bool tsl_dev_ok(ts_tensor *A, ts_tensor *B);

/* packed LU factors (A's shape), pivots (batch x k, int32, 1-based) */
bool tsl_dev_lu(const char *op, ts_tensor *A, ts_tensor **LU, ts_tensor **piv, int32_t *info);
/* A^-1 where info == 0, A's LU factors elsewhere */
ts_tensor *tsl_dev_inv(const char *op, ts_tensor *A, int32_t *info);
/* A^-1 B (A [..., n, n], B [..., n, k] of one batch shape) where info == 0, B elsewhere */
ts_tensor *tsl_dev_solve(const char *op, ts_tensor *A, ts_tensor *B, int32_t *info);
/* det (sign NULL) or sign and log|det| of every matrix, shape: the batch */
bool tsl_dev_det(const char *op, ts_tensor *A, ts_tensor **det, ts_tensor **sign,
                 ts_tensor **logabs);
/* L of A's lower triangle, zeros above */
ts_tensor *tsl_dev_cholesky(const char *op, ts_tensor *A, int32_t *info);
/* eigenvalues ascending (batch x n) and, V non-NULL, eigenvectors as columns */
bool tsl_dev_eigh(const char *op, ts_tensor *A, bool upper, ts_tensor **L, ts_tensor **V,
                  int32_t *info);
/* singular values (batch x k) and, U non-NULL, U (batch x m x ku) and Vh (batch x kv x n) */
bool tsl_dev_svd(const char *op, ts_tensor *A, bool full, ts_tensor **U, ts_tensor **S,
                 ts_tensor **Vh, int32_t *info);
/* Q (batch x m x kq; Q NULL: none) and R (batch x kq x n), kq = m when complete, else k */
bool tsl_dev_qr(const char *op, ts_tensor *A, bool complete, ts_tensor **Q, ts_tensor **R);

#endif /* TS_OPS_LINALG_DEVICE_H */
