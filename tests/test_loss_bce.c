/* test_loss_bce.c — ts_binary_cross_entropy (src/nn/loss_bce.c) on cpu and sim:0 in float64:
 * the loss against PyTorch's formula evaluated in double here (each log clamped at -100, the ends 0
 * and 1 included), the input's gradient (x - t) / max(x (1 - x), 1e-12) w finite at 0 and 1, the
 * reductions, gradcheck over input, target and weight, the errors, and no tensor left behind. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ts_test.h"

#define N 8
static const double X_[N] = {0.0, 1.0, 1e-30, 0.5, 0.25, 0.9, 1e-3, 0.999};
static const double T_[N] = {1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.2, 0.7};
static const double W_[N] = {0.5, 1.0, 1.5, 2.0, 0.75, 1.25, 1.75, 3.0};

static ts_tensor *vec(const double *v, int64_t n, ts_device dev) {
    return ts_tensor_f64(TS_SHAPE(n), v, (ts_opts){.dtype = TS_F64, .device = dev});
}

static double ref_loss(double x, double t) {
    const double lx = fmax(log(x), -100), lq = fmax(log1p(-x), -100);
    return (t - 1) * lq - t * lx;
}

static void host(ts_tensor *t, double *out, int n) {
    CHECK(ts_copy_to_host(ts_to(t, ts_cpu()), out, (size_t)n * sizeof(double)) == TS_OK);
}

static void test_values_and_gradient(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x = vec(X_, N, dev), *t = vec(T_, N, dev), *w = vec(W_, N, dev);
    ts_set_requires_grad(x, true);
    ts_tensor *none =
        ts_binary_cross_entropy(x, t, (ts_loss_opts){.weight = w, .reduction = TS_REDUCTION_NONE});
    double got[N], sum = 0;
    host(none, got, N);
    for (int i = 0; i < N; i++) {
        const double want = ref_loss(X_[i], T_[i]) * W_[i];
        sum += want;
        CHECK_NEAR(got[i], want, 1e-14 * fabs(want) + 1e-300);
    }
    ts_tensor *mean = ts_binary_cross_entropy(x, t, (ts_loss_opts){.weight = w});
    CHECK_NEAR(ts_item(mean), sum / N, 1e-14 * fabs(sum / N));
    ts_backward(mean);
    double g[N];
    host(ts_grad(x), g, N);
    for (int i = 0; i < N; i++) {
        const double want = (X_[i] - T_[i]) / fmax((1 - X_[i]) * X_[i], 1e-12) * W_[i] / N;
        CHECK(isfinite(g[i]));
        CHECK_NEAR(g[i], want, 1e-13 * fabs(want));
    }
    CHECK_OK();
    ts_scope_end();
}

static ts_device g_dev;
static ts_tensor *f_bce(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_binary_cross_entropy(in[0], in[1],
                                   (ts_loss_opts){.weight = in[2], .reduction = TS_REDUCTION_SUM});
}

static void test_gradcheck(ts_device dev) {
    ts_scope_begin();
    g_dev = dev;
    const double xs[6] = {0.1, 0.35, 0.5, 0.62, 0.8, 0.93}, ts[6] = {1, 0, 0.3, 0.9, 0, 1};
    const double ws[3] = {0.5, 1.5, 2.0};
    ts_tensor *in[3] = {ts_reshape(vec(xs, 6, dev), TS_SHAPE(2, 3)),
                        ts_reshape(vec(ts, 6, dev), TS_SHAPE(2, 3)), vec(ws, 3, dev)};
    for (int i = 0; i < 3; i++) ts_set_requires_grad(in[i], true);
    const bool ok = ts_gradcheck(f_bce, NULL, in, 3, (ts_gradcheck_opts){0});
    printf("gradcheck binary_cross_entropy on %s: %s\n", ts_device_str(dev), ok ? "ok" : "FAILED");
    CHECK(ok);
    CHECK_OK();
    ts_scope_end();
}

static void test_errors(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x = vec(X_, N, dev), *t3 = vec(T_, 3, dev);
    CHECK(ts_binary_cross_entropy(x, t3, (ts_loss_opts){0}) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "binary_cross_entropy");
    CHECK(ts_binary_cross_entropy(x, vec(T_, N, dev), (ts_loss_opts){.weight = t3}) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "binary_cross_entropy");
    CHECK(ts_binary_cross_entropy(x, vec(T_, N, dev), (ts_loss_opts){.reduction = 7}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

int main(void) {
    ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    ts_mem_stats before, after;
    ts_memory_stats(ts_sim(0), &before);
    for (int d = 0; d < 2; d++) {
        test_values_and_gradient(devs[d]);
        test_gradcheck(devs[d]);
        test_errors(devs[d]);
    }
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    return ts_test_finish();
}
