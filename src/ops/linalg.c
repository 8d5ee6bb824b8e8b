/* linalg.c — torch.linalg's LU-based ops (issue 52): lu_factor(_ex), inv(_ex), solve(_ex),
 * det, slogdet, logdet. LAPACK's getrf/getri/getrs on the host: lu_factor in float64
 * (linalg_lapack.c), inv, solve and the determinants in the operand's dtype (linalg_native.c,
 * decision 0024); the results copied back to the operand's device; on a device whose backend has
 * the linalg slot (CUDA: cuSOLVER) the same factorizations there instead (linalg_device.h).
 * Gradients as PyTorch's (linalg_grad.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/linalg_device.h"
#include "ops/linalg_internal.h"

/* one int32 per matrix of A's batch on the host (error set when out of memory) */
static int32_t *info_alloc(const char *op, ts_tensor *A) {
    const int64_t b = tsi_numel(tsl_batch(A->shape));
    int32_t *inf = calloc((size_t)(b > 0 ? b : 1), sizeof *inf);
    if (!inf) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    return inf;
}

/* ------------------------------------------------------------------ lu_factor */
/* LU factors of every matrix of A: lu (batch x m x n), piv (batch x k), info (batch) */
typedef struct lu_host {
    tsl_mats lu;
    int32_t *piv, *info;
} lu_host;

static void lu_free(lu_host *h) {
    tsl_free(&h->lu);
    free(h->piv), free(h->info);
}

static bool lu_compute(const char *op, ts_tensor *A, lu_host *h) {
    memset(h, 0, sizeof *h);
    if (!tsl_read(op, A, &h->lu)) return false;
    const int64_t m = h->lu.m, n = h->lu.n, k = m < n ? m : n, b = h->lu.batch;
    h->piv = malloc((size_t)(b * k > 0 ? b * k : 1) * sizeof *h->piv);
    h->info = malloc((size_t)(b > 0 ? b : 1) * sizeof *h->info);
    if (!h->piv || !h->info) {
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        return lu_free(h), false;
    }
    for (int64_t i = 0; i < b; i++) {
        int r = tsl_getrf(m, n, h->lu.a + i * m * n, h->piv + i * k);
        if (r < 0) {
            tsi_error_set(TS_ERR_OOM, "%s: LAPACK getrf failed (%d)", op, r);
            return lu_free(h), false;
        }
        h->info[i] = r;
    }
    return true;
}

/* false with PyTorch's error for the first zero pivot (none with _ex: the infos say) */
static bool lu_errors(const char *op, ts_tensor *A, const int32_t *inf, int64_t batch, bool ex) {
    for (int64_t i = 0; !ex && i < batch; i++)
        if (inf[i] > 0) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: %sU[%d,%d] is zero and using it on lu_solve would result in a "
                          "division by zero. If you still want to perform the factorization, "
                          "consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)",
                          op, tsl_batch_prefix(A, i), inf[i], inf[i]);
            return false;
        }
    return true;
}

