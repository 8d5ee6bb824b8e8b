/* conv_select.c — the CPU convolution's choice of kernel (conv_select.h): the table of thresholds,
 * each row with the measurement behind it, and the one function that reads it. The figures come
 * from bench/results/cpu-conv.md and bench/results/onnx-blocked.md (hosts and load described
 * there); decision 0026 says why the choice is made here. */
#include "backend/cpu/conv_select.h"

#include <string.h>

#include "backend/cpu/conv_dw_blocked.h"
#include "backend/cpu/conv_dw_weight.h"
#include "backend/cpu/conv_fc_blocked.h"
#include "backend/cpu/kern_conv_drivers.h"
#include "backend/env_config.h"

static const tsi_conv_limits limits = {
    /* MobileNetV3-Small at batch 1 (issue 27): its depthwise convolutions (16 to 576 channels)
     * through oneDNN 2.8 ms against 3.3 ms in the direct kernels, 2 threads, Zen 4
     * (`bench_onnx mobilenet_v3_small.onnx image 1 30`; TS_CONV=dnnl alone: 3.8 / 2.8 ms at 1 / 2
     * threads against 4.3 / 3.3); oneDNN puts the blocked layout's 16 channels in a vector at
     * each tap, where the direct kernels fill vectors along rows of 7 to 56. Narrower depthwise
     * layers (LeNet-like, < 16 groups) were not measured faster there and stay direct. */
    .dnnl_depthwise_min_groups = 16,
    /* The direct kernels (kern_conv_direct.c): past 16 outputs per group the GEMM's arithmetic
     * dominates and BLAS / oneDNN do it better, below 4 outputs a row the row vectors are mostly
     * padding. NOT MEASURED in bench/results: the code's reasoning only (issue 54 asks for the
     * benchmark: bench_conv_fused's LeNet / SimpleCNN layers under TS_CONV=builtin|dnnl). */
    .direct_max_outputs_per_group = 16,
    .direct_min_row = 4,
    /* Built-in drivers: one image per thread (single-threaded GEMMs) when the batch fills the
     * threads or an image is under 2e7 flops, every thread on each image's GEMM otherwise, never
     * both (NOT MEASURED in bench/results: the code's reasoning); one image's groups shared by the
     * threads from 1 MFLOP (MobileNetV3-Small's narrow grouped layers at batch 1, onnx-blocked.md
     * "Inference convolutions of MobileNets"). */
    .batch_parallel_max_flops = 2e7,
    .group_parallel_min_flops = 1e6,
    /* oneDNN forwards under 1 MFLOP on one thread: the squeeze-excitation convolutions on 1x1
     * images take microseconds, less than a parallel region's start and join (onnx-blocked.md,
     * "Small oneDNN forwards on one thread"). */
    .dnnl_one_thread_flops = 1e6,
    /* conv_dw_blocked.c and conv_dw_weight.c: one thread below 2^18 multiply-adds, about what a
     * parallel region's start and join cost (a microsecond, 16k vector FMAs on one core). The
     * blocked kernel itself is measured (docs/decisions/0034-onnx-own-blocked-kernels.md: with it
     * and the FC kernel 8-16% less CPU than oneDNN's on MobileNetV3-Small); this cut-off is NOT
     * MEASURED. */
    .dw_blocked_parallel_min_macs = 262144.0,
    /* channels_last below AVX-512 (AVX2 kernels read NHWC 20% slower than nChw8c, Zen 3): NHWC
     * kept under 512 multiply-adds per output element (ResNet-20's 16- and 32-channel 3x3 layers:
     * eval forward at batch 64 36.2 ms all NHWC, 38.6 all blocked) or under 2^23 in all (ResNet-20
     * at batch 1: 0.65 against 0.78 ms); ResNet-18's layers go blocked, 536 -> 458 ms at batch 64
     * (bench_conv_formats, bench/results/cpu-conv.md "Memory formats"). */
    .nhwc_blocked_min_taps = 512.0,
    .nhwc_blocked_min_macs = 8388608.0,
    /* With AVX-512 (one thread, the AMX host, bench_conv_formats): the forward of outputs at most
     * 4 pixels wide at batch >= 2 (512 channels at 4x4, batch 64: brgconv's NHWC 40.5 against the
     * blocked kernel's 24.9 ms; 5-7 wide level within 15%), and input gradients from 2048
     * multiply-adds per input element (256 channels at 8x8: 25.9 against 23.3 ms, reorders 0.6). */
    .avx512_blocked_fwd_max_ow = 4,
    .avx512_blocked_data_min_taps = 2048.0,
};

const tsi_conv_limits *tsi_conv_limits_get(void) { return &limits; }

static bool depthwise_wide(const ts_cgeom *g) {
    return g->cg == 1 && g->og == 1 && g->g >= limits.dnnl_depthwise_min_groups;
}

/* Whether the built-in kernels take pass over g as well as they can: the direct kernels apply
 * (for the input gradient: to its transposed problem). */
