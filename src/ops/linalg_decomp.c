/* linalg_decomp.c — torch.linalg's orthogonal decompositions (issue 52): qr (geqrf + orgqr),
 * svd / svdvals (gesdd), eigh / eigvalsh (syevd), on the host (svd in the operand's dtype:
 * linalg_native.c; qr and eigh in float64 through LAPACKE), the results copied back to the
 * operand's device in its dtype; on a device whose backend has the linalg slot (CUDA: cuSOLVER's
 * geqrf + orgqr, gesvd, syevd) there, in the operand's dtype (linalg_device.h). Gradients as
 * PyTorch's (linalg_grad.c). */
#include <stdlib.h>
#include <string.h>

#include "ops/linalg_device.h"
#include "ops/linalg_internal.h"

static void *zalloc(const char *op, int64_t n, size_t size) {
    void *p = calloc((size_t)(n > 0 ? n : 1), size);
    if (!p) tsi_error_set(TS_ERR_OOM, "%s: out of host memory for %lld values", op, (long long)n);
    return p;
}

static ts_tensor *empty_like_dt(ts_tensor *A, ts_dtype dt) {
    return ts_empty(TS_SHAPE(0), (ts_opts){.dtype = dt, .device = ts_device_of(A)});
}

/* ------------------------------------------------------------------ qr */
ts_tensor *ts_linalg_qr(ts_tensor *A, const char *mode, ts_tensor **R) {
    const char *op = "linalg.qr";
    if (R) *R = NULL;
    if (!tsl_check(op, A, "A", false)) return NULL;
    if (!mode) mode = "reduced";
    const bool complete = !strcmp(mode, "complete"), r_only = !strcmp(mode, "r");
    if (!complete && !r_only && strcmp(mode, "reduced")) {
        tsi_error_set(TS_ERR_ARG,
                      "%s: qr received unrecognized mode '%s' but expected one of 'reduced' "
                      "(default), 'r', or 'complete'",
                      op, mode);
        return NULL;
    }
    const int64_t m = tsl_rows(A), n = tsl_cols(A), k = m < n ? m : n;
    const int64_t kq = complete ? m : k, rr = complete ? m : k;
    ts_scope_begin();
    tsl_mats a;
    ts_tensor *Q = NULL, *Rt = NULL;
    if (tsl_dev_ok(A, NULL)) { /* on the device (cuSOLVER) */
        if (!tsl_dev_qr(op, A, complete, r_only ? NULL : &Q, &Rt))
            Q = Rt = NULL;
        else if (r_only)
            Q = empty_like_dt(A, A->dtype);
    } else if (tsl_read(op, A, &a)) {
        const int64_t b = a.batch;
        double *tau = zalloc(op, k, sizeof *tau);
        double *q = tau ? zalloc(op, b * m * kq, sizeof *q) : NULL;
        double *r = q ? zalloc(op, b * rr * n, sizeof *r) : NULL;
        bool ok = r != NULL;
        for (int64_t i = 0; ok && i < b; i++) {
            double *ai = a.a + i * m * n;
            if (tsl_geqrf(m, n, ai, tau) < 0 ||
                (!r_only && tsl_orgqr(m, kq, k, ai, n, tau, q + i * m * kq) < 0)) {
                tsi_error_set(TS_ERR_OOM, "%s: LAPACK geqrf/orgqr failed", op);
                ok = false;
            }
            for (int64_t p = 0; p < rr && p < m; p++)
                for (int64_t c = p; c < n; c++) r[(i * rr + p) * n + c] = ai[p * n + c];
        }
        if (ok) {
            const ts_shape bs = tsl_batch(A->shape);
            Q = r_only ? empty_like_dt(A, A->dtype)
                       : tsl_write(A, tsl_shape(bs, m, kq), q, A->dtype);
            Rt = tsl_write(A, tsl_shape(bs, rr, n), r, A->dtype);
        }
        free(tau), free(q), free(r);
        tsl_free(&a);
    }
    if (Q && Rt && !r_only) {
        ts_tensor *outs[2] = {Q, Rt};
        tsl_twice(tsl_record("LinalgQrBackward0", op, tsl_qr_backward, &A, 1, outs, 2, outs, 2));
    }
    if (R && Rt) *R = ts_keep(Rt);
    return tsl_finish(Q);
}

/* torch.geqrf: LAPACK's compact QR of every matrix (R on and above the diagonal, the Householder
 * vectors below it; tau their scales), computed in float64 and given in A's dtype. No gradient
 * (PyTorch has none). */
