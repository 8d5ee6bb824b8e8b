/* test_conv_bf16.c — bfloat16 convolutions on the cpu (forward, input gradient, weight gradient):
 * oneDNN's bf16 primitives where the CPU multiplies bf16 natively (AVX512-BF16, AMX), the widened
 * float32 path elsewhere; both against float64 convolutions of the same bf16 values.
 *
 * The bound, as test_matmul_bf16.c's: products of bf16 numbers are exact in float32, each output
 * is a float32 sum of K terms (forward: C/groups x kh x kw products and the bias; input gradient:
 * at most O/groups x kh x kw; weight gradient: N x OH x OW) rounded once to bf16, so
 * |r - exact| <= 2^-8 |exact| + (1 + 2^-8) gamma_K S, with S the same sum over absolute values
 * (computed in float64 by the same convolutions of |x|, |w|, |gy|). The path is checked too: with
 * native bf16 and oneDNN forced as the provider every part runs oneDNN's bf16 primitives (the
 * automatic choice, run after, leaves the direct kernels' shapes to the widened path, as float32
 * does); without native bf16 none does (ctest runs this under TS_CPU_ISA and ONEDNN_MAX_CPU_ISA
 * caps and TS_CONV=builtin).
 *
 * A convolution with its activation fused (inference: the eval path's conv + ReLU, ONNX's fused
 * Conv) gives the bits of the activation applied to the rounded bf16 output, in NCHW and
 * channels_last: ReLU in oneDNN's kernel before the rounding where bf16 is native, clip on the
 * rounded output. (HardSigmoid and HardSwish are not compared: the composed ops round each step.)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/conv_dnnl.h"
#include "backend/cpu/kern_conv.h"
#include "backend/cpu/matmul_dnnl.h"
#include "bf16_check.h"
#include "conv_sweep.h"
#include "fault_sweep.h"
#include "nn/conv_fused.h"
#include "same_bits.h"
#include "tol_check.h"
#include "ts_test.h"

static ts_tensor *random_bf16(ts_shape s, bool grad) { return ts_test_random_bf16(s, 1, grad); }

typedef struct conv_case {
    const char *name;
    int64_t n, c, h, w, o, kh, kw;
    ts_conv2d_opts o_;
    bool bias;
} conv_case;

/* expect: 3 (forward and both gradients on oneDNN's bf16 primitives), 0 (none), or -1 (any:
 * the automatic choice, which gives the direct kernels' shapes to the widened path) */
