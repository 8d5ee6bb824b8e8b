/* test_autograd.c — the backward engine: cross-device gradients, accumulation, retain_graph,
 * version checks, no-grad, detach, anomaly mode, views and transfers under gradcheck. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

static double *host(ts_tensor *t) {
    int64_t n = ts_numel(t);
    double *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    ts_scope_begin();
    ts_copy_to_host(ts_to_dtype(t, TS_F64), h, (size_t)n * sizeof *h);
    ts_scope_end();
    return h;
}

static void check_values(ts_tensor *t, const double *want, int n) {
    CHECK(t != NULL);
    if (!t) return;
    CHECK_EQ(ts_numel(t), n);
    double *h = host(t);
    for (int i = 0; i < n; i++) CHECK_NEAR(h[i], want[i], 1e-6);
    free(h);
}

/* The seed's example: the CPU leaf receives the gradient of a computation on another device. */
static void cross_device(ts_device dev) {
    ts_scope_begin();
    ts_tensor *c = ts_tensor_f32(TS_SHAPE(3), (float[]){1, 2, 3}, (ts_opts){.requires_grad = true});
    ts_tensor *g = ts_tensor_f32(TS_SHAPE(3), (float[]){4, 5, 6},
                                 (ts_opts){.device = dev, .requires_grad = true});
    ts_tensor *r = ts_add(g, ts_to(c, dev));
    CHECK(ts_device_equal(ts_device_of(r), dev));
    CHECK_STREQ(ts_grad_fn_name(r), "AddBackward0");
    ts_backward_with(r, ts_ones_like(r));
    CHECK_OK();
    ts_tensor *gc = ts_grad(c);
    CHECK(gc && ts_device_of(gc).type == TS_CPU);
    check_values(gc, (double[]){1, 1, 1}, 3);
    CHECK(ts_grad(g) && ts_device_equal(ts_device_of(ts_grad(g)), dev));
    check_values(ts_grad(g), (double[]){1, 1, 1}, 3);
    if (dev.type != TS_CPU) { /* mixing devices without ts_to is an error */
        CHECK(ts_add(g, c) == NULL);
        CHECK(strstr(ts_error_message(), "expected all tensors to be on the same device") != NULL);
        CHECK_ERR(TS_ERR_DEVICE);
    }
    ts_scope_end();
}

static void accumulation_and_retain(void) {
    ts_scope_begin();
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(2), (double[]){3, -1}, (ts_opts){.requires_grad = true});
    ts_tensor *y = ts_sum(ts_mul(x, x)); /* dy/dx = 2x */
    ts_backward_ex(y, NULL, (ts_backward_opts){.retain_graph = true});
    check_values(ts_grad(x), (double[]){6, -2}, 2);
    ts_backward(y); /* accumulates: 4x */
    CHECK_OK();
    check_values(ts_grad(x), (double[]){12, -4}, 2);
    ts_backward(y); /* the graph was freed by the last call */
    CHECK(strstr(ts_error_message(), "backward through the graph a second time") != NULL);
    CHECK_ERR(TS_ERR_STATE);
    ts_set_grad(x, NULL);
    CHECK(ts_grad(x) == NULL);
    /* a non-scalar output needs an explicit gradient */
    ts_backward(ts_mul_scalar(x, 2));
    CHECK_ERR(TS_ERR_SHAPE);
    /* nothing requires grad */
    ts_backward(ts_sum(ts_ones(TS_SHAPE(2), (ts_opts){0})));
    CHECK_ERR(TS_ERR_STATE);
    ts_scope_end();
}

static void versions_and_inplace(void) {
    ts_scope_begin();
    ts_tensor *x =
        ts_tensor_f64(TS_SHAPE(3), (double[]){0, 1, 2}, (ts_opts){.requires_grad = true});
    /* in-place on a leaf that requires grad */
    CHECK(ts_add_scalar_(x, 1) == NULL);
    CHECK(strstr(ts_error_message(), "leaf Variable that requires grad") != NULL);
    CHECK_ERR(TS_ERR_STATE);
    /* ... is allowed under no_grad, and bumps the version */
    uint64_t v0 = ts_version(x);
    ts_no_grad_begin();
    CHECK(ts_add_scalar_(x, 1) != NULL);
    CHECK(!ts_requires_grad(ts_mul_scalar(x, 2)));
    ts_no_grad_end();
    CHECK(ts_version(x) > v0);
    CHECK_OK();
    /* a saved tensor modified after use */
    ts_tensor *e = ts_exp(x);
    ts_tensor *loss = ts_sum(ts_mul(e, e));
    CHECK(ts_add_scalar_(e, 1) != NULL); /* e is not a leaf: allowed */
    ts_backward(loss);
    CHECK(strstr(ts_error_message(), "modified by an inplace operation") != NULL);
    CHECK_ERR(TS_ERR_STATE);
    /* in-place on a non-leaf records and still differentiates correctly: d/dx sum(2*(x*3)) = 6 */
    ts_tensor *y = ts_mul_scalar(x, 3);
    ts_mul_scalar_(y, 2);
    ts_backward(ts_sum(y));
    CHECK_OK();
    check_values(ts_grad(x), (double[]){6, 6, 6}, 3);
    ts_scope_end();
}

