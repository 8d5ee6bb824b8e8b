/* test_double_backward_norm_pool.c — create_graph through the ops issue 53 made twice
 * differentiable: batch norm (training with batch statistics through the fused kernels' node,
 * evaluation with running statistics; affine or not; a non-contiguous input), average pooling (1-d,
 * 2-d, 3-d; count_include_pad, ceil_mode, divisor_override; adaptive), the transposed convolutions
 * (1-d, 2-d, 3-d; stride, padding, output_padding, dilation, groups, bias, unbatched) and the
 * kinked activations (hardtanh, relu6, threshold, hardshrink, softshrink, leaky_relu). For each,
 * with p every input and v a direction: the gradients recorded under create_graph equal the
 * first-order ones, and H v by double backward equals (grad f(p + e v) - grad f(p - e v)) / 2e of
 * first-order gradients, in float64, on cpu and sim. And PyTorch's links: the gradient of hardtanh
 * & co. (and of the average poolings) depends on x with derivative zero (a second-order gradient of
 * zeros, not None), clamp's does not depend on x at all. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_values.h"
#include "hv_check.h"
#include "tessera/conv.h"
#include "tessera/pool_norm.h"
#include "ts_test.h"

typedef ts_hv_case hv_case;
#define SH       TS_HV_SH
#define shape_of ts_hv_shape

/* ---------------------------------------------------------------- batch norm */
static ts_tensor *running(ts_tensor *like, int64_t c, bool var, int seed) {
    double v[16];
    ts_test_fill_uniform(v, c, seed);
    for (int64_t i = 0; var && i < c; i++) v[i] = 0.5 + fabs(v[i]);
    return ts_tensor_f64(TS_SHAPE(c), v, ts_hv_f64_on(like));
}

static ts_tensor *bn_of(ts_tensor *x, ts_tensor *w, ts_tensor *b, bool training) {
    const int64_t c = ts_size(x, 1);
    return ts_hv_head(ts_batch_norm(x, running(x, c, false, 11), running(x, c, true, 12), w, b,
                                    training, 0.1, 1e-5));
}
static ts_tensor *bn(ts_tensor *x, ts_tensor *w, ts_tensor *b, bool training) {
    return bn_of(ts_mul_scalar(x, 1.7), w, b, training);
}
static ts_tensor *f_bn_train(ts_tensor *const *in) { return bn(in[0], in[1], in[2], true); }
static ts_tensor *f_bn_train_plain(ts_tensor *const *in) {
    return ts_hv_head(ts_batch_norm(in[0], NULL, NULL, NULL, NULL, true, 0.1, 1e-5));
}
/* x [3, 4, 2] as [4, 3, 2] and w [6] as every other element: the kernels read copies */
static ts_tensor *f_bn_train_strided(ts_tensor *const *in) {
    return bn_of(ts_transpose(in[0], 0, 1), ts_slice(in[1], 0, 0, 6, 2), in[2], true);
}
/* a channels_last input (the NHWC kernels where the backend has them) */
static ts_tensor *f_bn_train_nhwc(ts_tensor *const *in) {
    return bn_of(ts_contiguous_format(ts_mul_scalar(in[0], 1.7), TS_CHANNELS_LAST), in[1], in[2],
                 true);
}
static ts_tensor *f_bn_eval(ts_tensor *const *in) { return bn(in[0], in[1], in[2], false); }
static ts_tensor *f_bn_eval_plain(ts_tensor *const *in) { return bn(in[0], NULL, NULL, false); }

