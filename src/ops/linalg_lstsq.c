/* linalg_lstsq.c — least squares and the pseudoinverse (issue 52): linalg.lstsq (LAPACK's
 * gelsy / gelsd / gelss / gels on the host, PyTorch's outputs per driver), linalg.pinv (from the
 * SVD or, hermitian, the eigen-decomposition, with PyTorch's pinv_backward) and
 * linalg.matrix_rank. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/linalg_internal.h"

static double eps_of(ts_dtype dt) { return dt == TS_F32 ? (double)FLT_EPSILON : DBL_EPSILON; }

/* PyTorch's tolerances: atol None (< 0) is 0; rtol None is 0 when atol > 0, else eps*max(m,n) */
static void tolerances(ts_tensor *A, double *atol, double *rtol) {
    const int64_t m = tsl_rows(A), n = tsl_cols(A);
    const bool has_atol = *atol >= 0;
    if (!has_atol) *atol = 0;
    if (*rtol < 0) *rtol = has_atol && *atol > 0 ? 0 : eps_of(A->dtype) * (double)(m > n ? m : n);
}

/* the singular values (or |eigenvalues|, hermitian) of every matrix, descending, and, when pinv
 * is non-NULL, the pseudoinverses (b x n x m) with cut-off max(atol, rtol * largest) */
static bool pinv_host(const char *op, ts_tensor *A, double atol, double rtol, bool hermitian,
                      double *sv, int64_t *rank, double *pinv) {
    tsl_mats a;
    if (!tsl_read(op, A, &a)) return false;
    const int64_t m = a.m, n = a.n, k = m < n ? m : n;
    double *u = malloc((size_t)(m * m + n * n + k + 1) * sizeof *u);
    if (!u) {
        tsl_free(&a);
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
        return false;
    }
    double *vt = u + m * m, *s = vt + n * n;
    bool ok = true;
    for (int64_t i = 0; ok && i < a.batch; i++) {
        double *ai = a.a + i * m * n;
        int r;
        if (hermitian) { /* A = V diag(w) V^T: s = |w|, u = V, vt = sign(w) V^T */
            r = tsl_syevd(pinv != NULL, false, n, ai, s);
            for (int64_t p = 0; r == 0 && pinv && p < n; p++)
                for (int64_t q = 0; q < n; q++) u[p * n + q] = ai[p * n + q];
            for (int64_t q = 0; r == 0 && pinv && q < n; q++)
                for (int64_t p = 0; p < n; p++) vt[q * n + p] = (s[q] < 0 ? -1 : 1) * ai[p * n + q];
            for (int64_t q = 0; q < n; q++) s[q] = fabs(s[q]);
        } else {
            r = tsl_gesdd(m, n, ai, s, pinv ? u : NULL, pinv ? vt : NULL, false);
        }
        if (r != 0) {
            tsi_error_set(r > 0 ? TS_ERR_ARG : TS_ERR_OOM,
                          "%s: %sThe algorithm failed to converge (error code: %d).", op,
                          tsl_batch_prefix(A, i), r);
            ok = false;
            break;
        }
        double smax = 0;
        for (int64_t q = 0; q < k; q++) smax = s[q] > smax ? s[q] : smax;
        const double cut = atol > rtol * smax ? atol : rtol * smax;
        int64_t cnt = 0;
        for (int64_t q = 0; q < k; q++) cnt += s[q] > cut;
        if (rank) rank[i] = cnt;
        if (sv) { /* descending (eigh gives ascending |w| in no order) */
            double *o = sv + i * k;
            memcpy(o, s, (size_t)k * sizeof *o);
            for (int64_t p = 1; p < k; p++)
                for (int64_t q = p; q > 0 && o[q] > o[q - 1]; q--) {
                    double t = o[q];
                    o[q] = o[q - 1], o[q - 1] = t;
                }
        }
        if (!pinv) continue;
        /* pinv = V diag(1/s over the cut) U^T: [n x m] */
        double *pi = pinv + i * n * m;
        for (int64_t p = 0; p < n; p++)
            for (int64_t q = 0; q < m; q++) {
                double acc = 0;
                for (int64_t l = 0; l < k; l++)
                    if (s[l] > cut) acc += vt[l * n + p] / s[l] * u[q * k + l];
                pi[p * m + q] = acc;
            }
    }
    free(u);
    tsl_free(&a);
    return ok;
}