ts_tensor *ts_linalg_lu_factor_ex(ts_tensor *A, ts_tensor **pivots, ts_tensor **info) {
    const char *op = info ? "linalg.lu_factor_ex" : "torch.linalg.lu_factor";
    if (pivots) *pivots = NULL;
    if (info) *info = NULL;
    if (!tsl_check(op, A, "A", false)) return NULL;
    ts_scope_begin();
    lu_host h;
    ts_tensor *LU = NULL, *P = NULL, *I = NULL;
    if (tsl_dev_ok(A, NULL)) { /* on the device (cuSOLVER), in A's dtype */
        int32_t *inf = info_alloc(op, A);
        if (inf && tsl_dev_lu(op, A, &LU, &P, inf) &&
            lu_errors(op, A, inf, tsi_numel(tsl_batch(A->shape)), info != NULL))
            I = tsl_write_i32(A, tsl_batch(A->shape), inf);
        else
            LU = P = NULL;
        free(inf);
    } else if (lu_compute(op, A, &h)) {
        const ts_shape b = tsl_batch(A->shape);
        const int64_t m = h.lu.m, n = h.lu.n, k = m < n ? m : n;
        if (lu_errors(op, A, h.info, h.lu.batch, info != NULL)) {
            LU = tsl_write(A, A->shape, h.lu.a, A->dtype);
            P = tsl_write_i32(A, tsl_batch_vec(b, k), h.piv);
            I = tsl_write_i32(A, b, h.info);
        }
        lu_free(&h);
    }
    if (LU && P && tsi_needs_graph(&A, 1)) { /* the gradient goes through P, L and U */
        ts_tensor *Pm = NULL, *L = NULL, *U = NULL;
        ts_no_grad_begin();
        Pm = ts_lu_unpack(LU, P, &L, &U);
        ts_no_grad_end();
        ts_tensor *outs[3] = {LU, NULL, NULL}, *saves[4] = {Pm, L, U, LU};
        if (Pm && L && U) /* LU saved too: create_graph unpacks it again, with its history */
            tsl_twice(tsl_record("LinalgLuFactorExBackward0", op, tsl_lu_factor_backward, &A, 1,
                                 outs, 3, saves, 4));
    }
    if (pivots && P) *pivots = ts_keep(P);
    if (info && I) *info = ts_keep(I);
    return tsl_finish(LU);
}

/* ------------------------------------------------------------------ inv */
/* PyTorch's error for the first singular matrix (none with _ex: LAPACK's partial result stays) */
static bool inv_errors(const char *op, ts_tensor *A, const int32_t *inf, int64_t batch, bool ex) {
    for (int64_t i = 0; !ex && i < batch; i++)
        if (inf[i] > 0) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: %sThe diagonal element %d is zero, the inversion could not be "
                          "completed because the input matrix is singular.",
                          op, tsl_batch_prefix(A, i), inf[i]);
            return false;
        }
    return true;
}

ts_tensor *ts_linalg_inv_ex(ts_tensor *A, ts_tensor **info) {
    const char *op = "linalg.inv";
    if (info) *info = NULL;
    if (!tsl_check(op, A, "A", true)) return NULL;
    ts_scope_begin();
    tsl_nat a;
    ts_tensor *X = NULL, *I = NULL;
    if (tsl_dev_ok(A, NULL)) { /* on the device (cuSOLVER) */
        int32_t *inf = info_alloc(op, A);
        X = inf ? tsl_dev_inv(op, A, inf) : NULL;
        if (X && inv_errors(op, A, inf, tsi_numel(tsl_batch(A->shape)), info != NULL))
            I = tsl_write_i32(A, tsl_batch(A->shape), inf);
        else
            X = NULL;
        free(inf);
    } else if (tsl_nat_read(op, A, &a)) {
        int32_t *inf = malloc((size_t)(a.batch > 0 ? a.batch : 1) * sizeof *inf);
        bool ok = inf && tsl_nat_inv(op, &a, inf);
        if (!inf) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        if (ok) ok = inv_errors(op, A, inf, a.batch, info != NULL);
        if (ok) {
            X = tsl_nat_write(A, A->shape, a.a, a.f32);
            I = tsl_write_i32(A, tsl_batch(A->shape), inf);
        }
        free(inf);
        tsl_nat_free(&a);
    }
    if (X) tsl_twice(tsl_record("LinalgInvExBackward0", op, tsl_inv_backward, &A, 1, &X, 1, &X, 1));
    if (info && I) *info = ts_keep(I);
    return tsl_finish(X);
}

ts_tensor *ts_linalg_inv(ts_tensor *A) { return ts_linalg_inv_ex(A, NULL); }

/* ------------------------------------------------------------------ solve */
/* A X = B for A [..., n, n], B [..., n, k] of the same batch shape */
/* PyTorch's error for the first singular matrix (none with _ex) */
static bool solve_errors(ts_tensor *A, const int32_t *inf, int64_t batch, bool ex) {
    for (int64_t i = 0; !ex && i < batch; i++)
        if (inf[i] > 0) {
            tsi_error_set(TS_ERR_ARG,
                          "torch.linalg.solve: %sThe solver failed because the input matrix is "
                          "singular.",
                          tsl_batch_prefix(A, i));
            return false;
        }
    return true;
}

