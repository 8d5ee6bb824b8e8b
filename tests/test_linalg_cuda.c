/* test_linalg_cuda.c — torch.linalg on cuda:0 through the backend's linalg slot (cuSOLVER,
 * src/backend/cuda/cuda_linalg.cu; src/ops/linalg_device.c) against the same ops on the cpu
 * (LAPACK), in float32 and float64: lu_factor, inv, solve (matrix and vector right-hand sides),
 * det / slogdet, cholesky (lower and upper), eigh / eigvalsh (both triangles), svd / svdvals
 * (reduced and full, wide, square and tall), qr (reduced, complete, r), on single matrices and
 * batches ([2, 3, n, n]), at orders 8 and 40; then the errors of singular and not
 * positive-definite matrices (the same message as the cpu's, the same _ex infos), and empty
 * batches (the same shapes).
 *
 * Each result is checked twice: against the cpu's result, and by the op's defining identity on
 * the float64 input (A X = I, P L U = A, L L^T = A, A V = V diag(w), U S Vh = A, Q R = A, Q^T Q =
 * I), both with tolerances from the arithmetic (u: the dtype's unit roundoff). The test matrices
 * have known conditioning: general ones are 2n I + E with E uniform in [-1, 1) (||E||_2 <=
 * ||E||_F < n, so the singular values lie in (n, 3n) and cond < 3), with every other matrix's
 * rows reversed so that partial pivoting swaps rows; symmetric ones 4n I + E + E^T (eigenvalues
 * in (2n, 6n), cond < 3); rectangular ones E alone (the SVD and QR bounds need ||A|| only). LU's
 * backward error is within 3n u |L||U| (growth <= 2 on these diagonally dominant matrices), so a
 * solve's relative forward error is within 6n u cond; the cpu's and the device's within twice
 * that of each other. Orthogonal factorizations are backward stable to c m n u ||A||.
 *
 * Skips without a CUDA device (a failure under TS_REQUIRE_CUDA=1). TS_TEST_LINALG_DEVICE=sim:0
 * runs it against a device without the slot (the host path), which checks the test itself on a
 * machine without a GPU. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "host_values.h"
#include "tessera.h"
#include "tessera/linalg.h"
#include "ts_test.h"

#define MAXV (2 * 3 * 40 * 40 * 2)
static double va[MAXV], r1[MAXV], r2[MAXV], r3[MAXV], c1[MAXV], c2[MAXV], c3[MAXV];
static ts_device dev, cpu;

static double u_of(ts_dtype dt) { return dt == TS_F32 ? 0x1p-24 : 0x1p-53; }
static int64_t numel(ts_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    return n;
}
static int64_t batch_of(ts_shape s) {
    int64_t b = 1;
    for (int i = 0; i < s.ndim - 2; i++) b *= s.dims[i];
    return b;
}

/* general (cond < 3, rows of odd matrices reversed), symmetric (cond < 3) or rectangular (cond <
 * 3: E plus 2 max(m, n) on the diagonal) */
enum { GENERAL, SYMMETRIC, RECT };
static void fill_kind(double *v, int64_t batch, int64_t m, int64_t n, int kind, int seed) {
    ts_test_fill_uniform(v, batch * m * n, seed);
    for (int64_t b = 0; kind == RECT && b < batch; b++)
        for (int64_t i = 0; i < m && i < n; i++) v[(b * m + i) * n + i] += 2.0 * (m > n ? m : n);
    for (int64_t b = 0; kind != RECT && b < batch; b++) {
        double *a = v + b * n * n;
        if (kind == SYMMETRIC)
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < i; j++) {
                    const double s = a[i * n + j] + a[j * n + i];
                    a[i * n + j] = a[j * n + i] = s;
                }
        for (int64_t i = 0; i < n; i++)
            a[i * n + i] = kind == SYMMETRIC ? 2 * a[i * n + i] + 4.0 * n : a[i * n + i] + 2.0 * n;
        for (int64_t i = 0; kind == GENERAL && b % 2 && i < n / 2; i++)
            for (int64_t j = 0; j < n; j++) {
                const double t = a[i * n + j];
                a[i * n + j] = a[(n - 1 - i) * n + j], a[(n - 1 - i) * n + j] = t;
            }
    }
}

