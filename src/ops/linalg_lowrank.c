/* linalg_lowrank.c — torch.svd_lowrank and torch.pca_lowrank: the randomized SVD of Halko,
 * Martinsson and Tropp (2009, Algorithms 4.4 and 5.1), step for step as PyTorch's
 * torch/_lowrank.py, composed of matmul, qr and svd so that gradients, devices and batches come
 * from those ops. The random test matrix is drawn with ts_randn from the global generator: the
 * result depends on the seed as PyTorch's does on torch's; for A - M of rank <= q it is that
 * matrix's truncated SVD (up to the signs of the singular vectors) whatever the draw. */
#include "ops/linalg_internal.h"

static ts_tensor *mH(ts_tensor *t) { return t ? ts_transpose(t, -2, -1) : NULL; }

/* the orthonormal factor of X's reduced QR */
static ts_tensor *orth(ts_tensor *X) {
    ts_tensor *R = NULL;
    return X ? ts_linalg_qr(X, "reduced", &R) : NULL;
}

/* (A - M) B, never forming A - M (M NULL: A B) */
static ts_tensor *minus_prod(ts_tensor *A, ts_tensor *M, ts_tensor *B) {
    ts_tensor *X = B ? ts_matmul(A, B) : NULL;
    return M && X ? ts_sub(X, ts_matmul(M, B)) : X;
}

/* get_approximate_basis: Q [..., m, min(m, q)...] with Q Q^T (A - M) ~= A - M */
static ts_tensor *approximate_basis(ts_tensor *A, int64_t q, int64_t niter, ts_tensor *M) {
    ts_tensor *R =
        ts_randn(TS_SHAPE(tsl_cols(A), q), (ts_opts){.dtype = A->dtype, .device = ts_device_of(A)});
    ts_tensor *Q = orth(minus_prod(A, M, R));
    ts_tensor *At = mH(A), *Mt = M ? mH(M) : NULL;
    for (int64_t i = 0; i < niter && Q; i++) {
        Q = orth(minus_prod(At, Mt, Q));
        Q = orth(minus_prod(A, M, Q));
    }
    return Q;
}

/* A (and M) checked; the factors of A - M in *U, *S, *V, inside the caller's scope */
static void svd_lowrank_core(ts_tensor *A, int64_t q, int64_t niter, ts_tensor *M, ts_tensor **U,
                             ts_tensor **S, ts_tensor **V) {
    const int64_t m = tsl_rows(A), n = tsl_cols(A);
    if (M) M = ts_expand(M, A->shape);
    const bool wide = m < n; /* the algorithm wants a tall matrix: work on A^T */
    if (wide) A = mH(A), M = M ? mH(M) : NULL;
    ts_tensor *Q = A ? approximate_basis(A, q, niter, M) : NULL;
    ts_tensor *B = minus_prod(mH(Q), NULL, A);
    if (M && B) B = ts_sub(B, ts_matmul(mH(Q), M));
    ts_tensor *s = NULL, *Vh = NULL, *Ub = B ? ts_linalg_svd(B, false, &s, &Vh) : NULL;
    ts_tensor *u = Ub ? ts_matmul(Q, Ub) : NULL, *v = mH(Vh);
    *S = s;
    *U = wide ? v : u;
    *V = wide ? u : v;
}

/* the factors kept into the enclosing scope, or all NULL */
static ts_tensor *finish3(ts_tensor *u, ts_tensor *s, ts_tensor *v, ts_tensor **S, ts_tensor **V) {
    const bool ok = ts_error() == TS_OK && u && s && v;
    if (ok) {
        if (S) *S = ts_keep(s);
        if (V) *V = ts_keep(v);
    }
    return tsl_finish(ok ? u : NULL);
}

static bool check_q_niter(const char *op, ts_tensor *A, int64_t q, int64_t niter, bool q_max) {
    const int64_t m = tsl_rows(A), n = tsl_cols(A), k = m < n ? m : n;
    if (q < 0 || (q_max && q > k)) {
        tsi_error_set(TS_ERR_ARG,
                      "%s: q(=%lld) must be non-negative integer and not greater than min(m, "
                      "n)=%lld",
                      op, (long long)q, (long long)k);
        return false;
    }
    if (niter < 0) {
        tsi_error_set(TS_ERR_ARG, "%s: niter(=%lld) must be non-negative integer", op,
                      (long long)niter);
        return false;
    }
    return true;
}

ts_tensor *ts_svd_lowrank(ts_tensor *A, int64_t q, int64_t niter, ts_tensor *M, ts_tensor **S,
                          ts_tensor **V) {
    const char *op = "svd_lowrank";
    if (S) *S = NULL;
    if (V) *V = NULL;
    if (!tsl_check(op, A, "A", false)) return NULL;
    if (q == TS_LOWRANK_Q_DEFAULT) q = 6;
    if (!check_q_niter(op, A, q, niter, false)) return NULL;
    if (M) {
        ts_tensor *am[2] = {A, M};
        ts_device dev;
        if (!tsi_check_input(op, M, "M") || !tsi_same_device(op, am, 2, false, &dev)) return NULL;
        if (M->dtype != A->dtype) {
            tsi_error_set(TS_ERR_DTYPE, "%s: M must have A's dtype %s, but got %s", op,
                          tsi_torch_scalar_name(A->dtype), tsi_torch_scalar_name(M->dtype));
            return NULL;
        }
        bool fits = M->shape.ndim <= A->shape.ndim;
        for (int i = 1; fits && i <= M->shape.ndim; i++) {
            const int64_t dm = M->shape.dims[M->shape.ndim - i],
                          da = A->shape.dims[A->shape.ndim - i];
            fits = dm == da || dm == 1;
        }
        if (!fits) {
            tsi_error_set(TS_ERR_SHAPE, "%s: M of shape %s cannot be broadcast to A's shape %s", op,
                          tsi_shape_str(M->shape), tsi_shape_str(A->shape));
            return NULL;
        }
    }
    ts_scope_begin();
    ts_tensor *u = NULL, *s = NULL, *v = NULL;
    svd_lowrank_core(A, q, niter, M, &u, &s, &v);
    return finish3(u, s, v, S, V);
}

ts_tensor *ts_pca_lowrank(ts_tensor *A, int64_t q, bool center, int64_t niter, ts_tensor **S,
                          ts_tensor **V) {
    const char *op = "pca_lowrank";
    if (S) *S = NULL;
    if (V) *V = NULL;
    if (!tsl_check(op, A, "A", false)) return NULL;
    if (q == TS_LOWRANK_Q_DEFAULT) {
        const int64_t m = tsl_rows(A), n = tsl_cols(A);
        q = m < n ? m : n;
        if (q > 6) q = 6;
    }
    if (!check_q_niter(op, A, q, niter, true)) return NULL;
    ts_scope_begin();
    ts_tensor *u = NULL, *s = NULL, *v = NULL;
    /* centred: A minus its column means (the mean over the rows, dim -2) */
    ts_tensor *Ac = center ? ts_sub(A, ts_mean_dims(A, TS_DIMS(-2), true)) : A;
    if (Ac) svd_lowrank_core(Ac, q, niter, NULL, &u, &s, &v);
    return finish3(u, s, v, S, V);
}
