/* test_linalg.c — torch.linalg's decompositions (include/tessera/linalg.h, src/ops/linalg*.c) on
 * every device and in float32 / float64 against float64 hand loops: the defining identities
 * (A inv(A) = I, A X = B, L L^T = A, Q R = A with Q orthonormal, U diag(S) Vh = A, A V = V diag(L),
 * the Moore-Penrose conditions, P L U = A), determinants by hand elimination, least squares by the
 * normal equations, matrix_exp against a Taylor series and a rotation, matrix_power against
 * repeated products; ts_gradcheck of every differentiable op in float64; the refusals (shape,
 * dtype, singular, not positive-definite, devices) naming the op, and the *_ex infos. */
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
static double buf_a[MAXV], buf_b[MAXV], got[MAXV], got2[MAXV], got3[MAXV];

/* uniform in [-1, 1) from a seeded linear congruential generator (full rank in practice) */
#define fill ts_test_fill_uniform /* tests/support/host_values.h */
/* batch of n x n matrices made well conditioned: + n on the diagonal */
static void fill_dominant(double *v, int64_t batch, int64_t n, int seed) {
    fill(v, batch * n * n, seed);
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < n; i++) v[(b * n + i) * n + i] += (double)n;
}
/* symmetric positive definite: M M^T + n I */
static void fill_spd(double *v, int64_t batch, int64_t n, int seed) {
    double m[256];
    for (int64_t b = 0; b < batch; b++) {
        fill(m, n * n, seed + (int)b);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = i == j ? (double)n : 0.0;
                for (int64_t k = 0; k < n; k++) s += m[i * n + k] * m[j * n + k];
                v[(b * n + i) * n + j] = s;
            }
    }
}

static int64_t numel_of(ts_shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    return n;
}
#define mk         ts_test_tensor_f64 /* tests/support/host_values.h */
#define rd(t, out) ts_test_read_f64(t, out, MAXV)
#define has_shape  ts_test_shape_is
/* c (m x n) = a (m x k) b (k x n), row-major */
static void mm(const double *a, const double *b, double *c, int64_t m, int64_t k, int64_t n) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t l = 0; l < k; l++) s += a[i * k + l] * b[l * n + j];
            c[i * n + j] = s;
        }
}
static double max_diff(const double *a, const double *b, int64_t n) {
    double d = 0;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i]));
    return d;
}
static double tol_of(ts_dtype dt, int64_t n) {
    return (dt == TS_F32 ? 6e-8 : 1.2e-16) * 64.0 * (double)(n > 0 ? n : 1);
}
/* determinant by hand Gaussian elimination with partial pivoting (float64) */
static double det_ref(const double *a0, int64_t n) {
    double a[256], d = 1;
    memcpy(a, a0, (size_t)(n * n) * sizeof *a);
    for (int64_t c = 0; c < n; c++) {
        int64_t p = c;
        for (int64_t r = c + 1; r < n; r++)
            if (fabs(a[r * n + c]) > fabs(a[p * n + c])) p = r;
        if (a[p * n + c] == 0) return 0;
        if (p != c) {
            for (int64_t j = 0; j < n; j++) {
                double t = a[c * n + j];
                a[c * n + j] = a[p * n + j], a[p * n + j] = t;
            }
            d = -d;
        }
        d *= a[c * n + c];
        for (int64_t r = c + 1; r < n; r++) {
            double f = a[r * n + c] / a[c * n + c];
            for (int64_t j = c; j < n; j++) a[r * n + j] -= f * a[c * n + j];
        }
    }
    return d;
}

