/* test_onnx_nhwc.c — under TS_ONNX_BLOCKED=nhwc, dense convolution nets imported from ONNX run
 * channels_last where oneDNN's NHWC kernels are native (src/onnx/rewrite_blocked.c's
 * tso_blocked_mode, src/onnx/run.c), as the C API's ResNets do (issue 54). A ResNet-like model
 * built here (Conv + Relu of stride 2, MaxPool, a basic block with its residual Add,
 * GlobalAveragePool, Flatten, Gemm). Checked:
 *
 *  - the run's mode: channels_last (-1) with AVX-512 and oneDNN (block 16); not for a model with a
 *    grouped convolution, nor without the rewrites, nor while a gradient may be recorded, nor
 *    without TS_ONNX_BLOCKED=nhwc;
 *  - the outputs against the model loaded without the rewrites (plain NCHW, each op as the file
 *    has it): within float32 rounding (REF_TOL);
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

/* the forward's values are O(1) through 5 layers of sums of K <= 288 terms: float32 rounding
 * differs between the kernels by a few K u per layer, far below 1e-4 */
#define REF_TOL 1e-4

static double uniform(uint64_t *s, double lo, double hi) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(*s >> 11) * 0x1p-53;
}

static void init_rand(Onnx__GraphProto *g, const char *name, int ndim, const int64_t *dims,
                      double a, uint64_t *s) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= dims[i];
    float *v = get((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)uniform(s, -a, a);
    add_init(g, tensor(name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, ndim, dims, v,
                       (size_t)n * sizeof *v));
}

static void conv(Onnx__GraphProto *g, const char *name, const char *in, const char *out, int64_t k,
                 int64_t stride, int64_t group, uint64_t *s, int64_t cin, int64_t cout) {
    char w[32], b[32], all[128];
    snprintf(w, sizeof w, "%s.w", name);
    snprintf(b, sizeof b, "%s.b", name);
    init_rand(g, w, 4, (int64_t[]){cout, cin / group, k, k},
              1.0 / sqrt((double)(cin / group * k * k)), s);
    init_rand(g, b, 1, (int64_t[]){cout}, 0.2, s);
    snprintf(all, sizeof all, "%s,%s,%s", in, w, b);
    Onnx__NodeProto *n = node(g, "Conv", name, all, out);
    attr_ints(n, "kernel_shape", 2, (int64_t[]){k, k});
    attr_ints(n, "strides", 2, (int64_t[]){stride, stride});
    attr_ints(n, "pads", 4, (int64_t[]){k / 2, k / 2, k / 2, k / 2});
    if (group > 1) attr_int(n, "group", group);
}

/* the ResNet-like model; group: the block's second convolution's groups */
static uint8_t *resnet_model(int64_t group, size_t *len) {
    uint64_t s = 54;
    Onnx__GraphProto *g = graph();
    add_input(g, "x", tensor_type(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL));
    conv(g, "stem", "x", "y0", 3, 2, 1, &s, CIN, C1);
    node(g, "Relu", "r0", "y0", "a0");
    Onnx__NodeProto *mp = node(g, "MaxPool", "pool", "a0", "p");
    attr_ints(mp, "kernel_shape", 2, (int64_t[]){3, 3});
    attr_ints(mp, "strides", 2, (int64_t[]){2, 2});
    attr_ints(mp, "pads", 4, (int64_t[]){1, 1, 1, 1});
    conv(g, "c1", "p", "y1", 3, 1, 1, &s, C1, C1);
    node(g, "Relu", "r1", "y1", "a1");
    conv(g, "c2", "a1", "y2", 3, 1, group, &s, C1, C1);
    node(g, "Add", "add", "y2,p", "sum");
    node(g, "Relu", "r2", "sum", "a2");
    node(g, "GlobalAveragePool", "gap", "a2", "gp");
    node(g, "Flatten", "flat", "gp", "f");
    init_rand(g, "fc.w", 2, (int64_t[]){NCLS, C1}, 0.3, &s);
    init_rand(g, "fc.b", 1, (int64_t[]){NCLS}, 0.1, &s);
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
    for (int64_t i = 0; i < n; i++) v[i] = (float)uniform(&seed, -2, 2);
    ts_tensor *x = ts_from_data(TS_SHAPE(1, CIN, SIDE, SIDE), TS_F32, v, (ts_opts){0});
    free(v);
    return x;
}

static double max_diff(ts_tensor *a, ts_tensor *b) {
    if (!a || !b || ts_numel(a) != ts_numel(b)) return -1;
    ts_tensor *d = ts_max(ts_abs(ts_sub(ts_to_dtype(a, TS_F64), ts_to_dtype(b, TS_F64))));
    return d ? ts_item(d) : -1;
}

static int mode_of(ts_module *m, ts_tensor *x) {
    return tso_blocked_mode((tso_model *)m, ts_cpu(), &x, 1);
}

int main(void) {
    setenv("TS_ONNX_BLOCKED", "nhwc", 1);
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED);
    size_t len, glen;
    uint8_t *buf = resnet_model(1, &len), *gbuf = resnet_model(2, &glen);
    ts_module *m = load(buf, len, true), *ref = load(buf, len, false);
    ts_module *grouped = load(gbuf, glen, true);
    CHECK_OK();
    /* after start-up (the loads): AVX-512 with oneDNN */
    const bool native = tsi_conv_block(ts_cpu()) == 16;
    printf("channels_last for dense conv nets: %s here\n", native ? "yes" : "no");
    if (!m || !ref || !grouped) return ts_test_finish();
    ts_scope_begin();
    ts_tensor *x = input(7);
    ts_no_grad_begin();
    if (native) CHECK_EQ(mode_of(m, x), -1);
    if (!native) CHECK(mode_of(m, x) >= 0);
    CHECK(mode_of(grouped, x) >= 0); /* a grouped convolution: not a dense net */
    CHECK(mode_of(ref, x) >= 0);     /* without the rewrites: plain */
    unsetenv("TS_ONNX_BLOCKED");     /* the default: not channels_last */
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED);
    CHECK(mode_of(m, x) >= 0);
    setenv("TS_ONNX_BLOCKED", "nhwc", 1);
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED);

    ts_tensor *y[2] = {NULL, NULL}, *yr[2] = {NULL, NULL};
    CHECK(ts_onnx_run(m, 1, &x, 2, y) == TS_OK); /* primitives and weight caches made */
    CHECK(ts_onnx_run(ref, 1, &x, 2, yr) == TS_OK);
    const uint64_t r0 = tsi_dnnl_conv_act_reorders();
    CHECK(ts_onnx_run(m, 1, &x, 2, y) == TS_OK);
    const uint64_t r1 = tsi_dnnl_conv_act_reorders();
    CHECK(ts_onnx_run(ref, 1, &x, 2, yr) == TS_OK);
    const uint64_t r2 = tsi_dnnl_conv_act_reorders();
    const double d = max_diff(y[0], yr[0]), d2 = max_diff(y[1], yr[1]);
    printf("  against the plain model: max |diff| %.3g, %.3g (bound %g); activation reorders a "
           "forward %llu, plain %llu\n",
           d, d2, REF_TOL, (unsigned long long)(r1 - r0), (unsigned long long)(r2 - r1));
    CHECK(d >= 0 && d <= REF_TOL);
    CHECK(d2 >= 0 && d2 <= REF_TOL);
    if (y[1]) CHECK(ts_is_contiguous(y[1])); /* a 4-D output in NCHW, as a plain run gives it */
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
    ts_module_free(grouped);
    unsetenv("TS_ONNX_BLOCKED");
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED);
    arena_release();
    return ts_test_finish();
}
#endif
