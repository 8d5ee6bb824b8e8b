/* test_conv_fused.c — conv2d with its activation in one backend call (src/nn/conv_fused.c) and
 * the cache of rearranged weights (src/backend/cpu/conv_dnnl_wcache.c: oneDNN's reordered ones,
 * the direct kernels' packed ones), and the direct kernels' threads sharing one image's groups.
 *
 * The fused call must give what ts_conv2d then ts_relu / ts_clamp give, bit for bit: the same
 * convolution kernel runs and the activation is exact on its value. Every case runs on cpu and
 * sim:0 through each float32 kernel (oneDNN, the direct kernels, im2col + GEMM) and float64 (the
 * built-in kernels), and on cuda:0 when there is one, over bias, groups, stride, padding and
 * dilation. With gradients recorded or
 * a trace on it must be the composed ops (grad_fn, ts_conv2d's gradients, both ops traced). The
 * cached weights must follow in-place changes (through the weight or a view of its storage), new
 * weights at a reused address, weights at two offsets of one storage, more weights than the cache
 * holds, allocation failures while an entry is filled (no leak) and threads sharing them. Errors
 * are ts_conv2d's. */
#include <dlpack/dlpack.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd/trace.h"
#include "backend/cpu/conv_dnnl.h"
#include "backend/cpu/kern_conv.h"
#include "core/internal.h"
#include "fault_sweep.h"
#include "heap_usage.h"
#include "nn/conv_fused.h"
#include "same_bits.h"
#include "tol_check.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ fused vs composed */
typedef struct conv_case {
    int64_t n, c, h, w, o, k;
    int stride, pad, dil, groups;
    bool bias;
} conv_case;

typedef struct act_case {
    tsi_conv_act act;
    double lo, hi;
    const char *name;
} act_case;

static const act_case ACTS[] = {
    {TSI_CONV_ACT_NONE, NAN, NAN, "none"},
    {TSI_CONV_ACT_RELU, NAN, NAN, "relu"},
    {TSI_CONV_ACT_CLIP, -0.5, 0.75, "clip(-0.5, 0.75)"},
    {TSI_CONV_ACT_CLIP, 0.25, NAN, "clip(0.25, -)"},
    {TSI_CONV_ACT_CLIP, NAN, -0.125, "clip(-, -0.125)"},
    {TSI_CONV_ACT_CLIP, 0.5, -0.5, "clip(0.5, -0.5)"}, /* lo > hi: hi everywhere */
    {TSI_CONV_ACT_CLIP, NAN, NAN, "clip(-, -)"},       /* the identity */
};
#define N_ACTS ((int)(sizeof ACTS / sizeof ACTS[0]))

static ts_tensor *composed(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_conv2d_opts o,
                           const act_case *a) {
    ts_tensor *y = ts_conv2d(x, w, b, o);
    if (a->act == TSI_CONV_ACT_RELU) return ts_relu(y);
    if (a->act == TSI_CONV_ACT_CLIP && !(isnan(a->lo) && isnan(a->hi)))
        return ts_clamp(y, a->lo, a->hi);
    return y;
}

static ts_conv2d_opts opts_of(const conv_case *k) {
    return (ts_conv2d_opts){.stride = {k->stride, k->stride},
                            .padding = {k->pad, k->pad},
                            .dilation = {k->dil, k->dil},
                            .groups = k->groups};
}

/* Every activation of case k on dev in dtype dt, inference: fused == composed, bit for bit. */
static void fused_matches(const conv_case *k, ts_device dev, ts_dtype dt, const char *kernel) {
    ts_scope_begin();
    ts_manual_seed(11);
    const ts_opts o = {.dtype = dt, .device = dev};
    const int64_t g = k->groups ? k->groups : 1;
    ts_tensor *x = ts_randn(TS_SHAPE(k->n, k->c, k->h, k->w), o);
    ts_tensor *w = ts_mul_scalar(ts_randn(TS_SHAPE(k->o, k->c / g, k->k, k->k), o), 0.3);
    ts_tensor *b = k->bias ? ts_randn(TS_SHAPE(k->o), o) : NULL;
    ts_no_grad_begin();
    for (int i = 0; i < N_ACTS; i++) {
        ts_scope_begin();
        ts_tensor *want = composed(x, w, b, opts_of(k), &ACTS[i]);
        ts_tensor *got = tsi_conv2d_act(x, w, b, opts_of(k), ACTS[i].act, ACTS[i].lo, ACTS[i].hi);
        CHECK_OK();
        const bool ok = same_bits(got, want);
        if (!ok)
            printf("differs: %s on %s, %s (%s), c%lld o%lld k%lld s%d p%d d%d g%d%s\n",
                   ACTS[i].name, ts_device_str(dev), ts_dtype_name(dt), kernel, (long long)k->c,
                   (long long)k->o, (long long)k->k, k->stride, k->pad, k->dil, k->groups,
                   k->bias ? " bias" : "");
        CHECK(ok);
        ts_scope_end();
    }
    ts_no_grad_end();
    ts_scope_end();
}