ts_tensor *ts_linalg_pinv(ts_tensor *A, double atol, double rtol, bool hermitian) {
    const char *op = "linalg.pinv";
    if (!tsl_check(op, A, "A", hermitian)) return NULL;
    tolerances(A, &atol, &rtol);
    ts_scope_begin();
    const int64_t m = tsl_rows(A), n = tsl_cols(A);
    const ts_shape bs = tsl_batch(A->shape);
    const bool meta = tsl_is_meta(A); /* no values: P's shape */
    double *p =
        meta ? NULL
             : malloc((size_t)(tsi_numel(A->shape) > 0 ? tsi_numel(A->shape) : 1) * sizeof *p);
    ts_tensor *P = meta ? tsl_meta(A, tsl_shape(bs, n, m), A->dtype) : NULL;
    if (!p && !meta)
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    else if (!meta && pinv_host(op, A, atol, rtol, hermitian, NULL, NULL, p))
        P = tsl_write(A, tsl_shape(bs, n, m), p, A->dtype);
    free(p);
    if (P) {
        ts_tensor *saves[2] = {A, P};
        tsl_twice(tsl_record("LinalgPinvBackward0", op, tsl_pinv_backward, &A, 1, &P, 1, saves, 2));
    }
    return tsl_finish(P);
}

ts_tensor *ts_linalg_matrix_rank(ts_tensor *A, double atol, double rtol, bool hermitian) {
    const char *op = "linalg.matrix_rank";
    if (!tsl_check(op, A, "A", hermitian)) return NULL;
    tolerances(A, &atol, &rtol);
    ts_scope_begin();
    const ts_shape bs = tsl_batch(A->shape);
    if (tsl_is_meta(A)) return tsl_finish(tsl_meta(A, bs, TS_I64)); /* no values: the shape */
    int64_t *r = malloc((size_t)(tsi_numel(bs) > 0 ? tsi_numel(bs) : 1) * sizeof *r);
    ts_tensor *R = NULL;
    if (!r)
        tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    else if (pinv_host(op, A, atol, rtol, hermitian, NULL, r, NULL))
        R = tsl_write_i64(A, bs, r);
    free(r);
    return tsl_finish(R);
}

/* ------------------------------------------------------------------ lstsq */
static ts_tensor *empty_of(ts_tensor *A, ts_dtype dt) {
    return ts_empty(TS_SHAPE(0), (ts_opts){.dtype = dt, .device = ts_device_of(A)});
}

