/* test_linalg_native.c — the dtype-native LAPACK paths of torch.linalg (src/ops/linalg_native.c,
 * decision 0024): inv, solve, det / slogdet, cholesky and svd in float32 (LAPACK's s routines) and
 * float64 on every device, at sizes that take each route (single matrices, threaded batches of
 * small ones, the own LU of determinants up to 16 x 16, LAPACK's above), on non-symmetric
 * matrices (the column-major views transpose), against float64 references with tolerances from
 * the dtype's epsilon: the defining identities, the float32 result against the float64 one of the
 * same (float32-rounded) input, and the singular-matrix infos of the matrix itself (not of its
 * transpose); batches of 0 x 0 matrices (every info 0), and an allocation-failure sweep over every
 * route (fault_sweep.h: out-of-memory errors that say so). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_sweep.h"
#include "host_values.h"
#include "tessera.h"
#include "tessera/linalg.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define MAXV (160 * 160 * 2)
static double va[MAXV], vb[MAXV], g1[MAXV], g2[MAXV], g3[MAXV];

static double eps_of(ts_dtype dt) { return dt == TS_F32 ? 0x1p-24 : 0x1p-53; }

/* uniform in [-1, 1) from a seeded linear congruential generator */
#define fill ts_test_fill_uniform /* tests/support/host_values.h */
/* non-symmetric, well conditioned: uniform entries plus 2 sqrt(n) on the diagonal, the rows of
 * every other matrix in reverse order (so that partial pivoting swaps rows) */
static void fill_mats(double *v, int64_t batch, int64_t n, int seed) {
    fill(v, batch * n * n, seed);
    for (int64_t b = 0; b < batch; b++) {
        double *m = v + b * n * n;
        for (int64_t i = 0; i < n; i++) m[i * n + i] += 2.0 * sqrt((double)n);
        for (int64_t i = 0; b % 2 && i < n / 2; i++)
            for (int64_t j = 0; j < n; j++) {
                const double t = m[i * n + j];
                m[i * n + j] = m[(n - 1 - i) * n + j], m[(n - 1 - i) * n + j] = t;
            }
    }
}
#define mk         ts_test_tensor_f64 /* tests/support/host_values.h */
#define rd(t, out) ts_test_read_f64(t, out, MAXV)
static bool same_shape(ts_tensor *t, ts_shape s) {
    if (!t) return false;
    const ts_shape g = ts_shape_of(t);
    bool ok = g.ndim == s.ndim;
    for (int k = 0; ok && k < s.ndim; k++) ok = g.dims[k] == s.dims[k];
    return ok;
}
static void mm(const double *a, const double *b, double *c, int64_t m, int64_t k, int64_t n) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t l = 0; l < k; l++) s += a[i * k + l] * b[l * n + j];
            c[i * n + j] = s;
        }
}
static double max_abs(const double *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}
static double max_diff(const double *a, const double *b, int64_t n) {
    double d = 0;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i]));
    return d;
}
/* sign and log|det| by hand elimination with partial pivoting in double */
static void slogdet_ref(const double *a0, int64_t n, double *sign, double *logabs) {
    static double a[160 * 160];
    memcpy(a, a0, sizeof(double) * (size_t)(n * n));
    double s = 1, l = 0;
    for (int64_t c = 0; c < n; c++) {
        int64_t p = c;
        for (int64_t r = c + 1; r < n; r++)
            if (fabs(a[r * n + c]) > fabs(a[p * n + c])) p = r;
        if (a[p * n + c] == 0) {
            *sign = 0, *logabs = -INFINITY;
            return;
        }
        if (p != c) {
            for (int64_t j = 0; j < n; j++) {
                const double t = a[c * n + j];
                a[c * n + j] = a[p * n + j], a[p * n + j] = t;
            }
            s = -s;
        }
        if (a[c * n + c] < 0) s = -s;
        l += log(fabs(a[c * n + c]));
        for (int64_t r = c + 1; r < n; r++) {
            const double f = a[r * n + c] / a[c * n + c];
            for (int64_t j = c; j < n; j++) a[r * n + j] -= f * a[c * n + j];
        }
    }
    *sign = s, *logabs = l;
}

