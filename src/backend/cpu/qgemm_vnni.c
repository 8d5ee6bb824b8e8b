/* qgemm_vnni.c — the choice of the int8 GEMM's kernel and the AVX512-VNNI one (qgemm_vnni.h):
 * blocks of 4 rows by 32 columns, eight zmm accumulators, one vpdpbusd per row and panel for each 4
 * bytes of k; from 8 rows on, blocks of 8 rows by 48 columns (24 accumulators), each also
 * prefetching its share of the next column block's panels into L2 (a weight streamed from memory,
 * as BERT's 85 MB are at each run, is then there when that block starts). */
#include "backend/cpu/qgemm_vnni.h"

#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/omp_if.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define TS_HAVE_VNNI_KERNEL 1
#include <cpuid.h>
#include <immintrin.h>
#define TS_VNNI __attribute__((target(TS_ISA_TARGET_AVX512 ",avx512vnni")))
#endif

atomic_int tsi_qgemm_kind_cap = TSI_QGEMM_AVX512VNNI;

#ifdef TS_HAVE_VNNI_KERNEL
/* AVX-VNNI (vpdpbusd on ymm): CPUID leaf 7 sub-leaf 1, EAX bit 4, read directly (clang 14's
 * __builtin_cpu_supports has no "avxvnni"); the AVX2 check beside it covers the OS's YMM state */
static int cpu_has_avxvnni(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
    return (int)((a >> 4) & 1u);
}
#endif

tsi_qgemm_kind tsi_qgemm_kind_get(void) {
#ifdef TS_HAVE_VNNI_KERNEL
    static int has512 = -1, has256 = -1; /* benign race: every thread computes the same answer */
    if (has512 < 0) has512 = __builtin_cpu_supports("avx512vnni") ? 1 : 0;
    if (has256 < 0) has256 = cpu_has_avxvnni();
    const ts_cpu_isa isa = ts_cpu_isa_get();
    const int cap = atomic_load_explicit(&tsi_qgemm_kind_cap, memory_order_relaxed);
    if (isa == TS_ISA_AVX512 && has512 && cap >= TSI_QGEMM_AVX512VNNI) return TSI_QGEMM_AVX512VNNI;
    if (isa >= TS_ISA_AVX2 && has256 && cap >= TSI_QGEMM_AVXVNNI) return TSI_QGEMM_AVXVNNI;
    if (isa >= TS_ISA_AVX2 && cap >= TSI_QGEMM_AVX2) return TSI_QGEMM_AVX2;
    return TSI_QGEMM_PORTABLE;
#else
    return TSI_QGEMM_PORTABLE;
#endif
}

const char *tsi_qgemm_kind_name(tsi_qgemm_kind kind) {
    static const char *const names[] = {"portable", "avx2", "avxvnni", "avx512vnni"};
    return (unsigned)kind < 4 ? names[kind] : "?";
}

bool tsi_qgemm_vnni_available(void) { return tsi_qgemm_kind_get() == TSI_QGEMM_AVX512VNNI; }

void tsi_qgemm_run(tsi_qgemm_kind kind, const ts_qlinear_args *a, const uint8_t *xp,
                   const int8_t *wp, int64_t kp, int32_t x_zp, const int64_t *xsum,
                   const int64_t *wsum, tsi_qgemm_epilogue epi) {
    if (kind == TSI_QGEMM_AVX512VNNI)
        tsi_qgemm_vnni_run(a, xp, wp, kp, x_zp, xsum, wsum, epi);
    else
        tsi_qgemm_256_run(kind == TSI_QGEMM_AVXVNNI, a, xp, wp, kp, x_zp, xsum, wsum, epi);
}

void tsi_qgemm_vnni_pack_w(const int8_t *w, int64_t n, int64_t k, int8_t *wp) {
    tsi_qgemm_vnni_pack_w_strided((const uint8_t *)w, k, 1, 0, n, k, wp);
}

void tsi_qgemm_vnni_pack_w_strided(const uint8_t *w, int64_t sn, int64_t sk, uint8_t flip,
                                   int64_t n, int64_t k, int8_t *wp) {
    const int64_t kp = (k + 3) & ~(int64_t)3, np = (n + 15) & ~(int64_t)15;
    memset(wp, 0, (size_t)np * (size_t)kp);
#define TS_QP_AT(c, i) (wp + (c / 16) * kp * 16 + (c % 16) * 4 + (i / 4) * 64 + (i % 4))
    if (sk <= sn) { /* along k in memory: a column at a time */
        for (int64_t c = 0; c < n; c++)
            for (int64_t i = 0; i < k; i++) *TS_QP_AT(c, i) = (int8_t)(w[c * sn + i * sk] ^ flip);
    } else { /* a [k, n] weight: a row of k at a time */
        for (int64_t i = 0; i < k; i++)
            for (int64_t c = 0; c < n; c++) *TS_QP_AT(c, i) = (int8_t)(w[c * sn + i * sk] ^ flip);
    }
#undef TS_QP_AT
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
    epi(a, r0, mr, n0, nn, raw[0], 32, x_zp, xsum, wsum);
}
#endif

#ifdef TS_HAVE_VNNI_KERNEL
/* The wide block for M >= 8: rows r0 .. r0 + mr (mr <= 8) by panels p0 .. p0 + np3 (np3 <= 3),
 * 24 accumulators kept in registers (named: an array of them spills), per 4 bytes of k three
 * weight loads and eight broadcasts for 24 vpdpbusd (the 4 x 32 block: two and four for eight).
 * Rows past mr read row r0 and panels past np3 panel p0 (computed, never handed on). */