static const conv_case CASES[] = {
    {2, 8, 10, 9, 24, 3, 1, 1, 1, 1, true},  /* 24 outputs: oneDNN (f32) */
    {2, 8, 10, 9, 24, 3, 1, 1, 1, 1, false}, /* no bias */
    {1, 8, 11, 12, 8, 3, 1, 1, 1, 1, true},  /* 8 outputs: the direct kernels (f32) */
    {2, 6, 9, 10, 12, 3, 2, 1, 1, 3, true},  /* groups, stride 2 */
    {1, 4, 12, 11, 20, 3, 1, 2, 2, 1, true}, /* dilation, padding 2 */
    {2, 16, 7, 7, 32, 1, 1, 0, 1, 1, false}, /* 1x1 */
    {1, 3, 15, 15, 16, 5, 2, 2, 1, 1, true}, /* a stem: 5x5, stride 2 */
    {2, 12, 8, 9, 12, 3, 1, 1, 1, 12, true}, /* depthwise */
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

/* float32 through each kernel the cpu has (the provider and the direct kernels' variant forced;
 * a variant this CPU lacks is skipped), float64, on cpu and sim:0 */
static void test_fused_matches(void) {
    const ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    static const struct {
        const char *provider, *direct, *name;
    } kernels[] = {{"dnnl", NULL, "oneDNN"},
                   {"builtin", "avx512", "built-in, direct avx512 where it applies"},
                   {"builtin", "avx2", "built-in, direct avx2 where it applies"},
                   {"builtin", "generic", "built-in, direct generic where it applies"},
                   {"builtin", "none", "built-in im2col"}};
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < N_CASES; c++) {
            for (int kk = 0; kk < (int)(sizeof kernels / sizeof kernels[0]); kk++) {
                tsi_conv_force_provider(kernels[kk].provider);
                if (tsi_conv_direct_force_isa(kernels[kk].direct))
                    fused_matches(&CASES[c], devs[d], TS_F32, kernels[kk].name);
            }
            tsi_conv_force_provider(NULL);
            CHECK(tsi_conv_direct_force_isa(NULL));
            fused_matches(&CASES[c], devs[d], TS_F64, "built-in");
        }
    fused_matches(&CASES[0], ts_cpu(), TS_BF16, "float32 copies");
}

/* CUDA: cuDNN (or im2col) then the epilogue kernel, against the same convolution then ts_relu /
 * ts_clamp on the device */
static void test_fused_matches_cuda(void) {
    if (!ts_cuda_is_available()) {
        ts_test_no_cuda("the fused activation on cuda:0");
        return;
    }
    const ts_dtype types[3] = {TS_F32, TS_F64, TS_F16};
    for (int c = 0; c < N_CASES; c++)
        for (int t = 0; t < 3; t++) fused_matches(&CASES[c], ts_cuda(0), types[t], "cuda");
}

/* NaN and infinities: a NaN output stays NaN through ts_relu / ts_clamp and through the built-in
 * kernels. oneDNN's clip turns a NaN into its lower bound (conv_dnnl.c), so it meets only the
 * infinities. */
static void special_values(ts_dtype dt, const char *provider, bool nan) {
    ts_scope_begin();
    const conv_case k = {1, 2, 4, 5, 3, 1, 1, 0, 1, 1, false};
    tsi_conv_force_provider(provider);
    ts_tensor *x = ts_randn(TS_SHAPE(k.n, k.c, k.h, k.w), (ts_opts){.dtype = dt});
    ts_tensor *w = ts_ones(TS_SHAPE(k.o, k.c, 1, 1), (ts_opts){.dtype = dt});
    ts_no_grad_begin();
    ts_tensor *img = ts_select(x, 0, 0);
    if (nan) ts_fill_(ts_select(ts_select(ts_select(img, 0, 0), 0, 0), 0, 1), NAN);
    ts_fill_(ts_select(ts_select(ts_select(img, 0, 1), 0, 2), 0, 3), INFINITY);
    ts_fill_(ts_select(ts_select(ts_select(img, 0, 1), 0, 3), 0, 0), -INFINITY);
    for (int i = 0; i < N_ACTS; i++) {
        ts_tensor *want = composed(x, w, NULL, opts_of(&k), &ACTS[i]);
        ts_tensor *got =
            tsi_conv2d_act(x, w, NULL, opts_of(&k), ACTS[i].act, ACTS[i].lo, ACTS[i].hi);
        CHECK(same_bits(got, want));
    }
    ts_no_grad_end();
    tsi_conv_force_provider(NULL);
    CHECK_OK();
    ts_scope_end();
}