/* the batch sizes and orders that take each route: one matrix (LAPACK), a threaded batch of
 * LAPACK's, our own LU up to 16 x 16 (a threaded batch, a few 1 x 1) */
#define NLU 4
static const int64_t lu_cases[NLU][2] = {{1, 40}, {8, 20}, {64, 12}, {3, 1}};

/* ------------------------------------------------------------------ inv */
static void test_inv(ts_device d, ts_dtype dt) {
    for (int c = 0; c < NLU; c++) {
        const int64_t B = lu_cases[c][0], n = lu_cases[c][1];
        const double tol = 64.0 * (double)n * eps_of(dt);
        fill_mats(va, B, n, 10 + c);
        ts_tensor *A = mk(TS_SHAPE(B, n, n), va, dt, d);
        ts_tensor *X = ts_linalg_inv(A);
        CHECK(same_shape(X, TS_SHAPE(B, n, n)) && ts_dtype_of(X) == dt);
        ts_tensor *X64 = ts_linalg_inv(ts_to_dtype(A, TS_F64)); /* same input, float64 */
        if (!rd(X, g1) || !rd(A, va) || !rd(X64, g3)) {
            CHECK(false);
            continue;
        }
        for (int64_t b = 0; b < B; b++) { /* A X = I */
            mm(va + b * n * n, g1 + b * n * n, g2, n, n, n);
            for (int64_t i = 0; i < n; i++) g2[i * n + i] -= 1.0;
            CHECK(max_abs(g2, n * n) < tol);
        }
        CHECK(max_diff(g1, g3, B * n * n) < tol * max_abs(g3, B * n * n));
    }
    /* a transposed (non-contiguous) operand: inv(A^T) = inv(A)^T */
    const int64_t n = 9;
    fill_mats(va, 1, n, 3);
    ts_tensor *A = mk(TS_SHAPE(n, n), va, dt, d);
    ts_tensor *Xt = ts_linalg_inv(ts_transpose(A, 0, 1)), *X = ts_linalg_inv(A);
    CHECK(rd(Xt, g1) && rd(ts_transpose(X, 0, 1), g2));
    CHECK(max_diff(g1, g2, n * n) < 64.0 * (double)n * eps_of(dt) * max_abs(g2, n * n));
    CHECK_OK();
}

/* ------------------------------------------------------------------ solve */
static void test_solve(ts_device d, ts_dtype dt) {
    static const int64_t ks[] = {1, 5};
    for (int c = 0; c < NLU; c++)
        for (int ki = 0; ki < 2; ki++) {
            const int64_t B = lu_cases[c][0], n = lu_cases[c][1], k = ks[ki];
            const double tol = 64.0 * (double)n * eps_of(dt);
            fill_mats(va, B, n, 20 + c);
            fill(vb, B * n * k, 30 + c);
            ts_tensor *A = mk(TS_SHAPE(B, n, n), va, dt, d);
            ts_tensor *Bm = mk(TS_SHAPE(B, n, k), vb, dt, d);
            ts_tensor *X = ts_linalg_solve(A, Bm, true);
            ts_tensor *X64 = ts_linalg_solve(ts_to_dtype(A, TS_F64), ts_to_dtype(Bm, TS_F64), true);
            CHECK(same_shape(X, TS_SHAPE(B, n, k)) && ts_dtype_of(X) == dt);
            if (!rd(X, g1) || !rd(A, va) || !rd(Bm, vb) || !rd(X64, g3)) {
                CHECK(false);
                continue;
            }
            for (int64_t b = 0; b < B; b++) { /* A X = B */
                mm(va + b * n * n, g1 + b * n * k, g2, n, n, k);
                CHECK(max_diff(g2, vb + b * n * k, n * k) < tol * (1 + max_abs(vb, B * n * k)));
            }
            CHECK(max_diff(g1, g3, B * n * k) < tol * max_abs(g3, B * n * k));
            /* X A = B (right), through A^T */
            ts_tensor *Br = mk(TS_SHAPE(B, k, n), vb, dt, d);
            ts_tensor *Xr = ts_linalg_solve(A, Br, false);
            if (!rd(Xr, g1) || !rd(Br, vb)) {
                CHECK(false);
                continue;
            }
            for (int64_t b = 0; b < B; b++) {
                mm(g1 + b * k * n, va + b * n * n, g2, k, n, n);
                CHECK(max_diff(g2, vb + b * k * n, n * k) < tol * (1 + max_abs(vb, B * n * k)));
            }
        }
    CHECK_OK();
}

