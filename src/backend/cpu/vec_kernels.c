/* vec_kernels.c — vec_kernels.h's tables: vec_kernels_impl.h (over vec_math_impl.h) compiled for
 * portable 4-lane vectors, AVX2 (8 lanes, F16C) and AVX-512 (16 lanes). No FMA contraction (ISO C
 * mode): the three give the same bits, which tests/test_vec_math.c checks. */
#include "backend/cpu/vec_kernels.h"

#include <string.h>

#include "backend/kernel_math.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define TSV_X86 1
#include <immintrin.h>
#endif
/* clang ignores GCC target pragmas, so the F16C intrinsics would not inline into the variants
 * there: a clang build (the fuzzing one) converts halves in software */
#ifdef __clang__
#define TSV_F16C_WIDTH(w) 0
#else
#define TSV_F16C_WIDTH(w) (w)
#endif

typedef float tsv_v4f __attribute__((vector_size(16)));
typedef int32_t tsv_v4i __attribute__((vector_size(16)));
typedef double tsv_v2d __attribute__((vector_size(16)));
typedef int64_t tsv_v2l __attribute__((vector_size(16)));
typedef uint16_t tsv_v4h __attribute__((vector_size(8)));
#define TSV_F       tsv_v4f
#define TSV_I       tsv_v4i
#define TSV_D       tsv_v2d
#define TSV_L       tsv_v2l
#define TSV_H       tsv_v4h
#define TSV_W       4
#define TSV_F16C    0
#define TSV_ISA     TS_ISA_GENERIC
#define TSV_NAME(x) x##_generic
/* the math, then the loops over it */
/* clang-format off */
#include "backend/cpu/vec_math_impl.h"
#include "backend/cpu/vec_kernels_impl.h"
/* clang-format on */

#ifdef TSV_X86
TS_ISA_PRAGMA_TARGET(TS_ISA_TARGET_AVX2)
typedef float tsv_v8f __attribute__((vector_size(32)));
typedef int32_t tsv_v8i __attribute__((vector_size(32)));
typedef double tsv_v4d __attribute__((vector_size(32)));
typedef int64_t tsv_v4l __attribute__((vector_size(32)));
typedef uint16_t tsv_v8h __attribute__((vector_size(16)));
#define TSV_F       tsv_v8f
#define TSV_I       tsv_v8i
#define TSV_D       tsv_v4d
#define TSV_L       tsv_v4l
#define TSV_H       tsv_v8h
#define TSV_W       8
#define TSV_F16C    TSV_F16C_WIDTH(256)
#define TSV_ISA     TS_ISA_AVX2
#define TSV_NAME(x) x##_avx2
/* the math, then the loops over it */
/* clang-format off */
#include "backend/cpu/vec_math_impl.h"
#include "backend/cpu/vec_kernels_impl.h"
/* clang-format on */
#pragma GCC pop_options

TS_ISA_PRAGMA_TARGET(TS_ISA_TARGET_AVX512)
typedef float tsv_v16f __attribute__((vector_size(64)));
typedef int32_t tsv_v16i __attribute__((vector_size(64)));
typedef double tsv_v8d __attribute__((vector_size(64)));
typedef int64_t tsv_v8l __attribute__((vector_size(64)));
typedef uint16_t tsv_v16h __attribute__((vector_size(32)));
#define TSV_F       tsv_v16f
#define TSV_I       tsv_v16i
#define TSV_D       tsv_v8d
#define TSV_L       tsv_v8l
#define TSV_H       tsv_v16h
#define TSV_W       16
#define TSV_F16C    TSV_F16C_WIDTH(512)
#define TSV_ISA     TS_ISA_AVX512
#define TSV_NAME(x) x##_avx512
/* the math, then the loops over it */
/* clang-format off */
#include "backend/cpu/vec_math_impl.h"
#include "backend/cpu/vec_kernels_impl.h"
/* clang-format on */
#pragma GCC pop_options
#endif

static const ts_vec_kernels *const tables[TS_ISA_COUNT] = {
    &tsv_kernels_generic,
#ifdef TSV_X86
    &tsv_kernels_avx2,
    &tsv_kernels_avx512,
#endif
};

const ts_vec_kernels *ts_vec_kernels_get(void) {
#ifdef TSV_X86
    return tables[ts_cpu_isa_get()];
#else
    return tables[TS_ISA_GENERIC];
#endif
}

const ts_vec_kernels *ts_vec_kernels_for(ts_cpu_isa isa) {
    if ((int)isa < 0 || isa >= TS_ISA_COUNT || isa > ts_cpu_isa_host()) return NULL;
    return tables[isa];
}

bool ts_vec_unary_has(ts_unary_op op) {
    switch (op) {
    case TS_U_EXP:
    case TS_U_LOG:
    case TS_U_TANH:
    case TS_U_SIGMOID:
    case TS_U_GELU:
    case TS_U_SILU:
        return true;
    default:
        return false;
    }
}
