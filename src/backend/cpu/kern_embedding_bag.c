/* kern_embedding_bag.c — CPU embedding_bag (issue 52): each bag's rows of weight added straight
 * into its output row (no [bags, width, D] gather), float32 in float32 (as PyTorch's cpu kernel,
 * fbgemm's), float64 in float64; mean divides the sum by the bag's count of kept positions once.
 * Bags run in parallel when there is enough work. */
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/embedding_bag_math.h"
#include "backend/omp_if.h"

/* elements (positions x D) below which the bags run on one thread */
#define EB_PAR_MIN (1 << 15)

#define EB_BAG(T)                                                                                  \
    static void bag_##T(const ts_bag_args *a, T *restrict o, int64_t b, int64_t D) {               \
        int64_t s, e, kept = 0;                                                                    \
        ts_bag_range(a->offsets.data ? (const int64_t *)a->offsets.data : NULL, a->width, b, &s,   \
                     &e);                                                                          \
        const bool i32 = a->idx.dtype == TS_I32;                                                   \
        const T *psw = (const T *)a->psw.data;                                                     \
        const int64_t rs = a->weight.strides[0], cs = a->weight.strides[1];                        \
        memset(o, 0, (size_t)D * sizeof(T));                                                       \
        for (int64_t p = s; p < e; p++) {                                                          \
            const int64_t r = ts_bag_index(a->idx.data, i32, p);                                   \
            if (r == a->padding_idx) continue;                                                     \
            kept++;                                                                                \
            const T *restrict w = (const T *)a->weight.data + r * rs;                              \
            if (psw) {                                                                             \
                const T c = psw[p];                                                                \
                if (cs == 1)                                                                       \
                    for (int64_t j = 0; j < D; j++) o[j] += c * w[j];                              \
                else                                                                               \
                    for (int64_t j = 0; j < D; j++) o[j] += c * w[j * cs];                         \
            } else if (cs == 1) {                                                                  \
                for (int64_t j = 0; j < D; j++) o[j] += w[j];                                      \
            } else {                                                                               \
                for (int64_t j = 0; j < D; j++) o[j] += w[j * cs];                                 \
            }                                                                                      \
        }                                                                                          \
        const double div = ts_bag_divisor(a->mode, kept);                                          \
        if (div != 1.0)                                                                            \
            for (int64_t j = 0; j < D; j++) o[j] = o[j] / (T)div;                                  \
    }

EB_BAG(float)
EB_BAG(double)

#if defined(__x86_64__) || defined(__i386__)
/* float32 on AVX2: 64 columns at a time in 8 accumulators kept in registers over the whole bag
 * (then 8 at a time, then one), the same adds (and products: no FMA) in the same order per column
 * as bag_float, so the same bits */
__attribute__((target(TS_ISA_TARGET_AVX2))) static void
bag_f32_avx2(const ts_bag_args *a, float *restrict o, int64_t b, int64_t D) {
    int64_t s, e, kept = 0;
    ts_bag_range(a->offsets.data ? (const int64_t *)a->offsets.data : NULL, a->width, b, &s, &e);
    const bool i32 = a->idx.dtype == TS_I32;
    const float *psw = (const float *)a->psw.data, *base = (const float *)a->weight.data;
    const int64_t rs = a->weight.strides[0];
    for (int64_t p = s; p < e; p++) kept += ts_bag_index(a->idx.data, i32, p) != a->padding_idx;
    const float div = (float)ts_bag_divisor(a->mode, kept);
    const __m256 vd = _mm256_set1_ps(div);
    int64_t j = 0;
    for (; j + 64 <= D; j += 64) {
        __m256 acc[8];
        for (int k = 0; k < 8; k++) acc[k] = _mm256_setzero_ps();
        for (int64_t p = s; p < e; p++) {
            const int64_t r = ts_bag_index(a->idx.data, i32, p);
            if (r == a->padding_idx) continue;
            const float *w = base + r * rs + j;
            if (psw) {
                const __m256 c = _mm256_set1_ps(psw[p]);
                for (int k = 0; k < 8; k++)
                    acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(c, _mm256_loadu_ps(w + 8 * k)));
            } else {
                for (int k = 0; k < 8; k++)
                    acc[k] = _mm256_add_ps(acc[k], _mm256_loadu_ps(w + 8 * k));
            }
        }
        for (int k = 0; k < 8; k++) _mm256_storeu_ps(o + j + 8 * k, _mm256_div_ps(acc[k], vd));
    }
    for (; j + 8 <= D; j += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t p = s; p < e; p++) {
            const int64_t r = ts_bag_index(a->idx.data, i32, p);
            if (r == a->padding_idx) continue;
            const __m256 v = _mm256_loadu_ps(base + r * rs + j);
            acc = _mm256_add_ps(acc, psw ? _mm256_mul_ps(_mm256_set1_ps(psw[p]), v) : v);
        }
        _mm256_storeu_ps(o + j, _mm256_div_ps(acc, vd));
    }
    for (; j < D; j++) {
        float acc = 0;
        for (int64_t p = s; p < e; p++) {
            const int64_t r = ts_bag_index(a->idx.data, i32, p);
            if (r == a->padding_idx) continue;
            acc += psw ? psw[p] * base[r * rs + j] : base[r * rs + j];
        }
        o[j] = acc / div;
    }
}
#endif

void tsi_cpu_embedding_bag(const ts_backend *be, int index, const ts_kview *out,
                           const ts_bag_args *a) {
    (void)be, (void)index;
    const int64_t B = a->bags, D = out->shape[1], n = a->idx.shape[0];
    const bool par = (double)n * (double)D >= EB_PAR_MIN && B > 1
#ifdef TS_HAVE_OPENMP
                     && !omp_in_parallel()
#endif
        ;
#if defined(__x86_64__) || defined(__i386__)
    if (out->dtype == TS_F32 && a->weight.strides[1] == 1 && ts_cpu_isa_get() >= TS_ISA_AVX2) {
        float *o = (float *)out->data;
        TS_PARALLEL_FOR_IF(par, for (int64_t b = 0; b < B; b++) bag_f32_avx2(a, o + b * D, b, D););
        return;
    }
#endif
    if (out->dtype == TS_F32) {
        float *o = (float *)out->data;
        TS_PARALLEL_FOR_IF(par, for (int64_t b = 0; b < B; b++) bag_float(a, o + b * D, b, D););
    } else {
        double *o = (double *)out->data;
        TS_PARALLEL_FOR_IF(par, for (int64_t b = 0; b < B; b++) bag_double(a, o + b * D, b, D););
    }
}
