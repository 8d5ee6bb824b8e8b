/* linalg_ldl.c — linalg.ldl_factor(_ex) and linalg.ldl_solve: LAPACK's Bunch-Kaufman LDL^T of
 * symmetric matrices (sytrf, uplo L, on the lower triangle as PyTorch's; zeros above the diagonal
 * of the compact result) and its solve (sytrs), on the host in float64 through LAPACKE's row-major
 * interface (geqrf's arithmetic), the results in the operand's dtype on its device. No gradients
 * (PyTorch has none). */
#include <stdlib.h>

#include "core/internal.h"
#include "ops/linalg_internal.h"

#ifdef TS_HAVE_LAPACKE
#include <lapacke.h>
#endif

/* sytrf of one row-major n x n matrix a (lower triangle; the upper zeroed after): ipiv[n] */
static int sytrf(int64_t n, double *a, int32_t *ipiv) {
#ifdef TS_HAVE_LAPACKE
    if (n == 0) return 0;
    lapack_int *p = malloc((size_t)n * sizeof *p);
    if (!p) return -1000;
    const int info = LAPACKE_dsytrf(LAPACK_ROW_MAJOR, 'L', (lapack_int)n, a, (lapack_int)n, p);
    for (int64_t i = 0; i < n; i++) ipiv[i] = (int32_t)p[i];
    free(p);
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = r + 1; c < n; c++) a[r * n + c] = 0.0;
    return info;
#else
    (void)n, (void)a, (void)ipiv;
    return -1;
#endif
}

/* sytrs: b (n x k) = A^-1 b from sytrf's ld and ipiv (checked: 1 <= |ipiv[i]| <= n) */
static int sytrs(int64_t n, int64_t k, const double *ld, const int64_t *ipiv, double *b) {
#ifdef TS_HAVE_LAPACKE
    if (n == 0 || k == 0) return 0;
    lapack_int *p = malloc((size_t)n * sizeof *p);
    if (!p) return -1000;
    for (int64_t i = 0; i < n; i++) p[i] = (lapack_int)ipiv[i];
    const int info = LAPACKE_dsytrs(LAPACK_ROW_MAJOR, 'L', (lapack_int)n, (lapack_int)k, ld,
                                    (lapack_int)n, p, b, (lapack_int)k);
    free(p);
    return info;
#else
    (void)n, (void)k, (void)ld, (void)ipiv, (void)b;
    return -1;
#endif
}

ts_tensor *ts_linalg_ldl_factor_ex(ts_tensor *A, bool hermitian, ts_tensor **pivots,
                                   ts_tensor **info) {
    const char *op = info ? "linalg.ldl_factor_ex" : "linalg.ldl_factor";
    (void)hermitian; /* real matrices: symmetric and Hermitian are one */
    if (pivots) *pivots = NULL;
    if (info) *info = NULL;
    if (!tsl_check(op, A, "A", true)) return NULL;
    ts_scope_begin();
    tsl_mats a;
    ts_tensor *LD = NULL, *P = NULL, *Inf = NULL;
    if (tsl_is_meta(A)) { /* no values: the shapes */
        const ts_shape bs = tsl_batch(A->shape);
        LD = tsl_meta(A, A->shape, A->dtype);
        P = tsl_meta(A, tsl_batch_vec(bs, tsl_rows(A)), TS_I32);
        Inf = tsl_meta(A, bs, TS_I32);
    } else if (tsl_read(op, A, &a)) {
        const int64_t n = a.n, b = a.batch;
        int32_t *piv = calloc((size_t)(b * n > 0 ? b * n : 1), sizeof *piv);
        int32_t *inf = calloc((size_t)(b > 0 ? b : 1), sizeof *inf);
        bool ok = piv && inf;
        if (!ok) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        for (int64_t i = 0; ok && i < b; i++) {
            const int r = sytrf(n, a.a + i * n * n, piv + i * n);
            if (r < 0)
                ok = !tsi_error_set(TS_ERR_OOM, "%s: LAPACK sytrf failed (%d: out of memory)", op,
                                    r);
            inf[i] = r > 0 ? r : 0;
            if (ok && r > 0 && !info)
                ok = !tsi_error_set(TS_ERR_ARG,
                                    "%s: %sThe factorization could not be completed because the "
                                    "block diagonal matrix D is exactly singular (its element %d "
                                    "is zero).",
                                    op, tsl_batch_prefix(A, i), r);
        }
        if (ok) {
            const ts_shape bs = tsl_batch(A->shape);
            LD = tsl_write(A, A->shape, a.a, A->dtype);
            P = tsl_write_i32(A, tsl_batch_vec(bs, n), piv);
            Inf = tsl_write_i32(A, bs, inf);
        }
        free(piv), free(inf);
        tsl_free(&a);
    }
    if (!LD || !P || !Inf) LD = NULL;
    if (LD && pivots) *pivots = ts_keep(P);
    if (LD && info) *info = ts_keep(Inf);
    return tsl_finish(LD);
}

