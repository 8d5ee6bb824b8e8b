/* test_onnx_blocked_units.c — the blocked layout's pieces one by one (test_onnx_blocked.c checks
 * the whole on a MobileNetV3-like model): nn/conv_blocked.c's helpers and their guards,
 * backend/cpu/conv_dnnl_blocked.c's kernels (the provider choice, the activations, the pooling's
 * summation order, the per-channel Mul's three loops; test_onnx_blocked_rewrite.c has the
 * rewrite's choices). Every result is compared with the plain path's (tsi_conv2d_act,
 * ts_adaptive_avg_pool2d, ts_mul) bit for bit: the blocked kernels compute the same
 * operations in the same order, the layout changes are copies. Where a mean is checked against
 * float64 too, the bound is the summation's: hw terms of |x| <= 1, (hw + 4) u hw / hw. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/kern_conv.h"
#include "nn/conv_blocked.h"
#ifdef TS_HAVE_DNNL
#include "backend/cpu/dnnl_common.h"
#endif

#include "blocked_test_util.h"

/* the block the CPU's blocked convolutions should have: oneDNN's, by the ISA */
static int expected_block(void) {
#ifdef TS_HAVE_DNNL
    if (!tsi_dnnl_engine()) return 0;
    const ts_cpu_isa isa = ts_cpu_isa_get();
    return isa == TS_ISA_AVX512 ? 16 : isa == TS_ISA_AVX2 ? 8 : 0;
#else
    return 0;
#endif
}

static char *saved_conv;
static void conv_env(const char *v) {
    tsi_conv_force_provider(v ? v : ""); /* NULL: automatic, whatever TS_CONV says */
}
static void conv_env_restore(void) { conv_env(saved_conv); }

/* ------------------------------------------------------------------ the provider */
/* a graph capture records plain kernels only: no block while one is open */
static void check_capture(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int n = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int d = 0; d < n; d++) {
        ts_graph *g = ts_graph_capture_begin(devs[d], (ts_graph_opts){0});
        if (!g) {
            ts_error_clear();
            continue;
        }
        const int in = tsi_conv_block(devs[d]);
        ts_graph_capture_end();
        printf("  under a capture on %s: block %d\n", ts_device_str(devs[d]), in);
        CHECK_EQ(in, 0);
        ts_graph_free(g);
        ts_error_clear();
    }
}

static void check_provider(int blk) {
    conv_env(NULL);
    CHECK_EQ(tsi_conv_block(ts_cpu()), blk);
    conv_env("");
    CHECK_EQ(tsi_conv_block(ts_cpu()), blk);
    conv_env("dnnl");
    CHECK_EQ(tsi_conv_block(ts_cpu()), blk);
    conv_env("other");
    CHECK_EQ(tsi_conv_block(ts_cpu()), blk);
    conv_env("builtin");
    CHECK_EQ(tsi_conv_block(ts_cpu()), 0);
    conv_env_restore();
}

/* ------------------------------------------------------------------ the convolution */
/* y = tsi_conv2d_act_blocked with x blocked in xb (0 plain), y in yb, against tsi_conv2d_act on
 * the plain x: the same bits; *ran as the helper said */
static bool conv_same(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_conv2d_opts o, tsi_conv_act a,
                      double lo, double hi, int xb, int yb, bool *ran) {
    ts_tensor *want = tsi_conv2d_act(x, w, b, o, a, lo, hi);
    ts_tensor *xin = xb ? tsi_to_blocked(x, xb) : x;
    ts_tensor *got = tsi_conv2d_act_blocked(xin, xb, ts_size(x, 1), w, b, o, a, lo, hi, yb, ran);
    ts_tensor *g = got && yb ? tsi_from_blocked(got, ts_size(w, 0)) : got;
    const double d = max_diff(g, want);
    if (d != 0) printf("  conv_same: |diff| %g (act %d, xb %d, yb %d)\n", d, (int)a, xb, yb);
    if (got && yb) CHECK(ts_ndim(got) == 5 && ts_size(got, 4) == yb);
    return d == 0;
}

/* direct-kernel geometry of [1, c, h, w] * [o, c / g, k, k], stride 1, pad k / 2: does
 * kern_conv.c give it to the direct kernels */