/* ------------------------------------------------------------------ det, slogdet */
static void test_det(ts_device d, ts_dtype dt) {
    /* own LU (n <= 16: threaded batch, one matrix, n = 16), LAPACK (threaded batch, one large) */
    static const int64_t cases[][2] = {{200, 8}, {1, 5}, {7, 16}, {12, 24}, {1, 150}};
    for (int c = 0; c < 5; c++) {
        const int64_t B = cases[c][0], n = cases[c][1];
        fill_mats(va, B, n, 40 + c);
        for (int64_t b = 0; b < B; b += 2) /* every other matrix: rows 0 and 1 swapped */
            for (int64_t j = 0; j < n && n > 1; j++) {
                const double t = va[(b * n) * n + j];
                va[(b * n) * n + j] = va[(b * n + 1) * n + j], va[(b * n + 1) * n + j] = t;
            }
        ts_tensor *A = mk(TS_SHAPE(B, n, n), va, dt, d);
        ts_tensor *la = NULL, *sg = ts_linalg_slogdet(A, &la);
        ts_tensor *D = n <= 24 ? ts_linalg_det(A) : NULL;
        CHECK(same_shape(sg, TS_SHAPE(B)) && same_shape(la, TS_SHAPE(B)));
        if (!rd(A, va) || !rd(sg, g1) || !rd(la, g2) || (D && !rd(D, g3))) {
            CHECK(false);
            continue;
        }
        /* log|det|: a relative error of n eps per pivot, summed */
        const double tol = 64.0 * (double)(n * n) * eps_of(dt);
        for (int64_t b = 0; b < B; b++) {
            double s, l;
            slogdet_ref(va + b * n * n, n, &s, &l);
            CHECK(g1[b] == s);
            CHECK(fabs(g2[b] - l) < tol);
            if (D) CHECK(fabs(g3[b] - s * exp(l)) < tol * exp(l));
        }
    }
    /* singular: an exact zero from the own LU and from LAPACK's */
    for (int c = 0; c < 2; c++) {
        const int64_t n = c ? 20 : 6;
        fill_mats(va, 1, n, 50);
        for (int64_t j = 0; j < n; j++) va[3 * n + j] = 2.0 * va[1 * n + j]; /* row 3 = 2 row 1 */
        ts_tensor *D = ts_linalg_det(mk(TS_SHAPE(n, n), va, dt, d));
        CHECK(D && fabs(ts_item(D)) < 64.0 * (double)n * eps_of(dt) * pow(2 * sqrt(n), n));
    }
    CHECK_OK();
}

