/* test_conv_select.c — the CPU convolution's one selector (src/backend/cpu/conv_select.c): each
 * row of its table at its edge (the value on one side and the next on the other), so a changed
 * threshold fails here, and the rules around them: float64 built in, channels_last to oneDNN,
 * the depthwise row float32 forwards only, the depthwise weight gradients the direct kernels do not
 * take to conv_dw_weight.c (float32, NCHW), TS_CONV forcing either provider, Tessera's own blocked
 * kernels only with both sides blocked and not under TS_CONV=dnnl, TS_CONV_OWN picking them. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "backend/cpu/conv_select.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/env_config.h"
#include "ts_test.h"

/* x [n, c, h, w] by a k x k weight of `groups` groups into o channels, stride s, padding k / 2 */
static ts_cgeom geom(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t k, int s,
                     int groups) {
    const int p = (int)(k / 2);
    const ts_conv2d_params prm = {.stride = {s, s},
                                  .padding = {p, p},
                                  .dilation = {1, 1},
                                  .groups = groups,
                                  .act = TS_CONV_ACT_NONE};
    const int64_t nchw[4] = {n, c, h, w}, khw[2] = {k, k};
    const int64_t o_ohw[3] = {o, (h + 2 * p - k) / s + 1, (w + 2 * p - k) / s + 1};
    return tsi_cgeom_make(nchw, o_ohw, khw, &prm);
}

#define FWD     TSI_CONV_PASS_FORWARD
#define DNNL    TSI_CONV_PATH_DNNL
#define BUILTIN TSI_CONV_PATH_BUILTIN

static tsi_conv_path sel(ts_cgeom g, tsi_conv_pass pass, ts_dtype dt, int blk) {
    return tsi_conv_select(&g, pass, dt, blk);
}

