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

static ts_tensor *f_layer_norm(ts_tensor *x) { /* x as input [2, 3], weight and bias [3] */
    ts_tensor *in = ts_reshape(x, TS_SHAPE(2, 3));
    ts_tensor *y = ts_layer_norm(ts_mul_scalar(in, 1.5), TS_SHAPE(3), ts_narrow(x, 0, 0, 3),
                                 ts_narrow(x, 0, 3, 3), 1e-5);
    return ts_sum(ts_pow_scalar(y, 3));
}

static ts_tensor *f_max_pool(ts_tensor *x) { /* overlapping 2x2 windows, stride 1, with a tie */
    ts_tensor *in =
        ts_reshape(ts_cat((ts_tensor *[]){x, ts_narrow(x, 0, 0, 3)}, 2, 0), TS_SHAPE(1, 1, 3, 3));
    ts_tensor *y =
        ts_max_pool2d(ts_mul(in, in), (ts_pool2d_opts){.kernel = {2, 2}, .stride = {1, 1}});
    return ts_sum(ts_mul(y, ts_exp(y)));
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
    {"layer_norm", f_layer_norm},
    {"max_pool", f_max_pool},
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
    /* backward(inputs=[h]) on a tensor made by an op: h.grad gets its gradient, twice added */
    ts_tensor *y2 = ts_sum(ts_mul(h, h)); /* 4 x^2: dy2/dh = 2 h = 12 */
    for (int k = 1; k <= 2; k++) {
        CHECK_EQ(ts_autograd_grad(&y2, NULL, 1, &h, 1,
                                  (ts_grad_opts){.accumulate = true, .retain_graph = true}, NULL),
                 TS_OK);
        CHECK(ts_test_read_f64(ts_grad(h), &v, 1) && v == 12 * k);
    }
    CHECK(ts_grad(x) == NULL);
    CHECK_OK();
    /* an empty output has no implicit gradient; a .grad of another rank is refused */
    ts_tensor *empty =
        ts_sum_dims(ts_reshape(ts_narrow(x, 0, 0, 0), TS_SHAPE(0, 1)), TS_DIMS(1), false);
    CHECK_EQ(ts_autograd_grad(&empty, NULL, 1, &x, 1, (ts_grad_opts){.allow_unused = true}, gs),
             TS_ERR_SHAPE);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "scalar outputs");
    ts_tensor *g0 = ts_zeros((ts_shape){0}, (ts_opts){.dtype = TS_F64, .device = d});
    ts_tensor *hx = ts_mul_scalar(x, 1); /* [1]: a 0-dim gradient for it is refused */
    CHECK_EQ(ts_autograd_grad(&hx, &g0, 1, &x, 1, (ts_grad_opts){0}, gs), TS_ERR_SHAPE);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "does not match");
    ts_tensor *e0 = leaf(NULL, 0, d); /* [0]: a 0-dim gradient is not its shape either */
    CHECK_EQ(ts_set_grad(e0, g0), TS_ERR_ARG);
    CHECK_ERR(TS_ERR_ARG);
    for (int nd = 0; nd <= 2; nd += 2) { /* x is [1]: a 0-dim or a [1, 1] gradient */
        ts_shape s = nd ? TS_SHAPE(1, 1) : (ts_shape){0};
        CHECK_EQ(ts_set_grad(x, ts_zeros(s, (ts_opts){.dtype = TS_F64, .device = d})), TS_ERR_ARG);
        CHECK_ERR(TS_ERR_ARG);
    }
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

/* ---------------------------------------------------------------- a C custom function */
/* square(x) with backward 2 g x over public ops; ctx: x (the input, with its history) */
static ts_status square_backward(void *ctx, ts_tensor *const *g, int n_out, ts_tensor **gi,
                                 int n_in) {
    (void)n_out, (void)n_in;
    gi[0] = ts_mul(ts_mul_scalar(g[0], 2), (ts_tensor *)ctx);
    return TS_OK;
}

