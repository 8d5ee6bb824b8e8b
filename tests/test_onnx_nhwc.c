/* test_onnx_nhwc.c — by default, dense convolution nets imported from ONNX with the rewrites run
 * channels_last where oneDNN's NHWC kernels are native (src/onnx/rewrite_blocked.c's
 * tso_blocked_mode, src/onnx/run.c), as the C API's ResNets do (issue 54, decision 0026). A
 * ResNet-like model built here (Conv + Relu of stride 2, MaxPool, a basic block with its residual
 * Add, GlobalAveragePool, Flatten, Gemm). Checked:
 *
 *  - the run's mode: channels_last (-1) with AVX-512 and oneDNN (block 16) by default and under
 *    TS_ONNX_BLOCKED=nhwc; the blocked layout under TS_ONNX_BLOCKED=nchw, plain under 0; not for
 *    a model with a grouped convolution, nor without the rewrites, nor while a gradient may be
 *    recorded;
 *  - the outputs of the default, the nchw-pinned and the unrewritten models against a float64
 *    reference computed here from the model's weights, within a bound from the arithmetic (each
 *    layer's sums of K terms, times float32's unit roundoff, over the magnitudes of a float64
 *    forward on absolute values: N_OUT below) — never equality across layouts (decision 0019);
 *  - oneDNN's reorders of activations per forward: none in channels_last (brgconv reads and
 *    writes NHWC as it lies), some in the plain model. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/env_config.h"
#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "backend/cpu/conv_dnnl.h"
#include "nn/conv_blocked.h"
#include "onnx/onnx_internal.h"
#include "onnx_build.h"

enum { SIDE = 32, CIN = 3, C1 = 32, NCLS = 10 };

#define U           0x1p-24                            /* float32's unit roundoff */

/* The rounding error of the model's float32 forward, in units of U times the magnitude M of the
 * same forward on absolute values (|x|, |W|, |b|, Relu then the identity): a sum of n terms in any
 * order (a convolution's K products and its bias: K + 1) is within gamma_n = n U / (1 - n U) of
 * its terms' absolute sum, an error already in the terms passes through |W| (Relu and MaxPool do
 * not widen it), so the counts add along the path: the stem 3 * 9 + 1, each block convolution
 * 32 * 9 + 1, the residual Add 1; then GlobalAveragePool's mean of P = (SIDE / 4)^2 values P
 * (P - 1 additions, the division), the Gemm C1 + 1. */
#define N_BLOCK_OUT (3 * 9 + 1 + 2 * (C1 * 9 + 1) + 1) /* a2, the block's output */
#define N_OUT       (N_BLOCK_OUT + (SIDE / 4) * (SIDE / 4) + C1 + 1)

static double gamma_n(int n) { return n * U / (1 - n * U); }

/* the ResNet-like model; group: the block's second convolution's groups */
static uint8_t *resnet_model(int64_t group, size_t *len) {
    uint64_t s = 54;
    Onnx__GraphProto *g = graph();
    add_input(g, "x", tensor_type(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL));
    add_conv(g, "stem", "x", "y0", 3, 2, 1, &s, CIN, C1);
    node(g, "Relu", "r0", "y0", "a0");
    Onnx__NodeProto *mp = node(g, "MaxPool", "pool", "a0", "p");
    attr_ints(mp, "kernel_shape", 2, (int64_t[]){3, 3});
    attr_ints(mp, "strides", 2, (int64_t[]){2, 2});
    attr_ints(mp, "pads", 4, (int64_t[]){1, 1, 1, 1});
    add_conv(g, "c1", "p", "y1", 3, 1, 1, &s, C1, C1);
    node(g, "Relu", "r1", "y1", "a1");
    add_conv(g, "c2", "a1", "y2", 3, 1, group, &s, C1, C1);
    node(g, "Add", "add", "y2,p", "sum");
    node(g, "Relu", "r2", "sum", "a2");
    node(g, "GlobalAveragePool", "gap", "a2", "gp");
    node(g, "Flatten", "flat", "gp", "f");
    add_init_rand(g, "fc.w", 2, (int64_t[]){NCLS, C1}, 0.3, &s);
    add_init_rand(g, "fc.b", 1, (int64_t[]){NCLS}, 0.1, &s);
    Onnx__NodeProto *gemm = node(g, "Gemm", "fc", "f,fc.w,fc.b", "out");
    attr_int(gemm, "transB", 1);
    add_output(g, "out", tensor_type(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL));
    add_output(g, "a2", tensor_type(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL));
    return pack(model(g, 14), len);
}

