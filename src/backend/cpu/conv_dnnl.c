/* conv_dnnl.c — float32 and bfloat16 convolutions through oneDNN's primitives (forward, backward
 * data, backward weights), with PyTorch's plain NCHW layouts on our side. bf16 (autocast's
 * convolutions) only where the CPU multiplies bf16 natively (tsi_dnnl_bf16_native: AVX512-BF16,
 * AMX): every operand bf16, float32 sums inside the primitive, one rounding of the result.
 *
 * oneDNN picks the kernel and the memory formats it wants (blocked, for its JIT kernels); we keep
 * NCHW / OIHW tensors, so each call reorders its inputs into the primitive's formats and the result
 * back, as PyTorch's CPU convolution does for NCHW tensors — except a weight the front end names as
 * constant (inference), whose reordered copy conv_dnnl_wcache.c keeps, and the forward's x and y
 * where the caller keeps them in the blocked layout itself (tsi_dnnl_conv_forward_blocked: the
 * ONNX path's blocked values, conv_dnnl_blocked.c), which the key records. The forward's activation
 * is a post-op of the primitive, after the float32 bias's (set_post_ops). Primitives (and their
 * reorders) are built once per shape and kept in a small cache; a primitive runs concurrently from
 * several threads, each call bringing its own scratchpad and temporary buffers (from
 * host_scratch.c's cache: fresh pages at every call cost ResNet-18 a fifth of its step in page
 * faults). Any failure (oneDNN absent, a shape it declines, no memory) returns false and the caller
 * runs the built-in kernels.
 */
#include "backend/cpu/conv_dnnl.h"
#include "backend/cpu/conv_select.h"
#include "backend/env_config.h"

#ifdef TS_HAVE_DNNL
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>
#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cpu/conv_dnnl_wcache.h"
#include "backend/cpu/dnnl_common.h"

/* ------------------------------------------------------------------ the cache */
typedef enum { K_FWD, K_BWD_DATA, K_BWD_WEIGHT } conv_kind;

typedef struct conv_key {
    int kind, has_bias;
    int64_t dt;      /* dnnl_f32 or dnnl_bf16: every operand's, ours and the primitive's */
    int64_t threads; /* tsi_dnnl_threads() (an int64: no padding inside the memcmp'd key) */
    int64_t n, c, h, w, o, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, g;
    int64_t act; /* the forward's post-op (ts_conv_act) and CLIP's bounds (+-inf: none) */
    double lo, hi;
    /* the forward's x and y on our side: 0 plain NCHW, else channel-blocked nChw<B>c with that
     * block (conv_dnnl_blocked.c) */
    int64_t x_blk, y_blk;
    /* channels_last: every activation (x, y, gy, gx) NHWC on our side and in the primitive, which
     * then runs oneDNN's NHWC kernels (no reorders) */
    int64_t nhwc;
} conv_key;

/* One argument of the primitive: the user's plain layout and the one the primitive wants; the
 * reorder between them (NULL when they are the same). */
typedef struct conv_arg {
    dnnl_memory_desc_t user, prim;
    dnnl_primitive_t reorder; /* user -> prim for inputs, prim -> user for the output */
    int dnnl_arg;
} conv_arg;

typedef struct conv_entry {
    conv_key key;
    bool used;
    uint64_t stamp;
    dnnl_primitive_t prim;
    conv_arg args[4]; /* in, in, (bias,) out: see build() */
    int nargs;
    size_t scratch;
} conv_entry;

#define CACHE_SIZE 64
static conv_entry cache[CACHE_SIZE];
static uint64_t clock_;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static void entry_free(conv_entry *e) {
    if (e->prim) dnnl_primitive_destroy(e->prim);
    for (int i = 0; i < e->nargs; i++)
        if (e->args[i].reorder) dnnl_primitive_destroy(e->args[i].reorder);
    memset(e, 0, sizeof *e);
}

/* ------------------------------------------------------------------ building a primitive */
/* oneDNN's tag for 4-D activations in block blk (0: plain NCHW) */
static dnnl_format_tag_t act_tag(int64_t blk) {
    return blk == 16 ? dnnl_nChw16c : blk == 8 ? dnnl_nChw8c : dnnl_nchw;
}

/* Fills one argument: user layout `user`, the primitive's from pd's query (q, idx). */
static bool arg_of(conv_arg *a, const dnnl_memory_desc_t *user, const_dnnl_primitive_desc_t pd,
                   dnnl_query_t q, int idx, int dnnl_arg, bool output) {
    a->user = *user;
    a->prim = *dnnl_primitive_desc_query_md(pd, q, idx);
    a->dnnl_arg = dnnl_arg;
    return output ? tsi_dnnl_make_reorder(&a->prim, &a->user, &a->reorder)
                  : tsi_dnnl_make_reorder(&a->user, &a->prim, &a->reorder);
}