static void test_special_values(void) {
    special_values(TS_F32, "builtin", true);
    special_values(TS_F64, "builtin", true);
    special_values(TS_F32, "dnnl", false);
}

/* Under autocast the fused call casts as ts_conv2d does: the same lower-precision result. */
static void test_autocast(void) {
    ts_scope_begin();
    ts_manual_seed(9);
    ts_tensor *x = ts_randn(TS_SHAPE(1, 8, 6, 7), (ts_opts){0});
    ts_tensor *w = ts_randn(TS_SHAPE(24, 8, 3, 3), (ts_opts){0});
    ts_no_grad_begin();
    ts_autocast_begin(TS_CPU, TS_BF16);
    ts_tensor *want = ts_clamp(ts_conv2d(x, w, NULL, (ts_conv2d_opts){0}), -1, 2);
    ts_tensor *got = tsi_conv2d_act(x, w, NULL, (ts_conv2d_opts){0}, TSI_CONV_ACT_CLIP, -1, 2);
    ts_autocast_end();
    ts_no_grad_end();
    CHECK(got && ts_dtype_of(got) == TS_BF16);
    CHECK(same_bits(got, want));
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ autograd and trace */
static ts_tensor *small_weight(int64_t o) { return ts_randn(TS_SHAPE(o, 4, 3, 3), (ts_opts){0}); }

/* With grad on and an input requiring grad: the composed ops' node and ts_conv2d's gradients. */
static void test_autograd(void) {
    ts_scope_begin();
    ts_manual_seed(5);
    for (int a = 1; a < N_ACTS; a++) {
        const act_case *ac = &ACTS[a];
        const conv_case k = {2, 4, 7, 6, 24, 3, 1, 1, 1, 1, true};
        ts_opts o = {.requires_grad = true};
        ts_tensor *x = ts_randn(TS_SHAPE(k.n, k.c, k.h, k.w), o);
        ts_tensor *w = ts_randn(TS_SHAPE(k.o, k.c, 3, 3), o), *b = ts_randn(TS_SHAPE(k.o), o);
        ts_tensor *y = tsi_conv2d_act(x, w, b, opts_of(&k), ac->act, ac->lo, ac->hi);
        CHECK(y && ts_grad_fn_name(y) != NULL);
        ts_tensor *gy = ts_randn(ts_shape_of(y), (ts_opts){0});
        ts_backward_with(y, gy);
        ts_tensor *gx = ts_clone(ts_grad(x)), *gw = ts_clone(ts_grad(w)),
                  *gb = ts_clone(ts_grad(b));
        ts_set_grad(x, NULL), ts_set_grad(w, NULL), ts_set_grad(b, NULL);
        ts_tensor *y2 = composed(x, w, b, opts_of(&k), ac);
        ts_backward_with(y2, gy);
        CHECK(same_bits(y, y2));
        CHECK(same_bits(gx, ts_grad(x)) && same_bits(gw, ts_grad(w)) && same_bits(gb, ts_grad(b)));
        CHECK_STREQ(ts_grad_fn_name(y), ts_grad_fn_name(y2));
    }
    /* no grad: one call, nothing recorded */
    ts_tensor *x = ts_randn(TS_SHAPE(1, 4, 5, 5), (ts_opts){.requires_grad = true});
    ts_tensor *w = ts_randn(TS_SHAPE(24, 4, 3, 3), (ts_opts){.requires_grad = true});
    ts_no_grad_begin();
    ts_tensor *y = tsi_conv2d_act(x, w, NULL, (ts_conv2d_opts){0}, TSI_CONV_ACT_RELU, NAN, NAN);
    ts_no_grad_end();
    CHECK(y && !ts_grad_fn_name(y) && !ts_requires_grad(y));
    CHECK_OK();
    ts_scope_end();
}

/* An ONNX export's trace must see conv2d and the activation as the two ops they are. */
static void test_trace(void) {
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(1, 4, 5, 5), (ts_opts){0}), *w = small_weight(24);
    ts_no_grad_begin();
    tsi_tracer tr = {0};
    tsi_trace_begin(&tr, &w, 1);
    ts_tensor *y = tsi_conv2d_act(x, w, NULL, (ts_conv2d_opts){0}, TSI_CONV_ACT_CLIP, 0, 6);
    CHECK(tsi_trace_end(&tr));
    CHECK(y != NULL);
    CHECK_EQ(tr.n_recs, 2);
    if (tr.n_recs == 2) {
        CHECK_STREQ(tr.recs[0].op, "conv2d");
        CHECK_STREQ(tr.recs[1].op, "clamp");
    }
    tsi_trace_free(&tr);
    ts_no_grad_end();
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ errors */
static void same_error(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_conv2d_opts o) {
    ts_no_grad_begin();
    CHECK(ts_conv2d(x, w, b, o) == NULL);
    const ts_status code = ts_error();
    char want[512];
    snprintf(want, sizeof want, "%s", ts_error_message());
    ts_error_clear();
    CHECK(tsi_conv2d_act(x, w, b, o, TSI_CONV_ACT_RELU, NAN, NAN) == NULL);
    CHECK_EQ(ts_error(), code);
    CHECK_STREQ(ts_error_message(), want);
    ts_error_clear();
    ts_no_grad_end();
}

static void test_errors(void) {
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(1, 4, 5, 5), (ts_opts){0}), *w = small_weight(8);
    same_error(NULL, w, NULL, (ts_conv2d_opts){0});
    same_error(x, ts_randn(TS_SHAPE(8, 4, 3), (ts_opts){0}), NULL, (ts_conv2d_opts){0});
    same_error(x, ts_randn(TS_SHAPE(8, 4, 3, 3), (ts_opts){.dtype = TS_F64}), NULL,
               (ts_conv2d_opts){0});
    same_error(x, w, NULL, (ts_conv2d_opts){.groups = 3});
    same_error(x, w, NULL, (ts_conv2d_opts){.stride = {-1, 1}});
    same_error(x, ts_randn(TS_SHAPE(8, 4, 7, 7), (ts_opts){0}), NULL, (ts_conv2d_opts){0});
    same_error(x, w, ts_randn(TS_SHAPE(7), (ts_opts){0}), (ts_conv2d_opts){0});
    same_error(ts_to(x, ts_sim(0)), w, NULL, (ts_conv2d_opts){0});
    CHECK(tsi_conv2d_act(x, w, NULL, (ts_conv2d_opts){0}, (tsi_conv_act)7, NAN, NAN) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "conv2d: unknown activation 7");
    ts_scope_end();
}