static bool direct_takes(int64_t c, int64_t h, int64_t w, int64_t o, int64_t k, int64_t g) {
    ts_cgeom q = {.n = 1,
                  .c = c,
                  .h = h,
                  .w = w,
                  .o = o,
                  .oh = h,
                  .ow = w,
                  .kh = k,
                  .kw = k,
                  .sh = 1,
                  .sw = 1,
                  .ph = k / 2,
                  .pw = k / 2,
                  .dh = 1,
                  .dw = 1,
                  .g = g};
    q.cg = c / g, q.og = o / g, q.k = q.cg * k * k, q.p = h * w;
    q.direct = k == 1;
    return tsi_conv_direct_for(&q, false) != NULL;
}

/* the same for a 1x1 unpadded convolution of stride sh x 1 */
static bool direct_takes_1x1(int64_t c, int64_t h, int64_t w, int64_t o, int64_t sh) {
    ts_cgeom q = {.n = 1,
                  .c = c,
                  .h = h,
                  .w = w,
                  .o = o,
                  .oh = (h - 1) / sh + 1,
                  .ow = w,
                  .kh = 1,
                  .kw = 1,
                  .sh = sh,
                  .sw = 1,
                  .dh = 1,
                  .dw = 1,
                  .g = 1};
    q.cg = c, q.og = o, q.k = c, q.p = q.oh * w;
    q.direct = sh == 1;
    return tsi_conv_direct_for(&q, false) != NULL;
}

static void check_dispatch(int blk) {
    if (!blk) return;
    const ts_conv2d_opts p1 = {.padding = {1, 1}};
    bool ran = true;
    /* 3x3 stride 1 of 16 outputs: the direct kernels' by default, oneDNN's under TS_CONV=dnnl */
    ts_tensor *x = rnd(TS_SHAPE(2, 20, 9, 10), TS_F32), *w16 = rnd(TS_SHAPE(16, 20, 3, 3), TS_F32);
    conv_env(NULL);
    CHECK(conv_same(x, w16, NULL, p1, TSI_CONV_ACT_NONE, 0, 0, blk, blk, &ran));
    CHECK_EQ(ran, !direct_takes(20, 9, 10, 16, 3, 1));
    conv_env("dnnl");
    CHECK(conv_same(x, w16, NULL, p1, TSI_CONV_ACT_NONE, 0, 0, blk, blk, &ran));
    CHECK(ran);
    conv_env("builtin");
    CHECK(conv_same(x, w16, NULL, p1, TSI_CONV_ACT_NONE, 0, 0, blk, blk, &ran));
    CHECK(!ran);
    conv_env(NULL);
    /* 17 outputs: oneDNN's */
    ts_tensor *w17 = rnd(TS_SHAPE(17, 20, 3, 3), TS_F32);
    CHECK(conv_same(x, w17, NULL, p1, TSI_CONV_ACT_NONE, 0, 0, blk, blk, &ran));
    CHECK(ran);
    /* 1x1 of 8 outputs: oneDNN's at stride 1 (the input is its column matrix), the direct
     * kernels' at stride 2 x 1 */
    ts_tensor *w1 = rnd(TS_SHAPE(8, 20, 1, 1), TS_F32);
    CHECK(conv_same(x, w1, NULL, (ts_conv2d_opts){0}, TSI_CONV_ACT_NONE, 0, 0, blk, blk, &ran));
    CHECK_EQ(ran, !direct_takes_1x1(20, 9, 10, 8, 1));
    CHECK(conv_same(x, w1, NULL, (ts_conv2d_opts){.stride = {2, 1}}, TSI_CONV_ACT_NONE, 0, 0, blk,
                    blk, &ran));
    CHECK_EQ(ran, !direct_takes_1x1(20, 9, 10, 8, 2));
    /* depthwise, blocked both sides: conv_dw_blocked.c's kernel whatever the channel count (it
     * starts from the bias and adds the 3x3 taps row by row with FMAs, as oneDNN's and the direct
     * kernels do: the same bits; test_conv_dw_blocked.c bounds it against float64); under
     * TS_CONV=dnnl oneDNN's, 16 channels and 15 */
    ts_tensor *x16 = rnd(TS_SHAPE(1, 16, 8, 9), TS_F32), *d16 = rnd(TS_SHAPE(16, 1, 3, 3), TS_F32);
    CHECK(conv_same(x16, d16, NULL, (ts_conv2d_opts){.padding = {1, 1}, .groups = 16},
                    TSI_CONV_ACT_RELU, 0, 0, blk, blk, &ran));
    CHECK(ran);
    ts_tensor *x15 = rnd(TS_SHAPE(1, 15, 8, 9), TS_F32), *d15 = rnd(TS_SHAPE(15, 1, 3, 3), TS_F32);
    CHECK(conv_same(x15, d15, NULL, (ts_conv2d_opts){.padding = {1, 1}, .groups = 15},
                    TSI_CONV_ACT_RELU, 0, 0, blk, blk, &ran));
    CHECK(ran);
    conv_env("dnnl");
    CHECK(conv_same(x16, d16, NULL, (ts_conv2d_opts){.padding = {1, 1}, .groups = 16},
                    TSI_CONV_ACT_RELU, 0, 0, blk, blk, &ran));
    CHECK(ran);
    CHECK(conv_same(x15, d15, NULL, (ts_conv2d_opts){.padding = {1, 1}, .groups = 15},
                    TSI_CONV_ACT_RELU, 0, 0, blk, blk, &ran));
    CHECK(ran);
    conv_env_restore();
    CHECK_OK();
}

