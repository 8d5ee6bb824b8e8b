/* test_linalg_ldl.c — linalg.ldl_factor(_ex) / ldl_solve and torch.ormqr (include/tessera/linalg.h;
 * src/ops/linalg_ldl.c, linalg_ormqr.c) on every device in float32 and float64: A rebuilt in
 * float64 from the compact LDL^T and sytrf's pivots (1 x 1 and 2 x 2 blocks), A X = B, the info of
 * a singular matrix; ormqr against Q = H_1 ... H_k built by hand from geqrf's reflectors (all four
 * of left / transpose, wide, tall, batched, empty); ts_gradcheck of ormqr in all three inputs; the
 * refusals naming the op. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host_values.h"
#include "tessera.h"
#include "tessera/linalg.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define MAXV 1024
static double va[MAXV], vb[MAXV], vc[MAXV], vd[MAXV];

#define fill       ts_test_fill_uniform /* tests/support/host_values.h */
#define mk         ts_test_tensor_f64   /* tests/support/host_values.h */
#define rd(t, out) ts_test_read_f64(t, out, MAXV)
#define is_shape   ts_test_shape_is
static double tol_of(ts_dtype dt, int64_t n) {
    return (dt == TS_F32 ? 6e-8 : 1.2e-16) * 64.0 * (double)(n > 0 ? n : 1);
}
static void mm(const double *a, const double *b, double *c, int64_t m, int64_t k, int64_t n) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t l = 0; l < k; l++) s += a[i * k + l] * b[l * n + j];
            c[i * n + j] = s;
        }
}

/* ------------------------------------------------------------------ ldl */
#define N 5
/* A = W D W^T with W = P(1) L(1) P(2) L(2) ... (LAPACK sytrf, uplo L): block k of order s
 * (ipiv[k] > 0: 1, rows k and ipiv[k]-1 swapped; ipiv[k] = ipiv[k+1] < 0: 2, rows k+1 and
 * -ipiv[k]-1 swapped), L(k) the unit matrix with ld[k+s:, k:k+s] below the block */
static void ldl_rebuild(const double *ld, const int32_t *ipiv, int64_t n, double *a) {
    double w[N * N] = {0}, t[N * N], dm[N * N] = {0}, f[N * N];
    for (int64_t i = 0; i < n; i++) w[i * n + i] = 1;
    for (int64_t k = 0; k < n;) {
        const int64_t s = ipiv[k] > 0 ? 1 : 2, r = s == 1 ? k : k + 1;
        const int64_t p = ipiv[k] > 0 ? ipiv[k] - 1 : -ipiv[k] - 1;
        for (int64_t i = 0; i < n; i++) { /* w = w P: swap columns r and p */
            double x = w[i * n + r];
            w[i * n + r] = w[i * n + p], w[i * n + p] = x;
        }
        double l[N * N] = {0};
        for (int64_t i = 0; i < n; i++) l[i * n + i] = 1;
        for (int64_t i = k + s; i < n; i++)
            for (int64_t j = k; j < k + s; j++) l[i * n + j] = ld[i * n + j];
        mm(w, l, t, n, n, n);
        memcpy(w, t, sizeof t);
        for (int64_t i = k; i < k + s; i++)
            for (int64_t j = k; j < k + s; j++)
                dm[i * n + j] = ld[(i > j ? i : j) * n + (i < j ? i : j)];
        k += s;
    }
    mm(w, dm, t, n, n, n);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) f[i * n + j] = w[j * n + i];
    mm(t, f, a, n, n, n);
}