/* ------------------------------------------------------------------ inv, solve, det */
static void test_lu_family(ts_device d, ts_dtype dt) {
    const int64_t B = 2, n = 4;
    const double tol = tol_of(dt, n);
    fill_dominant(buf_a, B, n, 1);
    ts_tensor *A = mk(TS_SHAPE(B, n, n), buf_a, dt, d);
    ts_tensor *X = ts_linalg_inv(A);
    CHECK(has_shape(X, TS_SHAPE(B, n, n)) && ts_dtype_of(X) == dt);
    CHECK(ts_device_of(X).type == d.type);
    if (rd(X, got) && rd(A, buf_b)) {
        double prod[16], eye[16] = {0};
        for (int i = 0; i < n; i++) eye[i * n + i] = 1;
        for (int64_t b = 0; b < B; b++) {
            mm(buf_b + b * n * n, got + b * n * n, prod, n, n, n);
            CHECK(max_diff(prod, eye, n * n) < tol * 10);
        }
    }
    /* solve with a broadcast right-hand side [n, 3], vectors, and X A = B */
    fill(buf_b, n * 3, 2);
    ts_tensor *Bm = mk(TS_SHAPE(n, 3), buf_b, dt, d);
    ts_tensor *S = ts_linalg_solve(A, Bm, true);
    CHECK(has_shape(S, TS_SHAPE(B, n, 3)));
    double a64[64], b64[64], r[64];
    if (rd(S, got) && rd(A, a64) && rd(Bm, b64))
        for (int64_t b = 0; b < B; b++) {
            mm(a64 + b * n * n, got + b * n * 3, r, n, n, 3);
            CHECK(max_diff(r, b64, n * 3) < tol * 10);
        }
    ts_tensor *v = mk(TS_SHAPE(B, n), buf_b, dt, d);
    ts_tensor *sv = ts_linalg_solve(A, v, true);
    CHECK(has_shape(sv, TS_SHAPE(B, n)));
    if (rd(sv, got) && rd(v, b64))
        for (int64_t b = 0; b < B; b++) {
            mm(a64 + b * n * n, got + b * n, r, n, n, 1);
            CHECK(max_diff(r, b64 + b * n, n) < tol * 10);
        }
    ts_tensor *Br = mk(TS_SHAPE(3, n), buf_b, dt, d);
    ts_tensor *Sr = ts_linalg_solve(A, Br, false); /* X A = B */
    CHECK(has_shape(Sr, TS_SHAPE(B, 3, n)));
    if (rd(Sr, got) && rd(Br, b64))
        for (int64_t b = 0; b < B; b++) {
            mm(got + b * 3 * n, a64 + b * n * n, r, 3, n, n);
            CHECK(max_diff(r, b64, n * 3) < tol * 10);
        }
    /* det, slogdet, logdet against elimination; one matrix with a negative determinant */
    double dets[2] = {det_ref(a64, n), det_ref(a64 + n * n, n)};
    ts_tensor *D = ts_linalg_det(A);
    ts_tensor *la = NULL, *sg = ts_linalg_slogdet(A, &la);
    CHECK(has_shape(D, TS_SHAPE(B)) && has_shape(sg, TS_SHAPE(B)));
    if (rd(D, got) && rd(sg, got2) && rd(la, got3))
        for (int b = 0; b < B; b++) {
            CHECK_NEAR(got[b], dets[b], tol * fabs(dets[b]) * 4);
            CHECK_NEAR(got2[b], dets[b] > 0 ? 1 : -1, 0);
            CHECK_NEAR(got3[b], log(fabs(dets[b])), tol * 4);
        }
    double g3[9] = {-2, 1, 0, 0.5, 3, 1, 1, 0, 4}; /* one negative pivot in U: det < 0 */
    ts_tensor *G = mk(TS_SHAPE(3, 3), g3, dt, d), *gl = NULL, *gs = ts_linalg_slogdet(G, &gl);
    CHECK(rd(G, got2));
    const double dg = det_ref(got2, 3);
    CHECK(gs && gl && fabs(ts_item(ts_linalg_det(G)) - dg) <= tol * 4 * fabs(dg));
    CHECK(gs && ts_item(gs) == (dg > 0 ? 1 : -1) && fabs(ts_item(gl) - log(fabs(dg))) <= tol * 4);
    double neg[4] = {0, 1, 1, 0}; /* det -1: logdet NaN */
    ts_tensor *ld = ts_logdet(mk(TS_SHAPE(2, 2), neg, dt, d));
    CHECK(ld && isnan(ts_item(ld)));
    double sing[4] = {1, 2, 2, 4};
    ts_tensor *Ds = ts_linalg_det(mk(TS_SHAPE(2, 2), sing, dt, d));
    CHECK(Ds && ts_item(Ds) == 0);
    ts_tensor *l2 = NULL, *s2 = ts_linalg_slogdet(mk(TS_SHAPE(2, 2), sing, dt, d), &l2);
    CHECK(s2 && ts_item(s2) == 0 && isinf(ts_item(l2)) && ts_item(l2) < 0);
    /* lu_factor + lu_unpack: P L U = A; lu_solve */
    ts_tensor *piv = NULL, *LU = ts_linalg_lu_factor_ex(A, &piv, NULL);
    ts_tensor *L = NULL, *U = NULL, *P = LU ? ts_lu_unpack(LU, piv, &L, &U) : NULL;
    CHECK(P && L && U);
    if (P && L && U) {
        ts_tensor *PLU = ts_matmul(P, ts_matmul(L, U));
        CHECK(rd(PLU, got) && max_diff(got, a64, B * n * n) < tol * 10);
        ts_tensor *X2 = ts_linalg_lu_solve(LU, piv, ts_expand(Bm, TS_SHAPE(B, n, 3)), true, false);
        ts_tensor *X3 = ts_linalg_lu_solve(LU, piv, ts_expand(Bm, TS_SHAPE(B, n, 3)), true, true);
        if (rd(X2, got2) && rd(S, got) && rd(X3, got3)) {
            CHECK(max_diff(got, got2, B * n * 3) < tol * 10);
            for (int64_t b = 0; b < B; b++) { /* A^T X = B */
                double at[16];
                for (int i = 0; i < n; i++)
                    for (int j = 0; j < n; j++) at[i * n + j] = a64[b * n * n + j * n + i];
                mm(at, got3 + b * n * 3, r, n, n, 3);
                CHECK(max_diff(r, b64, n * 3) < tol * 10);
            }
        }
        ts_tensor *Lb = NULL, *Ub = NULL, *Pb = ts_linalg_lu(A, &Lb, &Ub);
        CHECK(rd(ts_matmul(Pb, ts_matmul(Lb, Ub)), got) &&
              max_diff(got, a64, B * n * n) < tol * 10);
    }
    /* rectangular lu_factor: [2, 3] */
    double w6[6] = {1, 2, 3, 4, 5, 7};
    ts_tensor *pv = NULL, *LU2 = ts_linalg_lu_factor_ex(mk(TS_SHAPE(2, 3), w6, dt, d), &pv, NULL);
    ts_tensor *L2 = NULL, *U2 = NULL, *P2 = LU2 ? ts_lu_unpack(LU2, pv, &L2, &U2) : NULL;
    CHECK(has_shape(L2, TS_SHAPE(2, 2)) && has_shape(U2, TS_SHAPE(2, 3)));
    CHECK(P2 && rd(ts_matmul(P2, ts_matmul(L2, U2)), got) && max_diff(got, w6, 6) < tol * 10);
    CHECK_OK();
}

