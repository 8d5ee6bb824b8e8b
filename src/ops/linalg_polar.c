/* linalg_polar.c — linalg.polar and linalg.matrix_sqrth, composed of the decompositions in float64
 * (so that a float32 result is rounded once) and given in the operand's dtype; their gradients
 * come from those of svd and eigh (linalg_grad.c), as PyTorch's CPU path composes them:
 *   polar:        A = W S Vh (reduced SVD, m >= n), U = W Vh, H = Vh^T diag(S) Vh;
 *   matrix_sqrth: A = V diag(L) V^T (eigh, lower triangle), X = V diag(sqrt(L)) V^T. */
#include "ops/linalg_internal.h"

ts_tensor *ts_linalg_polar(ts_tensor *A, ts_tensor **H) {
    const char *op = "linalg.polar";
    if (H) *H = NULL;
    if (!tsl_check(op, A, "A", false)) return NULL;
    if (tsl_rows(A) < tsl_cols(A)) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: input must have at least as many rows as columns, but got %lld by %lld "
                      "matrices",
                      op, (long long)tsl_rows(A), (long long)tsl_cols(A));
        return NULL;
    }
    ts_scope_begin();
    ts_tensor *S = NULL, *Vh = NULL;
    ts_tensor *W = ts_linalg_svd(ts_to_dtype(A, TS_F64), false, &S, &Vh);
    ts_tensor *U = W ? ts_to_dtype(ts_matmul(W, Vh), A->dtype) : NULL;
    ts_tensor *Ht =
        W ? ts_to_dtype(ts_matmul(tsl_mT(Vh), ts_mul(ts_unsqueeze(S, -1), Vh)), A->dtype) : NULL;
    if (H && U && Ht) *H = ts_keep(Ht);
    return tsl_finish(Ht ? U : NULL);
}

ts_tensor *ts_linalg_matrix_sqrth(ts_tensor *A) {
    const char *op = "linalg.matrix_sqrth";
    if (!tsl_check(op, A, "A", true)) return NULL;
    ts_scope_begin();
    ts_tensor *V = NULL;
    ts_tensor *L = ts_linalg_eigh(ts_to_dtype(A, TS_F64), "L", &V);
    ts_tensor *X = L ? ts_matmul(ts_mul(V, ts_unsqueeze(ts_sqrt(L), -2)), tsl_mT(V)) : NULL;
    return tsl_finish(X ? ts_to_dtype(X, A->dtype) : NULL);
}