static void test_ldl(ts_device d, ts_dtype dt) {
    const int64_t B = 2, n = N;
    const double tol = tol_of(dt, n) * 20;
    /* symmetric, indefinite (2 x 2 pivots likely), and the second with a zero diagonal */
    fill(va, B * n * n, 11);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < i; j++) va[(b * n + j) * n + i] = va[(b * n + i) * n + j];
    for (int64_t i = 0; i < n; i++) va[(n + i) * n + i] = 0;
    ts_tensor *A = mk(TS_SHAPE(B, n, n), va, dt, d), *P = NULL, *info = NULL;
    ts_tensor *LD = ts_linalg_ldl_factor_ex(A, false, &P, &info);
    CHECK(is_shape(LD, TS_SHAPE(B, n, n)) && ts_dtype_of(LD) == dt);
    CHECK(is_shape(P, TS_SHAPE(B, n)) && P && ts_dtype_of(P) == TS_I32);
    CHECK(is_shape(info, TS_SHAPE(B)) && info && ts_dtype_of(info) == TS_I32);
    CHECK(ts_device_of(LD).type == d.type && P && ts_device_of(P).type == d.type);
    int32_t piv[2 * N], inf[2] = {-1, -1};
    bool two = false;
    if (rd(LD, vb) && P && info && ts_copy_to_host(ts_to(P, ts_cpu()), piv, sizeof piv) == TS_OK &&
        ts_copy_to_host(ts_to(info, ts_cpu()), inf, sizeof inf) == TS_OK) {
        CHECK(inf[0] == 0 && inf[1] == 0);
        for (int64_t b = 0; b < B; b++) {
            for (int64_t i = 0; i < n; i++) {
                two |= piv[b * n + i] < 0;
                for (int64_t j = i + 1; j < n; j++) CHECK(vb[(b * n + i) * n + j] == 0);
            }
            double r[N * N];
            ldl_rebuild(vb + b * n * n, piv + b * n, n, r);
            for (int64_t i = 0; i < n * n; i++) CHECK_NEAR(r[i], va[b * n * n + i], tol);
        }
    }
    CHECK(two); /* the zero diagonal forces a 2 x 2 block */
    /* ldl_solve: A X = B, B broadcast over the batch */
    const int64_t k = 3;
    fill(vc, n * k, 12);
    ts_tensor *X = ts_linalg_ldl_solve(LD, P, mk(TS_SHAPE(n, k), vc, dt, d), false);
    CHECK(is_shape(X, TS_SHAPE(B, n, k)) && ts_dtype_of(X) == dt && ts_device_of(X).type == d.type);
    if (rd(X, vd))
        for (int64_t b = 0; b < B; b++) {
            double ax[N * 3];
            mm(va + b * n * n, vd + b * n * k, ax, n, n, k);
            for (int64_t i = 0; i < n * k; i++) CHECK_NEAR(ax[i], vc[i], tol * 10);
        }
    /* a singular matrix: info > 0 (sytrf's), an error without info */
    ts_tensor *Z = mk(TS_SHAPE(3, 3), (double[9]){0}, dt, d);
    CHECK(ts_linalg_ldl_factor_ex(Z, false, NULL, &info) && info);
    int32_t zi = -1;
    CHECK(info && ts_copy_to_host(ts_to(info, ts_cpu()), &zi, sizeof zi) == TS_OK && zi == 1);
    CHECK(!ts_linalg_ldl_factor_ex(Z, false, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.ldl_factor: The factorization could not be completed");
    /* empty */
    CHECK(is_shape(ts_linalg_ldl_factor_ex(mk(TS_SHAPE(0, 2, 2), va, dt, d), false, &P, NULL),
                   TS_SHAPE(0, 2, 2)) &&
          is_shape(P, TS_SHAPE(0, 2)));
    CHECK_OK();
}

/* ------------------------------------------------------------------ ormqr */
/* Q (m x m) = H_1 ... H_k from geqrf's a (m x n) and tau, by hand */
static void q_of(const double *a, const double *tau, int64_t m, int64_t n, int64_t k, double *q) {
    double h[64], t[64];
    for (int64_t i = 0; i < m * m; i++) q[i] = i % (m + 1) == 0;
    for (int64_t r = 0; r < k; r++) {
        double v[8];
        for (int64_t i = 0; i < m; i++) v[i] = i < r ? 0 : i == r ? 1 : a[i * n + r];
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < m; j++) h[i * m + j] = (i == j) - tau[r] * v[i] * v[j];
        mm(q, h, t, m, m, m);
        memcpy(q, t, sizeof(double) * (size_t)(m * m));
    }
}

