/* test_onnx_blocked.c — the blocked-layout rewrite of ts_onnx_opts.optimize
 * (src/onnx/rewrite_blocked.c, nn/conv_blocked.c, backend/cpu/conv_dnnl_blocked.c) on a
 * MobileNetV3-like model built here: Conv + HardSwish (3 input channels, stride 2), a depthwise
 * Conv + Relu of 24 channels, a squeeze-excitation block (GlobalAveragePool, 1x1 Conv + Relu, 1x1
 * Conv + HardSigmoid, Mul), a 1x1 projection to 40 channels, a 3x3 Conv + HardSwish and the
 * residual Add, a Clip, GlobalAveragePool, Flatten, Gemm; 24 and 40 channels are no multiple of
 * 16 or 8, so the padding channels of the blocked layout are there all along. Checked:
 *
 *  - the structure: which nodes became blocked ones, the FromBlocked nodes before the readers that
 *    take NCHW (Flatten) and for a graph output;
 *  - the outputs against the same model loaded with TS_ONNX_BLOCKED=0: bit for bit under
 *    TS_CONV=dnnl, within REF_TOL by default (the depthwise and 1x1-image convolutions then run
 *    conv_dw_blocked.c's and conv_fc_blocked.c's kernels, which round otherwise than oneDNN's;
 *    test_conv_dw_blocked.c and test_conv_fc_blocked.c bound them against float64). Otherwise the
 *    blocked convolutions run the very primitive the plain ones do (only the reorders go), the
 *    elementwise ops compute the same values per element in either layout, and the blocked global
 *    average pooling sums each channel in the plain kernel's order, so no rounding differs; a
 *    the unrewritten model (optimize off) is within float32 rounding of both (REF_TOL);
 *  - oneDNN's reorders of activations (tsi_dnnl_conv_act_reorders) per forward, fewer blocked;
 *  - sim:0, and grad mode with an input requiring grad: the rewritten nodes run as the plain ones
 *    (the same bits as the unrewritten model), and the gradient flows;
 *  - the layout helpers (round trip, zero padding, what a convolution writes into the padding, the
 *    errors naming the operand);
 *  - MobileNetV3-Small itself when /tmp/tessera-onnx-models/mobilenet_v3_small.onnx is there
 *    (bench/run_onnx.sh makes it): blocked against plain as above, and the reorders.
 * ctest runs it under TS_CPU_ISA=avx2 (block 8) and generic (no block: every rewritten node runs
 * as the plain one) and TS_CONV=builtin (no block) too. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/env_config.h"
#include "fault_sweep.h"
#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "backend/cpu/conv_dnnl.h"
#include "backend/cpu/cpu_isa.h"
#include "nn/conv_blocked.h"
#include "onnx/onnx_internal.h"
#include "onnx_build.h"

enum { SIDE = 13, CIN = 3, C1 = 24, CS = 8, C2 = 40, NCLS = 10 };

/* the model's bytes: outputs "out" [1, NCLS] and "res" [1, C2, 7, 7] (the residual sum) */
static uint8_t *mobile_model(size_t *len) {
    uint64_t s = 2024;
    Onnx__GraphProto *g = graph();
    add_input(g, "x", tensor_type(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL));
    add_conv(g, "c1", "x", "y1", 3, 2, 1, &s, CIN, C1);
    node(g, "HardSwish", "hs1", "y1", "h1");
    add_conv(g, "dw", "h1", "y2", 3, 1, C1, &s, C1, C1);
    node(g, "Relu", "r2", "y2", "a2");
    node(g, "GlobalAveragePool", "se_pool", "a2", "sp");
    add_conv(g, "se1", "sp", "s1", 1, 1, 1, &s, C1, CS);
    node(g, "Clip", "se_clip", "s1,zero,top", "s1r"); /* fused: Clip(0, 0.05) bites both sides */
    add_conv(g, "se2", "s1r", "s2", 1, 1, 1, &s, CS, C1);
    node(g, "HardSigmoid", "se_hs", "s2", "s2h");
    node(g, "Mul", "se_mul", "a2,s2h", "se");
    add_conv(g, "pw", "se", "p0", 1, 1, 1, &s, C1, C2);
    node(g, "Clip", "pw_clip", "p0,floor", "p"); /* fused: a lower bound only (-0.3) */
    add_conv(g, "q", "p", "q1", 3, 1, 1, &s, C2, C2);
    node(g, "HardSwish", "hs2", "q1", "q2");
    node(g, "Add", "res_add", "p,q2", "res");
    Onnx__NodeProto *clip = node(g, "Clip", "clip", "res,lo,hi", "cl");
    (void)clip;
    add_init(g, tensor("lo", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, (float[]){-1.5f}, 4));
    add_init(g, tensor("zero", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, (float[]){0.0f}, 4));
    add_init(g, tensor("top", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, (float[]){0.05f}, 4));
    add_init(g,
             tensor("floor", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, (float[]){-0.3f}, 4));
    add_init(g, tensor("hi", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, (float[]){2.5f}, 4));
    node(g, "GlobalAveragePool", "pool", "cl", "gp");
    node(g, "Flatten", "flat", "gp", "f");
    add_init_rand(g, "fc.w", 2, (int64_t[]){NCLS, C2}, 0.3, &s);
    add_init_rand(g, "fc.b", 1, (int64_t[]){NCLS}, 0.1, &s);
    Onnx__NodeProto *gemm = node(g, "Gemm", "fc", "f,fc.w,fc.b", "out");
    attr_int(gemm, "transB", 1);
    add_output(g, "out", tensor_type(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL));
    add_output(g, "res", tensor_type(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL));
    return pack(model(g, 14), len);
}