/* The forward's activation as an eltwise post-op, applied by the kernel to each output block
 * while it is in registers. Both are oneDNN's clip (min(max(y, lo), hi)) with ReLU as clip(0,
 * +inf): its relu computes y * 0 for y < 0 in some kernels (the grouped ones), -0 where ts_relu
 * gives +0. The values are ts_relu's / ts_clamp's except that a NaN output becomes 0 (relu) or lo
 * (clip, or hi when lo is none), as in ONNX Runtime's fused convolutions, and clip gives +0 where
 * ts_clamp keeps a -0. */
static bool append_activation(dnnl_post_ops_t ops, const conv_key *k) {
    if (k->act == TS_CONV_ACT_HARDSWISH) /* oneDNN 2.x's has alpha 1/6 and beta 1/2 built in */
        return k->lo == 1.0 / 6.0 && k->hi == 0.5 &&
               dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_hardswish, 0, 0) ==
                   dnnl_success;
    if (k->act == TS_CONV_ACT_HARDSIGMOID) /* alpha * y + beta, then clipped to [0, 1] */
        return dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_linear, (float)k->lo,
                                            (float)k->hi) == dnnl_success &&
               dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_clip, 0.0f, 1.0f) ==
                   dnnl_success;
    const bool relu = k->act == TS_CONV_ACT_RELU;
    return dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_clip, relu ? 0.0f : (float)k->lo,
                                        relu ? INFINITY : (float)k->hi) == dnnl_success;
}

/* Whether the forward's bias is the first post-op (a per-channel binary add, src1 [1, O, 1, 1]),
 * not the primitive's bias: oneDNN's kernels start their accumulators at the bias, which rounds
 * every partial sum at the bias's scale (a bias 20x the products, starnet_s1's: 6x PyTorch's
 * error), where post-ops apply to the finished sum (dnnl.h: dst <- binary_op(dst, src1)), the
 * built-in kernels' and PyTorch's order; then the activation. Every float32 forward (plain,
 * blocked, NHWC) builds it so: one order for all layouts (decision 0047). bf16 keeps the bias in
 * the primitive (float32 sums rounded once to bf16: the bias's scale is below that rounding). */
static bool bias_post_op(const conv_key *k) {
    /* Not depthwise (one input and one output channel a group): oneDNN 2.6's depthwise kernel
     * (jit_dw) with a binary post-op took 1.3x its time on MobileNetV3-Small's layers
     * (bench_conv_blocked under TS_CONV=dnnl, 130 -> 168 us a pass), so it keeps the bias in the
     * primitive: K <= 49 products, each partial sum rounded at the bias's scale (decision 0047,
     * what is left). */
    const bool depthwise = k->c == k->g && k->o == k->g;
    return k->kind == K_FWD && k->has_bias && k->dt == dnnl_f32 && !depthwise;
}

/* the bias as the binary post-op's src1: [1, O, 1, 1], the user's [O] floats as they are */
static void bias_src1_md(dnnl_memory_desc_t *md, const conv_key *k) {
    const int64_t d[4] = {1, k->o, 1, 1};
    tsi_dnnl_plain_md(md, 4, d, dnnl_nchw, dnnl_f32);
}

static bool set_post_ops(dnnl_primitive_attr_t attr, const conv_key *k) {
    const bool bias = bias_post_op(k);
    if (k->act == TS_CONV_ACT_NONE && !bias) return true;
    dnnl_post_ops_t ops;
    if (dnnl_post_ops_create(&ops) != dnnl_success) return false;
    dnnl_memory_desc_t b1;
    if (bias) bias_src1_md(&b1, k);
    const bool ok =
        (!bias || dnnl_post_ops_append_binary(ops, dnnl_binary_add, &b1) == dnnl_success) &&
        (k->act == TS_CONV_ACT_NONE || append_activation(ops, k)) &&
        dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success;
    dnnl_post_ops_destroy(ops);
    return ok;
}

/* AVX-512: oneDNN 2.x's NHWC convolutions (brgconv forward, the blocked layout's JIT kernels for
 * the gradients) run at the blocked layout's speed (471.8 against 471.7 ms for the ResNet-18
 * CIFAR stages' forward and both gradients, bench_conv_formats). Below it there is no brgconv:
 * the AVX2 kernels read NHWC 20% slower than nChw8c (571.0 against 474.5 ms on two Zen 3 cores),
 * more than the reorders into and out of nChw8c cost (4.2 ms a call over the four stages), so an
 * NHWC convolution lets the primitive pick its layout and reorders around the call (a ResNet-18
 * step's convolutions and reorders on Zen 3: 1716 -> 1462 ms). TS_CONV_NHWC=keep keeps every
 * convolution NHWC (the AVX-512 exceptions below included), =blocked applies the rule below
 * AVX-512 on any host (benchmarks, tests). The choice is fixed per process (primitives are
 * cached). */