/* the input rounded to dt, as both devices see it */
static void round_to(double *v, int64_t n, ts_dtype dt) {
    for (int64_t i = 0; dt == TS_F32 && i < n; i++) v[i] = (float)v[i];
}

static double max_abs(const double *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}

/* max |x - y| over n values, relative to max |y| (or 1 when y is zero) */
static double rel_diff(const double *x, const double *y, int64_t n) {
    double d = 0;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs(x[i] - y[i]));
    const double s = max_abs(y, n);
    return d / (s > 0 ? s : 1);
}

/* t on dev read back: same shape as ref (on the cpu), device dev, dtype dt, then the values
 * within rel of the cpu's */
static bool read_pair(ts_tensor *t, ts_tensor *ref, double *x, double *y) {
    if (!t || !ref) return false;
    const ts_shape s = ts_shape_of(ref);
    if (!ts_test_shape_is(t, s) || ts_device_of(t).type != dev.type) return false;
    if (ts_dtype_of(t) != ts_dtype_of(ref)) return false;
    return ts_test_read_f64(t, x, MAXV) && ts_test_read_f64(ref, y, MAXV);
}
#define CHECK_CLOSE(t, ref, tol)                                                                   \
    do {                                                                                           \
        const bool ok_ = read_pair(t, ref, c1, r1);                                                \
        CHECK(ok_);                                                                                \
        if (ok_) {                                                                                 \
            const double d_ = rel_diff(c1, r1, numel(ts_shape_of(ref)));                           \
            if (!(d_ <= (tol))) printf("  %s: relative difference %.3g > %.3g\n", #t, d_, tol);    \
            CHECK(d_ <= (tol));                                                                    \
        }                                                                                          \
    } while (0)

static ts_tensor *on(ts_shape s, const double *v, ts_dtype dt, ts_device d) {
    return ts_test_tensor_f64(s, v, dt, d);
}

/* C (b x m x n) = A (b x m x k) B (b x k x n), each transposed when asked (ta: A^T, k x m) */
static void bmm(const double *a, const double *b, double *c, int64_t batch, int64_t m, int64_t k,
                int64_t n, bool ta, bool tb) {
    for (int64_t p = 0; p < batch; p++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t l = 0; l < k; l++)
                    s += (ta ? a[p * m * k + l * m + i] : a[p * m * k + i * k + l]) *
                         (tb ? b[p * k * n + j * k + l] : b[p * k * n + l * n + j]);
                c[p * m * n + i * n + j] = s;
            }
}

/* max |X - I| over a batch of n x n */
static double eye_diff(const double *x, int64_t batch, int64_t n) {
    double d = 0;
    for (int64_t p = 0; p < batch; p++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) d = fmax(d, fabs(x[p * n * n + i * n + j] - (i == j)));
    return d;
}