/* ------------------------------------------------------------------ the weight cache */
/* The cache's tests run twice: on a shape oneDNN runs with a blocked weight (16 -> 32 channels,
 * 3x3: reordered, so cached), then (wc_direct) on one the direct kernels run with packed weights
 * (16 -> 16 channels in 2 groups, 40x40: kern_conv_direct.c), their threads sharing the groups. */
#define WC_N 1
#define WC_C 16
static bool wc_direct;

static int64_t wc_o(void) { return wc_direct ? 16 : 32; }
static int64_t wc_groups(void) { return wc_direct ? 2 : 1; }
static int64_t wc_side(void) { return wc_direct ? 40 : 9; }

static ts_tensor *wc_input(void) {
    return ts_randn(TS_SHAPE(WC_N, WC_C, wc_side(), wc_side() - 1), (ts_opts){0});
}
static ts_tensor *wc_weight(void) {
    return ts_randn(TS_SHAPE(wc_o(), WC_C / wc_groups(), 3, 3), (ts_opts){0});
}

/* the bytes of one cached weight */
static size_t wc_bytes(void) {
    const size_t plain = (size_t)wc_o() * WC_C / (size_t)wc_groups() * 9 * sizeof(float);
    if (!wc_direct) return plain; /* OIhw16i16o: no padding */
    const int64_t side = wc_side(), g = wc_groups();
    const ts_cgeom geom = {.n = WC_N,
                           .c = WC_C,
                           .h = side,
                           .w = side - 1,
                           .o = wc_o(),
                           .oh = side,
                           .ow = side - 1,
                           .kh = 3,
                           .kw = 3,
                           .sh = 1,
                           .sw = 1,
                           .ph = 1,
                           .pw = 1,
                           .dh = 1,
                           .dw = 1,
                           .g = g,
                           .cg = WC_C / g,
                           .og = wc_o() / g,
                           .k = WC_C / g * 9,
                           .p = side * (side - 1)};
    const ts_conv_direct *d = tsi_conv_direct_for(&geom, false);
    return d ? (size_t)tsi_conv_direct_pack_floats(d, &geom) * sizeof(float) : plain;
}