static bool nhwc_native, nhwc_keep, dnnl_avx512;
static pthread_once_t nhwc_once = PTHREAD_ONCE_INIT;
static void choose_nhwc(void) {
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    dnnl_avx512 = (isa & (unsigned)dnnl_cpu_isa_avx512_core) == (unsigned)dnnl_cpu_isa_avx512_core;
    nhwc_keep = tsi_env_is(TSI_ENV_CONV_NHWC, "keep");
    nhwc_native = nhwc_keep ? true : tsi_env_is(TSI_ENV_CONV_NHWC, "blocked") ? false : dnnl_avx512;
}

bool tsi_dnnl_conv_nhwc_native(void) {
    if (!tsi_dnnl_engine()) return false; /* made after the ISA cap is set (gemm_provider.c) */
    pthread_once(&nhwc_once, choose_nhwc);
    return nhwc_native;
}

/* Below AVX-512, a convolution keeps NHWC still where the reorders would cost more than the
 * blocked kernels save: under NHWC_BLOCKED_MIN_TAPS multiply-adds per output element (ResNet-20's
 * 16- and 32-channel 3x3 layers: its eval forward at batch 64 took 36.2 ms with every layer
 * NHWC, 38.6 with every layer blocked), or under NHWC_BLOCKED_MIN_MACS in all (ResNet-20 at batch
 * 1: 0.65 against 0.78 ms a forward). ResNet-18's 3x3 layers (64 channels and up, 37.7 M
 * multiply-adds an image) go blocked: its eval forward at batch 64 536 -> 458 ms. */
#define NHWC_BLOCKED_MIN_TAPS (tsi_conv_limits_get()->nhwc_blocked_min_taps)
#define NHWC_BLOCKED_MIN_MACS (tsi_conv_limits_get()->nhwc_blocked_min_macs)

/* With AVX-512 two float32 cases still go faster through the blocked layout, reorders included
 * (one thread, AMX host; bench_conv_formats, ONEDNN_VERBOSE of ResNet-18 CIFAR steps, and single
 * convolutions):
 * - the forward of a batch of images whose output is at most 4 pixels wide (dense, wider than
 *   1x1; the 1x1 and grouped kernels were not measured slower). oneDNN 2.6.3's NHWC forward
 *   (brgconv) takes a row of output pixels as the rows of its products and costs the same per
 *   image at any batch, where the blocked kernel shares the weights across images: 512 channels
 *   at 4x4, batch 64, 40.5 against 24.9 ms (batch 2 1.26 against 0.97; the strided 256 -> 512
 *   21.8 against 12.3; at 2x2, batch 16, 6.5 against 1.9), reorders 0.3 ms. At batch 1 brgconv is
 *   10% faster (0.66 against 0.74 ms), and at 5-7 pixels wide the two are level within 15% either
 *   way, so those keep NHWC;
 * - the input gradient of AVX512_BLOCKED_MIN_TAPS multiply-adds per input element and up: the
 *   blocked JIT kernel is 6-16% faster than the same kernel on NHWC (256 channels at 8x8: 25.9
 *   against 23.3 ms, 512 at 4x4: 23.5 against 20.3), more than its two reorders cost there (0.6 and
 *   0.3 ms); with 64 channels at 32x32 the reorders (2.5 ms) eat the gain (2.7).
 * bf16 (brgconv on AMX or AVX512-BF16) runs NHWC at the blocked layout's speed, 4x4 included. */
#define AVX512_BLOCKED_MIN_TAPS (tsi_conv_limits_get()->avx512_blocked_data_min_taps)

static bool avx512_blocked_faster(const conv_key *k) {
    if (k->dt != dnnl_f32) return false;
    if (k->kind == K_FWD)
        return k->ow <= tsi_conv_limits_get()->avx512_blocked_fwd_max_ow && k->n >= 2 &&
               k->g == 1 && k->kh * k->kw > 1;
    const double taps = (double)(k->o / k->g) * (double)k->kh * (double)k->kw; /* per gx element */
    return k->kind == K_BWD_DATA && taps >= AVX512_BLOCKED_MIN_TAPS;
}

static bool keeps_nhwc(const conv_key *k) {
    const bool native = tsi_dnnl_conv_nhwc_native(); /* sets dnnl_avx512 */
    /* oneDNN 2.6.3's AVX2 1x1 kernel (jit_1x1:avx2) gets the weight gradient of a strided 1x1
     * convolution over NHWC wrong when a group has fewer than 8 input channels (garbage that
     * changes from run to run: ResNet-20's first downsample at width 4); the blocked layout's
     * is right. Below AVX-512 whatever TS_CONV_NHWC says. */
    if (!dnnl_avx512 && k->kind == K_BWD_WEIGHT && k->kh == 1 && k->kw == 1 &&
        (k->sh > 1 || k->sw > 1) && k->c / k->g < 8)
        return false;
    if (native) return nhwc_keep || !avx512_blocked_faster(k);
    const double taps = (double)(k->c / k->g) * (double)k->kh * (double)k->kw;
    const double macs = (double)k->n * (double)k->o * (double)k->oh * (double)k->ow * taps;
    return taps < NHWC_BLOCKED_MIN_TAPS || macs < NHWC_BLOCKED_MIN_MACS;
}

