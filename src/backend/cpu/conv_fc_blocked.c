/* conv_fc_blocked.c — convolutions of 1x1 images on channel-blocked activations
 * (conv_fc_blocked.h): the squeeze-excitation's two fully connected layers, which MobileNets write
 * as 1x1 convolutions of the pooled [N, C, 1, 1] vector. In the blocked layout such an image is
 * its C channels in order (then the padding lanes), so each output is one dot product of a weight
 * row [O, C] with it: four rows at a time in vectors of 16 (AVX-512) or 8 (AVX2), x loaded once
 * for the four, the tail of C masked by a zero-filled copy. Then bias, the activation as the
 * composed ops round it (kern_conv.c's ts_conv_act_f32), and the lanes past O set to 0. oneDNN ran
 * these as 1x1 convolutions of a single pixel: 16-19 us for 576 x 144 (330 KB of weights), what a
 * dot product streaming the rows takes in a few. */
#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

#include "backend/cpu/conv_fc_blocked.h"

#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/omp_if.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TS_FC_X86 1
#endif

bool ts_conv_fc_blocked_takes(const ts_cgeom *g, int blk) {
#ifdef TS_FC_X86
    return (blk == 16 || blk == 8) && g->g == 1 && g->h == 1 && g->w == 1 && g->kh == 1 &&
           g->kw == 1 && g->ph == 0 && g->pw == 0 && g->oh == 1 && g->ow == 1 && g->n > 0 &&
           g->c > 0 && g->o > 0;
#else
    (void)g, (void)blk;
    return false;
#endif
}

#ifdef TS_FC_X86
#include <immintrin.h>

/* HSUM(v): the sum of a vector's lanes (halves added pairwise) */
#define DEFINE_FC(SFX, ATTR, V, L, HSUM)                                                           \
    /* y[o] for o in [o0, o1) of one image: x its C channels (readable up to a multiple of L) */   \
    ATTR static void rows_##SFX(const ts_cgeom *g, const float *x, const float *w, float *y,       \
                                int64_t o0, int64_t o1) {                                          \
        const int64_t c = g->c, cv = c / L * L;                                                    \
        V xt = {0}, wt[4];                                                                         \
        memcpy(&xt, x + cv, sizeof(float) * (size_t)(c - cv));                                     \
        for (int64_t o = o0; o < o1; o += 4) {                                                     \
            const int nr = o1 - o < 4 ? (int)(o1 - o) : 4;                                         \
            const float *wr[4];                                                                    \
            for (int r = 0; r < 4; r++) wr[r] = w + (o + (r < nr ? r : 0)) * c;                    \
            V a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, xv, v0, v1, v2, v3;                          \
            for (int64_t i = 0; i < cv; i += L) {                                                  \
                memcpy(&xv, x + i, sizeof xv);                                                     \
                memcpy(&v0, wr[0] + i, sizeof xv);                                                 \
                memcpy(&v1, wr[1] + i, sizeof xv);                                                 \
                memcpy(&v2, wr[2] + i, sizeof xv);                                                 \
                memcpy(&v3, wr[3] + i, sizeof xv);                                                 \
                a0 += v0 * xv, a1 += v1 * xv, a2 += v2 * xv, a3 += v3 * xv;                        \
            }                                                                                      \
            if (cv < c) {                                                                          \
                for (int r = 0; r < 4; r++) {                                                      \
                    wt[r] = (V){0};                                                                \
                    memcpy(&wt[r], wr[r] + cv, sizeof(float) * (size_t)(c - cv));                  \
                }                                                                                  \
                a0 += wt[0] * xt, a1 += wt[1] * xt, a2 += wt[2] * xt, a3 += wt[3] * xt;            \
            }                                                                                      \
            const float s[4] = {HSUM(a0), HSUM(a1), HSUM(a2), HSUM(a3)};                           \
            for (int r = 0; r < nr; r++) y[o + r] += s[r];                                         \
        }                                                                                          \
    }

typedef float ts_fc8f __attribute__((vector_size(32)));
typedef float ts_fc16f __attribute__((vector_size(64)));
#define HSUM8(v)                                                                                   \
    _mm_cvtss_f32(hsum4(                                                                           \
        _mm_add_ps(_mm256_castps256_ps128((__m256)(v)), _mm256_extractf128_ps((__m256)(v), 1))))
#define HSUM16(v) _mm512_reduce_add_ps((__m512)(v))
/* the four lanes of a 128-bit vector summed into lane 0 */
__attribute__((target(TS_ISA_TARGET_AVX2))) static inline __m128 hsum4(__m128 a) {
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    return _mm_add_ss(a, _mm_movehdup_ps(a));
}
DEFINE_FC(avx2, __attribute__((target(TS_ISA_TARGET_AVX2))), ts_fc8f, 8, HSUM8)
DEFINE_FC(avx512, __attribute__((target(TS_ISA_TARGET_AVX512))), ts_fc16f, 16, HSUM16)
#endif

/* Work from this many multiply-adds on (a 1000 x 1024 layer) is cut across threads by rows */
enum { PARALLEL_MIN_MACS = 1 << 19, ROWS_A_PIECE = 64 };

bool ts_conv_fc_blocked(const ts_cgeom *g, int blk, float *y, const float *x, const float *w,
                        const float *b) {
    if (!ts_conv_fc_blocked_takes(g, blk)) return false;
#ifdef TS_FC_X86
    const int64_t cbl = (g->c + blk - 1) / blk * blk, obl = (g->o + blk - 1) / blk * blk;
    const int64_t pieces = (g->o + ROWS_A_PIECE - 1) / ROWS_A_PIECE, items = g->n * pieces;
    const bool wide = blk == 16;
    for (int64_t n = 0; n < g->n; n++) {
        float *yn = y + n * obl;
        for (int64_t o = 0; o < obl; o++) yn[o] = o < g->o && b ? b[o] : 0.0f;
    }
    TS_PARALLEL_FOR_IF(
        g->n * g->c * g->o >= PARALLEL_MIN_MACS && items > 1,
        for (int64_t it = 0; it < items; it++) {
            const int64_t n = it / pieces, o0 = it % pieces * ROWS_A_PIECE;
            const int64_t o1 = o0 + ROWS_A_PIECE < g->o ? o0 + ROWS_A_PIECE : g->o;
            if (wide)
                rows_avx512(g, x + n * cbl, w, y + n * obl, o0, o1);
            else
                rows_avx2(g, x + n * cbl, w, y + n * obl, o0, o1);
        });
    if (g->act != TS_CONV_ACT_NONE)
        for (int64_t n = 0; n < g->n; n++) ts_conv_act_f32(g, y + n * obl, g->o);
    return true;
#else
    (void)y, (void)x, (void)w, (void)b;
    return false;
#endif
}
