/* qgemm_avx2.c — the 256-bit variants of the int8 GEMM (qgemm_vnni.h's panels and epilogue):
 * AVX-VNNI (vpdpbusd ymm, VEX: Alder Lake, Zen 5) and AVX2 alone (vpmaddubsw + vpmaddwd). Both give
 * the exact int32 sums of the AVX512-VNNI and portable kernels.
 *
 * A panel's step (16 columns by 4 bytes of k, 64 bytes) is two ymm registers, 8 columns each; an
 * activation's 4 bytes are broadcast to every lane. vpmaddubsw adds two unsigned-by-signed products
 * into int16 with saturation (255 * -128 * 2 = -65280 does not fit), so the activation bytes are
 * split into their low 7 bits (products of at most 127 * 128: a pair fits int16) and their top bit
 * (0 or 1): sum = madd(lo x w, 1) + madd(hi x w, 128), each int16 pair exact and each int32 exact.
 * Tiles: AVX-VNNI 6 rows by a panel (12 accumulators), AVX2 4 rows by a panel (8 accumulators,
 * the split broadcasts and the products in the other registers). Rows past mr read row r0
 * (computed, never handed on). */
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/qgemm_vnni.h"
#include "backend/omp_if.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define TS_HAVE_QGEMM256 1
#include <immintrin.h>
#define TS_Q_AVX2    __attribute__((target(TS_ISA_TARGET_AVX2)))
#define TS_Q_AVXVNNI __attribute__((target(TS_ISA_TARGET_AVX2 ",avxvnni")))
#endif

#ifdef TS_HAVE_QGEMM256
static inline int32_t bytes4(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

#define TS_Q6_ROW(r)                                                                               \
    do {                                                                                           \
        const __m256i av = _mm256_set1_epi32(bytes4(x0 + off[r] + 4 * s));                         \
        c##r##0 = _mm256_dpbusd_avx_epi32(c##r##0, av, w0);                                        \
        c##r##1 = _mm256_dpbusd_avx_epi32(c##r##1, av, w1);                                        \
    } while (0)
#define TS_Q_STORE(r)                                                                              \
    do {                                                                                           \
        _mm256_storeu_si256((__m256i *)(void *)raw[r], c##r##0);                                   \
        _mm256_storeu_si256((__m256i *)(void *)(raw[r] + 8), c##r##1);                             \
    } while (0)

/* rows r0 .. r0 + mr (mr <= 6) by panel p */
TS_Q_AVXVNNI static void block6_vnni(const ts_qlinear_args *a, const uint8_t *xp, const int8_t *wp,
                                     int64_t kp, int64_t r0, int64_t mr, int64_t p, int32_t x_zp,
                                     const int64_t *xsum, const int64_t *wsum,
                                     tsi_qgemm_epilogue epi) {
    const uint8_t *x0 = xp + r0 * kp;
    int64_t off[6];
    for (int r = 0; r < 6; r++) off[r] = r < mr ? r * kp : 0;
    const int8_t *b = wp + p * kp * 16;
    const __m256i z = _mm256_setzero_si256();
    __m256i c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z,
            c41 = z, c50 = z, c51 = z;
    for (int64_t s = 0; s < kp / 4; s++) {
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)(const void *)(b + s * 64)),
                      w1 = _mm256_loadu_si256((const __m256i *)(const void *)(b + s * 64 + 32));
        TS_Q6_ROW(0);
        TS_Q6_ROW(1);
        TS_Q6_ROW(2);
        TS_Q6_ROW(3);
        TS_Q6_ROW(4);
        TS_Q6_ROW(5);
    }
    int32_t raw[6][16];
    TS_Q_STORE(0);
    TS_Q_STORE(1);
    TS_Q_STORE(2);
    TS_Q_STORE(3);
    TS_Q_STORE(4);
    TS_Q_STORE(5);
    const int64_t n0 = p * 16, nn = a->n - n0 < 16 ? a->n - n0 : 16;
    epi(a, r0, mr, n0, nn, raw[0], 16, x_zp, xsum, wsum);
}

/* one row of the AVX2 tile: the activation's low 7 bits and its top bit, each by both halves */
#define TS_Q4_ROW(r)                                                                               \
    do {                                                                                           \
        const int32_t v = bytes4(x0 + off[r] + 4 * s);                                             \
        const __m256i lo = _mm256_set1_epi32(v & 0x7f7f7f7f),                                      \
                      hi = _mm256_set1_epi32((int32_t)(((uint32_t)v >> 7) & 0x01010101u));         \
        c##r##0 = _mm256_add_epi32(                                                                \
            c##r##0, _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, w0), one),        \
                                      _mm256_madd_epi16(_mm256_maddubs_epi16(hi, w0), h128)));     \
        c##r##1 = _mm256_add_epi32(                                                                \
            c##r##1, _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, w1), one),        \
                                      _mm256_madd_epi16(_mm256_maddubs_epi16(hi, w1), h128)));     \
    } while (0)