static ts_tensor *conv(ts_tensor *x, ts_tensor *w) {
    return tsi_conv2d_act(x, w, NULL, (ts_conv2d_opts){.padding = {1, 1}, .groups = wc_groups()},
                          TSI_CONV_ACT_RELU, NAN, NAN);
}

/* conv through w must equal conv through a fresh copy of w (a new storage: never cached) */
static bool follows(ts_tensor *x, ts_tensor *w) {
    ts_scope_begin();
    const bool ok = same_bits(conv(x, w), conv(x, ts_clone(w)));
    ts_scope_end();
    return ok;
}

static tsi_wcache_stats stats(void) {
    tsi_wcache_stats s;
    tsi_dnnl_conv_wcache_stats(&s);
    return s;
}

/* A weight is kept from its second call and served from the third; in-place changes, through
 * the weight or through another view of its storage, are seen. */
static void test_cache_in_place(void) {
    ts_scope_begin();
    ts_manual_seed(21);
    ts_tensor *x = wc_input(), *w = wc_weight();
    ts_no_grad_begin();
    const tsi_wcache_stats s0 = stats();
    for (int i = 0; i < 3; i++) CHECK(follows(x, w));
    const tsi_wcache_stats s1 = stats();
    CHECK_EQ(s1.fills - s0.fills, 1);
    CHECK(s1.hits - s0.hits >= 1);
    ts_mul_(w, ts_full(TS_SHAPE(1), -2.0, (ts_opts){0}));
    CHECK(follows(x, w));
    ts_copy_(w, wc_weight());
    CHECK(follows(x, w));
    ts_fill_(ts_select(w, 0, 3), 0.5); /* a view of the same storage */
    CHECK(follows(x, w));
    ts_add_scalar_(ts_narrow(w, 1, 2, 3), 1.0);
    CHECK(follows(x, w));
    for (int i = 0; i < 2; i++) CHECK(follows(x, w));
    CHECK(stats().hits > s1.hits); /* the changed weight is cached again */
    ts_no_grad_end();
    CHECK_OK();
    ts_scope_end();
}

/* A weight handed to another framework by DLPack: the consumer writes the memory without a
 * version bump, so the weight must not be served from the cache afterwards. */
static void test_cache_dlpack(void) {
    ts_scope_begin();
    ts_manual_seed(23);
    ts_tensor *x = wc_input(), *w = wc_weight();
    ts_no_grad_begin();
    for (int i = 0; i < 3; i++) CHECK(follows(x, w)); /* cached */
    struct DLManagedTensor *m = ts_to_dlpack(w);
    CHECK(m != NULL);
    if (m) {
        float *data = (float *)((char *)m->dl_tensor.data + m->dl_tensor.byte_offset);
        for (int64_t i = 0; i < ts_numel(w); i++) data[i] = -data[i]; /* the consumer writes */
        CHECK(follows(x, w));
        const tsi_wcache_stats s0 = stats();
        for (int i = 0; i < 3; i++) CHECK(follows(x, w));
        CHECK_EQ(stats().fills, s0.fills); /* never kept again */
        m->deleter(m);
    }
    ts_no_grad_end();
    CHECK_OK();
    ts_scope_end();
}

/* A weight released and a new one made at the same address (the caching allocator's reuse) */
static void test_cache_reused_address(void) {
    ts_scope_begin();
    ts_manual_seed(22);
    ts_tensor *x = wc_input();
    ts_no_grad_begin();
    int reused = 0;
    void *last = NULL;
    for (int round = 0; round < 4; round++) {
        ts_scope_begin();
        ts_tensor *w = wc_weight();
        reused += w->storage->data == last;
        last = w->storage->data;
        for (int i = 0; i < 3; i++) CHECK(follows(x, w));
        ts_scope_end();
    }
    CHECK(reused >= 1); /* else the case is not tested */
    ts_no_grad_end();
    CHECK_OK();
    ts_scope_end();
}