/* each activation, with a bias, blocked in and out (and plain in, blocked out): the plain bits */
static void check_acts(int blk) {
    const int b = blk ? blk : 8;
    ts_tensor *x = rnd(TS_SHAPE(2, 5, 6, 7), TS_F32), *w = rnd(TS_SHAPE(24, 5, 3, 3), TS_F32);
    ts_tensor *bias = rnd(TS_SHAPE(24), TS_F32);
    const ts_conv2d_opts o = {.stride = {2, 1}, .padding = {1, 1}};
    const struct {
        tsi_conv_act a;
        double lo, hi;
    } acts[] = {{TSI_CONV_ACT_NONE, 0, 0},
                {TSI_CONV_ACT_RELU, 0, 0},
                {TSI_CONV_ACT_CLIP, -0.4, 0.3},
                {TSI_CONV_ACT_CLIP, NAN, 0.3},
                {TSI_CONV_ACT_CLIP, -0.4, NAN},
                {TSI_CONV_ACT_CLIP, NAN, NAN},
                {TSI_CONV_ACT_HARDSIGMOID, 0.2, 0.5},
                {TSI_CONV_ACT_HARDSWISH, 1.0 / 6, 0.5}};
    for (size_t i = 0; i < sizeof acts / sizeof *acts; i++) {
        bool ran = false;
        CHECK(conv_same(x, w, bias, o, acts[i].a, acts[i].lo, acts[i].hi, b, b, &ran));
        if (ran != (blk > 0)) printf("  act %zu: ran %d\n", i, ran);
        CHECK_EQ(ran, blk > 0);
        CHECK(conv_same(x, w, bias, o, acts[i].a, acts[i].lo, acts[i].hi, 0, b, &ran));
        CHECK_EQ(ran, blk > 0);
        CHECK(conv_same(x, w, NULL, o, acts[i].a, acts[i].lo, acts[i].hi, b, 0, NULL));
    }
    bool ran = true;
    CHECK(!tsi_conv2d_act_blocked(x, 0, 5, w, NULL, o, (tsi_conv_act)99, 0, 0, b, &ran));
    CHECK(!ran);
    CHECK_ERR_HAS(TS_ERR_ARG, "unknown activation 99");
    CHECK(!tsi_conv2d_act_blocked(NULL, 0, 5, w, NULL, o, TSI_CONV_ACT_NONE, 0, 0, b, NULL));
    CHECK(!tsi_conv2d_act_blocked(x, 0, 5, NULL, NULL, o, TSI_CONV_ACT_NONE, 0, 0, b, NULL));
    CHECK_OK();
}

