/* test_loss_giou.c — ts_generalized_box_iou_loss (src/nn/loss_giou.c) on cpu and sim:0 in
 * float64: the loss of paired xyxy boxes against torchvision's formula (eps in both divisions,
 * the intersection zero unless both sides are positive, the enclosing area unclamped) evaluated in
 * double here, on boxes small enough (sides 1e-2) that eps = 1e-7 moves the loss by ~1e-3 (so
 * leaving it out, or putting it elsewhere, fails by far more than the 1e-14 tolerance); the
 * reductions (mean of no boxes: 0), gradcheck over both box sets, and the errors. */
#include <math.h>
#include <stdio.h>

#include "ts_test.h"

#define NB 4
/* overlapping, disjoint, touching (zero-width intersection), nested */
static const double B1[NB * 4] = {0.010, 0.020, 0.030, 0.035, 0.0, 0.0, 0.01, 0.01,
                                  0.0,   0.0,   0.02,  0.01,  0.1, 0.1, 0.14, 0.13};
static const double B2[NB * 4] = {0.015, 0.010, 0.040, 0.030, 0.02, 0.02,  0.03, 0.035,
                                  0.02,  0.0,   0.03,  0.01,  0.11, 0.105, 0.12, 0.12};
static const double EPS = 1e-7;

static ts_tensor *boxes(const double *v, int n, ts_device dev) {
    return ts_tensor_f64(TS_SHAPE(n, 4), v, (ts_opts){.dtype = TS_F64, .device = dev});
}

static double ref(const double *a, const double *b, double eps) {
    const double xk1 = fmax(a[0], b[0]), yk1 = fmax(a[1], b[1]);
    const double xk2 = fmin(a[2], b[2]), yk2 = fmin(a[3], b[3]);
    const double inter = (yk2 > yk1 && xk2 > xk1) ? (xk2 - xk1) * (yk2 - yk1) : 0.0;
    const double uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    const double area_c =
        (fmax(a[2], b[2]) - fmin(a[0], b[0])) * (fmax(a[3], b[3]) - fmin(a[1], b[1]));
    return 1 - (inter / (uni + eps) - (area_c - uni) / (area_c + eps));
}

static void test_values(ts_device dev) {
    ts_scope_begin();
    ts_tensor *b1 = boxes(B1, NB, dev), *b2 = boxes(B2, NB, dev);
    ts_tensor *none = ts_generalized_box_iou_loss(b1, b2, TS_REDUCTION_NONE, EPS);
    CHECK(none && ts_dtype_of(none) == TS_F64);
    double got[NB], sum = 0;
    CHECK(ts_copy_to_host(ts_to(none, ts_cpu()), got, sizeof got) == TS_OK);
    for (int i = 0; i < NB; i++) {
        const double want = ref(B1 + 4 * i, B2 + 4 * i, EPS);
        /* eps matters here: the loss without it differs by far more than the tolerance */
        CHECK(fabs(want - ref(B1 + 4 * i, B2 + 4 * i, 0.0)) > 1e-6 || i == 2);
        sum += want;
        CHECK_NEAR(got[i], want, 1e-14 * fabs(want));
    }
    CHECK_NEAR(ts_item(ts_generalized_box_iou_loss(b1, b2, TS_REDUCTION_SUM, EPS)), sum,
               1e-14 * sum);
    CHECK_NEAR(ts_item(ts_generalized_box_iou_loss(b1, b2, TS_REDUCTION_MEAN, EPS)), sum / NB,
               1e-14 * sum);
    /* eps is the caller's */
    ts_tensor *big = ts_generalized_box_iou_loss(b1, b2, TS_REDUCTION_NONE, 1e-5);
    CHECK(ts_copy_to_host(ts_to(big, ts_cpu()), got, sizeof got) == TS_OK);
    CHECK_NEAR(got[0], ref(B1, B2, 1e-5), 1e-14);
    /* no boxes: mean 0, none empty */
    ts_tensor *e1 = ts_zeros(TS_SHAPE(0, 4), (ts_opts){.dtype = TS_F64, .device = dev});
    CHECK(ts_item(ts_generalized_box_iou_loss(e1, e1, TS_REDUCTION_MEAN, EPS)) == 0.0);
    ts_scope_end();
}

static ts_tensor *f_giou(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_generalized_box_iou_loss(in[0], in[1], TS_REDUCTION_SUM, EPS);
}

static void test_gradcheck(ts_device dev) {
    ts_scope_begin();
    /* pairs away from the kinks (max / min ties, the intersection's sign) */
    const double a[8] = {1.0, 2.0, 3.0, 3.5, 0.0, 0.0, 1.0, 1.2};
    const double b[8] = {1.5, 1.0, 4.0, 3.0, 2.0, 2.1, 3.0, 3.5};
    ts_tensor *in[2] = {boxes(a, 2, dev), boxes(b, 2, dev)};
    ts_set_requires_grad(in[0], true);
    ts_set_requires_grad(in[1], true);
    const bool ok = ts_gradcheck(f_giou, NULL, in, 2, (ts_gradcheck_opts){0});
    printf("gradcheck generalized_box_iou_loss on %s: %s\n", ts_device_str(dev),
           ok ? "ok" : "FAILED");
    CHECK(ok);
    ts_scope_end();
}

static void test_errors(ts_device dev) {
    ts_scope_begin();
    ts_tensor *b1 = boxes(B1, NB, dev), *b3 = boxes(B1, 3, dev);
    CHECK(ts_generalized_box_iou_loss(b1, b3, TS_REDUCTION_NONE, EPS) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "generalized_box_iou_loss: boxes1 and boxes2 must have one shape");
    CHECK(ts_generalized_box_iou_loss(b1, b1, (ts_reduction)7, EPS) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "generalized_box_iou_loss: 7 is not a valid value for reduction");
    CHECK(ts_generalized_box_iou_loss(NULL, b1, TS_REDUCTION_NONE, EPS) == NULL);
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
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