/* ------------------------------------------------------------------ cholesky */
static void test_cholesky(ts_device d, ts_dtype dt) {
    static const int64_t cases[][2] = {{1, 30}, {50, 10}, {2, 1}};
    for (int c = 0; c < 3; c++) {
        const int64_t B = cases[c][0], n = cases[c][1];
        const double tol = 64.0 * (double)n * eps_of(dt);
        /* M M^T + n I in the lower triangle; the strict upper triangle is junk (not read) */
        fill(vb, B * n * n, 60 + c);
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < n; j++) {
                    double s = i == j ? (double)n : 0.0;
                    for (int64_t l = 0; l < n; l++)
                        s += vb[(b * n + i) * n + l] * vb[(b * n + j) * n + l];
                    va[(b * n + i) * n + j] = j <= i ? s : 1000.0 + (double)(i - j);
                }
        ts_tensor *A = mk(TS_SHAPE(B, n, n), va, dt, d);
        ts_tensor *L = ts_linalg_cholesky(A, false), *U = ts_linalg_cholesky(A, true);
        ts_tensor *L64 = ts_linalg_cholesky(ts_to_dtype(A, TS_F64), false);
        CHECK(same_shape(L, TS_SHAPE(B, n, n)) && ts_dtype_of(L) == dt);
        if (!rd(A, va) || !rd(L, g1) || !rd(U, g2) || !rd(L64, g3)) {
            CHECK(false);
            continue;
        }
        for (int64_t b = 0; b < B; b++) {
            const double *l = g1 + b * n * n;
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < n; j++) {
                    if (j > i) CHECK(l[i * n + j] == 0);
                    CHECK(g2[b * n * n + j * n + i] == l[i * n + j]); /* U = L^T */
                    if (j <= i) { /* (L L^T)_ij = A_ij from the lower triangle */
                        double s = 0;
                        for (int64_t q = 0; q <= j; q++) s += l[i * n + q] * l[j * n + q];
                        CHECK(fabs(s - va[(b * n + i) * n + j]) < tol * 4.0 * (double)n);
                    }
                }
        }
        CHECK(max_diff(g1, g3, B * n * n) < tol * max_abs(g3, B * n * n));
    }
    /* not positive-definite at order 2 of the lower triangle, whatever the upper one holds */
    double np[9] = {4, -7, 9, 2, 1, 3, 0, 0, 1};
    ts_tensor *info = NULL;
    CHECK(ts_linalg_cholesky_ex(mk(TS_SHAPE(3, 3), np, dt, d), false, &info));
    CHECK(info && ts_item(info) == 2);
    CHECK_OK();
}

/* ------------------------------------------------------------------ svd */
static void test_svd(ts_device d, ts_dtype dt) {
    static const int64_t cases[][3] = {{1, 7, 19}, {1, 19, 7}, {40, 6, 4}, {1, 24, 24}};
    for (int c = 0; c < 4; c++)
        for (int full = 0; full < 2; full++) {
            const int64_t B = cases[c][0], m = cases[c][1], n = cases[c][2], k = m < n ? m : n;
            const int64_t ku = full ? m : k, kv = full ? n : k;
            const double tol = 64.0 * (double)(m + n) * eps_of(dt);
            fill(va, B * m * n, 70 + c);
            ts_tensor *A = mk(TS_SHAPE(B, m, n), va, dt, d);
            ts_tensor *S = NULL, *Vh = NULL, *U = ts_linalg_svd(A, full, &S, &Vh);
            ts_tensor *S64 = ts_linalg_svdvals(ts_to_dtype(A, TS_F64));
            ts_tensor *Sv = ts_linalg_svdvals(A);
            CHECK(same_shape(U, TS_SHAPE(B, m, ku)) && same_shape(S, TS_SHAPE(B, k)) &&
                  same_shape(Vh, TS_SHAPE(B, kv, n)) && ts_dtype_of(U) == dt);
            static double u[MAXV], vh[MAXV], s[4096], s64[4096], sv[4096];
            if (!rd(A, va) || !rd(U, u) || !rd(S, s) || !rd(Vh, vh) || !rd(S64, s64) ||
                !rd(Sv, sv)) {
                CHECK(false);
                continue;
            }
            for (int64_t b = 0; b < B; b++) {
                const double *ub = u + b * m * ku, *vb2 = vh + b * kv * n, *sb = s + b * k;
                double err = 0;
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        double acc = 0;
                        for (int64_t l = 0; l < k; l++)
                            acc += ub[i * ku + l] * sb[l] * vb2[l * n + j];
                        err = fmax(err, fabs(acc - va[(b * m + i) * n + j]));
                    }
                CHECK(err < tol * sb[0]);
                for (int64_t i = 0; i < ku; i++) /* U's columns orthonormal */
                    for (int64_t j = 0; j < ku; j++) {
                        double acc = 0;
                        for (int64_t l = 0; l < m; l++) acc += ub[l * ku + i] * ub[l * ku + j];
                        CHECK(fabs(acc - (i == j)) < tol);
                    }
                for (int64_t i = 0; i < kv; i++) /* Vh's rows orthonormal */
                    for (int64_t j = 0; j < kv; j++) {
                        double acc = 0;
                        for (int64_t l = 0; l < n; l++) acc += vb2[i * n + l] * vb2[j * n + l];
                        CHECK(fabs(acc - (i == j)) < tol);
                    }
                for (int64_t l = 1; l < k; l++) CHECK(sb[l - 1] >= sb[l] && sb[l] >= 0);
                /* the float32 singular values against float64's: absolute error eps |A| */
                CHECK(max_diff(sb, s64 + b * k, k) < tol * s64[b * k]);
                CHECK(max_diff(sv + b * k, sb, k) <= tol * s64[b * k]);
            }
        }
    CHECK_OK();
}

