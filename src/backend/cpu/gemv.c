/* gemv.c — float32 matrix-vector products (gemv.h).
 *
 * A linear layer on one row streams its weight once and does one multiply-add per weight read:
 * memory, not arithmetic, decides. The kernel reads four weight rows at a time in vectors of 16
 * (AVX-512) or 8 (AVX2) against x loaded once for the four, one register of partial sums per
 * row; the tail of k is one zero-padded vector of x and of each row. Threads split the rows in
 * one piece each (tsi_gemv_piece_rows), each row summed by one thread in an order fixed by k, so
 * the result is the same for any thread count. MobileNetV3-Small's classifier (576 -> 1024 -> 1000
 * at batch 1, 6.5 MB of weights) took 16% of the model's time in oneDNN's sgemm (its GEMV kernel,
 * 22 GB/s); figures in bench/results/onnx-blocked.md and bench/results/onnx-models.md. */
#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

#include "backend/cpu/gemv.h"
#include "backend/env_config.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/matmul_select.h"
#include "backend/omp_if.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TS_GEMV_X86 1
#endif

#ifdef TS_GEMV_X86
#include <immintrin.h>

/* HSUM(v): the sum of a vector's lanes (halves added pairwise) */
#define DEFINE_GEMV(SFX, ATTR, V, L, HSUM)                                                         \
    ATTR static void rows_##SFX(int64_t k, const float *x, const float *w, int64_t ldw, float *y,  \
                                int64_t sy, int64_t o0, int64_t o1) {                              \
        const int64_t kv = k / L * L;                                                              \
        V xt = {0}, wt[4];                                                                         \
        memcpy(&xt, x + kv, sizeof(float) * (size_t)(k - kv));                                     \
        for (int64_t o = o0; o < o1; o += 4) {                                                     \
            const int nr = o1 - o < 4 ? (int)(o1 - o) : 4;                                         \
            const float *wr[4];                                                                    \
            for (int r = 0; r < 4; r++) wr[r] = w + (o + (r < nr ? r : 0)) * ldw;                  \
            V a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, xv, v0, v1, v2, v3;                          \
            for (int64_t i = 0; i < kv; i += L) {                                                  \
                memcpy(&xv, x + i, sizeof xv);                                                     \
                memcpy(&v0, wr[0] + i, sizeof xv);                                                 \
                memcpy(&v1, wr[1] + i, sizeof xv);                                                 \
                memcpy(&v2, wr[2] + i, sizeof xv);                                                 \
                memcpy(&v3, wr[3] + i, sizeof xv);                                                 \
                a0 += v0 * xv, a1 += v1 * xv, a2 += v2 * xv, a3 += v3 * xv;                        \
            }                                                                                      \
            if (kv < k) {                                                                          \
                for (int r = 0; r < 4; r++) {                                                      \
                    wt[r] = (V){0};                                                                \
                    memcpy(&wt[r], wr[r] + kv, sizeof(float) * (size_t)(k - kv));                  \
                }                                                                                  \
                a0 += wt[0] * xt, a1 += wt[1] * xt, a2 += wt[2] * xt, a3 += wt[3] * xt;            \
            }                                                                                      \
            const float s[4] = {HSUM(a0), HSUM(a1), HSUM(a2), HSUM(a3)};                           \
            for (int r = 0; r < nr; r++) y[(o + r) * sy] += s[r];                                  \
        }                                                                                          \
    }

typedef float ts_gemv8f __attribute__((vector_size(32)));
typedef float ts_gemv16f __attribute__((vector_size(64)));
#define HSUM8(v)                                                                                   \
    _mm_cvtss_f32(hsum4(                                                                           \
        _mm_add_ps(_mm256_castps256_ps128((__m256)(v)), _mm256_extractf128_ps((__m256)(v), 1))))
#define HSUM16(v) _mm512_reduce_add_ps((__m512)(v))
/* the four lanes of a 128-bit vector summed into lane 0 */
__attribute__((target(TS_ISA_TARGET_AVX2))) static inline __m128 hsum4(__m128 a) {
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    return _mm_add_ss(a, _mm_movehdup_ps(a));
}
DEFINE_GEMV(avx2, __attribute__((target(TS_ISA_TARGET_AVX2))), ts_gemv8f, 8, HSUM8)
DEFINE_GEMV(avx512, __attribute__((target(TS_ISA_TARGET_AVX512))), ts_gemv16f, 16, HSUM16)
#endif

bool tsi_gemv_rows_present(void) {
#ifdef TS_GEMV_X86
    return true;
#else
    return false;
#endif
}

void tsi_gemv_rows_f32(bool wide, int64_t k, const float *x, const float *w, int64_t ldw, float *y,
                       int64_t sy, int64_t o0, int64_t o1) {
#ifdef TS_GEMV_X86
    if (wide)
        rows_avx512(k, x, w, ldw, y, sy, o0, o1);
    else
        rows_avx2(k, x, w, ldw, y, sy, o0, o1);
#else
    (void)wide, (void)k, (void)x, (void)w, (void)ldw, (void)y, (void)sy, (void)o0, (void)o1;
#endif
}

/* 1 on, 0 off (tsi_gemv_enable, or TS_GEMV=off at the first call), -1 not yet read */
static atomic_int enabled = -1;

void tsi_gemv_enable(bool on) { atomic_store_explicit(&enabled, on, memory_order_relaxed); }

static bool gemv_enabled(void) {
    int on = atomic_load_explicit(&enabled, memory_order_relaxed);
    if (on < 0) {
        on = !tsi_env_is(TSI_ENV_GEMV, "off");
        atomic_store_explicit(&enabled, on, memory_order_relaxed);
    }
    return on;
}

int64_t tsi_gemv_piece_rows(int64_t rows, double macs, bool parallel) {
#ifdef TS_HAVE_OPENMP
    const int threads = omp_get_max_threads();
    if (!parallel || macs < tsi_mm_limits_get()->gemv_parallel_min_macs || threads < 2 ||
        omp_in_parallel() || rows <= 4)
        return rows > 0 ? rows : 1;
    const int64_t piece = (rows + threads - 1) / threads;
    return (piece + 3) / 4 * 4;
#else
    (void)macs, (void)parallel;
    return rows > 0 ? rows : 1;
#endif
}

bool tsi_gemv_f32(int64_t n, int64_t k, const float *x, const float *w, int64_t ldw,
                  const float *bias, int64_t sbias, float *y, int64_t sy, bool parallel) {
    const ts_cpu_isa isa = ts_cpu_isa_get();
    if (!tsi_gemv_rows_present() || isa == TS_ISA_GENERIC || !gemv_enabled()) return false;
    const bool wide = isa == TS_ISA_AVX512;
    const int64_t piece = tsi_gemv_piece_rows(n, (double)n * (double)k, parallel);
    const int64_t pieces = (n + piece - 1) / piece;
    TS_PARALLEL_FOR_IF(
        pieces > 1, for (int64_t it = 0; it < pieces; it++) {
            const int64_t o0 = it * piece, o1 = o0 + piece < n ? o0 + piece : n;
            for (int64_t o = o0; o < o1; o++) y[o * sy] = bias ? bias[o * sbias] : 0.0f;
            tsi_gemv_rows_f32(wide, k, x, w, ldw, y, sy, o0, o1);
        });
    return true;
}
