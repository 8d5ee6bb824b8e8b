/* test_loss_focal.c — ts_sigmoid_focal_loss (src/nn/loss_focal.c) on cpu and sim:0: float64
 * values against torchvision's formula evaluated in double here (logits up to +-30, hard and
 * soft targets, alpha >= 0 and < 0, gamma 2 and 0), the reductions, gradcheck over the logits
 * and the targets, float32 against the float64 formula (the tolerance: a few float32 roundings
 * of each factor, relative), and the errors. */
#include <math.h>
#include <stdio.h>

#include "ts_test.h"

#define N 8
static const double X_[N] = {0.3, -1.2, 2.0, 30.0, -30.0, 5.0, -4.0, 0.0};
static const double T_[N] = {1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.3};

static ts_tensor *vec(const double *v, ts_dtype dt, ts_device dev) {
    return ts_tensor_f64(TS_SHAPE(N), v, (ts_opts){.dtype = dt, .device = dev});
}

static double ref(double x, double t, double alpha, double gamma) {
    const double p = 1 / (1 + exp(-x));
    const double ce = (1 - t) * x + (x > 0 ? log1p(exp(-x)) : -x + log1p(exp(x)));
    const double p_t = p * t + (1 - p) * (1 - t);
    double loss = ce * pow(1 - p_t, gamma);
    if (alpha >= 0) loss *= alpha * t + (1 - alpha) * (1 - t);
    return loss;
}

static void host(ts_tensor *t, double *out) {
    CHECK(ts_copy_to_host(ts_to(ts_to_dtype(t, TS_F64), ts_cpu()), out, N * sizeof(double)) ==
          TS_OK);
}

static void test_values(ts_device dev) {
    ts_scope_begin();
    const double cfg[3][2] = {{0.25, 2.0}, {-1.0, 2.0}, {0.5, 0.0}};
    for (int c = 0; c < 3; c++) {
        const double a = cfg[c][0], g = cfg[c][1];
        ts_tensor *x = vec(X_, TS_F64, dev), *t = vec(T_, TS_F64, dev);
        double got[N], sum = 0;
        host(ts_sigmoid_focal_loss(x, t, a, g, TS_REDUCTION_NONE), got);
        for (int i = 0; i < N; i++) {
            const double want = ref(X_[i], T_[i], a, g);
            sum += want;
            /* (1 - p_t) for a confident logit is a difference near 1: its relative error is
             * eps / (1 - p_t); the formula's own */
            CHECK_NEAR(got[i], want, 1e-13 * fabs(want) + 1e-300);
        }
        CHECK_NEAR(ts_item(ts_sigmoid_focal_loss(x, t, a, g, TS_REDUCTION_SUM)), sum, 1e-13 * sum);
        CHECK_NEAR(ts_item(ts_sigmoid_focal_loss(x, t, a, g, TS_REDUCTION_MEAN)), sum / N,
                   1e-13 * sum);
    }
    /* float32: each factor rounded a few times; the loss of a logit of +-30 against the wrong
     * target is ~30, its relative error a few float32 ulps */
    ts_tensor *x32 = vec(X_, TS_F32, dev), *t32 = vec(T_, TS_F32, dev);
    ts_tensor *y = ts_sigmoid_focal_loss(x32, t32, 0.25, 2.0, TS_REDUCTION_NONE);
    CHECK(y && ts_dtype_of(y) == TS_F32);
    double got[N];
    host(y, got);
    for (int i = 0; i < N; i++) {
        const double want = ref((float)X_[i], (float)T_[i], 0.25, 2.0);
        /* 1 - p_t near 1 - 1: float32's sigmoid of |x| = 30 is 1 exactly, so (1 - p_t) is 0 where
         * the double one is 9e-14: the absolute floor is that loss's size */
        CHECK_NEAR(got[i], want, 16 * 0x1p-24 * fabs(want) + 1e-11);
    }
    ts_scope_end();
}

static ts_tensor *f_focal(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_sigmoid_focal_loss(in[0], in[1], 0.25, 2.0, TS_REDUCTION_SUM);
}

static void test_gradcheck(ts_device dev) {
    ts_scope_begin();
    const double x[6] = {0.3, -1.2, 2.0, 3.0, -0.7, 0.1}, t[6] = {1, 0, 0.6, 0, 1, 0.2};
    ts_tensor *in[2] = {ts_tensor_f64(TS_SHAPE(6), x, (ts_opts){.dtype = TS_F64, .device = dev}),
                        ts_tensor_f64(TS_SHAPE(6), t, (ts_opts){.dtype = TS_F64, .device = dev})};
    ts_set_requires_grad(in[0], true);
    ts_set_requires_grad(in[1], true);
    const bool ok = ts_gradcheck(f_focal, NULL, in, 2, (ts_gradcheck_opts){0});
    printf("gradcheck sigmoid_focal_loss on %s: %s\n", ts_device_str(dev), ok ? "ok" : "FAILED");
    CHECK(ok);
    ts_scope_end();
}

static void test_errors(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x = vec(X_, TS_F64, dev);
    ts_tensor *t3 = ts_tensor_f64(TS_SHAPE(3), T_, (ts_opts){.dtype = TS_F64, .device = dev});
    CHECK(ts_sigmoid_focal_loss(x, t3, 0.25, 2.0, TS_REDUCTION_NONE) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "sigmoid_focal_loss: Target size ([3]) must be the same");
    CHECK(ts_sigmoid_focal_loss(x, ts_to_dtype(x, TS_I64), 0.25, 2.0, TS_REDUCTION_NONE) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "sigmoid_focal_loss: expected a floating point targets");
    CHECK(ts_sigmoid_focal_loss(x, x, 0.25, NAN, TS_REDUCTION_NONE) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "sigmoid_focal_loss: gamma must be finite");
    ts_scope_end();
}

int main(void) {
    ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    for (int d = 0; d < 2; d++) {
        test_values(devs[d]);
        test_gradcheck(devs[d]);
        test_errors(devs[d]);
    }
    return ts_test_finish();
}
