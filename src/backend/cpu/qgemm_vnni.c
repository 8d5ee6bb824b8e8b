/* qgemm_vnni.c — the AVX512-VNNI int8 GEMM (qgemm_vnni.h): blocks of 4 rows by 32 columns, eight
 * zmm accumulators, one vpdpbusd per row and panel for each 4 bytes of k. */
#include "backend/cpu/qgemm_vnni.h"

#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/omp_if.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define TS_HAVE_VNNI_KERNEL 1
#include <immintrin.h>
#define TS_VNNI __attribute__((target(TS_ISA_TARGET_AVX512 ",avx512vnni")))
#endif

bool tsi_qgemm_vnni_available(void) {
#ifdef TS_HAVE_VNNI_KERNEL
    static int has = -1; /* benign race: every thread computes the same answer */
    if (has < 0) has = __builtin_cpu_supports("avx512vnni") ? 1 : 0;
    return has && ts_cpu_isa_get() == TS_ISA_AVX512;
#else
    return false;
#endif
}

void tsi_qgemm_vnni_pack_w(const int8_t *w, int64_t n, int64_t k, int8_t *wp) {
    const int64_t kp = (k + 3) & ~(int64_t)3, np = (n + 15) & ~(int64_t)15;
    memset(wp, 0, (size_t)np * (size_t)kp);
    for (int64_t c = 0; c < n; c++) {
        int8_t *panel = wp + (c / 16) * kp * 16 + (c % 16) * 4;
        for (int64_t i = 0; i < k; i++) panel[(i / 4) * 64 + (i % 4)] = w[c * k + i];
    }
}

#ifdef TS_HAVE_VNNI_KERNEL
/* rows r0 .. r0 + mr (mr <= 4) by panels p0 and p0 + 1 (np2: how many of them exist, 1 or 2) */
TS_VNNI static void block(const ts_qlinear_args *a, const uint8_t *xp, const int8_t *wp, int64_t kp,
                          int64_t r0, int64_t mr, int64_t p0, int np2, int32_t x_zp,
                          const int64_t *xsum /* [mr]: the rows' byte sums */, const int64_t *wsum,
                          tsi_qgemm_epilogue epi) {
    const uint8_t *x0 = xp + r0 * kp, *x1 = x0 + (mr > 1 ? kp : 0),
                  *x2 = x0 + (mr > 2 ? 2 * kp : 0), *x3 = x0 + (mr > 3 ? 3 * kp : 0);
    const int8_t *b0 = wp + p0 * kp * 16, *b1 = np2 > 1 ? b0 + kp * 16 : b0;
    __m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
            c30 = c00, c31 = c00;
    for (int64_t s = 0; s < kp / 4; s++) {
        const __m512i w0 = _mm512_loadu_si512(b0 + s * 64), w1 = _mm512_loadu_si512(b1 + s * 64);
        int32_t v;
        memcpy(&v, x0 + 4 * s, 4);
        __m512i av = _mm512_set1_epi32(v);
        c00 = _mm512_dpbusd_epi32(c00, av, w0);
        c01 = _mm512_dpbusd_epi32(c01, av, w1);
        memcpy(&v, x1 + 4 * s, 4);
        av = _mm512_set1_epi32(v);
        c10 = _mm512_dpbusd_epi32(c10, av, w0);
        c11 = _mm512_dpbusd_epi32(c11, av, w1);
        memcpy(&v, x2 + 4 * s, 4);
        av = _mm512_set1_epi32(v);
        c20 = _mm512_dpbusd_epi32(c20, av, w0);
        c21 = _mm512_dpbusd_epi32(c21, av, w1);
        memcpy(&v, x3 + 4 * s, 4);
        av = _mm512_set1_epi32(v);
        c30 = _mm512_dpbusd_epi32(c30, av, w0);
        c31 = _mm512_dpbusd_epi32(c31, av, w1);
    }
    int32_t raw[4][32];
    _mm512_storeu_si512(raw[0], c00);
    _mm512_storeu_si512(raw[0] + 16, c01);
    _mm512_storeu_si512(raw[1], c10);
    _mm512_storeu_si512(raw[1] + 16, c11);
    _mm512_storeu_si512(raw[2], c20);
    _mm512_storeu_si512(raw[2] + 16, c21);
    _mm512_storeu_si512(raw[3], c30);
    _mm512_storeu_si512(raw[3] + 16, c31);
    const int64_t n0 = p0 * 16, nn0 = a->n - n0, nn = nn0 < 16 * np2 ? nn0 : 16 * np2;
    for (int64_t r = 0; r < mr; r++) epi(a, r0 + r, n0, nn, raw[r], x_zp, xsum[r], wsum);
}
#endif

void tsi_qgemm_vnni_run(const ts_qlinear_args *a, const uint8_t *xp, const int8_t *wp, int64_t kp,
                        int32_t x_zp, const int64_t *xsum, const int64_t *wsum,
                        tsi_qgemm_epilogue epi) {
#ifdef TS_HAVE_VNNI_KERNEL
    const int64_t M = a->m, panels = (a->n + 15) / 16;
    const int64_t mb = (M + 3) / 4, nb = (panels + 1) / 2;
    TS_PARALLEL_FOR_IF(
        M * a->n * a->k >= ((int64_t)1 << 18) && mb * nb > 1,
        for (int64_t t = 0; t < mb * nb; t++) {
            const int64_t i = t / nb, j = t % nb, r0 = i * 4;
            const int64_t mr = M - r0 < 4 ? M - r0 : 4;
            block(a, xp, wp, kp, r0, mr, 2 * j, panels - 2 * j >= 2 ? 2 : 1, x_zp, xsum + r0, wsum,
                  epi);
        });
#else
    (void)a, (void)xp, (void)wp, (void)kp, (void)x_zp, (void)xsum, (void)wsum, (void)epi;
#endif
}