/* ------------------------------------------------------------------ singular infos */
static void check_singular(ts_device d, ts_dtype dt, const double *a, int64_t n, double want) {
    ts_tensor *A = mk(TS_SHAPE(n, n), a, dt, d), *info = NULL;
    CHECK(ts_linalg_inv_ex(A, &info) && info && ts_item(info) == want);
    info = NULL;
    CHECK(ts_linalg_solve_ex(A, ts_ones(TS_SHAPE(n, 1), (ts_opts){.dtype = dt, .device = d}), true,
                             &info) &&
          info && ts_item(info) == want);
    char msg[96];
    snprintf(msg, sizeof msg, "The diagonal element %d is zero", (int)want);
    CHECK(!ts_linalg_inv(A));
    CHECK_ERR_HAS(TS_ERR_ARG, msg);
    CHECK(!ts_linalg_solve(A, ts_ones(TS_SHAPE(n), (ts_opts){.dtype = dt, .device = d}), true));
    CHECK_ERR_HAS(TS_ERR_ARG, "The solver failed because the input matrix is singular.");
}

static void test_singular(ts_device d, ts_dtype dt) {
    /* A = [[0, 0], [1, 1]]: A's LU has U[2,2] = 0 (info 2), A^T's U[1,1] = 0 (info 1) */
    const double a[4] = {0, 0, 1, 1}, at[4] = {0, 1, 0, 1};
    check_singular(d, dt, a, 2, 2);
    check_singular(d, dt, at, 2, 1);
    /* a zero first row: U[n,n] = 0 (info n); a zero first column: info 1 (own LU, LAPACK) */
    for (int c = 0; c < 2; c++) {
        const int64_t n = c ? 20 : 6;
        fill_mats(va, 1, n, 81 + c);
        for (int64_t j = 0; j < n; j++) va[j] = 0;
        check_singular(d, dt, va, n, (double)n);
        fill_mats(va, 1, n, 81 + c);
        for (int64_t j = 0; j < n; j++) va[j * n] = 0;
        check_singular(d, dt, va, n, 1);
    }
    /* in threaded batches (own LU, LAPACK): the first singular matrix is named */
    for (int c = 0; c < 2; c++) {
        const int64_t B = c ? 6 : 64, n = c ? 20 : 12, bad = c ? 3 : 37;
        fill_mats(va, B, n, 80);
        for (int64_t j = 0; j < n; j++) va[(bad * n + 5) * n + j] = 0; /* a zero row */
        ts_tensor *A = mk(TS_SHAPE(B, n, n), va, dt, d);
        char msg[96];
        snprintf(msg, sizeof msg, "(Batch element %d): The diagonal element", (int)bad);
        CHECK(!ts_linalg_inv(A));
        CHECK_ERR_HAS(TS_ERR_ARG, msg);
        ts_tensor *info = NULL;
        CHECK(ts_linalg_inv_ex(A, &info) && rd(info, g1));
        for (int64_t b = 0; b < B; b++) CHECK((g1[b] != 0) == (b == bad));
    }
    CHECK_OK();
}