ts_tensor *ts_geqrf(ts_tensor *A, ts_tensor **tau_out) {
    const char *op = "geqrf";
    if (tau_out) *tau_out = NULL;
    if (!tsl_check(op, A, "input", false)) return NULL;
    const int64_t m = tsl_rows(A), n = tsl_cols(A), k = m < n ? m : n;
    ts_scope_begin();
    tsl_mats a;
    ts_tensor *out = NULL, *tau_t = NULL;
    ts_shape ts = tsl_batch(A->shape);
    ts.dims[ts.ndim++] = k;
    if (tsl_is_meta(A)) {
        out = tsl_meta(A, A->shape, A->dtype);
        tau_t = tsl_meta(A, ts, A->dtype);
    } else if (tsl_read(op, A, &a)) {
        double *tau = zalloc(op, a.batch * k, sizeof *tau);
        bool ok = tau != NULL;
        for (int64_t i = 0; ok && i < a.batch; i++)
            if (tsl_geqrf(m, n, a.a + i * m * n, tau + i * k) < 0)
                ok = !tsi_error_set(TS_ERR_OOM, "%s: LAPACK geqrf failed", op);
        if (ok) {
            out = tsl_write(A, A->shape, a.a, A->dtype);
            tau_t = tsl_write(A, ts, tau, A->dtype);
        }
        free(tau);
        tsl_free(&a);
    }
    if (tau_out && tau_t) *tau_out = ts_keep(tau_t);
    return tsl_finish(out && tau_t ? out : NULL);
}

/* ------------------------------------------------------------------ svd */
/* host SVD of every matrix in A's dtype: s (b x k), u (b x m x ku), vt (b x kv x n); vectors
 * false: s only */
typedef struct svd_host {
    int64_t b, m, n, k, ku, kv;
    bool f32;
    void *s, *u, *vt;
} svd_host;

/* PyTorch's error for the first matrix whose SVD did not converge */
static bool svd_errors(const char *op, ts_tensor *A, const int32_t *info, int64_t b) {
    for (int64_t i = 0; i < b; i++)
        if (info[i] != 0) {
            tsi_error_set(TS_ERR_ARG,
                          "%s: %sThe algorithm failed to converge because the input matrix is "
                          "ill-conditioned or has too many repeated singular values (error code: "
                          "%d).",
                          op, tsl_batch_prefix(A, i), info[i]);
            return false;
        }
    return true;
}

/* the SVD on A's device (cuSOLVER's gesvd): S and, U non-NULL, U and Vh */
static bool svd_device(const char *op, ts_tensor *A, bool full, ts_tensor **U, ts_tensor **S,
                       ts_tensor **Vh) {
    const int64_t b = tsi_numel(tsl_batch(A->shape));
    int32_t *info = zalloc(op, b, sizeof *info);
    const bool ok = info && tsl_dev_svd(op, A, full, U, S, Vh, info) && svd_errors(op, A, info, b);
    free(info);
    return ok;
}

static bool svd_compute(const char *op, ts_tensor *A, bool vectors, bool full, svd_host *h) {
    memset(h, 0, sizeof *h);
    tsl_nat a;
    if (!tsl_nat_read(op, A, &a)) return false;
    const int64_t m = a.m, n = a.n, k = m < n ? m : n, b = a.batch;
    const size_t es = a.f32 ? sizeof(float) : sizeof(double);
    h->b = b, h->m = m, h->n = n, h->k = k, h->f32 = a.f32;
    h->ku = full ? m : k, h->kv = full ? n : k;
    h->s = zalloc(op, b * k, es);
    if (vectors && h->s) {
        h->u = zalloc(op, b * m * h->ku, es);
        h->vt = h->u ? zalloc(op, b * h->kv * n, es) : NULL;
    }
    int32_t *info = h->s ? zalloc(op, b, sizeof *info) : NULL;
    bool ok = info && (!vectors || h->vt) &&
              tsl_nat_svd(op, &a, h->s, vectors ? h->u : NULL, vectors ? h->vt : NULL, full, info);
    if (ok) ok = svd_errors(op, A, info, b);
    free(info);
    tsl_nat_free(&a);
    if (!ok) free(h->s), free(h->u), free(h->vt);
    return ok;
}

static void svd_free(svd_host *h) { free(h->s), free(h->u), free(h->vt); }

ts_tensor *ts_linalg_svd(ts_tensor *A, bool full_matrices, ts_tensor **S, ts_tensor **Vh) {
    const char *op = "linalg.svd";
    if (S) *S = NULL;
    if (Vh) *Vh = NULL;
    if (!tsl_check(op, A, "A", false)) return NULL;
    ts_scope_begin();
    svd_host h;
    ts_tensor *U = NULL, *St = NULL, *V = NULL;
    if (tsl_dev_ok(A, NULL)) {
        if (!svd_device(op, A, full_matrices, &U, &St, &V)) U = St = V = NULL;
    } else if (svd_compute(op, A, true, full_matrices, &h)) {
        const ts_shape bs = tsl_batch(A->shape);
        U = tsl_nat_write(A, tsl_shape(bs, h.m, h.ku), h.u, h.f32);
        St = tsl_nat_write(A, tsl_batch_vec(bs, h.k), h.s, h.f32);
        V = tsl_nat_write(A, tsl_shape(bs, h.kv, h.n), h.vt, h.f32);
        svd_free(&h);
    }
    if (U && St && V) {
        ts_tensor *outs[3] = {U, St, V};
        ts_node *nd =
            tsl_record("LinalgSvdBackward0", op, tsl_svd_backward, &A, 1, outs, 3, outs, 3);
        if (tsl_twice(nd)) nd->ip[0] = full_matrices;
    }
    if (S && St) *S = ts_keep(St);
    if (Vh && V) *Vh = ts_keep(V);
    return tsl_finish(U);
}