static void test_ormqr(ts_device d, ts_dtype dt) {
    const int64_t shapes[3][2] = {{5, 3}, {3, 5}, {4, 4}}, B = 2, p = 2;
    for (int s = 0; s < 3; s++) {
        const int64_t m = shapes[s][0], n = shapes[s][1], k = m < n ? m : n;
        const double tol = tol_of(dt, m) * 10;
        fill(va, B * m * n, 20 + s);
        ts_tensor *tau = NULL, *a = ts_geqrf(mk(TS_SHAPE(B, m, n), va, dt, d), &tau);
        double ah[2 * 25], th[2 * 5], q[25], qt[25], c[2 * 10], want[10];
        CHECK(rd(a, ah) && rd(tau, th));
        fill(vc, B * m * p, 30 + s);
        for (int lt = 0; lt < 4; lt++) {
            const bool left = lt & 1, tr = lt & 2;
            ts_tensor *C = mk(left ? TS_SHAPE(B, m, p) : TS_SHAPE(B, p, m), vc, dt, d);
            ts_tensor *Y = ts_ormqr(a, tau, C, left, tr);
            CHECK(is_shape(Y, left ? TS_SHAPE(B, m, p) : TS_SHAPE(B, p, m)) &&
                  ts_dtype_of(Y) == dt && ts_device_of(Y).type == d.type);
            if (!rd(Y, c)) continue;
            for (int64_t b = 0; b < B; b++) {
                q_of(ah + b * m * n, th + b * k, m, n, k, q);
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < m; j++)
                        qt[i * m + j] = tr ? q[j * m + i] : q[i * m + j];
                if (left)
                    mm(qt, vc + b * m * p, want, m, m, p);
                else
                    mm(vc + b * m * p, qt, want, p, m, m);
                for (int64_t i = 0; i < m * p; i++) CHECK_NEAR(c[b * m * p + i], want[i], tol);
            }
        }
        /* Q's first k columns are linalg.qr's Q */
        ts_tensor *R = NULL;
        ts_tensor *Q = ts_linalg_qr(mk(TS_SHAPE(B, m, n), va, dt, d), "reduced", &R);
        ts_tensor *I = ts_to(
            ts_to_dtype(ts_expand(ts_eye(m, k, (ts_opts){.dtype = TS_F64}), TS_SHAPE(B, m, k)), dt),
            d);
        double qa[50], qb[50];
        if (rd(ts_ormqr(a, tau, I, true, false), qa) && rd(Q, qb))
            for (int64_t i = 0; i < B * m * k; i++) CHECK_NEAR(qa[i], qb[i], tol);
    }
    /* no reflectors (an empty input): other itself, a new tensor */
    ts_tensor *e = mk(TS_SHAPE(0, 3), va, dt, d), *et = mk(TS_SHAPE(0), va, dt, d);
    ts_tensor *C = mk(TS_SHAPE(0, 2), va, dt, d);
    ts_tensor *Y = ts_ormqr(e, et, C, true, false);
    CHECK(is_shape(Y, TS_SHAPE(0, 2)) && Y != C);
    CHECK_OK();
}

static ts_tensor *g_ormqr(ts_tensor *const *x, int n, void *ctx) {
    (void)n;
    const int lt = (int)(intptr_t)ctx;
    return ts_ormqr(x[0], x[1], x[2], lt & 1, lt & 2);
}

static void test_grads(void) {
    for (int lt = 0; lt < 4; lt++)
        for (int s = 0; s < 2; s++) {
            ts_scope_begin();
            const int64_t m = s ? 3 : 4, n = s ? 4 : 3;
            fill(va, 2 * m * n, 40 + lt);
            fill(vc, 2 * m * 2, 50 + lt);
            ts_tensor *tau = NULL;
            ts_tensor *a =
                ts_geqrf(ts_tensor_f64(TS_SHAPE(2, m, n), va, (ts_opts){.dtype = TS_F64}), &tau);
            ts_tensor *C = ts_tensor_f64((lt & 1) ? TS_SHAPE(2, m, 2) : TS_SHAPE(2, 2, m), vc,
                                         (ts_opts){.dtype = TS_F64});
            ts_tensor *x[3] = {a, tau, C};
            for (int i = 0; i < 3; i++) ts_set_requires_grad(x[i], true);
            bool ok = ts_gradcheck(g_ormqr, (void *)(intptr_t)lt, x, 3,
                                   (ts_gradcheck_opts){.atol = 1e-6, .rtol = 1e-4});
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck ormqr %d %d%s", lt, s,
                              ts_test_error_str());
            ts_error_clear();
            ts_scope_end();
        }
}

