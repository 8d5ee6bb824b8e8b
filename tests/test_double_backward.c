/* test_double_backward.c — ts_autograd_grad (PyTorch's torch.autograd.grad): gradients of chosen
 * inputs without touching any .grad, only the graph that leads to them, non-leaf inputs,
 * backward(inputs=); and create_graph: second derivatives (Hessian-vector products) of the op
 * families whose backward is differentiable, against central differences of the first derivative
 * in float64, on cpu and sim; a backward that is not differentiable again (an in-place op's saved
 * copy) fails the second pass clearly instead of returning a gradient that lacks a term. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_values.h"
#include "ts_test.h"

#define N 6

static ts_tensor *leaf(const double *v, int n, ts_device d) {
    return ts_tensor_f64(TS_SHAPE(n), v, (ts_opts){.device = d, .requires_grad = true});
}

/* ---------------------------------------------------------------- the functions f: R^N -> R */
typedef ts_tensor *(*scalar_fn)(ts_tensor *x);

static ts_tensor *f_cube(ts_tensor *x) { return ts_sum(ts_pow_scalar(x, 3)); }
static ts_tensor *f_exp_tanh(ts_tensor *x) { return ts_sum(ts_mul(ts_exp(x), ts_tanh(x))); }
static ts_tensor *f_sigmoid_gelu(ts_tensor *x) { return ts_sum(ts_mul(ts_sigmoid(x), ts_gelu(x))); }
static ts_tensor *f_silu_sq(ts_tensor *x) { return ts_sum(ts_pow_scalar(ts_silu(x), 2)); }
static ts_tensor *f_softmax(ts_tensor *x) {
    ts_tensor *w = ts_arange(1, N + 1, 1, (ts_opts){.dtype = TS_F64, .device = ts_device_of(x)});
    return ts_sum(
        ts_mul(ts_softmax(ts_reshape(x, TS_SHAPE(2, 3)), 1), ts_reshape(w, TS_SHAPE(2, 3))));
}
static ts_tensor *f_log_softmax(ts_tensor *x) {
    return ts_sum(ts_pow_scalar(ts_log_softmax(ts_reshape(x, TS_SHAPE(3, 2)), 0), 2));
}
/* views: a strided slice, a select and a transpose, joined again */
static ts_tensor *f_views(ts_tensor *x) {
    ts_tensor *m = ts_reshape(x, TS_SHAPE(2, 3));
    ts_tensor *parts[2] = {ts_slice(x, 0, 1, N, 2), ts_select(ts_transpose(m, 0, 1), 0, 1)};
    return ts_sum(ts_pow_scalar(ts_cat(parts, 2, 0), 3));
}
static ts_tensor *f_matmul(ts_tensor *x) { /* x^T (x x^T) x = |x|^4 by the matmul family */
    ts_tensor *o = ts_outer(x, x);
    return ts_sum(
        ts_matmul(ts_reshape(x, TS_SHAPE(1, N)), ts_matmul(o, ts_reshape(x, TS_SHAPE(N, 1)))));
}
static ts_tensor *f_linear(ts_tensor *x) { /* linear with x as input, weight and bias */
    ts_tensor *in = ts_reshape(ts_narrow(x, 0, 0, 2), TS_SHAPE(1, 2));
    ts_tensor *w = ts_reshape(ts_narrow(x, 0, 2, 4), TS_SHAPE(2, 2));
    return ts_sum(ts_pow_scalar(ts_linear(in, w, ts_narrow(x, 0, 0, 2)), 3));
}
static ts_tensor *f_reductions(ts_tensor *x) { /* var, logsumexp, mean */
    return ts_add(ts_mul(ts_var(x), ts_logsumexp(x)), ts_pow_scalar(ts_mean(x), 3));
}
static ts_tensor *f_gather(ts_tensor *x) {
    ts_tensor *idx =
        ts_tensor_i64(TS_SHAPE(4), (int64_t[]){5, 0, 0, 3}, (ts_opts){.device = ts_device_of(x)});
    return ts_sum(ts_pow_scalar(ts_gather(x, 0, idx), 3));
}

static const struct {
    const char *name;
    scalar_fn f;
} fns[] = {
    {"cube", f_cube},
    {"exp_tanh", f_exp_tanh},
    {"sigmoid_gelu", f_sigmoid_gelu},
    {"silu", f_silu_sq},
    {"softmax", f_softmax},
    {"log_softmax", f_log_softmax},
    {"views", f_views},
    {"matmul", f_matmul},
    {"linear", f_linear},
    {"reductions", f_reductions},
    {"gather", f_gather},
};