/* A X = B in the least-squares sense for A [..., m, n], B [..., m, k] of one batch shape */
static bool lstsq_host(const char *op, ts_tensor *A, ts_tensor *B, double rcond, const char *drv,
                       bool vec, ts_tensor **X, ts_tensor **res, ts_tensor **rank, ts_tensor **sv) {
    tsl_mats a, b;
    if (!tsl_read(op, A, &a)) return false;
    if (!tsl_read(op, B, &b)) return tsl_free(&a), false;
    const int64_t m = a.m, n = a.n, k = b.n, mn = m > n ? m : n, kk = m < n ? m : n;
    const int64_t nb = a.batch;
    double *w = calloc((size_t)(nb * mn * k + nb * kk + nb * k + 1), sizeof *w);
    int64_t *rk = calloc((size_t)(nb + 1), sizeof *rk);
    bool ok = w && rk;
    if (!ok) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    double *s = ok ? w + nb * mn * k : NULL, *rs = ok ? s + nb * kk : NULL;
    bool full_rank = true;
    for (int64_t i = 0; ok && i < nb; i++) {
        double *bi = w + i * mn * k;
        memcpy(bi, b.a + i * m * k, (size_t)(m * k) * sizeof *bi);
        int r = tsl_gels(drv, m, n, k, a.a + i * m * n, bi, rcond, rk + i, s + i * kk);
        if (r != 0) {
            if (r > 0 && !strcmp(drv, "gels"))
                tsi_error_set(TS_ERR_ARG,
                              "torch.linalg.lstsq: %sThe least squares solution could not be "
                              "computed because the input matrix does not have full rank (error "
                              "code: %d).",
                              tsl_batch_prefix(A, i), r);
            else
                tsi_error_set(r > 0 ? TS_ERR_ARG : TS_ERR_OOM,
                              "torch.linalg.lstsq: %sThe algorithm failed to converge (error "
                              "code: %d).",
                              tsl_batch_prefix(A, i), r);
            ok = false;
        }
        full_rank &= rk[i] == n;
        for (int64_t c = 0; ok && c < k; c++) {
            double acc = 0;
            for (int64_t p = n; p < m; p++) acc += bi[p * k + c] * bi[p * k + c];
            rs[i * k + c] = acc;
        }
    }
    if (ok) {
        const ts_shape bs = tsl_batch(A->shape);
        double *x = malloc((size_t)(nb * n * k + 1) * sizeof *x);
        if (!x) {
            tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
            ok = false;
        } else {
            for (int64_t i = 0; i < nb; i++)
                memcpy(x + i * n * k, w + i * mn * k, (size_t)(n * k) * sizeof *x);
            *X = tsl_write(A, tsl_shape(bs, n, k), x, A->dtype);
            free(x);
        }
        const bool gels = !strcmp(drv, "gels"), gelsy = !strcmp(drv, "gelsy");
        const bool has_res = m > n && !gelsy && (gels || full_rank);
        if (ok && X) {
            *res = has_res ? tsl_write(A, vec ? bs : tsl_batch_vec(bs, k), rs, A->dtype)
                           : empty_of(A, A->dtype);
            *rank = gels ? empty_of(A, TS_I64) : tsl_write_i64(A, bs, rk);
            *sv = gels || gelsy ? empty_of(A, A->dtype)
                                : tsl_write(A, tsl_batch_vec(bs, kk), s, A->dtype);
        }
    }
    free(w), free(rk);
    tsl_free(&a), tsl_free(&b);
    return ok && *X && *res && *rank && *sv;
}

/* lstsq_host's outputs on meta: their shapes and dtypes, A taken as of full rank (the residuals
 * of gelsd / gelss are empty when a matrix is not: a fact of the values) */
static bool lstsq_meta(ts_tensor *A, ts_tensor *B, const char *drv, bool vec, ts_tensor **X,
                       ts_tensor **res, ts_tensor **rank, ts_tensor **sv) {
    const int64_t m = tsl_rows(A), n = tsl_cols(A), k = tsl_cols(B), kk = m < n ? m : n;
    const ts_shape bs = tsl_batch(A->shape);
    const bool gels = !strcmp(drv, "gels"), gelsy = !strcmp(drv, "gelsy");
    *X = tsl_meta(A, tsl_shape(bs, n, k), A->dtype);
    *res = m > n && !gelsy ? tsl_meta(A, vec ? bs : tsl_batch_vec(bs, k), A->dtype)
                           : empty_of(A, A->dtype);
    *rank = gels ? empty_of(A, TS_I64) : tsl_meta(A, bs, TS_I64);
    *sv = gels || gelsy ? empty_of(A, A->dtype) : tsl_meta(A, tsl_batch_vec(bs, kk), A->dtype);
    return *X && *res && *rank && *sv;
}

