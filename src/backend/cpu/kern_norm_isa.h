/* kern_norm_isa.h — the fused normalisation kernels (kern_layer_norm.c, kern_batch_norm.c)
 * compiled once per vector ISA and float dtype. The includer defines NORM_IMPL, the header of its
 * kernels (quoted), then includes this file, which includes kern_norm_variant.h (and through it
 * NORM_IMPL) six times: portable vectors, AVX2 and AVX-512 (under target pragmas), each for float
 * and double, with LN_NAME(x) = x_<isa>_<dtype> (generic_f32, avx2_f64, ...): after
 * kern_norm_common.h and whatever the kernels use of the includer's; once per file. No FMA
 * contraction (ISO C mode), so every ISA gives the same bits. The float variants define LN_HALF:
 * kernels over f16 / bf16 tensors read through float chunks (batch norm's) compile there. */
#include "backend/cpu/kern_norm_common.h"

typedef float ln_v4f __attribute__((vector_size(16)));
typedef float ln_v2f __attribute__((vector_size(8)));
typedef double ln_v2d __attribute__((vector_size(16)));

#define LN_T       float
#define LN_V       ln_v4f
#define LN_VL      4
#define LN_VD      ln_v2d
#define LN_WD      2
#define LN_VH      ln_v2f
#define LN_NAME(x) LN_CAT(x, generic_f32)
#define LN_HALF    1
#if defined(__GNUC__) && defined(__x86_64__) /* SSE2 */
static inline ln_v2d ln_to_d_sse2(ln_v2f v) {
    __m128 f = _mm_setzero_ps();
    memcpy(&f, &v, sizeof v);
    return (ln_v2d)_mm_cvtps_pd(f);
}
#define LN_TO_D(v) ln_to_d_sse2(v)
#endif
#include "backend/cpu/kern_norm_variant.h"
#define LN_T       double
#define LN_V       ln_v2d
#define LN_VL      2
#define LN_VD      ln_v2d
#define LN_WD      2
#define LN_VH      ln_v2d
#define LN_NAME(x) LN_CAT(x, generic_f64)
#include "backend/cpu/kern_norm_variant.h"

#ifdef LN_X86

TS_ISA_PRAGMA_TARGET(TS_ISA_TARGET_AVX2)
typedef float ln_v8f __attribute__((vector_size(32)));
typedef double ln_v4d __attribute__((vector_size(32)));
#define LN_T       float
#define LN_V       ln_v8f
#define LN_VL      8
#define LN_VD      ln_v4d
#define LN_WD      4
#define LN_VH      ln_v4f
#define LN_NAME(x) LN_CAT(x, avx2_f32)
#define LN_HALF    1
#ifndef __clang__ /* clang ignores GCC target pragmas: its intrinsics would not inline */
#define LN_TO_D(v) ((ln_v4d)_mm256_cvtps_pd((__m128)(v)))
#endif
#include "backend/cpu/kern_norm_variant.h"
#define LN_T       double
#define LN_V       ln_v4d
#define LN_VL      4
#define LN_VD      ln_v4d
#define LN_WD      4
#define LN_VH      ln_v4d
#define LN_NAME(x) LN_CAT(x, avx2_f64)
#include "backend/cpu/kern_norm_variant.h"
#pragma GCC pop_options

TS_ISA_PRAGMA_TARGET(TS_ISA_TARGET_AVX512)
typedef float ln_v16f __attribute__((vector_size(64)));
typedef double ln_v8d __attribute__((vector_size(64)));
#define LN_T       float
#define LN_V       ln_v16f
#define LN_VL      16
#define LN_VD      ln_v8d
#define LN_WD      8
#define LN_VH      ln_v8f
#define LN_NAME(x) LN_CAT(x, avx512_f32)
#define LN_HALF    1
#ifndef __clang__ /* clang ignores GCC target pragmas: its intrinsics would not inline */
#define LN_TO_D(v) ((ln_v8d)_mm512_cvtps_pd((__m256)(v)))
#endif
#include "backend/cpu/kern_norm_variant.h"
#define LN_T       double
#define LN_V       ln_v8d
#define LN_VL      8
#define LN_VD      ln_v8d
#define LN_WD      8
#define LN_VH      ln_v8d
#define LN_NAME(x) LN_CAT(x, avx512_f64)
#include "backend/cpu/kern_norm_variant.h"
#pragma GCC pop_options
#endif
