/* test_masked.c — torch.masked's sum, mean, cumsum, cumprod, median and normalize over (input,
 * mask) (src/ops/masked.c) against float64 loops written here, on every test device, with the
 * sum's gradient and the errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tessera.h"
#include "ts_test.h"

enum { R = 3, C = 5 };
static double X[R][C];
static bool M[R][C];

static void fill(void) {
    unsigned s = 12345;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            s = s * 1103515245u + 12345u;
            X[i][j] = ((double)(s >> 8 & 0xffff) / 65536.0 - 0.5) * 4;
            M[i][j] = (s >> 4 & 3) != 0 && i != 1; /* row 1 fully masked out */
        }
    M[0][0] = true, M[2][4] = false;
}

/* t's values (any dtype) as doubles on the host */
static void host(ts_tensor *t, double *v, int64_t n) {
    ts_tensor *h = ts_contiguous(ts_to(ts_to_dtype(t, TS_F64), ts_cpu()));
    CHECK(h != NULL);
    if (h) CHECK_EQ(ts_copy_to_host(h, v, (size_t)n * sizeof *v), TS_OK);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_values(ts_device dev) {
    ts_scope_begin();
    ts_opts o = {.dtype = TS_F64, .device = dev};
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(R, C), &X[0][0], o);
    ts_tensor *m = ts_to(ts_from_data(TS_SHAPE(R, C), TS_BOOL, &M[0][0], (ts_opts){0}), dev);
    double got[R * C];
    int bad = 0;

    /* sum and mean over dim 1, and the sum over everything */
    host(ts_masked_sum(x, TS_DIMS(1), false, TS_DTYPE_DEFAULT, m), got, R);
    double mean[R];
    host(ts_masked_mean(x, TS_DIMS(-1), false, TS_DTYPE_DEFAULT, m), mean, R);
    double all = 0;
    for (int i = 0; i < R; i++) {
        double s = 0;
        int n = 0;
        for (int j = 0; j < C; j++)
            if (M[i][j]) s += X[i][j], n++;
        all += s;
        bad += !ts_test_near(got[i], s, 1e-14);
        bad += !ts_test_near(mean[i], n ? s / n : NAN, 1e-14);
    }
    host(ts_masked_sum(x, (ts_dims){0}, false, TS_DTYPE_DEFAULT, m), got, 1);
    bad += !ts_test_near(got[0], all, 1e-13);

    /* cumsum and cumprod along dim 1 */
    double cs[R * C], cp[R * C];
    host(ts_masked_cumsum(x, 1, TS_DTYPE_DEFAULT, m), cs, R * C);
    host(ts_masked_cumprod(x, -1, TS_DTYPE_DEFAULT, m), cp, R * C);
    for (int i = 0; i < R; i++) {
        double s = 0, p = 1;
        for (int j = 0; j < C; j++) {
            s += M[i][j] ? X[i][j] : 0;
            p *= M[i][j] ? X[i][j] : 1;
            bad += !ts_test_near(cs[i * C + j], s, 1e-14);
            bad += !ts_test_near(cp[i * C + j], p, 1e-14);
        }
    }

    /* median along dim 1: the lower middle of the masked-in values; none: NaN */
    host(ts_masked_median(x, 1, false, TS_DTYPE_DEFAULT, m), got, R);
    for (int i = 0; i < R; i++) {
        double v[C];
        int n = 0;
        for (int j = 0; j < C; j++)
            if (M[i][j]) v[n++] = X[i][j];
        qsort(v, (size_t)n, sizeof *v, cmp);
        bad += !ts_test_near(got[i], n ? v[(n - 1) / 2] : NAN, 0);
    }

    /* normalize, ord 2 and 1, along dim 1: masked x / max(norm, eps) */
    for (int k = 0; k < 2; k++) {
        const double ord = k ? 1.0 : 2.0, eps = 1e-12;
        host(ts_masked_normalize(x, ord, 1, eps, TS_DTYPE_DEFAULT, m), got, R * C);
        for (int i = 0; i < R; i++) {
            double nrm = 0;
            for (int j = 0; j < C; j++)
                if (M[i][j]) nrm += k ? fabs(X[i][j]) : X[i][j] * X[i][j];
            nrm = k ? nrm : sqrt(nrm);
            for (int j = 0; j < C; j++)
                bad +=
                    !ts_test_near(got[i * C + j], (M[i][j] ? X[i][j] : 0) / fmax(nrm, eps), 1e-15);
        }
    }
    if (bad) printf("  %s: %d values off\n", ts_device_str(dev), bad);
    CHECK_EQ(bad, 0);

    /* a mask that broadcasts (one row for all) and no mask */
    const bool row[C] = {true, false, true, true, false};
    ts_tensor *mr = ts_to(ts_from_data(TS_SHAPE(1, C), TS_BOOL, row, (ts_opts){0}), dev);
    host(ts_masked_sum(x, TS_DIMS(0), true, TS_DTYPE_DEFAULT, mr), got, C);
    for (int j = 0; j < C; j++) CHECK_NEAR(got[j], row[j] ? X[0][j] + X[1][j] + X[2][j] : 0, 1e-14);
    host(ts_masked_mean(x, (ts_dims){0}, false, TS_DTYPE_DEFAULT, NULL), got, 1);
    double tot = 0;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) tot += X[i][j];
    CHECK_NEAR(got[0], tot / (R * C), 1e-15);
    CHECK_OK();
    ts_scope_end();
}

