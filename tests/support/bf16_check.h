/* bf16_check.h — what the bf16 product tests (test_matmul_bf16, test_conv_bf16) share: random bf16
 * operands, the bound of a float32 sum of bf16 products rounded once to bf16, and which path the
 * run should take under the ISA caps in its environment. */
#ifndef TS_BF16_CHECK_H
#define TS_BF16_CHECK_H

#include <stdbool.h>

#include "tessera.h"

/* A bf16 tensor of shape s, values uniform in [-scale, scale] (a fixed xorshift sequence). */
ts_tensor *ts_test_random_bf16(ts_shape s, double scale, bool requires_grad);

/* Records one check: every element r of got (bf16) against want (the float64 result of the same
 * bf16 operands) within 2^-8 |want| + (1 + 2^-8) gamma_K mag, where mag is the same sum over the
 * operands' absolute values and gamma_K = K u / (1 - K u), u = 2^-24: exact products, a float32
 * sum of K terms in any order, one rounding to bf16 (8 significant bits). Returns the worst
 * error as a share of its bound. */
double ts_test_check_bf16_sum(const char *file, int line, const char *what, ts_tensor *got,
                              ts_tensor *want, ts_tensor *mag, double K);
#define CHECK_BF16_SUM(what, got, want, mag, K)                                                    \
    ts_test_check_bf16_sum(__FILE__, __LINE__, what, got, want, mag, K)

/* Why this run must not multiply bf16 natively: "TS_CPU_ISA" (avx2 / generic), "ONEDNN_MAX_CPU_ISA"
 * (below the bf16 ISAs), "TS_CONV=builtin" (convolutions only, with `conv`), or NULL. */
const char *ts_test_bf16_cap(bool conv);
/* Whether /proc/cpuinfo lists AVX512-BF16 or AMX-BF16. */
bool ts_test_host_has_bf16(void);
/* Whether /proc/cpuinfo lists AMX-BF16 (oneDNN's bf16 kernels then run on AMX tiles). */
bool ts_test_host_has_amx_bf16(void);
/* Whether ONEDNN_MAX_CPU_ISA caps oneDNN below the AMX ISAs (and with it gemm_amx.c's kernel). */
bool ts_test_dnnl_below_amx(void);

#endif /* TS_BF16_CHECK_H */
