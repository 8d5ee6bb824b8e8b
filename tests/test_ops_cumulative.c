/* test_ops_cumulative.c — cumsum, cumprod, cummax, cummin and logcumsumexp (the backends' scan
 * slot, src/ops/cumulative.c) on every device against double references computed here from the
 * inputs' host copies: every dim of contiguous and permuted inputs, float32 / float64 / integer /
 * bool dtypes and dtype=, PyTorch's tie and NaN rule, 0-dim and empty tensors, gradients
 * (cumprod's with zeros against the product rule written out), and the errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ts_test.h"

static double *host(ts_tensor *t) {
    int64_t n = ts_numel(t);
    double *buf = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    ts_tensor *c = ts_to_dtype(ts_contiguous(t), TS_F64);
    if (ts_copy_to_host(ts_to(c, ts_cpu()), buf, (size_t)n * sizeof(double)) != TS_OK) buf[0] = NAN;
    return buf;
}

static uint64_t lcg = 99;
static double rnd(void) { /* +-[0.5, 1.5] */
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    double u = (double)(lcg >> 11) / 9007199254740992.0;
    return (lcg >> 7) & 1 ? 0.5 + u : -0.5 - u;
}

/* a [3, 4, 5] tensor: contiguous, or made from a [5, 3, 4] one by a permute */
static ts_tensor *make(bool permuted, ts_dtype dt, ts_device dev, double *vals) {
    ts_opts o = {.dtype = dt, .device = dev};
    double v[60];
    for (int i = 0; i < 60; i++) v[i] = rnd();
    ts_tensor *t = permuted ? ts_permute(ts_tensor_f64(TS_SHAPE(5, 3, 4), v, o), TS_DIMS(1, 2, 0))
                            : ts_tensor_f64(TS_SHAPE(3, 4, 5), v, o);
    double *h = host(t);
    for (int i = 0; i < 60; i++) vals[i] = h[i];
    free(h);
    return t;
}

enum { C_SUM, C_PROD, C_LSE };

/* reference of op along dim of a row-major [3, 4, 5] array, each step rounded as `f32` asks */
static void reference(int op, const double *x, int dim, bool f32, double *y) {
    const int64_t shape[3] = {3, 4, 5}, strides[3] = {20, 5, 1};
    for (int64_t i = 0; i < 60; i++) {
        int64_t k = (i / strides[dim]) % shape[dim];
        if (k != 0) continue;
        double acc = op == C_PROD ? 1 : op == C_LSE ? -INFINITY : 0;
        for (int64_t j = 0; j < shape[dim]; j++) {
            double v = x[i + j * strides[dim]];
            if (op == C_SUM)
                acc += v;
            else if (op == C_PROD)
                acc *= v;
            else {
                double hi = fmax(acc, v), lo = fmin(acc, v);
                acc = hi + log1p(exp(lo - hi));
            }
            y[i + j * strides[dim]] = f32 ? (double)(float)acc : acc;
        }
    }
}

static void test_float_scans(ts_device dev) {
    for (int dti = 0; dti < 2; dti++) {
        const ts_dtype dt = dti ? TS_F32 : TS_F64;
        for (int p = 0; p < 2; p++)
            for (int dim = 0; dim < 3; dim++)
                for (int op = 0; op < 3; op++) {
                    ts_scope_begin();
                    double x[60], ref[60];
                    ts_tensor *t = make(p, dt, dev, x);
                    ts_tensor *y = op == C_SUM    ? ts_cumsum(t, dim - 3 * (dim & 1), 0)
                                   : op == C_PROD ? ts_cumprod(t, dim, TS_DTYPE_DEFAULT)
                                                  : ts_logcumsumexp(t, dim);
                    CHECK(y && ts_dtype_of(y) == dt);
                    reference(op, x, dim, dt == TS_F32, ref);
                    double *h = host(y), worst = 0;
                    for (int i = 0; i < 60; i++) {
                        /* sums and products accumulate in double: float32 results are the
                         * double reference rounded, bit for bit; logcumsumexp within a few ulp */
                        double tol = op == C_LSE
                                         ? 8 * (dt == TS_F32 ? 6e-8 : 1.2e-16) * (1 + fabs(ref[i]))
                                     : dt == TS_F32 ? 0
                                                    : 4e-16 * 5 * (1 + fabs(ref[i]));
                        double e = fabs(h[i] - ref[i]) - tol;
                        if (!(e <= 0)) worst = fmax(worst, isnan(e) ? INFINITY : e);
                    }
                    if (worst > 0)
                        fprintf(stderr, "op %d dtype %d permuted %d dim %d on %s: off by %g\n", op,
                                (int)dt, p, dim, ts_device_str(dev), worst);
                    CHECK(worst == 0);
                    free(h);
                    ts_scope_end();
                }
    }
}