static ts_module *load(const uint8_t *buf, size_t len, bool optimize) {
    return ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){.optimize = optimize});
}

static ts_tensor *input(uint64_t seed) {
    const int64_t n = CIN * SIDE * SIDE;
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)rand_uniform(&seed, -2, 2);
    ts_tensor *x = ts_from_data(TS_SHAPE(1, CIN, SIDE, SIDE), TS_F32, v, (ts_opts){0});
    free(v);
    return x;
}

static int mode_of(ts_module *m, ts_tensor *x) {
    return tso_blocked_mode((tso_model *)m, ts_cpu(), &x, 1);
}

/* parameter name of m in float64, |.| when absolute */
static ts_tensor *param64(ts_module *m, const char *name, bool absolute) {
    ts_tensor *t = ts_to_dtype(ts_module_get(m, name), TS_F64);
    return absolute ? ts_abs(t) : t;
}

/* Conv `name` (3x3, pads 1) in float64, Relu after it unless absolute or last */
static ts_tensor *conv64(ts_module *m, const char *name, ts_tensor *x, int stride, bool absolute,
                         bool relu) {
    char w[32], b[32];
    snprintf(w, sizeof w, "%s.w", name);
    snprintf(b, sizeof b, "%s.b", name);
    ts_tensor *y = ts_conv2d(x, param64(m, w, absolute), param64(m, b, absolute),
                             (ts_conv2d_opts){.stride = {stride, stride}, .padding = {1, 1}});
    return relu && !absolute ? ts_relu(y) : y;
}

/* the model's forward in float64 from its weights (m: the unrewritten model): out[0] the logits,
 * out[1] a2; absolute: on |x| with |W|, |b| and without Relu (the magnitudes M) */
static void forward64(ts_module *m, ts_tensor *x, bool absolute, ts_tensor **out) {
    x = ts_to_dtype(x, TS_F64);
    if (absolute) x = ts_abs(x);
    ts_tensor *a0 = conv64(m, "stem", x, 2, absolute, true);
    ts_tensor *p =
        ts_max_pool2d(a0, (ts_pool2d_opts){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
    ts_tensor *a1 = conv64(m, "c1", p, 1, absolute, true);
    ts_tensor *a2 = ts_add(conv64(m, "c2", a1, 1, absolute, false), p);
    if (!absolute) a2 = ts_relu(a2);
    ts_tensor *f = ts_flatten(ts_mean_dims(a2, (ts_dims){2, {2, 3}}, true), 1, -1);
    out[0] = ts_linear(f, param64(m, "fc.w", absolute), param64(m, "fc.b", absolute));
    out[1] = a2;
}

/* the largest |got - want| / (gamma_n M) over the elements; INFINITY when the shapes differ */
static double excess(ts_tensor *got, ts_tensor *want, ts_tensor *mag, int n) {
    if (!got || !want || !mag || ts_numel(got) != ts_numel(want)) return INFINITY;
    ts_tensor *d = ts_abs(ts_sub(ts_to_dtype(got, TS_F64), want));
    ts_tensor *r = ts_max(ts_div(d, ts_mul_scalar(mag, gamma_n(n))));
    return r ? ts_item(r) : INFINITY;
}

/* model m's outputs on x within the bound of the float64 reference want (magnitudes mag) */
static void check_bound(const char *what, ts_module *m, ts_tensor *x, ts_tensor **want,
                        ts_tensor **mag) {
    ts_tensor *y[2] = {NULL, NULL};
    CHECK(ts_onnx_run(m, 1, &x, 2, y) == TS_OK);
    const double e0 = excess(y[0], want[0], mag[0], N_OUT),
                 e1 = excess(y[1], want[1], mag[1], N_BLOCK_OUT);
    printf("  %-26s against float64: |error| / bound %.3g (logits), %.3g (a2)\n", what, e0, e1);
    CHECK(e0 <= 1);
    CHECK(e1 <= 1);
    if (y[1]) CHECK(ts_is_contiguous(y[1])); /* a 4-D output in NCHW, as a plain run gives it */
}

/* the model loaded with the rewrites under TS_ONNX_BLOCKED=env (NULL: unset, the default) */
static ts_module *load_env(const uint8_t *buf, size_t len, const char *env) {
    if (env)
        setenv("TS_ONNX_BLOCKED", env, 1);
    else
        unsetenv("TS_ONNX_BLOCKED");
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED); /* the library read its environment at start-up */
    ts_module *m = load(buf, len, true);
    unsetenv("TS_ONNX_BLOCKED");
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED);
    return m;
}