/* ------------------------------------------------------------------ triangular, cholesky */
static void test_cholesky_family(ts_device d, ts_dtype dt) {
    const int64_t B = 2, n = 4;
    const double tol = tol_of(dt, n) * 10;
    fill_spd(buf_a, B, n, 3);
    ts_tensor *A = mk(TS_SHAPE(B, n, n), buf_a, dt, d);
    double a64[64], r[64], lt[64];
    rd(A, a64);
    ts_tensor *L = ts_linalg_cholesky(A, false), *U = ts_linalg_cholesky(A, true);
    if (rd(L, got) && rd(U, got2)) {
        for (int64_t b = 0; b < B; b++) {
            const double *l = got + b * n * n;
            bool lower = true;
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++) {
                    lt[i * n + j] = l[j * n + i];
                    lower &= j <= i || l[i * n + j] == 0;
                    CHECK(got2[b * n * n + i * n + j] == l[j * n + i]); /* U = L^T */
                }
            CHECK(lower);
            mm(l, lt, r, n, n, n);
            CHECK(max_diff(r, a64 + b * n * n, n * n) < tol * 16);
        }
    }
    /* solve_triangular: upper / lower, left / right, unitriangular */
    fill(buf_b, n * 2, 4);
    ts_tensor *Bm = mk(TS_SHAPE(n, 2), buf_b, dt, d);
    double b64[64];
    rd(Bm, b64);
    for (int c = 0; c < 4; c++) {
        const bool upper = c & 1, unit = c & 2;
        ts_tensor *T = upper ? U : L;
        ts_tensor *X = ts_linalg_solve_triangular(T, Bm, upper, true, unit);
        double t64[64];
        if (!(rd(X, got) && rd(T, t64))) {
            CHECK(false);
            continue;
        }
        for (int64_t b = 0; b < B; b++) {
            double *tm = t64 + b * n * n;
            if (unit)
                for (int i = 0; i < n; i++) tm[i * n + i] = 1;
            mm(tm, got + b * n * 2, r, n, n, 2);
            CHECK(max_diff(r, b64, n * 2) < tol * 16);
        }
    }
    ts_tensor *Br = mk(TS_SHAPE(2, n), buf_b, dt, d);
    ts_tensor *Xr = ts_linalg_solve_triangular(L, Br, false, false, false); /* X L = B */
    double l64[64];
    if (rd(Xr, got) && rd(L, l64))
        for (int64_t b = 0; b < B; b++) {
            mm(got + b * 2 * n, l64 + b * n * n, r, 2, n, n);
            CHECK(max_diff(r, b64, n * 2) < tol * 16);
        }
    /* cholesky_solve and cholesky_inverse against solve and inv */
    ts_tensor *Bb = ts_expand(Bm, TS_SHAPE(B, n, 2));
    ts_tensor *cs = ts_cholesky_solve(Bb, L, false), *cu = ts_cholesky_solve(Bb, U, true);
    ts_tensor *ref = ts_linalg_solve(A, Bb, true);
    CHECK(rd(cs, got) && rd(cu, got2) && rd(ref, got3));
    CHECK(max_diff(got, got3, B * n * 2) < tol * 16 && max_diff(got2, got3, B * n * 2) < tol * 16);
    CHECK(rd(ts_cholesky_inverse(L, false), got) && rd(ts_linalg_inv(A), got2));
    CHECK(max_diff(got, got2, B * n * n) < tol * 16);
    /* cholesky_ex of a matrix that is not positive-definite: info = the failing minor */
    double np[9] = {4, 2, 0, 2, 1, 0, 0, 0, 1}; /* minor 2 is 0 */
    ts_tensor *info = NULL;
    ts_linalg_cholesky_ex(mk(TS_SHAPE(3, 3), np, dt, d), false, &info);
    CHECK(info && ts_dtype_of(info) == TS_I32 && ts_item(info) == 2);
    CHECK_OK();
}

/* ------------------------------------------------------------------ qr, svd, eigh */
static bool orthonormal_cols(const double *q, int64_t m, int64_t k, double tol) {
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < k; j++) {
            double s = 0;
            for (int64_t l = 0; l < m; l++) s += q[l * k + i] * q[l * k + j];
            if (fabs(s - (i == j)) > tol) return false;
        }
    return true;
}

