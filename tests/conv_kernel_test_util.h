/* conv_kernel_test_util.h — what the blocked convolution kernels' tests share
 * (test_conv_dw_blocked.c, test_conv_fc_blocked.c): the fused activations in float64, and the
 * blocks this host's ISA gives kernels for. Include after ts_test.h and the backend headers. */
#ifndef TS_TEST_CONV_KERNEL_TEST_UTIL_H
#define TS_TEST_CONV_KERNEL_TEST_UTIL_H

#include <math.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/kern_conv.h"

/* act(y) in float64 with the kernel's parameters: Clip's NaN bound is no bound; HardSigmoid and
 * HardSwish take alpha in lo and beta in hi; NaN stays NaN */
static inline double act64(ts_conv_act act, double lo, double hi, double y) {
    switch (act) {
    case TS_CONV_ACT_RELU:
        return y > 0 || isnan(y) ? y : 0;
    case TS_CONV_ACT_CLIP: {
        const double l = isnan(lo) ? -INFINITY : lo, h = isnan(hi) ? INFINITY : hi;
        return isnan(y) ? y : y < l ? l : y > h ? h : y;
    }
    case TS_CONV_ACT_HARDSIGMOID:
    case TS_CONV_ACT_HARDSWISH: {
        double a = y * lo + hi;
        a = a < 0 ? 0 : a > 1 ? 1 : a;
        return act == TS_CONV_ACT_HARDSWISH ? y * a : a;
    }
    default:
        return y;
    }
}

/* the blocks with kernels on this host, widest first (16: AVX-512, 8: AVX2); returns how many */
static inline int conv_blocks_here(int blocks[2]) {
    const ts_cpu_isa host = tsi_cpu_isa_host();
    int n = 0;
    if (host >= TS_ISA_AVX512) blocks[n++] = 16;
    if (host >= TS_ISA_AVX2) blocks[n++] = 8;
    return n;
}

#endif /* TS_TEST_CONV_KERNEL_TEST_UTIL_H */
