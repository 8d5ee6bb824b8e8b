/* test_linalg_eig.c — linalg.eig / eigvals, linalg.polar and linalg.matrix_sqrth
 * (include/tessera/linalg.h; src/ops/linalg_eig*.c, linalg_polar.c) on every device in float32 and
 * float64 against their defining identities in float64 complex arithmetic (A V = V diag(L) with
 * unit columns; U^T U = I, U H = A, H = H^T, H H = A^T A; X X = A, X = X^T), exact eigenvalues of
 * small matrices, ts_gradcheck of each in float64, the refusals naming the op, and every
 * allocation of all of them (ldl and ormqr too, eig's backward) failed in turn. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_sweep.h"
#include "host_values.h"
#include "tessera.h"
#include "tessera/complex.h"
#include "tessera/linalg.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define MAXV 2048
static double va[MAXV], vb[MAXV], vc[MAXV];

#define fill       ts_test_fill_uniform /* tests/support/host_values.h */
#define mk         ts_test_tensor_f64   /* tests/support/host_values.h */
#define rd(t, out) ts_test_read_f64(t, out, MAXV)
#define is_shape   ts_test_shape_is
/* rounding of the dtype times the order (LAPACK's backward errors) with room */
static double tol_of(ts_dtype dt, int64_t n) {
    return (dt == TS_F32 ? 6e-8 : 1.2e-16) * 64.0 * (double)(n > 0 ? n : 1);
}
/* c = a^T b for n x n / m x n row-major (a: m x p, b: m x q, c: p x q) */
static void mtm(const double *a, const double *b, double *c, int64_t m, int64_t p, int64_t q) {
    for (int64_t i = 0; i < p; i++)
        for (int64_t j = 0; j < q; j++) {
            double s = 0;
            for (int64_t l = 0; l < m; l++) s += a[l * p + i] * b[l * q + j];
            c[i * q + j] = s;
        }
}
static void mm(const double *a, const double *b, double *c, int64_t m, int64_t k, int64_t n) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t l = 0; l < k; l++) s += a[i * k + l] * b[l * n + j];
            c[i * n + j] = s;
        }
}