/* ------------------------------------------------------------------ LU family */
static void test_lu(ts_dtype dt, ts_shape s) {
    const int64_t n = s.dims[s.ndim - 1], b = batch_of(s), cnt = numel(s);
    const double u = u_of(dt), cond = 3, tol = 2 * 6 * n * u * cond;
    fill_kind(va, b, n, n, GENERAL, 11 + (int)n);
    round_to(va, cnt, dt);
    ts_scope_begin();
    ts_tensor *A = on(s, va, dt, dev), *Ac = on(s, va, dt, cpu);
    /* inv: against the cpu's, and A X = I */
    ts_tensor *X = ts_linalg_inv(A), *Xc = ts_linalg_inv(Ac);
    CHECK_OK();
    CHECK_CLOSE(X, Xc, tol);
    if (X && ts_test_read_f64(X, r2, MAXV)) { /* |A X - I| <= |A| |X - A^-1|: rows of |A| < 3n,
                                               * |A^-1| < 1 / n */
        bmm(va, r2, r3, b, n, n, n, false, false);
        CHECK(eye_diff(r3, b, n) <= 3 * tol);
    }
    /* solve, three right-hand sides and a vector */
    ts_shape sb = s;
    sb.dims[sb.ndim - 1] = 3;
    ts_test_fill_uniform(r2, numel(sb), 5);
    round_to(r2, numel(sb), dt);
    ts_tensor *B = on(sb, r2, dt, dev), *Bc = on(sb, r2, dt, cpu);
    ts_tensor *Y = ts_linalg_solve(A, B, true), *Yc = ts_linalg_solve(Ac, Bc, true);
    CHECK_OK();
    CHECK_CLOSE(Y, Yc, tol);
    if (Y && ts_test_read_f64(Y, r3, MAXV)) { /* A Y = B */
        bmm(va, r3, c2, b, n, n, 3, false, false);
        CHECK(rel_diff(c2, r2, numel(sb)) <= tol * 3 * n);
    }
    /* X A = B: a transposed (not contiguous) A on the way in */
    ts_tensor *Bt = ts_transpose(B, -2, -1), *Btc = ts_transpose(Bc, -2, -1);
    ts_tensor *Yl = ts_linalg_solve(A, Bt, false), *Ylc = ts_linalg_solve(Ac, Btc, false);
    CHECK_OK();
    CHECK_CLOSE(Yl, Ylc, tol);
    ts_shape sv = s;
    sv.ndim--;
    ts_tensor *v = on(sv, r2, dt, dev), *vc = on(sv, r2, dt, cpu);
    ts_tensor *z = ts_linalg_solve(A, v, true), *zc = ts_linalg_solve(Ac, vc, true);
    CHECK_OK();
    CHECK_CLOSE(z, zc, tol);
    /* det and slogdet: relative error within n cond 3n u each */
    const double dtol = 2 * 3 * n * n * u * cond;
    ts_tensor *D = ts_linalg_det(A), *Dc = ts_linalg_det(Ac);
    CHECK_OK();
    CHECK_CLOSE(D, Dc, dtol);
    ts_tensor *L = NULL, *Lc = NULL, *S = ts_linalg_slogdet(A, &L),
              *Sc = ts_linalg_slogdet(Ac, &Lc);
    CHECK_OK();
    CHECK_CLOSE(S, Sc, 0.0);
    if (read_pair(L, Lc, c1, r1))
        for (int64_t i = 0; i < b; i++) CHECK_NEAR(c1[i], r1[i], dtol);
    /* lu_factor: the same LU as the cpu's (the same pivots: no near ties), P L U = A within
     * (3n + n) u |L||U| (|L||U| < n 2 max|A|; the n: the product's own rounding) */
    ts_tensor *piv = NULL, *pivc = NULL, *info = NULL, *infoc = NULL;
    ts_tensor *LU = ts_linalg_lu_factor_ex(A, &piv, &info);
    ts_tensor *LUc = ts_linalg_lu_factor_ex(Ac, &pivc, &infoc);
    CHECK_OK();
    CHECK_CLOSE(LU, LUc, tol);
    CHECK_CLOSE(piv, pivc, 0.0);
    CHECK_CLOSE(info, infoc, 0.0);
    ts_tensor *Lf = NULL, *Uf = NULL, *P = LU && piv ? ts_lu_unpack(LU, piv, &Lf, &Uf) : NULL;
    ts_tensor *PLU = P ? ts_matmul(P, ts_matmul(Lf, Uf)) : NULL;
    CHECK(PLU && ts_test_read_f64(PLU, c2, MAXV) && rel_diff(c2, va, cnt) <= 8 * n * n * u);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ Cholesky, eigh */
static void test_symmetric(ts_dtype dt, ts_shape s) {
    const int64_t n = s.dims[s.ndim - 1], b = batch_of(s), cnt = numel(s);
    const double u = u_of(dt), cond = 3;
    fill_kind(va, b, n, n, SYMMETRIC, 23 + (int)n);
    round_to(va, cnt, dt);
    ts_scope_begin();
    /* the triangle each op must not read holds junk (a triangle read from the wrong side of the
     * column-major view would show): As[0] junk above the diagonal, As[1] junk below */
    ts_tensor *As[2], *Acs[2];
    for (int t = 0; t < 2; t++) {
        for (int64_t p = 0; p < b; p++)
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < n; j++) {
                    const int64_t at = (p * n + i) * n + j;
                    r2[at] = (t == 0 ? j > i : j < i) ? 1000.0 + (double)(i + j) : va[at];
                }
        As[t] = on(s, r2, dt, dev), Acs[t] = on(s, r2, dt, cpu);
    }
    ts_tensor *A = As[0], *Ac = Acs[0]; /* the lower triangle: cholesky reads it */
    /* Cholesky: L L^T = A within (n + 1) u |L||L^T|, L itself within cond of that */
    const double ctol = 2 * 2 * (n + 1) * u * cond;
    for (int up = 0; up < 2; up++) {
        ts_tensor *L = ts_linalg_cholesky(A, up), *Lc = ts_linalg_cholesky(Ac, up);
        CHECK_OK();
        CHECK_CLOSE(L, Lc, ctol);
        if (L && ts_test_read_f64(L, r2, MAXV)) {
            bmm(r2, r2, r3, b, n, n, n, up, !up); /* L L^T, or U^T U */
            CHECK(rel_diff(r3, va, cnt) <= ctol);
        }
    }
    /* eigh: eigenvalues within c n u ||A||; A V = V diag(w); V^T V = I */
    const double etol = 2 * 4 * n * u;
    const char *uplos[2] = {"L", "U"};
    for (int t = 0; t < 2; t++) {
        ts_tensor *V = NULL, *Vc = NULL;
        A = As[t], Ac = Acs[t];
        ts_tensor *w = ts_linalg_eigh(A, uplos[t], &V), *wc = ts_linalg_eigh(Ac, uplos[t], &Vc);
        CHECK_OK();
        CHECK_CLOSE(w, wc, etol);
        ts_tensor *wv = ts_linalg_eigvalsh(A, uplos[t]);
        CHECK_CLOSE(wv, wc, etol);
        if (w && V && ts_test_read_f64(w, r1, MAXV) && ts_test_read_f64(V, r2, MAXV)) {
            for (int64_t p = 0; p < b; p++)
                for (int64_t i = 1; i < n; i++) CHECK(r1[p * n + i - 1] <= r1[p * n + i]);
            bmm(va, r2, r3, b, n, n, n, false, false); /* A V */
            for (int64_t p = 0; p < b; p++)
                for (int64_t i = 0; i < n; i++)
                    for (int64_t j = 0; j < n; j++)
                        r3[(p * n + i) * n + j] -= r2[(p * n + i) * n + j] * r1[p * n + j];
            CHECK(max_abs(r3, cnt) <= etol * 6 * n * n);
            bmm(r2, r2, r3, b, n, n, n, true, false); /* V^T V */
            CHECK(eye_diff(r3, b, n) <= etol * n);
        }
    }
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ SVD, QR */
static void test_orthogonal(ts_dtype dt, ts_shape s) {
    const int64_t m = s.dims[s.ndim - 2], n = s.dims[s.ndim - 1], k = m < n ? m : n;
    const int64_t b = batch_of(s), cnt = numel(s);
    const double u = u_of(dt), an = 3.0 * (double)(m > n ? m : n); /* ||A||_2 < an */
    const double tol = 2 * 4 * (double)(m > n ? m : n) * (double)k * u;
    fill_kind(va, b, m, n, RECT, 37 + (int)(m * n));
    round_to(va, cnt, dt);
    ts_scope_begin();
    ts_tensor *A = on(s, va, dt, dev), *Ac = on(s, va, dt, cpu);
    ts_tensor *sv = ts_linalg_svdvals(A), *svc = ts_linalg_svdvals(Ac);
    CHECK_OK();
    if (read_pair(sv, svc, c1, r1))
        for (int64_t i = 0; i < b * k; i++) CHECK_NEAR(c1[i], r1[i], tol * an);
    for (int full = 0; full < 2; full++) {
        ts_tensor *S = NULL, *Vh = NULL, *Sc = NULL, *Vhc = NULL;
        ts_tensor *U = ts_linalg_svd(A, full, &S, &Vh), *Uc = ts_linalg_svd(Ac, full, &Sc, &Vhc);
        CHECK_OK();
        const int64_t ku = full ? m : k, kv = full ? n : k;
        CHECK(ts_test_shape_is(U, ts_shape_of(Uc)) && ts_test_shape_is(Vh, ts_shape_of(Vhc)));
        if (read_pair(S, Sc, c1, r1))
            for (int64_t i = 0; i < b * k; i++) CHECK_NEAR(c1[i], r1[i], tol * an);
        if (U && S && Vh && ts_test_read_f64(U, c2, MAXV) && ts_test_read_f64(Vh, c3, MAXV)) {
            /* U[:, :k] diag(S) Vh[:k] = A */
            for (int64_t p = 0; p < b; p++)
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        double acc = 0;
                        for (int64_t l = 0; l < k; l++)
                            acc +=
                                c2[(p * m + i) * ku + l] * c1[p * k + l] * c3[(p * kv + l) * n + j];
                        r3[(p * m + i) * n + j] = acc - va[(p * m + i) * n + j];
                    }
            CHECK(max_abs(r3, cnt) <= tol * an * 4);
            bmm(c2, c2, r3, b, ku, m, ku, true, false); /* U^T U */
            CHECK(eye_diff(r3, b, ku) <= tol * 4);
            bmm(c3, c3, r3, b, kv, n, kv, false, true); /* Vh Vh^T */
            CHECK(eye_diff(r3, b, kv) <= tol * 4);
        }
    }
    const char *modes[3] = {"reduced", "complete", "r"};
    for (int md = 0; md < 3; md++) {
        ts_tensor *R = NULL, *Rc = NULL;
        ts_tensor *Q = ts_linalg_qr(A, modes[md], &R), *Qc = ts_linalg_qr(Ac, modes[md], &Rc);
        CHECK_OK();
        CHECK(ts_test_shape_is(Q, ts_shape_of(Qc)) && ts_test_shape_is(R, ts_shape_of(Rc)));
        const int64_t kq = md == 1 ? m : k;
        /* R's diagonal magnitudes are unique; zeros below the diagonal */
        if (read_pair(R, Rc, c1, r1))
            for (int64_t p = 0; p < b; p++)
                for (int64_t i = 0; i < kq; i++)
                    for (int64_t j = 0; j < n; j++) {
                        const int64_t at = (p * kq + i) * n + j;
                        if (j < i) CHECK(c1[at] == 0);
                        if (i == j) CHECK_NEAR(fabs(c1[at]), fabs(r1[at]), tol * an * 4);
                    }
        if (md == 2 || !Q || !R) continue;
        if (ts_test_read_f64(Q, c2, MAXV) && ts_test_read_f64(R, c1, MAXV)) {
            bmm(c2, c1, r3, b, m, kq, n, false, false); /* Q R = A */
            CHECK(rel_diff(r3, va, cnt) * max_abs(va, cnt) <= tol * an * 4);
            bmm(c2, c2, r3, b, kq, m, kq, true, false); /* Q^T Q = I */
            CHECK(eye_diff(r3, b, kq) <= tol * 4);
        }
    }
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ errors, infos, empties */
/* op on A on the device and on the cpu: both fail with the same code and message */
typedef ts_tensor *(*unary_fn)(ts_tensor *);
static ts_tensor *chol_lower(ts_tensor *A) { return ts_linalg_cholesky(A, false); }
static ts_tensor *lu_plain(ts_tensor *A) { return ts_linalg_lu_factor_ex(A, NULL, NULL); }
static ts_tensor *solve_ones(ts_tensor *A) {
    ts_tensor *B = ts_ones_like(A);
    return B ? ts_linalg_solve(A, B, true) : NULL;
}

static void same_error(const char *what, unary_fn f, ts_tensor *A, ts_tensor *Ac) {
    char msg[512];
    ts_tensor *r = f(Ac);
    const ts_status st = ts_error();
    snprintf(msg, sizeof msg, "%s", ts_error_message());
    ts_error_clear();
    CHECK(!r && st == TS_ERR_ARG);
    r = f(A);
    const bool same = !r && ts_error() == st && strcmp(ts_error_message(), msg) == 0;
    if (!same)
        printf("  %s: cpu \"%s\", %s \"%s\"\n", what, msg, ts_device_str(dev), ts_error_message());
    CHECK(same);
    ts_error_clear();
}

static void test_errors(ts_dtype dt) {
    /* a batch of three 2 x 2: regular, singular (zero pivot 2 of A itself, 1 of A^T's LU), not
     * positive-definite at order 2 */
    const double v[12] = {2, 1, 1, 2, /**/ 0, 0, 1, 1, /**/ 1, 2, 2, 1};
    const ts_shape s = TS_SHAPE(3, 2, 2);
    ts_scope_begin();
    ts_tensor *A = on(s, v, dt, dev), *Ac = on(s, v, dt, cpu);
    same_error("inv", ts_linalg_inv, A, Ac);
    same_error("solve", solve_ones, A, Ac);
    same_error("lu_factor", lu_plain, A, Ac);
    /* cholesky: matrix 1 ([[0, 0], [1, 1]]) fails at order 1 first */
    same_error("cholesky", chol_lower, A, Ac);
    const double w[4] = {1, 2, 2, 1};
    ts_tensor *N = on(TS_SHAPE(2, 2), w, dt, dev), *Nc = on(TS_SHAPE(2, 2), w, dt, cpu);
    same_error("cholesky order 2", chol_lower, N, Nc);
    /* the _ex infos */
    ts_tensor *i1 = NULL, *i1c = NULL, *i2 = NULL, *i2c = NULL, *i3 = NULL, *i3c = NULL;
    ts_tensor *X = ts_linalg_inv_ex(A, &i1), *Xc = ts_linalg_inv_ex(Ac, &i1c);
    ts_tensor *L = ts_linalg_cholesky_ex(A, false, &i2),
              *Lc = ts_linalg_cholesky_ex(Ac, false, &i2c);
    ts_tensor *piv = NULL, *pivc = NULL;
    ts_tensor *LU = ts_linalg_lu_factor_ex(A, &piv, &i3),
              *LUc = ts_linalg_lu_factor_ex(Ac, &pivc, &i3c);
    CHECK_OK();
    CHECK(X && Xc && L && Lc && LU && LUc);
    CHECK_CLOSE(i1, i1c, 0.0);
    CHECK_CLOSE(i2, i2c, 0.0);
    CHECK_CLOSE(i3, i3c, 0.0);
    /* the determinants of the batch: 3, 0, -3 (a zero pivot gives det 0, sign 0, log -inf) */
    ts_tensor *ld = NULL, *ldc = NULL, *sg = ts_linalg_slogdet(A, &ld),
              *sgc = ts_linalg_slogdet(Ac, &ldc);
    CHECK_OK();
    CHECK_CLOSE(sg, sgc, 0.0);
    if (read_pair(ld, ldc, c1, r1)) {
        CHECK(isinf(c1[1]) && c1[1] < 0);
        CHECK_NEAR(c1[0], r1[0], 8 * u_of(dt));
    }
    CHECK_CLOSE(ts_linalg_det(A), ts_linalg_det(Ac), 8 * u_of(dt));
    ts_scope_end();
}

/* empty batches and 0 x 0 matrices: the cpu's shapes (and det 1 of a 0 x 0) */
static void test_empty(ts_dtype dt) {
    const ts_shape shapes[3] = {TS_SHAPE(0, 3, 3), TS_SHAPE(2, 0, 0), TS_SHAPE(0, 4, 2)};
    for (int t = 0; t < 3; t++) {
        ts_scope_begin();
        const ts_opts od = {.dtype = dt, .device = dev}, oc = {.dtype = dt, .device = cpu};
        ts_tensor *A = ts_zeros(shapes[t], od), *Ac = ts_zeros(shapes[t], oc);
        const bool sq = shapes[t].dims[1] == shapes[t].dims[2];
        if (sq) {
            CHECK_CLOSE(ts_linalg_inv(A), ts_linalg_inv(Ac), 0.0);
            CHECK_CLOSE(ts_linalg_det(A), ts_linalg_det(Ac), 0.0);
            CHECK_CLOSE(ts_linalg_cholesky(A, false), ts_linalg_cholesky(Ac, false), 0.0);
            CHECK_CLOSE(ts_linalg_eigvalsh(A, "L"), ts_linalg_eigvalsh(Ac, "L"), 0.0);
            CHECK_CLOSE(ts_linalg_solve(A, A, true), ts_linalg_solve(Ac, Ac, true), 0.0);
        }
        ts_tensor *S = NULL, *Vh = NULL, *Sc = NULL, *Vhc = NULL;
        CHECK_CLOSE(ts_linalg_svd(A, true, &S, &Vh), ts_linalg_svd(Ac, true, &Sc, &Vhc), 0.0);
        CHECK_CLOSE(S, Sc, 0.0);
        CHECK_CLOSE(Vh, Vhc, 0.0);
        ts_tensor *R = NULL, *Rc = NULL;
        CHECK_CLOSE(ts_linalg_qr(A, "complete", &R), ts_linalg_qr(Ac, "complete", &Rc), 0.0);
        CHECK_CLOSE(R, Rc, 0.0);
        CHECK_OK();
        ts_scope_end();
    }
}

int main(void) {
    const char *env = getenv("TS_TEST_LINALG_DEVICE");
    if (env && *env) {
        if (ts_device_parse(env, &dev) != TS_OK || !ts_device_is_available(dev))
            return ts_test_skip("TS_TEST_LINALG_DEVICE=%s is not available", env);
    } else if (ts_cuda_is_available()) {
        dev = ts_cuda(0);
    } else {
        return ts_test_skip_no_cuda("test_linalg_cuda: cuSOLVER's torch.linalg is not run here");
    }
    cpu = ts_cpu();
    const ts_backend *be = tsi_backend_for(dev.type);
    printf("device under test: %s (%s)\n", ts_device_str(dev),
           be && be->linalg ? "the backend's linalg slot" : "no linalg slot: the host path");
    if (dev.type == TS_CUDA) CHECK(be && be->linalg); /* the CUDA backend installs it */
    const ts_dtype dts[2] = {TS_F32, TS_F64};
    for (int d = 0; d < 2; d++) {
        const ts_dtype dt = dts[d];
        printf("%s\n", ts_dtype_name(dt));
        test_lu(dt, TS_SHAPE(8, 8));
        test_lu(dt, TS_SHAPE(2, 3, 8, 8));
        test_lu(dt, TS_SHAPE(2, 40, 40));
        test_symmetric(dt, TS_SHAPE(8, 8));
        test_symmetric(dt, TS_SHAPE(2, 3, 8, 8));
        test_symmetric(dt, TS_SHAPE(2, 40, 40));
        const ts_shape rect[5] = {TS_SHAPE(6, 6), TS_SHAPE(5, 9), TS_SHAPE(9, 5),
                                  TS_SHAPE(2, 3, 7, 4), TS_SHAPE(2, 4, 40)};
        for (int r = 0; r < 5; r++) test_orthogonal(dt, rect[r]);
        test_errors(dt);
        test_empty(dt);
    }
    return ts_test_finish();
}