/* ---------------------------------------------------------------- average pooling */
/* pooling of x^2 (a nonlinearity on each side of the linear pooling) */
static ts_tensor *pool(ts_tensor *x, int nd, ts_pool_opts o) {
    return ts_hv_head(ts_avg_pool_nd(ts_mul(x, x), nd, o));
}
static ts_tensor *f_avg2d(ts_tensor *const *in) {
    return pool(in[0], 2, (ts_pool_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
}
static ts_tensor *f_avg2d_nhwc(ts_tensor *const *in) {
    return ts_hv_head(
        ts_avg_pool_nd(ts_contiguous_format(ts_mul(in[0], in[0]), TS_CHANNELS_LAST), 2,
                       (ts_pool_opts){.kernel = {2, 2}, .stride = {1, 2}, .padding = {1, 0}}));
}
static ts_tensor *f_avg2d_exclude_ceil(ts_tensor *const *in) {
    return pool(in[0], 2,
                (ts_pool_opts){.kernel = {2, 3},
                               .stride = {2, 2},
                               .padding = {1, 1},
                               .ceil_mode = true,
                               .exclude_pad = true});
}
static ts_tensor *f_avg2d_divisor(ts_tensor *const *in) {
    return pool(in[0], 2,
                (ts_pool_opts){.kernel = {2, 3}, .stride = {1, 2}, .divisor_override = 4});
}
static ts_tensor *f_avg1d(ts_tensor *const *in) {
    return pool(
        in[0], 1,
        (ts_pool_opts){
            .kernel = {3}, .stride = {2}, .padding = {1}, .ceil_mode = true, .exclude_pad = true});
}
static ts_tensor *f_avg3d(ts_tensor *const *in) {
    return pool(in[0], 3,
                (ts_pool_opts){.kernel = {2, 2, 3}, .stride = {2, 1, 2}, .padding = {1, 0, 1}});
}
static ts_tensor *f_avg3d_divisor(ts_tensor *const *in) {
    return pool(in[0], 3, (ts_pool_opts){.kernel = {2, 2, 2}, .divisor_override = 3});
}
static ts_tensor *f_adaptive2d(ts_tensor *const *in) {
    return ts_hv_head(ts_adaptive_avg_pool_nd(ts_mul(in[0], in[0]), 2, (int64_t[]){3, 4}));
}
static ts_tensor *f_adaptive1d(ts_tensor *const *in) {
    return ts_hv_head(ts_adaptive_avg_pool_nd(ts_mul(in[0], in[0]), 1, (int64_t[]){4}));
}
static ts_tensor *f_adaptive3d(ts_tensor *const *in) {
    return ts_hv_head(ts_adaptive_avg_pool_nd(ts_mul(in[0], in[0]), 3, (int64_t[]){2, 3, 2}));
}

/* ---------------------------------------------------------------- transposed convolutions */
static ts_tensor *f_ct2d(ts_tensor *const *in) { /* stride 2, padding 1, output_padding 1 */
    return ts_hv_head(ts_conv_transpose2d(
        in[0], in[1], in[2],
        (ts_convnd_opts){.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1}}));
}
static ts_tensor *f_ct2d_groups(ts_tensor *const *in) { /* groups 2, dilation 2, output_padding
                                                         * >= stride (the padded form) */
    return ts_hv_head(ts_conv_transpose2d(in[0], in[1], NULL,
                                          (ts_convnd_opts){.stride = {1, 2},
                                                           .padding = {1, 0},
                                                           .dilation = {2, 1},
                                                           .output_padding = {1, 1},
                                                           .groups = 2}));
}
static ts_tensor *f_ct2d_unbatched(ts_tensor *const *in) {
    return ts_hv_head(ts_conv_transpose2d(in[0], in[1], in[2], (ts_convnd_opts){.stride = {2, 1}}));
}
static ts_tensor *f_ct1d(ts_tensor *const *in) {
    return ts_hv_head(ts_conv_transpose1d(
        in[0], in[1], in[2],
        (ts_convnd_opts){.stride = {2}, .padding = {1}, .output_padding = {1}, .dilation = {2}}));
}
static ts_tensor *f_ct3d(ts_tensor *const *in) {
    return ts_hv_head(ts_conv_transpose3d(
        in[0], in[1], in[2],
        (ts_convnd_opts){.stride = {2, 1, 2}, .padding = {1, 0, 1}, .output_padding = {1, 0, 0}}));
}

/* ---------------------------------------------------------------- kinked activations */
static ts_tensor *act_in(ts_tensor *x) { return ts_mul_scalar(x, 1.5); }
static ts_tensor *f_hardtanh(ts_tensor *const *in) {
    return ts_hv_head(ts_hardtanh(act_in(in[0]), -0.5, 0.7));
}
static ts_tensor *f_relu6(ts_tensor *const *in) {
    return ts_hv_head(ts_relu6(ts_mul_scalar(act_in(in[0]), 5)));
}
static ts_tensor *f_threshold(ts_tensor *const *in) {
    return ts_hv_head(ts_threshold(act_in(in[0]), 0.3, -0.8));
}
static ts_tensor *f_hardshrink(ts_tensor *const *in) {
    return ts_hv_head(ts_hardshrink(act_in(in[0]), 0.4));
}
static ts_tensor *f_softshrink(ts_tensor *const *in) {
    return ts_hv_head(ts_softshrink(act_in(in[0]), 0.4));
}
static ts_tensor *f_leaky_relu(ts_tensor *const *in) {
    return ts_hv_head(ts_leaky_relu(act_in(in[0]), 0.2));
}

/* ---------------------------------------------------------------- attention */
static ts_tensor *f_sdpa(ts_tensor *const *in) {
    return ts_hv_head(ts_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0, false, 0));
}
static ts_tensor *f_sdpa_causal(ts_tensor *const *in) { /* q, k given as [B, H, E, L]: last
                                                         * dims not of unit stride (copies) */
    return ts_hv_head(ts_scaled_dot_product_attention(
        ts_transpose(in[0], 2, 3), ts_transpose(in[1], 2, 3), in[2], NULL, 0, true, 0.7));
}
/* a boolean mask [L, S] with a row that masks every key (it attends to nothing: 0, no gradient) */
static ts_tensor *f_sdpa_bool_mask(ts_tensor *const *in) {
    const bool m[15] = {1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1};
    ts_tensor *mask =
        ts_from_data(TS_SHAPE(3, 5), TS_BOOL, m, (ts_opts){.device = ts_device_of(in[0])});
    return ts_hv_head(ts_scaled_dot_product_attention(in[0], in[1], in[2], mask, 0, false, 0));
}
static ts_tensor *f_sdpa_float_mask(ts_tensor *const *in) {
    double m[15];
    ts_test_fill_uniform(m, 15, 31);
    ts_tensor *mask = ts_tensor_f64(TS_SHAPE(3, 5), m, ts_hv_f64_on(in[0]));
    return ts_hv_head(ts_scaled_dot_product_attention(in[0], in[1], in[2], mask, 0, false, 0));
}

