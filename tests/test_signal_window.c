/* test_signal_window.c — ts_signal_window (src/ops/window.c): every window kind, symmetric and
 * periodic, against float64 formulas written another way (hann as sin^2, kaiser's I0 as the
 * trapezoid rule of its integral, exact for a periodic integrand), M = 0 and 1, dtype, device and
 * requires_grad, and the refusals with PyTorch's messages. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static const double PI = 3.14159265358979323846;
static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

/* I0(x) = 1/pi int_0^pi exp(x cos t) dt: the trapezoid rule over a full period converges
 * geometrically */
static double i0_integral(double x) {
    const int n = 400;
    double s = 0;
    for (int k = 0; k < n; k++) s += exp(x * cos(2 * PI * k / n));
    return s / n;
}

/* the reference value at n of window kind for length M (N = M - 1 symmetric, M periodic) */
static double ref(ts_window_kind kind, const double *p, int np, int64_t M, bool sym, int64_t i) {
    if (M == 1 && !(kind == TS_WINDOW_EXPONENTIAL && np > 1)) return 1;
    double N = sym ? (double)M - 1 : (double)M, n = (double)i;
    switch (kind) {
    case TS_WINDOW_GENERAL_COSINE:
        if (np == 2 && p[0] == 0.5) return pow(sin(PI * n / N), 2); /* hann */
        if (np == 3)                                                /* blackman */
            return 0.42 - 0.5 * cos(2 * PI * n / N) + 0.08 * cos(4 * PI * n / N);
        return p[0] - p[1] * cos(2 * PI * n / N);
    case TS_WINDOW_BARTLETT:
        return n <= N / 2 ? 2 * n / N : 2 - 2 * n / N;
    case TS_WINDOW_COSINE:
        return sin(PI * (n + 0.5) / (N + 1));
    case TS_WINDOW_EXPONENTIAL:
        return exp(-fabs(n - (np > 1 ? p[1] : N / 2)) / p[0]);
    case TS_WINDOW_GAUSSIAN:
        return exp(-(n - N / 2) * (n - N / 2) / (2 * p[0] * p[0]));
    case TS_WINDOW_KAISER: {
        double r = (n - N / 2) / (N / 2);
        return i0_integral(p[0] * sqrt(fmax(0, 1 - r * r))) / i0_integral(p[0]);
    }
    }
    return NAN;
}

static void test_values(void) {
    const double hann[2] = {0.5, 0.5}, hamming[2] = {0.54, 0.46}, black[3] = {0.42, 0.5, 0.08};
    const double tau[2] = {2.5, 3.0}, stdv[1] = {1.7}, beta[1] = {8.6};
    struct {
        ts_window_kind k;
        const double *p;
        int np;
        bool periodic_only;
    } cases[] = {
        {TS_WINDOW_GENERAL_COSINE, hann, 2, false},  {TS_WINDOW_GENERAL_COSINE, hamming, 2, false},
        {TS_WINDOW_GENERAL_COSINE, black, 3, false}, {TS_WINDOW_BARTLETT, NULL, 0, false},
        {TS_WINDOW_COSINE, NULL, 0, false},          {TS_WINDOW_EXPONENTIAL, tau, 1, false},
        {TS_WINDOW_EXPONENTIAL, tau, 2, true}, /* a center: periodic windows only */
        {TS_WINDOW_GAUSSIAN, stdv, 1, false},        {TS_WINDOW_KAISER, beta, 1, false},
    };
    const int64_t lens[4] = {0, 1, 7, 10};
    for (int di = 0; di < ndev; di++)
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
            for (int li = 0; li < 4; li++)
                for (int sym = 0; sym < 2; sym++) {
                    if (sym && cases[c].periodic_only) continue;
                    ts_scope_begin();
                    const int64_t M = lens[li];
                    ts_tensor *w = ts_signal_window(cases[c].k, M, cases[c].p, cases[c].np, sym,
                                                    (ts_opts){.dtype = TS_F64, .device = devs[di]});
                    double want[16];
                    for (int64_t i = 0; i < M; i++)
                        want[i] = ref(cases[c].k, cases[c].p, cases[c].np, M, sym, i);
                    /* a few roundings of cos / exp / the I0 series: 64 eps */
                    bool ok = w && ts_ndim(w) == 1 && ts_size(w, 0) == M &&
                              ts_device_equal(ts_device_of(w), devs[di]) &&
                              (M == 0 || near_all(w, want, M, 64 * 0x1p-53));
                    ts_test_record(ok);
                    if (!ok)
                        ts_test_failf(__FILE__, __LINE__,
                                      "window kind %d (%d params) M %lld sym %d"
                                      " on %s%s",
                                      (int)cases[c].k, cases[c].np, (long long)M, sym,
                                      ts_device_str(devs[di]), ts_test_error_str());
                    ts_error_clear();
                    ts_scope_end();
                }
    /* the dtype (default float32) and requires_grad */
    ts_scope_begin();
    ts_tensor *w = ts_signal_window(TS_WINDOW_GENERAL_COSINE, 5, hann, 2, false,
                                    (ts_opts){.requires_grad = true});
    CHECK(w && ts_dtype_of(w) == TS_F32 && ts_requires_grad(w));
    w = ts_signal_window(TS_WINDOW_KAISER, 5, beta, 1, true, (ts_opts){.dtype = TS_F16});
    CHECK(w && ts_dtype_of(w) == TS_F16);
    CHECK_OK();
    ts_scope_end();
}

static void test_errors(void) {
    const double one[2] = {1, 2}, neg[1] = {-1}, zero[1] = {0};
    const ts_opts o = {.dtype = TS_F64};
    CHECK(ts_signal_window(TS_WINDOW_COSINE, -1, NULL, 0, true, o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "cosine requires non-negative window length, got M=-1");
    CHECK(ts_signal_window(TS_WINDOW_COSINE, 4, NULL, 0, true, (ts_opts){.dtype = TS_I64}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "expects float32 or float64 dtypes, got: int64");
    CHECK(ts_signal_window(TS_WINDOW_EXPONENTIAL, 4, zero, 1, true, o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "Tau must be positive");
    CHECK(ts_signal_window(TS_WINDOW_EXPONENTIAL, 4, one, 2, true, o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "Center must be None for symmetric windows");
    CHECK(ts_signal_window(TS_WINDOW_GAUSSIAN, 4, neg, 1, true, o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "Standard deviation must be positive");
    CHECK(ts_signal_window(TS_WINDOW_KAISER, 4, neg, 1, true, o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "beta must be non-negative");
    CHECK(ts_signal_window(TS_WINDOW_GENERAL_COSINE, 4, NULL, 0, true, o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "Coefficients cannot be empty");
    CHECK(ts_signal_window(TS_WINDOW_GAUSSIAN, 4, one, 2, true, o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "expected 1 parameters, got 2");
    /* exponential takes 1 or 2 (a center), not 0 or 3 */
    const double three[3] = {1, 1, 1};
    CHECK(ts_signal_window(TS_WINDOW_EXPONENTIAL, 4, NULL, 0, false, o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "exponential: expected 1 parameters, got 0");
    CHECK(ts_signal_window(TS_WINDOW_EXPONENTIAL, 4, three, 3, false, o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "exponential: expected 1 parameters, got 3");
    CHECK(ts_signal_window(TS_WINDOW_GAUSSIAN, 4, NULL, 1, true, o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "gaussian");
    CHECK(ts_signal_window((ts_window_kind)9, 4, NULL, 0, true, o) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "unknown window kind");
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_values();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
