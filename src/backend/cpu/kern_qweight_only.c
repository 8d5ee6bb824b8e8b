/* kern_qweight_only.c — weight-only quantized linear layers (backend.h's wo_linear,
 * quant_args.h's ts_wo_args): y = x @ dequant(w)^T + bias with float32 activations and int8
 * (per output feature) or int4 (per group along k) weights, torchao's int8_weight_only /
 * int4_weight_only. The weights are unpacked in registers, never dequantized into memory: for
 * each group (int8: the whole row) sum_k x[k] * (float)(q[k] - zp) in float32, then add scale *
 * that sum to the row's float32 accumulator. A portable C loop, and an AVX-512 one taken when
 * ts_cpu_isa_get() is AVX-512: int8 bytes widened to int32 lanes, the zero point subtracted in
 * int32 (skipped when it is 0), converted and fma'd into two float32 accumulators a row; int4 as
 * x times the dequantized weight, (float)(q - zp) * scale, read from a 16-entry table a (row,
 * group) by a permute of the nibbles (ts_dequantize's values: the sum differs from the portable
 * loop's by float32 rounding only). Work is
 * split over blocks of output features (OpenMP); each block's weight rows stay in L1 while every
 * row of x goes past them, so M = 1 (decoding) reads each weight byte once. */
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/host_scratch.h"
#include "backend/omp_if.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define TS_HAVE_WO_AVX512 1
#include <immintrin.h>
#define TS_WO_AVX512 __attribute__((target(TS_ISA_TARGET_AVX512)))
#endif

enum { WO_NB = 4 }; /* output features a block */

/* ------------------------------------------------------------------ portable */
static float dot_i8(const float *x, const int8_t *w, int64_t k, int32_t zp) {
    float s[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= k; i += 4)
        for (int j = 0; j < 4; j++) s[j] += x[i + j] * (float)(w[i + j] - zp);
    for (; i < k; i++) s[0] += x[i] * (float)(w[i] - zp);
    return (s[0] + s[1]) + (s[2] + s[3]);
}

static float dot_u4(const ts_wo_args *a, const float *x, int64_t n) {
    const int64_t K = a->k, gs = a->group_size, groups = K / gs;
    const uint8_t *w = a->w + n * (K / 2);
    float acc = 0;
    for (int64_t g = 0; g < groups; g++) {
        const int32_t zp = a->zero_points[n * groups + g];
        float s[2] = {0, 0};
        for (int64_t i = g * gs; i < (g + 1) * gs; i += 2) {
            const uint8_t b = w[i / 2];
            s[0] += x[i] * (float)((int32_t)(b & 15) - zp);
            s[1] += x[i + 1] * (float)((int32_t)(b >> 4) - zp);
        }
        acc += a->scales[n * groups + g] * (s[0] + s[1]);
    }
    return acc;
}

static void wo_generic(const ts_wo_args *a, int64_t n0, int64_t nn) {
    for (int64_t m = 0; m < a->m; m++) {
        const float *x = a->x + m * a->k;
        for (int64_t n = n0; n < n0 + nn; n++) {
            float v = a->int4 ? dot_u4(a, x, n)
                              : a->scales[n] * dot_i8(x, (const int8_t *)a->w + n * a->k, a->k,
                                                      a->zero_points[n]);
            a->y[m * a->n + n] = v + (a->bias ? a->bias[n] : 0.0f);
        }
    }
}

/* ------------------------------------------------------------------ AVX-512 */
#ifdef TS_HAVE_WO_AVX512
/* nr (1..4) rows of int8 weights against one row of x: two accumulators a row (eight
 * independent fma chains), the zero-point subtraction skipped when the rows' zero points are all
 * 0 (torchao's symmetric recipe: the same values) */
TS_WO_AVX512 static inline void blk_i8(const ts_wo_args *a, const float *x, int64_t n0, int nr,
                                       float *out) {
    const int64_t K = a->k;
    const int8_t *w = (const int8_t *)a->w + n0 * K;
    __m512 acc[WO_NB], acc2[WO_NB];
    __m512i zp[WO_NB];
    bool zero = true;
    for (int r = 0; r < nr; r++) {
        acc[r] = acc2[r] = _mm512_setzero_ps();
        zp[r] = _mm512_set1_epi32(a->zero_points[n0 + r]);
        zero = zero && a->zero_points[n0 + r] == 0;
    }
    int64_t k = 0;
#define WO_I8(kk) _mm512_cvtepi8_epi32(_mm_loadu_si128((const void *)(w + r * K + (kk))))
    if (zero)
        for (; k + 32 <= K; k += 32) {
            const __m512 x0 = _mm512_loadu_ps(x + k), x1 = _mm512_loadu_ps(x + k + 16);
            for (int r = 0; r < nr; r++) {
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(WO_I8(k)), x0, acc[r]);
                acc2[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(WO_I8(k + 16)), x1, acc2[r]);
            }
        }
    else
        for (; k + 32 <= K; k += 32) {
            const __m512 x0 = _mm512_loadu_ps(x + k), x1 = _mm512_loadu_ps(x + k + 16);
            for (int r = 0; r < nr; r++) {
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(WO_I8(k), zp[r])), x0,
                                         acc[r]);
                acc2[r] = _mm512_fmadd_ps(
                    _mm512_cvtepi32_ps(_mm512_sub_epi32(WO_I8(k + 16), zp[r])), x1, acc2[r]);
            }
        }
    for (; k + 16 <= K; k += 16) {
        const __m512 xv = _mm512_loadu_ps(x + k);
        for (int r = 0; r < nr; r++)
            acc[r] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(WO_I8(k), zp[r])), xv, acc[r]);
    }