ts_tensor *ts_linalg_lstsq(ts_tensor *A, ts_tensor *B, double rcond, const char *driver,
                           ts_tensor **residuals, ts_tensor **rank, ts_tensor **sv) {
    const char *op = "torch.linalg.lstsq";
    if (residuals) *residuals = NULL;
    if (rank) *rank = NULL;
    if (sv) *sv = NULL;
    if (!tsl_check(op, A, "A", false) || !tsi_check_input(op, B, "B")) return NULL;
    if (!driver) driver = "gelsy";
    if (strcmp(driver, "gels") && strcmp(driver, "gelsy") && strcmp(driver, "gelsd") &&
        strcmp(driver, "gelss")) {
        tsi_error_set(TS_ERR_ARG,
                      "%s: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)", op);
        return NULL;
    }
    if (B->dtype != A->dtype) {
        tsi_error_set(TS_ERR_DTYPE,
                      "%s: Expected input and other to have the same dtype, but got input's "
                      "dtype %s and other's dtype %s",
                      op, tsi_torch_scalar_name(A->dtype), tsi_torch_scalar_name(B->dtype));
        return NULL;
    }
    ts_device dev;
    ts_tensor *pair[2] = {A, B};
    if (!tsi_same_device(op, pair, 2, false, &dev)) return NULL;
    const bool vec = B->shape.ndim == A->shape.ndim - 1;
    if (B->shape.ndim < 1 || (!vec && B->shape.ndim < 2)) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: input.dim() must be greater or equal to other.dim() and "
                      "(input.dim() - other.dim()) <= 1",
                      op);
        return NULL;
    }
    const int64_t bm = vec ? B->shape.dims[B->shape.ndim - 1] : tsl_rows(B);
    if (bm != tsl_rows(A)) {
        tsi_error_set(TS_ERR_SHAPE,
                      "%s: input.size(-2) should match other.size(-%d) (%lld vs %lld)", op,
                      vec ? 1 : 2, (long long)tsl_rows(A), (long long)bm);
        return NULL;
    }
    if (rcond < 0)
        rcond = eps_of(A->dtype) * (double)(tsl_rows(A) > tsl_cols(A) ? tsl_rows(A) : tsl_cols(A));
    ts_scope_begin();
    ts_tensor *a = A, *b = vec ? ts_unsqueeze(B, -1) : B;
    ts_tensor *X = NULL, *res = NULL, *rk = NULL, *s = NULL;
    if (b && tsl_broadcast_batch(op, &a, &b)) {
        ts_no_grad_begin();
        const bool ok = tsl_is_meta(a)
                            ? lstsq_meta(a, b, driver, vec, &X, &res, &rk, &s)
                            : lstsq_host(op, a, b, rcond, driver, vec, &X, &res, &rk, &s);
        ts_no_grad_end();
        ts_tensor *ab[2] = {a, b};
        if (ok && tsi_needs_graph(ab, 2)) { /* PyTorch's gradient: that of pinv(A) B */
            ts_tensor *P = ts_linalg_pinv(a, -1, rcond, false);
            X = P ? ts_matmul(P, b) : NULL;
            /* the residuals differentiable too: |A X - B|^2 per column (empty: a view of X) */
            ts_tensor *r = X && ts_numel(res) ? ts_sub(ts_matmul(a, X), b) : NULL;
            if (r)
                res = ts_sum_dim(ts_mul(r, r), -2, false);
            else if (X)
                res = ts_narrow(ts_reshape(X, TS_SHAPE(-1)), 0, 0, 0);
            if (res && vec && ts_numel(res)) res = ts_squeeze_dim(res, -1);
            if (!res) X = NULL;
        }
        if (!ok) X = NULL;
    }
    if (X && vec) X = ts_squeeze_dim(X, -1);
    if (X) {
        if (residuals) *residuals = ts_keep(res);
        if (rank) *rank = ts_keep(rk);
        if (sv) *sv = ts_keep(s);
    }
    return tsl_finish(X);
}