#define TS_QB_ROW(r)                                                                               \
    do {                                                                                           \
        int32_t v;                                                                                 \
        memcpy(&v, x0 + off[r] + 4 * s, 4);                                                        \
        const __m512i av = _mm512_set1_epi32(v);                                                   \
        c##r##0 = _mm512_dpbusd_epi32(c##r##0, av, w0);                                            \
        c##r##1 = _mm512_dpbusd_epi32(c##r##1, av, w1);                                            \
        c##r##2 = _mm512_dpbusd_epi32(c##r##2, av, w2);                                            \
    } while (0)
#define TS_QB_STORE(r)                                                                             \
    do {                                                                                           \
        _mm512_storeu_si512(raw[r], c##r##0);                                                      \
        _mm512_storeu_si512(raw[r] + 16, c##r##1);                                                 \
        _mm512_storeu_si512(raw[r] + 32, c##r##2);                                                 \
    } while (0)
TS_VNNI static void block8x48(const ts_qlinear_args *a, const uint8_t *xp, const int8_t *wp,
                              int64_t kp, int64_t r0, int64_t mr, int64_t p0, int np3, int32_t x_zp,
                              const int64_t *xsum, const int64_t *wsum, tsi_qgemm_epilogue epi,
                              const int8_t *pf, int64_t pf_lines) {
    const uint8_t *x0 = xp + r0 * kp;
    int64_t off[8];
    for (int r = 0; r < 8; r++) off[r] = r < mr ? r * kp : 0;
    const int8_t *b0 = wp + p0 * kp * 16, *b1 = np3 > 1 ? b0 + kp * 16 : b0,
                 *b2 = np3 > 2 ? b0 + 2 * kp * 16 : b0;
    const __m512i z = _mm512_setzero_si512();
    __m512i c00 = z, c01 = z, c02 = z, c10 = z, c11 = z, c12 = z, c20 = z, c21 = z, c22 = z,
            c30 = z, c31 = z, c32 = z, c40 = z, c41 = z, c42 = z, c50 = z, c51 = z, c52 = z,
            c60 = z, c61 = z, c62 = z, c70 = z, c71 = z, c72 = z;
    for (int64_t s = 0; s < kp / 4; s++) {
        const __m512i w0 = _mm512_loadu_si512(b0 + s * 64), w1 = _mm512_loadu_si512(b1 + s * 64),
                      w2 = _mm512_loadu_si512(b2 + s * 64);
        if (s < pf_lines) _mm_prefetch((const char *)(pf + s * 64), _MM_HINT_T1);
        TS_QB_ROW(0);
        TS_QB_ROW(1);
        TS_QB_ROW(2);
        TS_QB_ROW(3);
        TS_QB_ROW(4);
        TS_QB_ROW(5);
        TS_QB_ROW(6);
        TS_QB_ROW(7);
    }
    int32_t raw[8][48];
    TS_QB_STORE(0);
    TS_QB_STORE(1);
    TS_QB_STORE(2);
    TS_QB_STORE(3);
    TS_QB_STORE(4);
    TS_QB_STORE(5);
    TS_QB_STORE(6);
    TS_QB_STORE(7);
    const int64_t n0 = p0 * 16, nn0 = a->n - n0, nn = nn0 < 16 * np3 ? nn0 : 16 * np3;
    epi(a, r0, mr, n0, nn, raw[0], 48, x_zp, xsum, wsum);
}
#undef TS_QB_ROW
#undef TS_QB_STORE
#endif

void tsi_qgemm_vnni_run(const ts_qlinear_args *a, const uint8_t *xp, const int8_t *wp, int64_t kp,
                        int32_t x_zp, const int64_t *xsum, const int64_t *wsum,
                        tsi_qgemm_epilogue epi) {
#ifdef TS_HAVE_VNNI_KERNEL
    const int64_t M = a->m, panels = (a->n + 15) / 16;
    if (M >= 8) { /* 8 x 48 blocks, a column block's weights reused down the rows */
        const int64_t mb8 = (M + 7) / 8, nb3 = (panels + 2) / 3;
        TS_PARALLEL_FOR_IF(
            M * a->n * a->k >= ((int64_t)1 << 18) && mb8 * nb3 > 1,
            for (int64_t t = 0; t < mb8 * nb3; t++) {
                const int64_t j = t / mb8, i = t % mb8, r0 = i * 8;
                const int64_t mr = M - r0 < 8 ? M - r0 : 8, left = panels - 3 * j;
                /* the next column block's panels (contiguous) into L2, a share per row block: a
                 * weight streamed from memory is not waited for when the block starts */
                const int64_t nleft = left - 3 < 3 ? left - 3 : 3;
                const int64_t lines = nleft > 0 ? nleft * kp * 16 / 64 : 0;
                const int64_t chunk = (lines + mb8 - 1) / mb8, first = i * chunk;
                const int64_t count = lines - first < chunk ? lines - first : chunk;
                block8x48(a, xp, wp, kp, r0, mr, 3 * j, left >= 3 ? 3 : (int)left, x_zp, xsum + r0,
                          wsum, epi, wp + (3 * j + 3) * kp * 16 + first * 64,
                          count > 0 ? count : 0);
            });
        return;
    }
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