static ts_tensor *custom_square(ts_tensor *x, bool twice) {
    ts_no_grad_begin();
    ts_tensor *y = ts_mul(x, x), *r = NULL;
    ts_no_grad_end();
    ts_custom_function f = {.name = "SquareBackward", .backward = square_backward, .ctx = x};
    CHECK_EQ(ts_custom_function_apply(&f, &x, 1, &y, 1, &r), TS_OK);
    ts_node *n = ts_grad_fn_node(r);
    CHECK(n != NULL);
    ts_node_set_twice_differentiable(n, twice);
    ts_node_release(n);
    return r;
}

/* A backward that is not differentiable again: its gradient's DelayedError node must be reached
 * by a second pass toward the node's own inputs (an edge into the leaf x) and toward what the
 * incoming gradient depends on (w), so that pass fails instead of returning a gradient without
 * that term; declared twice-differentiable, the same function gives the exact second
 * derivatives. */
static void custom_function_twice(ts_device d) {
    ts_scope_begin();
    ts_tensor *x = leaf((double[]){1.5, -2}, 2, d), *w = leaf((double[]){3, 0.5}, 2, d);
    for (int twice = 0; twice < 2; twice++) {
        /* f = sum(square(x) * w): df/dx = 2 x w (incoming gradient w), d2f/dx2 = 2 w,
         * d2f/dxdw = 2 x */
        ts_tensor *f = ts_sum(ts_mul(custom_square(x, twice), w)), *g = NULL;
        CHECK_EQ(ts_autograd_grad(&f, NULL, 1, &x, 1, (ts_grad_opts){.create_graph = true}, &g),
                 TS_OK);
        double h[2] = {0};
        CHECK(ts_test_read_f64(g, h, 2));
        CHECK(h[0] == 9 && h[1] == -2);
        CHECK_STREQ(ts_grad_fn_name(g), twice ? "MulBackward0" : "DelayedError");
        ts_tensor *sg = ts_sum(g), *ins[2] = {x, w}, *gg[2] = {0};
        ts_status st =
            ts_autograd_grad(&sg, NULL, 1, &x, 1, (ts_grad_opts){.retain_graph = true}, gg);
        CHECK_EQ(st, twice ? TS_OK : TS_ERR_UNSUPPORTED);
        if (twice) {
            CHECK(ts_test_read_f64(gg[0], h, 2) && h[0] == 6 && h[1] == 1); /* 2 w */
        } else {
            CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "double backward through SquareBackward");
        }
        st = ts_autograd_grad(&sg, NULL, 1, &ins[1], 1, (ts_grad_opts){0}, gg);
        CHECK_EQ(st, twice ? TS_OK : TS_ERR_UNSUPPORTED);
        if (twice) {
            CHECK(ts_test_read_f64(gg[0], h, 2) && h[0] == 3 && h[1] == -4); /* 2 x */
        } else {
            CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "double backward through SquareBackward");
        }
    }
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

/* ---------------------------------------------------------------- conv2d */
typedef struct conv_case {
    int stride, padding, dilation, groups;
} conv_case;

/* sum(tanh(conv2d(x, w, b))) over x [2, 2, 5, 5], w [4, 2 / groups, 3, 3], b [4]; the three
 * gradients (out) with the graph recorded or not */
