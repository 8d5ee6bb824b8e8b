/* test_norm_momentum.c — the momentum of the running statistics taken as PyTorch's (issue 76):
 * running = (1 - momentum) running + momentum batch (the variance unbiased), so momentum 0 leaves
 * them unchanged (frozen statistics when fine-tuning) and a negative one extrapolates. For
 * ts_batch_norm, ts_instance_norm (averaged back over N) and the BatchNorm1d / 2d modules, whose
 * options take an explicit 0 through ts_norm_opts.momentum_set while (ts_norm_opts){0} keeps
 * PyTorch's default 0.1. References in long double from the inputs written here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

enum { N = 3, C = 2, L = 5 };
static double X[N * C * L], RM0[C] = {0.75, -1.5}, RV0[C] = {2.0, 0.5};

static void fill_x(void) {
    for (int i = 0; i < N * C * L; i++) X[i] = sin(0.7 * i + 0.3) * (1.0 + 0.25 * (i % 7)) + 0.5;
}

static ts_tensor *vec(const double *v, int64_t n, ts_device dev) {
    return ts_tensor_f64(TS_SHAPE(n), v, (ts_opts){.dtype = TS_F64, .device = dev});
}

/* the running statistics after one step over the (n, c) planes [n0, n1) x L of X: batch_norm
 * pools all of them per channel; instance_norm (per_plane) averages the per-plane updates */
static void reference(double momentum, bool per_plane, double *rm, double *rv) {
    for (int c = 0; c < C; c++) {
        long double m_sum = 0, v_sum = 0;
        const int groups = per_plane ? N : 1, per = per_plane ? 1 : N;
        for (int g = 0; g < groups; g++) {
            long double s = 0, ss = 0;
            const long double cnt = (long double)per * L;
            for (int n = g * per; n < (g + 1) * per; n++)
                for (int l = 0; l < L; l++) s += X[(n * C + c) * L + l];
            const long double mean = s / cnt;
            for (int n = g * per; n < (g + 1) * per; n++)
                for (int l = 0; l < L; l++) {
                    const long double d = X[(n * C + c) * L + l] - mean;
                    ss += d * d;
                }
            m_sum += (1 - (long double)momentum) * RM0[c] + (long double)momentum * mean;
            v_sum += (1 - (long double)momentum) * RV0[c] + (long double)momentum * ss / (cnt - 1);
        }
        rm[c] = (double)(m_sum / groups);
        rv[c] = (double)(v_sum / groups);
    }
}

/* t equals ref within tol (absolute and relative), element by element */
static bool close_vec(ts_tensor *t, const double *ref, int64_t n, double tol) {
    double got[16];
    if (!t || n > 16 || ts_numel(t) != n ||
        ts_copy_to_host(ts_to_dtype(t, TS_F64), got, (size_t)n * sizeof(double)) != TS_OK)
        return false;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - ref[i]) <= tol * (1 + fabs(ref[i])))) {
            fprintf(stderr, "  [%lld] %.17g, expected %.17g\n", (long long)i, got[i], ref[i]);
            return false;
        }
    return true;
}

/* float64: a few roundings of values near 1 (sum of 15, the update's two products) */
static const double TOL = 64 * 1.1102230246251565e-16;

static void check_functional(ts_device dev, bool instance) {
    static const double moms[] = {0.0, 0.1, 0.25, 1.0, -1.0};
    for (size_t k = 0; k < sizeof moms / sizeof moms[0]; k++) {
        ts_scope_begin();
        ts_tensor *x =
            ts_tensor_f64(TS_SHAPE(N, C, L), X, (ts_opts){.dtype = TS_F64, .device = dev});
        ts_tensor *rm = vec(RM0, C, dev), *rv = vec(RV0, C, dev);
        ts_tensor *y = instance ? ts_instance_norm(x, rm, rv, NULL, NULL, true, moms[k], 1e-5)
                                : ts_batch_norm(x, rm, rv, NULL, NULL, true, moms[k], 1e-5);
        CHECK_OK();
        CHECK(y != NULL);
        double erm[C], erv[C];
        reference(moms[k], instance, erm, erv);
        if (!close_vec(rm, erm, C, TOL) || !close_vec(rv, erv, C, TOL))
            fprintf(stderr, "%s momentum %g on %s\n", instance ? "instance_norm" : "batch_norm",
                    moms[k], ts_device_str(dev));
        CHECK(close_vec(rm, erm, C, TOL));
        CHECK(close_vec(rv, erv, C, TOL));
        if (moms[k] == 0) { /* frozen: the very same bits */
            CHECK(ts_item(ts_sum(ts_ne(rm, vec(RM0, C, dev)))) == 0);
            CHECK(ts_item(ts_sum(ts_ne(rv, vec(RV0, C, dev)))) == 0);
        }
        ts_scope_end();
    }
}