/* ------------------------------------------------------------------ eig */
static void test_eig(ts_device d, ts_dtype dt) {
    const int64_t B = 2, n = 5;
    const double tol = tol_of(dt, n);
    fill(va, B * n * n, 3); /* general real matrices: complex pairs among the eigenvalues */
    ts_tensor *A = mk(TS_SHAPE(B, n, n), va, dt, d), *V = NULL;
    ts_tensor *L = ts_linalg_eig(A, &V);
    const ts_dtype ct = dt == TS_F32 ? TS_C64 : TS_C128;
    CHECK(is_shape(L, TS_SHAPE(B, n)) && ts_dtype_of(L) == ct && ts_device_of(L).type == d.type);
    CHECK(is_shape(V, TS_SHAPE(B, n, n)) && V && ts_dtype_of(V) == ct);
    double l[2 * 2 * 5], v[2 * 2 * 25];
    bool complex_pair = false;
    if (rd(ts_view_as_real(L), l) && rd(ts_view_as_real(V), v) && rd(A, vb)) {
        for (int64_t b = 0; b < B; b++) {
            double res = 0, norm_err = 0;
            for (int64_t j = 0; j < n; j++) {
                const double complex lj = l[2 * (b * n + j)] + I * l[2 * (b * n + j) + 1];
                complex_pair |= cimag(lj) != 0;
                double nrm = 0;
                for (int64_t i = 0; i < n; i++) {
                    double complex av = 0;
                    for (int64_t k = 0; k < n; k++) {
                        const int64_t e = 2 * ((b * n + k) * n + j);
                        av += vb[(b * n + i) * n + k] * (v[e] + I * v[e + 1]);
                    }
                    const int64_t e = 2 * ((b * n + i) * n + j);
                    const double complex vij = v[e] + I * v[e + 1];
                    res = fmax(res, cabs(av - lj * vij));
                    nrm += creal(vij * conj(vij));
                }
                norm_err = fmax(norm_err, fabs(nrm - 1));
            }
            CHECK(res < tol * 20);
            CHECK(norm_err < tol * 4);
        }
    }
    CHECK(complex_pair); /* the test matrices exercise geev's conjugate pairs */
    /* eigvals: the same values */
    double l2[2 * 2 * 5];
    ts_tensor *L2 = ts_linalg_eigvals(A);
    CHECK(is_shape(L2, TS_SHAPE(B, n)) && ts_dtype_of(L2) == ct);
    if (rd(ts_view_as_real(L2), l2))
        for (int64_t i = 0; i < 2 * B * n; i++) CHECK_NEAR(l2[i], l[i], tol);
    /* exact: a rotation (+-i) and an upper triangular matrix (its diagonal) */
    double rot[4] = {0, -1, 1, 0}, tri[4] = {2, 1, 0, 3}, e[4];
    if (rd(ts_view_as_real(ts_linalg_eigvals(mk(TS_SHAPE(2, 2), rot, dt, d))), e)) {
        CHECK_NEAR(e[0], 0, tol);
        CHECK_NEAR(fabs(e[1]), 1, tol);
        CHECK_NEAR(e[2], 0, tol);
        CHECK_NEAR(e[3], -e[1], tol);
    }
    if (rd(ts_view_as_real(ts_linalg_eigvals(mk(TS_SHAPE(2, 2), tri, dt, d))), e)) {
        CHECK_NEAR(fmin(e[0], e[2]), 2, tol);
        CHECK_NEAR(fmax(e[0], e[2]), 3, tol);
        CHECK(e[1] == 0 && e[3] == 0);
    }
    /* empty matrices and batches */
    ts_tensor *Z = ts_linalg_eig(mk(TS_SHAPE(0, 3, 3), va, dt, d), &V);
    CHECK(is_shape(Z, TS_SHAPE(0, 3)) && is_shape(V, TS_SHAPE(0, 3, 3)));
    CHECK(is_shape(ts_linalg_eigvals(mk(TS_SHAPE(2, 0, 0), va, dt, d)), TS_SHAPE(2, 0)));
    CHECK_OK();
}

