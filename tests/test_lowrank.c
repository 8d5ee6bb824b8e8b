/* test_lowrank.c — torch.svd_lowrank / torch.pca_lowrank (src/ops/linalg_lowrank.c) on every
 * device in float32 and float64, on matrices of exact rank k = a b^T (a m x k, b n x k), where the
 * randomized algorithm is exact whatever its random draw: U diag(S) V^T equals A (A - M, A minus
 * its column means for pca) to rounding, S equals the k largest singular values of the full SVD,
 * U and V have orthonormal columns; tall, wide, batched, q above the rank and above min(m, n), a
 * broadcast M; one seed gives the same bits twice; ts_gradcheck in float64 of the quantities the
 * draw does not change (U V^T and S, as PyTorch's OpInfo); the refusals naming the op and the
 * argument. Float64 references are hand loops over host copies. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_values.h"
#include "tessera.h"
#include "tessera/linalg.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define MAXV 4096
static double ha[MAXV], hb[MAXV], hA[MAXV], hm[MAXV], hu[MAXV], hs[MAXV], hv[MAXV], hr[MAXV];

#define fill       ts_test_fill_uniform /* tests/support/host_values.h */
#define mk         ts_test_tensor_f64   /* tests/support/host_values.h */
#define rd(t, out) ts_test_read_f64(t, out, MAXV)
#define has_shape  ts_test_shape_is

/* A [batch, m, n] = a [batch, m, k] b[batch, n, k]^T, host */
static void low_rank(int64_t batch, int64_t m, int64_t n, int64_t k, int seed) {
    fill(ha, batch * m * k, seed);
    fill(hb, batch * n * k, seed + 100);
    for (int64_t z = 0; z < batch; z++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t l = 0; l < k; l++)
                    s += ha[(z * m + i) * k + l] * hb[(z * n + j) * k + l];
                hA[(z * m + i) * n + j] = s;
            }
}

/* checks U [batch, m, r], S [batch, r], V [batch, n, r] against the target T [batch, m, n]:
 * U diag(S) V^T = T, U^T U = I, V^T V = I (columns whose S is not ~0), S descending and equal
 * to T's leading singular values (ref: sv [batch, min(m, n)] from the full SVD) */
static void check_factors(const char *what, ts_tensor *U, ts_tensor *S, ts_tensor *V,
                          const double *T, const double *sv, int64_t batch, int64_t m, int64_t n,
                          int64_t r, int64_t rank, double tol) {
    const int64_t kk = m < n ? m : n;
    bool ok = has_shape(U, TS_SHAPE(batch, m, r)) && has_shape(S, TS_SHAPE(batch, r)) &&
              has_shape(V, TS_SHAPE(batch, n, r)) && rd(U, hu) && rd(S, hs) && rd(V, hv);
    CHECK(ok);
    if (!ok) {
        printf("  (%s)\n", what);
        return;
    }
    double scale = 0, err = 0, orth = 0, serr = 0;
    for (int64_t z = 0; z < batch; z++) {
        for (int64_t i = 0; i < m * n; i++) scale = fmax(scale, fabs(T[z * m * n + i]));
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t l = 0; l < r; l++)
                    s += hu[(z * m + i) * r + l] * hs[z * r + l] * hv[(z * n + j) * r + l];
                err = fmax(err, fabs(s - T[(z * m + i) * n + j]));
            }
        for (int64_t p = 0; p < r; p++) /* every column: U = Q Ub, V = Vh^T are orthonormal */
            for (int64_t q = 0; q < r; q++) {
                double su = 0, sv2 = 0;
                for (int64_t i = 0; i < m; i++)
                    su += hu[(z * m + i) * r + p] * hu[(z * m + i) * r + q];
                for (int64_t j = 0; j < n; j++)
                    sv2 += hv[(z * n + j) * r + p] * hv[(z * n + j) * r + q];
                orth = fmax(orth, fmax(fabs(su - (p == q)), fabs(sv2 - (p == q))));
            }
        for (int64_t l = 0; l < r; l++) {
            const double ref = l < kk && l < rank ? sv[z * kk + l] : 0.0;
            serr = fmax(serr, fabs(hs[z * r + l] - ref));
            if (l > 0 && hs[z * r + l] > hs[z * r + l - 1] + tol * scale) serr = INFINITY;
        }
    }
    const bool good =
        err <= tol * fmax(scale, 1.0) && orth <= tol * 10 && serr <= tol * fmax(sv[0], 1.0);
    CHECK(good);
    if (!good)
        printf("  (%s: |USV^T - T| %.3g, |Q^T Q - I| %.3g, |S - S_ref| %.3g, scale %.3g)\n", what,
               err, orth, serr, scale);
}