static bool builtin_direct(const ts_cgeom *g, tsi_conv_pass pass) {
    ts_cgeom t;
    switch (pass) {
    case TSI_CONV_PASS_FORWARD:
        return tsi_conv_direct_for(g, false) != NULL;
    case TSI_CONV_PASS_DATA:
        return tsi_conv_transposed_geom(g, &t) && tsi_conv_direct_for(&t, false) != NULL;
    default:
        return tsi_conv_direct_for(g, true) != NULL;
    }
}

/* the choice between oneDNN and the built-in kernels when TS_CONV forces neither */
static tsi_conv_path default_path(const ts_cgeom *g, tsi_conv_pass pass, ts_dtype dt) {
    /* channels_last: oneDNN's NHWC primitives on the data as it lies (conv_dnnl.c's layout rule
     * then reads the table); the built-in kernels would need NCHW copies */
    if (g->nhwc) return TSI_CONV_PATH_DNNL;
    /* float32 depthwise forwards of 16 groups and up: oneDNN (measured in float32 only; bf16
     * keeps the general rule) */
    if (pass == TSI_CONV_PASS_FORWARD && dt == TS_F32 && depthwise_wide(g))
        return TSI_CONV_PATH_DNNL;
    if (builtin_direct(g, pass)) return TSI_CONV_PATH_BUILTIN;
    /* float32 depthwise weight gradients the direct kernels do not take (1x1, strided, narrow
     * rows): conv_dw_weight.c, not oneDNN, whose primitive sums each weight's N x OH x OW products
     * in one float (issue 75, 1x1 over 32 x 28 x 28 products: error 8.5e-8 of the sum of
     * |products|, PyTorch's the same, the own kernel 2.3e-9). Speed, one thread, loaded Zen 5:
     * 1x1 level with oneDNN, 3x3 stride 2 at 56x56 and 3x3 on 7x7 images 2-4x slower: 1x1 only
     * (the rep modules' scale branches), the rest stays oneDNN's until the kernel is as fast. */
    if (pass == TSI_CONV_PASS_WEIGHT && dt == TS_F32 && g->kh == 1 && g->kw == 1 &&
        tsi_conv_dw_weight_takes(g))
        return TSI_CONV_PATH_DW_WEIGHT;
    /* oneDNN's JIT kernels take what the direct kernels do not: above them im2col + GEMM loses */
    return TSI_CONV_PATH_DNNL;
}

tsi_conv_path tsi_conv_select(const ts_cgeom *g, tsi_conv_pass pass, ts_dtype dt, int blk) {
    if (dt == TS_F64) return TSI_CONV_PATH_BUILTIN; /* oneDNN has no float64 convolution */
    const int forced = tsi_conv_provider();
    /* Tessera's own blocked kernels: both sides blocked, unless oneDNN is forced. TS_CONV_OWN
     * ("dw", "fc", both by default) picks which. */
    if (blk && pass == TSI_CONV_PASS_FORWARD && dt == TS_F32 && forced != 1) {
        const char *own = tsi_env(TSI_ENV_CONV_OWN);
        if ((!own || strstr(own, "dw")) && tsi_conv_dw_blocked_takes(g, blk))
            return TSI_CONV_PATH_DW_BLOCKED;
        if ((!own || strstr(own, "fc")) && tsi_conv_fc_blocked_takes(g, blk))
            return TSI_CONV_PATH_FC_BLOCKED;
    }
    if (forced >= 0) return forced == 1 ? TSI_CONV_PATH_DNNL : TSI_CONV_PATH_BUILTIN;
    return default_path(g, pass, dt);
}

bool tsi_conv_f32_forward_dnnl(int64_t c, int64_t o, const int64_t khw[2],
                               const ts_conv2d_params *p) {
    /* one image of direct_min_row x direct_min_row outputs, the narrowest rows the direct
     * kernels take (the rule reads no other size of the image) */
    const int64_t ow = limits.direct_min_row, o_ohw[3] = {o, ow, ow};
    int64_t nchw[4] = {1, c, 1, 1};
    for (int d = 0; d < 2; d++) {
        const int64_t in = (ow - 1) * p->stride[d] + p->dilation[d] * (khw[d] - 1) + 1 -
                           2 * (int64_t)p->padding[d];
        nchw[2 + d] = in > 1 ? in : 1;
    }
    const ts_cgeom g = tsi_cgeom_make(nchw, o_ohw, khw, p);
    return default_path(&g, TSI_CONV_PASS_FORWARD, TS_F32) == TSI_CONV_PATH_DNNL;
}

bool tsi_conv_batch_parallel(const ts_cgeom *g, int nt) {
    if (nt <= 1 || g->n <= 1) return false;
    const double flops = 2.0 * (double)g->o * (double)g->k * (double)g->p;
    return g->n >= nt || flops < limits.batch_parallel_max_flops;
}

bool tsi_conv_group_parallel(const ts_cgeom *g, int nt, bool batch_parallel) {
    if (nt <= 1 || batch_parallel || g->g < nt) return false;
    return 2.0 * (double)g->n * (double)g->o * (double)g->k * (double)g->p >=
           limits.group_parallel_min_flops;
}