/* ------------------------------------------------------------------ polar, matrix_sqrth */
static void test_polar(ts_device d, ts_dtype dt) {
    const int64_t B = 2, m = 5, n = 3;
    const double tol = tol_of(dt, m) * 10;
    fill(va, B * m * n, 7);
    ts_tensor *A = mk(TS_SHAPE(B, m, n), va, dt, d), *H = NULL;
    ts_tensor *U = ts_linalg_polar(A, &H);
    CHECK(is_shape(U, TS_SHAPE(B, m, n)) && ts_dtype_of(U) == dt && ts_device_of(U).type == d.type);
    CHECK(is_shape(H, TS_SHAPE(B, n, n)) && H && ts_dtype_of(H) == dt);
    double u[30], h[18], p[25], q[25];
    if (rd(U, u) && rd(H, h) && rd(A, vb))
        for (int64_t b = 0; b < B; b++) {
            const double *ub = u + b * m * n, *hb = h + b * n * n, *ab = vb + b * m * n;
            mtm(ub, ub, p, m, n, n); /* U^T U = I */
            for (int64_t i = 0; i < n * n; i++) CHECK_NEAR(p[i], i % (n + 1) == 0, tol);
            mm(ub, hb, p, m, n, n); /* U H = A */
            for (int64_t i = 0; i < m * n; i++) CHECK_NEAR(p[i], ab[i], tol);
            mm(hb, hb, p, n, n, n); /* H H = A^T A, H symmetric */
            mtm(ab, ab, q, m, n, n);
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < n; j++) {
                    CHECK_NEAR(p[i * n + j], q[i * n + j], tol * 4);
                    CHECK_NEAR(hb[i * n + j], hb[j * n + i], tol);
                }
            for (int64_t i = 0; i < n; i++) CHECK(hb[i * n + i] > 0);
        }
    /* matrix_sqrth of M^T M + I: X X = A, X = X^T; the upper triangle is not read */
    const int64_t k = 4;
    fill(vc, B * k * k, 9);
    for (int64_t b = 0; b < B; b++) {
        mtm(vc + b * k * k, vc + b * k * k, va + b * k * k, k, k, k);
        for (int64_t i = 0; i < k; i++) va[(b * k + i) * k + i] += 1;
    }
    memcpy(vb, va, sizeof(double) * (size_t)(B * k * k));
    for (int64_t b = 0; b < B; b++) vb[b * k * k + 1] += 100; /* garbage above the diagonal */
    ts_tensor *X = ts_linalg_matrix_sqrth(mk(TS_SHAPE(B, k, k), vb, dt, d));
    CHECK(is_shape(X, TS_SHAPE(B, k, k)) && ts_dtype_of(X) == dt && ts_device_of(X).type == d.type);
    double x[32];
    if (rd(X, x))
        for (int64_t b = 0; b < B; b++) {
            mm(x + b * k * k, x + b * k * k, p, k, k, k);
            for (int64_t i = 0; i < k; i++)
                for (int64_t j = 0; j < k; j++) {
                    CHECK_NEAR(p[i * k + j], va[(b * k + i) * k + j], tol * 8);
                    CHECK_NEAR(x[(b * k + i) * k + j], x[(b * k + j) * k + i], tol);
                }
        }
    double dg[9] = {4, 0, 0, 0, 9, 0, 0, 0, 0.25}, xd[9];
    if (rd(ts_linalg_matrix_sqrth(mk(TS_SHAPE(3, 3), dg, dt, d)), xd)) {
        CHECK_NEAR(xd[0], 2, tol);
        CHECK_NEAR(xd[4], 3, tol);
        CHECK_NEAR(xd[8], 0.5, tol);
        CHECK_NEAR(xd[1], 0, tol);
        CHECK_NEAR(xd[5], 0, tol);
    }
    double u1[30], u2[30]; /* U alone (no H asked for): the same U */
    ts_tensor *U2 = ts_linalg_polar(A, NULL);
    CHECK(is_shape(U2, TS_SHAPE(B, m, n)));
    if (rd(U, u1) && rd(U2, u2))
        for (int64_t i = 0; i < B * m * n; i++) CHECK(u1[i] == u2[i]);
    ts_tensor *H0 = NULL;
    CHECK(is_shape(ts_linalg_polar(mk(TS_SHAPE(3, 0), va, dt, d), &H0), TS_SHAPE(3, 0)) &&
          is_shape(H0, TS_SHAPE(0, 0)));
    CHECK_OK();
}

/* ------------------------------------------------------------------ gradients */
static ts_tensor *g_eig(ts_tensor *const *x, int n, void *ctx) {
    (void)n, (void)ctx;
    ts_tensor *V = NULL, *L = ts_linalg_eig(x[0], &V);
    /* phase-invariant: the eigenvalues' parts and the eigenvectors' moduli */
    ts_tensor *parts[2] = {ts_flatten(ts_view_as_real(L), 0, -1), ts_flatten(ts_abs(V), 0, -1)};
    return ts_cat(parts, 2, 0);
}
static ts_tensor *g_eigvals(ts_tensor *const *x, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_view_as_real(ts_linalg_eigvals(x[0]));
}
static ts_tensor *g_polar(ts_tensor *const *x, int n, void *ctx) {
    (void)n, (void)ctx;
    ts_tensor *H = NULL, *U = ts_linalg_polar(x[0], &H);
    ts_tensor *parts[2] = {ts_flatten(U, 0, -1), ts_flatten(H, 0, -1)};
    return ts_cat(parts, 2, 0);
}
static ts_tensor *g_sqrth(ts_tensor *const *x, int n, void *ctx) {
    (void)n, (void)ctx; /* a symmetric positive-definite argument: x x^T + I */
    ts_shape s = ts_shape_of(x[0]);
    ts_tensor *S = ts_add(ts_matmul(x[0], ts_transpose(x[0], -2, -1)),
                          ts_eye(s.dims[s.ndim - 1], 0, (ts_opts){.dtype = TS_F64}));
    return ts_linalg_matrix_sqrth(S);
}