/* one training step of a BatchNorm1d built with o, its running statistics seeded with RM0 / RV0 */
static void check_module(ts_norm_opts o, double expect_momentum, const char *expect_repr) {
    ts_scope_begin();
    ts_module *m = ts_batch_norm1d_new(C, o);
    CHECK(m != NULL);
    if (!m) {
        ts_scope_end();
        return;
    }
    ts_tensor_list b = ts_module_named_buffers(m);
    ts_tensor *rm = ts_tensor_list_get(&b, "running_mean"),
              *rv = ts_tensor_list_get(&b, "running_var");
    CHECK(rm && rv);
    ts_module_to_dtype(m, TS_F64);
    ts_tensor_list_free(&b);
    b = ts_module_named_buffers(m);
    rm = ts_tensor_list_get(&b, "running_mean"), rv = ts_tensor_list_get(&b, "running_var");
    CHECK(rm && rv && ts_copy_(rm, vec(RM0, C, ts_cpu())) && ts_copy_(rv, vec(RV0, C, ts_cpu())));
    char *r = ts_module_repr(m);
    CHECK(r && strstr(r, expect_repr));
    if (r && !strstr(r, expect_repr)) fprintf(stderr, "  repr %s, expected %s\n", r, expect_repr);
    free(r);
    ts_module_train(m, true);
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(N, C, L), X, (ts_opts){.dtype = TS_F64});
    CHECK(ts_forward(m, x) != NULL);
    CHECK_OK();
    double erm[C], erv[C];
    reference(expect_momentum, false, erm, erv);
    CHECK(close_vec(rm, erm, C, TOL));
    CHECK(close_vec(rv, erv, C, TOL));
    ts_tensor_list_free(&b);
    ts_module_free(m);
    ts_scope_end();
}

static void test_modules(void) {
    check_module((ts_norm_opts){0}, 0.1, "momentum=0.1"); /* the zeroed default: PyTorch's 0.1 */
    check_module((ts_norm_opts){.momentum_set = true}, 0.0, "momentum=0.0");
    check_module((ts_norm_opts){.momentum = 0.5, .momentum_set = true}, 0.5, "momentum=0.5");
    check_module((ts_norm_opts){.momentum = 0.3}, 0.3, "momentum=0.3");
    /* out of range: a clear error, no module */
    CHECK(!ts_batch_norm2d_new(C, (ts_norm_opts){.momentum = -0.5, .momentum_set = true}));
    CHECK(ts_error() == TS_ERR_ARG && strstr(ts_error_message(), "momentum"));
    ts_error_clear();
}

/* one running statistic without the other: PyTorch's refusal, and neither is touched */
static void check_one_statistic(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(N, C, L), X, (ts_opts){.dtype = TS_F64, .device = dev});
    ts_tensor *rm = vec(RM0, C, dev), *rv = vec(RV0, C, dev);
    CHECK(!ts_batch_norm(x, rm, NULL, NULL, NULL, true, 0.25, 1e-5));
    CHECK_ERR_HAS(TS_ERR_ARG, "running_mean and running_var must either both be None");
    CHECK(!ts_batch_norm(x, NULL, rv, NULL, NULL, true, 0.25, 1e-5));
    CHECK_ERR_HAS(TS_ERR_ARG, "neither be None");
    CHECK(close_vec(rm, RM0, C, 0) && close_vec(rv, RV0, C, 0));
    ts_scope_end();
}

int main(void) {
    fill_x();
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < nd; i++) {
        check_functional(devs[i], false);
        check_functional(devs[i], true);
        check_one_statistic(devs[i]);
    }
    test_modules();
    return ts_test_finish();
}