static void test_dtypes(void) {
    ts_scope_begin();
    const int32_t v[4] = {3, -1, 7, 2};
    const bool mk[4] = {true, true, false, true}, none[4] = {false};
    ts_tensor *x = ts_from_data(TS_SHAPE(2, 2), TS_I32, v, (ts_opts){0});
    ts_tensor *m = ts_from_data(TS_SHAPE(2, 2), TS_BOOL, mk, (ts_opts){0});
    ts_tensor *s = ts_masked_sum(x, TS_DIMS(1), false, TS_DTYPE_DEFAULT, m);
    CHECK(s && ts_dtype_of(s) == TS_I64); /* torch promotes a small integer sum to int64 */
    double got[2];
    host(s, got, 2);
    CHECK_NEAR(got[0], 2, 0);
    CHECK_NEAR(got[1], 2, 0);
    ts_tensor *md = ts_masked_median(x, 0, false, TS_DTYPE_DEFAULT, m);
    CHECK(md && ts_dtype_of(md) == TS_I32);
    host(md, got, 2);
    CHECK_NEAR(got[0], 3, 0); /* {3}: 3; {-1, 2}: the lower, -1 */
    CHECK_NEAR(got[1], -1, 0);
    CHECK(ts_masked_mean(x, TS_DIMS(1), false, TS_DTYPE_DEFAULT, m) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "floating point");
    ts_tensor *none_m = ts_from_data(TS_SHAPE(2, 2), TS_BOOL, none, (ts_opts){0});
    CHECK(ts_masked_median(x, 0, false, TS_DTYPE_DEFAULT, none_m) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "fully masked out");
    ts_tensor *f = ts_masked_mean(x, TS_DIMS(1), false, TS_F64, m);
    CHECK(f && ts_dtype_of(f) == TS_F64);
    host(f, got, 2);
    CHECK_NEAR(got[0], 1, 0);
    CHECK_NEAR(got[1], 2, 0);
    ts_scope_end();
}

static void test_grad_and_errors(void) {
    ts_scope_begin();
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(R, C), &X[0][0], (ts_opts){.requires_grad = true});
    ts_tensor *m = ts_from_data(TS_SHAPE(R, C), TS_BOOL, &M[0][0], (ts_opts){0});
    ts_tensor *y = ts_masked_sum(x, TS_DIMS(1), false, TS_DTYPE_DEFAULT, m);
    CHECK(y != NULL);
    if (y) CHECK_EQ(ts_backward(ts_sum(y)), TS_OK);
    double g[R * C];
    host(ts_grad(x), g, R * C);
    int bad = 0;
    for (int i = 0; i < R * C; i++) bad += g[i] != (M[i / C][i % C] ? 1.0 : 0.0);
    CHECK_EQ(bad, 0);

    const bool b[2 * R * C] = {false};
    ts_tensor *big = ts_from_data(TS_SHAPE(2, R, C), TS_BOOL, b, (ts_opts){0});
    CHECK(ts_masked_sum(x, TS_DIMS(1), false, TS_DTYPE_DEFAULT, big) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "does not broadcast");
    /* same rank, a size that is neither the input's nor 1 */
    ts_tensor *wide = ts_from_data(TS_SHAPE(R, C + 1), TS_BOOL, b, (ts_opts){0});
    CHECK(ts_masked_sum(x, TS_DIMS(1), false, TS_DTYPE_DEFAULT, wide) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "does not broadcast to input's shape");
    ts_tensor *wrong = ts_from_data(TS_SHAPE(R, 1, 1), TS_BOOL, b, (ts_opts){0});
    CHECK(ts_masked_cumsum(ts_zeros(TS_SHAPE(R, 2, C), (ts_opts){0}), 0, TS_DTYPE_DEFAULT,
                           ts_expand(wrong, TS_SHAPE(R, 2, 1))) != NULL);
    CHECK_OK();
    CHECK(ts_masked_mean(x, TS_DIMS(2), false, TS_DTYPE_DEFAULT, m) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "out of range");
    CHECK(ts_masked_sum(x, TS_DIMS(1, -1), false, TS_DTYPE_DEFAULT, m) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "multiple times");
    CHECK(ts_masked_normalize(NULL, 2, 0, 1e-12, TS_DTYPE_DEFAULT, m) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "input");
    ts_scope_end();
}

int main(void) {
    fill();
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int n = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < n; i++) test_values(devs[i]);
    test_dtypes();
    test_grad_and_errors();
    return ts_test_finish();
}