static bool build(conv_entry *e) {
    const dnnl_engine_t engine = tsi_dnnl_engine();
    const conv_key *k = &e->key;
    const int64_t src_d[4] = {k->n, k->c, k->h, k->w}, dst_d[4] = {k->n, k->o, k->oh, k->ow};
    const int64_t wg_d[5] = {k->g, k->o / k->g, k->c / k->g, k->kh, k->kw};
    const int64_t w_d[4] = {k->o, k->c, k->kh, k->kw}, b_d[1] = {k->o};
    /* oneDNN reads these as dnnl_dims_t (12 entries); dilation counts the gaps (PyTorch's - 1);
     * the right padding is what makes the output size PyTorch's floor rule gave */
    dnnl_dims_t strides = {k->sh, k->sw}, dil = {k->dh - 1, k->dw - 1}, pl = {k->ph, k->pw};
    dnnl_dims_t pr = {(k->oh - 1) * k->sh - k->h + (k->kh - 1) * k->dh + 1 - k->ph,
                      (k->ow - 1) * k->sw - k->w + (k->kw - 1) * k->dw + 1 - k->pw};
    dnnl_memory_desc_t src_u, dst_u, w_u, b_u, src_a, dst_a, w_a, b_a;
    const int64_t dt = k->dt;
    tsi_dnnl_plain_md(&src_u, 4, src_d, k->nhwc ? dnnl_nhwc : act_tag(k->x_blk),
                      (dnnl_data_type_t)dt);
    tsi_dnnl_plain_md(&dst_u, 4, dst_d, k->nhwc ? dnnl_nhwc : act_tag(k->y_blk),
                      (dnnl_data_type_t)dt);
    if (k->g > 1)
        tsi_dnnl_plain_md(&w_u, 5, wg_d, dnnl_goihw, (dnnl_data_type_t)dt);
    else
        tsi_dnnl_plain_md(&w_u, 4, w_d, dnnl_oihw, (dnnl_data_type_t)dt);
    tsi_dnnl_plain_md(&b_u, 1, b_d, dnnl_x, (dnnl_data_type_t)dt);
    /* NHWC named, not left to oneDNN, which would pick its blocked layout and reorder — where
     * its NHWC kernels run at the blocked ones' speed (tsi_dnnl_conv_nhwc_native) */
    const dnnl_format_tag_t act_any = k->nhwc && keeps_nhwc(k) ? dnnl_nhwc : dnnl_format_tag_any;
    tsi_dnnl_plain_md(&src_a, 4, src_d, act_any, (dnnl_data_type_t)dt);
    tsi_dnnl_plain_md(&dst_a, 4, dst_d, act_any, (dnnl_data_type_t)dt);
    if (k->g > 1)
        tsi_dnnl_plain_md(&w_a, 5, wg_d, dnnl_format_tag_any, (dnnl_data_type_t)dt);
    else
        tsi_dnnl_plain_md(&w_a, 4, w_d, dnnl_format_tag_any, (dnnl_data_type_t)dt);
    tsi_dnnl_plain_md(&b_a, 1, b_d, dnnl_format_tag_any, (dnnl_data_type_t)dt);

    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t fwd_pd = NULL, pd = NULL;
    bool ok =
        dnnl_primitive_attr_create(&attr) == dnnl_success &&
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
        (k->kind != K_FWD || set_post_ops(attr, k));
    const bool bias_post = bias_post_op(k);
    dnnl_convolution_desc_t fd;
    ok = ok &&
         dnnl_dilated_convolution_forward_desc_init(
             &fd, dnnl_forward_training, dnnl_convolution_direct, &src_a, &w_a,
             k->has_bias && !bias_post ? &b_a : NULL, &dst_a, strides, dil, pl, pr) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&fwd_pd, &fd, attr, engine, NULL) == dnnl_success;
    if (ok && k->kind == K_FWD) {
        pd = fwd_pd, fwd_pd = NULL;
        e->nargs = k->has_bias ? 4 : 3;
        ok = arg_of(&e->args[0], &src_u, pd, dnnl_query_src_md, 0, DNNL_ARG_SRC, false) &&
             arg_of(&e->args[1], &w_u, pd, dnnl_query_weights_md, 0, DNNL_ARG_WEIGHTS, false) &&
             (!k->has_bias || bias_post ||
              /* the bias is the weights query's second descriptor */
              arg_of(&e->args[2], &b_u, pd, dnnl_query_weights_md, 1, DNNL_ARG_BIAS, false)) &&
             arg_of(&e->args[e->nargs - 1], &dst_u, pd, dnnl_query_dst_md, 0, DNNL_ARG_DST, true);
        if (ok && bias_post) { /* post-op 0's src1, read where it is (set_post_ops) */
            conv_arg *a = &e->args[2];
            bias_src1_md(&a->user, k);
            a->prim = a->user, a->reorder = NULL;
            a->dnnl_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1;
        }
    } else if (ok && k->kind == K_BWD_DATA) {
        dnnl_convolution_desc_t bd;
        ok = dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &src_a,
                                                              &w_a, &dst_a, strides, dil, pl,
                                                              pr) == dnnl_success &&
             dnnl_primitive_desc_create(&pd, &bd, attr, engine, fwd_pd) == dnnl_success;
        e->nargs = 3;
        ok = ok &&
             arg_of(&e->args[0], &dst_u, pd, dnnl_query_diff_dst_md, 0, DNNL_ARG_DIFF_DST, false) &&
             arg_of(&e->args[1], &w_u, pd, dnnl_query_weights_md, 0, DNNL_ARG_WEIGHTS, false) &&
             arg_of(&e->args[2], &src_u, pd, dnnl_query_diff_src_md, 0, DNNL_ARG_DIFF_SRC, true);
    } else if (ok) {
        dnnl_convolution_desc_t wd;
        ok = dnnl_dilated_convolution_backward_weights_desc_init(
                 &wd, dnnl_convolution_direct, &src_a, &w_a, NULL, &dst_a, strides, dil, pl, pr) ==
                 dnnl_success &&
             dnnl_primitive_desc_create(&pd, &wd, attr, engine, fwd_pd) == dnnl_success;
        e->nargs = 3;
        ok = ok &&
             arg_of(&e->args[0], &dst_u, pd, dnnl_query_diff_dst_md, 0, DNNL_ARG_DIFF_DST, false) &&
             arg_of(&e->args[1], &src_u, pd, dnnl_query_src_md, 0, DNNL_ARG_SRC, false) &&
             arg_of(&e->args[2], &w_u, pd, dnnl_query_diff_weights_md, 0, DNNL_ARG_DIFF_WEIGHTS,
                    true);
    }
    if (ok) {
        e->scratch = dnnl_memory_desc_get_size(
            dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
        ok = dnnl_primitive_create(&e->prim, pd) == dnnl_success;
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (fwd_pd) dnnl_primitive_desc_destroy(fwd_pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return ok;
}

/* Entries pushed out of the cache are kept, not destroyed: a call on another thread may still be
 * running their primitives (it copied the handles out under the lock). Only a program with more
 * than CACHE_SIZE convolution shapes retires any. */
static conv_entry *retired;
static size_t n_retired, cap_retired;

static void retire(conv_entry *e) {
    if (n_retired == cap_retired) {
        size_t c = cap_retired ? 2 * cap_retired : 16;
        conv_entry *r = realloc(retired, c * sizeof *r);
        if (r) retired = r, cap_retired = c;
    }
    if (n_retired < cap_retired) retired[n_retired++] = *e; /* else: leaked, never freed early */
    memset(e, 0, sizeof *e);
}

static uint64_t builds; /* under cache_lock */
uint64_t tsi_dnnl_conv_builds(void) {
    pthread_mutex_lock(&cache_lock);
    const uint64_t n = builds;
    pthread_mutex_unlock(&cache_lock);
    return n;
}

/* The entry for key, built on a miss, copied out under the lock. */
static bool lookup(const conv_key *key, conv_entry *out) {
    pthread_mutex_lock(&cache_lock);
    conv_entry *hit = NULL, *victim = &cache[0];
    for (int i = 0; i < CACHE_SIZE && !hit; i++) {
        if (cache[i].used && !memcmp(&cache[i].key, key, sizeof *key)) hit = &cache[i];
        if (!cache[i].used || (victim->used && cache[i].stamp < victim->stamp)) victim = &cache[i];
    }
    if (!hit) {
        if (victim->used) retire(victim);
        victim->key = *key;
        if (build(victim)) {
            builds++;
            victim->used = true;
            hit = victim;
        } else {
            entry_free(victim);
        }
    }
    if (hit) {
        hit->stamp = ++clock_;
        *out = *hit;
    }
    pthread_mutex_unlock(&cache_lock);
    return hit != NULL;
}

static atomic_uint_fast64_t runs, bf16_runs, act_reorders;
uint64_t tsi_dnnl_conv_count(void) { return atomic_load(&runs); }
uint64_t tsi_dnnl_conv_act_reorders(void) { return atomic_load(&act_reorders); }
uint64_t tsi_dnnl_conv_bf16_count(void) { return atomic_load(&bf16_runs); }

/* ------------------------------------------------------------------ running one */
/* What one call holds: per argument the user's memory and the primitive's (NULL when no reorder),
 * the buffers behind the latter (scratch or a cached weight), the scratchpad. */
typedef struct run_state {
    dnnl_stream_t st;
    dnnl_memory_t user[4], prim[4], sm;
    ts_block *bufs[4], *scratch;
    tsi_wcache_entry *wref;
} run_state;

typedef struct fill_ctx {
    const conv_arg *a;
    dnnl_memory_t user;
    dnnl_stream_t st;
} fill_ctx;

/* tsi_wcache_fill_fn: the weight reordered into a buffer the cache keeps */
static bool fill_weight(void *ctx, void *buf) {
    const fill_ctx *c = ctx;
    dnnl_memory_t m;
    if (dnnl_memory_create(&m, &c->a->prim, tsi_dnnl_engine(), buf) != dnnl_success) return false;
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, c->user}, {DNNL_ARG_TO, m}};
    const bool ok = dnnl_primitive_execute(c->a->reorder, c->st, 2, ra) == dnnl_success &&
                    dnnl_stream_wait(c->st) == dnnl_success;
    dnnl_memory_destroy(m);
    return ok;
}

