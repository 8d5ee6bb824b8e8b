/* vec_kernels.c — vec_kernels.h's tables: vec_kernels_impl.h (over vec_math_impl.h) compiled for
 * portable 4-lane vectors, AVX2 (8 lanes, FMA, F16C) and AVX-512 (16 lanes). No FMA contraction
 * (ISO C mode), only vec_math_impl.h's explicit fused multiply-adds, which are exact on every path
 * (the FMA instructions; on the portable variant an SSE2 emulation on x86, fmaf elsewhere): the
 * three give the same bits, which tests/test_vec_math.c checks. */
#include "backend/cpu/vec_kernels.h"

#include <string.h>

#include "backend/kernel_math.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define TSV_X86 1
#include <immintrin.h>
#endif
/* clang ignores GCC target pragmas, so the F16C, FMA, movemask and sqrt intrinsics would not
 * inline into the variants there: a clang build (the fuzzing one) converts halves in software,
 * fuses multiply-adds through fmaf lane by lane and reads lane masks and square roots lane by lane
 * (vec_math_impl.h's fallbacks, the same bits) */
#ifdef __clang__
#define TSV_F16C_WIDTH(w) 0
#else
#define TSV_F16C_WIDTH(w) (w)
#define TSV_FMA_X86       1
#endif

typedef float tsv_v4f __attribute__((vector_size(16)));

#ifdef TSV_X86
/* The portable variant's fused multiply-add on x86 without FMA (fmaf would be a call per lane, in
 * software on such CPUs): a b + c in double, where a b is exact (48 bits), then rounded to float.
 * That rounds twice, which goes wrong only where the double sum is inexact and lies halfway
 * between two floats (for normal floats: the low 29 of its 52 fraction bits are 1 and 28 0s) or
 * below the normal floats; there, rarely, the sum is rounded to odd instead (Knuth's two-sum gives
 * its error; an inexact sum whose last bit is even steps one place towards it), after which
 * rounding to float rounds a b + c once (Boldo and Melquiond, "Emulation of FMA and correctly
 * rounded sums: proved algorithms using rounding to odd", IEEE TC 2008). */