/* ------------------------------------------------------------------ empty matrices */
/* a batch of 0 x 0 matrices: nothing is factorised and every info is 0 (the info arrays are set
 * before the early return, not left as malloc gave them), so the plain ops succeed */
static void test_empty(ts_device d, ts_dtype dt) {
    const ts_opts o = {.dtype = dt, .device = d};
    ts_tensor *A = ts_zeros(TS_SHAPE(5, 0, 0), o), *info = NULL;
    ts_tensor *L = ts_linalg_cholesky_ex(A, false, &info);
    CHECK(same_shape(L, TS_SHAPE(5, 0, 0)) && same_shape(info, TS_SHAPE(5)) && rd(info, g1));
    for (int b = 0; b < 5; b++) CHECK(g1[b] == 0);
    CHECK(same_shape(ts_linalg_cholesky(A, true), TS_SHAPE(5, 0, 0)));
    info = NULL;
    ts_tensor *X = ts_linalg_inv_ex(A, &info);
    CHECK(same_shape(X, TS_SHAPE(5, 0, 0)) && same_shape(info, TS_SHAPE(5)) && rd(info, g1));
    for (int b = 0; b < 5; b++) CHECK(g1[b] == 0);
    CHECK(same_shape(ts_linalg_inv(A), TS_SHAPE(5, 0, 0)));
    info = NULL;
    X = ts_linalg_solve_ex(A, ts_zeros(TS_SHAPE(5, 0, 3), o), true, &info);
    CHECK(same_shape(X, TS_SHAPE(5, 0, 3)) && same_shape(info, TS_SHAPE(5)) && rd(info, g1));
    for (int b = 0; b < 5; b++) CHECK(g1[b] == 0);
    CHECK(same_shape(ts_linalg_solve(A, ts_zeros(TS_SHAPE(5, 0, 2), o), true), TS_SHAPE(5, 0, 2)));
    CHECK(rd(ts_linalg_det(A), g1)); /* the empty product */
    for (int b = 0; b < 5; b++) CHECK(g1[b] == 1);
    /* no columns on the right-hand side: the own LU's buffer of n * k = 0 values */
    fill_mats(va, 2, 4, 5);
    X = ts_linalg_solve(mk(TS_SHAPE(2, 4, 4), va, dt, d), ts_zeros(TS_SHAPE(2, 4, 0), o), true);
    CHECK(same_shape(X, TS_SHAPE(2, 4, 0)));
    CHECK_OK();
}

/* ------------------------------------------------------------------ allocation failures */
/* Every allocation of inv, solve, det, cholesky and svd failed in turn (fault_sweep.h): on
 * transposed operands (tsl_nat_read copies them), through the own LU (n <= 16) and LAPACK's (20),
 * one matrix and a threaded batch. A failure is an out-of-memory error that says so ("out of ...
 * memory", not a LAPACK failure code), leaks nothing, and the ops succeed once it is cleared. */
typedef struct lin_st {
    ts_dtype dt;
    ts_tensor *a6, *a20, *b20, *batch, *spd;
    char msg[512];
} lin_st;

static ts_dtype sweep_dt;

