/* linalg_tri.c — triangular systems and Cholesky (issue 52): linalg.solve_triangular (hand
 * substitution in float64, IEEE results for a zero diagonal as PyTorch's), linalg.cholesky(_ex)
 * (LAPACK potrf in the operand's dtype, linalg_native.c; cuSOLVER's on a device whose backend has
 * the linalg slot, linalg_device.h), torch.cholesky_solve and cholesky_inverse composed of those
 * two. */
#include <stdlib.h>
#include <string.h>

#include "ops/linalg_device.h"
#include "ops/linalg_internal.h"

/* ------------------------------------------------------------------ solve_triangular */
/* in place: b (n x k) = A^-1 b, A (n x n) upper or lower */
static void trisolve(int64_t n, int64_t k, const double *a, double *b, bool upper, bool unit) {
    for (int64_t c = 0; c < k; c++)
        for (int64_t t = 0; t < n; t++) {
            const int64_t i = upper ? n - 1 - t : t;
            double s = b[i * k + c];
            if (upper)
                for (int64_t j = i + 1; j < n; j++) s -= a[i * n + j] * b[j * k + c];
            else
                for (int64_t j = 0; j < i; j++) s -= a[i * n + j] * b[j * k + c];
            b[i * k + c] = unit ? s : s / a[i * n + i];
        }
}

/* A X = B, A and B of the same batch shape */
static ts_tensor *trisolve_core(const char *op, ts_tensor *A, ts_tensor *B, bool upper, bool unit) {
    tsl_mats a, b;
    ts_tensor *X = NULL;
    if (tsl_is_meta(A)) { /* no values: X is B's shape */
        X = tsl_meta(A, B->shape, A->dtype);
    } else if (!tsl_read(op, A, &a)) {
        return NULL;
    } else if (tsl_read(op, B, &b)) {
        const int64_t n = a.n, k = b.n;
        for (int64_t i = 0; i < a.batch; i++)
            trisolve(n, k, a.a + i * n * n, b.a + i * n * k, upper, unit);
        X = tsl_write(A, B->shape, b.a, A->dtype);
        tsl_free(&b);
        tsl_free(&a);
    } else {
        tsl_free(&a);
    }
    if (X) {
        ts_tensor *ins[2] = {A, B}, *saves[2] = {A, X};
        ts_node *nd = tsl_record("LinalgSolveTriangularBackward0", op, tsl_trisolve_backward, ins,
                                 2, &X, 1, saves, 2);
        if (tsl_twice(nd)) nd->ip[0] = upper, nd->ip[1] = unit;
    }
    return X;
}

ts_tensor *ts_linalg_solve_triangular(ts_tensor *A, ts_tensor *B, bool upper, bool left,
                                      bool unitriangular) {
    const char *op = "linalg.solve_triangular";
    if (!tsl_check(op, A, "A", true) || !tsl_check(op, B, "B", false)) return NULL;
    if (B->dtype != A->dtype) {
        tsi_error_set(TS_ERR_DTYPE,
                      "%s: Expected A and B to have the same dtype, but found A of type %s and B "
                      "of type %s instead",
                      op, tsi_torch_scalar_name(A->dtype), tsi_torch_scalar_name(B->dtype));
        return NULL;
    }
    ts_device dev;
    ts_tensor *pair[2] = {A, B};
    if (!tsi_same_device(op, pair, 2, false, &dev)) return NULL;
    const int64_t n = tsl_rows(A), bn = left ? tsl_rows(B) : tsl_cols(B);
    if (bn != n) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: Incompatible shapes of A and B for the equation %s (%lldx%lld and "
                      "%lldx%lld)",
                      op, left ? "AX = B" : "XA = B", (long long)n, (long long)n,
                      (long long)tsl_rows(B), (long long)tsl_cols(B));
        return NULL;
    }
    ts_scope_begin();
    /* X A = B  <=>  A^T X^T = B^T with the other triangle */
    ts_tensor *a = left ? A : tsl_mT(A), *b = left ? B : tsl_mT(B), *X = NULL;
    if (a && b && tsl_broadcast_batch(op, &a, &b))
        X = trisolve_core(op, a, b, left ? upper : !upper, unitriangular);
    if (X && !left) X = tsl_mT(X);
    return tsl_finish(X);
}