static void test_grads(void) {
    const struct {
        const char *name;
        ts_gradcheck_fn f;
        ts_shape s;
    } cases[] = {
        {"eig", g_eig, TS_SHAPE(4, 4)},
        {"eig batch", g_eig, TS_SHAPE(2, 3, 3)},
        {"eigvals", g_eigvals, TS_SHAPE(2, 4, 4)},
        {"polar", g_polar, TS_SHAPE(2, 4, 3)},
        {"polar square", g_polar, TS_SHAPE(3, 3)},
        {"matrix_sqrth", g_sqrth, TS_SHAPE(2, 3, 3)},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        ts_scope_begin();
        int64_t ne = 1;
        for (int i = 0; i < cases[c].s.ndim; i++) ne *= cases[c].s.dims[i];
        fill(va, ne, (int)c + 30);
        ts_tensor *x = ts_tensor_f64(cases[c].s, va, (ts_opts){.dtype = TS_F64});
        ts_set_requires_grad(x, true);
        bool ok =
            ts_gradcheck(cases[c].f, NULL, &x, 1, (ts_gradcheck_opts){.atol = 1e-6, .rtol = 1e-4});
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "gradcheck %s%s", cases[c].name, ts_test_error_str());
        ts_error_clear();
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ refusals */
static void test_errors(void) {
    ts_opts f64 = {.dtype = TS_F64};
    ts_tensor *rect = ts_ones(TS_SHAPE(2, 3), f64), *vec = ts_ones(TS_SHAPE(3), f64);
    ts_tensor *V = rect, *H = rect; /* cleared on failure */
    CHECK(!ts_linalg_eig(rect, &V) && !V);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "linalg.eig: A must be batches of square matrices, but they are 2 "
                                "by 3 matrices");
    CHECK(!ts_linalg_eigvals(vec));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "linalg.eigvals: The input tensor A must have at least 2 "
                                "dimensions.");
    CHECK(!ts_linalg_eig(ts_ones(TS_SHAPE(2, 2), (ts_opts){.dtype = TS_I64}), NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "linalg.eig: Expected a floating point or complex tensor");
    ts_tensor *nan = ts_full(TS_SHAPE(2, 2), NAN, f64);
    CHECK(!ts_linalg_eigvals(nan));
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.eigvals: input tensor should not contain infs or NaNs.");
    CHECK(!ts_linalg_polar(ts_ones(TS_SHAPE(3, 4), f64), &H) && !H);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "linalg.polar: input must have at least as many rows as columns, "
                                "but got 3 by 4 matrices");
    CHECK(!ts_linalg_polar(vec, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE,
                  "linalg.polar: The input tensor A must have at least 2 dimensions.");
    CHECK(!ts_linalg_matrix_sqrth(rect));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "linalg.matrix_sqrth: A must be batches of square matrices");
    CHECK(!ts_linalg_matrix_sqrth(ts_ones(TS_SHAPE(2, 2), (ts_opts){.dtype = TS_F16})));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "linalg.matrix_sqrth: Low precision dtypes not supported");
    CHECK(!ts_linalg_eig(NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "linalg.eig: A is NULL");
    CHECK_OK();
}

/* eigvals checkpointed and its input modified in place before the backward: the recomputation is
 * refused, so LinalgEigBackward0 gets no saved tensors and the backward fails with the checkpoint's
 * error (not a crash) */
