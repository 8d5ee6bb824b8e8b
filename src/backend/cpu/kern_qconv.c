/* kern_qconv.c — the quantized 2-D convolution (backend.h's qconv, quant_args.h's ts_qconv_args).
 *
 * Depthwise (one input and one output channel a group): a direct loop per output, the window's
 * in-bounds taps summed as (x - x_zp)(w - w_zp) in int32 (a padded tap is zero). Otherwise, per
 * image and group: im2col into bytes [OH * OW, Cg * KH * KW] with padded taps set to x_zp, then the
 * int8 GEMM of the linear layer (tsi_cpu_qlinear: exact int32 sums, zero points in int64, the
 * requantizing epilogue) into [OH * OW, Cout_g], transposed into the NCHW output. With AVX512-VNNI
 * both run in qconv_vnni.c instead (straight in NCHW), or, where route_dnnl's measured table says
 * so, in oneDNN's int8 primitive (qconv_dnnl.c). fmult: ONNX Runtime's float32 requantization of
 * the int32-wrapped sums, or with acc_fbias PyTorch's x86 one (quant_args.h). Channels_last
 * activations (x_nhwc / out_nhwc, decision 0053): oneDNN's route reads and writes them as they lie;
 * every other route runs on NCHW copies (staged below), the same integers. */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/host_scratch.h"
#include "backend/cpu/qconv_dnnl.h"
#include "backend/cpu/qconv_vnni.h"
#include "backend/env_config.h"
#include "backend/omp_if.h"
#include "backend/quant_math.h"

static inline int32_t xval(const ts_qconv_args *a, int64_t i) {
    return a->x_unsigned ? ((const uint8_t *)a->x)[i] : ((const int8_t *)a->x)[i];
}

static inline void store(const ts_qconv_args *a, int64_t o, int64_t acc, int64_t co) {
    double v;
    if (a->fmult) { /* ONNX Runtime's or (a float bias) PyTorch's x86 float32 requantization */
        v = (double)a->out_zp +
            (double)ts_qm_requant_f32(
                (int32_t)(uint32_t)(uint64_t)acc, a->acc_fbias ? a->acc_fbias[co] : 0.0f,
                a->fmult[co], (float)(a->out_min - a->out_zp), (float)(a->out_max - a->out_zp));
    } else {
        v = (double)a->out_zp + nearbyint((double)acc * a->mult[co]);
        v = v < a->out_min ? a->out_min : v > a->out_max ? a->out_max : v;
    }
    if (a->out_unsigned)
        ((uint8_t *)a->out)[o] = (uint8_t)v;
    else
        ((int8_t *)a->out)[o] = (int8_t)v;
}

static void depthwise(const ts_qconv_args *a) {
    const int64_t planes = a->n * a->c, H = a->h, W = a->w, KH = a->kh, KW = a->kw;
    TS_PARALLEL_FOR_IF(
        planes > 1 && planes * a->oh * a->ow * KH * KW >= ((int64_t)1 << 16),
        for (int64_t p = 0; p < planes; p++) {
            const int64_t c = p % a->c;
            const int8_t *w = a->wt + c * KH * KW;
            const int32_t wz = a->w_zp[c];
            for (int64_t oy = 0; oy < a->oh; oy++)
                for (int64_t ox = 0; ox < a->ow; ox++) {
                    int64_t acc = 0;
                    for (int64_t i = 0; i < KH; i++) {
                        const int64_t y = oy * a->stride[0] - a->pad[0] + i * a->dil[0];
                        if (y < 0 || y >= H) continue;
                        for (int64_t j = 0; j < KW; j++) {
                            const int64_t x = ox * a->stride[1] - a->pad[1] + j * a->dil[1];
                            if (x < 0 || x >= W) continue;
                            acc += (int64_t)(xval(a, (p * H + y) * W + x) - a->x_zp) *
                                   ((int32_t)w[i * KW + j] - wz);
                        }
                    }
                    store(a, (p * a->oh + oy) * a->ow + ox, acc + (a->bias ? a->bias[c] : 0), c);
                }
        });
}