/* loaded with the rewrites; blocked: the blocked-layout one too (TS_ONNX_BLOCKED=0 otherwise) */
static ts_module *load(const uint8_t *buf, size_t len, ts_device dev, bool blocked) {
    if (!blocked) setenv("TS_ONNX_BLOCKED", "0", 1);
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED); /* the library read its environment at start-up */
    ts_module *m =
        ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){.device = dev, .optimize = true});
    unsetenv("TS_ONNX_BLOCKED");
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED);
    return m;
}

static int count_op(ts_module *m, const char *op) {
    const tso_graph *g = ((tso_model *)m)->graph;
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) k += !strcmp(g->nodes[i].op_type, op);
    return k;
}

static ts_tensor *input(ts_device dev, int64_t side, uint64_t seed) {
    const int64_t n = CIN * side * side;
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)rand_uniform(&seed, -2, 2);
    ts_tensor *x = ts_from_data(TS_SHAPE(1, CIN, side, side), TS_F32, v,
                                (ts_opts){.dtype = TS_F32, .device = dev});
    free(v);
    return x;
}

/* max |a - b| (host copies); -1 when the shapes differ or a copy fails */
static double max_diff(ts_tensor *a, ts_tensor *b) {
    if (!a || !b || ts_numel(a) != ts_numel(b) || ts_ndim(a) != ts_ndim(b)) return -1;
    ts_tensor *x = ts_to(a, ts_cpu()), *y = ts_to(b, ts_cpu());
    ts_tensor *xd = ts_to_dtype(x, TS_F64), *yd = ts_to_dtype(y, TS_F64);
    ts_tensor *d = xd && yd ? ts_max(ts_abs(ts_sub(xd, yd))) : NULL;
    return d ? ts_item(d) : -1;
}

/* The convolutions left plain: a grouped one (group 2, not depthwise), a depthwise one of 8
 * channels, auto_pad SAME_UPPER, asymmetric pads, a 3x3 stride-1 one of 16 outputs (the direct
 * kernels'), and the 3 -> 8 stride-2 one feeding only that depthwise one; "a" (3 -> 32) and "e"
 * (1x1, 32 -> 24) blocked, one FromBlocked giving "A" to the others. Outputs: the six convs'. */