static void solve_record(const char *op, ts_tensor *A, ts_tensor *B, ts_tensor *X) {
    ts_tensor *ins[2] = {A, B}, *saves[2] = {A, X};
    tsl_twice(
        tsl_record("LinalgSolveExBackward0", op, tsl_solve_backward, ins, 2, &X, 1, saves, 2));
}

static ts_tensor *solve_core(const char *op, ts_tensor *A, ts_tensor *B, ts_tensor **info) {
    tsl_nat a, b;
    ts_tensor *X = NULL;
    if (tsl_dev_ok(A, B)) { /* on the device (cuSOLVER) */
        int32_t *inf = info_alloc(op, A);
        X = inf ? tsl_dev_solve(op, A, B, inf) : NULL;
        if (X && solve_errors(A, inf, tsi_numel(tsl_batch(A->shape)), info != NULL)) {
            if (info) *info = tsl_write_i32(A, tsl_batch(A->shape), inf);
        } else {
            X = NULL;
        }
        free(inf);
        if (X) solve_record(op, A, B, X);
        return X;
    }
    if (!tsl_nat_read(op, A, &a)) return NULL;
    if (tsl_nat_read(op, B, &b)) {
        int32_t *inf = malloc((size_t)(a.batch > 0 ? a.batch : 1) * sizeof *inf);
        bool ok = inf && tsl_nat_solve(op, &a, &b, inf);
        if (!inf) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        if (ok) ok = solve_errors(A, inf, a.batch, info != NULL);
        if (ok) {
            X = tsl_nat_write(A, B->shape, b.a, b.f32);
            if (info) *info = tsl_write_i32(A, tsl_batch(A->shape), inf);
        }
        free(inf);
        tsl_nat_free(&b);
    }
    tsl_nat_free(&a);
    if (X) solve_record(op, A, B, X);
    return X;
}

ts_tensor *ts_linalg_solve_ex(ts_tensor *A, ts_tensor *B, bool left, ts_tensor **info) {
    const char *op = "linalg.solve";
    if (info) *info = NULL;
    if (!tsl_check(op, A, "A", true) || !tsi_check_input(op, B, "B")) return NULL;
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
    const int64_t n = tsl_rows(A);
    /* PyTorch's rule: B is a (batch of) vector(s) when 1-D or A's batch shape plus n */
    bool vec = B->shape.ndim == 1;
    if (B->shape.ndim == A->shape.ndim - 1) {
        vec = true;
        for (int i = 0; i < B->shape.ndim; i++) vec &= B->shape.dims[i] == A->shape.dims[i];
    }
    if (!vec && B->shape.ndim < 2) vec = true;
    const int64_t bn = vec ? B->shape.dims[B->shape.ndim - 1] : B->shape.dims[B->shape.ndim - 2];
    const int64_t bk = vec ? 1 : B->shape.dims[B->shape.ndim - 1];
    if ((left ? bn : bk) != n) {
        if (left)
            tsi_error_set(TS_ERR_SHAPE,
                          "%s: Incompatible shapes of A and B for the equation AX = B (%lldx%lld "
                          "and %lldx%lld)",
                          op, (long long)n, (long long)n, (long long)bn, (long long)bk);
        else
            tsi_error_set(TS_ERR_SHAPE,
                          "%s: Incompatible shapes of A and B for the equation XA = B (%lldx%lld "
                          "and %lldx%lld)",
                          op, (long long)n, (long long)n, (long long)bn, (long long)bk);
        return NULL;
    }
    ts_scope_begin();
    ts_tensor *a = left ? A : tsl_mT(A);
    ts_tensor *b = vec ? ts_unsqueeze(B, -1) : (left ? B : tsl_mT(B));
    ts_tensor *I = NULL, *X = NULL;
    if (a && b && tsl_broadcast_batch(op, &a, &b)) X = solve_core(op, a, b, info ? &I : NULL);
    if (X) X = vec ? ts_squeeze_dim(X, -1) : (left ? X : tsl_mT(X));
    if (info && I) *info = ts_keep(I);
    return tsl_finish(X);
}