/* Argument i in the primitive's layout: an input reordered into scratch (or, for a weight with an
 * identity, the cached reorder), or scratch for an output that is reordered back after the run. */
static bool arg_prepare(run_state *r, const conv_arg *a, int i, bool input,
                        const tsi_conv_weight_id *wid) {
    const dnnl_engine_t engine = tsi_dnnl_engine();
    const size_t bytes = dnnl_memory_desc_get_size(&a->prim);
    if (input && a->dnnl_arg == DNNL_ARG_WEIGHTS && wid) {
        fill_ctx fc = {a, r->user[i], r->st};
        const void *w =
            tsi_wcache_get(wid, &a->prim, sizeof a->prim, bytes, fill_weight, &fc, &r->wref);
        if (w) return dnnl_memory_create(&r->prim[i], &a->prim, engine, (void *)w) == dnnl_success;
    }
    void *buf = tsi_host_scratch_get(bytes, &r->bufs[i]);
    if (!buf || dnnl_memory_create(&r->prim[i], &a->prim, engine, buf) != dnnl_success)
        return false;
    if (!input) return true;
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, r->user[i]}, {DNNL_ARG_TO, r->prim[i]}};
    return dnnl_primitive_execute(a->reorder, r->st, 2, ra) == dnnl_success;
}