/* the full SVD's singular values of T [batch, m, n], float64 on the cpu */
static bool full_sv(const double *T, int64_t batch, int64_t m, int64_t n, double *out) {
    ts_tensor *t = ts_tensor_f64(TS_SHAPE(batch, m, n), T, (ts_opts){.dtype = TS_F64});
    return rd(ts_linalg_svdvals(t), out);
}

static void test_values(ts_device d, ts_dtype dt) {
    const double tol = dt == TS_F64 ? 1e-10 : 2e-4;
    static const struct {
        int64_t batch, m, n, k, q, niter;
    } cases[] = {
        {1, 7, 5, 2, 2, 2}, /* tall, q = rank */
        {2, 4, 9, 3, 3, 2}, /* wide: the algorithm runs on A^T */
        {3, 6, 6, 2, 4, 1}, /* q above the rank */
        {2, 5, 3, 2, 6, 0}, /* q above min(m, n): k = 3 columns; no subspace iterations */
    };
    static double sv[MAXV];
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int64_t B = cases[c].batch, m = cases[c].m, n = cases[c].n, k = cases[c].k;
        const int64_t q = cases[c].q, kk = m < n ? m : n, r = q < kk ? q : kk;
        low_rank(B, m, n, k, (int)c);
        CHECK(full_sv(hA, B, m, n, sv));
        ts_scope_begin();
        ts_tensor *A = mk(TS_SHAPE(B, m, n), hA, dt, d), *S = NULL, *V = NULL;
        ts_manual_seed(11);
        ts_tensor *U = ts_svd_lowrank(A, q, cases[c].niter, NULL, &S, &V);
        CHECK_OK();
        char what[96];
        snprintf(what, sizeof what, "svd_lowrank case %zu %s", c, dt == TS_F64 ? "f64" : "f32");
        check_factors(what, U, S, V, hA, sv, B, m, n, r, k, tol);
        /* the same seed: the same bits */
        ts_manual_seed(11);
        ts_tensor *S2 = NULL, *V2 = NULL,
                  *U2 = ts_svd_lowrank(A, q, cases[c].niter, NULL, &S2, &V2);
        CHECK(U2 && rd(U2, hr) && rd(U, hu) && memcmp(hr, hu, (size_t)(B * m * r) * 8) == 0);
        /* M: the factors of (A + M) - M; M [n] broadcast over the rows and the batch */
        fill(hm, n, 77 + (int)c);
        ts_tensor *M = mk(TS_SHAPE(n), hm, dt, d);
        ts_tensor *AM = ts_add(A, M), *SM = NULL, *VM = NULL;
        ts_tensor *UM = ts_svd_lowrank(AM, q, cases[c].niter, M, &SM, &VM);
        CHECK_OK();
        snprintf(what, sizeof what, "svd_lowrank M case %zu", c);
        check_factors(what, UM, SM, VM, hA, sv, B, m, n, r, k, tol * 4);
        /* pca_lowrank without centring: svd_lowrank's factors */
        ts_tensor *SP = NULL, *VP = NULL,
                  *UP = ts_pca_lowrank(A, r, false, cases[c].niter, &SP, &VP);
        CHECK_OK();
        snprintf(what, sizeof what, "pca_lowrank center=False case %zu", c);
        check_factors(what, UP, SP, VP, hA, sv, B, m, n, r, k, tol);
        ts_scope_end();
    }
    /* pca_lowrank centred: the factors of A minus its column means (rank <= k) */
    const int64_t B = 2, m = 8, n = 5, k = 2;
    low_rank(B, m, n, k, 5);
    for (int64_t z = 0; z < B; z++)
        for (int64_t j = 0; j < n; j++) { /* shift the columns so the centring matters */
            for (int64_t i = 0; i < m; i++) hA[(z * m + i) * n + j] += (double)(j + 1);
        }
    static double hc[MAXV];
    for (int64_t z = 0; z < B; z++)
        for (int64_t j = 0; j < n; j++) {
            double mean = 0;
            for (int64_t i = 0; i < m; i++) mean += hA[(z * m + i) * n + j];
            mean /= (double)m;
            for (int64_t i = 0; i < m; i++)
                hc[(z * m + i) * n + j] = hA[(z * m + i) * n + j] - mean;
        }
    CHECK(full_sv(hc, B, m, n, sv));
    ts_scope_begin();
    ts_tensor *A = mk(TS_SHAPE(B, m, n), hA, dt, d), *S = NULL, *V = NULL;
    /* q default: min(6, m, n) = 5 > the centred rank (its trailing S ~ 0 are checked as such) */
    ts_tensor *U = ts_pca_lowrank(A, TS_LOWRANK_Q_DEFAULT, true, 2, &S, &V);
    CHECK_OK();
    check_factors("pca_lowrank centred, q default", U, S, V, hc, sv, B, m, n, 5, k + 1, tol * 4);
    ts_scope_end();
}