ts_tensor *ts_linalg_svdvals(ts_tensor *A) {
    const char *op = "linalg.svdvals";
    if (!tsl_check(op, A, "A", false)) return NULL;
    ts_scope_begin();
    ts_tensor *St = NULL;
    if (tsi_needs_graph(&A, 1)) { /* the gradient needs the vectors */
        ts_tensor *Vh;
        if (!ts_linalg_svd(A, false, &St, &Vh)) St = NULL;
    } else if (tsl_dev_ok(A, NULL)) {
        if (!svd_device(op, A, false, NULL, &St, NULL)) St = NULL;
    } else {
        svd_host h;
        if (svd_compute(op, A, false, false, &h)) {
            St = tsl_nat_write(A, tsl_batch_vec(tsl_batch(A->shape), h.k), h.s, h.f32);
            svd_free(&h);
        }
    }
    return tsl_finish(St);
}

/* ------------------------------------------------------------------ eigh */
static bool uplo_ok(const char *op, const char *uplo, bool *upper) {
    if (!uplo) uplo = "L";
    if ((uplo[0] == 'L' || uplo[0] == 'l' || uplo[0] == 'U' || uplo[0] == 'u') && !uplo[1]) {
        *upper = uplo[0] == 'U' || uplo[0] == 'u';
        return true;
    }
    tsi_error_set(TS_ERR_ARG, "%s: Expected UPLO argument to be 'L' or 'U', but got %s", op, uplo);
    return false;
}

/* PyTorch's error for matrix i, whose syevd returned r (!= 0); false */
static bool eigh_error(const char *op, ts_tensor *A, int64_t i, int r) {
    tsi_error_set(r > 0 ? TS_ERR_ARG : TS_ERR_OOM,
                  "%s: %sThe algorithm failed to converge because the input matrix is "
                  "ill-conditioned or has too many repeated eigenvalues (error code: %d).",
                  op, tsl_batch_prefix(A, i), r);
    return false;
}

static ts_tensor *eigh_impl(const char *op, ts_tensor *A, const char *uplo, ts_tensor **V) {
    bool upper;
    if (!tsl_check(op, A, "A", true) || !uplo_ok(op, uplo, &upper)) return NULL;
    ts_scope_begin();
    const bool vectors = V || tsi_needs_graph(&A, 1);
    tsl_mats a;
    ts_tensor *L = NULL, *Vt = NULL;
    if (tsl_dev_ok(A, NULL)) { /* on the device (cuSOLVER's syevd) */
        const int64_t b = tsi_numel(tsl_batch(A->shape));
        int32_t *info = zalloc(op, b, sizeof *info);
        bool ok = info && tsl_dev_eigh(op, A, upper, &L, vectors ? &Vt : NULL, info);
        for (int64_t i = 0; ok && i < b; i++)
            if (info[i] != 0) ok = eigh_error(op, A, i, info[i]);
        free(info);
        if (!ok) L = Vt = NULL;
    } else if (tsl_read(op, A, &a)) {
        const int64_t n = a.n, b = a.batch;
        double *w = zalloc(op, b * n, sizeof *w);
        bool ok = w != NULL;
        for (int64_t i = 0; ok && i < b; i++) {
            int r = tsl_syevd(vectors, upper, n, a.a + i * n * n, w + i * n);
            if (r != 0) ok = eigh_error(op, A, i, r);
        }
        if (ok) {
            L = tsl_write(A, tsl_batch_vec(tsl_batch(A->shape), n), w, A->dtype);
            if (vectors) Vt = tsl_write(A, A->shape, a.a, A->dtype);
        }
        free(w);
        tsl_free(&a);
    }
    if (L && Vt) {
        ts_tensor *outs[2] = {L, Vt};
        tsl_twice(
            tsl_record("LinalgEighBackward0", op, tsl_eigh_backward, &A, 1, outs, 2, outs, 2));
    }
    if (V && Vt) *V = ts_keep(Vt);
    return tsl_finish(L);
}

ts_tensor *ts_linalg_eigh(ts_tensor *A, const char *uplo, ts_tensor **V) {
    if (V) *V = NULL;
    return eigh_impl("linalg.eigh", A, uplo, V);
}

ts_tensor *ts_linalg_eigvalsh(ts_tensor *A, const char *uplo) {
    return eigh_impl("linalg.eigvalsh", A, uplo, NULL);
}