static void test_orth(ts_device d, ts_dtype dt) {
    static const int64_t shapes[][2] = {{5, 3}, {3, 5}, {4, 4}};
    double r[256], tmp[256];
    for (int si = 0; si < 3; si++) {
        const int64_t m = shapes[si][0], n = shapes[si][1], k = m < n ? m : n, B = 2;
        const double tol = tol_of(dt, m + n) * 16;
        fill(buf_a, B * m * n, 5 + si);
        ts_tensor *A = mk(TS_SHAPE(B, m, n), buf_a, dt, d);
        double a64[256];
        rd(A, a64);
        /* qr reduced and complete */
        for (int complete = 0; complete < 2; complete++) {
            ts_tensor *R = NULL, *Q = ts_linalg_qr(A, complete ? "complete" : "reduced", &R);
            const int64_t kq = complete ? m : k;
            CHECK(has_shape(Q, TS_SHAPE(B, m, kq)) && has_shape(R, TS_SHAPE(B, kq, n)));
            if (!rd(Q, got) || !rd(R, got2)) continue;
            for (int64_t b = 0; b < B; b++) {
                mm(got + b * m * kq, got2 + b * kq * n, r, m, kq, n);
                CHECK(max_diff(r, a64 + b * m * n, m * n) < tol);
                CHECK(orthonormal_cols(got + b * m * kq, m, kq, tol));
                for (int64_t i = 0; i < kq; i++)
                    for (int64_t j = 0; j < i && j < n; j++) CHECK(got2[(b * kq + i) * n + j] == 0);
            }
        }
        ts_tensor *Rr = NULL, *Qr = ts_linalg_qr(A, "r", &Rr);
        CHECK(has_shape(Qr, TS_SHAPE(0)) && has_shape(Rr, TS_SHAPE(B, k, n)));
        /* svd reduced and full; svdvals */
        for (int full = 0; full < 2; full++) {
            ts_tensor *S = NULL, *Vh = NULL, *U = ts_linalg_svd(A, full, &S, &Vh);
            const int64_t ku = full ? m : k, kv = full ? n : k;
            CHECK(has_shape(U, TS_SHAPE(B, m, ku)) && has_shape(S, TS_SHAPE(B, k)) &&
                  has_shape(Vh, TS_SHAPE(B, kv, n)));
            double u[512], s[64], vh[512];
            if (!rd(U, u) || !rd(S, s) || !rd(Vh, vh)) continue;
            for (int64_t b = 0; b < B; b++) {
                const double *ub = u + b * m * ku, *vb = vh + b * kv * n, *sb = s + b * k;
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        double acc = 0;
                        for (int64_t l = 0; l < k; l++)
                            acc += ub[i * ku + l] * sb[l] * vb[l * n + j];
                        tmp[i * n + j] = acc;
                    }
                CHECK(max_diff(tmp, a64 + b * m * n, m * n) < tol);
                CHECK(orthonormal_cols(ub, m, ku, tol));
                for (int64_t i = 0; i < kv; i++) /* Vh's rows orthonormal */
                    for (int64_t j = 0; j < kv; j++) {
                        double acc = 0;
                        for (int64_t l = 0; l < n; l++) acc += vb[i * n + l] * vb[j * n + l];
                        CHECK(fabs(acc - (i == j)) < tol);
                    }
                for (int64_t l = 1; l < k; l++) CHECK(sb[l - 1] >= sb[l] && sb[l] >= 0);
            }
            if (!full) {
                CHECK(rd(ts_linalg_svdvals(A), got));
                CHECK(max_diff(got, s, B * k) < tol);
                /* matrix_norm nuc / 2 / -2 from the singular values; cond */
                ts_tensor *nuc = ts_matrix_norm(A, "nuc", -2, -1, false, TS_DTYPE_DEFAULT);
                ts_tensor *two = ts_matrix_norm(A, "2", -1, -2, true, TS_DTYPE_DEFAULT);
                ts_tensor *mtwo = ts_matrix_norm(A, "-2", -2, -1, false, TS_DTYPE_DEFAULT);
                ts_tensor *cond = ts_linalg_cond(A, NULL);
                CHECK(has_shape(two, TS_SHAPE(B, 1, 1)));
                double nv[2], tv[2], mv[2], cv[2];
                if (rd(nuc, nv) && rd(two, tv) && rd(mtwo, mv) && rd(cond, cv))
                    for (int64_t b = 0; b < B; b++) {
                        double sum = 0;
                        for (int64_t l = 0; l < k; l++) sum += s[b * k + l];
                        CHECK_NEAR(nv[b], sum, tol * sum);
                        CHECK_NEAR(tv[b], s[b * k], tol * s[b * k]);
                        CHECK_NEAR(mv[b], s[b * k + k - 1], tol * s[b * k]);
                        CHECK_NEAR(cv[b], s[b * k] / s[b * k + k - 1], tol * cv[b] * 4);
                    }
            }
        }
    }
    /* eigh on a symmetric matrix, both triangles; eigvalsh */
    const int64_t n = 5, B = 2;
    const double tol = tol_of(dt, n) * 16;
    fill_spd(buf_a, B, n, 7);
    for (int64_t b = 0; b < B; b++) /* indefinite */
        for (int64_t i = 0; i < n; i++) buf_a[(b * n + i) * n + i] -= 6.0;
    ts_tensor *A = mk(TS_SHAPE(B, n, n), buf_a, dt, d);
    double a64[64], v[64], l[16], av[64];
    rd(A, a64);
    for (int up = 0; up < 2; up++) {
        ts_tensor *V = NULL, *Lt = ts_linalg_eigh(A, up ? "U" : "L", &V);
        if (!rd(Lt, l) || !rd(V, v)) {
            CHECK(false);
            continue;
        }
        for (int64_t b = 0; b < B; b++) {
            mm(a64 + b * n * n, v + b * n * n, av, n, n, n);
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < n; j++)
                    av[i * n + j] -= v[b * n * n + i * n + j] * l[b * n + j];
            double z[64] = {0};
            CHECK(max_diff(av, z, n * n) < tol * 8);
            CHECK(orthonormal_cols(v + b * n * n, n, n, tol));
            for (int64_t j = 1; j < n; j++) CHECK(l[b * n + j - 1] <= l[b * n + j]);
        }
        CHECK(rd(ts_linalg_eigvalsh(A, up ? "U" : "L"), got) && max_diff(got, l, B * n) < tol);
    }
    CHECK_OK();
}

