/* test_loss_dtype.c — the result dtype of the pointwise losses when input, target and weight have
 * different floating dtypes, PyTorch 2.15's (measured with /opt/torch2/bin/torch-python):
 *   binary_cross_entropy_with_logits: the target's dtype, whatever input, weight and pos_weight
 *     are (its CPU kernel writes into (1 - target) in place);
 *   huber_loss: the input's dtype, promoted with the weight's where there is one;
 *   mse_loss, l1_loss, smooth_l1_loss, cross_entropy with probability targets: the promotion.
 * Values: Tessera computes (and reduces) in the widest dtype and rounds once to the result dtype,
 * so each element and the mean are within half an ulp of the result dtype of the float64 formula
 * evaluated here. The input's gradient has the input's dtype and no rounding to the narrower one
 * (bce_with_logits: (sigmoid(x) - t) / n to float64 accuracy, as PyTorch's; with the rounding of
 * each element's gradient to float32 it failed fasterrcnn's float64 gate). On cpu and sim:0. */
#include <math.h>
#include <stdio.h>

#include "ts_test.h"

#define N 5
static const double X_[N] = {0.3, -1.2, 2.0, 40.0, -30.0};
static const double T_[N] = {0.2, 0.7, 1.0, 0.0, 0.5};
static const double W_[N] = {0.5, 1.0, 1.5, 2.0, 0.75};
static const double EPS32 = 0x1p-24; /* float32's unit roundoff */

static ts_tensor *vec(const double *v, ts_dtype dt, ts_device dev) {
    return ts_tensor_f64(TS_SHAPE(N), v, (ts_opts){.dtype = dt, .device = dev});
}

static void host(ts_tensor *t, double *out, int n) {
    ts_tensor *c = ts_to(ts_to_dtype(t, TS_F64), ts_cpu());
    CHECK(c && ts_copy_to_host(c, out, (size_t)n * sizeof(double)) == TS_OK);
}

/* (1 - t) x + log(1 + e^-x), stable */
static double bcel_ref(double x, double t) {
    const double sp = x > 0 ? log1p(exp(-x)) : -x + log1p(exp(x));
    return (1 - t) * x + sp;
}

static double huber_ref(double x, double t) {
    const double z = fabs(x - t);
    return z < 1.0 ? 0.5 * z * z : z - 0.5;
}

/* the value a float32 tensor holds for v */
static double f32(double v) { return (double)(float)v; }

static void test_bce_with_logits(ts_device dev) {
    ts_scope_begin();
    /* input float64, target float32: float32 (the case RetinaNet / FCOS losses hit) */
    ts_tensor *x = vec(X_, TS_F64, dev), *t = vec(T_, TS_F32, dev);
    ts_set_requires_grad(x, true);
    ts_tensor *none = ts_bce_with_logits(x, t, (ts_loss_opts){.reduction = TS_REDUCTION_NONE});
    CHECK(none && ts_dtype_of(none) == TS_F32);
    double got[N], ref[N], mean = 0, amean = 0;
    host(none, got, N);
    for (int i = 0; i < N; i++) {
        ref[i] = bcel_ref(X_[i], f32(T_[i]));
        mean += ref[i] / N, amean += fabs(ref[i]) / N;
        CHECK_NEAR(got[i], ref[i], EPS32 * fabs(ref[i]));
    }
    ts_tensor *m = ts_bce_with_logits(x, t, (ts_loss_opts){0});
    CHECK(m && ts_dtype_of(m) == TS_F32);
    CHECK_NEAR(ts_item(m), mean, EPS32 * fabs(mean) + 1e-15 * amean); /* reduced, rounded once */
    CHECK(ts_backward(m) == TS_OK);
    ts_tensor *g = ts_grad(x);
    CHECK(g && ts_dtype_of(g) == TS_F64);
    double gx[N];
    host(g, gx, N);
    for (int i = 0; i < N; i++) {
        /* no float32 rounding on the way back (PyTorch's backward is in the input's dtype) */
        const double want = (1 / (1 + exp(-X_[i])) - f32(T_[i])) / N;
        CHECK_NEAR(gx[i], want, 4e-16 * (1 + fabs(X_[i])) * fabs(want) + 1e-300);
    }
    /* input float32, target float64: float64, computed from the float32 input exactly */
    ts_tensor *x32 = vec(X_, TS_F32, dev), *t64 = vec(T_, TS_F64, dev);
    ts_tensor *wide = ts_bce_with_logits(x32, t64, (ts_loss_opts){.reduction = TS_REDUCTION_NONE});
    CHECK(wide && ts_dtype_of(wide) == TS_F64);
    host(wide, got, N);
    for (int i = 0; i < N; i++) {
        const double want = bcel_ref(f32(X_[i]), T_[i]);
        CHECK_NEAR(got[i], want, 1e-14 * fabs(want));
    }
    /* the weight and pos_weight do not widen it; a half target narrows it */
    ts_tensor *w64 = vec(W_, TS_F64, dev);
    ts_tensor *r = ts_bce_with_logits(x32, vec(T_, TS_F32, dev), (ts_loss_opts){.weight = w64});
    CHECK(r && ts_dtype_of(r) == TS_F32);
    r = ts_bce_with_logits(x, t, (ts_loss_opts){.pos_weight = w64});
    CHECK(r && ts_dtype_of(r) == TS_F32);
    r = ts_bce_with_logits(x, t64, (ts_loss_opts){.weight = vec(W_, TS_F32, dev)});
    CHECK(r && ts_dtype_of(r) == TS_F64);
    r = ts_bce_with_logits(x32, vec(T_, TS_F16, dev), (ts_loss_opts){0});
    CHECK(r && ts_dtype_of(r) == TS_F16);
    r = ts_bce_with_logits(x, vec(T_, TS_BF16, dev), (ts_loss_opts){.weight = w64});
    CHECK(r && ts_dtype_of(r) == TS_BF16);
    ts_scope_end();
}

