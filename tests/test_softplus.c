/* test_softplus.c — ts_softplus_ex (src/nn/softplus.c), torch.nn.functional.softplus with beta and
 * threshold, on every device against a float64 transcription of PyTorch's formula (x where
 * beta x > threshold, else log1p(exp(beta x)) / beta), ts_gradcheck for its gradient, and the
 * refusals. */
#include <math.h>
#include <stdio.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define N 16
/* magnitudes around 0, across 20 and past the thresholds below, none on a threshold */
static const double xs[N] = {-40.3, -12.7, -3.1, -0.9, -0.013, 0.021, 0.7,  1.9,
                             4.3,   6.1,   11.2, 14.9, 21.7,   26.3,  33.1, 61.4};
typedef struct sp_case {
    double beta, threshold;
} sp_case;
static const sp_case cases[] = {{1, 20}, {2, 30}, {0.5, 5}, {1, 5}, {3, 100}, {-1.5, 20}, {1, 40}};
#define NCASES ((int)(sizeof cases / sizeof *cases))

static double ref_softplus(double x, double beta, double threshold) {
    double z = beta * x;
    if (z > threshold) return x;
    double s = z > 0 ? z + log1p(exp(-z)) : log1p(exp(z));
    return s / beta;
}

static ts_tensor *mk(const double *v, ts_device d, ts_dtype dt, bool rg) {
    ts_tensor *t =
        ts_to(ts_to_dtype(ts_tensor_f64(TS_SHAPE(2, N / 2), v, (ts_opts){.dtype = TS_F64}), dt), d);
    t = ts_detach(t);
    if (rg) ts_set_requires_grad(t, true);
    return t;
}

static void test_values(void) {
    const ts_dtype dts[] = {TS_F64, TS_F32};
    double ref[N];
    for (int di = 0; di < ndev; di++)
        for (int ti = 0; ti < 2; ti++)
            for (int c = 0; c < NCASES; c++) {
                ts_scope_begin();
                for (int i = 0; i < N; i++)
                    ref[i] = ref_softplus(xs[i], cases[c].beta, cases[c].threshold);
                /* f64: a handful of roundings; f32: its own epsilon times a few operations */
                double tol = ti == 0 ? 1e-14 : 4e-7;
                ts_tensor *y = ts_softplus_ex(mk(xs, devs[di], dts[ti], false), cases[c].beta,
                                              cases[c].threshold);
                bool ok = y && ts_dtype_of(y) == dts[ti] && near_all(y, ref, N, tol);
                ts_test_record(ok);
                if (!ok)
                    ts_test_failf(__FILE__, __LINE__, "softplus beta %g threshold %g %s on %s%s",
                                  cases[c].beta, cases[c].threshold, ts_dtype_name(dts[ti]),
                                  ts_device_str(devs[di]), ts_test_error_str());
                ts_error_clear();
                ts_scope_end();
            }
}

static ts_tensor *sp_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    const sp_case *c = ctx;
    return ts_softplus_ex(in[0], c->beta, c->threshold);
}

/* the gradient: 1 in the linear region, sigmoid(beta x) elsewhere, against central differences
 * and against that formula */
static void test_grads(void) {
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-6};
    for (int di = 0; di < ndev; di++)
        for (int c = 0; c < NCASES; c++) {
            ts_scope_begin();
            ts_tensor *x = mk(xs, devs[di], TS_F64, true);
            bool ok = ts_gradcheck(sp_fn, (void *)&cases[c], &x, 1, go);
            double ref[N];
            for (int i = 0; i < N; i++) {
                double z = cases[c].beta * xs[i];
                ref[i] = z > cases[c].threshold ? 1 : 1 / (1 + exp(-z));
            }
            ts_tensor *y = ts_softplus_ex(x, cases[c].beta, cases[c].threshold);
            ok = ok && y && ts_backward(ts_sum(y)) == TS_OK && near_all(ts_grad(x), ref, N, 1e-14);
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "softplus grad beta %g threshold %g on %s%s",
                              cases[c].beta, cases[c].threshold, ts_device_str(devs[di]),
                              ts_test_error_str());
            ts_error_clear();
            ts_scope_end();
        }
}

static void test_errors(void) {
    ts_scope_begin();
    const int64_t iv[4] = {1, 2, 3, 4};
    ts_tensor *xi = ts_tensor_i64(TS_SHAPE(4), iv, (ts_opts){.dtype = TS_I64});
    CHECK(ts_softplus_ex(xi, 2, 10) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "softplus");
    CHECK(ts_softplus_ex(NULL, 2, 10) == NULL);
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_values();
    test_grads();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