/* Two weights at two offsets of one storage are two weights */
static void test_cache_offsets(void) {
    ts_scope_begin();
    ts_manual_seed(23);
    ts_tensor *x = wc_input();
    ts_tensor *both = ts_randn(TS_SHAPE(2 * wc_o(), WC_C / wc_groups(), 3, 3), (ts_opts){0});
    ts_tensor *w1 = ts_narrow(both, 0, 0, wc_o()), *w2 = ts_narrow(both, 0, wc_o(), wc_o());
    CHECK(ts_is_contiguous(w1) && ts_is_contiguous(w2));
    ts_no_grad_begin();
    for (int i = 0; i < 3; i++) CHECK(follows(x, w1) && follows(x, w2));
    CHECK(!same_bits(conv(x, w1), conv(x, w2)));
    ts_no_grad_end();
    CHECK_OK();
    ts_scope_end();
}

/* More weights than the cache holds, in turn: every result right, the bound kept. */
static void test_cache_bound(void) {
    ts_scope_begin();
    ts_manual_seed(24);
    const size_t wbytes = wc_bytes();
    const size_t old = tsi_dnnl_conv_wcache_limit(3 * wbytes);
    ts_tensor *x = wc_input(), *w[8];
    for (int i = 0; i < 8; i++) w[i] = wc_weight();
    ts_no_grad_begin();
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 8; i++) {
            CHECK(follows(x, w[i]));
            CHECK(follows(x, w[i]));
            const tsi_wcache_stats s = stats();
            CHECK(s.bytes <= 3 * wbytes && s.entries <= 3);
        }
    CHECK(stats().fills >= 8);
    tsi_dnnl_conv_wcache_limit(0); /* nothing kept: still right */
    CHECK_EQ(stats().entries, 0);
    for (int i = 0; i < 3; i++) CHECK(follows(x, w[0]));
    CHECK_EQ(stats().entries, 0);
    tsi_dnnl_conv_wcache_limit(old);
    ts_no_grad_end();
    CHECK_OK();
    ts_scope_end();
}

/* Training: a weight that requires grad under grad mode is never cached. */
static void test_cache_training(void) {
    ts_scope_begin();
    ts_tensor *x = wc_input(), *w = wc_weight();
    ts_set_requires_grad(w, true);
    const uint64_t fills = stats().fills, hits = stats().hits;
    for (int i = 0; i < 3; i++) {
        ts_scope_begin();
        ts_tensor *y = ts_conv2d(x, w, NULL, (ts_conv2d_opts){.groups = wc_groups()});
        ts_backward(ts_sum(y));
        ts_scope_end();
    }
    CHECK(stats().fills == fills && stats().hits == hits);
    CHECK_OK();
    ts_scope_end();
}

/* Allocation failures while a weight is being kept (its second call fills an entry): each call
 * computes what an uncached one does or fails with TS_ERR_OOM, and nothing leaks (an entry whose
 * buffer could not be had is freed: LSan sees one that is not). */
typedef struct fill_sweep {
    ts_tensor *x, *w; /* a new weight for each point: never seen before */
} fill_sweep;

static void *fill_setup(void) {
    fill_sweep *s = calloc(1, sizeof *s);
    if (s) s->x = wc_input(), s->w = wc_weight();
    return s;
}

static bool fill_run(void *p) {
    fill_sweep *s = p;
    ts_no_grad_begin();
    ts_scope_begin();
    bool ok = conv(s->x, s->w) && conv(s->x, s->w) && !ts_error();
    ts_scope_end();
    ts_no_grad_end();
    return ok;
}

static void fill_check(void *p, bool ok) {
    fill_sweep *s = p;
    ts_no_grad_begin();
    if (ok) CHECK(follows(s->x, s->w));
    ts_no_grad_end();
}

static void fill_teardown(void *p) {
    fill_sweep *s = p;
    ts_release(s->x);
    ts_release(s->w);
    free(s);
}

/* every failure point of the scenario once, quietly (the heap measure below) */
static void fill_points(int64_t points) {
    for (int64_t n = 1; n <= points; n++) {
        fill_sweep *s = fill_setup();
        ts_fault_alloc_set(n);
        fill_run(s);
        ts_fault_alloc_set(-1);
        ts_error_clear();
        fill_teardown(s);
    }
}

/* Where LSan does not run, the heap: a warmed-up process repeating the failures does not grow (an
 * entry lost each round, 80 bytes and more, passes the slack). A window that grew is measured
 * again, up to three: a leak grows in every window, while a one-time allocation elsewhere in the
 * process (seen once on a loaded host: 2768 bytes) does not come back. */