/* rows r0 .. r0 + mr (mr <= 4) by panel p */
TS_Q_AVX2 static void block4_avx2(const ts_qlinear_args *a, const uint8_t *xp, const int8_t *wp,
                                  int64_t kp, int64_t r0, int64_t mr, int64_t p, int32_t x_zp,
                                  const int64_t *xsum, const int64_t *wsum,
                                  tsi_qgemm_epilogue epi) {
    const uint8_t *x0 = xp + r0 * kp;
    int64_t off[4];
    for (int r = 0; r < 4; r++) off[r] = r < mr ? r * kp : 0;
    const int8_t *b = wp + p * kp * 16;
    const __m256i z = _mm256_setzero_si256(), one = _mm256_set1_epi16(1),
                  h128 = _mm256_set1_epi16(128);
    __m256i c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z;
    for (int64_t s = 0; s < kp / 4; s++) {
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)(const void *)(b + s * 64)),
                      w1 = _mm256_loadu_si256((const __m256i *)(const void *)(b + s * 64 + 32));
        TS_Q4_ROW(0);
        TS_Q4_ROW(1);
        TS_Q4_ROW(2);
        TS_Q4_ROW(3);
    }
    int32_t raw[4][16];
    TS_Q_STORE(0);
    TS_Q_STORE(1);
    TS_Q_STORE(2);
    TS_Q_STORE(3);
    const int64_t n0 = p * 16, nn = a->n - n0 < 16 ? a->n - n0 : 16;
    epi(a, r0, mr, n0, nn, raw[0], 16, x_zp, xsum, wsum);
}
#undef TS_Q6_ROW
#undef TS_Q4_ROW
#undef TS_Q_STORE
#endif

void tsi_qgemm_256_run(bool avxvnni, const ts_qlinear_args *a, const uint8_t *xp, const int8_t *wp,
                       int64_t kp, int32_t x_zp, const int64_t *xsum, const int64_t *wsum,
                       tsi_qgemm_epilogue epi) {
#ifdef TS_HAVE_QGEMM256
    const int64_t M = a->m, panels = (a->n + 15) / 16, rows = avxvnni ? 6 : 4;
    const int64_t mb = (M + rows - 1) / rows;
    /* a panel (kp * 16 bytes) kept in L1 down the row blocks */
    TS_PARALLEL_FOR_IF(
        M * a->n * a->k >= ((int64_t)1 << 18) && mb * panels > 1,
        for (int64_t t = 0; t < mb * panels; t++) {
            const int64_t p = t / mb, r0 = (t % mb) * rows;
            const int64_t mr = M - r0 < rows ? M - r0 : rows;
            if (avxvnni)
                block6_vnni(a, xp, wp, kp, r0, mr, p, x_zp, xsum + r0, wsum, epi);
            else
                block4_avx2(a, xp, wp, kp, r0, mr, p, x_zp, xsum + r0, wsum, epi);
        });
#else
    (void)avxvnni, (void)a, (void)xp, (void)wp, (void)kp, (void)x_zp, (void)xsum, (void)wsum,
        (void)epi;
#endif
}