/* what makes the blocked kernel decline: the plain path's result (or its error) instead */
static void check_conv_guards(int blk) {
    if (!blk) return;
    const ts_conv2d_opts o = {.padding = {1, 1}};
    ts_tensor *x = rnd(TS_SHAPE(2, 5, 6, 7), TS_F32), *w = rnd(TS_SHAPE(24, 5, 3, 3), TS_F32);
    bool ran = true;
    /* a gradient to record: w requires grad */
    ts_tensor *wg = rnd(TS_SHAPE(24, 5, 3, 3), TS_F32), *wg2 = ts_clone(wg);
    ts_set_requires_grad(wg, true);
    ts_set_requires_grad(wg2, true);
    ts_tensor *y = tsi_conv2d_act_blocked(tsi_to_blocked(x, blk), blk, 5, wg, NULL, o,
                                          TSI_CONV_ACT_RELU, 0, 0, blk, &ran);
    CHECK(y && !ran);
    ts_tensor *yp = tsi_conv2d_act(x, wg2, NULL, o, TSI_CONV_ACT_RELU, 0, 0);
    if (y && yp) {
        ts_backward(ts_sum(tsi_from_blocked(y, 24)));
        ts_backward(ts_sum(yp));
        CHECK(max_diff(ts_grad(wg), ts_grad(wg2)) == 0);
    }
    /* float64 */
    ts_tensor *x64 = ts_to_dtype(x, TS_F64), *w64 = ts_to_dtype(w, TS_F64);
    CHECK(conv_same(x64, w64, NULL, o, TSI_CONV_ACT_RELU, 0, 0, blk, blk, &ran));
    CHECK(!ran);
    /* a bias of float64 alone */
    CHECK(!tsi_conv2d_act_blocked(x, 0, 5, w, ts_zeros(TS_SHAPE(24), (ts_opts){.dtype = TS_F64}), o,
                                  TSI_CONV_ACT_NONE, 0, 0, blk, &ran) ||
          !ran);
    ts_error_clear();
    /* a non-contiguous x (plain) and w */
    ts_tensor *xt = ts_transpose(rnd(TS_SHAPE(2, 5, 7, 6), TS_F32), 2, 3);
    CHECK(!ts_is_contiguous(xt));
    CHECK(conv_same(xt, w, NULL, o, TSI_CONV_ACT_NONE, 0, 0, 0, blk, &ran));
    CHECK(!ran);
    ts_tensor *wt = ts_transpose(rnd(TS_SHAPE(24, 5, 3, 3), TS_F32), 2, 3);
    CHECK(conv_same(x, wt, NULL, o, TSI_CONV_ACT_NONE, 0, 0, 0, blk, &ran));
    CHECK(!ran);
    /* an autocast region: the plain path's dtypes */
    ts_autocast_begin(TS_CPU, TS_BF16);
    y = tsi_conv2d_act_blocked(x, 0, 5, w, NULL, o, TSI_CONV_ACT_NONE, 0, 0, blk, &ran);
    ts_tensor *ya = tsi_conv2d_act(x, w, NULL, o, TSI_CONV_ACT_NONE, 0, 0);
    ts_autocast_end();
    CHECK(!ran);
    CHECK(y && ya && ts_dtype_of(y) == ts_dtype_of(ya));
    /* the output in another block than the kernel's: the plain path, blocked after */
    CHECK(conv_same(x, w, NULL, o, TSI_CONV_ACT_NONE, 0, 0, blk, blk / 2, &ran));
    CHECK(!ran);
    CHECK_OK();
    /* shapes the kernel does not take: the plain convolution's errors */
    struct {
        ts_tensor *x, *w, *b;
        int64_t c;
        ts_conv2d_opts o;
    } bad[] = {
        {x, w, rnd(TS_SHAPE(23), TS_F32), 5, o},          /* bias of 23 for 24 outputs */
        {x, w, rnd(TS_SHAPE(24, 1), TS_F32), 5, o},       /* bias 2-D */
        {x, rnd(TS_SHAPE(24, 5, 3), TS_F32), NULL, 5, o}, /* weight 3-D */
        {x, rnd(TS_SHAPE(24, 5, 9, 3), TS_F32), NULL, 5, {.groups = 1}}, /* kernel taller than x */
        {x, rnd(TS_SHAPE(24, 5, 3, 9), TS_F32), NULL, 5, {.groups = 1}}, /* wider */
        {x, w, NULL, 5, {.padding = {-1, 1}}},                           /* negative pads */
        {x, w, NULL, 5, {.padding = {1, -1}}},
        {x, w, NULL, 5, {.stride = {-1, 1}}}, /* negative strides */
        {x, w, NULL, 5, {.stride = {1, -1}}},
        {x, w, NULL, 5, {.dilation = {-1, 1}}}, /* negative dilations */
        {x, w, NULL, 5, {.dilation = {1, -1}}},
        {x, rnd(TS_SHAPE(24, 1, 3, 3), TS_F32), NULL, 5, {.groups = 5}}, /* 24 % 5 */
        {x, rnd(TS_SHAPE(24, 2, 3, 3), TS_F32), NULL, 5, {.groups = 2}}, /* 5 % 2 */
        {rnd(TS_SHAPE(2, 4, 6, 7), TS_F32), w, NULL, 4, o}, /* channels of x, not w's */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ran = true;
        y = tsi_conv2d_act_blocked(bad[i].x, 0, bad[i].c, bad[i].w, bad[i].b, bad[i].o,
                                   TSI_CONV_ACT_NONE, 0, 0, blk, &ran);
        if (y || ran) printf("  bad case %zu taken\n", i);
        CHECK(!y && !ran);
        CHECK(ts_error() != TS_OK);
        ts_error_clear();
    }
    /* a plain x declared of other channels than it has */
    ran = true;
    y = tsi_conv2d_act_blocked(x, 0, 4, rnd(TS_SHAPE(24, 4, 3, 3), TS_F32), NULL, o,
                               TSI_CONV_ACT_NONE, 0, 0, blk, &ran);
    CHECK(!y && !ran);
    ts_error_clear();
    /* an empty batch: not the kernel's */
    y = tsi_conv2d_act_blocked(rnd(TS_SHAPE(0, 5, 6, 7), TS_F32), 0, 5, w, NULL, o,
                               TSI_CONV_ACT_NONE, 0, 0, 0, &ran);
    CHECK(!ran);
    ts_error_clear();
    /* the backend entry itself: another block than its own, either side */
    const ts_backend *be = tsi_backend_for(TS_CPU);
    float xs[16 * 9] = {0}, ws[16 * 9] = {0}, ys[16 * 9];
    const ts_conv2d_params prm = {.stride = {1, 1}, .dilation = {1, 1}, .groups = 1};
    const int64_t nchw[4] = {1, 16, 3, 3}, ohw[3] = {16, 3, 3}, khw[2] = {1, 1};
    CHECK(!be->conv2d_blocked(be, 0, ys, blk / 2, xs, blk, ws, NULL, nchw, ohw, khw, &prm));
    CHECK(!be->conv2d_blocked(be, 0, ys, blk, xs, blk / 2, ws, NULL, nchw, ohw, khw, &prm));
    const int64_t nchw0[4] = {0, 16, 3, 3};
    CHECK(!be->conv2d_blocked(be, 0, ys, blk, xs, blk, ws, NULL, nchw0, ohw, khw, &prm));
    const ts_conv2d_params prm0 = {.stride = {1, 1}, .dilation = {1, 1}}; /* groups 0: one */
    CHECK(!be->conv2d_blocked(be, 0, ys, blk, xs, blk, ws, NULL, nchw0, ohw, khw, &prm0));
    CHECK_OK();
}