static ts_status ck_eigvals(void *ctx, ts_tensor *const *in, int n_in, ts_tensor **out, int n_out) {
    (void)ctx, (void)n_in, (void)n_out;
    out[0] = ts_linalg_eigvals(in[0]);
    return out[0] ? TS_OK : ts_error();
}

static void test_checkpoint_modified(void) {
    ts_scope_begin();
    ts_tensor *A = ts_from_data(TS_SHAPE(2, 2), TS_F64, (const double[]){2, 1, 1, 3}, (ts_opts){0});
    ts_set_requires_grad(A, true);
    ts_tensor *L = NULL;
    CHECK(ts_checkpoint(ck_eigvals, NULL, NULL, &A, 1, &L, 1) == TS_OK && L);
    ts_no_grad_begin();
    CHECK(ts_fill_(A, 1.0) != NULL);
    ts_no_grad_end();
    CHECK_OK();
    ts_backward(ts_sum(ts_view_as_real(L)));
    CHECK_ERR_HAS(TS_ERR_STATE, "was modified by an inplace operation");
    CHECK(ts_grad(A) == NULL);
    ts_scope_end();
}

/* repeated eigenvalues: the eigenvectors' gradient is not finite (E_ij = 0, as PyTorch's); anomaly
 * mode names the node that produced it, LinalgEigBackward0 (the backward of linalg.eig) */
static void test_anomaly_names_node(void) {
    ts_scope_begin();
    ts_tensor *A = ts_from_data(TS_SHAPE(2, 2), TS_F64, (const double[]){2, 0, 0, 2}, (ts_opts){0});
    ts_set_requires_grad(A, true);
    ts_tensor *V = NULL, *L = ts_linalg_eig(A, &V);
    CHECK(L && V);
    ts_tensor *w = ts_from_data(TS_SHAPE(2, 2, 2), TS_F64, (const double[]){1, 2, 3, 4, 5, 6, 7, 8},
                                (ts_opts){0});
    ts_detect_anomaly(true);
    ts_backward(ts_sum(ts_mul(ts_view_as_real(V), w)));
    ts_detect_anomaly(false);
    CHECK_ERR_HAS(TS_ERR_STATE, "function 'LinalgEigBackward0' (the backward of linalg.eig) "
                                "returned nan or inf values");
    ts_scope_end();
}

/* the complex results are the outputs of PyTorch's node: grad_fn LinalgEigBackward0 (not the view
 * that makes them complex), plain tensors an in-place op may write, which then fails the backward
 * as PyTorch's (the node saved them) */
static void test_grad_fn_name(void) {
    ts_scope_begin();
    ts_tensor *A =
        ts_from_data(TS_SHAPE(2, 2), TS_F64, (const double[]){2, 1, -1, 3}, (ts_opts){0});
    ts_set_requires_grad(A, true);
    ts_tensor *V = NULL, *L = ts_linalg_eig(A, &V);
    CHECK(L && V && ts_grad_fn_name(L) && ts_grad_fn_name(V));
    CHECK(L && strcmp(ts_grad_fn_name(L), "LinalgEigBackward0") == 0);
    CHECK(V && strcmp(ts_grad_fn_name(V), "LinalgEigBackward0") == 0);
    ts_tensor *E = ts_linalg_eigvals(A);
    CHECK(E && ts_grad_fn_name(E) && strcmp(ts_grad_fn_name(E), "LinalgEigBackward0") == 0);
    ts_backward(ts_sum(ts_view_as_real(E))); /* the gradients reach the node as complex tensors */
    CHECK(ts_grad(A) != NULL);
    CHECK_OK();
    CHECK(ts_mul_scalar_(L, 2.0) != NULL); /* allowed: L is not a view of anything */
    CHECK_OK();
    ts_backward(ts_sum(ts_view_as_real(V)));
    CHECK_ERR_HAS(TS_ERR_STATE, "modified by an inplace operation");
    ts_error_clear();
    ts_scope_end();
}