/* M of A's whole matrix shape [m, n], m != n (not a broadcast row): the factors of (A + M) - M */
static void test_full_shape_m(void) {
    const int64_t m = 5, n = 4, k = 2;
    static double sv[MAXV];
    low_rank(1, m, n, k, 9);
    CHECK(full_sv(hA, 1, m, n, sv));
    fill(hm, m * n, 91);
    ts_scope_begin();
    ts_tensor *A = mk(TS_SHAPE(1, m, n), hA, TS_F64, ts_cpu());
    ts_tensor *M = mk(TS_SHAPE(m, n), hm, TS_F64, ts_cpu()), *S = NULL, *V = NULL;
    ts_tensor *U = ts_svd_lowrank(ts_add(A, M), k, 2, M, &S, &V);
    CHECK_OK();
    check_factors("svd_lowrank M [5, 4]", U, S, V, hA, sv, 1, m, n, k, k, 4e-10);
    ts_scope_end();
}

/* columns of the row-major rows x cols matrix X made orthonormal (modified Gram-Schmidt) */
static void mgs(double *X, int64_t rows, int64_t cols) {
    for (int64_t c = 0; c < cols; c++) {
        for (int64_t p = 0; p < c; p++) {
            double d = 0;
            for (int64_t i = 0; i < rows; i++) d += X[i * cols + p] * X[i * cols + c];
            for (int64_t i = 0; i < rows; i++) X[i * cols + c] -= d * X[i * cols + p];
        }
        double nrm = 0;
        for (int64_t i = 0; i < rows; i++) nrm += X[i * cols + c] * X[i * cols + c];
        nrm = sqrt(nrm);
        for (int64_t i = 0; i < rows; i++) X[i * cols + c] /= nrm;
    }
}

/* the number of subspace iterations: for A of full rank, U diag(S) V^T is the projection
 * Q Q^T A onto the span that exactly niter iterations from the seeded draw R [n, q] reach
 * (Q = orth(A R); niter times Q = orth(A orth(A^T Q))), computed here on the host; one
 * iteration more or less gives another span */
