/* test_linalg_forms.c — the linalg forms composed in C (include/tessera/linalg.h's issue-76 block:
 * src/ops/linalg_norm.c, linalg_tensor.c, linalg_householder.c, linalg_vander.c,
 * linalg_rank_svd.c) on every device in float64 against float64 host loops: linalg.norm's
 * dispatch, vecdot, vander, tensorinv / tensorsolve by their defining identities, the reflector
 * product by hand, torch.svd's V and zero-filled forms, matrix_rank with tolerance tensors; their
 * gradients by ts_gradcheck (central differences); the refusals naming op and argument. */
#include <math.h>
#include <string.h>

#include "host_values.h"
#include "tessera.h"
#include "tessera/linalg.h"
#include "ts_test.h"

#define MAXV 512
static double a[MAXV], b[MAXV], got[MAXV];
#define mk(s, v, d) ts_test_tensor_f64(s, v, TS_F64, d)
#define rd(t)       ts_test_read_f64(t, got, MAXV)

static void test_norm(ts_device d) {
    ts_test_fill_uniform(a, 12, 1);
    ts_tensor *A = mk(TS_SHAPE(3, 4), a, d);
    double fro = 0, one = 0, r0[3] = {0};
    for (int i = 0; i < 12; i++) fro += a[i] * a[i];
    for (int j = 0; j < 4; j++) {
        double c = 0;
        for (int i = 0; i < 3; i++) c += fabs(a[i * 4 + j]);
        one = c > one ? c : one;
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) r0[i] += a[i * 4 + j] * a[i * 4 + j];
    /* ord None, no dim: the 2-norm of the flattened input */
    CHECK(rd(ts_linalg_norm(A, NULL, NULL, false, TS_DTYPE_DEFAULT)) &&
          ts_test_near(got[0], sqrt(fro), 1e-14));
    /* ord 1 on a 2-D input: the matrix 1-norm (largest column sum) */
    CHECK(rd(ts_linalg_norm(A, "1", NULL, false, TS_DTYPE_DEFAULT)) &&
          ts_test_near(got[0], one, 1e-14));
    /* ord 2 over dim 1: vector norms of the rows */
    ts_dims d1 = {.n = 1, .d = {1}};
    CHECK(rd(ts_linalg_norm(A, "2", &d1, false, TS_DTYPE_DEFAULT)));
    for (int i = 0; i < 3; i++) CHECK(ts_test_near(got[i], sqrt(r0[i]), 1e-14));
    /* no ord, two dims: Frobenius */
    ts_dims d2 = {.n = 2, .d = {0, 1}};
    CHECK(rd(ts_linalg_norm(A, NULL, &d2, false, TS_DTYPE_DEFAULT)) &&
          ts_test_near(got[0], sqrt(fro), 1e-14));
    /* ord 3 of a 1-D input */
    ts_tensor *x = mk(TS_SHAPE(12), a, d);
    double s3 = 0;
    for (int i = 0; i < 12; i++) s3 += fabs(a[i]) * fabs(a[i]) * fabs(a[i]);
    CHECK(rd(ts_linalg_norm(x, "3", NULL, false, TS_DTYPE_DEFAULT)) &&
          ts_test_near(got[0], cbrt(s3), 1e-14));
    CHECK(rd(ts_linalg_norm(x, "inf", NULL, false, TS_DTYPE_DEFAULT)));
    double mx = 0;
    for (int i = 0; i < 12; i++) mx = fabs(a[i]) > mx ? fabs(a[i]) : mx;
    CHECK(got[0] == mx);
    /* an ord without dim needs a 1-D or 2-D input */
    CHECK(!ts_linalg_norm(ts_reshape(x, TS_SHAPE(2, 3, 2)), "2", NULL, false, TS_DTYPE_DEFAULT));
    CHECK_ERR_HAS(
        TS_ERR_SHAPE,
        "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got 3D.");
    CHECK(!ts_linalg_norm(A, "abc", NULL, false, TS_DTYPE_DEFAULT));
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.norm: ord must be a number");
    CHECK(!ts_linalg_norm(x, "", NULL, false, TS_DTYPE_DEFAULT)); /* not ord 0 */
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.norm: ord must be a number, 'fro' or 'nuc', got ''");
    CHECK_OK();
}