static uint8_t *plain_model(size_t *len) {
    uint64_t s = 99;
    Onnx__GraphProto *g = graph();
    add_input(g, "x", tensor_type(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL));
    add_conv(g, "a", "x", "A", 3, 2, 1, &s, CIN, 32);
    add_conv(g, "e", "A", "E", 1, 1, 1, &s, 32, 24);
    add_conv(g, "g2", "A", "G", 3, 1, 2, &s, 32, 32);
    add_conv(g, "b", "x", "B", 3, 2, 1, &s, CIN, 8);
    add_conv(g, "dw8", "B", "D", 3, 1, 8, &s, 8, 8);
    add_conv(g, "small", "A", "S", 3, 1, 1, &s, 32, 16);
    Onnx__NodeProto *same = add_conv(g, "same", "A", "M", 3, 1, 1, &s, 32, 32);
    same->n_attribute = 2; /* kernel_shape, strides: pads dropped for auto_pad */
    attr_string(same, "auto_pad", "SAME_UPPER");
    Onnx__NodeProto *asym = add_conv(g, "asym", "A", "Y", 3, 1, 1, &s, 32, 32);
    asym->n_attribute = 2;
    attr_ints(asym, "pads", 4, (int64_t[]){1, 0, 1, 2});
    const char *outs[] = {"E", "G", "D", "S", "M", "Y"};
    for (int i = 0; i < 6; i++)
        add_output(g, outs[i], tensor_type(ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL));
    return pack(model(g, 14), len);
}

static void check_left_plain(void) {
    size_t len;
    const uint8_t *buf = plain_model(&len);
    ts_module *m = load(buf, len, ts_cpu(), true), *p = load(buf, len, ts_cpu(), false);
    CHECK_OK();
    if (!m || !p) return;
    CHECK_EQ(count_op(m, "tessera.BlockedConv"), 2);
    CHECK_EQ(count_op(m, "tessera.FromBlocked"), 1);
    CHECK_EQ(count_op(m, "Conv"), 6);
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *x = input(ts_cpu(), 12, 3), *ob[6] = {0}, *op[6] = {0};
    CHECK(ts_onnx_run(m, 1, &x, 6, ob) == TS_OK);
    CHECK(ts_onnx_run(p, 1, &x, 6, op) == TS_OK);
    for (int i = 0; i < 6; i++) CHECK(max_diff(ob[i], op[i]) == 0);
    ts_no_grad_end();
    ts_scope_end();
    ts_module_free(m);
    ts_module_free(p);
}

/* ------------------------------------------------------------------ the model */
/* the rewritten graph: six convolutions, both pools blocked; FromBlocked for Flatten and "res" */
static void check_structure(const uint8_t *buf, size_t len) {
    ts_module *m = load(buf, len, ts_cpu(), true), *p = load(buf, len, ts_cpu(), false);
    CHECK_OK();
    if (!m || !p) return;
    CHECK_EQ(count_op(m, "tessera.BlockedConv"), 6);
    CHECK_EQ(count_op(m, "tessera.BlockedGlobalAveragePool"), 2);
    CHECK_EQ(count_op(m, "tessera.FromBlocked"), 2);
    CHECK_EQ(count_op(m, "tessera.BlockedMul"), 1);
    CHECK_EQ(count_op(m, "Add"), 1); /* the residual Add and the Clip run as they are, on 5-D */
    CHECK_EQ(count_op(m, "Clip"), 1);
    CHECK_EQ(count_op(m, "FusedConv"), 0);
    CHECK_EQ(count_op(p, "tessera.BlockedConv"), 0);
    CHECK_EQ(count_op(p, "FusedConv"), 6); /* c1, dw, se1, se2, pw, q */
    CHECK(((tso_model *)m)->blocked);
    CHECK(!((tso_model *)p)->blocked);
    ts_module_free(m);
    ts_module_free(p);
}