/* ------------------------------------------------------------------ allocation failures */
/* every allocation of the new ops failed in turn (fault_sweep.h): an out-of-memory error that says
 * so, nothing leaked, and the ops succeed once it is cleared */
typedef struct sw_st {
    ts_tensor *a, *spd, *c;
    char msg[512];
} sw_st;

static void *sw_setup(void) {
    sw_st *s = calloc(1, sizeof *s);
    ts_scope_begin();
    fill(va, 16, 60);
    s->a = ts_keep(ts_tensor_f64(TS_SHAPE(4, 4), va, (ts_opts){.dtype = TS_F32}));
    for (int i = 0; i < 16; i++) vb[i] = i % 5 == 0 ? 4.0 : 0.5;
    s->spd = ts_keep(ts_tensor_f64(TS_SHAPE(4, 4), vb, (ts_opts){.dtype = TS_F32}));
    s->c = ts_keep(ts_tensor_f64(TS_SHAPE(4, 2), va, (ts_opts){.dtype = TS_F32}));
    ts_scope_end();
    return s;
}

static bool sw_run(void *p) {
    sw_st *s = p;
    s->msg[0] = '\0';
    ts_scope_begin();
    ts_tensor *x = ts_detach(s->a), *V = NULL, *H = NULL, *P = NULL, *tau = NULL;
    ts_set_requires_grad(x, true);
    ts_tensor *L = ts_linalg_eig(x, &V);
    ts_tensor *loss = L ? ts_add(ts_sum(ts_view_as_real(L)), ts_sum(ts_abs(V))) : NULL;
    if (loss) ts_backward(loss);
    bool ok = loss && ts_error() == TS_OK && ts_linalg_eigvals(s->a) && ts_linalg_polar(s->a, &H) &&
              ts_linalg_matrix_sqrth(s->spd);
    ts_tensor *LD = ok ? ts_linalg_ldl_factor_ex(s->spd, false, &P, NULL) : NULL;
    ts_tensor *qr = LD ? ts_geqrf(s->a, &tau) : NULL;
    ok = qr && ts_linalg_ldl_solve(LD, P, s->c, false) && ts_ormqr(qr, tau, s->c, true, true);
    snprintf(s->msg, sizeof s->msg, "%s", ts_error_message());
    ts_scope_end();
    return ok && ts_error() == TS_OK;
}

static void sw_check(void *p, bool ok) {
    const sw_st *s = p;
    if (!ok && !strstr(s->msg, "out of")) {
        fprintf(stderr, "linalg eig sweep: a failed allocation reported \"%s\"\n", s->msg);
        CHECK(strstr(s->msg, "out of") != NULL);
    }
}

static void sw_teardown(void *p) {
    sw_st *s = p;
    ts_release(s->a), ts_release(s->spd), ts_release(s->c);
    free(s);
}

static void test_fault_sweep(void) {
    const ts_sweep_case c = {.name = "eig, polar, sqrth, ldl, ormqr",
                             .setup = sw_setup,
                             .run = sw_run,
                             .teardown = sw_teardown,
                             .check = sw_check};
    const ts_sweep_stats st = ts_fault_sweep(&c, 20000);
    CHECK(st.errors > 0 && st.oom == st.errors);
    CHECK_OK();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int di = 0; di < ndev; di++)
        for (int t = 0; t < 2; t++) {
            const ts_dtype dt = t ? TS_F32 : TS_F64;
            ts_scope_begin();
            test_eig(devs[di], dt);
            test_polar(devs[di], dt);
            ts_scope_end();
            CHECK_OK();
        }
    ts_scope_begin();
    test_grads();
    test_errors();
    test_checkpoint_modified();
    test_anomaly_names_node();
    test_grad_fn_name();
    ts_scope_end();
    CHECK_OK();
    test_fault_sweep();
    return ts_test_finish();
}