static const hv_case cases[] = {
    {"batch_norm train", f_bn_train, 3, {SH(4, 4, 3, 2, 2), SH(1, 3), SH(1, 3)}, NULL},
    {"batch_norm train 2d", f_bn_train, 3, {SH(2, 6, 3), SH(1, 3), SH(1, 3)}, NULL},
    {"batch_norm train plain", f_bn_train_plain, 1, {SH(3, 5, 2, 3)}, NULL},
    {"batch_norm train strided", f_bn_train_strided, 3, {SH(3, 3, 4, 2), SH(1, 6), SH(1, 3)}, NULL},
    {"batch_norm train channels_last",
     f_bn_train_nhwc,
     3,
     {SH(4, 2, 3, 2, 3), SH(1, 3), SH(1, 3)},
     NULL},
    {"batch_norm eval", f_bn_eval, 3, {SH(4, 3, 3, 2, 2), SH(1, 3), SH(1, 3)}, NULL},
    {"batch_norm eval plain", f_bn_eval_plain, 1, {SH(3, 3, 2, 5)}, NULL},
    {"avg_pool2d channels_last", f_avg2d_nhwc, 1, {SH(4, 2, 3, 4, 5)}, NULL},
    {"avg_pool2d", f_avg2d, 1, {SH(4, 2, 2, 5, 5)}, NULL},
    {"avg_pool2d exclude_pad ceil", f_avg2d_exclude_ceil, 1, {SH(4, 2, 2, 5, 6)}, NULL},
    {"avg_pool2d divisor", f_avg2d_divisor, 1, {SH(3, 2, 4, 5)}, NULL},
    {"avg_pool1d", f_avg1d, 1, {SH(3, 2, 3, 8)}, NULL},
    {"avg_pool3d", f_avg3d, 1, {SH(5, 1, 2, 4, 3, 5)}, NULL},
    {"avg_pool3d divisor", f_avg3d_divisor, 1, {SH(4, 2, 4, 4, 4)}, NULL},
    {"adaptive_avg_pool2d", f_adaptive2d, 1, {SH(4, 2, 2, 5, 7)}, NULL},
    {"adaptive_avg_pool1d", f_adaptive1d, 1, {SH(3, 2, 3, 7)}, NULL},
    {"adaptive_avg_pool3d", f_adaptive3d, 1, {SH(5, 1, 2, 3, 4, 5)}, NULL},
    {"conv_transpose2d", f_ct2d, 3, {SH(4, 2, 4, 3, 3), SH(4, 4, 3, 3, 3), SH(1, 3)}, NULL},
    {"conv_transpose2d groups", f_ct2d_groups, 2, {SH(4, 2, 4, 3, 3), SH(4, 4, 1, 2, 2)}, NULL},
    {"conv_transpose2d unbatched",
     f_ct2d_unbatched,
     3,
     {SH(3, 2, 3, 3), SH(4, 2, 2, 3, 2), SH(1, 2)},
     NULL},
    {"conv_transpose1d", f_ct1d, 3, {SH(3, 2, 2, 5), SH(3, 2, 3, 3), SH(1, 3)}, NULL},
    {"conv_transpose3d", f_ct3d, 3, {SH(5, 1, 2, 3, 2, 3), SH(5, 2, 2, 2, 2, 2), SH(1, 2)}, NULL},
    {"sdpa", f_sdpa, 3, {SH(4, 2, 2, 3, 4), SH(4, 2, 2, 5, 4), SH(4, 2, 2, 5, 3)}, NULL},
    {"sdpa causal strided",
     f_sdpa_causal,
     3,
     {SH(4, 2, 2, 4, 3), SH(4, 2, 2, 4, 5), SH(4, 2, 2, 5, 3)},
     NULL},
    {"sdpa bool mask",
     f_sdpa_bool_mask,
     3,
     {SH(4, 2, 2, 3, 4), SH(4, 2, 2, 5, 4), SH(4, 2, 2, 5, 3)},
     NULL},
    {"sdpa float mask",
     f_sdpa_float_mask,
     3,
     {SH(3, 2, 3, 4), SH(3, 2, 5, 4), SH(3, 2, 5, 3)},
     NULL},
    {"hardtanh", f_hardtanh, 1, {SH(1, 24)}, NULL},
    {"relu6", f_relu6, 1, {SH(1, 24)}, NULL},
    {"threshold", f_threshold, 1, {SH(1, 24)}, NULL},
    {"hardshrink", f_hardshrink, 1, {SH(1, 24)}, NULL},
    {"softshrink", f_softshrink, 1, {SH(1, 24)}, NULL},
    {"leaky_relu", f_leaky_relu, 1, {SH(1, 24)}, NULL},
};