/* The route of each shape: oneDNN's int8 primitive (qconv_dnnl.c: where it fits, the own
 * kernels' integers bit for bit) or the own kernels (qconv_vnni.c). TS_QCONV=dnnl|own forces one.
 * Measured per shape by bench/bench_qconv_route.c (every convolution of ResNet-18, ResNet-50 and
 * MobileNetV2 at 224, batch 1 and 32, one thread, process CPU time; bench/results/
 * quantization-speed.md "Route per shape"): oneDNN is faster on 48 of the 58 shapes at batch 1
 * and 41 at batch 32 (up to 3-4x on strided and 7x7 depthwise, 1.3-1.6x on 7x7 and 14x14 layers),
 * level (0.9-1.1x) on the 3x3 layers at 56x56, the stems and the stride-1 depthwise layers at 56x56
 * and 112x112. The own kernels win the 1x1 stride-1 reductions at 14x14 and larger (C >= 2 CO:
 * oneDNN's route first copies the C input planes to NHWC and writes 4-byte sums, the own kernel
 * reads the planes as they are): 144 -> 24 at 56x56 1.4-1.7x, 512 -> 128 at 28x28 1.0-1.5x,
 * 384 -> 64 at 14x14 1.1x; at 7x7 oneDNN wins them again (960 -> 160: 1.4x). The table is for
 * NCHW inputs only: a channels_last input always takes oneDNN (read in place, no copies), measured
 * again per shape with the bands of decision 0055 (`bench_qconv_route B R cl` against the own
 * kernels on NCHW `bench_qconv_route B R`): oneDNN faster on all 58 shapes, 1.3-20x at batch 1 and
 * 1.0-15x at batch 32; the rows above still hold for NCHW inputs (the same runs). */
static const struct {
    int64_t own_1x1_min_positions; /* 1x1 stride 1 with C >= ratio * CO from this OH * OW */
    int64_t own_1x1_min_ratio, own_1x1_min_c;
} qroute = {.own_1x1_min_positions = 196, .own_1x1_min_ratio = 2, .own_1x1_min_c = 64};

static bool route_dnnl(const ts_qconv_args *a) {
    if (tsi_env_is(TSI_ENV_QCONV, "own") || !tsi_qconv_dnnl_fits(a)) return false;
    /* a channels_last input: no copy on oneDNN's side, transposes on the own kernels' */
    if (tsi_env_is(TSI_ENV_QCONV, "dnnl") || a->x_nhwc) return true;
    const bool reduce_1x1 = a->kh == 1 && a->kw == 1 && a->stride[0] == 1 && a->stride[1] == 1 &&
                            a->groups == 1 && a->c >= qroute.own_1x1_min_c &&
                            a->c >= qroute.own_1x1_min_ratio * a->cout &&
                            a->oh * a->ow >= qroute.own_1x1_min_positions;
    return !reduce_1x1;
}

bool tsi_cpu_qconv_channels_last(const ts_backend *be, int index) {
    (void)be, (void)index;
    /* TS_QCONV=nchw: the route table as usual, NCHW activations (the layout before 0053) */
    return !tsi_env_is(TSI_ENV_QCONV, "own") && !tsi_env_is(TSI_ENV_QCONV, "nchw") &&
           tsi_qconv_dnnl_available();
}

/* [n][r][s] bytes into [n][s][r] */
static void transpose_images(const uint8_t *src, int64_t n, int64_t r, int64_t s, uint8_t *dst) {
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *x = src + i * r * s;
        uint8_t *y = dst + i * r * s;
        for (int64_t a = 0; a < r; a++)
            for (int64_t b = 0; b < s; b++) y[b * r + a] = x[a * s + b];
    }
}

/* a channels_last convolution on the NCHW kernels: the input transposed into NCHW scratch (when
 * x_nhwc), the output written into NCHW scratch and transposed (when out_nhwc) */
static bool own_kernels(const ts_backend *be, int index, const ts_qconv_args *a);

static bool staged(const ts_backend *be, int index, const ts_qconv_args *a) {
    const size_t xb = a->x_nhwc ? (size_t)(a->n * a->c * a->h * a->w) : 0,
                 ob = a->out_nhwc ? (size_t)(a->n * a->cout * a->oh * a->ow) : 0;
    ts_block *blk = NULL;
    uint8_t *buf = tsi_host_scratch_get(xb + ob + 64, &blk);
    if (!buf) {
        tsi_kernel_oom("quantized_conv2d", xb + ob + 64);
        return false;
    }
    ts_qconv_args b = *a;
    b.x_nhwc = b.out_nhwc = false;
    if (a->x_nhwc) {
        transpose_images(a->x, a->n, a->h * a->w, a->c, buf);
        b.x = buf;
    }
    if (a->out_nhwc) b.out = buf + xb;
    const bool ok = own_kernels(be, index, &b);
    if (ok && a->out_nhwc) transpose_images(buf + xb, a->n, a->cout, a->oh * a->ow, a->out);
    tsi_host_scratch_put(blk);
    return ok;
}