static void fill_failures_heap(int64_t points) {
    enum { WARM = 4, ROUNDS = 32, SLACK_PER_ROUND = 32, WINDOWS = 3 };
    /* one entry kept at most: the cache itself does not grow */
    const size_t old = tsi_dnnl_conv_wcache_limit(wc_bytes());
    for (int i = 0; i < WARM; i++) fill_points(points);
    int64_t before = 0, after = 0;
    for (int w = 0; w < WINDOWS; w++) {
        before = ts_heap_in_use();
        for (int i = 0; i < ROUNDS; i++) fill_points(points);
        after = ts_heap_in_use();
        if (before < 0 || after - before < ROUNDS * SLACK_PER_ROUND) break;
    }
    tsi_dnnl_conv_wcache_limit(old);
    if (before < 0) {
        printf("heap growth: not measured here (glibc's mallinfo2 missing, or LSan's job)\n");
        return;
    }
    printf("heap growth over %d rounds of %lld failures: %lld bytes\n", ROUNDS, (long long)points,
           (long long)(after - before));
    CHECK(after - before < ROUNDS * SLACK_PER_ROUND);
}

static void test_cache_fill_failures(void) {
    const uint64_t fills = stats().fills;
    const ts_sweep_case c = {.name = "conv2d keeping a weight",
                             .setup = fill_setup,
                             .run = fill_run,
                             .teardown = fill_teardown,
                             .check = fill_check};
    ts_sweep_stats st = ts_fault_sweep(&c, 2000);
    CHECK(st.allocations > 0);
    CHECK_EQ(st.errors, st.oom);
    CHECK(stats().fills > fills); /* the runs did keep weights */
    CHECK_OK();
    fill_failures_heap(st.allocations);
}

/* Threads sharing weights through a small cache (entries evicted while others run them) */
#define N_THREADS 4
static ts_tensor *shared_x, *shared_w[5], *shared_want[5];

static void *cache_thread(void *arg) {
    const int id = (int)(intptr_t)arg;
    int bad = 0;
    ts_no_grad_begin();
    for (int r = 0; r < 12; r++) {
        const int i = (r + id) % 5;
        ts_scope_begin();
        bad += !same_bits(conv(shared_x, shared_w[i]), shared_want[i]);
        ts_scope_end();
    }
    ts_no_grad_end();
    return (void *)(intptr_t)bad;
}

static void test_cache_threads(void) {
    ts_scope_begin();
    ts_manual_seed(25);
    const size_t wbytes = wc_bytes();
    const size_t old = tsi_dnnl_conv_wcache_limit(2 * wbytes);
    shared_x = wc_input();
    ts_no_grad_begin();
    for (int i = 0; i < 5; i++) {
        shared_w[i] = wc_weight();
        shared_want[i] = conv(shared_x, ts_clone(shared_w[i]));
    }
    ts_no_grad_end();
    pthread_t t[N_THREADS];
    for (int i = 0; i < N_THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, cache_thread, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < N_THREADS; i++) {
        void *bad = NULL;
        CHECK(pthread_join(t[i], &bad) == 0);
        CHECK_EQ((intptr_t)bad, 0);
    }
    tsi_dnnl_conv_wcache_limit(old);
    CHECK_OK();
    ts_scope_end();
}

/* The direct kernels share one image's groups among threads (batch 1, enough work): 1 and 2
 * threads give the same bits (each group's sums are the same either way), for group counts that
 * split evenly and not, depthwise and not, with a bias and an activation. */
static void test_direct_group_threads(void) {
    static const struct {
        int64_t c, o, groups, side;
    } cases[] = {{7, 7, 7, 100}, {16, 16, 2, 40}, {12, 24, 3, 48}};
    tsi_conv_force_provider("builtin");
    ts_scope_begin();
    ts_manual_seed(26);
    ts_no_grad_begin();
    const int threads = ts_get_num_threads();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ts_tensor *x =
            ts_randn(TS_SHAPE(1, cases[i].c, cases[i].side, cases[i].side), (ts_opts){0});
        ts_tensor *w =
            ts_randn(TS_SHAPE(cases[i].o, cases[i].c / cases[i].groups, 3, 3), (ts_opts){0});
        ts_tensor *b = ts_randn(TS_SHAPE(cases[i].o), (ts_opts){0});
        const ts_conv2d_opts o = {.padding = {1, 1}, .groups = cases[i].groups};
        ts_set_num_threads(1);
        ts_tensor *one = tsi_conv2d_act(x, w, b, o, TSI_CONV_ACT_HARDSWISH, 1.0 / 6.0, 0.5);
        ts_set_num_threads(2);
        ts_tensor *two = tsi_conv2d_act(x, w, b, o, TSI_CONV_ACT_HARDSWISH, 1.0 / 6.0, 0.5);
        CHECK(same_bits(one, two));
    }
    ts_set_num_threads(threads);
    ts_no_grad_end();
    tsi_conv_force_provider(NULL);
    CHECK_OK();
    ts_scope_end();
}

