/* kern_qlinear_add.c — ONNX Runtime's QLinearAdd on bytes (backend.h's qlinear_add,
 * quant_args.h's ts_qlinear_add_args): t = fma(b, rb, fixed), v = fma(a, ra, t), each in double
 * and rounded once to float32 (exact in double: an 8-bit integer times a float32 plus a float32
 * spans under 53 bits, so this is the single rounding of MLAS's AVX2 vfmadd), then half to even
 * and saturated. One pass, no float tensors in between; on AVX-512 16 lanes of float32 fmas (each
 * the one rounding of an exact double sum: the same bytes). With args->torch the same pass
 * computes ts_quantized_add's arithmetic (PyTorch's dequantize -> add -> quantize, quant_args.h).
 */
#include <math.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/omp_if.h"
#include "backend/quant_math.h"

#define QADD_BLOCK 4096 /* elements a parallel block */

#define QADD_BODY(T, LO, HI, i0, i1)                                                               \
    do {                                                                                           \
        const T *pa = a->a, *pb = a->b;                                                            \
        T *po = a->out;                                                                            \
        const double ra = a->ra, rb = a->rb, fx = a->fixed;                                        \
        for (int64_t i = i0; i < i1; i++) {                                                        \
            const float t = (float)((double)pb[a->b_scalar ? 0 : i] * rb + fx);                    \
            float v = nearbyintf((float)((double)pa[i] * ra + (double)t));                         \
            v = v < LO ? LO : v > HI ? HI : v;                                                     \
            po[i] = (T)v;                                                                          \
        }                                                                                          \
    } while (0)

/* ts_quantized_add's: ts_qm_dequantize's per-tensor products, their sum, relu, ts_qm_quantize8 */
#define TADD_BODY(T, LO, HI, i0, i1)                                                               \
    do {                                                                                           \
        const T *pa = a->a, *pb = a->b;                                                            \
        T *po = a->out;                                                                            \
        for (int64_t i = i0; i < i1; i++) {                                                        \
            float s = ts_qm_dequantize(pa[i], a->za, a->sa, true) +                                \
                      ts_qm_dequantize(pb[i], a->zb, a->sb, true);                                 \
            if (a->relu) s = s > 0.0f ? s : 0.0f;                                                  \
            po[i] = (T)ts_qm_quantize8(s, a->inv, a->zp, LO, HI, HI);                              \
        }                                                                                          \
    } while (0)

static void qadd_scalar(const ts_qlinear_add_args *a, int64_t i0, int64_t i1) {
    if (a->torch && a->is_signed)
        TADD_BODY(int8_t, -128.0f, 127.0f, i0, i1);
    else if (a->torch)
        TADD_BODY(uint8_t, 0.0f, 255.0f, i0, i1);
    else if (a->is_signed)
        QADD_BODY(int8_t, -128.0f, 127.0f, i0, i1);
    else
        QADD_BODY(uint8_t, 0.0f, 255.0f, i0, i1);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* 16 bytes at p (the lanes of m) as floats (exact) */
__attribute__((target(TS_ISA_TARGET_AVX512))) static inline __m512 bytes_ps(const void *p,
                                                                            __mmask16 m, bool sgn) {
    const __m128i v = _mm_maskz_loadu_epi8(m, p);
    return _mm512_cvtepi32_ps(sgn ? _mm512_cvtepi8_epi32(v) : _mm512_cvtepu8_epi32(v));
}

/* 16 lanes of ts_quantized_add's arithmetic (TADD_BODY): the differences exact in int32, the
 * products, sum and scaling each one float32 rounding, rounded half to even (roundscale) before
 * the zero point is added in float32, clamped, then converted (exact: integers in range) */
__attribute__((target(TS_ISA_TARGET_AVX512))) static inline __m512i
tadd16(const ts_qlinear_add_args *a, const void *pa, const void *pb, __mmask16 m, __m512 lo,
       __m512 hi) {
    const bool sgn = a->is_signed;
    const __m128i va = _mm_maskz_loadu_epi8(m, pa), vb = _mm_maskz_loadu_epi8(m, pb);
    const __m512i ia = sgn ? _mm512_cvtepi8_epi32(va) : _mm512_cvtepu8_epi32(va),
                  ib = sgn ? _mm512_cvtepi8_epi32(vb) : _mm512_cvtepu8_epi32(vb);
    const __m512 fa = _mm512_mul_ps(_mm512_set1_ps(a->sa), _mm512_cvtepi32_ps(_mm512_sub_epi32(
                                                               ia, _mm512_set1_epi32(a->za)))),
                 fb = _mm512_mul_ps(_mm512_set1_ps(a->sb), _mm512_cvtepi32_ps(_mm512_sub_epi32(
                                                               ib, _mm512_set1_epi32(a->zb))));
    __m512 s = _mm512_add_ps(fa, fb);
    if (a->relu) s = _mm512_max_ps(s, _mm512_setzero_ps());
    const __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(s, _mm512_set1_ps(a->inv)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 v = _mm512_add_ps(_mm512_set1_ps(a->zp), r);
    return _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(v, lo), hi));
}