int main(void) {
    size_t len, glen;
    uint8_t *buf = resnet_model(1, &len), *gbuf = resnet_model(2, &glen);
    ts_module *m = load_env(buf, len, NULL), *ref = load(buf, len, false);
    ts_module *pin = load_env(buf, len, "nchw"), *off = load_env(buf, len, "0");
    ts_module *opt_in = load_env(buf, len, "nhwc"), *grouped = load_env(gbuf, glen, NULL);
    CHECK_OK();
    /* after start-up (the loads): AVX-512 with oneDNN */
    const int blk = tsi_conv_block(ts_cpu());
    const bool native = blk == 16;
    printf("channels_last for dense conv nets: %s here\n", native ? "yes" : "no");
    if (!m || !ref || !pin || !off || !opt_in || !grouped) return ts_test_finish();
    ts_scope_begin();
    ts_tensor *x = input(7);
    ts_no_grad_begin();
    CHECK_EQ(mode_of(m, x), native ? -1 : blk); /* the default */
    CHECK_EQ(mode_of(opt_in, x), native ? -1 : blk);
    CHECK_EQ(mode_of(pin, x), blk);  /* TS_ONNX_BLOCKED=nchw: the blocked layout */
    CHECK_EQ(mode_of(off, x), 0);    /* TS_ONNX_BLOCKED=0: no rewrite, plain */
    CHECK(mode_of(grouped, x) >= 0); /* a grouped convolution: not a dense net */
    CHECK(mode_of(ref, x) >= 0);     /* without the rewrites: plain */

    ts_tensor *want[2] = {NULL, NULL}, *mag[2] = {NULL, NULL};
    forward64(ref, x, false, want);
    forward64(ref, x, true, mag);
    CHECK_OK();
    check_bound("default", m, x, want, mag);
    check_bound("TS_ONNX_BLOCKED=nchw", pin, x, want, mag);
    check_bound("unrewritten (plain NCHW)", ref, x, want, mag);

    ts_tensor *y[2] = {NULL, NULL}, *yr[2] = {NULL, NULL};
    CHECK(ts_onnx_run(m, 1, &x, 2, y) == TS_OK); /* primitives and weight caches made */
    CHECK(ts_onnx_run(ref, 1, &x, 2, yr) == TS_OK);
    const uint64_t r0 = tsi_dnnl_conv_act_reorders();
    CHECK(ts_onnx_run(m, 1, &x, 2, y) == TS_OK);
    const uint64_t r1 = tsi_dnnl_conv_act_reorders();
    CHECK(ts_onnx_run(ref, 1, &x, 2, yr) == TS_OK);
    const uint64_t r2 = tsi_dnnl_conv_act_reorders();
    printf("  activation reorders a forward: default %llu, plain %llu\n",
           (unsigned long long)(r1 - r0), (unsigned long long)(r2 - r1));
    if (native) {
        CHECK_EQ(r1 - r0, 0); /* every convolution on NHWC as it lies */
        CHECK(r2 - r1 > 0);   /* the plain model reorders NCHW around oneDNN's kernels */
    }
    ts_no_grad_end();

    /* a gradient may be recorded: plain, and the gradient flows */
    ts_tensor *xg = ts_clone(x);
    CHECK(ts_set_requires_grad(xg, true) == TS_OK);
    CHECK(mode_of(m, xg) >= 0);
    ts_tensor *yg = NULL;
    CHECK(ts_onnx_run(m, 1, &xg, 1, &yg) == TS_OK); /* the first output alone */
    if (yg) {
        CHECK(ts_backward(ts_sum(yg)) == TS_OK);
        CHECK(ts_grad(xg) != NULL);
    }
    CHECK_OK();
    ts_scope_end();
    ts_module_free(m);
    ts_module_free(ref);
    ts_module_free(pin);
    ts_module_free(off);
    ts_module_free(opt_in);
    ts_module_free(grouped);
    arena_release();
    return ts_test_finish();
}
#endif