static const double x0[N] = {0.31, -0.72, 1.13, 0.45, -1.27, 0.66};
static const double v0[N] = {1.0, -0.5, 0.25, 2.0, -1.5, 0.75};

/* v . grad f(x) computed first-order (no create_graph) */
static double directional_grad(scalar_fn f, const double *x, ts_device d) {
    ts_scope_begin();
    ts_tensor *t = leaf(x, N, d), *g = NULL;
    ts_autograd_grad((ts_tensor *[]){f(t)}, NULL, 1, &t, 1, (ts_grad_opts){0}, &g);
    double h[N] = {0}, s = 0;
    CHECK(ts_test_read_f64(g, h, N));
    ts_scope_end();
    for (int i = 0; i < N; i++) s += h[i] * v0[i];
    return s;
}

/* H v by double backward against the central difference of v . grad f along each axis (H is
 * symmetric: (H v)_i = d/dx_i (v . grad f)). Step 1e-5: truncation ~1e-10 |f''''|, rounding
 * ~1e-16 / 1e-5 of the gradient's size. */
static void hessian_vector(int k, ts_device d) {
    ts_scope_begin();
    ts_tensor *x = leaf(x0, N, d), *g = NULL, *hv = NULL;
    ts_tensor *y = fns[k].f(x);
    CHECK_OK();
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, &x, 1, (ts_grad_opts){.create_graph = true}, &g), TS_OK);
    CHECK(g && ts_requires_grad(g));
    ts_tensor *v = ts_tensor_f64(TS_SHAPE(N), v0, (ts_opts){.device = d});
    ts_tensor *gv = ts_sum(ts_mul(g, v));
    CHECK_EQ(ts_autograd_grad(&gv, NULL, 1, &x, 1, (ts_grad_opts){0}, &hv), TS_OK);
    double got[N] = {0};
    CHECK(ts_test_read_f64(hv, got, N));
    ts_scope_end();
    for (int i = 0; i < N; i++) {
        double xp[N], xm[N], e = 1e-5;
        memcpy(xp, x0, sizeof xp);
        memcpy(xm, x0, sizeof xm);
        xp[i] += e;
        xm[i] -= e;
        double want =
            (directional_grad(fns[k].f, xp, d) - directional_grad(fns[k].f, xm, d)) / (2 * e);
        if (fabs(got[i] - want) > 1e-6 * (1 + fabs(want)))
            fprintf(stderr, "%s on %s: (Hv)[%d] = %.12g, differences give %.12g\n", fns[k].name,
                    ts_device_str(d), i, got[i], want);
        CHECK_NEAR(got[i], want, 1e-6 * (1 + fabs(want)));
    }
}

/* grad of chosen inputs: other leaves' .grad untouched, non-leaf inputs, unused inputs */
static void grad_semantics(ts_device d) {
    ts_scope_begin();
    ts_tensor *w = leaf((double[]){2}, 1, d), *x = leaf((double[]){3}, 1, d);
    ts_tensor *h = ts_mul_scalar(x, 2), *y = ts_sum(ts_mul(w, ts_mul(h, h))); /* 4 w x^2 */
    ts_tensor *gs[2] = {0};
    ts_tensor *ins[2] = {x, h};
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, ins, 2, (ts_grad_opts){.retain_graph = true}, gs),
             TS_OK);
    double v = 0;
    CHECK(ts_test_read_f64(gs[0], &v, 1) && v == 48); /* 8 w x */
    CHECK(ts_test_read_f64(gs[1], &v, 1) && v == 24); /* 2 w h */
    CHECK(ts_grad(w) == NULL && ts_grad(x) == NULL);
    /* an input the output does not depend on */
    ts_tensor *z = leaf((double[]){1}, 1, d);
    ts_tensor *ins2[2] = {x, z};
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, ins2, 2, (ts_grad_opts){.retain_graph = true}, gs),
             TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "allow_unused");
    CHECK(gs[0] == NULL && gs[1] == NULL);
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, ins2, 2,
                              (ts_grad_opts){.retain_graph = true, .allow_unused = true}, gs),
             TS_OK);
    CHECK(gs[0] != NULL && gs[1] == NULL);
    /* backward(inputs=[w]): only w's .grad */
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, &w, 1, (ts_grad_opts){.accumulate = true}, NULL), TS_OK);
    CHECK(ts_test_read_f64(ts_grad(w), &v, 1) && v == 36); /* 4 x^2 */
    CHECK(ts_grad(x) == NULL);
    /* errors: an input that does not require grad, no inputs without accumulate */
    ts_tensor *c = ts_tensor_f64(TS_SHAPE(1), (double[]){1}, (ts_opts){.device = d});
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, &c, 1, (ts_grad_opts){0}, gs), TS_ERR_STATE);
    CHECK_ERR_HAS(TS_ERR_STATE, "does not require grad");
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, NULL, 0, (ts_grad_opts){0}, gs), TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