static void run_free(run_state *r) {
    if (r->sm) dnnl_memory_destroy(r->sm);
    tsi_host_scratch_put(r->scratch);
    for (int i = 0; i < 4; i++) {
        if (r->user[i]) dnnl_memory_destroy(r->user[i]);
        if (r->prim[i]) dnnl_memory_destroy(r->prim[i]);
        tsi_host_scratch_put(r->bufs[i]);
    }
    tsi_wcache_release(r->wref);
    if (r->st) dnnl_stream_destroy(r->st);
}

/* user_ptrs in the entry's argument order; the last argument is the output. wid: the forward's
 * weight identity (NULL: none). */
static bool run(const conv_key *key, void *const *user_ptrs, const tsi_conv_weight_id *wid) {
    const dnnl_engine_t engine = tsi_dnnl_engine();
    if (!engine) return false;
    conv_entry e;
    if (!lookup(key, &e)) return false;
    run_state r = {0}; /* streams are not thread-safe: one per call (cheap on the CPU) */
    dnnl_exec_arg_t args[5];
    bool ok = dnnl_stream_create(&r.st, engine, dnnl_stream_default_flags) == dnnl_success;
    for (int i = 0; ok && i < e.nargs; i++) {
        const conv_arg *a = &e.args[i];
        ok = dnnl_memory_create(&r.user[i], &a->user, engine, user_ptrs[i]) == dnnl_success &&
             (!a->reorder || arg_prepare(&r, a, i, i < e.nargs - 1, wid));
        if (a->reorder && (a->dnnl_arg == DNNL_ARG_SRC || a->dnnl_arg == DNNL_ARG_DST ||
                           a->dnnl_arg == DNNL_ARG_DIFF_SRC || a->dnnl_arg == DNNL_ARG_DIFF_DST))
            atomic_fetch_add(&act_reorders, 1);
        args[i] = (dnnl_exec_arg_t){a->dnnl_arg, a->reorder ? r.prim[i] : r.user[i]};
    }
    int n = e.nargs;
    if (ok && e.scratch) {
        ok = tsi_dnnl_scratchpad(e.scratch, &r.sm, &r.scratch);
        if (ok) args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, r.sm};
    }
    ok = ok && dnnl_primitive_execute(e.prim, r.st, n, args) == dnnl_success;
    const int last = e.nargs - 1;
    if (ok && e.args[last].reorder) { /* the result back into the user's layout */
        dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, r.prim[last]}, {DNNL_ARG_TO, r.user[last]}};
        ok = dnnl_primitive_execute(e.args[last].reorder, r.st, 2, ra) == dnnl_success;
    }
    ok = ok && dnnl_stream_wait(r.st) == dnnl_success; /* before the weight's entry is released */
    run_free(&r);
    if (ok) atomic_fetch_add(key->dt == dnnl_bf16 ? &bf16_runs : &runs, 1);
    return ok;
}