/* ------------------------------------------------------------------ lstsq, pinv, rank */
static void test_least_squares(ts_device d, ts_dtype dt) {
    const int64_t m = 6, n = 3, k = 2;
    const double tol = tol_of(dt, m) * 64;
    fill(buf_a, m * n, 11);
    fill(buf_b, m * k, 12);
    ts_tensor *A = mk(TS_SHAPE(m, n), buf_a, dt, d), *Bm = mk(TS_SHAPE(m, k), buf_b, dt, d);
    double a64[64], b64[64];
    rd(A, a64), rd(Bm, b64);
    /* the normal equations (A^T A) x = A^T b solved by hand in float64 */
    double ata[9], atb[6], ref[6];
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            ata[i * n + j] = 0;
            for (int l = 0; l < m; l++) ata[i * n + j] += a64[l * n + i] * a64[l * n + j];
        }
        for (int c = 0; c < k; c++) {
            atb[i * k + c] = 0;
            for (int l = 0; l < m; l++) atb[i * k + c] += a64[l * n + i] * b64[l * k + c];
        }
    }
    const double det = det_ref(ata, n); /* Cramer's rule */
    for (int c = 0; c < k; c++)
        for (int i = 0; i < n; i++) {
            double t[9];
            memcpy(t, ata, sizeof t);
            for (int r = 0; r < n; r++) t[r * n + i] = atb[r * k + c];
            ref[i * k + c] = det_ref(t, n) / det;
        }
    static const char *const drivers[] = {"gelsy", "gelsd", "gelss", "gels"};
    for (int di = 0; di < 4; di++) {
        ts_tensor *res = NULL, *rank = NULL, *sv = NULL;
        ts_tensor *X = ts_linalg_lstsq(A, Bm, -1, drivers[di], &res, &rank, &sv);
        CHECK(has_shape(X, TS_SHAPE(n, k)) && rd(X, got) && max_diff(got, ref, n * k) < tol);
        CHECK(has_shape(rank, di == 3 ? TS_SHAPE(0) : TS_SHAPE()));
        if (di < 3) CHECK(ts_item(rank) == n);
        CHECK(has_shape(sv, di == 1 || di == 2 ? TS_SHAPE(n) : TS_SHAPE(0)));
        CHECK(has_shape(res, di == 0 ? TS_SHAPE(0) : TS_SHAPE(k)));
        if (di > 0 && rd(res, got2))
            for (int c = 0; c < k; c++) {
                double rs = 0;
                for (int l = 0; l < m; l++) {
                    double e = -b64[l * k + c];
                    for (int i = 0; i < n; i++) e += a64[l * n + i] * ref[i * k + c];
                    rs += e * e;
                }
                CHECK_NEAR(got2[c], rs, tol * (1 + rs));
            }
    }
    /* no unknowns (n = 0): the solution is empty, the residuals are |B|^2 (gelsd) */
    {
        ts_tensor *res = NULL, *rank = NULL, *sv = NULL;
        ts_tensor *A0 = ts_zeros(TS_SHAPE(m, 0), (ts_opts){.dtype = dt, .device = d});
        ts_tensor *X0 = ts_linalg_lstsq(A0, Bm, -1, "gelsd", &res, &rank, &sv);
        CHECK(has_shape(X0, TS_SHAPE(0, k)) && has_shape(res, TS_SHAPE(k)) && rd(res, got));
        for (int c = 0; c < k; c++) {
            double rs = 0;
            for (int l = 0; l < m; l++) rs += b64[l * k + c] * b64[l * k + c];
            CHECK_NEAR(got[c], rs, tol * rs);
        }
    }
    /* pinv: the Moore-Penrose conditions, tall, wide and hermitian; of a rank-1 matrix */
    for (int c = 0; c < 3; c++) {
        const int64_t mm_ = c == 1 ? n : m, nn = c == 1 ? m : n;
        ts_tensor *M = c == 1 ? ts_transpose(A, 0, 1) : A;
        if (c == 2) M = ts_matmul(A, ts_transpose(A, 0, 1)); /* 6 x 6 of rank 3, symmetric */
        const int64_t r_ = c == 2 ? m : mm_, c_ = c == 2 ? m : nn;
        ts_tensor *P = ts_linalg_pinv(M, -1, c == 2 ? 1e-5 : -1, c == 2);
        double mv[64], pv[64], t1[64], t2[64];
        CHECK(has_shape(P, TS_SHAPE(c_, r_)));
        if (!rd(M, mv) || !rd(P, pv)) continue;
        mm(mv, pv, t1, r_, c_, r_);
        mm(t1, mv, t2, r_, r_, c_);
        CHECK(max_diff(t2, mv, r_ * c_) < tol * 8);
        mm(pv, mv, t1, c_, r_, c_);
        mm(t1, pv, t2, c_, c_, r_);
        CHECK(max_diff(t2, pv, r_ * c_) < tol * 8);
        ts_tensor *rk = ts_linalg_matrix_rank(M, -1, c == 2 ? 1e-5 : -1, c == 2);
        CHECK(rk && ts_dtype_of(rk) == TS_I64 && ts_item(rk) == 3);
    }
    double ones[6] = {1, 1, 1, 1, 1, 1};
    ts_tensor *P1 = ts_linalg_pinv(mk(TS_SHAPE(2, 3), ones, dt, d), 0.1, -1, false);
    CHECK(rd(P1, got));
    for (int i = 0; i < 6; i++) CHECK_NEAR(got[i], 1.0 / 6.0, tol);
    ts_tensor *rk1 = ts_linalg_matrix_rank(mk(TS_SHAPE(2, 3), ones, dt, d), -1, -1, false);
    CHECK(rk1 && ts_item(rk1) == 1);
    CHECK_OK();
}