static void conv_grads(const conv_case *cc, const double *xv, const double *wv, const double *bv,
                       ts_device d, bool create, ts_tensor **out) {
    const int cg = 2 / cc->groups;
    ts_tensor *x =
        ts_tensor_f64(TS_SHAPE(2, 2, 5, 5), xv, (ts_opts){.device = d, .requires_grad = true});
    ts_tensor *w =
        ts_tensor_f64(TS_SHAPE(4, cg, 3, 3), wv, (ts_opts){.device = d, .requires_grad = true});
    ts_tensor *b = ts_tensor_f64(TS_SHAPE(4), bv, (ts_opts){.device = d, .requires_grad = true});
    ts_conv2d_opts o = {.stride = {cc->stride, cc->stride},
                        .padding = {cc->padding, cc->padding},
                        .dilation = {cc->dilation, cc->dilation},
                        .groups = cc->groups};
    ts_tensor *y = ts_sum(ts_tanh(ts_conv2d(x, w, b, o)));
    ts_tensor *ins[3] = {x, w, b};
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, ins, 3, (ts_grad_opts){.create_graph = create}, out),
             TS_OK);
    if (!create) return;
    /* H v for the v of the three parts (vx, vw, vb below, rebuilt from the same seeds) */
    double vx[100], vw[72], vb[4];
    ts_test_fill_uniform(vx, 100, 7), ts_test_fill_uniform(vw, 72, 8),
        ts_test_fill_uniform(vb, 4, 9);
    ts_tensor *v[3] = {ts_tensor_f64(TS_SHAPE(2, 2, 5, 5), vx, (ts_opts){.device = d}),
                       ts_tensor_f64(TS_SHAPE(4, cg, 3, 3), vw, (ts_opts){.device = d}),
                       ts_tensor_f64(TS_SHAPE(4), vb, (ts_opts){.device = d})};
    ts_tensor *gv = ts_add(ts_add(ts_sum(ts_mul(out[0], v[0])), ts_sum(ts_mul(out[1], v[1]))),
                           ts_sum(ts_mul(out[2], v[2])));
    CHECK_EQ(ts_autograd_grad(&gv, NULL, 1, ins, 3, (ts_grad_opts){0}, out), TS_OK);
}

/* H v by double backward against (grad f(p + e v) - grad f(p - e v)) / 2e, every part of p */
static void conv_hessian_vector(const conv_case *cc, ts_device d) {
    const int cg = 2 / cc->groups, nw = 4 * cg * 9;
    double x[100], w[72], b[4], vx[100], vw[72], vb[4];
    ts_test_fill_uniform(x, 100, 1), ts_test_fill_uniform(w, nw, 2), ts_test_fill_uniform(b, 4, 3);
    ts_test_fill_uniform(vx, 100, 7), ts_test_fill_uniform(vw, 72, 8),
        ts_test_fill_uniform(vb, 4, 9);
    const int sizes[3] = {100, nw, 4};
    double got[3][100], diff[3][100];
    ts_scope_begin();
    ts_tensor *hv[3] = {0};
    conv_grads(cc, x, w, b, d, true, hv);
    for (int k = 0; k < 3; k++) CHECK(ts_test_read_f64(hv[k], got[k], sizes[k]));
    const double e = 1e-5;
    for (int sign = -1; sign <= 1; sign += 2) {
        double xp[100], wp[72], bp[4];
        for (int i = 0; i < 100; i++) xp[i] = x[i] + sign * e * vx[i];
        for (int i = 0; i < nw; i++) wp[i] = w[i] + sign * e * vw[i];
        for (int i = 0; i < 4; i++) bp[i] = b[i] + sign * e * vb[i];
        ts_tensor *g[3] = {0};
        conv_grads(cc, xp, wp, bp, d, false, g);
        for (int k = 0; k < 3; k++) {
            double h[100];
            CHECK(ts_test_read_f64(g[k], h, sizes[k]));
            for (int i = 0; i < sizes[k]; i++) diff[k][i] = sign < 0 ? -h[i] : diff[k][i] + h[i];
        }
    }
    ts_scope_end();
    int bad = 0;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < sizes[k]; i++) {
            const double want = diff[k][i] / (2 * e);
            if (fabs(got[k][i] - want) > 1e-6 * (1 + fabs(want)) && bad++ < 3)
                fprintf(stderr, "conv s%d p%d d%d g%d on %s: part %d [%d] = %.12g, want %.12g\n",
                        cc->stride, cc->padding, cc->dilation, cc->groups, ts_device_str(d), k, i,
                        got[k][i], want);
        }
    CHECK_EQ(bad, 0);
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
        custom_function_twice(devs[di]);
        const conv_case convs[] = {{1, 0, 1, 1}, {2, 1, 1, 2}, {1, 2, 2, 1}, {2, 0, 1, 1}};
        for (size_t k = 0; k < sizeof convs / sizeof convs[0]; k++)
            conv_hessian_vector(&convs[k], devs[di]);
    }
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    CHECK_EQ(ts_memory_stats(ts_cpu(), &after), TS_OK);
    CHECK_EQ(after.live_tensors, 0);
    return ts_test_finish();
}