/* ------------------------------------------------------------------ refusals */
static void test_errors(void) {
    ts_opts f64 = {.dtype = TS_F64};
    ts_tensor *A = ts_eye(3, 0, f64), *P = NULL;
    ts_tensor *LD = ts_linalg_ldl_factor_ex(A, false, &P, NULL);
    CHECK(LD && P);
    CHECK(!ts_linalg_ldl_factor_ex(ts_ones(TS_SHAPE(2, 3), f64), false, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "linalg.ldl_factor: A must be batches of square matrices");
    CHECK(!ts_linalg_ldl_factor_ex(ts_ones(TS_SHAPE(2, 2), (ts_opts){.dtype = TS_I64}), false, NULL,
                                   NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "linalg.ldl_factor: Expected a floating point");
    ts_tensor *B = ts_ones(TS_SHAPE(3, 2), f64);
    CHECK(!ts_linalg_ldl_solve(LD, ts_narrow(P, 0, 0, 2), B, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "linalg.ldl_solve: Expected LD.shape[:-1] and pivots.shape to be "
                                "the same, but got pivots with shape [2] instead");
    CHECK(!ts_linalg_ldl_solve(LD, P, ts_ones(TS_SHAPE(3, 2), (ts_opts){.dtype = TS_F32}), false));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "Expected b and A to have the same dtype");
    CHECK(!ts_linalg_ldl_solve(LD, P, ts_ones(TS_SHAPE(2, 2), f64), false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "Incompatible matrix sizes for torch.linalg.ldl_solve: each A "
                                "matrix is 3 by 3 but each b matrix is 2 by 2");
    CHECK(!ts_linalg_ldl_solve(LD, ts_zeros(TS_SHAPE(3), (ts_opts){.dtype = TS_I32}), B, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.ldl_solve: pivots[0] = 0 is not a valid sytrf pivot");
    CHECK(!ts_linalg_ldl_solve(LD, ts_full(TS_SHAPE(3), 4, (ts_opts){.dtype = TS_I32}), B, false));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(!ts_linalg_ldl_solve(LD, ts_ones(TS_SHAPE(3), f64), B, false));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "linalg.ldl_solve: Expected pivots to be integers");
    CHECK(!ts_linalg_ldl_solve(LD, ts_scalar(1, (ts_opts){.dtype = TS_I32}), B, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "linalg.ldl_solve: Expected LD.shape[:-1] and pivots.shape to be "
                                "the same, but got pivots with shape []");
    /* 1 x 1: LD = A and pivots [1] (sytrf's, as PyTorch's); [[0]]: info 1, pivots [1] */
    ts_tensor *P1 = NULL, *I1 = NULL;
    ts_tensor *LD1 = ts_linalg_ldl_factor_ex(ts_full(TS_SHAPE(1, 1), 3, f64), false, &P1, &I1);
    int32_t p1 = 0, i1 = -1;
    CHECK(LD1 && ts_item(LD1) == 3 && P1 && ts_copy_to_host(P1, &p1, sizeof p1) == TS_OK &&
          p1 == 1 && I1 && ts_copy_to_host(I1, &i1, sizeof i1) == TS_OK && i1 == 0);
    p1 = 0;
    LD1 = ts_linalg_ldl_factor_ex(ts_zeros(TS_SHAPE(1, 1), f64), false, &P1, &I1);
    CHECK(LD1 && ts_copy_to_host(P1, &p1, sizeof p1) == TS_OK && p1 == 1 &&
          ts_copy_to_host(I1, &i1, sizeof i1) == TS_OK && i1 == 1);
    /* singular without info: an error naming the first such matrix, and no outputs */
    P1 = A;
    CHECK(!ts_linalg_ldl_factor_ex(ts_zeros(TS_SHAPE(2, 2, 2), f64), false, &P1, NULL) && !P1);
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.ldl_factor: (Batch element 0): The factorization could not");
    CHECK(!ts_linalg_ldl_solve(LD, P, ts_ones(TS_SHAPE(3), f64), false)); /* B a vector */
    CHECK_ERR_HAS(TS_ERR_SHAPE,
                  "linalg.ldl_solve: The input tensor B must have at least 2 dimensions.");
    /* ormqr */
    ts_tensor *tau = NULL, *a = ts_geqrf(ts_ones(TS_SHAPE(5, 3), f64), &tau);
    CHECK(!ts_ormqr(a, NULL, ts_ones(TS_SHAPE(4, 2), f64), true, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "ormqr: tau is NULL");
    CHECK(!ts_ormqr(a, tau, ts_ones(TS_SHAPE(4, 2), f64), true, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "torch.ormqr: other.shape[-2] must be equal to input.shape[-2]");
    CHECK(!ts_ormqr(a, tau, ts_ones(TS_SHAPE(2, 4), f64), false, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "torch.ormqr: other.shape[-1] must be equal to input.shape[-2]");
    CHECK(!ts_ormqr(a, ts_narrow(tau, 0, 0, 2), ts_ones(TS_SHAPE(5, 2), f64), true, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "torch.ormqr: tau.shape[-1] must be equal to min(other.shape[-2], "
                                "input.shape[-1])");
    CHECK(!ts_ormqr(a, ts_unsqueeze(tau, 0), ts_ones(TS_SHAPE(5, 2), f64), true, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "Expected tau to have one dimension less than input");
    CHECK(!ts_ormqr(a, tau, ts_ones(TS_SHAPE(5, 2), (ts_opts){.dtype = TS_F32}), true, false));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "torch.ormqr: Expected input and other to have the same dtype");
    CHECK(!ts_ormqr(a, ts_to_dtype(tau, TS_F32), ts_ones(TS_SHAPE(5, 2), f64), true, false));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "torch.ormqr: Expected input and tau to have the same dtype");
    CHECK(!ts_ormqr(ts_expand(a, TS_SHAPE(2, 5, 3)), ts_expand(tau, TS_SHAPE(2, 3)),
                    ts_ones(TS_SHAPE(3, 5, 2), f64), true, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "Expected batch dimensions of other to be equal");
    CHECK(!ts_ormqr(ts_expand(a, TS_SHAPE(2, 5, 3)), ts_expand(tau, TS_SHAPE(3, 3)),
                    ts_ones(TS_SHAPE(2, 5, 2), f64), true, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE,
                  "torch.ormqr: Expected batch dimensions of tau to be equal to input.shape[:-2]");
    CHECK(!ts_ormqr(a, tau, ts_ones(TS_SHAPE(5), f64), true, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "torch.ormqr: other must have at least 2 dimensions.");
    if (ndev > 1) {
        CHECK(!ts_ormqr(a, tau, ts_to(ts_ones(TS_SHAPE(5, 2), f64), devs[1]), true, false));
        CHECK_ERR(TS_ERR_DEVICE);
        CHECK(!ts_linalg_ldl_solve(LD, P, ts_to(B, devs[1]), false));
        CHECK_ERR(TS_ERR_DEVICE);
    }
    CHECK_OK();
}

/* every allocation of ldl_factor failed in turn (LAPACK's pivot buffer among them): each one an
 * out-of-memory error and no result, never a factorization made without pivots */
static void test_alloc_failures(void) {
    const ts_opts f64 = {.dtype = TS_F64};
    for (int i = 0; i < 9; i++) vd[i] = i % 4 == 0 ? 4.0 : 0.5;
    ts_tensor *A = ts_tensor_f64(TS_SHAPE(3, 3), vd, f64);
    int64_t k = 1;
    for (; k < 200; k++) {
        ts_scope_begin();
        ts_tensor *P = NULL;
        ts_fault_alloc_set(k);
        ts_tensor *LD = ts_linalg_ldl_factor_ex(A, false, &P, NULL);
        const bool fired = ts_fault_alloc_fired();
        ts_fault_alloc_set(-1);
        if (!fired) {
            CHECK(LD && P);
            CHECK_OK();
            ts_scope_end();
            break;
        }
        CHECK(!LD && !P);
        CHECK_ERR(TS_ERR_OOM);
        ts_scope_end();
    }
    CHECK(k > 1 && k < 200);
    /* and of ldl_solve (LAPACK's pivot buffer among them) */
    ts_scope_begin();
    ts_tensor *P = NULL, *LD = ts_linalg_ldl_factor_ex(A, false, &P, NULL);
    ts_tensor *B = ts_ones(TS_SHAPE(3, 2), f64);
    CHECK(LD && P);
    for (k = 1; k < 200; k++) {
        ts_scope_begin();
        ts_fault_alloc_set(k);
        ts_tensor *X = ts_linalg_ldl_solve(LD, P, B, false);
        const bool fired = ts_fault_alloc_fired();
        ts_fault_alloc_set(-1);
        if (!fired) {
            CHECK(X != NULL);
            CHECK_OK();
            ts_scope_end();
            break;
        }
        CHECK(X == NULL);
        CHECK_ERR(TS_ERR_OOM);
        ts_scope_end();
    }
    CHECK(k > 1 && k < 200);
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int di = 0; di < ndev; di++)
        for (int t = 0; t < 2; t++) {
            const ts_dtype dt = t ? TS_F32 : TS_F64;
            ts_scope_begin();
            test_ldl(devs[di], dt);
            test_ormqr(devs[di], dt);
            ts_scope_end();
            CHECK_OK();
        }
    ts_scope_begin();
    test_grads();
    test_errors();
    test_alloc_failures();
    ts_scope_end();
    CHECK_OK();
    return ts_test_finish();
}