/* ---------------------------------------------------------------- PyTorch's links */
typedef ts_tensor *(*unary_fn)(ts_tensor *x);
static ts_tensor *u_hardtanh(ts_tensor *x) { return ts_hardtanh(x, -0.5, 0.5); }
static ts_tensor *u_relu6(ts_tensor *x) { return ts_relu6(ts_mul_scalar(x, 4)); }
static ts_tensor *u_threshold(ts_tensor *x) { return ts_threshold(x, 0.1, 2.0); }
static ts_tensor *u_hardshrink(ts_tensor *x) { return ts_hardshrink(x, 0.5); }
static ts_tensor *u_softshrink(ts_tensor *x) { return ts_softshrink(x, 0.5); }
static ts_tensor *u_leaky_relu(ts_tensor *x) { return ts_leaky_relu(x, 0.2); }
static ts_tensor *u_avg_pool(ts_tensor *x) {
    return ts_avg_pool_nd(ts_reshape(x, TS_SHAPE(1, 2, 4)), 1, (ts_pool_opts){.kernel = {2}});
}
static ts_tensor *u_adaptive(ts_tensor *x) {
    return ts_adaptive_avg_pool_nd(ts_reshape(x, TS_SHAPE(1, 2, 4)), 1, (int64_t[]){3});
}
static ts_tensor *u_clamp(ts_tensor *x) { return ts_clamp(x, -0.5, 0.5); }
static ts_tensor *u_clamp_min(ts_tensor *x) { return ts_clamp_min(x, 0.1); }
static ts_tensor *u_clamp_max(ts_tensor *x) { return ts_clamp_max(x, 0.5); }