/* sums and products of float32 / float64 on the CPU's two fast layouts: along the last dim (four
 * lines at a time: line counts that fill groups of four, leave a tail, or are one line) and along
 * dim 1 of [A, L, W] (rows of W lines side by side; W above and below the 256 columns of a block),
 * with enough elements to run threaded; each line's double sum in order, so exact */
static void test_fast_layouts(ts_device dev) {
    const int64_t cases[][4] = {/* A, L, W, dim */
                                {1, 1, 37, 2},   {1, 4, 33, 2}, {1, 7, 33, 2},  {1, 9, 4000, 2},
                                {1, 50, 300, 1}, {3, 20, 5, 1}, {2, 40, 600, 1}};
    const int ncases = (int)(sizeof cases / sizeof *cases);
    for (int dti = 0; dti < 2; dti++)
        for (int c = 0; c < ncases; c++)
            for (int op = C_SUM; op <= C_PROD; op++) {
                ts_scope_begin();
                const ts_dtype dt = dti ? TS_F32 : TS_F64;
                const int64_t A = cases[c][0], L = cases[c][1], W = cases[c][2], N = A * L * W;
                const int dim = (int)cases[c][3];
                double *x = malloc((size_t)N * sizeof(double));
                for (int64_t i = 0; i < N; i++) x[i] = rnd();
                ts_tensor *t =
                    ts_tensor_f64(TS_SHAPE(A, L, W), x, (ts_opts){.dtype = dt, .device = dev});
                double *xs = host(t); /* the inputs as the dtype holds them */
                ts_tensor *y = op == C_SUM ? ts_cumsum(t, dim, TS_DTYPE_DEFAULT)
                                           : ts_cumprod(t, dim - 3, TS_DTYPE_DEFAULT);
                double *h = y ? host(y) : NULL;
                const int64_t n = dim == 2 ? W : L, step = dim == 2 ? 1 : W;
                int64_t bad = 0;
                for (int64_t a = 0; h && a < A; a++)
                    for (int64_t r = 0; r < (dim == 2 ? L : W); r++) {
                        const int64_t base = a * L * W + (dim == 2 ? r * W : r);
                        double acc = op == C_SUM ? 0 : 1;
                        for (int64_t k = 0; k < n; k++) {
                            const int64_t e = base + k * step;
                            acc = op == C_SUM ? acc + xs[e] : acc * xs[e];
                            bad += h[e] != (dt == TS_F32 ? (double)(float)acc : acc);
                        }
                    }
                if (!h || bad)
                    fprintf(stderr, "%s dtype %d [%lld, %lld, %lld] dim %d on %s: %lld wrong\n",
                            op == C_SUM ? "cumsum" : "cumprod", (int)dt, (long long)A, (long long)L,
                            (long long)W, dim, ts_device_str(dev), (long long)bad);
                CHECK(h && bad == 0);
                free(x), free(xs), free(h);
                ts_scope_end();
            }
}

static void check_values(ts_tensor *t, const double *want, int n, const char *what) {
    CHECK(t && ts_numel(t) == n);
    if (!t || ts_numel(t) != n) return;
    double *h = host(t);
    bool ok = true;
    for (int i = 0; i < n; i++) ok = ok && (h[i] == want[i] || (isnan(h[i]) && isnan(want[i])));
    if (!ok) {
        fprintf(stderr, "%s:", what);
        for (int i = 0; i < n; i++) fprintf(stderr, " %g (%g)", h[i], want[i]);
        fprintf(stderr, "\n");
    }
    CHECK(ok);
    free(h);
}

