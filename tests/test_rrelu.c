/* test_rrelu.c — ts_rrelu / ts_rrelu_ (src/nn/rrelu.c), torch.nn.functional.rrelu, on every device:
 * in training x kept where x > 0 and scaled by a slope in [lower, upper] elsewhere, the slopes'
 * mean within a bound of (lower + upper) / 2, the gradient equal to the slope; in evaluation the
 * float64 leaky_relu with the mean slope; the in-place form; the refusals. */
#include <math.h>
#include <stdio.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

enum { N = 400 };
static double xv[N], yv[N], gv[N], ref[N];

static void test_training(void) {
    const double lo = 0.1, hi = 0.4;
    for (int i = 0; i < N; i++) xv[i] = (i % 2 ? -1 : 1) * (0.25 + 0.01 * (i % 37));
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        ts_manual_seed(99);
        ts_tensor *x = ts_detach(
            ts_to(ts_tensor_f64(TS_SHAPE(20, 20), xv, (ts_opts){.dtype = TS_F64}), devs[di]));
        ts_set_requires_grad(x, true);
        ts_tensor *y = ts_rrelu(x, lo, hi, true);
        bool ok = y && rd(y, yv, N) && ts_backward(ts_sum(y)) == TS_OK && rd(ts_grad(x), gv, N);
        double sum = 0;
        int neg = 0;
        for (int i = 0; ok && i < N; i++) {
            double a = yv[i] / xv[i];
            if (xv[i] > 0)
                ok = yv[i] == xv[i] && gv[i] == 1;
            else {
                ok = a >= lo && a <= hi && fabs(gv[i] - a) <= 1e-15;
                sum += a, neg++;
            }
        }
        /* U(lo, hi) has sd (hi - lo) / sqrt(12); the mean of neg draws within 5 of its sd */
        double sd = (hi - lo) / sqrt(12.0) / sqrt((double)neg);
        ok = ok && fabs(sum / neg - (lo + hi) / 2) <= 5 * sd;
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "rrelu training on %s%s", ts_device_str(devs[di]),
                          ts_test_error_str());
        ts_error_clear();
        ts_scope_end();
    }
}

static void test_eval_inplace(void) {
    const double lo = 0.125, hi = 1.0 / 3;
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        for (int i = 0; i < N; i++) ref[i] = xv[i] > 0 ? xv[i] : xv[i] * (lo + hi) / 2;
        ts_tensor *x = ts_to(ts_tensor_f64(TS_SHAPE(N), xv, (ts_opts){.dtype = TS_F64}), devs[di]);
        bool ok = near_all(ts_rrelu(x, lo, hi, false), ref, N, 1e-15);
        ts_tensor *w = ts_clone(x);
        ok = ok && ts_rrelu_(w, lo, hi, false) == w && near_all(w, ref, N, 1e-15);
        ts_tensor *v = ts_clone(x);
        ok = ok && ts_rrelu_(v, lo, hi, true) == v && rd(v, yv, N);
        for (int i = 0; ok && i < N; i++)
            ok = xv[i] > 0 ? yv[i] == xv[i] : (yv[i] / xv[i] >= lo && yv[i] / xv[i] <= hi);
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "rrelu eval / in place on %s%s",
                          ts_device_str(devs[di]), ts_test_error_str());
        ts_error_clear();
        ts_scope_end();
    }
}

static void test_errors(void) {
    ts_scope_begin();
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(4), xv, (ts_opts){.dtype = TS_F64});
    CHECK(ts_rrelu(x, 0.5, 0.1, true) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "Lower bound");
    const int64_t iv[2] = {1, -2};
    CHECK(ts_rrelu(ts_tensor_i64(TS_SHAPE(2), iv, (ts_opts){.dtype = TS_I64}), 0.1, 0.3, true) ==
          NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "rrelu");
    CHECK(ts_rrelu_(NULL, 0.1, 0.3, true) == NULL);
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_training();
    test_eval_inplace();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