/* ------------------------------------------------------------------ the layout helpers */
static void check_layout(void) {
    ts_tensor *x = rnd(TS_SHAPE(2, 8, 3, 4), TS_F32);
    ts_tensor *xb = tsi_to_blocked(x, 4); /* C a multiple of the block: no padding */
    CHECK(xb && ts_ndim(xb) == 5 && ts_size(xb, 1) == 2 && ts_size(xb, 4) == 4);
    CHECK(max_diff(tsi_from_blocked(xb, 8), x) == 0);
    CHECK(max_diff(tsi_from_blocked(xb, 5), ts_narrow(x, 1, 0, 5)) == 0);
    CHECK(!tsi_to_blocked(NULL, 4) && !tsi_from_blocked(NULL, 4));
    CHECK_OK();
    CHECK(!tsi_to_blocked(x, 0));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "to_blocked: x float32 [2, 8, 3, 4]");
    CHECK(!tsi_to_blocked(ts_zeros(TS_SHAPE(8, 3, 4), (ts_opts){0}), 4));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "to_blocked");
    CHECK(!tsi_from_blocked(xb, 0));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "from_blocked");
    CHECK(!tsi_from_blocked(ts_zeros(TS_SHAPE(1, 0, 2, 2, 4), (ts_opts){0}), 0)); /* no channels */
    CHECK_ERR_HAS(TS_ERR_SHAPE, "from_blocked");
    CHECK(!tsi_from_blocked(xb, 9));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "for C = 9");
    CHECK(!tsi_from_blocked(x, 8));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "from_blocked");
    CHECK(!tsi_global_avg_pool_blocked(NULL));
    CHECK(!tsi_mul_channels_blocked(NULL, xb) && !tsi_mul_channels_blocked(xb, NULL));
    CHECK_OK();
}