int main(void) {
    const tsi_conv_limits *lim = tsi_conv_limits_get();
    tsi_conv_force_provider(""); /* automatic, whatever TS_CONV says */
    const bool direct = tsi_conv_direct_for(&(ts_cgeom){.sw = 1, .og = 1, .ow = 8}, false) != NULL;
    printf("direct kernels here: %s\n", direct ? "yes" : "no");

    /* depthwise float32 forwards: oneDNN from 16 groups, the direct kernels below */
    CHECK_EQ(lim->dnnl_depthwise_min_groups, 16);
    CHECK_EQ(sel(geom(1, 16, 28, 28, 16, 3, 1, 16), FWD, TS_F32, 0), DNNL);
    CHECK_EQ(sel(geom(1, 15, 28, 28, 15, 3, 1, 15), FWD, TS_F32, 0), direct ? BUILTIN : DNNL);
    /* the depthwise row is float32 forwards only: bf16 and the gradients keep the general rule */
    CHECK_EQ(sel(geom(1, 16, 28, 28, 16, 3, 1, 16), FWD, TS_BF16, 0), direct ? BUILTIN : DNNL);
    CHECK_EQ(sel(geom(1, 16, 28, 28, 16, 3, 1, 16), TSI_CONV_PASS_WEIGHT, TS_F32, 0),
             direct ? BUILTIN : DNNL);
    /* float32 1x1 depthwise weight gradients: the own accurate kernel (conv_dw_weight.c), any
     * group count; strided 3x3 ones (slower there), bf16 and depthwise-multiplier (2 outputs a
     * group) ones keep oneDNN */
    CHECK_EQ(sel(geom(2, 8, 7, 7, 8, 1, 1, 8), TSI_CONV_PASS_WEIGHT, TS_F32, 0),
             TSI_CONV_PATH_DW_WEIGHT);
    CHECK_EQ(sel(geom(2, 32, 28, 28, 32, 3, 2, 32), TSI_CONV_PASS_WEIGHT, TS_F32, 0), DNNL);
    CHECK_EQ(sel(geom(2, 32, 28, 28, 32, 3, 2, 32), TSI_CONV_PASS_WEIGHT, TS_BF16, 0), DNNL);
    CHECK_EQ(sel(geom(2, 32, 28, 28, 64, 3, 2, 32), TSI_CONV_PASS_WEIGHT, TS_F32, 0), DNNL);
    CHECK_EQ(sel(geom(2, 32, 28, 28, 32, 3, 2, 32), FWD, TS_F32, 0), DNNL);

    /* the direct kernels: at most 16 outputs a group, rows at least 4 wide, unit stride along W */
    CHECK_EQ(lim->direct_max_outputs_per_group, 16);
    CHECK_EQ(lim->direct_min_row, 4);
    CHECK_EQ(sel(geom(2, 8, 12, 12, 16, 3, 1, 1), FWD, TS_F32, 0), direct ? BUILTIN : DNNL);
    CHECK_EQ(sel(geom(2, 8, 12, 12, 17, 3, 1, 1), FWD, TS_F32, 0), DNNL);
    CHECK_EQ(sel(geom(2, 8, 12, 4, 8, 3, 1, 1), FWD, TS_F32, 0), direct ? BUILTIN : DNNL);
    CHECK_EQ(sel(geom(2, 8, 12, 3, 8, 3, 1, 1), FWD, TS_F32, 0), DNNL);
    CHECK_EQ(sel(geom(2, 8, 12, 12, 8, 3, 2, 1), FWD, TS_F32, 0), DNNL);
    CHECK_EQ(sel(geom(2, 8, 12, 12, 8, 1, 1, 1), FWD, TS_F32, 0), DNNL); /* 1x1: im2col-free */

    /* float64: built in, whatever is forced; channels_last: oneDNN for the other dtypes */
    ts_cgeom nh = geom(2, 8, 12, 12, 8, 3, 1, 1);
    nh.nhwc = true;
    CHECK_EQ(sel(nh, FWD, TS_F32, 0), DNNL);
    CHECK_EQ(sel(nh, TSI_CONV_PASS_DATA, TS_F16, 0), DNNL);
    CHECK_EQ(sel(nh, FWD, TS_F64, 0), BUILTIN);
    ts_cgeom nhdw = geom(2, 8, 12, 12, 8, 3, 2, 8); /* depthwise, channels_last: oneDNN */
    nhdw.nhwc = true;
    CHECK_EQ(sel(nhdw, TSI_CONV_PASS_WEIGHT, TS_F32, 0), DNNL);
    tsi_conv_force_provider("dnnl");
    CHECK_EQ(sel(geom(2, 8, 12, 12, 8, 3, 1, 1), FWD, TS_F32, 0), DNNL);
    CHECK_EQ(sel(geom(2, 8, 12, 12, 8, 3, 2, 8), TSI_CONV_PASS_WEIGHT, TS_F32, 0), DNNL);
    CHECK_EQ(sel(geom(2, 8, 12, 12, 8, 3, 1, 1), FWD, TS_F64, 0), BUILTIN);
    tsi_conv_force_provider("builtin");
    CHECK_EQ(sel(geom(2, 64, 12, 12, 64, 3, 1, 1), FWD, TS_F32, 0), BUILTIN);
    CHECK_EQ(sel(nh, FWD, TS_F32, 0), BUILTIN);
    tsi_conv_force_provider("");

    /* Tessera's own blocked kernels: both sides blocked (blk), where the CPU has them */
    const int blk = ts_cpu_isa_get() == TS_ISA_AVX512 ? 16 : 8;
    const ts_cgeom dw = geom(1, 24, 14, 14, 24, 3, 1, 24), fc = geom(1, 24, 1, 1, 8, 1, 1, 1);
    const bool own = ts_cpu_isa_get() >= TS_ISA_AVX2;
    if (own) {
        CHECK_EQ(sel(dw, FWD, TS_F32, blk), TSI_CONV_PATH_DW_BLOCKED);
        CHECK_EQ(sel(fc, FWD, TS_F32, blk), TSI_CONV_PATH_FC_BLOCKED);
        setenv("TS_CONV_OWN", "fc", 1);
        tsi_env_reload(TSI_ENV_CONV_OWN);
        CHECK_EQ(sel(dw, FWD, TS_F32, blk), DNNL);
        CHECK_EQ(sel(fc, FWD, TS_F32, blk), TSI_CONV_PATH_FC_BLOCKED);
        unsetenv("TS_CONV_OWN");
        tsi_env_reload(TSI_ENV_CONV_OWN);
        tsi_conv_force_provider("dnnl");
        CHECK_EQ(sel(dw, FWD, TS_F32, blk), DNNL);
        tsi_conv_force_provider("");
    }
    CHECK_EQ(sel(dw, FWD, TS_F32, 0), DNNL); /* plain: the depthwise row */
    CHECK(sel(fc, FWD, TS_F32, 0) != TSI_CONV_PATH_FC_BLOCKED);

    /* the built-in drivers' thread split: images among threads under 2e7 flops an image (or
     * when they fill the threads), one image's groups from 1 MFLOP */
    CHECK(lim->batch_parallel_max_flops == 2e7);
    CHECK(lim->group_parallel_min_flops == 1e6);
    ts_cgeom b = geom(1, 1, 1, 1, 1, 1, 1, 1);
    b.n = 2, b.o = 1, b.k = 1, b.p = 10000000; /* 2e7 flops an image */
    CHECK(!tsi_conv_batch_parallel(&b, 4));
    b.p = 9999999;
    CHECK(tsi_conv_batch_parallel(&b, 4));
    b.n = 4, b.p = 10000000;
    CHECK(tsi_conv_batch_parallel(&b, 4));
    CHECK(!tsi_conv_batch_parallel(&b, 1));
    b.n = 1, b.p = 10; /* one image: nothing to split among threads, however small */
    CHECK(!tsi_conv_batch_parallel(&b, 4));
    ts_cgeom gp = geom(1, 1, 1, 1, 1, 1, 1, 1);
    gp.n = 1, gp.g = 2, gp.o = 1, gp.k = 1, gp.p = 500000; /* 1e6 flops */
    CHECK(tsi_conv_group_parallel(&gp, 2, false));
    gp.p = 499999;
    CHECK(!tsi_conv_group_parallel(&gp, 2, false));
    gp.p = 500000;
    CHECK(!tsi_conv_group_parallel(&gp, 2, true));
    CHECK(!tsi_conv_group_parallel(&gp, 3, false)); /* fewer groups than threads */

    /* the rows read elsewhere (conv_dnnl.c, conv_dw_blocked.c): their values, each with its
     * measurement in conv_select.c */
    CHECK(lim->dnnl_one_thread_flops == 1e6);
    CHECK(lim->dw_blocked_parallel_min_macs == 262144.0);
    CHECK(lim->nhwc_blocked_min_taps == 512.0);
    CHECK(lim->nhwc_blocked_min_macs == 8388608.0);
    CHECK_EQ(lim->avx512_blocked_fwd_max_ow, 4);
    CHECK(lim->avx512_blocked_data_min_taps == 2048.0);
    tsi_conv_force_provider(NULL);
    return ts_test_finish();
}