/* g = grad(sum(f(x)), x) under create_graph: with a link (PyTorch's derivative zeros_like), g
 * requires grad and grad(sum(g), x) is zeros; without one (clamp: where(mask, grad, 0)), g does
 * not require grad. Inputs beyond the kinks, an inf and -inf among them (|sign(inf)| 0 is 0). */
static void zero_link(unary_fn f, const char *name, bool linked, ts_device d) {
    const double xv[8] = {-4.0, -1.0, 0.2, 0.7, 2.0, INFINITY, -INFINITY, 0.05};
    ts_scope_begin();
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(8), xv, (ts_opts){.device = d, .requires_grad = true});
    ts_tensor *y = ts_sum(f(x)), *g = NULL, *h = NULL;
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, &x, 1, (ts_grad_opts){.create_graph = true}, &g), TS_OK);
    CHECK(g != NULL);
    if (g && ts_requires_grad(g) != linked)
        fprintf(stderr, "%s on %s: the gradient %s grad\n", name, ts_device_str(d),
                linked ? "does not require" : "requires");
    CHECK_EQ(ts_requires_grad(g), linked);
    if (linked && g) {
        ts_tensor *s = ts_sum(g);
        CHECK_EQ(ts_autograd_grad(&s, NULL, 1, &x, 1, (ts_grad_opts){0}, &h), TS_OK);
        double hv[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        CHECK(h && ts_test_read_f64(h, hv, 8));
        for (int i = 0; i < 8; i++) {
            if (hv[i] != 0 || signbit(hv[i]))
                fprintf(stderr, "%s on %s: second derivative [%d] = %g\n", name, ts_device_str(d),
                        i, hv[i]);
            CHECK(hv[i] == 0 && !signbit(hv[i]));
        }
    }
    /* the recorded gradient's values are the first-order ones (NaN-free at the infinities) */
    if (g) {
        ts_tensor *g1 = NULL, *y1 = ts_sum(f(x));
        CHECK_EQ(ts_autograd_grad(&y1, NULL, 1, &x, 1, (ts_grad_opts){0}, &g1), TS_OK);
        double a[8], b[8];
        CHECK(ts_test_read_f64(g, a, 8) && ts_test_read_f64(g1, b, 8));
        for (int i = 0; i < 8; i++) CHECK(a[i] == b[i] && signbit(a[i]) == signbit(b[i]));
    }
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    ts_mem_stats before, after;
    ts_memory_stats(ts_sim(0), &before);
    const ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    static const struct {
        const char *name;
        unary_fn f;
        bool linked;
    } links[] = {
        {"hardtanh", u_hardtanh, true},     {"relu6", u_relu6, true},
        {"threshold", u_threshold, true},   {"hardshrink", u_hardshrink, true},
        {"softshrink", u_softshrink, true}, {"leaky_relu", u_leaky_relu, true},
        {"avg_pool1d", u_avg_pool, true},   {"adaptive_avg_pool1d", u_adaptive, true},
        {"clamp", u_clamp, false},          {"clamp_min", u_clamp_min, false},
        {"clamp_max", u_clamp_max, false},
    };
    for (int di = 0; di < 2; di++) {
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
            ts_hv_check(&cases[k], devs[di]);
        for (size_t k = 0; k < sizeof links / sizeof links[0]; k++)
            zero_link(links[k].f, links[k].name, links[k].linked, devs[di]);
    }
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    CHECK_EQ(ts_memory_stats(ts_cpu(), &after), TS_OK);
    CHECK_EQ(after.live_tensors, 0);
    return ts_test_finish();
}