static void test_niter_span(void) {
    enum { m = 7, n = 5, q = 2 };
    const ts_opts f64 = {.dtype = TS_F64};
    double a[m * n], r[n * q], y[m * q], z[n * q], u[m * q], s[q], v[n * q];
    fill(a, m * n, 123);
    for (int64_t niter = 0; niter <= 3; niter++) {
        ts_scope_begin();
        ts_manual_seed(21);
        CHECK(ts_test_read_f64(ts_randn(TS_SHAPE(n, q), f64), r, n * q));
        ts_manual_seed(21);
        ts_tensor *A = mk(TS_SHAPE(m, n), a, TS_F64, ts_cpu()), *S = NULL, *V = NULL;
        ts_tensor *U = ts_svd_lowrank(A, q, niter, NULL, &S, &V);
        bool ok = ts_test_read_f64(U, u, m * q) && ts_test_read_f64(S, s, q) &&
                  ts_test_read_f64(V, v, n * q);
        CHECK(ok);
        ts_scope_end();
        if (!ok) continue;
        for (int64_t i = 0; i < m; i++) /* y = A r */
            for (int64_t c = 0; c < q; c++) {
                y[i * q + c] = 0;
                for (int64_t l = 0; l < n; l++) y[i * q + c] += a[i * n + l] * r[l * q + c];
            }
        mgs(y, m, q);
        for (int64_t it = 0; it < niter; it++) {
            for (int64_t j = 0; j < n; j++) /* z = A^T y */
                for (int64_t c = 0; c < q; c++) {
                    z[j * q + c] = 0;
                    for (int64_t i = 0; i < m; i++) z[j * q + c] += a[i * n + j] * y[i * q + c];
                }
            mgs(z, n, q);
            for (int64_t i = 0; i < m; i++) /* y = A z */
                for (int64_t c = 0; c < q; c++) {
                    y[i * q + c] = 0;
                    for (int64_t l = 0; l < n; l++) y[i * q + c] += a[i * n + l] * z[l * q + c];
                }
            mgs(y, m, q);
        }
        double err = 0, scale = 0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double proj = 0, got = 0; /* (y y^T a)_ij and (U diag(S) V^T)_ij */
                for (int64_t c = 0; c < q; c++) {
                    double yta = 0;
                    for (int64_t l = 0; l < m; l++) yta += y[l * q + c] * a[l * n + j];
                    proj += y[i * q + c] * yta;
                    got += u[i * q + c] * s[c] * v[j * q + c];
                }
                err = fmax(err, fabs(got - proj));
                scale = fmax(scale, fabs(a[i * n + j]));
            }
        CHECK(err <= 1e-10 * scale);
        if (err > 1e-10 * scale)
            printf("  (svd_lowrank niter %lld: |U S V^T - Q Q^T A| %.3g, scale %.3g)\n",
                   (long long)niter, err, scale);
    }
}

/* ---------------------------------------------------------------- gradients */
typedef struct {
    int64_t q;
    int mode; /* 0 svd_lowrank, 1 svd_lowrank with M, 2 pca_lowrank centred */
} gctx;

/* what the draw does not change: [U V^T flattened, S] of a b^T (+ M, then M passed) */
static ts_tensor *lowrank_f(ts_tensor *const *x, int n, void *vctx) {
    const gctx *c = vctx;
    ts_manual_seed(3);
    ts_tensor *A = ts_matmul(x[0], ts_transpose(x[1], -2, -1)), *S = NULL, *V = NULL, *U;
    if (c->mode == 1) A = ts_add(A, x[2]);
    if (c->mode == 2)
        U = ts_pca_lowrank(A, c->q, true, 2, &S, &V);
    else
        U = ts_svd_lowrank(A, c->q, 2, c->mode == 1 ? x[2] : NULL, &S, &V);
    (void)n;
    if (!U) return NULL;
    ts_tensor *P = ts_matmul(U, ts_transpose(V, -2, -1));
    ts_tensor *parts[2] = {ts_flatten(P, 0, -1), ts_flatten(S, 0, -1)};
    return ts_cat(parts, 2, 0);
}

static void test_grads(void) {
    static const struct {
        const char *name;
        int64_t batch, m, n, k;
        int mode;
    } cases[] = {{"svd_lowrank tall", 1, 5, 4, 2, 0},
                 {"svd_lowrank wide batched", 2, 3, 5, 2, 0},
                 {"svd_lowrank M", 1, 5, 4, 2, 1},
                 {"pca_lowrank center", 1, 6, 4, 2, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int64_t B = cases[c].batch, m = cases[c].m, n = cases[c].n, k = cases[c].k;
        ts_scope_begin();
        fill(ha, B * m * k, 40 + (int)c);
        fill(hb, B * n * k, 50 + (int)c);
        fill(hm, B * m * n, 60 + (int)c);
        ts_tensor *x[3] = {mk(TS_SHAPE(B, m, k), ha, TS_F64, ts_cpu()),
                           mk(TS_SHAPE(B, n, k), hb, TS_F64, ts_cpu()),
                           mk(TS_SHAPE(B, m, n), hm, TS_F64, ts_cpu())};
        const int nx = cases[c].mode == 1 ? 3 : 2;
        for (int i = 0; i < nx; i++) ts_set_requires_grad(x[i], true);
        gctx g = {.q = k, .mode = cases[c].mode};
        bool ok =
            ts_gradcheck(lowrank_f, &g, x, nx, (ts_gradcheck_opts){.atol = 1e-6, .rtol = 1e-4});
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "gradcheck %s%s", cases[c].name, ts_test_error_str());
        ts_error_clear();
        ts_scope_end();
    }
}