/* HardSigmoid and HardSwish after the built-in im2col + GEMM (float32 with the provider and the
 * direct kernels' variant forced, float64 always) against the activation computed in float64
 * from the same convolution without one (the same bits before the activation: the same kernels
 * add the bias row by row). The kernel rounds alpha and beta to the dtype and rounds alpha y, the
 * sum and (HardSwish) the product: |h - h64| <= 4 u (|alpha y| + |beta|), clamping widens nothing,
 * and y h adds |y| (that + u). A lower bound other than 0 (h = 1 where alpha y + beta < 1) misses
 * it by far. */
static void test_hard_acts(void) {
    static const struct {
        tsi_conv_act act;
        double alpha, beta;
    } acts[2] = {{TSI_CONV_ACT_HARDSIGMOID, 0.3, 0.4}, {TSI_CONV_ACT_HARDSWISH, 1.0 / 6.0, 0.5}};
    const conv_case *k = &CASES[3]; /* groups, stride 2, a bias */
    const ts_dtype dts[2] = {TS_F64, TS_F32};
    for (int t = 0; t < 2; t++) {
        tsi_conv_force_provider("builtin");
        CHECK(tsi_conv_direct_force_isa("none"));
        ts_scope_begin();
        ts_manual_seed(31);
        const ts_opts o = {.dtype = dts[t]};
        ts_tensor *x = ts_mul_scalar(ts_randn(TS_SHAPE(k->n, k->c, k->h, k->w), o), 4.0);
        ts_tensor *w = ts_randn(TS_SHAPE(k->o, k->c / k->groups, k->k, k->k), o);
        ts_tensor *b = ts_randn(TS_SHAPE(k->o), o);
        ts_no_grad_begin();
        ts_tensor *y = ts_conv2d(x, w, b, opts_of(k));
        const int64_t n = y ? ts_numel(y) : 0;
        double *yv = ts_test_host_f64(y, n), *want = malloc(sizeof(double) * (size_t)n + 1),
               *tol = malloc(sizeof(double) * (size_t)n + 1);
        const double u = ts_test_unit_roundoff(dts[t]);
        for (int a = 0; a < 2; a++) {
            const bool swish = acts[a].act == TSI_CONV_ACT_HARDSWISH;
            int64_t below = 0; /* outputs the lower bound clamps */
            for (int64_t i = 0; i < n; i++) {
                const double s = acts[a].alpha * yv[i] + acts[a].beta;
                const double h = fmin(fmax(s, 0.0), 1.0);
                const double th = 4 * u * (fabs(acts[a].alpha * yv[i]) + fabs(acts[a].beta));
                below += s < 0;
                want[i] = swish ? yv[i] * h : h;
                tol[i] = swish ? fabs(yv[i]) * (th + u) : th;
            }
            CHECK(below > 0); /* else the case does not test the clamp */
            ts_tensor *got =
                tsi_conv2d_act(x, w, b, opts_of(k), acts[a].act, acts[a].alpha, acts[a].beta);
            CHECK_OK();
            CHECK_TOL(ts_dtype_name(dts[t]), swish ? "hardswish" : "hardsigmoid", got, want, tol,
                      n);
        }
        free(yv), free(want), free(tol);
        ts_no_grad_end();
        ts_scope_end();
        tsi_conv_force_provider(NULL);
        CHECK(tsi_conv_direct_force_isa(NULL));
    }
}

int main(void) {
    ts_sim_configure(1, 0);
    test_fused_matches();
    test_fused_matches_cuda();
    test_special_values();
    test_autocast();
    test_autograd();
    test_trace();
    test_errors();
    test_hard_acts();
    if (tsi_dnnl_conv_count() == 0) {
        printf("SKIP the weight cache: no oneDNN convolutions in this build\n");
        return ts_test_finish();
    }
    for (int direct = 0; direct < 2; direct++) {
        wc_direct = direct;
        printf("the weight cache, %s\n",
               direct ? "the direct kernels' packed weights" : "oneDNN's reordered weights");
        tsi_conv_force_provider(direct ? "builtin" : "dnnl");
        test_cache_in_place();
        test_cache_reused_address();
        test_cache_dlpack();
        test_cache_offsets();
        test_cache_bound();
        test_cache_training();
        test_cache_fill_failures();
        test_cache_threads();
    }
    tsi_conv_force_provider(NULL);
    test_direct_group_threads();
    return ts_test_finish();
}