static bool solve_check(const char *op, ts_tensor *LD, ts_tensor *piv, ts_tensor *B) {
    if (!tsl_check(op, LD, "LD", true) || !tsi_check_input(op, piv, "pivots") ||
        !tsi_check_input(op, B, "B"))
        return false;
    const int64_t n = tsl_rows(LD);
    bool same = piv->shape.ndim == LD->shape.ndim - 1;
    for (int i = 0; same && i < piv->shape.ndim; i++)
        same = piv->shape.dims[i] == LD->shape.dims[i];
    if (!same) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: Expected LD.shape[:-1] and pivots.shape to be the same, but got pivots "
                      "with shape %s instead",
                      op, tsi_shape_str(piv->shape));
        return false;
    }
    if (piv->dtype != TS_I32 && piv->dtype != TS_I64) {
        tsi_error_set(TS_ERR_DTYPE, "%s: Expected pivots to be integers. Got %s", op,
                      tsi_torch_scalar_name(piv->dtype));
        return false;
    }
    if (B->shape.ndim < 2) {
        tsi_error_set(TS_ERR_SHAPE, "%s: The input tensor B must have at least 2 dimensions.", op);
        return false;
    }
    if (B->dtype != LD->dtype) {
        tsi_error_set(TS_ERR_DTYPE,
                      "%s: Expected b and A to have the same dtype, but found b of type %s and A "
                      "of type %s instead.",
                      op, tsi_torch_scalar_name(B->dtype), tsi_torch_scalar_name(LD->dtype));
        return false;
    }
    if (tsl_rows(B) != n) {
        tsi_error_set(TS_ERR_SHAPE,
                      "Incompatible matrix sizes for torch.%s: each A matrix is %lld by %lld but "
                      "each b matrix is %lld by %lld",
                      op, (long long)n, (long long)n, (long long)tsl_rows(B),
                      (long long)tsl_cols(B));
        return false;
    }
    ts_device dev;
    ts_tensor *all[3] = {LD, piv, B};
    return tsi_same_device(op, all, 3, false, &dev);
}

ts_tensor *ts_linalg_ldl_solve(ts_tensor *LD, ts_tensor *pivots, ts_tensor *B, bool hermitian) {
    const char *op = "linalg.ldl_solve";
    (void)hermitian;
    if (!solve_check(op, LD, pivots, B)) return NULL;
    ts_scope_begin();
    ts_tensor *L = LD, *X = NULL;
    const int64_t n = tsl_rows(LD);
    ts_tensor *P = ts_unsqueeze(pivots, -1); /* [..., n, 1]: broadcast with LD's batch */
    tsl_mats a, b;
    int64_t *piv = NULL;
    const bool shaped = P && tsl_broadcast_batch(op, &L, &B) && tsl_broadcast_batch(op, &P, &B);
    if (shaped && tsl_is_meta(LD)) {
        X = tsl_meta(LD, B->shape, LD->dtype); /* no values: X is B's (broadcast) shape */
    } else if (shaped && (P = ts_contiguous(ts_to_dtype(P, TS_I64))) && tsl_read(op, L, &a)) {
        const int64_t k = tsl_cols(B), nb = a.batch;
        piv = malloc((size_t)(nb * n > 0 ? nb * n : 1) * sizeof *piv);
        bool ok = piv && (nb * n == 0 || ts_copy_to_host(ts_to(P, ts_cpu()), piv,
                                                         (size_t)(nb * n) * sizeof *piv) == TS_OK);
        if (!piv) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        for (int64_t i = 0; ok && i < nb * n; i++)
            if (piv[i] == 0 || piv[i] > n || piv[i] < -n) {
                tsi_error_set(TS_ERR_ARG, "%s: pivots[%lld] = %lld is not a valid sytrf pivot", op,
                              (long long)i, (long long)piv[i]);
                ok = false;
            }
        if (ok && tsl_read(op, B, &b)) {
            for (int64_t i = 0; ok && i < nb; i++)
                if (sytrs(n, k, a.a + i * n * n, piv + i * n, b.a + i * n * k) != 0)
                    ok = !tsi_error_set(TS_ERR_OOM, "%s: LAPACK sytrs failed (out of memory)", op);
            if (ok) X = tsl_write(LD, B->shape, b.a, LD->dtype);
            tsl_free(&b);
        }
        tsl_free(&a);
    }
    free(piv);
    return tsl_finish(X);
}