/* the model without the rewrites (each op as the file has it): the reference the rewritten runs
 * are within float32 rounding of (the fused HardSwish / HardSigmoid round once, where the
 * composed ops round 3-4 times) */
static ts_tensor *reference(const uint8_t *buf, size_t len, ts_device dev, ts_tensor *x,
                            ts_tensor **res) {
    ts_module *m = ts_onnx_load_buffer(buf, len, NULL, (ts_onnx_opts){.device = dev});
    ts_tensor *out[2] = {NULL, NULL};
    bool ok = m && ts_onnx_run(m, 1, &x, 2, out) == TS_OK;
    ts_module_free(m);
    *res = ok ? out[1] : NULL;
    return ok ? out[0] : NULL;
}

/* Bound against the unrewritten model: each fused activation differs from the composed one by a
 * few u of its value (|y| <= ~10 here), carried through layers of weight norm ~1 and sums of
 * K <= 360 terms: 8 layers x 4 u x 10 x (2 + 360 u) is about 2e-5; 1e-4 leaves room for the
 * tails of the random weights. */
#define REF_TOL 1e-4

/* blocked against plain: the same primitives bit for bit under TS_CONV=dnnl; by default the
 * depthwise convolutions and those of 1x1 images run the kernels of conv_dw_blocked.c and
 * conv_fc_blocked.c, whose sums round otherwise: then within REF_TOL (float32 rounding through
 * the network, as against the unrewritten model) */
static double blocked_tol(ts_device dev) {
    const char *prov = getenv("TS_CONV");
    return tsi_conv_block(dev) && !(prov && !strcmp(prov, "dnnl")) ? REF_TOL : 0;
}

static void check_outputs(const uint8_t *buf, size_t len, ts_device dev) {
    char where[64];
    snprintf(where, sizeof where, "%s", ts_device_str(dev));
    ts_module *m = load(buf, len, dev, true), *p = load(buf, len, dev, false);
    CHECK_OK();
    if (!m || !p) return;
    ts_scope_begin();
    ts_no_grad_begin(); /* inference: the parameters require grad */
    ts_tensor *x = input(dev, SIDE, 7);
    ts_tensor *ob[2] = {NULL, NULL}, *op[2] = {NULL, NULL};
    const bool blocked_here = tsi_conv_block(dev) > 0;
    CHECK(ts_onnx_run(m, 1, &x, 2, ob) == TS_OK); /* once: primitives and weight caches made */
    const uint64_t r0 = tsi_dnnl_conv_act_reorders();
    CHECK(ts_onnx_run(m, 1, &x, 2, ob) == TS_OK);
    const uint64_t r1 = tsi_dnnl_conv_act_reorders();
    CHECK(ts_onnx_run(p, 1, &x, 2, op) == TS_OK);
    const uint64_t r2 = tsi_dnnl_conv_act_reorders();
    CHECK(ts_onnx_run(p, 1, &x, 2, op) == TS_OK);
    const uint64_t r3 = tsi_dnnl_conv_act_reorders();
    CHECK_OK();
    const double d_out = max_diff(ob[0], op[0]), d_res = max_diff(ob[1], op[1]);
    printf("  %s (block %d): blocked vs plain max |diff| out %.3g, res %.3g; activation reorders "
           "a forward %llu blocked, %llu plain\n",
           where, tsi_conv_block(dev), d_out, d_res, (unsigned long long)(r1 - r0),
           (unsigned long long)(r3 - r2));
    CHECK(d_out >= 0 && d_out <= blocked_tol(dev));
    CHECK(d_res >= 0 && d_res <= blocked_tol(dev));
    if (ob[1]) CHECK_EQ(ts_ndim(ob[1]), 4); /* the graph output in NCHW */
    if (blocked_here) CHECK_EQ(r1 - r0, 0); /* every convolution reads and writes as it is */
    if (blocked_here) CHECK(r3 - r2 > 0);
    /* oneDNN ran the plain convolutions, with no TS_CONV and an AVX2+ cap: blocked */
    if (tsi_dnnl_conv_count() > 0 && !getenv("TS_CONV") && ts_cpu_isa_get() >= TS_ISA_AVX2)
        CHECK(blocked_here);
    if (!blocked_here) CHECK_EQ(r1 - r0, r3 - r2);
    ts_tensor *rres = NULL, *rout = reference(buf, len, dev, x, &rres);
    const double e_out = max_diff(ob[0], rout), e_res = max_diff(ob[1], rres);
    printf("  %s: against the unrewritten model: out %.3g, res %.3g (bound %g)\n", where, e_out,
           e_res, REF_TOL);
    CHECK(e_out >= 0 && e_out <= REF_TOL);
    CHECK(e_res >= 0 && e_res <= REF_TOL);
    ts_no_grad_end();
    ts_scope_end();
    ts_module_free(m);
    ts_module_free(p);
}