static conv_key key_of(conv_kind kind, const ts_cgeom *g, bool has_bias, bool bf16) {
    return (conv_key){.kind = kind,
                      .has_bias = has_bias,
                      .dt = bf16 ? dnnl_bf16 : dnnl_f32,
                      .threads = tsi_dnnl_threads(),
                      .n = g->n,
                      .c = g->c,
                      .h = g->h,
                      .w = g->w,
                      .o = g->o,
                      .oh = g->oh,
                      .ow = g->ow,
                      .kh = g->kh,
                      .kw = g->kw,
                      .sh = g->sh,
                      .sw = g->sw,
                      .ph = g->ph,
                      .pw = g->pw,
                      .dh = g->dh,
                      .dw = g->dw,
                      .g = g->g,
                      .act = kind == K_FWD ? g->act : TS_CONV_ACT_NONE,
                      .lo = kind == K_FWD && g->act > TS_CONV_ACT_RELU ? g->lo : 0,
                      .hi = kind == K_FWD && g->act > TS_CONV_ACT_RELU ? g->hi : 0};
}

/* A forward of less work than this runs on one thread: MobileNetV3's squeeze-excitation
 * convolutions (1x1 images) and the like take microseconds, less than the threads of a parallel
 * region take to start and meet again. */
#define ONE_THREAD_FLOPS (tsi_conv_limits_get()->dnnl_one_thread_flops)

static bool forward(bool bf16, const ts_cgeom *g, const void *x, const void *w,
                    const tsi_conv_weight_id *wid, const void *b, void *y, int x_blk, int y_blk,
                    bool nhwc) {
    const double flops = 2.0 * (double)g->n * (double)g->o * (double)(g->c / g->g) *
                         (double)(g->kh * g->kw) * (double)(g->oh * g->ow);
    const int threads = tsi_dnnl_threads();
    const bool one = threads > 1 && flops < ONE_THREAD_FLOPS;
#ifdef TS_HAVE_OPENMP
    if (one) omp_set_num_threads(1); /* this thread's setting: the key and the run see it */
#endif
    /* One output pixel (N = OH = OW = 1: a squeeze-excitation's FCs): the bias [1, O, 1, 1] has
     * the output's shape, which oneDNN takes for no broadcast, read only in the output's own
     * layout: its 1x1 kernel declines and a GEMM on plain layouts runs, with two reorders. There
     * the primitive runs bare and the bias, then the activation as the composed ops round it
     * (tsi_conv_act_f32, as conv_fc_blocked.c), follow here on the O outputs, which lie at
     * index o in NCHW, NHWC and the blocked layout alike. */
    const bool bias_here = !bf16 && b && g->n * g->oh * g->ow == 1;
    ts_cgeom g0 = *g;
    if (bias_here) g0.act = TS_CONV_ACT_NONE;
    conv_key k = key_of(K_FWD, &g0, b != NULL && !bias_here, bf16);
    k.x_blk = x_blk, k.y_blk = y_blk, k.nhwc = nhwc;
    void *ptrs[4] = {(void *)x, (void *)w, b && !bias_here ? (void *)b : y, y};
    const bool ok = run(&k, ptrs, wid && wid->uid ? wid : NULL);
    if (ok && bias_here) {
        float *yf = y;
        for (int64_t o = 0; o < g->o; o++) yf[o] += ((const float *)b)[o];
        tsi_conv_act_f32(g, yf, g->o);
    }
#ifdef TS_HAVE_OPENMP
    if (one) omp_set_num_threads(threads);
#endif
    return ok;
}

static bool backward_data(bool bf16, const ts_cgeom *g, const void *gy, const void *w, void *gx,
                          bool nhwc) {
    conv_key k = key_of(K_BWD_DATA, g, false, bf16);
    k.nhwc = nhwc;
    void *ptrs[3] = {(void *)gy, (void *)w, gx};
    return run(&k, ptrs, NULL);
}

static bool backward_weight(bool bf16, const ts_cgeom *g, const void *gy, const void *x, void *gw,
                            bool nhwc) {
    conv_key k = key_of(K_BWD_WEIGHT, g, false, bf16);
    k.nhwc = nhwc;
    void *ptrs[3] = {(void *)gy, (void *)x, gw};
    return run(&k, ptrs, NULL);
}

bool tsi_dnnl_conv_forward(const ts_cgeom *g, const float *x, const float *w,
                           const tsi_conv_weight_id *wid, const float *b, float *y) {
    return forward(false, g, x, w, wid, b, y, 0, 0, false);
}
bool tsi_dnnl_conv_forward_blocked(const ts_cgeom *g, const float *x, int x_blk, const float *w,
                                   const tsi_conv_weight_id *wid, const float *b, float *y,
                                   int y_blk) {
    if ((x_blk && x_blk != 8 && x_blk != 16) || (y_blk && y_blk != 8 && y_blk != 16)) return false;
    return forward(false, g, x, w, wid, b, y, x_blk, y_blk, false);
}
bool tsi_dnnl_conv_backward_data(const ts_cgeom *g, const float *gy, const float *w, float *gx) {
    return backward_data(false, g, gy, w, gx, false);
}
bool tsi_dnnl_conv_backward_weight(const ts_cgeom *g, const float *gy, const float *x, float *gw) {
    return backward_weight(false, g, gy, x, gw, false);
}