static void test_huber(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x32 = vec(X_, TS_F32, dev), *t64 = vec(T_, TS_F64, dev);
    ts_set_requires_grad(x32, true);
    /* input float32, target float64: float32 */
    ts_tensor *none = ts_huber_loss(x32, t64, TS_REDUCTION_NONE, 1.0, NULL);
    CHECK(none && ts_dtype_of(none) == TS_F32);
    double got[N];
    host(none, got, N);
    for (int i = 0; i < N; i++) {
        const double want = huber_ref(f32(X_[i]), T_[i]);
        CHECK_NEAR(got[i], want, EPS32 * fabs(want));
    }
    ts_tensor *m = ts_huber_loss(x32, t64, TS_REDUCTION_MEAN, 1.0, NULL);
    CHECK(m && ts_dtype_of(m) == TS_F32);
    CHECK(ts_backward(m) == TS_OK);
    CHECK(ts_grad(x32) && ts_dtype_of(ts_grad(x32)) == TS_F32);
    /* a weight promotes: float64 with a float64 weight, float32 with a float32 one */
    ts_tensor *r = ts_huber_loss(x32, t64, TS_REDUCTION_MEAN, 1.0, vec(W_, TS_F64, dev));
    CHECK(r && ts_dtype_of(r) == TS_F64);
    r = ts_huber_loss(x32, t64, TS_REDUCTION_MEAN, 1.0, vec(W_, TS_F32, dev));
    CHECK(r && ts_dtype_of(r) == TS_F32);
    r = ts_huber_loss(vec(X_, TS_F64, dev), vec(T_, TS_F32, dev), TS_REDUCTION_MEAN, 1.0, NULL);
    CHECK(r && ts_dtype_of(r) == TS_F64);
    ts_scope_end();
}

/* mse, l1, smooth_l1 and cross_entropy with probabilities: the promotion, either way round */
static void test_promoting(ts_device dev) {
    ts_scope_begin();
    for (int k = 0; k < 2; k++) {
        ts_tensor *x = vec(X_, k ? TS_F64 : TS_F32, dev), *t = vec(T_, k ? TS_F32 : TS_F64, dev);
        ts_tensor *r = ts_mse_loss_ex(x, t, (ts_loss_opts){0});
        CHECK(r && ts_dtype_of(r) == TS_F64);
        r = ts_l1_loss(x, t, (ts_loss_opts){0});
        CHECK(r && ts_dtype_of(r) == TS_F64);
        r = ts_smooth_l1_loss(x, t, (ts_loss_opts){0});
        CHECK(r && ts_dtype_of(r) == TS_F64);
        const double l[6] = {0.1, 0.5, -0.3, 1.0, 0.2, 0.0}, p[6] = {0.2, 0.3, 0.5, 0.1, 0.1, 0.8};
        ts_tensor *lg = ts_tensor_f64(TS_SHAPE(2, 3), l,
                                      (ts_opts){.dtype = k ? TS_F64 : TS_F32, .device = dev});
        ts_tensor *pr = ts_tensor_f64(TS_SHAPE(2, 3), p,
                                      (ts_opts){.dtype = k ? TS_F32 : TS_F64, .device = dev});
        r = ts_cross_entropy(lg, pr);
        CHECK(r && ts_dtype_of(r) == TS_F64);
    }
    ts_scope_end();
}

int main(void) {
    ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    for (int d = 0; d < 2; d++) {
        test_bce_with_logits(devs[d]);
        test_huber(devs[d]);
        test_promoting(devs[d]);
    }
    return ts_test_finish();
}