/* grad mode with x requiring grad: the plain nodes run (same bits), and the gradient reaches x */
static void check_grad(const uint8_t *buf, size_t len) {
    ts_module *m = load(buf, len, ts_cpu(), true), *p = load(buf, len, ts_cpu(), false);
    CHECK_OK();
    if (!m || !p) return;
    ts_scope_begin();
    ts_tensor *x = input(ts_cpu(), SIDE, 11), *x2 = input(ts_cpu(), SIDE, 11);
    ts_set_requires_grad(x, true);
    ts_set_requires_grad(x2, true);
    CHECK_EQ(tso_blocked_mode((tso_model *)m, ts_cpu(), &x, 1), 0);
    /* the input without grad, the parameters with it (as loaded): still no blocked run */
    ts_tensor *xn = input(ts_cpu(), SIDE, 11);
    CHECK_EQ(tso_blocked_mode((tso_model *)m, ts_cpu(), &xn, 1), 0);
    ts_no_grad_begin();
    CHECK_EQ(tso_blocked_mode((tso_model *)m, ts_cpu(), &xn, 1), tsi_conv_block(ts_cpu()));
    ts_no_grad_end();
    ts_tensor *ob[1] = {NULL}, *op[1] = {NULL};
    CHECK(ts_onnx_run(m, 1, &x, 1, ob) == TS_OK);
    CHECK(ts_onnx_run(p, 1, &x2, 1, op) == TS_OK);
    CHECK(max_diff(ob[0], op[0]) == 0);
    if (ob[0] && op[0]) {
        ts_backward(ts_sum(ob[0]));
        ts_backward(ts_sum(op[0]));
        CHECK_OK();
        CHECK(max_diff(ts_grad(x), ts_grad(x2)) == 0);
    }
    CHECK_OK();
    ts_scope_end();
    ts_module_free(m);
    ts_module_free(p);
}

/* ------------------------------------------------------------------ the helpers */
static ts_tensor *at5(ts_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
    return ts_select(ts_select(ts_select(ts_select(ts_select(t, 0, a), 0, b), 0, c), 0, d), 0, e);
}