/* two outputs in one pass, with a given gradient for each; a leaf output */
static void several_outputs(ts_device d) {
    ts_scope_begin();
    ts_tensor *x = leaf((double[]){1, 2}, 2, d);
    ts_tensor *outs[3] = {ts_pow_scalar(x, 2), ts_sum(ts_exp(x)), x};
    ts_tensor *gos[3] = {ts_tensor_f64(TS_SHAPE(2), (double[]){1, 10}, (ts_opts){.device = d}),
                         NULL,
                         ts_tensor_f64(TS_SHAPE(2), (double[]){100, 100}, (ts_opts){.device = d})};
    ts_tensor *g = NULL;
    CHECK_EQ(ts_autograd_grad(outs, gos, 3, &x, 1, (ts_grad_opts){0}, &g), TS_OK);
    double h[2] = {0};
    CHECK(ts_test_read_f64(g, h, 2));
    CHECK_NEAR(h[0], 2 * 1 + exp(1) + 100, 1e-12);
    CHECK_NEAR(h[1], 10 * 4 + exp(2) + 100, 1e-12);
    ts_scope_end();
}

/* backward of a gradient made by an in-place op's backward (it saved a detached copy): the first
 * gradient is right, the second pass fails naming it */
static void not_twice_differentiable(ts_device d) {
    ts_scope_begin();
    ts_tensor *x = leaf(x0, N, d), *g = NULL;
    ts_tensor *y = ts_mul_scalar(x, 1);
    ts_mul_(y, x); /* x^2, recorded in place */
    CHECK_OK();
    CHECK_EQ(ts_autograd_grad((ts_tensor *[]){ts_sum(y)}, NULL, 1, &x, 1,
                              (ts_grad_opts){.create_graph = true}, &g),
             TS_OK);
    double h[N] = {0};
    CHECK(ts_test_read_f64(g, h, N));
    for (int i = 0; i < N; i++) CHECK_NEAR(h[i], 2 * x0[i], 1e-15);
    ts_tensor *hv = NULL;
    CHECK_EQ(ts_autograd_grad((ts_tensor *[]){ts_sum(g)}, NULL, 1, &x, 1, (ts_grad_opts){0}, &hv),
             TS_ERR_UNSUPPORTED);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "double backward through MulBackward0");
    CHECK(hv == NULL);
    ts_scope_end();
}

/* create_graph through ts_backward's accumulate form: x.grad keeps its graph */
static void backward_create_graph(ts_device d) {
    ts_scope_begin();
    ts_tensor *x = leaf((double[]){1.5}, 1, d);
    ts_tensor *y = ts_sum(ts_pow_scalar(x, 3));
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, NULL, 0,
                              (ts_grad_opts){.create_graph = true, .accumulate = true}, NULL),
             TS_OK);
    ts_tensor *gx = ts_grad(x);
    CHECK(gx && ts_requires_grad(gx));
    ts_tensor *second = NULL;
    CHECK_EQ(ts_autograd_grad(&gx, NULL, 1, &x, 1, (ts_grad_opts){0}, &second), TS_OK);
    double v = 0;
    CHECK(ts_test_read_f64(second, &v, 1));
    CHECK_NEAR(v, 6 * 1.5, 1e-15);
    ts_set_grad(x, NULL);
    ts_scope_end();
}

int main(void) {
    ts_mem_stats before, after;
    ts_memory_stats(ts_sim(0), &before);
    const ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    for (int di = 0; di < 2; di++) {
        for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) hessian_vector((int)k, devs[di]);
        grad_semantics(devs[di]);
        several_outputs(devs[di]);
        not_twice_differentiable(devs[di]);
        backward_create_graph(devs[di]);
    }
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    CHECK_EQ(ts_memory_stats(ts_cpu(), &after), TS_OK);
    CHECK_EQ(after.live_tensors, 0);
    return ts_test_finish();
}