bool tsi_cpu_qconv(const ts_backend *be, int index, const ts_qconv_args *a) {
    if (route_dnnl(a)) {
        const tsi_qdnnl_status st = tsi_qconv_dnnl(a);
        if (st != TSI_QDNNL_DECLINED) return st == TSI_QDNNL_DONE;
    }
    return a->x_nhwc || a->out_nhwc ? staged(be, index, a) : own_kernels(be, index, a);
}

/* the NCHW kernels: VNNI's, the direct depthwise loop, or im2col and the int8 GEMM */
static bool own_kernels(const ts_backend *be, int index, const ts_qconv_args *a) {
    const int64_t G = a->groups, cg = a->c / G, cog = a->cout / G;
    if (tsi_qconv_vnni_fits(a)) return tsi_qconv_vnni(a);
    if (cg == 1 && cog == 1) {
        depthwise(a);
        return true;
    }
    const int64_t KH = a->kh, KW = a->kw, kg = cg * KH * KW, P = a->oh * a->ow;
    const size_t colb = ((size_t)(P * kg) + 63) & ~(size_t)63,
                 tmpb = (size_t)(P * cog) * (a->fmult ? sizeof(int32_t) : 1);
    ts_block *blk = NULL;
    uint8_t *col = tsi_host_scratch_get(colb + tmpb, &blk);
    if (!col) {
        tsi_kernel_oom("quantized_conv2d", colb + tmpb);
        return false;
    }
    uint8_t *tmp = col + colb;            /* fmult: the int32 sums, then requantized here */
    const uint8_t pad = (uint8_t)a->x_zp; /* the zero point's byte, signed or not */
    bool ok = true;
    for (int64_t n = 0; n < a->n && ok; n++)
        for (int64_t g = 0; g < G && ok; g++) {
            const uint8_t *x = (const uint8_t *)a->x + ((n * a->c + g * cg) * a->h) * a->w;
            for (int64_t oy = 0; oy < a->oh; oy++)
                for (int64_t ox = 0; ox < a->ow; ox++) {
                    uint8_t *row = col + (oy * a->ow + ox) * kg;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t i = 0; i < KH; i++) {
                            const int64_t y = oy * a->stride[0] - a->pad[0] + i * a->dil[0];
                            for (int64_t j = 0; j < KW; j++) {
                                const int64_t xx = ox * a->stride[1] - a->pad[1] + j * a->dil[1];
                                row[(c * KH + i) * KW + j] =
                                    y < 0 || y >= a->h || xx < 0 || xx >= a->w
                                        ? pad
                                        : x[(c * a->h + y) * a->w + xx];
                            }
                        }
                }
            ts_qlinear_args la = {.m = P,
                                  .n = cog,
                                  .k = kg,
                                  .x = col,
                                  .x_unsigned = a->x_unsigned,
                                  .x_zp = a->x_zp,
                                  .w = a->wt + g * cog * kg,
                                  .w_zp = a->w_zp + g * cog,
                                  .bias = a->bias ? a->bias + g * cog : NULL,
                                  .out_q = a->fmult ? NULL : tmp,
                                  .out_acc = a->fmult ? (int32_t *)(void *)tmp : NULL,
                                  .out_unsigned = a->out_unsigned,
                                  .out_zp = a->out_zp,
                                  .out_min = a->out_min,
                                  .out_max = a->out_max,
                                  .mult = a->mult + g * cog};
            ok = tsi_cpu_qlinear(be, index, &la);
            uint8_t *out = (uint8_t *)a->out + (n * a->cout + g * cog) * P;
            if (a->fmult) {
                const int32_t *acc = (const int32_t *)(void *)tmp;
                const int64_t o0 = (n * a->cout + g * cog) * P;
                for (int64_t p = 0; ok && p < P; p++)
                    for (int64_t co = 0; co < cog; co++)
                        store(a, o0 + co * P + p, acc[p * cog + co], g * cog + co);
            } else {
                for (int64_t p = 0; ok && p < P; p++)
                    for (int64_t co = 0; co < cog; co++) out[co * P + p] = tmp[p * cog + co];
            }
        }
    tsi_host_scratch_put(blk);
    return ok;
}
