/* linalg_lapack.h — the host side of torch.linalg (linalg*.c): batches of matrices read to the
 * host as row-major float64 with LAPACKE's row-major factorizations on each matrix
 * (linalg_lapack.c: qr, eigh, lstsq, lu_factor), or in the operand's own dtype with column-major
 * LAPACK calls (linalg_native.c: inv, solve, det, cholesky, svd; decision 0024), and results
 * written back as tensors on the operand's device in its dtype. Every function here runs inside the
 * caller's scope and returns false (NULL) with the error set naming `op`. Operands on a device
 * whose backend has the linalg slot (CUDA: cuSOLVER) take linalg_device.h's path instead, for the
 * ops it covers. */
#ifndef TS_OPS_LINALG_LAPACK_H
#define TS_OPS_LINALG_LAPACK_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera.h"

/* batch matrices of m x n, row-major, one after another (a: malloc'ed) */
typedef struct tsl_mats {
    int64_t batch, m, n;
    double *a;
} tsl_mats;

/* A ([..., m, n], ndim >= 2) to the host; false with the error set (OOM) */
bool tsl_read(const char *op, ts_tensor *A, tsl_mats *M);
/* an uninitialised batch of m x n (a: malloc'ed); false on OOM */
bool tsl_alloc(const char *op, int64_t batch, int64_t m, int64_t n, tsl_mats *M);
void tsl_free(tsl_mats *M);
/* a tensor of shape s holding v (numel(s) doubles) on like's device in dtype dt */
ts_tensor *tsl_write(ts_tensor *like, ts_shape s, const double *v, ts_dtype dt);
/* the same from int32 / int64 values */
ts_tensor *tsl_write_i32(ts_tensor *like, ts_shape s, const int32_t *v);
ts_tensor *tsl_write_i64(ts_tensor *like, ts_shape s, const int64_t *v);

/* like is a meta tensor (no values to read): an op's host path gives its results as
 * tsl_meta's, tensors of their shapes and dtypes on meta */
bool tsl_is_meta(ts_tensor *like);
ts_tensor *tsl_meta(ts_tensor *like, ts_shape s, ts_dtype dt);

/* false + TS_ERR_UNSUPPORTED when built without LAPACKE */
bool tsl_available(const char *op);

/* In place on one row-major matrix a (m x n); each returns LAPACK's info (> 0: the numerical
 * failure it reports; < 0: an argument or memory error, which the caller turns into an error). */
int tsl_getrf(int64_t m, int64_t n, double *a, int32_t *ipiv);
int tsl_getri(int64_t n, double *a, const int32_t *ipiv); /* after getrf */
/* solves op(LU) X = b for b n x k in place (trans: A^T) */
int tsl_getrs(bool trans, int64_t n, int64_t k, const double *lu, const int32_t *ipiv, double *b);
int tsl_potrf_lower(int64_t n, double *a); /* L in the lower triangle; the upper left as is */
/* QR: tau[min(m,n)]; then Q's first kq columns into q (m x kq) from a's reflectors */
int tsl_geqrf(int64_t m, int64_t n, double *a, double *tau);
int tsl_orgqr(int64_t m, int64_t kq, int64_t k, const double *a, int64_t n, const double *tau,
              double *q);
/* SVD of a (destroyed): s[min], u (m x m or m x k, NULL: none), vt (n x n or k x n) */
int tsl_gesdd(int64_t m, int64_t n, double *a, double *s, double *u, double *vt, bool full);
/* symmetric eigen-decomposition: w ascending, a replaced by the eigenvectors (vectors) */
int tsl_syevd(bool vectors, bool upper, int64_t n, double *a, double *w);
/* least squares: b (max(m,n) x k) replaced by the solution in its first n rows; rank, s */
int tsl_gels(const char *driver, int64_t m, int64_t n, int64_t k, double *a, double *b,
             double rcond, int64_t *rank, double *s);

/* ---- the operand's own dtype (linalg_native.c, decision 0024): float32 matrices through LAPACK's
 * s routines, float64 through its d routines, column-major calls without LAPACKE's row-major
 * copies. Batches of row-major matrices in float or double (f32), one after another. */
typedef struct tsl_nat {
    int64_t batch, m, n;
    bool f32;
    void *a; /* malloc'ed */
} tsl_nat;

/* A ([..., m, n], float32 or float64) to the host in its dtype; false with the error set */
bool tsl_nat_read(const char *op, ts_tensor *A, tsl_nat *M);
bool tsl_nat_alloc(const char *op, bool f32, int64_t batch, int64_t m, int64_t n, tsl_nat *M);
void tsl_nat_free(tsl_nat *M);
/* a tensor of shape s from v (numel(s) floats or doubles, f32) on like's device */
ts_tensor *tsl_nat_write(ts_tensor *like, ts_shape s, const void *v, bool f32);

/* Every matrix of a batch of n x n in place; info[i]: LAPACK's for matrix i (> 0: singular / not
 * positive-definite at that order, as PyTorch's on the same matrix). Each returns false with the
 * error set naming op on a memory or argument failure. */
/* inverse where info[i] == 0 (getrf + getri on the matrix itself; elsewhere its LU factors) */
bool tsl_nat_inv(const char *op, tsl_nat *A, int32_t *info);
/* B (batch x n x k) = A^-1 B where info[i] == 0; A replaced by its LU factors */
bool tsl_nat_solve(const char *op, tsl_nat *A, tsl_nat *B, int32_t *info);
/* Cholesky: L (from A's lower triangle) in the lower triangle, zeros above */
bool tsl_nat_cholesky(const char *op, tsl_nat *A, int32_t *info);
/* sign, log|det| (sign 0 and -inf when singular) and det of every matrix, in double (sign and
 * logabs NULL: det only) */
bool tsl_nat_slogdet(const char *op, const tsl_nat *A, double *sign, double *logabs, double *det);
/* SVD of every m x n matrix of A (destroyed): s (batch x k), u (batch x m x ku), vt (batch x kv x
 * n) in A's dtype (ku = kv = k, or m and n when full); u NULL: singular values only. info[i] > 0:
 * gesdd did not converge on matrix i. */
bool tsl_nat_svd(const char *op, tsl_nat *A, void *s, void *u, void *vt, bool full, int32_t *info);

#endif /* TS_OPS_LINALG_LAPACK_H */