static void test_extremes(ts_device dev) {
    ts_scope_begin();
    ts_opts f = {.dtype = TS_F32, .device = dev};
    const double x[8] = {1, 3, 3, NAN, 2, NAN, 5, -1};
    ts_tensor *t = ts_tensor_f64(TS_SHAPE(8), x, f), *ix = NULL;
    ts_tensor *v = ts_cummax(t, 0, &ix);
    check_values(v, (double[]){1, 3, 3, NAN, NAN, NAN, NAN, NAN}, 8, "cummax values");
    check_values(ix, (double[]){0, 1, 2, 3, 3, 5, 5, 5}, 8, "cummax indices");
    CHECK(ix && ts_dtype_of(ix) == TS_I64 && ts_dtype_of(v) == TS_F32);
    const double m[6] = {2, 1, 1, 4, 0, 0};
    v = ts_cummin(ts_tensor_f64(TS_SHAPE(6), m, f), -1, &ix);
    check_values(v, (double[]){2, 1, 1, 1, 0, 0}, 6, "cummin values");
    check_values(ix, (double[]){0, 1, 2, 2, 4, 5}, 6, "cummin indices");
    /* integers compare exactly (past 2^53 too), along dim 1 of a [2, 3] */
    const int64_t big = (INT64_C(1) << 60) + 1;
    int64_t iv[6] = {5, -1, 5, big, big - 1, big};
    v = ts_cummax(ts_tensor_i64(TS_SHAPE(2, 3), iv, (ts_opts){.device = dev}), 1, &ix);
    CHECK(v && ts_dtype_of(v) == TS_I64);
    int64_t got[6] = {0};
    CHECK(ts_copy_to_host(ts_to(v, ts_cpu()), got, sizeof got) == TS_OK);
    CHECK(got[0] == 5 && got[1] == 5 && got[2] == 5 && got[3] == big && got[4] == big &&
          got[5] == big);
    check_values(ix, (double[]){0, 0, 2, 0, 0, 2}, 6, "cummax int64 indices");
    ts_scope_end();
}

static void test_integer_dtypes(ts_device dev) {
    ts_scope_begin();
    ts_tensor *t = ts_to_dtype(
        ts_tensor_f64(TS_SHAPE(4), (double[]){200, 100, 3, 1}, (ts_opts){.device = dev}), TS_U8);
    ts_tensor *y = ts_cumsum(t, 0, TS_DTYPE_DEFAULT);
    CHECK(y && ts_dtype_of(y) == TS_I64);
    check_values(y, (double[]){200, 300, 303, 304}, 4, "cumsum uint8 -> int64");
    y = ts_cumsum(t, 0, TS_U8); /* dtype=uint8 wraps as PyTorch's */
    CHECK(y && ts_dtype_of(y) == TS_U8);
    check_values(y, (double[]){200, 44, 47, 48}, 4, "cumsum dtype=uint8");
    y = ts_cumprod(t, 0, TS_DTYPE_DEFAULT);
    check_values(y, (double[]){200, 20000, 60000, 60000}, 4, "cumprod uint8");
    y = ts_cumsum(t, 0, TS_F64);
    CHECK(y && ts_dtype_of(y) == TS_F64);
    ts_tensor *b = ts_ne_scalar(
        ts_tensor_f64(TS_SHAPE(5), (double[]){1, 0, 2, 0, 3}, (ts_opts){.device = dev}), 0);
    y = ts_cumsum(b, 0, TS_DTYPE_DEFAULT);
    CHECK(y && ts_dtype_of(y) == TS_I64);
    check_values(y, (double[]){1, 1, 2, 2, 3}, 5, "cumsum bool");
    ts_scope_end();
}

static void test_shapes(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.dtype = TS_F64, .device = dev};
    ts_tensor *s = ts_scalar(2.5, o), *ix = NULL;
    ts_tensor *y = ts_cumsum(s, -1, TS_DTYPE_DEFAULT);
    CHECK(y && ts_ndim(y) == 0 && ts_item(y) == 2.5);
    y = ts_cummin(s, 0, &ix);
    CHECK(y && ix && ts_ndim(ix) == 0 && ts_item(ix) == 0);
    y = ts_logcumsumexp(s, 0);
    CHECK(y && ts_item(y) == 2.5);
    ts_tensor *e = ts_zeros(TS_SHAPE(2, 0, 3), o);
    y = ts_cumprod(e, 1, TS_DTYPE_DEFAULT);
    CHECK(y && ts_numel(y) == 0 && ts_size(y, 2) == 3);
    y = ts_cummax(e, 2, &ix);
    CHECK(y && ix && ts_numel(ix) == 0);
    ts_scope_end();
}

/* cumprod's gradient at zeros: d/dx_k sum_j g_j prod_{i<=j} x_i = sum_{j>=k} g_j prod_{i<=j,i!=k}
 */
