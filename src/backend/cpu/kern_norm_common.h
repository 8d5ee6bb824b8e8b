/* kern_norm_common.h — what the fused normalisation kernels (kern_layer_norm.c,
 * kern_batch_norm.c, kern_batch_norm_nhwc.c) share outside their variants: the 16-lane double
 * sums and whether this build has the x86 variants. Their path, variant, threads and partitions
 * come from norm_select.h; kern_norm_isa.h compiles the variants. */
#ifndef TS_KERN_NORM_COMMON_H
#define TS_KERN_NORM_COMMON_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/norm_select.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/omp_if.h"

/* 16 lanes added in one fixed tree */
static inline double ln_sum16(double *l) {
    for (int w = 8; w > 0; w /= 2)
        for (int k = 0; k < w; k++) l[k] += l[k + w];
    return l[0];
}

#define LN_CAT2(a, b) a##_##b
#define LN_CAT(a, b)  LN_CAT2(a, b)

/* Whether the variant tables have the AVX2 and AVX-512 rows (0 portable, 1 AVX2, 2 AVX-512);
 * tsi_norm_variant() picks the row */
#if defined(__GNUC__) && defined(__x86_64__)
#define LN_X86 1
#endif

/* Whether the tests' forced variant `isa` exists in this build and on this CPU */
static inline bool ln_isa_available(ts_cpu_isa isa) {
#ifndef LN_X86
    if (isa != TS_ISA_GENERIC) return false;
#endif
    return (int)isa >= 0 && isa < TS_ISA_COUNT && isa <= tsi_cpu_isa_host();
}

#endif /* TS_KERN_NORM_COMMON_H */