/* ------------------------------------------------------------------ the pooling */
static void check_pool(void) {
    /* hw 1, 5 (tail only), 16, 35 (two rounds and a tail), 49; blocks 16, 8, 4, 3 */
    const int64_t sides[][2] = {{1, 1}, {1, 5}, {4, 4}, {5, 7}, {7, 7}};
    const int blks[] = {16, 8, 4, 3};
    for (size_t i = 0; i < sizeof sides / sizeof *sides; i++)
        for (size_t j = 0; j < sizeof blks / sizeof *blks; j++) {
            const int64_t h = sides[i][0], w = sides[i][1], hw = h * w;
            ts_tensor *x = rnd(TS_SHAPE(2, 21, h, w), TS_F32);
            ts_tensor *y = tsi_global_avg_pool_blocked(tsi_to_blocked(x, blks[j]));
            ts_tensor *want = ts_adaptive_avg_pool2d(x, 1, 1);
            CHECK(y && ts_ndim(y) == 5 && ts_size(y, 2) == 1 && ts_size(y, 3) == 1);
            ts_tensor *yp = y ? tsi_from_blocked(y, 21) : NULL;
            CHECK(max_diff(yp, want) == 0);
            ts_tensor *ref = ts_mean_dims(ts_to_dtype(x, TS_F64), TS_DIMS(2, 3), true);
            const double e = max_diff(yp, ref), bound = (double)(hw + 4) * 0x1p-24;
            CHECK(e >= 0 && e <= bound);
            /* the padding channels' mean is theirs: zero */
            if (y && 21 % blks[j])
                CHECK(ts_item(ts_max(ts_abs(ts_narrow(ts_narrow(y, 1, ts_size(y, 1) - 1, 1), 4,
                                                      21 % blks[j], blks[j] - 21 % blks[j])))) ==
                      0);
        }
    /* planes enough to be shared among threads (blocked_planes.c): the same bits on 1 and 2 */
    const int saved_threads = ts_get_num_threads();
    for (int threads = 1; threads <= 2; threads++)
        for (size_t j = 0; j < 2; j++) {
            ts_set_num_threads(threads);
            ts_tensor *xt = rnd(TS_SHAPE(1, 192, 14, 14), TS_F32);
            ts_tensor *yt = tsi_global_avg_pool_blocked(tsi_to_blocked(xt, blks[j]));
            CHECK(max_diff(yt ? tsi_from_blocked(yt, 192) : NULL,
                           ts_adaptive_avg_pool2d(xt, 1, 1)) == 0);
        }
    ts_set_num_threads(saved_threads);
    /* the others go through ts_mean_dims: a block of 32, float64, non-contiguous, a gradient */
    ts_tensor *x = rnd(TS_SHAPE(2, 40, 3, 5), TS_F32);
    ts_tensor *ref = ts_mean_dims(ts_to_dtype(x, TS_F64), TS_DIMS(2, 3), true);
    ts_tensor *y = tsi_global_avg_pool_blocked(tsi_to_blocked(x, 32));
    const double bound = 19 * 0x1p-24;
    const double e32 = max_diff(y ? tsi_from_blocked(y, 40) : NULL, ref);
    CHECK(e32 >= 0 && e32 <= bound);
    ts_tensor *x64 = tsi_to_blocked(ts_to_dtype(x, TS_F64), 8);
    y = tsi_global_avg_pool_blocked(x64);
    CHECK(y && ts_dtype_of(y) == TS_F64 &&
          max_diff(y, ts_mean_dims(x64, TS_DIMS(2, 3), true)) == 0);
    ts_tensor *xb = tsi_to_blocked(x, 8); /* [2, 5, 3, 5, 8] */
    ts_tensor *xn = ts_narrow(xb, 1, 1, 3);
    CHECK(!ts_is_contiguous(xn));
    y = tsi_global_avg_pool_blocked(xn);
    CHECK(max_diff(y, ts_mean_dims(xn, TS_DIMS(2, 3), true)) == 0);
    ts_tensor *xg = ts_clone(xb);
    ts_set_requires_grad(xg, true);
    y = tsi_global_avg_pool_blocked(xg);
    if (y) {
        ts_backward(ts_sum(y));
        /* d mean / dx = 1/15 everywhere: exactly the float nearest */
        ts_tensor *g = ts_grad(xg);
        CHECK(g != NULL);
        if (g) CHECK_NEAR(ts_item(ts_max(g)), 1.0 / 15, 0x1p-24 / 7);
        if (g) CHECK_NEAR(ts_item(ts_min(g)), 1.0 / 15, 0x1p-24 / 7);
    }
    /* an empty plane: the mean's NaN, not the kernel */
    y = tsi_global_avg_pool_blocked(ts_zeros(TS_SHAPE(1, 2, 0, 3, 8), (ts_opts){0}));
    if (y) CHECK(ts_numel(y) == 16 && isnan(ts_item(ts_max(y))));
    ts_error_clear();
    /* the backend entry refuses blocks beyond 16 (and below 1): nothing written */
    const ts_backend *be = tsi_backend_for(TS_CPU);
    if (be->global_avg_pool_blocked) {
        float in[17 * 4], out[17];
        for (int i = 0; i < 17 * 4; i++) in[i] = 1;
        for (int i = 0; i < 17; i++) out[i] = -7;
        be->global_avg_pool_blocked(be, 0, out, in, 1, 4, 17);
        be->global_avg_pool_blocked(be, 0, out, in, 1, 4, 0);
        bool untouched = true;
        for (int i = 0; i < 17; i++) untouched &= out[i] == -7;
        CHECK(untouched);
        be->global_avg_pool_blocked(be, 0, out, in, 1, 4, 16);
        CHECK(out[0] == 1 && out[15] == 1 && out[16] == -7);
    }
    CHECK_OK();
}

