/* linalg_rank_svd.c — the singular-value forms that wrap linalg.svd / svdvals: torch.svd (U, S, V
 * with V = Vh^T, `some`, `compute_uv`) and linalg.matrix_rank with tolerance tensors per matrix
 * (PyTorch's: max(atol, rtol * largest singular value), broadcast against the batch). Composed
 * of svd, svdvals, eigvalsh and elementwise ops, so the gradients are those of svd (issue 76). */
#include <float.h>

#include "ops/linalg_internal.h"

ts_tensor *ts_svd(ts_tensor *A, bool some, bool compute_uv, ts_tensor **S, ts_tensor **V) {
    const char *op = "svd";
    if (S) *S = NULL;
    if (V) *V = NULL;
    if (!S || !V) {
        tsi_error_set(TS_ERR_ARG, "%s: S and V must not be NULL", op);
        return NULL;
    }
    if (!tsl_check(op, A, "A", false)) return NULL;
    ts_scope_begin();
    ts_tensor *U = NULL, *s = NULL, *v = NULL;
    if (compute_uv) {
        ts_tensor *Vh = NULL;
        U = ts_linalg_svd(A, !some, &s, &Vh);
        v = U ? tsl_mT(Vh) : NULL;
    } else { /* U and V zero-filled, m x m and n x n, as PyTorch's */
        const ts_opts o = {.dtype = A->dtype, .device = ts_device_of(A)};
        const ts_shape b = tsl_batch(A->shape);
        const int64_t m = tsl_rows(A), n = tsl_cols(A);
        s = ts_linalg_svdvals(A);
        U = s ? ts_zeros(tsl_shape(b, m, m), o) : NULL;
        v = U ? ts_zeros(tsl_shape(b, n, n), o) : NULL;
    }
    if (U && s && v && ts_error() == TS_OK) { /* kept into the caller's scope */
        *S = ts_keep(s);
        *V = ts_keep(v);
    }
    return tsl_finish(*S && *V ? U : NULL);
}

ts_tensor *ts_linalg_matrix_rank_tol(ts_tensor *A, ts_tensor *atol, ts_tensor *rtol,
                                     bool hermitian) {
    const char *op = "linalg.matrix_rank";
    if (!tsl_check(op, A, "A", hermitian)) return NULL;
    if ((atol && !tsi_check_input(op, atol, "atol")) ||
        (rtol && !tsi_check_input(op, rtol, "rtol")))
        return NULL;
    if ((atol && !tsi_is_float(atol->dtype)) || (rtol && !tsi_is_float(rtol->dtype))) {
        tsi_error_set(
            TS_ERR_DTYPE, "%s: tolerance tensors must be floating point, got %s", op,
            ts_dtype_name(atol && !tsi_is_float(atol->dtype) ? atol->dtype : rtol->dtype));
        return NULL;
    }
    ts_scope_begin();
    const ts_opts o = {.dtype = A->dtype, .device = ts_device_of(A)};
    ts_tensor *S = hermitian ? ts_abs(ts_linalg_eigvalsh(A, "L")) : ts_linalg_svdvals(A);
    ts_tensor *smax = NULL;
    if (S)
        smax = S->shape.dims[S->shape.ndim - 1] ? ts_amax_dim(S, -1, false)
                                                : ts_zeros(tsl_batch(A->shape), o);
    if (!rtol) { /* PyTorch's default: 0 with atol given, else eps * max(m, n) */
        const double eps = A->dtype == TS_F32 ? (double)FLT_EPSILON : DBL_EPSILON;
        const int64_t mn = tsl_rows(A) > tsl_cols(A) ? tsl_rows(A) : tsl_cols(A);
        rtol = ts_scalar(atol ? 0.0 : eps * (double)mn, o);
    }
    ts_tensor *tol = smax && rtol ? ts_mul(smax, rtol) : NULL;
    if (tol && atol) tol = ts_maximum(ts_add(ts_mul_scalar(smax, 0.0), atol), tol);
    ts_tensor *r =
        tol ? ts_sum_dims(ts_gt(S, ts_unsqueeze(tol, -1)), (ts_dims){.n = 1, .d = {-1}}, false)
            : NULL;
    if (r && r->dtype != TS_I64) r = ts_to_dtype(r, TS_I64);
    return tsl_finish(r);
}
