/* conv_dw_blocked.c — depthwise convolutions on channel-blocked activations (conv_dw_blocked.h):
 * x [N, ceil(C/B), H, W, B] into y [N, ceil(C/B), OH, OW, B], one channel to a lane, so every tap
 * is one vector FMA of 16 (AVX-512) or 8 (AVX2) channels with no broadcast and no gather.
 *
 * Work items are (image, channel block, band of output rows); a tile is NW outputs of one row (7
 * where OW is a multiple of 7, as in every MobileNet, else 8): NW sums in registers starting from
 * the bias, each input vector of a kernel row loaded once and added into every sum it reaches (K x
 * K taps, K 3, 5 or 7, stride 1 or 2, constants at each call so the loops unroll), then the fused
 * activation (kern_conv_act_vec.h) and the lanes past C set to 0 (oneDNN's padding: the next
 * kernels may read them). The padding is never copied: kernel rows outside x are skipped, and in
 * the tiles that reach past x's left or right edge (only there) a column outside loads a zero
 * vector. (A zero-padded copy of each plane, the first version, cost 3.4% of MobileNetV3-Small
 * in memmove.) */
#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

#include "backend/cpu/conv_dw_blocked.h"

#include <string.h>

#include "backend/cpu/conv_select.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/kern_conv_act_vec.h"
#include "backend/omp_if.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TS_DW_X86 1
#endif

enum { MAX_K = 7, MAX_NW = 8 };

bool tsi_conv_dw_blocked_takes(const ts_cgeom *g, int blk) {
#ifdef TS_DW_X86
    return (blk == 16 || blk == 8) && g->g == g->c && g->cg == 1 && g->og == 1 && g->kh == g->kw &&
           (g->kh == 3 || g->kh == 5 || g->kh == 7) && g->sh == g->sw &&
           (g->sh == 1 || g->sh == 2) && g->dh == 1 && g->dw == 1 && g->ph >= 0 && g->pw >= 0 &&
           g->ph < g->kh && g->pw < g->kw && g->oh > 0 && g->ow > 0 && g->n > 0;
#else
    (void)g, (void)blk;
    return false;
#endif
}

#ifdef TS_DW_X86
#define TS_INLINE inline __attribute__((always_inline))
/* the tile's loops unrolled whole: the taps become constants, the sums registers */
#define UNROLL _Pragma("GCC unroll 64")

/* One tile: NW outputs of output row oh from column o0, weights wv [K][K] vectors. Input vector j
 * of kernel row i feeds output t through tap j - t*S; vectors outside x read as zero (the
 * padding): a kernel row outside is skipped, a column outside loads from zero. */