static void check_helpers(void) {
    ts_scope_begin();
    uint64_t s = 5;
    float v[2 * 5 * 3 * 2];
    for (int i = 0; i < 60; i++) v[i] = (float)rand_uniform(&s, -1, 1);
    ts_tensor *x = ts_from_data(TS_SHAPE(2, 5, 3, 2), TS_F32, v, (ts_opts){.dtype = TS_F32});
    ts_tensor *xb = tsi_to_blocked(x, 4);
    CHECK(xb && ts_ndim(xb) == 5 && ts_size(xb, 1) == 2 && ts_size(xb, 4) == 4);
    if (xb) {
        /* channel c at [c / 4][..][c % 4]; channels 5..7 zero */
        CHECK_EQ(ts_item(at5(xb, 1, 1, 2, 1, 0)), v[((1 * 5 + 4) * 3 + 2) * 2 + 1]);
        CHECK_EQ(ts_item(at5(xb, 0, 0, 1, 0, 3)), v[((0 * 5 + 3) * 3 + 1) * 2 + 0]);
        CHECK_EQ(ts_item(ts_max(ts_abs(ts_narrow(ts_narrow(xb, 1, 1, 1), 4, 1, 3)))), 0);
        CHECK(max_diff(tsi_from_blocked(xb, 5), x) == 0);
    }
    CHECK_OK();
    CHECK(!tsi_from_blocked(xb, 9));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "from_blocked");
    CHECK(!tsi_from_blocked(xb, 4)); /* 4 channels would be one block, not two */
    CHECK_ERR_HAS(TS_ERR_SHAPE, "from_blocked");
    CHECK(!tsi_to_blocked(xb, 4));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "to_blocked");
    CHECK(!tsi_global_avg_pool_blocked(x));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "global_avg_pool_blocked");

    /* what the blocked convolution writes into the padding channels: a HardSigmoid post-op of the
     * padding's zero would be 0.5 there; finite is what the layout needs */
    const int blk = tsi_conv_block(ts_cpu());
    if (blk) {
        float w[C1 * 5];
        for (int i = 0; i < C1 * 5; i++) w[i] = (float)rand_uniform(&s, -1, 1);
        ts_tensor *wt = ts_from_data(TS_SHAPE(C1, 5, 1, 1), TS_F32, w, (ts_opts){.dtype = TS_F32});
        bool ran = false;
        ts_tensor *y = tsi_conv2d_act_blocked(x, 0, 5, wt, NULL, (ts_conv2d_opts){0},
                                              TSI_CONV_ACT_HARDSIGMOID, 0.2, 0.5, blk, &ran);
        CHECK(ran);
        ts_tensor *ref =
            tsi_conv2d_act(x, wt, NULL, (ts_conv2d_opts){0}, TSI_CONV_ACT_HARDSIGMOID, 0.2, 0.5);
        CHECK(y && max_diff(tsi_from_blocked(y, C1), ref) == 0);
        const int64_t padc = ts_size(y, 1) * blk - C1;
        if (y && padc > 0) {
            ts_tensor *pad = ts_narrow(ts_narrow(y, 1, ts_size(y, 1) - 1, 1), 4, blk - padc, padc);
            const double lo = ts_item(ts_min(pad)), hi = ts_item(ts_max(pad));
            printf("  padding channels after a Conv + HardSigmoid: [%g, %g]\n", lo, hi);
            CHECK(isfinite(lo) && isfinite(hi));
        }
        /* asymmetric strides, pads and dilations, blocked in and plain out, blocked in of another
         * block (taken through the plain path), against tsi_conv2d_act */
        float w3[C1 * 5 * 3 * 2];
        for (int i = 0; i < C1 * 5 * 6; i++) w3[i] = (float)rand_uniform(&s, -1, 1);
        ts_tensor *w3t =
            ts_from_data(TS_SHAPE(C1, 5, 3, 2), TS_F32, w3, (ts_opts){.dtype = TS_F32});
        ts_tensor *x9 = ts_rand(TS_SHAPE(2, 5, 9, 11), (ts_opts){.dtype = TS_F32});
        ts_conv2d_opts o3 = {.stride = {1, 2}, .padding = {2, 1}, .dilation = {2, 1}};
        ts_tensor *want = tsi_conv2d_act(x9, w3t, NULL, o3, TSI_CONV_ACT_NONE, NAN, NAN);
        ts_tensor *got = tsi_conv2d_act_blocked(tsi_to_blocked(x9, blk), blk, 5, w3t, NULL, o3,
                                                TSI_CONV_ACT_NONE, NAN, NAN, 0, &ran);
        CHECK(ran);
        CHECK(got && want && ts_ndim(got) == 4 && max_diff(got, want) == 0);
        ts_tensor *x8 = tsi_to_blocked(x9, blk / 2); /* [2, 1, 9, 11, blk / 2]: not this block */
        got =
            tsi_conv2d_act_blocked(x8, blk, 5, w3t, NULL, o3, TSI_CONV_ACT_NONE, NAN, NAN, 0, &ran);
        CHECK(!ran); /* not the kernel's block: the plain path, from the tensor's own block */
        CHECK(got && max_diff(got, want) == 0);
        CHECK_OK();
        /* channels that do not match the weight's: conv2d's error, not a blocked kernel's run */
        got = tsi_conv2d_act_blocked(ts_rand(TS_SHAPE(2, 3, 9, 11), (ts_opts){0}), 0, 3, w3t, NULL,
                                     o3, TSI_CONV_ACT_NONE, NAN, NAN, blk, &ran);
        CHECK(!got && !ran);
        CHECK_ERR(TS_ERR_SHAPE);

        /* a blocked input of the wrong channel count is refused by the helper, naming it */
        ts_tensor *bad = tsi_conv2d_act_blocked(ts_zeros(TS_SHAPE(2, 3, 3, 2, blk), (ts_opts){0}),
                                                blk, 5, wt, NULL, (ts_conv2d_opts){0},
                                                TSI_CONV_ACT_NONE, NAN, NAN, blk, NULL);
        CHECK(!bad);
        CHECK_ERR_HAS(TS_ERR_SHAPE, "from_blocked");
    }
    ts_scope_end();
}