static void check_case(const conv_case *cc, int expect) {
    ts_scope_begin();
    const int groups = cc->o_.groups ? cc->o_.groups : 1;
    ts_tensor *x = random_bf16(TS_SHAPE(cc->n, cc->c, cc->h, cc->w), true);
    ts_tensor *w = random_bf16(TS_SHAPE(cc->o, cc->c / groups, cc->kh, cc->kw), true);
    ts_tensor *b = cc->bias ? random_bf16(TS_SHAPE(cc->o), false) : NULL;
    const uint64_t runs = tsi_dnnl_conv_bf16_count();
    ts_tensor *y = ts_conv2d(x, w, b, cc->o_);
    CHECK(y && ts_dtype_of(y) == TS_BF16);
    ts_tensor *gy = y ? random_bf16(ts_shape_of(y), false) : NULL;
    ts_backward_with(y, gy);
    const uint64_t ran = tsi_dnnl_conv_bf16_count() - runs;
    /* float64: the exact values, and the same sums over absolute values */
    ts_conv_f64 e, m;
    ts_test_conv_f64(x, w, b, gy, cc->o_, &e, &m);
    const double kf = (double)(cc->c / groups * cc->kh * cc->kw + (b ? 1 : 0));
    const double kd = (double)(cc->o / groups * cc->kh * cc->kw);
    const ts_shape ys = ts_shape_of(e.y);
    const double kw = (double)(ys.dims[0] * ys.dims[2] * ys.dims[3]);
    const double e1 = CHECK_BF16_SUM(cc->name, y, e.y, m.y, kf);
    const double e2 = CHECK_BF16_SUM(cc->name, ts_grad(x), e.gx, m.gx, kd);
    const double e3 = CHECK_BF16_SUM(cc->name, ts_grad(w), e.gw, m.gw, kw);
    CHECK(ts_dtype_of(ts_grad(x)) == TS_BF16 && ts_dtype_of(ts_grad(w)) == TS_BF16);
    if (expect >= 0)
        CHECK(ran == (uint64_t)expect);
    else
        CHECK(ran <= 3);
    printf("%-28s worst of the bound: y %.3f  gx %.3f  gw %.3f  %llu of 3 on oneDNN bf16\n",
           cc->name, e1, e2, e3, (unsigned long long)ran);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ fused activations */
/* tsi_conv2d_act under no-grad against ts_conv2d then the activation's own op, bit for bit (the
 * inputs hold no NaN, the one value where oneDNN's fused ReLU differs: it gives 0). */
static void check_fused_act(const conv_case *cc, bool channels_last) {
    ts_scope_begin();
    ts_no_grad_begin();
    const int groups = cc->o_.groups ? cc->o_.groups : 1;
    ts_tensor *x = random_bf16(TS_SHAPE(cc->n, cc->c, cc->h, cc->w), false);
    if (channels_last) x = ts_contiguous_format(x, TS_CHANNELS_LAST);
    ts_tensor *w = random_bf16(TS_SHAPE(cc->o, cc->c / groups, cc->kh, cc->kw), false);
    ts_tensor *b = cc->bias ? random_bf16(TS_SHAPE(cc->o), false) : NULL;
    ts_tensor *y = ts_conv2d(x, w, b, cc->o_);
    const struct {
        tsi_conv_act act;
        double lo, hi;
        ts_tensor *want;
    } acts[] = {
        {TSI_CONV_ACT_RELU, NAN, NAN, ts_relu(y)},
        {TSI_CONV_ACT_CLIP, -0.3, 0.7, ts_clamp(y, -0.3, 0.7)}, /* bounds not bf16 values */
        {TSI_CONV_ACT_CLIP, 0, 6, ts_clamp(y, 0, 6)},           /* ReLU6 */
    };
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        const uint64_t runs = tsi_dnnl_conv_bf16_count();
        ts_tensor *got = tsi_conv2d_act(x, w, b, cc->o_, acts[i].act, acts[i].lo, acts[i].hi);
        const uint64_t ran = tsi_dnnl_conv_bf16_count() - runs;
        const bool ok = same_bits(got, acts[i].want);
        if (!ok)
            printf("  %s%s, activation %d: not the bits of the composed ops\n", cc->name,
                   channels_last ? " (channels_last)" : "", (int)acts[i].act);
        CHECK(ok);
        CHECK(ran <= 1);
    }
    ts_no_grad_end();
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ allocation failures */
/* The widened path (the built-in kernels forced, so never oneDNN's bf16 primitives) with each of
 * its allocations failing in turn, forward and both gradients: a float32 copy or the scratch
 * missing, the naive loops of kern_conv_naive.c run instead, or the op fails with TS_ERR_OOM.
 * Either sums in float32 or better (the widened kernels; the naive loops in double) and rounds once
 * to bf16, so every result is held to check_case's bound. (The naive loops once rounded every
 * partial sum to bf16, tens of times past it.) Stride 2 down and 1 across, padding 1: the input
 * gradient's loops find the outputs that read an input row only at every other row. */
static ts_tensor *random_sweep(ts_shape s) { return random_bf16(s, false); }

static const ts_conv_sweep_spec SWEEP = {
    2, 3, 7, 6, 4, 3, 3, {.stride = {2, 1}, .padding = {1, 1}}, random_sweep, false};

static void *sweep_setup(void) { return ts_conv_sweep_setup(&SWEEP); }

static void sweep_check(void *p, bool ok) {
    ts_conv_sweep *s = p;
    if (!ok) return;
    const ts_conv_sweep_spec *sp = &SWEEP;
    const ts_shape ys = ts_shape_of(s->y64);
    CHECK_BF16_SUM("sweep y", s->y, s->y64, s->ya, (double)(sp->c * sp->kh * sp->kw + 1));
    CHECK_BF16_SUM("sweep gx", s->gx, s->gx64, s->gxa, (double)(sp->o * sp->kh * sp->kw));
    CHECK_BF16_SUM("sweep gw", s->gw, s->gw64, s->gwa,
                   (double)(ys.dims[0] * ys.dims[2] * ys.dims[3]));
}

static void test_allocation_failures(void) {
    tsi_conv_force_provider("builtin");
    const ts_sweep_case c = {.name = "bf16 conv2d through float32 copies",
                             .setup = sweep_setup,
                             .run = ts_conv_sweep_run,
                             .teardown = ts_conv_sweep_teardown,
                             .check = sweep_check};
    const ts_sweep_stats st = ts_fault_sweep(&c, 200);
    CHECK(st.absorbed > 0); /* some failures ran the naive loops */
    CHECK_EQ(st.errors, st.oom);
    tsi_conv_force_provider(getenv("TS_CONV"));
    CHECK_OK();
}

int main(void) {
    const int gate = ts_test_isa_gate();
    if (gate) return gate;
    ts_scope_begin();
    const char *cap = ts_test_bf16_cap(true);
    const bool native = tsi_dnnl_bf16_native() && !(cap && !strcmp(cap, "TS_CONV=builtin"));
    printf("oneDNN ISA: %s; native bf16 convolutions: %s%s%s\n", tsi_dnnl_isa_name(),
           native ? "yes" : "no", cap ? ", capped by " : "", cap ? cap : "");
    if (cap) CHECK(!native);
    const conv_case cases[] = {
        {"3x3 pad 1 (ResNet)", 2, 16, 10, 10, 32, 3, 3, {.padding = {1, 1}}, false},
        {"5x5 with bias (LeNet)", 3, 3, 14, 14, 6, 5, 5, {.groups = 1}, true},
        {"stride 2, 1x1 (downsample)", 2, 32, 9, 9, 16, 1, 1, {.stride = {2, 2}}, false},
        {"dilated 3x3", 1, 8, 12, 12, 8, 3, 3, {.padding = {2, 2}, .dilation = {2, 2}}, true},
        {"grouped (4 groups)", 2, 16, 8, 8, 24, 3, 3, {.padding = {1, 1}, .groups = 4}, true},
        {"depthwise", 2, 12, 9, 9, 12, 3, 3, {.padding = {1, 1}, .groups = 12}, false},
        {"long sums (k 576)", 1, 64, 6, 6, 8, 3, 3, {.padding = {1, 1}}, false},
    };
    const size_t n = sizeof cases / sizeof cases[0];
    if (getenv("TS_CONV")) { /* the run's own provider choice (ctest's TS_CONV=builtin run) */
        for (size_t i = 0; i < n; i++) check_case(&cases[i], native ? 3 : 0);
    } else { /* oneDNN forced (every part on bf16 primitives when native), then the automatic */
        tsi_conv_force_provider("dnnl");
        for (size_t i = 0; i < n; i++) check_case(&cases[i], native ? 3 : 0);
        for (size_t i = 0; i < n; i++) check_fused_act(&cases[i], false);
        for (size_t i = 0; i < n; i++) check_fused_act(&cases[i], true);
        tsi_conv_force_provider(NULL);
        for (size_t i = 0; i < n; i++) check_case(&cases[i], native ? -1 : 0);
    }
    for (size_t i = 0; i < n; i++) check_fused_act(&cases[i], true);
    ts_scope_end();
    test_allocation_failures();
    return ts_test_finish();
}