#define DEFINE_DW(SFX, ATTR, V, VI, B)                                                             \
    TS_DEFINE_CONV_ACT_VEC(act_##SFX, ATTR, V, VI)                                                 \
    ATTR static TS_INLINE void tile_##SFX(                                                         \
        const ts_cgeom *g, const float *xc, int64_t ih0, int64_t iw0, const V *wv, V bias,         \
        VI keep, float *y, int64_t len, const int K, const int S, const int NW, const bool EDGE) { \
        static const float zero[B];                                                                \
        V acc[MAX_NW];                                                                             \
        UNROLL for (int t = 0; t < NW; t++) acc[t] = bias;                                         \
        UNROLL for (int i = 0; i < K; i++) {                                                       \
            if (ih0 + i < 0 || ih0 + i >= g->h) continue;                                          \
            const float *r = xc + (ih0 + i) * g->w * B;                                            \
            UNROLL for (int j = 0; j < (NW - 1) * S + K; j++) {                                    \
                const int64_t c = iw0 + j;                                                         \
                V xv;                                                                              \
                memcpy(&xv, !EDGE || (c >= 0 && c < g->w) ? r + c * B : zero, sizeof xv);          \
                UNROLL for (int t = 0; t < NW; t++) {                                              \
                    const int tap = j - t * S;                                                     \
                    if (tap >= 0 && tap < K) acc[t] += xv * wv[i * K + tap];                       \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        UNROLL for (int t = 0; t < NW; t++) {                                                      \
            if (g->act != TS_CONV_ACT_NONE) acc[t] = act_##SFX(g, acc[t]);                         \
            acc[t] = (V)((VI)acc[t] & keep);                                                       \
        }                                                                                          \
        if (len == NW) {                                                                           \
            memcpy(y, acc, sizeof(V) * (size_t)NW);                                                \
        } else {                                                                                   \
            UNROLL for (int t = 0; t < NW; t++) if (t < len)                                       \
                memcpy(y + t * B, &acc[t], sizeof(V));                                             \
        }                                                                                          \
    }                                                                                              \
    /* output rows [r0, r1) of channel block cb of image n */                                      \
    ATTR static void band_##SFX(const ts_cgeom *g, const float *x, const float *w, const float *b, \
                                float *y, int64_t n, int64_t cb, int64_t r0, int64_t r1) {         \
        const int64_t ncb = (g->c + B - 1) / B, kk = g->kh * g->kw;                                \
        const int64_t nw = g->ow % 7 == 0 ? 7 : 8;                                                 \
        V wv[MAX_K * MAX_K], bias = {0};                                                           \
        VI keep;                                                                                   \
        for (int l = 0; l < B; l++) {                                                              \
            const int64_t c = cb * B + l;                                                          \
            for (int64_t t = 0; t < kk; t++) wv[t][l] = c < g->c ? w[c * kk + t] : 0.0f;           \
            bias[l] = c < g->c && b ? b[c] : 0.0f;                                                 \
            keep[l] = c < g->c ? -1 : 0;                                                           \
        }                                                                                          \
        const float *xc = x + (n * ncb + cb) * g->h * g->w * B;                                    \
        float *yc = y + (n * ncb + cb) * g->oh * g->ow * B;                                        \
        const int K = (int)g->kh, S = (int)g->sh;                                                  \
        for (int64_t oh = r0; oh < r1; oh++)                                                       \
            for (int64_t o0 = 0; o0 < g->ow; o0 += nw) {                                           \
                const int64_t len = g->ow - o0 < nw ? g->ow - o0 : nw;                             \
                const int64_t ih0 = oh * S - g->ph, iw0 = o0 * S - g->pw;                          \
                const bool edge = iw0 < 0 || iw0 + (nw - 1) * S + K > g->w;                        \
                float *yt = yc + (oh * g->ow + o0) * B;                                            \
                TILE_CASES(SFX, 3, 1)                                                              \
                TILE_CASES(SFX, 3, 2)                                                              \
                TILE_CASES(SFX, 5, 1)                                                              \
                TILE_CASES(SFX, 5, 2)                                                              \
                TILE_CASES(SFX, 7, 1)                                                              \
                TILE_CASES(SFX, 7, 2)                                                              \
            }                                                                                      \
    }

/* the tile of kernel KC and stride SC, 7 or 8 outputs wide, where K, S and nw are those; the
 * columns tested only where the tile reaches past x's (the edges) */
#define TILE_CASES(SFX, KC, SC)                                                                    \
    if (K == KC && S == SC) {                                                                      \
        if (nw == 7 && edge)                                                                       \
            tile_##SFX(g, xc, ih0, iw0, wv, bias, keep, yt, len, KC, SC, 7, true);                 \
        else if (nw == 7)                                                                          \
            tile_##SFX(g, xc, ih0, iw0, wv, bias, keep, yt, len, KC, SC, 7, false);                \
        else if (edge)                                                                             \
            tile_##SFX(g, xc, ih0, iw0, wv, bias, keep, yt, len, KC, SC, 8, true);                 \
        else                                                                                       \
            tile_##SFX(g, xc, ih0, iw0, wv, bias, keep, yt, len, KC, SC, 8, false);                \
    }

typedef float ts_dw8f __attribute__((vector_size(32)));
typedef int32_t ts_dw8i __attribute__((vector_size(32)));
typedef float ts_dw16f __attribute__((vector_size(64)));
typedef int32_t ts_dw16i __attribute__((vector_size(64)));
DEFINE_DW(avx2, __attribute__((target(TS_ISA_TARGET_AVX2))), ts_dw8f, ts_dw8i, 8)
DEFINE_DW(avx512, __attribute__((target(TS_ISA_TARGET_AVX512))), ts_dw16f, ts_dw16i, 16)
#endif

/* Work below this many multiply-adds runs on one thread: a parallel region's start and join cost
 * about a microsecond, what 16k vector FMAs take on one core. */
#define PARALLEL_MIN_MACS (tsi_conv_limits_get()->dw_blocked_parallel_min_macs) /* 2^18 */

bool tsi_conv_dw_blocked(const ts_cgeom *g, int blk, float *y, const float *x, const float *w,
                         const float *b) {
    if (!tsi_conv_dw_blocked_takes(g, blk)) return false;
#ifdef TS_DW_X86
    const int64_t ncb = (g->c + blk - 1) / blk, planes = g->n * ncb;
    int nt = 1;
#ifdef TS_HAVE_OPENMP
    const int64_t macs = planes * blk * g->oh * g->ow * g->kh * g->kw;
    if (macs >= PARALLEL_MIN_MACS && !omp_in_parallel()) nt = omp_get_max_threads();
#endif
    /* at least 4 items a thread: each plane's rows cut into bands where planes are fewer */
    int64_t parts = planes >= 4 * nt ? 1 : (4 * nt + planes - 1) / planes;
    if (parts > g->oh) parts = g->oh;
    const int64_t band = (g->oh + parts - 1) / parts;
    parts = (g->oh + band - 1) / band;
    const int64_t items = planes * parts;
    const bool wide = blk == 16;
    TS_PARALLEL_FOR_IF(
        nt > 1, for (int64_t it = 0; it < items; it++) {
            const int64_t plane = it / parts, r0 = it % parts * band;
            const int64_t r1 = r0 + band < g->oh ? r0 + band : g->oh;
            if (wide)
                band_avx512(g, x, w, b, y, plane / ncb, plane % ncb, r0, r1);
            else
                band_avx2(g, x, w, b, y, plane / ncb, plane % ncb, r0, r1);
        });
    return true;
#else
    (void)y, (void)x, (void)w, (void)b;
    return false;
#endif
}