__attribute__((target(TS_ISA_TARGET_AVX512))) static void tadd_avx512(const ts_qlinear_add_args *a,
                                                                      int64_t i0, int64_t i1) {
    const bool sgn = a->is_signed;
    const __m512 lo = _mm512_set1_ps(sgn ? -128.0f : 0.0f),
                 hi = _mm512_set1_ps(sgn ? 127.0f : 255.0f);
    const uint8_t *pa = a->a, *pb = a->b;
    uint8_t *po = a->out;
    for (int64_t i = i0; i < i1; i += 16) {
        const __mmask16 m = (__mmask16)(i1 - i >= 16 ? 0xffff : (1u << (i1 - i)) - 1u);
        _mm512_mask_cvtepi32_storeu_epi8(po + i, m, tadd16(a, pa + i, pb + i, m, lo, hi));
    }
}

/* 16 lanes a step, each fma rounded once to float32: the double sums above are exact, so their
 * one rounding is the fma's. Clamped before the rounding (the bounds are integers: the same as
 * after), rounded half to even by the conversion; 64 bytes at a time packed into one store (the
 * values already lie in the byte range: the packs' saturation never acts). */
__attribute__((target(TS_ISA_TARGET_AVX512))) static void qadd_avx512(const ts_qlinear_add_args *a,
                                                                      int64_t i0, int64_t i1) {
    const bool sgn = a->is_signed;
    const __m512 ra = _mm512_set1_ps(a->ra), rb = _mm512_set1_ps(a->rb),
                 fx = _mm512_set1_ps(a->fixed), lo = _mm512_set1_ps(sgn ? -128.0f : 0.0f),
                 hi = _mm512_set1_ps(sgn ? 127.0f : 255.0f);
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const uint8_t *pa = a->a, *pb = a->b;
    uint8_t *po = a->out;
    const __m512 ts =
        _mm512_fmadd_ps(_mm512_set1_ps(_mm512_cvtss_f32(bytes_ps(pb, 1, sgn))), rb, fx);
    int64_t i = i0;
    for (; i + 64 <= i1; i += 64) {
        __m512i q[4];
        for (int j = 0; j < 4; j++) {
            const __m512 t =
                a->b_scalar ? ts : _mm512_fmadd_ps(bytes_ps(pb + i + 16 * j, 0xffff, sgn), rb, fx);
            const __m512 v = _mm512_fmadd_ps(bytes_ps(pa + i + 16 * j, 0xffff, sgn), ra, t);
            q[j] = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(v, lo), hi));
        }
        const __m512i ab = _mm512_packs_epi32(q[0], q[1]), cd = _mm512_packs_epi32(q[2], q[3]);
        const __m512i r = sgn ? _mm512_packs_epi16(ab, cd) : _mm512_packus_epi16(ab, cd);
        _mm512_storeu_si512(po + i, _mm512_permutexvar_epi32(order, r));
    }
    for (; i < i1; i += 16) {
        const __mmask16 m = (__mmask16)(i1 - i >= 16 ? 0xffff : (1u << (i1 - i)) - 1u);
        const __m512 t = a->b_scalar ? ts : _mm512_fmadd_ps(bytes_ps(pb + i, m, sgn), rb, fx);
        __m512 v = _mm512_fmadd_ps(bytes_ps(pa + i, m, sgn), ra, t);
        v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
        _mm512_mask_cvtepi32_storeu_epi8(po + i, m, _mm512_cvtps_epi32(v));
    }
}
#endif

void tsi_cpu_qlinear_add(const ts_backend *be, int index, const ts_qlinear_add_args *a) {
    (void)be, (void)index;
    const int64_t blocks = (a->n + QADD_BLOCK - 1) / QADD_BLOCK;
#if defined(__x86_64__) && defined(__GNUC__)
    const bool vec = ts_cpu_isa_get() >= TS_ISA_AVX512;
#else
    const bool vec = false;
#endif
    TS_PARALLEL_FOR_IF(
        a->n >= ((int64_t)1 << 18), for (int64_t blk = 0; blk < blocks; blk++) {
            const int64_t i0 = blk * QADD_BLOCK,
                          i1 = i0 + QADD_BLOCK < a->n ? i0 + QADD_BLOCK : a->n;
#if defined(__x86_64__) && defined(__GNUC__)
            if (vec) {
                if (a->torch)
                    tadd_avx512(a, i0, i1);
                else
                    qadd_avx512(a, i0, i1);
                continue;
            }
#endif
            qadd_scalar(a, i0, i1);
        });
    (void)vec;
}