/* ------------------------------------------------------------------ allocation failures */
/* Each allocation of an optimized load and one inference run failed in turn: a clean TS_ERR_OOM
 * (the rewrite's own allocations among them), nothing leaked, and a run that succeeds gives the
 * plain model's bits. */
static struct {
    const uint8_t *buf;
    size_t len;
    float want[NCLS];
} sweep;

typedef struct sweep_st {
    ts_module *m;
    ts_tensor *x, *y;
} sweep_st;

static void *sweep_setup(void) {
    sweep_st *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->x = input(ts_cpu(), SIDE, 7);
    return s;
}

static bool sweep_run(void *p) {
    sweep_st *s = p;
    ts_module_free(s->m); /* a second call after a failure starts over */
    ts_release(s->y);
    s->y = NULL;
    s->m = load(sweep.buf, sweep.len, ts_cpu(), true);
    ts_no_grad_begin();
    ts_tensor *out[1] = {NULL};
    bool ok = s->m && ts_onnx_run(s->m, 1, &s->x, 1, out) == TS_OK;
    ts_no_grad_end();
    s->y = out[0];
    return ok && !ts_error();
}

static void sweep_check(void *p, bool ok) {
    sweep_st *s = p;
    if (!ok || !s->y) return;
    float got[NCLS];
    CHECK(ts_copy_to_host(s->y, got, sizeof got) == TS_OK);
    /* the same bits, except where a failure was absorbed by a fallback of other rounding (the
     * built-in kernels' naive loops when their scratch is missing, under TS_CONV=builtin) */
    for (int i = 0; i < NCLS; i++) CHECK_NEAR(got[i], sweep.want[i], REF_TOL);
}

static void sweep_teardown(void *p) {
    sweep_st *s = p;
    ts_module_free(s->m);
    ts_release(s->y);
    ts_release(s->x);
    free(s);
}