static void *lin_setup(void) {
    lin_st *s = calloc(1, sizeof *s);
    s->dt = sweep_dt;
    ts_scope_begin();
    fill_mats(va, 1, 6, 90);
    s->a6 = ts_keep(mk(TS_SHAPE(6, 6), va, s->dt, ts_cpu()));
    fill_mats(va, 1, 20, 91);
    s->a20 = ts_keep(mk(TS_SHAPE(20, 20), va, s->dt, ts_cpu()));
    fill(vb, 20 * 3, 92);
    s->b20 = ts_keep(mk(TS_SHAPE(20, 3), vb, s->dt, ts_cpu()));
    fill_mats(va, 64, 12, 93);
    s->batch = ts_keep(mk(TS_SHAPE(64, 12, 12), va, s->dt, ts_cpu()));
    for (int64_t i = 0; i < 8; i++) /* diagonally dominant, symmetric: positive-definite */
        for (int64_t j = 0; j < 8; j++) va[i * 8 + j] = i == j ? 10.0 : 1.0 / (double)(1 + i + j);
    s->spd = ts_keep(mk(TS_SHAPE(8, 8), va, s->dt, ts_cpu()));
    ts_scope_end();
    return s;
}

static bool lin_run(void *p) {
    lin_st *s = p;
    s->msg[0] = '\0';
    ts_scope_begin();
    ts_tensor *a6 = ts_transpose(s->a6, 0, 1), *a20 = ts_transpose(s->a20, 0, 1);
    ts_tensor *sv = NULL, *vh = NULL;
    bool ok = ts_linalg_inv(a6) && ts_linalg_inv(a20) && ts_linalg_solve(a6, s->a6, true) &&
              ts_linalg_solve(a20, s->b20, true) && ts_linalg_det(a6) && ts_linalg_det(a20) &&
              ts_linalg_det(s->batch) && ts_linalg_inv(s->batch) &&
              ts_linalg_cholesky(ts_transpose(s->spd, 0, 1), false) &&
              ts_linalg_svd(a20, false, &sv, &vh) && ts_linalg_svdvals(a6);
    snprintf(s->msg, sizeof s->msg, "%s", ts_error_message());
    ts_scope_end();
    return ok && ts_error() == TS_OK;
}

static void lin_check(void *p, bool ok) {
    const lin_st *s = p;
    if (!ok && !strstr(s->msg, "out of")) {
        fprintf(stderr, "linalg sweep: a failed allocation reported \"%s\"\n", s->msg);
        CHECK(strstr(s->msg, "out of") != NULL);
    }
}

static void lin_teardown(void *p) {
    lin_st *s = p;
    ts_release(s->a6), ts_release(s->a20), ts_release(s->b20), ts_release(s->batch);
    ts_release(s->spd);
    free(s);
}

static void test_fault_sweep(void) {
    for (int t = 0; t < 2; t++) {
        sweep_dt = t ? TS_F32 : TS_F64;
        const ts_sweep_case c = {.name = t ? "linalg native f32" : "linalg native f64",
                                 .setup = lin_setup,
                                 .run = lin_run,
                                 .teardown = lin_teardown,
                                 .check = lin_check};
        const ts_sweep_stats st = ts_fault_sweep(&c, 5000);
        CHECK(st.errors > 0 && st.oom == st.errors);
    }
    CHECK_OK();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int di = 0; di < ndev; di++)
        for (int t = 0; t < 2; t++) {
            const ts_dtype dt = t ? TS_F32 : TS_F64;
            ts_scope_begin();
            test_inv(devs[di], dt);
            test_solve(devs[di], dt);
            test_det(devs[di], dt);
            test_cholesky(devs[di], dt);
            test_svd(devs[di], dt);
            test_singular(devs[di], dt);
            test_empty(devs[di], dt);
            ts_scope_end();
            CHECK_OK();
        }
    test_fault_sweep();
    return ts_test_finish();
}