/* ---------------------------------------------------------------- refusals */
static void test_errors(void) {
    ts_scope_begin();
    ts_tensor *A = ts_randn(TS_SHAPE(5, 4), (ts_opts){0}), *S = A, *V = A;
    CHECK(!ts_svd_lowrank(A, -2, 2, NULL, &S, &V) && !S && !V); /* cleared on failure */
    CHECK_ERR_HAS(TS_ERR_ARG, "svd_lowrank: q(=-2)");
    S = A, V = A;
    CHECK(!ts_pca_lowrank(A, -2, true, 2, &S, &V) && !S && !V);
    CHECK_ERR_HAS(TS_ERR_ARG, "pca_lowrank: q(=-2)");
    CHECK(has_shape(ts_svd_lowrank(A, 2, 1, NULL, NULL, NULL), TS_SHAPE(5, 2))); /* U alone */
    CHECK(has_shape(ts_pca_lowrank(A, 2, true, 1, NULL, NULL), TS_SHAPE(5, 2)));
    CHECK_OK();
    /* q default for svd_lowrank: 6 (PyTorch's), below min(m, n) = 8 here */
    CHECK(has_shape(ts_svd_lowrank(ts_randn(TS_SHAPE(9, 8), (ts_opts){0}), TS_LOWRANK_Q_DEFAULT, 1,
                                   NULL, NULL, NULL),
                    TS_SHAPE(9, 6)));
    CHECK_OK();
    CHECK(!ts_svd_lowrank(A, 2, -1, NULL, &S, &V));
    CHECK_ERR_HAS(TS_ERR_ARG, "svd_lowrank: niter(=-1)");
    CHECK(!ts_pca_lowrank(A, 5, true, 2, &S, &V));
    CHECK_ERR_HAS(TS_ERR_ARG, "pca_lowrank: q(=5) must be non-negative integer and not greater "
                              "than min(m, n)=4");
    CHECK(!ts_pca_lowrank(A, 2, true, -3, &S, &V));
    CHECK_ERR_HAS(TS_ERR_ARG, "pca_lowrank: niter(=-3)");
    CHECK(!ts_svd_lowrank(ts_randn(TS_SHAPE(5), (ts_opts){0}), 2, 2, NULL, &S, &V));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "svd_lowrank: The input tensor A must have at least 2 dimensions");
    CHECK(
        !ts_svd_lowrank(ts_zeros(TS_SHAPE(3, 3), (ts_opts){.dtype = TS_I64}), 2, 2, NULL, &S, &V));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "svd_lowrank");
    CHECK(!ts_svd_lowrank(A, 2, 2, ts_randn(TS_SHAPE(3), (ts_opts){0}), &S, &V));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "svd_lowrank: M of shape");
    CHECK(!ts_svd_lowrank(A, 2, 2, ts_randn(TS_SHAPE(4), (ts_opts){.dtype = TS_F64}), &S, &V));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "svd_lowrank: M must have A's dtype");
    if (ndev > 1) {
        CHECK(
            !ts_svd_lowrank(A, 2, 2, ts_to(ts_randn(TS_SHAPE(4), (ts_opts){0}), devs[1]), &S, &V));
        CHECK_ERR(TS_ERR_DEVICE);
    }
    /* q = 0: empty factors, as PyTorch's */
    ts_tensor *U = ts_svd_lowrank(A, 0, 2, NULL, &S, &V);
    CHECK(has_shape(U, TS_SHAPE(5, 0)) && has_shape(S, TS_SHAPE(0)) &&
          has_shape(V, TS_SHAPE(4, 0)));
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int di = 0; di < ndev; di++)
        for (int t = 0; t < 2; t++) {
            ts_scope_begin();
            test_values(devs[di], t ? TS_F32 : TS_F64);
            ts_scope_end();
            CHECK_OK();
        }
    ts_scope_begin();
    test_grads();
    test_errors();
    test_full_shape_m();
    test_niter_span();
    ts_scope_end();
    CHECK_OK();
    return ts_test_finish();
}
