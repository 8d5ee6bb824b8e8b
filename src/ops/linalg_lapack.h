/* linalg_lapack.h — the host side of torch.linalg (linalg.c): batches of matrices read to the
 * host as row-major float64, LAPACKE's factorizations on each matrix of a batch, and results
 * written back as tensors on the operand's device in its dtype. Every function here runs inside
 * the caller's scope and returns false (NULL) with the error set naming `op`. */
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

#endif /* TS_OPS_LINALG_LAPACK_H */