#undef WO_I8
    if (k < K) {
        const __mmask16 mk = (__mmask16)((1u << (K - k)) - 1);
        const __m512 xv = _mm512_maskz_loadu_ps(mk, x + k);
        for (int r = 0; r < nr; r++) {
            const __m512i q = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mk, w + r * K + k));
            /* masked-off lanes: x is 0, so (0 - zp) * 0 adds nothing */
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, zp[r])), xv, acc[r]);
        }
    }
    for (int r = 0; r < nr; r++)
        out[r] = a->scales[n0 + r] * _mm512_reduce_add_ps(_mm512_add_ps(acc[r], acc2[r]));
}

/* nr rows of int4 weights against one row of x, xp: x with each 32 elements reordered as the even
 * ones then the odd ones (the low and the high nibbles of 16 bytes). Each (row, group) makes the
 * 16 values its nibbles stand for, (float)(j - zp) * scale for j = 0..15 (ts_dequantize's values,
 * each rounded once), in one register; a nibble picks its value with a permute (which reads the
 * low 4 bits of each lane: no mask), and x times it goes into the row's float32 accumulators. */
TS_WO_AVX512 static inline void blk_u4(const ts_wo_args *a, const float *xp, int64_t n0, int nr,
                                       float *out) {
    const int64_t K = a->k, gs = a->group_size, groups = K / gs, rb = K / 2;
    const uint8_t *w = a->w + n0 * rb;
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 ae[WO_NB], ao[WO_NB];
    for (int r = 0; r < nr; r++) ae[r] = ao[r] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; g++) {
        __m512 tab[WO_NB];
        for (int r = 0; r < nr; r++) {
            const int64_t i = (n0 + r) * groups + g;
            tab[r] = _mm512_mul_ps(_mm512_sub_ps(iota, _mm512_set1_ps((float)a->zero_points[i])),
                                   _mm512_set1_ps(a->scales[i]));
        }
        for (int64_t k = g * gs; k < (g + 1) * gs; k += 32) {
            const __m512 xe = _mm512_loadu_ps(xp + k), xo = _mm512_loadu_ps(xp + k + 16);
            for (int r = 0; r < nr; r++) {
                const __m512i b =
                    _mm512_cvtepu8_epi32(_mm_loadu_si128((const void *)(w + r * rb + k / 2)));
                ae[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(b, tab[r]), xe, ae[r]);
                ao[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), tab[r]), xo,
                                        ao[r]);
            }
        }
    }
    for (int r = 0; r < nr; r++) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(ae[r], ao[r]));
}

TS_WO_AVX512 static void wo_avx512(const ts_wo_args *a, const float *xs, int64_t n0, int64_t nn) {
    for (int64_t m = 0; m < a->m; m++) {
        const float *x = xs + m * a->k;
        float out[WO_NB];
        for (int64_t n = n0; n < n0 + nn; n += WO_NB) {
            const int nr = n0 + nn - n < WO_NB ? (int)(n0 + nn - n) : WO_NB;
            if (a->int4) {
                if (nr == WO_NB)
                    blk_u4(a, x, n, WO_NB, out);
                else
                    blk_u4(a, x, n, nr, out);
            } else {
                if (nr == WO_NB)
                    blk_i8(a, x, n, WO_NB, out);
                else
                    blk_i8(a, x, n, nr, out);
            }
            for (int r = 0; r < nr; r++)
                a->y[m * a->n + n + r] = out[r] + (a->bias ? a->bias[n + r] : 0.0f);
        }
    }
}
#endif

bool tsi_cpu_wo_linear(const ts_backend *be, int index, const ts_wo_args *a) {
    (void)be, (void)index;
    if (a->act_int8) return tsi_cpu_da8_linear(a);
    const int64_t M = a->m, N = a->n, K = a->k;
    bool vec = false;
#ifdef TS_HAVE_WO_AVX512
    vec = ts_cpu_isa_get() == TS_ISA_AVX512;
#endif
    const float *xs = a->x;
    ts_block *blk = NULL;
    if (vec && a->int4) { /* x reordered: each 32 elements as the even ones, then the odd ones */
        const size_t bytes = (size_t)M * (size_t)K * sizeof(float);
        float *xp = tsi_host_scratch_get(bytes, &blk);
        if (!xp) {
            tsi_kernel_oom("weight_only_linear", bytes);
            return false;
        }
        for (int64_t i = 0; i < M * K; i += 32)
            for (int j = 0; j < 16; j++)
                xp[i + j] = a->x[i + 2 * j], xp[i + 16 + j] = a->x[i + 2 * j + 1];
        xs = xp;
    }
    /* blocks of 16 output features: an OpenMP task each once the product is big enough */
    const int64_t per = 16, blocks = (N + per - 1) / per;
    TS_PARALLEL_FOR_IF(
        blocks > 1 && M * N * K >= ((int64_t)1 << 16), for (int64_t b = 0; b < blocks; b++) {
            const int64_t n0 = b * per, nn = N - n0 < per ? N - n0 : per;
#ifdef TS_HAVE_WO_AVX512
            if (vec) {
                wo_avx512(a, xs, n0, nn);
                continue;
            }
#endif
            wo_generic(a, n0, nn);
        });
    (void)xs; /* read by the AVX-512 path only */
    tsi_host_scratch_put(blk);
    return true;
}