static void check_sweep(const uint8_t *buf, size_t len) {
    sweep.buf = buf, sweep.len = len;
    ts_module *p = load(buf, len, ts_cpu(), false);
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *x = input(ts_cpu(), SIDE, 7), *out[1] = {NULL};
    CHECK(p && ts_onnx_run(p, 1, &x, 1, out) == TS_OK);
    CHECK(out[0] && ts_copy_to_host(out[0], sweep.want, sizeof sweep.want) == TS_OK);
    ts_no_grad_end();
    ts_scope_end();
    ts_module_free(p);
    ts_sweep_case sc = {.name = "onnx_load optimized + run, blocked layout",
                        .setup = sweep_setup,
                        .run = sweep_run,
                        .teardown = sweep_teardown,
                        .check = sweep_check};
    ts_sweep_stats st = ts_fault_sweep(&sc, 20000);
    CHECK(st.allocations > 0);
    CHECK_EQ(st.errors, st.oom);
}

/* ------------------------------------------------------------------ MobileNetV3-Small */
static void check_mobilenet(void) {
    const char *path = "/tmp/tessera-onnx-models/mobilenet_v3_small.onnx";
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("  %s absent (bench/run_onnx.sh makes it): MobileNetV3-Small skipped\n", path);
        return;
    }
    fclose(f);
    setenv("TS_ONNX_BLOCKED", "0", 1);
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED);
    ts_module *p = ts_onnx_load(path, (ts_onnx_opts){.optimize = true});
    unsetenv("TS_ONNX_BLOCKED");
    tsi_env_reload(TSI_ENV_ONNX_BLOCKED);
    ts_module *m = ts_onnx_load(path, (ts_onnx_opts){.optimize = true});
    CHECK_OK();
    if (!m || !p) {
        ts_module_free(m), ts_module_free(p);
        return;
    }
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *x = ts_rand(TS_SHAPE(1, 3, 224, 224), (ts_opts){.dtype = TS_F32});
    ts_tensor *ob[1] = {NULL}, *op[1] = {NULL};
    CHECK(ts_onnx_run(m, 1, &x, 1, ob) == TS_OK);
    const uint64_t r0 = tsi_dnnl_conv_act_reorders();
    CHECK(ts_onnx_run(m, 1, &x, 1, ob) == TS_OK);
    const uint64_t r1 = tsi_dnnl_conv_act_reorders();
    CHECK(ts_onnx_run(p, 1, &x, 1, op) == TS_OK);
    const uint64_t r2 = tsi_dnnl_conv_act_reorders();
    CHECK(ts_onnx_run(p, 1, &x, 1, op) == TS_OK);
    const uint64_t r3 = tsi_dnnl_conv_act_reorders();
    const double d = max_diff(ob[0], op[0]);
    printf("  MobileNetV3-Small: %d blocked convolutions, %d FromBlocked; blocked vs plain max "
           "|diff| %.3g; activation reorders a forward %llu blocked, %llu plain\n",
           count_op(m, "tessera.BlockedConv"), count_op(m, "tessera.FromBlocked"), d,
           (unsigned long long)(r1 - r0), (unsigned long long)(r3 - r2));
    CHECK(d >= 0 && d <= blocked_tol(ts_cpu()));
    if (tsi_conv_block(ts_cpu())) CHECK_EQ(r1 - r0, 0);
    if (tsi_conv_block(ts_cpu())) CHECK(r3 - r2 > 0);
    CHECK_OK();
    ts_no_grad_end();
    ts_scope_end();
    ts_module_free(m);
    ts_module_free(p);
}

int main(void) {
    if (ts_test_isa_gate()) return 77; /* the AVX2 run: block 8; the portable one: none */
    ts_device devs[TS_TEST_MAX_DEVICES];
    int n_dev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    size_t len;
    uint8_t *buf = mobile_model(&len);
    printf("blocked layout (block %d on the cpu here)\n", tsi_conv_block(ts_cpu()));
    check_structure(buf, len);
    check_left_plain();
    for (int d = 0; d < n_dev; d++) check_outputs(buf, len, devs[d]);
    check_grad(buf, len);
    check_helpers();
    check_sweep(buf, len);
    check_mobilenet();
    arena_release();
    return ts_test_finish();
}
#endif