/* ------------------------------------------------------------------ the per-channel Mul */
static void check_mul(void) {
    const int blks[] = {16, 8, 4};
    for (size_t j = 0; j < sizeof blks / sizeof *blks; j++) {
        const int b = blks[j];
        ts_tensor *x = rnd(TS_SHAPE(2, 3, 5, 7, b), TS_F32),
                  *s = rnd(TS_SHAPE(2, 3, 1, 1, b), TS_F32);
        ts_tensor *want = ts_mul(x, s);
        ts_tensor *y1 = tsi_mul_channels_blocked(x, s), *y2 = tsi_mul_channels_blocked(s, x);
        CHECK(y1 && y2);
        CHECK(max_diff(y1, want) == 0);
        CHECK(max_diff(y2, want) == 0);
    }
    /* planes enough to be shared among threads: the same bits on 1 and 2 */
    const int saved_threads = ts_get_num_threads();
    for (int threads = 1; threads <= 2; threads++)
        for (size_t j = 0; j < sizeof blks / sizeof *blks; j++) {
            ts_set_num_threads(threads);
            const int b = blks[j];
            ts_tensor *x = rnd(TS_SHAPE(1, 12, 14, 14, b), TS_F32),
                      *s = rnd(TS_SHAPE(1, 12, 1, 1, b), TS_F32);
            CHECK(max_diff(tsi_mul_channels_blocked(x, s), ts_mul(x, s)) == 0);
        }
    ts_set_num_threads(saved_threads);
    CHECK_OK();
    /* not a scale pair, or not the kernel's: NULL and no error (the caller runs its Mul) */
    ts_tensor *x = rnd(TS_SHAPE(2, 3, 5, 7, 8), TS_F32), *s = rnd(TS_SHAPE(2, 3, 1, 1, 8), TS_F32);
    ts_tensor *xg = ts_clone(x);
    ts_set_requires_grad(xg, true);
    ts_tensor *cases[][2] = {
        {x, x},                                    /* same shape */
        {s, ts_clone(s)},                          /* 1 x 1 planes */
        {x, rnd(TS_SHAPE(2, 3, 1, 1, 4), TS_F32)}, /* other block */
        {x, rnd(TS_SHAPE(1, 3, 1, 1, 8), TS_F32)}, /* other batch */
        {x, rnd(TS_SHAPE(2, 2, 1, 1, 8), TS_F32)}, /* other Cb */
        {x, rnd(TS_SHAPE(2, 3, 5, 1, 8), TS_F32)}, /* not 1 x 1 */
        {x, rnd(TS_SHAPE(2, 3, 1, 7, 8), TS_F32)},
        {x, rnd(TS_SHAPE(2, 3, 1, 8), TS_F32)}, /* 4-D */
        {rnd(TS_SHAPE(2, 3, 5, 7), TS_F32), rnd(TS_SHAPE(2, 3, 1, 1), TS_F32)},
        {rnd(TS_SHAPE(1, 1, 2, 2, 32), TS_F32), rnd(TS_SHAPE(1, 1, 1, 1, 32), TS_F32)}, /* B 32 */
        {ts_to_dtype(x, TS_F64), s}, /* float64 */
        {x, ts_to_dtype(s, TS_F64)},
        {xg, s},                                                       /* a gradient */
        {ts_narrow(rnd(TS_SHAPE(2, 4, 5, 7, 8), TS_F32), 1, 1, 3), s}, /* non-contiguous */
        {x, ts_narrow(rnd(TS_SHAPE(2, 4, 1, 1, 8), TS_F32), 1, 1, 3)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ts_tensor *y = tsi_mul_channels_blocked(cases[i][0], cases[i][1]);
        if (y) printf("  mul case %zu taken\n", i);
        CHECK(!y);
        CHECK_OK();
    }
    /* the backend entry's loops for 16, 8 and any other block */
    const ts_backend *be = tsi_backend_for(TS_CPU);
    if (be->mul_channels_blocked) {
        for (int b = 3; b <= 16; b++) {
            float xs[2 * 3 * 16], ss[2 * 16], out[2 * 3 * 16 + 1];
            for (int i = 0; i < 2 * 3 * b; i++) xs[i] = (float)uniform(-1, 1);
            for (int i = 0; i < 2 * b; i++) ss[i] = (float)uniform(-1, 1);
            out[2 * 3 * b] = -7;
            be->mul_channels_blocked(be, 0, out, xs, ss, 2, 3, b);
            bool same = out[2 * 3 * b] == -7;
            for (int p = 0; p < 2; p++)
                for (int i = 0; i < 3; i++)
                    for (int l = 0; l < b; l++)
                        same &= out[(p * 3 + i) * b + l] == xs[(p * 3 + i) * b + l] * ss[p * b + l];
            if (!same) printf("  mul_channels_blocked: block %d wrong\n", b);
            CHECK(same);
        }
    }
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    ts_device devs[TS_TEST_MAX_DEVICES];
    (void)ts_test_devices(devs, TS_TEST_MAX_DEVICES); /* the backends installed */
    const char *c = getenv("TS_CONV");
    saved_conv = c ? strdup(c) : NULL;
    conv_env(NULL);
    const int blk = expected_block();
    conv_env_restore();
    printf("blocked layout units (block %d expected, %d now)\n", blk, tsi_conv_block(ts_cpu()));
    ts_scope_begin();
    check_provider(blk);
    check_capture();
    check_dispatch(blk);
    conv_env(NULL);
    const int now = tsi_conv_block(ts_cpu());
    conv_env_restore();
    check_acts(saved_conv && !strcmp(saved_conv, "builtin") ? 0 : now);
    check_conv_guards(tsi_conv_block(ts_cpu()));
    check_layout();
    check_pool();
    check_mul();
    ts_scope_end();
    free(saved_conv);
    return ts_test_finish();
}