static void detach_and_no_grad(void) {
    ts_scope_begin();
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(2), (double[]){1, 2}, (ts_opts){.requires_grad = true});
    ts_tensor *d = ts_detach(ts_mul(x, x));
    CHECK(!ts_requires_grad(d) && ts_is_leaf(d));
    ts_tensor *y = ts_sum(ts_mul(x, d)); /* d is a constant: dy/dx = d = x^2 */
    ts_backward(y);
    check_values(ts_grad(x), (double[]){1, 4}, 2);
    CHECK(ts_grad_enabled());
    ts_no_grad_begin();
    ts_no_grad_begin();
    CHECK(!ts_grad_enabled());
    ts_no_grad_end();
    CHECK(!ts_grad_enabled());
    ts_no_grad_end();
    CHECK(ts_grad_enabled());
    ts_no_grad_end();
    CHECK_ERR(TS_ERR_STATE);
    ts_scope_end();
}

static void anomaly(void) {
    ts_scope_begin();
    ts_detect_anomaly(true);
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(2), (double[]){0, 4}, (ts_opts){.requires_grad = true});
    ts_backward(ts_sum(ts_sqrt(x))); /* d sqrt(x)/dx at 0 is inf */
    CHECK(strstr(ts_error_message(), "SqrtBackward0") != NULL);
    CHECK(strstr(ts_error_message(), "sqrt") != NULL);
    CHECK_ERR(TS_ERR_STATE);
    ts_detect_anomaly(false);
    ts_set_grad(x, NULL);
    ts_backward(ts_sum(ts_sqrt(x))); /* without anomaly mode the inf just flows */
    CHECK_OK();
    double *h = host(ts_grad(x));
    CHECK(isinf(h[0]) && fabs(h[1] - 0.25) < 1e-12);
    free(h);
    ts_scope_end();
}

/* gradcheck through views and transfers */
static ts_tensor *f_views(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    ts_device dev = *(ts_device *)ctx;
    ts_tensor *x = ts_to(in[0], dev);                                 /* cpu leaf -> device */
    ts_tensor *a = ts_transpose(ts_reshape(x, TS_SHAPE(3, 4)), 0, 1); /* [4, 3] */
    ts_tensor *b = ts_slice(ts_unsqueeze(a, 0), 1, 1, 4, 2);          /* [1, 2, 3] */
    ts_tensor *c = ts_expand(b, TS_SHAPE(2, 2, 3));
    ts_tensor *d = ts_select(ts_permute(c, TS_DIMS(2, 0, 1)), 0, 2);        /* [2, 2] */
    ts_tensor *e = ts_narrow(ts_flatten(ts_contiguous(a), 0, -1), 0, 2, 5); /* [5] */
    ts_tensor *s = ts_add(ts_mul(ts_sum(d), ts_sum(ts_squeeze(b))), ts_sum(ts_mul(e, e)));
    return ts_to(ts_mul(s, ts_clone(s)), ts_cpu());
}

static void gradcheck_views(ts_device dev) {
    ts_scope_begin();
    double v[12];
    for (int i = 0; i < 12; i++) v[i] = 0.1 * i - 0.4;
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(12), v, (ts_opts){.requires_grad = true});
    ts_tensor *ins[1] = {x};
    bool ok = ts_gradcheck(f_views, &dev, ins, 1, (ts_gradcheck_opts){.atol = 1e-3, .rtol = 1e-3});
    printf("gradcheck views+to on %s: %s\n", ts_device_str(dev), ok ? "ok" : "FAILED");
    CHECK(ok);
    CHECK_OK();
    /* a dtype round trip: the gradient comes back in the leaf's dtype */
    ts_tensor *y = ts_sum(ts_mul_scalar(ts_to_dtype(ts_to(x, dev), TS_F32), 2));
    ts_backward(y);
    CHECK(ts_grad(x) && ts_dtype_of(ts_grad(x)) == TS_F64);
    double *h = host(ts_grad(x));
    for (int i = 0; i < 12; i++) CHECK_NEAR(h[i], 2, 0);
    free(h);
    ts_scope_end();
}

static ts_tensor *f_wrong(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    /* x * detach(x): true gradient is 2x, the graph only sees x */
    return ts_mul(in[0], ts_detach(in[0]));
}

static void gradcheck_catches_errors(void) {
    ts_scope_begin();
    ts_tensor *x =
        ts_tensor_f64(TS_SHAPE(3), (double[]){1, 2, 3}, (ts_opts){.requires_grad = true});
    ts_tensor *ins[1] = {x};
    CHECK(!ts_gradcheck(f_wrong, NULL, ins, 1, (ts_gradcheck_opts){0}));
    ts_error_clear();
    ts_scope_end();
}

int main(void) {
    ts_mem_stats before, after;
    ts_memory_stats(ts_sim(0), &before);
    cross_device(ts_sim(0));
    cross_device(ts_cpu());
    accumulation_and_retain();
    versions_and_inplace();
    detach_and_no_grad();
    anomaly();
    gradcheck_views(ts_cpu());
    gradcheck_views(ts_sim(0));
    gradcheck_catches_errors();
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    CHECK_EQ(ts_memory_stats(ts_cpu(), &after), TS_OK);
    CHECK_EQ(after.live_tensors, 0);
    return ts_test_finish();
}