static void test_vecdot_vander(ts_device d) {
    ts_test_fill_uniform(a, 6, 2), ts_test_fill_uniform(b, 3, 3);
    ts_tensor *x = mk(TS_SHAPE(2, 3), a, d), *y = mk(TS_SHAPE(3), b, d);
    CHECK(rd(ts_linalg_vecdot(x, y, -1)));
    for (int i = 0; i < 2; i++)
        CHECK(ts_test_near(got[i], a[i * 3] * b[0] + a[i * 3 + 1] * b[1] + a[i * 3 + 2] * b[2],
                           1e-15));
    /* complex: the first operand conjugated, sum(conj(x) * y) */
    double xc[4] = {1, 2, 3, -1}, yc[4] = {0.5, -1, 2, 0.25}; /* (1+2i, 3-i), (0.5-i, 2+0.25i) */
    ts_tensor *zx = ts_view_as_complex(mk(TS_SHAPE(2, 2), xc, d));
    ts_tensor *zy = ts_view_as_complex(mk(TS_SHAPE(2, 2), yc, d));
    /* conj(1+2i)(0.5-i) + conj(3-i)(2+0.25i) = (-1.5-2i) + (5.75+2.75i) */
    CHECK(rd(ts_view_as_real(ts_linalg_vecdot(zx, zy, 0))) && ts_test_near(got[0], 4.25, 1e-15) &&
          ts_test_near(got[1], 0.75, 1e-15));
    CHECK(!ts_linalg_vecdot(x, y, 2));
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.vecdot: dimension out of range");
    CHECK(!ts_linalg_vecdot(NULL, y, -1));
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.vecdot: x is NULL");
    CHECK(!ts_linalg_vecdot(x, NULL, -1));
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.vecdot: y is NULL");
    ts_tensor *V = ts_linalg_vander(y, 4);
    CHECK(ts_test_shape_is(V, TS_SHAPE(3, 4)) && rd(V));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) CHECK(ts_test_near(got[i * 4 + j], pow(b[i], j), 1e-15));
    CHECK(ts_test_shape_is(ts_linalg_vander(x, -1), TS_SHAPE(2, 3, 3)));
    CHECK(!ts_linalg_vander(y, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.vander: N must be greater than 1.");
    CHECK_OK();
}

static void test_tensor_solvers(ts_device d) {
    /* A [2, 3, 6]: a well-conditioned 6 x 6 matrix reshaped */
    ts_test_fill_uniform(a, 36, 4);
    for (int i = 0; i < 6; i++) a[i * 6 + i] += 6;
    ts_tensor *A = mk(TS_SHAPE(2, 3, 6), a, d);
    ts_tensor *Ai = ts_linalg_tensorinv(A, 2);
    CHECK(ts_test_shape_is(Ai, TS_SHAPE(6, 2, 3)) && rd(Ai));
    for (int i = 0; i < 6; i++) /* A (6x6) times Ai (6x6) = I */
        for (int j = 0; j < 6; j++) {
            double s = 0;
            for (int k = 0; k < 6; k++) s += a[i * 6 + k] * got[k * 6 + j];
            CHECK(ts_test_near(s, i == j, 1e-13));
        }
    ts_test_fill_uniform(b, 6, 5);
    ts_tensor *B = mk(TS_SHAPE(2, 3), b, d);
    ts_tensor *X = ts_linalg_tensorsolve(A, B, NULL);
    CHECK(ts_test_shape_is(X, TS_SHAPE(6)) && rd(X));
    for (int i = 0; i < 6; i++) {
        double s = 0;
        for (int k = 0; k < 6; k++) s += a[i * 6 + k] * got[k];
        CHECK(ts_test_near(s, b[i], 1e-13));
    }
    /* dims moves dim 0 of A' [6, 2, 3] to the end: the same system as A */
    ts_tensor *Ap = ts_contiguous(ts_permute(A, TS_DIMS(2, 0, 1)));
    ts_dims dm = {.n = 1, .d = {0}};
    ts_tensor *Y = ts_linalg_tensorsolve(Ap, B, &dm);
    double x0[6];
    memcpy(x0, got, sizeof x0);
    CHECK(ts_test_shape_is(Y, TS_SHAPE(6)) && rd(Y));
    for (int i = 0; i < 6; i++) CHECK(ts_test_near(got[i], x0[i], 1e-13));
    /* two dims moved, in the order given: A' [2, 3, 2, 3] = A4 permuted (2, 3, 0, 1) */
    ts_tensor *A4 = ts_reshape(A, TS_SHAPE(2, 3, 2, 3));
    ts_tensor *Ap4 = ts_contiguous(ts_permute(A4, TS_DIMS(2, 3, 0, 1)));
    ts_dims dm2 = {.n = 2, .d = {0, 1}};
    ts_tensor *Z = ts_linalg_tensorsolve(Ap4, B, &dm2);
    CHECK(ts_test_shape_is(Z, TS_SHAPE(2, 3)) && rd(Z));
    for (int i = 0; i < 6; i++) CHECK(ts_test_near(got[i], x0[i], 1e-13));
    CHECK(!ts_linalg_tensorinv(A, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.tensorinv: Expected a strictly positive integer for 'ind'");
    CHECK(!ts_linalg_tensorinv(A, 1));
    CHECK_ERR_HAS(TS_ERR_SHAPE,
                  "prod(self.shape[ind:]) == prod(self.shape[:ind]), but got 18 != 2");
    CHECK_OK();
}

/* H_1 ... H_k by hand in double: Q (m x m), returns the first n columns in q */
static void householder_ref(const double *A, const double *tau, int m, int n, int k, double *q) {
    double Q[64];
    for (int i = 0; i < m * m; i++) Q[i] = i / m == i % m;
    for (int r = 0; r < k; r++) {
        double v[8];
        for (int i = 0; i < m; i++) v[i] = i < r ? 0 : i == r ? 1 : A[i * n + r];
        double w[8];
        for (int i = 0; i < m; i++) {
            w[i] = 0;
            for (int j = 0; j < m; j++) w[i] += Q[i * m + j] * v[j];
        }
        for (int i = 0; i < m; i++)
            for (int j = 0; j < m; j++) Q[i * m + j] -= tau[r] * w[i] * v[j];
    }
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) q[i * n + j] = Q[i * m + j];
}

static void test_householder_svd(ts_device d) {
    ts_test_fill_uniform(a, 12, 6), ts_test_fill_uniform(b, 2, 7);
    ts_tensor *A = mk(TS_SHAPE(4, 3), a, d), *tau = mk(TS_SHAPE(2), b, d);
    double q[12];
    householder_ref(a, b, 4, 3, 2, q);
    CHECK(rd(ts_linalg_householder_product(A, tau)));
    for (int i = 0; i < 12; i++) CHECK(ts_test_near(got[i], q[i], 1e-14));
    CHECK(!ts_linalg_householder_product(ts_transpose(A, 0, 1), tau));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "input.shape[-2] must be greater than or equal to input.shape[-1]");
    /* torch.svd: A = U diag(S) V^T with V (not Vh) */
    ts_tensor *S = NULL, *V = NULL, *U = ts_svd(A, true, true, &S, &V);
    CHECK(ts_test_shape_is(U, TS_SHAPE(4, 3)) && ts_test_shape_is(V, TS_SHAPE(3, 3)));
    CHECK(rd(ts_matmul(ts_mul(U, S), ts_transpose(V, 0, 1))));
    for (int i = 0; i < 12; i++) CHECK(ts_test_near(got[i], a[i], 1e-14));
    U = ts_svd(A, false, false, &S, &V);
    CHECK(ts_test_shape_is(U, TS_SHAPE(4, 4)) && ts_test_shape_is(V, TS_SHAPE(3, 3)) &&
          ts_test_shape_is(S, TS_SHAPE(3)));
    CHECK(rd(U) && got[0] == 0 && got[15] == 0);
    /* matrix_rank with a tolerance per matrix: diag(3, 1, 0.1) twice, atol (0.5, 0.05) */
    double m2[18] = {3, 0, 0, 0, 1, 0, 0, 0, 0.1, 3, 0, 0, 0, 1, 0, 0, 0, 0.1}, at[2] = {0.5, 0.05};
    ts_tensor *M = mk(TS_SHAPE(2, 3, 3), m2, d), *atol = mk(TS_SHAPE(2), at, d);
    CHECK(rd(ts_linalg_matrix_rank_tol(M, atol, NULL, false)) && got[0] == 2 && got[1] == 3);
    double rt[2] = {0.5, 0.01}; /* rtol * 3: 1.5 and 0.03 */
    CHECK(rd(ts_linalg_matrix_rank_tol(M, NULL, mk(TS_SHAPE(2), rt, d), true)) && got[0] == 1 &&
          got[1] == 3);
    /* both tolerances: max(atol, rtol * 3) = (1.5, 0.05) */
    double a2[2] = {0.05, 0.05}, r2[2] = {0.5, 0};
    CHECK(rd(ts_linalg_matrix_rank_tol(M, mk(TS_SHAPE(2), a2, d), mk(TS_SHAPE(2), r2, d), false)) &&
          got[0] == 1 && got[1] == 3);
    /* atol given, rtol absent: rtol 0 (not eps * max(m, n)), so 1e-16 counts */
    double m3[9] = {3, 0, 0, 0, 1, 0, 0, 0, 1e-16}, a3[1] = {1e-20};
    CHECK(rd(ts_linalg_matrix_rank_tol(mk(TS_SHAPE(3, 3), m3, d), mk(TS_SHAPE(1), a3, d), NULL,
                                       false)) &&
          got[0] == 3);
    CHECK(rd(ts_linalg_matrix_rank_tol(mk(TS_SHAPE(3, 3), m3, d), NULL, NULL, false)) &&
          got[0] == 2);
    /* the default rtol by dtype: float64's eps * 3 * 3 = 2e-15 keeps 1e-10 (float32's would not) */
    double m4[9] = {3, 0, 0, 0, 1, 0, 0, 0, 1e-10};
    CHECK(rd(ts_linalg_matrix_rank_tol(mk(TS_SHAPE(3, 3), m4, d), NULL, NULL, false)) &&
          got[0] == 3);
    CHECK_OK();
}

/* gradients (float64 central differences) */
static ts_tensor *g_norm(ts_tensor *const *x, int n, void *c) {
    (void)n;
    ts_dims d1 = {.n = 1, .d = {1}};
    return ts_add(
        ts_sum(ts_linalg_norm(x[0], c ? "nuc" : "3", c ? NULL : &d1, false, TS_DTYPE_DEFAULT)),
        ts_linalg_norm(x[0], NULL, NULL, false, TS_DTYPE_DEFAULT));
}
static ts_tensor *g_vecdot(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    return ts_linalg_vecdot(x[0], x[1], -1);
}
static ts_tensor *g_vander(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    return ts_linalg_vander(x[0], 4);
}
static ts_tensor *g_tinv(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    return ts_linalg_tensorinv(
        ts_add(x[0],
               ts_mul_scalar(
                   ts_reshape(ts_eye(6, 6, (ts_opts){.dtype = TS_F64}), TS_SHAPE(2, 3, 6)), 6)),
        2);
}
static ts_tensor *g_tsolve(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    ts_tensor *A = ts_add(
        x[0],
        ts_mul_scalar(ts_reshape(ts_eye(6, 6, (ts_opts){.dtype = TS_F64}), TS_SHAPE(2, 3, 6)), 6));
    return ts_linalg_tensorsolve(A, x[1], NULL);
}
static ts_tensor *g_house(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    return ts_linalg_householder_product(x[0], x[1]);
}
static ts_tensor *g_svd(ts_tensor *const *x, int n, void *c) {
    (void)n, (void)c;
    ts_tensor *S = NULL, *V = NULL, *U = ts_svd(x[0], true, true, &S, &V);
    return U ? ts_add(ts_sum(ts_mul(S, S)), ts_sum(ts_abs(ts_matmul(U, ts_transpose(V, 0, 1)))))
             : NULL;
}

static void test_grads(void) {
    struct {
        const char *name;
        ts_gradcheck_fn f;
        void *ctx;
        ts_shape sa, sb;
    } cases[] = {
        {"norm", g_norm, NULL, TS_SHAPE(3, 4), TS_SHAPE(0)},
        {"norm nuc", g_norm, (void *)1, TS_SHAPE(3, 4), TS_SHAPE(0)},
        {"vecdot", g_vecdot, NULL, TS_SHAPE(2, 3), TS_SHAPE(3)},
        {"vander", g_vander, NULL, TS_SHAPE(2, 3), TS_SHAPE(0)},
        {"tensorinv", g_tinv, NULL, TS_SHAPE(2, 3, 6), TS_SHAPE(0)},
        {"tensorsolve", g_tsolve, NULL, TS_SHAPE(2, 3, 6), TS_SHAPE(2, 3)},
        {"householder_product", g_house, NULL, TS_SHAPE(2, 4, 3), TS_SHAPE(2, 2)},
        {"svd", g_svd, NULL, TS_SHAPE(4, 3), TS_SHAPE(0)},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        ts_scope_begin();
        int64_t na = 1, nb = 1;
        for (int i = 0; i < cases[c].sa.ndim; i++) na *= cases[c].sa.dims[i];
        for (int i = 0; i < cases[c].sb.ndim; i++) nb *= cases[c].sb.dims[i];
        const bool two = cases[c].sb.ndim > 0;
        ts_test_fill_uniform(a, na, (int)c + 10), ts_test_fill_uniform(b, nb, (int)c + 30);
        ts_tensor *x[2] = {ts_tensor_f64(cases[c].sa, a, (ts_opts){.dtype = TS_F64}),
                           two ? ts_tensor_f64(cases[c].sb, b, (ts_opts){.dtype = TS_F64}) : NULL};
        ts_set_requires_grad(x[0], true);
        if (two) ts_set_requires_grad(x[1], true);
        bool ok = ts_gradcheck(cases[c].f, cases[c].ctx, x, two ? 2 : 1,
                               (ts_gradcheck_opts){.atol = 1e-6, .rtol = 1e-4});
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "gradcheck %s%s", cases[c].name, ts_test_error_str());
        ts_error_clear();
        ts_scope_end();
    }
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < nd; i++) {
        ts_scope_begin();
        test_norm(devs[i]);
        test_vecdot_vander(devs[i]);
        test_tensor_solvers(devs[i]);
        test_householder_svd(devs[i]);
        ts_scope_end();
        CHECK_OK();
    }
    test_grads();
    CHECK_OK();
    return ts_test_finish();
}