bool tsi_dnnl_conv_forward_bf16(const ts_cgeom *g, const uint16_t *x, const uint16_t *w,
                                const tsi_conv_weight_id *wid, const uint16_t *b, uint16_t *y) {
    return forward(true, g, x, w, wid, b, y, 0, 0, false);
}
bool tsi_dnnl_conv_backward_data_bf16(const ts_cgeom *g, const uint16_t *gy, const uint16_t *w,
                                      uint16_t *gx) {
    return backward_data(true, g, gy, w, gx, false);
}
bool tsi_dnnl_conv_backward_weight_bf16(const ts_cgeom *g, const uint16_t *gy, const uint16_t *x,
                                        uint16_t *gw) {
    return backward_weight(true, g, gy, x, gw, false);
}

bool tsi_dnnl_conv_forward_nhwc(bool bf16, const ts_cgeom *g, const void *x, const void *w,
                                const tsi_conv_weight_id *wid, const void *b, void *y) {
    return forward(bf16, g, x, w, wid, b, y, 0, 0, true);
}
bool tsi_dnnl_conv_backward_data_nhwc(bool bf16, const ts_cgeom *g, const void *gy, const void *w,
                                      void *gx) {
    return backward_data(bf16, g, gy, w, gx, true);
}
bool tsi_dnnl_conv_backward_weight_nhwc(bool bf16, const ts_cgeom *g, const void *gy, const void *x,
                                        void *gw) {
    return backward_weight(bf16, g, gy, x, gw, true);
}

#else /* no oneDNN */
bool tsi_dnnl_conv_forward_nhwc(bool bf16, const ts_cgeom *g, const void *x, const void *w,
                                const tsi_conv_weight_id *wid, const void *b, void *y) {
    (void)bf16, (void)g, (void)x, (void)w, (void)wid, (void)b, (void)y;
    return false;
}
bool tsi_dnnl_conv_backward_data_nhwc(bool bf16, const ts_cgeom *g, const void *gy, const void *w,
                                      void *gx) {
    (void)bf16, (void)g, (void)gy, (void)w, (void)gx;
    return false;
}
bool tsi_dnnl_conv_backward_weight_nhwc(bool bf16, const ts_cgeom *g, const void *gy, const void *x,
                                        void *gw) {
    (void)bf16, (void)g, (void)gy, (void)x, (void)gw;
    return false;
}
uint64_t tsi_dnnl_conv_count(void) { return 0; }
uint64_t tsi_dnnl_conv_bf16_count(void) { return 0; }
uint64_t tsi_dnnl_conv_act_reorders(void) { return 0; }
bool tsi_dnnl_conv_nhwc_native(void) { return false; }
bool tsi_dnnl_conv_forward_blocked(const ts_cgeom *g, const float *x, int x_blk, const float *w,
                                   const tsi_conv_weight_id *wid, const float *b, float *y,
                                   int y_blk) {
    (void)g, (void)x, (void)x_blk, (void)w, (void)wid, (void)b, (void)y, (void)y_blk;
    return false;
}
bool tsi_dnnl_conv_forward_bf16(const ts_cgeom *g, const uint16_t *x, const uint16_t *w,
                                const tsi_conv_weight_id *wid, const uint16_t *b, uint16_t *y) {
    (void)g, (void)x, (void)w, (void)wid, (void)b, (void)y;
    return false;
}
bool tsi_dnnl_conv_backward_data_bf16(const ts_cgeom *g, const uint16_t *gy, const uint16_t *w,
                                      uint16_t *gx) {
    (void)g, (void)gy, (void)w, (void)gx;
    return false;
}
bool tsi_dnnl_conv_backward_weight_bf16(const ts_cgeom *g, const uint16_t *gy, const uint16_t *x,
                                        uint16_t *gw) {
    (void)g, (void)gy, (void)x, (void)gw;
    return false;
}
bool tsi_dnnl_conv_forward(const ts_cgeom *g, const float *x, const float *w,
                           const tsi_conv_weight_id *wid, const float *b, float *y) {
    (void)g, (void)x, (void)w, (void)wid, (void)b, (void)y;
    return false;
}
bool tsi_dnnl_conv_backward_data(const ts_cgeom *g, const float *gy, const float *w, float *gx) {
    (void)g, (void)gy, (void)w, (void)gx;
    return false;
}
bool tsi_dnnl_conv_backward_weight(const ts_cgeom *g, const float *gy, const float *x, float *gw) {
    (void)g, (void)gy, (void)x, (void)gw;
    return false;
}
#endif