ts_tensor *ts_linalg_solve(ts_tensor *A, ts_tensor *B, bool left) {
    return ts_linalg_solve_ex(A, B, left, NULL);
}

/* ------------------------------------------------------------------ det, slogdet, logdet */
/* sign and log|det| of every matrix (sign 0, log -inf when singular); det (when non-NULL) gets
 * the determinants as products instead (sign and logabs then allocated but not set) */
static bool slogdet_host(const char *op, ts_tensor *A, double **sign, double **logabs,
                         double *det) {
    tsl_nat a;
    if (!tsl_nat_read(op, A, &a)) return false;
    const int64_t b = a.batch;
    *sign = malloc((size_t)(b > 0 ? b : 1) * sizeof(double));
    *logabs = malloc((size_t)(b > 0 ? b : 1) * sizeof(double));
    bool ok = *sign && *logabs;
    if (!ok) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    if (ok) ok = tsl_nat_slogdet(op, &a, det ? NULL : *sign, det ? NULL : *logabs, det);
    if (!ok) free(*sign), free(*logabs);
    tsl_nat_free(&a);
    return ok;
}

ts_tensor *ts_linalg_slogdet(ts_tensor *A, ts_tensor **logabsdet) {
    const char *op = "linalg.slogdet";
    if (logabsdet) *logabsdet = NULL;
    if (!tsl_check(op, A, "A", true)) return NULL;
    ts_scope_begin();
    double *s, *l;
    ts_tensor *S = NULL, *L = NULL;
    if (tsl_dev_ok(A, NULL)) { /* on the device (cuSOLVER's getrf) */
        if (!tsl_dev_det(op, A, NULL, &S, &L)) S = L = NULL;
    } else if (slogdet_host(op, A, &s, &l, NULL)) {
        const ts_shape b = tsl_batch(A->shape);
        S = tsl_write(A, b, s, A->dtype);
        L = tsl_write(A, b, l, A->dtype);
        free(s), free(l);
    }
    if (S && L) {
        ts_tensor *outs[2] = {S, L}; /* sign's gradient is zero, as PyTorch's */
        tsl_twice(
            tsl_record("LinalgSlogdetBackward0", op, tsl_slogdet_backward, &A, 1, outs, 2, &A, 1));
    }
    if (logabsdet && L) *logabsdet = ts_keep(L);
    return tsl_finish(S);
}

ts_tensor *ts_linalg_det(ts_tensor *A) {
    const char *op = "linalg.det";
    if (!tsl_check(op, A, "A", true)) return NULL;
    ts_scope_begin();
    double *s, *l;
    ts_tensor *D = NULL;
    const ts_shape b = tsl_batch(A->shape);
    const bool dev = tsl_dev_ok(A, NULL); /* on the device (cuSOLVER's getrf) */
    double *d = dev ? NULL : malloc((size_t)(tsi_numel(b) > 0 ? tsi_numel(b) : 1) * sizeof *d);
    if (dev) {
        if (!tsl_dev_det(op, A, &D, NULL, NULL)) D = NULL;
    } else if (!d)
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    else if (slogdet_host(op, A, &s, &l, d)) {
        D = tsl_write(A, b, d, A->dtype);
        free(s), free(l);
    }
    free(d);
    if (D) {
        ts_tensor *saves[2] = {A, D};
        tsl_twice(tsl_record("LinalgDetBackward0", op, tsl_det_backward, &A, 1, &D, 1, saves, 2));
    }
    return tsl_finish(D);
}

/* torch.logdet: log(det) through slogdet: NaN for a negative determinant */
ts_tensor *ts_logdet(ts_tensor *A) {
    ts_scope_begin();
    ts_tensor *l = NULL, *s = ts_linalg_slogdet(A, &l);
    ts_tensor *y = NULL;
    if (s && l) {
        ts_tensor *neg = ts_lt_scalar(s, 0.0);
        y = neg ? ts_masked_fill(l, neg, NAN) : NULL;
    }
    return tsl_finish(y);
}