/* ------------------------------------------------------------------ matrix functions */
static void test_matrix_functions(ts_device d, ts_dtype dt) {
    const int64_t n = 3;
    const double tol = tol_of(dt, n) * 64;
    fill(buf_a, n * n, 13);
    for (int i = 0; i < n * n; i++) buf_a[i] *= 0.4;
    ts_tensor *A = mk(TS_SHAPE(n, n), buf_a, dt, d);
    double a64[9], ref[9], term[9], t2[9];
    rd(A, a64);
    /* exp by a Taylor series (norm < 1.2: 30 terms reach float64) */
    for (int i = 0; i < 9; i++) ref[i] = term[i] = i % 4 == 0;
    for (int p = 1; p < 30; p++) {
        mm(term, a64, t2, n, n, n);
        for (int i = 0; i < 9; i++) term[i] = t2[i] / p, ref[i] += term[i];
    }
    CHECK(rd(ts_linalg_matrix_exp(A), got) && max_diff(got, ref, 9) < tol);
    /* a rotation generator of norm 7 (scaling and squaring), batched with a zero matrix */
    double rot[8] = {0, 7, -7, 0, 0, 0, 0, 0};
    ts_tensor *E = ts_linalg_matrix_exp(mk(TS_SHAPE(2, 2, 2), rot, dt, d));
    double er[8] = {cos(7), sin(7), -sin(7), cos(7), 1, 0, 0, 1};
    CHECK(rd(E, got) && max_diff(got, er, 8) < tol * 4);
    /* matrix_power: 0, 1, 5 and -2 against products */
    for (int p = -2; p <= 5; p++) {
        if (p == -1 || (p > 1 && p < 5)) continue;
        ts_tensor *Pw = ts_linalg_matrix_power(A, p);
        double acc[9];
        for (int i = 0; i < 9; i++) acc[i] = i % 4 == 0;
        const double *base = a64;
        double inv[9];
        if (p < 0) {
            rd(ts_linalg_inv(mk(TS_SHAPE(n, n), a64, TS_F64, ts_cpu())), inv);
            base = inv;
        }
        for (int q = 0; q < abs(p); q++) {
            mm(acc, base, t2, n, n, n);
            memcpy(acc, t2, sizeof acc);
        }
        CHECK(rd(Pw, got) && max_diff(got, acc, 9) < tol * 4);
    }
    /* cond in the other orders: ||A|| ||A^-1|| */
    ts_tensor *cf = ts_linalg_cond(A, "fro");
    ts_tensor *ref_c =
        ts_mul(ts_matrix_norm(A, "fro", -2, -1, false, TS_DTYPE_DEFAULT),
               ts_matrix_norm(ts_linalg_inv(A), "fro", -2, -1, false, TS_DTYPE_DEFAULT));
    CHECK(cf && ref_c && fabs(ts_item(cf) - ts_item(ref_c)) < tol * ts_item(ref_c));
    double sing[4] = {1, 2, 2, 4};
    ts_tensor *cs = ts_linalg_cond(mk(TS_SHAPE(2, 2), sing, dt, d), "1");
    CHECK(cs && isinf(ts_item(cs)));
    CHECK_OK();
}

/* ------------------------------------------------------------------ gradients */
typedef ts_tensor *(*gfn)(ts_tensor *const *x, int n, void *ctx);
static ts_tensor *flat(ts_tensor *t) { return ts_reshape(t, TS_SHAPE(-1)); }
static ts_tensor *cat2(ts_tensor *a, ts_tensor *b) {
    ts_tensor *p[2] = {flat(a), flat(b)};
    return ts_cat(p, 2, 0);
}
static ts_tensor *sym(ts_tensor *x) { return ts_add(x, ts_transpose(x, -2, -1)); }
static ts_tensor *spd(ts_tensor *x) {
    int64_t n = ts_shape_of(x).dims[ts_shape_of(x).ndim - 1];
    return ts_add(ts_matmul(x, ts_transpose(x, -2, -1)),
                  ts_mul_scalar(ts_eye(n, 0, (ts_opts){.dtype = TS_F64}), (double)n));
}
static ts_tensor *g_inv(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    return ts_linalg_inv(x[0]);
}
static ts_tensor *g_solve(ts_tensor *const *x, int n, void *c) {
    (void)n;
    return ts_linalg_solve(x[0], x[1], c != NULL);
}
static ts_tensor *g_det(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    ts_tensor *l = NULL;
    ts_linalg_slogdet(x[0], &l);
    return cat2(ts_linalg_det(x[0]), l);
}
static ts_tensor *g_chol(ts_tensor *const *x, int n, void *c) {
    (void)n;
    return ts_linalg_cholesky(spd(x[0]), c != NULL);
}
static ts_tensor *g_tri(ts_tensor *const *x, int n, void *c) {
    (void)n;
    const int f = (int)(intptr_t)c;
    return ts_linalg_solve_triangular(x[0], x[1], f & 1, !(f & 2), f & 4);
}
static ts_tensor *g_qr(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    ts_tensor *R = NULL, *Q = ts_linalg_qr(x[0], "reduced", &R);
    return cat2(Q, R);
}
static ts_tensor *g_svd(ts_tensor *const *x, int n, void *c) { /* sign-invariant outputs */
    (void)n;
    ts_tensor *S = NULL, *Vh = NULL, *U = ts_linalg_svd(x[0], c != NULL, &S, &Vh);
    int64_t k = ts_shape_of(S).dims[ts_shape_of(S).ndim - 1];
    ts_tensor *w = ts_arange(1, (double)k + 1, 1, (ts_opts){.dtype = TS_F64});
    U = ts_narrow(U, -1, 0, k), Vh = ts_narrow(Vh, -2, 0, k);
    ts_tensor *pu = ts_matmul(ts_mul(U, w), ts_transpose(U, -2, -1));
    ts_tensor *pv = ts_matmul(ts_mul(ts_transpose(Vh, -2, -1), w), Vh);
    return cat2(cat2(pu, pv), S);
}
static ts_tensor *g_eigh(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    ts_tensor *V = NULL, *L = ts_linalg_eigh(sym(x[0]), "L", &V);
    ts_tensor *pv =
        ts_matmul(ts_mul(V, ts_unsqueeze(ts_arange(1, 4, 1, (ts_opts){.dtype = TS_F64}), 0)),
                  ts_transpose(V, -2, -1));
    return cat2(L, pv);
}
static ts_tensor *g_pinv(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    return ts_linalg_pinv(x[0], -1, -1, false);
}
static ts_tensor *g_lstsq(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    return ts_linalg_lstsq(x[0], x[1], -1, "gelsd", NULL, NULL, NULL);
}
static ts_tensor *g_exp(ts_tensor *const *x, int n, void *c) {
    (void)n;
    return ts_linalg_matrix_exp(c ? ts_mul_scalar(x[0], 6.0) : x[0]);
}
static ts_tensor *g_lu(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    ts_tensor *L = NULL, *U = NULL;
    ts_linalg_lu(x[0], &L, &U);
    return cat2(L, U);
}
static ts_tensor *g_lu_factor(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    ts_tensor *piv = NULL;
    return ts_linalg_lu_factor_ex(x[0], &piv, NULL);
}
static ts_tensor *g_slogdet_sign(ts_tensor *const *x, int n, void *c) { /* sign: zero gradient */
    (void)n, (void)c;
    ts_tensor *l = NULL, *s = ts_linalg_slogdet(x[0], &l);
    return ts_add(ts_mul_scalar(s, 2.0), l);
}
static ts_tensor *g_norms(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    ts_tensor *a = ts_matrix_norm(x[0], "nuc", -2, -1, false, TS_DTYPE_DEFAULT);
    ts_tensor *b = ts_matrix_norm(x[0], "2", -2, -1, false, TS_DTYPE_DEFAULT);
    return cat2(cat2(a, b), ts_linalg_cond(x[0], NULL));
}
static ts_tensor *g_chol_solve(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    return ts_cholesky_solve(x[1], ts_linalg_cholesky(spd(x[0]), false), false);
}
static ts_tensor *g_power(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    return cat2(cat2(ts_linalg_matrix_power(x[0], 3), ts_linalg_matrix_power(x[0], -2)),
                ts_linalg_matrix_power(x[0], 0));
}