static void test_cumprod_zero_grad(ts_device dev) {
    ts_scope_begin();
    const double x[7] = {2, 0, 3, 0.5, 0, 4, -1}, g[7] = {1, -2, 0.5, 3, 1, 2, -1};
    ts_opts o = {.dtype = TS_F64, .device = dev, .requires_grad = true};
    ts_tensor *t = ts_tensor_f64(TS_SHAPE(7), x, o);
    ts_tensor *gt = ts_tensor_f64(TS_SHAPE(7), g, (ts_opts){.dtype = TS_F64, .device = dev});
    ts_backward(ts_sum(ts_mul(ts_cumprod(t, 0, TS_DTYPE_DEFAULT), gt)));
    CHECK(ts_error() == TS_OK);
    double *h = host(ts_grad(t));
    for (int k = 0; k < 7; k++) {
        double want = 0;
        for (int j = k; j < 7; j++) {
            double p = g[j];
            for (int i = 0; i <= j; i++)
                if (i != k) p *= x[i];
            want += p;
        }
        CHECK_NEAR(h[k], want, 1e-13 * (1 + fabs(want)));
    }
    free(h);
    ts_scope_end();
}

static ts_tensor *f_cumsum(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_cumsum(in[0], 1, TS_DTYPE_DEFAULT);
}
static ts_tensor *f_cumprod(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_cumprod(in[0], *(int *)ctx, TS_DTYPE_DEFAULT);
}
static ts_tensor *f_lcse(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_logcumsumexp(in[0], 0);
}
static ts_tensor *f_cummax(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_cummax(in[0], 1, NULL);
}

static void test_gradcheck(ts_device dev) {
    ts_scope_begin();
    double x[60];
    ts_tensor *t = make(true, TS_F64, dev, x);
    ts_set_requires_grad(t, true);
    ts_gradcheck_opts go = {0};
    CHECK(ts_gradcheck(f_cumsum, NULL, &t, 1, go));
    int dim = 2;
    CHECK(ts_gradcheck(f_cumprod, &dim, &t, 1, go));
    CHECK(ts_gradcheck(f_lcse, NULL, &t, 1, go));
    CHECK(ts_gradcheck(f_cummax, NULL, &t, 1, go));
    /* cumprod with zeros in every position of a line */
    const double z[12] = {0, 1.5, -2, 0.7, 1.2, 0, 3, -0.5, 2, 0.8, 0, 0};
    ts_tensor *tz = ts_tensor_f64(TS_SHAPE(3, 4), z, (ts_opts){.dtype = TS_F64, .device = dev});
    ts_set_requires_grad(tz, true);
    dim = 1;
    CHECK(ts_gradcheck(f_cumprod, &dim, &tz, 1, go));
    ts_scope_end();
}

static void test_errors(ts_device dev) {
    ts_scope_begin();
    ts_tensor *t = ts_zeros(TS_SHAPE(2, 3), (ts_opts){.device = dev});
    CHECK(!ts_cumsum(t, 2, TS_DTYPE_DEFAULT) && ts_error() == TS_ERR_ARG);
    CHECK(strstr(ts_error_message(), "cumsum") != NULL);
    ts_error_clear();
    CHECK(!ts_logcumsumexp(ts_to_dtype(t, TS_I32), 0) && ts_error() == TS_ERR_DTYPE);
    ts_error_clear();
    CHECK(!ts_cummax(ts_to_dtype(t, TS_U64), 0, NULL) && ts_error() == TS_ERR_DTYPE);
    CHECK(strstr(ts_error_message(), "cummax") != NULL);
    ts_error_clear();
    CHECK(!ts_cumprod(NULL, 0, TS_DTYPE_DEFAULT) && ts_error() != TS_OK);
    ts_error_clear();
    ts_scope_end();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    ts_mem_stats m0, m1;
    CHECK(ts_memory_stats(ts_cpu(), &m0) == TS_OK);
    for (int i = 0; i < nd; i++) {
        test_float_scans(devs[i]);
        test_fast_layouts(devs[i]);
        test_extremes(devs[i]);
        test_integer_dtypes(devs[i]);
        test_shapes(devs[i]);
        test_cumprod_zero_grad(devs[i]);
        test_gradcheck(devs[i]);
        test_errors(devs[i]);
    }
    CHECK(ts_memory_stats(ts_cpu(), &m1) == TS_OK);
    CHECK_EQ(m1.live_tensors, m0.live_tensors); /* nothing left behind */
    return ts_test_finish();
}