/* ------------------------------------------------------------------ cholesky */
/* PyTorch's error for the first matrix that is not positive-definite (none with _ex) */
static bool chol_errors(const char *op, ts_tensor *A, const int32_t *inf, int64_t batch, bool ex) {
    for (int64_t i = 0; !ex && i < batch; i++)
        if (inf[i] > 0) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: %sThe factorization could not be completed because the input is "
                          "not positive-definite (the leading minor of order %d is not "
                          "positive-definite).",
                          op, tsl_batch_prefix(A, i), inf[i]);
            return false;
        }
    return true;
}

ts_tensor *ts_linalg_cholesky_ex(ts_tensor *A, bool upper, ts_tensor **info) {
    const char *op = "linalg.cholesky";
    if (info) *info = NULL;
    if (!tsl_check(op, A, "A", true)) return NULL;
    ts_scope_begin();
    tsl_nat a;
    ts_tensor *L = NULL, *I = NULL;
    if (tsl_dev_ok(A, NULL)) { /* on the device (cuSOLVER's potrf) */
        const int64_t b = tsi_numel(tsl_batch(A->shape));
        int32_t *inf = calloc((size_t)(b > 0 ? b : 1), sizeof *inf);
        if (!inf) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        L = inf ? tsl_dev_cholesky(op, A, inf) : NULL;
        if (L && chol_errors(op, A, inf, b, info != NULL))
            I = tsl_write_i32(A, tsl_batch(A->shape), inf);
        else
            L = NULL;
        free(inf);
    } else if (tsl_nat_read(op, A, &a)) {
        int32_t *inf = malloc((size_t)(a.batch > 0 ? a.batch : 1) * sizeof *inf);
        bool ok = inf && tsl_nat_cholesky(op, &a, inf);
        if (!inf) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        if (ok) ok = chol_errors(op, A, inf, a.batch, info != NULL);
        if (ok) {
            L = tsl_nat_write(A, A->shape, a.a, a.f32);
            I = tsl_write_i32(A, tsl_batch(A->shape), inf);
        }
        free(inf);
        tsl_nat_free(&a);
    }
    if (L)
        tsl_twice(tsl_record("LinalgCholeskyExBackward0", op, tsl_cholesky_backward, &A, 1, &L, 1,
                             &L, 1));
    if (L && upper) L = tsl_mT(L);
    if (info && I) *info = ts_keep(I);
    return tsl_finish(L);
}

ts_tensor *ts_linalg_cholesky(ts_tensor *A, bool upper) {
    return ts_linalg_cholesky_ex(A, upper, NULL);
}

/* (L L^T) X = B through two triangular solves (upper: U^T U), computed without a graph; one
 * node with PyTorch's gradient (cholesky_solve_backward): gB = cholesky_solve(gX, L) and a DENSE
 * gL = -(C L) (upper: -(L C)), C = gB X^T + X gB^T, although the forward reads only L's triangle
 * (docs/decisions/0039-cholesky-dense-gradient.md). cholesky_inverse is this with B = I. */
ts_tensor *ts_cholesky_solve(ts_tensor *B, ts_tensor *L, bool upper) {
    const char *op = "cholesky_solve";
    if (!tsl_check(op, B, "B", false) || !tsl_check(op, L, "L", true)) return NULL;
    ts_scope_begin();
    ts_tensor *b = B, *l = L, *X = NULL;
    if (!tsl_broadcast_batch(op, &b, &l)) return tsl_finish(NULL);
    ts_no_grad_begin();
    ts_tensor *Y = ts_linalg_solve_triangular(upper ? tsl_mT(l) : l, b, false, true, false);
    X = Y ? ts_linalg_solve_triangular(upper ? l : tsl_mT(l), Y, true, true, false) : NULL;
    ts_no_grad_end();
    if (X) {
        ts_tensor *ins[2] = {b, l}, *saves[2] = {l, X};
        ts_node *nd = tsl_record("CholeskySolveBackward0", op, tsl_cholesky_solve_backward, ins, 2,
                                 &X, 1, saves, 2);
        if (tsl_twice(nd)) nd->ip[0] = upper;
    }
    return tsl_finish(X);
}

ts_tensor *ts_cholesky_inverse(ts_tensor *L, bool upper) {
    const char *op = "cholesky_inverse";
    if (!tsl_check(op, L, "L", true)) return NULL;
    ts_scope_begin();
    ts_tensor *I = ts_eye(tsl_rows(L), 0, (ts_opts){.dtype = L->dtype, .device = ts_device_of(L)});
    if (I && L->shape.ndim > 2) I = ts_expand(I, L->shape);
    return tsl_finish(I ? ts_cholesky_solve(I, L, upper) : NULL);
}