static void test_grads(void) {
    struct {
        const char *name;
        gfn f;
        void *ctx;
        ts_shape a, b;
        bool dominant;
    } cases[] = {
        {"inv", g_inv, NULL, TS_SHAPE(2, 3, 3), TS_SHAPE(0), true},
        {"solve", g_solve, (void *)1, TS_SHAPE(2, 3, 3), TS_SHAPE(3, 2), true},
        {"solve right", g_solve, NULL, TS_SHAPE(3, 3), TS_SHAPE(2, 3), true},
        {"det slogdet", g_det, NULL, TS_SHAPE(2, 3, 3), TS_SHAPE(0), true},
        {"cholesky", g_chol, NULL, TS_SHAPE(2, 3, 3), TS_SHAPE(0), false},
        {"cholesky upper", g_chol, (void *)1, TS_SHAPE(3, 3), TS_SHAPE(0), false},
        {"solve_triangular lower", g_tri, (void *)0, TS_SHAPE(3, 3), TS_SHAPE(3, 2), true},
        {"solve_triangular upper unit", g_tri, (void *)5, TS_SHAPE(3, 3), TS_SHAPE(3, 2), true},
        {"solve_triangular right", g_tri, (void *)3, TS_SHAPE(3, 3), TS_SHAPE(2, 3), true},
        {"qr tall", g_qr, NULL, TS_SHAPE(2, 4, 3), TS_SHAPE(0), false},
        {"qr wide", g_qr, NULL, TS_SHAPE(3, 5), TS_SHAPE(0), false},
        {"svd tall", g_svd, NULL, TS_SHAPE(4, 3), TS_SHAPE(0), false},
        {"svd wide full", g_svd, (void *)1, TS_SHAPE(2, 3, 4), TS_SHAPE(0), false},
        {"eigh", g_eigh, NULL, TS_SHAPE(3, 3), TS_SHAPE(0), false},
        {"pinv tall", g_pinv, NULL, TS_SHAPE(4, 3), TS_SHAPE(0), false},
        {"pinv wide", g_pinv, NULL, TS_SHAPE(2, 3, 4), TS_SHAPE(0), false},
        {"lstsq", g_lstsq, NULL, TS_SHAPE(5, 3), TS_SHAPE(5, 2), false},
        {"matrix_exp", g_exp, NULL, TS_SHAPE(3, 3), TS_SHAPE(0), false},
        {"matrix_exp scaled", g_exp, (void *)1, TS_SHAPE(2, 2), TS_SHAPE(0), false},
        {"lu", g_lu, NULL, TS_SHAPE(3, 3), TS_SHAPE(0), false},
        {"lu tall", g_lu, NULL, TS_SHAPE(2, 5, 3), TS_SHAPE(0), false},
        {"lu wide", g_lu, NULL, TS_SHAPE(3, 5), TS_SHAPE(0), false},
        {"lu_factor", g_lu_factor, NULL, TS_SHAPE(2, 4, 4), TS_SHAPE(0), false},
        {"lu_factor wide", g_lu_factor, NULL, TS_SHAPE(3, 4), TS_SHAPE(0), false},
        {"slogdet sign", g_slogdet_sign, NULL, TS_SHAPE(3, 3), TS_SHAPE(0), true},
        {"matrix_norm nuc 2, cond", g_norms, NULL, TS_SHAPE(4, 3), TS_SHAPE(0), false},
        {"cholesky_solve", g_chol_solve, NULL, TS_SHAPE(3, 3), TS_SHAPE(3, 2), false},
        {"matrix_power", g_power, NULL, TS_SHAPE(3, 3), TS_SHAPE(0), true},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        ts_scope_begin();
        const int64_t na = numel_of(cases[c].a), nb = cases[c].b.ndim ? numel_of(cases[c].b) : 0;
        fill(buf_a, na, (int)c + 20);
        if (cases[c].dominant) {
            const int64_t n = cases[c].a.dims[cases[c].a.ndim - 1];
            fill_dominant(buf_a, na / (n * n), n, (int)c + 20);
        }
        fill(buf_b, nb > 0 ? nb : 1, (int)c + 40);
        ts_tensor *x[2] = {ts_tensor_f64(cases[c].a, buf_a, (ts_opts){.dtype = TS_F64}),
                           nb ? ts_tensor_f64(cases[c].b, buf_b, (ts_opts){.dtype = TS_F64})
                              : NULL};
        ts_set_requires_grad(x[0], true);
        if (x[1]) ts_set_requires_grad(x[1], true);
        bool ok = ts_gradcheck(cases[c].f, cases[c].ctx, x, nb ? 2 : 1,
                               (ts_gradcheck_opts){.atol = 1e-6, .rtol = 1e-4});
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "gradcheck %s%s", cases[c].name, ts_test_error_str());
        ts_error_clear();
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ refusals */
static void test_errors(void) {
    double v[16] = {1, 2, 2, 4, 0, 0, 0, 0, 1, 0, 0, 1};
    ts_tensor *sing = ts_tensor_f64(TS_SHAPE(2, 2), v, (ts_opts){.dtype = TS_F64});
    ts_tensor *rect = ts_tensor_f64(TS_SHAPE(2, 3), v, (ts_opts){.dtype = TS_F64});
    ts_tensor *vec = ts_tensor_f64(TS_SHAPE(3), v, (ts_opts){.dtype = TS_F64});
    ts_tensor *b2 = ts_tensor_f64(TS_SHAPE(3, 2, 2), v, (ts_opts){.dtype = TS_F64});
    CHECK(!ts_linalg_inv(sing));
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.inv: The diagonal element 2 is zero, the inversion could "
                              "not be completed because the input matrix is singular.");
    CHECK(!ts_linalg_inv(b2)); /* the second matrix is zero */
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.inv: (Batch element 0): The diagonal element 2 is zero");
    ts_tensor *info = NULL;
    CHECK(ts_linalg_inv_ex(b2, &info) && info && ts_numel(info) == 3);
    int32_t iv[3] = {-1, -1, -1};
    CHECK(info && ts_copy_to_host(info, iv, sizeof iv) == TS_OK && iv[0] == 2 && iv[1] == 1 &&
          iv[2] == 0);
    CHECK(!ts_linalg_solve(sing, vec, true));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "linalg.solve: Incompatible shapes of A and B");
    CHECK(!ts_linalg_solve(sing, ts_narrow(vec, 0, 0, 2), true));
    CHECK_ERR_HAS(TS_ERR_ARG, "torch.linalg.solve: The solver failed because the input matrix is "
                              "singular.");
    CHECK(!ts_linalg_solve(b2, ts_ones(TS_SHAPE(2, 2, 1), (ts_opts){.dtype = TS_F64}), true));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "linalg.solve");
    CHECK(!ts_linalg_inv(rect));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "linalg.inv: A must be batches of square matrices, but they are 2 "
                                "by 3 matrices");
    CHECK(!ts_linalg_det(vec));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "linalg.det: The input tensor A must have at least 2 dimensions.");
    CHECK(!ts_linalg_cholesky(ts_neg(ts_eye(3, 0, (ts_opts){.dtype = TS_F64})), false));
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.cholesky: The factorization could not be completed because "
                              "the input is not positive-definite (the leading minor of order 1 "
                              "is not positive-definite).");
    CHECK(!ts_linalg_svd(ts_ones(TS_SHAPE(2, 2), (ts_opts){.dtype = TS_I64}), false, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "linalg.svd: Expected a floating point or complex tensor as input. "
                                "Got Long");
    CHECK(!ts_linalg_qr(ts_ones(TS_SHAPE(2, 2), (ts_opts){.dtype = TS_F16}), NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "linalg.qr: Low precision dtypes not supported. Got Half");
    CHECK(!ts_linalg_qr(rect, "thin", NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "qr received unrecognized mode 'thin'");
    CHECK(!ts_linalg_eigh(sing, "X", NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.eigh: Expected UPLO argument to be 'L' or 'U'");
    CHECK(!ts_linalg_lstsq(rect, vec, -1, "gelsq", NULL, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "parameter `driver` should be one of");
    CHECK(!ts_linalg_solve(sing, ts_ones(TS_SHAPE(2), (ts_opts){.dtype = TS_F32}), true));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "linalg.solve: Expected A and B to have the same dtype");
    CHECK(!ts_linalg_lu_factor_ex(sing, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "torch.linalg.lu_factor: U[2,2] is zero");
    CHECK(!ts_linalg_inv(NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.inv: A is NULL");
    if (ndev > 1) { /* operands on two devices */
        ts_tensor *other = ts_to(ts_eye(2, 0, (ts_opts){.dtype = TS_F64}), devs[1]);
        CHECK(!ts_linalg_solve(other, ts_narrow(vec, 0, 0, 2), true));
        CHECK_ERR(TS_ERR_DEVICE);
    }
    /* the errors of *_ex go to info: cholesky_ex of a batch */
    CHECK(ts_linalg_cholesky_ex(b2, false, &info) && info);
    CHECK(ts_copy_to_host(info, iv, sizeof iv) == TS_OK && iv[0] == 2 && iv[1] == 1 && iv[2] == 0);
    CHECK_OK();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int di = 0; di < ndev; di++)
        for (int t = 0; t < 2; t++) {
            const ts_dtype dt = t ? TS_F32 : TS_F64;
            ts_scope_begin();
            test_lu_family(devs[di], dt);
            test_cholesky_family(devs[di], dt);
            test_orth(devs[di], dt);
            test_least_squares(devs[di], dt);
            test_matrix_functions(devs[di], dt);
            ts_scope_end();
            CHECK_OK();
        }
    ts_scope_begin();
    test_grads();
    test_errors();
    ts_scope_end();
    CHECK_OK();
    return ts_test_finish();
}