static inline __m128d tsv_fma_odd_pd(__m128d a, __m128d b, __m128d c) {
    const __m128d p = _mm_mul_pd(a, b), s = _mm_add_pd(p, c);
    const __m128i low =
        _mm_and_si128(_mm_castpd_si128(s), _mm_set_epi32(0, 0x1fffffff, 0, 0x1fffffff));
    const int mid = _mm_movemask_ps(_mm_castsi128_ps(
                        _mm_cmpeq_epi32(low, _mm_set_epi32(0, 0x10000000, 0, 0x10000000)))) &
                    5;
    const __m128d as = _mm_andnot_pd(_mm_set1_pd(-0.0), s);
    const int tiny = _mm_movemask_pd(
        _mm_and_pd(_mm_cmplt_pd(as, _mm_set1_pd(0x1p-125)), _mm_cmpgt_pd(as, _mm_setzero_pd())));
    if (__builtin_expect(!(mid | tiny), 1)) return s;
    const __m128d bb = _mm_sub_pd(s, p);
    const __m128d e =
        _mm_add_pd(_mm_sub_pd(p, _mm_sub_pd(s, bb)), _mm_sub_pd(c, bb)); /* p + c = s + e */
    /* e != 0 (nor NaN: an infinite operand) and s even: -1 where e and s differ in sign, else +1 */
    const __m128i sb = _mm_castpd_si128(s), one = _mm_set1_epi64x(1);
    const __m128i nz = _mm_castpd_si128(
        _mm_or_pd(_mm_cmplt_pd(e, _mm_setzero_pd()), _mm_cmpgt_pd(e, _mm_setzero_pd())));
    const __m128i fix = _mm_and_si128(nz, _mm_sub_epi64(_mm_and_si128(sb, one), one));
    const __m128i diff = _mm_castpd_si128(
        _mm_xor_pd(_mm_cmplt_pd(e, _mm_setzero_pd()), _mm_cmplt_pd(s, _mm_setzero_pd())));
    const __m128i step = _mm_or_si128(diff, one);
    return _mm_castsi128_pd(_mm_add_epi64(sb, _mm_and_si128(fix, step)));
}
static inline tsv_v4f tsv_fma_sse2(tsv_v4f a, tsv_v4f b, tsv_v4f c) {
    const __m128d lo = tsv_fma_odd_pd(_mm_cvtps_pd(a), _mm_cvtps_pd(b), _mm_cvtps_pd(c));
    const __m128d hi =
        tsv_fma_odd_pd(_mm_cvtps_pd(_mm_movehl_ps(a, a)), _mm_cvtps_pd(_mm_movehl_ps(b, b)),
                       _mm_cvtps_pd(_mm_movehl_ps(c, c)));
    return (tsv_v4f)_mm_movelh_ps(_mm_cvtpd_ps(lo), _mm_cvtpd_ps(hi));
}
#endif
typedef int32_t tsv_v4i __attribute__((vector_size(16)));
typedef double tsv_v2d __attribute__((vector_size(16)));
typedef int64_t tsv_v2l __attribute__((vector_size(16)));
typedef uint16_t tsv_v4h __attribute__((vector_size(8)));
#define TSV_F    tsv_v4f
#define TSV_I    tsv_v4i
#define TSV_D    tsv_v2d
#define TSV_L    tsv_v2l
#define TSV_H    tsv_v4h
#define TSV_W    4
#define TSV_F16C 0
#define TSV_ISA  TS_ISA_GENERIC
#ifdef TSV_X86
#define TSV_MASK_D(m) _mm_movemask_pd((__m128d)(m))
#define TSV_SQRT_D(v) _mm_sqrt_pd(v)
#endif
#define TSV_NAME(x) x##_generic
#ifdef TSV_X86
#define TSV_FMA(a, b, c) tsv_fma_sse2(a, b, c)
#endif
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
#ifdef TSV_FMA_X86
#define TSV_FMA(a, b, c)   _mm256_fmadd_ps(a, b, c)
#define TSV_FMA_D(a, b, c) _mm256_fmadd_pd(a, b, c)
#define TSV_MASK_D(m)      _mm256_movemask_pd((__m256d)(m))
#define TSV_SQRT_D(v)      _mm256_sqrt_pd(v)
#endif
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
#ifdef TSV_FMA_X86
#define TSV_FMA(a, b, c)   _mm512_fmadd_ps(a, b, c)
#define TSV_FMA_D(a, b, c) _mm512_fmadd_pd(a, b, c)
#define TSV_MASK_D(m)      _mm512_movepi64_mask((__m512i)(m))
#define TSV_SQRT_D(v)      _mm512_sqrt_pd(v)
#endif
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

const ts_vec_kernels *tsi_vec_kernels_get(void) {
#ifdef TSV_X86
    return tables[ts_cpu_isa_get()];
#else
    return tables[TS_ISA_GENERIC];
#endif
}

const ts_vec_kernels *tsi_vec_kernels_for(ts_cpu_isa isa) {
    if ((int)isa < 0 || isa >= TS_ISA_COUNT || isa > tsi_cpu_isa_host()) return NULL;
    return tables[isa];
}

bool tsi_vec_unary_has(ts_unary_op op) {
    switch (op) {
    case TS_U_EXP:
    case TS_U_LOG:
    case TS_U_TANH:
    case TS_U_ERF:
    case TS_U_SIGMOID:
    case TS_U_GELU:
    case TS_U_SILU:
    case TS_U_ERFINV:
    case TS_U_LGAMMA:
    case TS_U_DIGAMMA:
        return true;
    default:
        return false;
    }
}
