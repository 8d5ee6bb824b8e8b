/* kern_conv_direct.c — im2col-free f32 convolution for few outputs per group and unit horizontal
 * stride: register-blocked vector loops along output rows, built per ISA (AVX-512, AVX2 + FMA,
 * portable 4-lane vectors) and picked by ts_cpu_isa_get(). */
/* The library is built for the baseline ISA, so the kernels carry target attributes; ISO C mode
 * turns off FMA contraction, which they need for full speed. */
#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/conv_select.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/kern_conv.h"
#include "backend/cpu/kern_conv_act_vec.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TS_CONV_X86 1
#endif

struct ts_conv_direct {
    int vl, ob; /* vector width; outputs per block of the forward kernel (the packing) */
    void (*fwd)(const ts_cgeom *g, const float *x, const float *wpk, const float *b, float *y,
                float *xp);
    void (*wgt)(const ts_cgeom *g, const float *gy, const float *x, float *gw, float *xp, bool acc);
};

/* One group's input [cg, h, w] zero-padded into [cg, hp, ws]; ws leaves 2*vl spare columns so the
 * vector loads of a row never leave the buffer. */
static int64_t pad_stride(const ts_cgeom *g, int vl) { return g->w + 2 * g->pw + 2 * vl; }
static void pad_input(const ts_cgeom *g, int vl, const float *x, float *xp) {
    const int64_t hp = g->h + 2 * g->ph, ws = pad_stride(g, vl);
    for (int64_t c = 0; c < g->cg; c++)
        for (int64_t iy = 0; iy < hp; iy++) {
            float *d = xp + (c * hp + iy) * ws;
            const int64_t sy = iy - g->ph;
            if (sy < 0 || sy >= g->h) {
                memset(d, 0, sizeof(float) * (size_t)ws);
                continue;
            }
            const float *r = x + (c * g->h + sy) * g->w;
            for (int64_t ix = 0; ix < g->pw; ix++) d[ix] = 0;
            for (int64_t ix = 0; ix < g->w; ix++) d[g->pw + ix] = r[ix];
            for (int64_t ix = g->pw + g->w; ix < ws; ix++) d[ix] = 0;
        }
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

#define TS_INLINE inline __attribute__((always_inline))

/* Forward: NOB output channels x NV vectors of output stay in registers while every (c, i, j)
 * tap adds a broadcast weight times shifted input, and the activation applies to them there. A
 * vector is VL outputs of one row; the output plane is cut into such pieces row by row and
 * consecutive pieces are paired, so narrow rows pair up instead of leaving a half-empty second
 * vector. NOB and NV are constants at each call site (see FWD_CASE), so the loops unroll without
 * guards. OB x 2 sums: 8 x 2 in AVX-512's 32 registers, 6 x 2 in AVX2's 16 (4 x 2 left the FMA
 * pipes idle: SimpleCNN's conv1 forward took 10.4 us an image, now 7.7). */
#define DEFINE_FWD(NAME, ATTR, V, VI, VL, OB)                                                      \
    TS_DEFINE_CONV_ACT_VEC(NAME##_act, ATTR, V, VI)                                                \
    ATTR static TS_INLINE void NAME##_tile(const ts_cgeom *g, const float *in0, const float *in1,  \
                                           int64_t cstride, int64_t ws, const float *wb,           \
                                           const float *bias, float *const *out,                   \
                                           const int64_t *len, const int NOB, const int NV) {      \
        V acc[OB][2];                                                                              \
        for (int ob = 0; ob < NOB; ob++)                                                           \
            for (int v = 0; v < NV; v++) acc[ob][v] = (V){0};                                      \
        const float *wr = wb;                                                                      \
        for (int64_t c = 0; c < g->cg; c++)                                                        \
            for (int64_t i = 0; i < g->kh; i++) {                                                  \
                const int64_t off = c * cstride + i * g->dh * ws;                                  \
                for (int64_t j = 0; j < g->kw; j++, wr += OB) {                                    \
                    V xv[2];                                                                       \
                    memcpy(&xv[0], in0 + off + j * g->dw, sizeof(V));                              \
                    if (NV > 1) memcpy(&xv[1], in1 + off + j * g->dw, sizeof(V));                  \
                    for (int ob = 0; ob < NOB; ob++)                                               \
                        for (int v = 0; v < NV; v++) acc[ob][v] += wr[ob] * xv[v];                 \
                }                                                                                  \
            }                                                                                      \
        for (int ob = 0; ob < NOB; ob++) /* the bias after the sum (decision 0047) */              \
            for (int v = 0; v < NV; v++) acc[ob][v] += bias[ob];                                   \
        if (g->act != TS_CONV_ACT_NONE)                                                            \
            for (int ob = 0; ob < NOB; ob++)                                                       \
                for (int v = 0; v < NV; v++) acc[ob][v] = NAME##_act(g, acc[ob][v]);               \
        for (int ob = 0; ob < NOB; ob++)                                                           \
            for (int v = 0; v < NV; v++) {                                                         \
                float *d = out[v] + ob * g->oh * g->ow;                                            \
                if (len[v] == VL) {                                                                \
                    memcpy(d, &acc[ob][v], sizeof(V));                                             \
                } else {         /* a constant-size copy keeps acc in registers */                 \
                    float t[VL]; /* short rows: a loop beats a memcpy call */                      \
                    memcpy(t, &acc[ob][v], sizeof(V));                                             \
                    for (int64_t l = 0; l < len[v]; l++) d[l] = t[l];                              \
                }                                                                                  \
            }                                                                                      \
    }                                                                                              \
    ATTR static void NAME(const ts_cgeom *g, const float *x, const float *wpk, const float *b,     \
                          float *y, float *xp) {                                                   \
        const int64_t hp = g->h + 2 * g->ph, ws = pad_stride(g, VL);                               \
        const int64_t taps = g->cg * g->kh * g->kw, nblk = (g->og + OB - 1) / OB;                  \
        const int64_t per_row = (g->ow + VL - 1) / VL, pieces = g->oh * per_row;                   \
        for (int64_t gi = 0; gi < g->g; gi++) {                                                    \
            pad_input(g, VL, x + gi * g->cg * g->h * g->w, xp);                                    \
            for (int64_t bi = 0; bi < nblk; bi++) {                                                \
                const int64_t o0 = gi * g->og + bi * OB;                                           \
                const int nob = (int)min64(OB, g->og - bi * OB);                                   \
                const float *wb = wpk + (gi * nblk + bi) * taps * OB;                              \
                float bias[OB];                                                                    \
                for (int ob = 0; ob < OB; ob++) bias[ob] = b && ob < nob ? b[o0 + ob] : 0.0f;      \
                for (int64_t q = 0; q < pieces; q += 2) {                                          \
                    const float *in[2];                                                            \
                    float *out[2];                                                                 \
                    int64_t len[2] = {0, 0};                                                       \
                    const bool two = q + 1 < pieces;                                               \
                    for (int v = 0; v < 2; v++) {                                                  \
                        const int64_t p = two || v == 0 ? q + v : q;                               \
                        const int64_t oy = p / per_row, ox = p % per_row * VL;                     \
                        in[v] = xp + oy * g->sh * ws + ox;                                         \
                        out[v] = y + (o0 * g->oh + oy) * g->ow + ox;                               \
                        len[v] = min64(VL, g->ow - ox);                                            \
                    }                                                                              \
                    switch (nob) { FWD_CASES(NAME##_tile, OB) }                                    \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

#define FWD_CASE(TILE, K)                                                                          \
    case K:                                                                                        \
        if (two)                                                                                   \
            TILE(g, in[0], in[1], hp *ws, ws, wb, bias, out, len, K, 2);                           \
        else                                                                                       \
            TILE(g, in[0], in[1], hp *ws, ws, wb, bias, out, len, K, 1);                           \
        break;
#define FWD_CASES6(TILE)    FWD_CASES4(TILE) FWD_CASE(TILE, 5) FWD_CASE(TILE, 6)
#define FWD_CASES4(TILE)    FWD_CASE(TILE, 1) FWD_CASE(TILE, 2) FWD_CASE(TILE, 3) FWD_CASE(TILE, 4)
#define FWD_CASES8(TILE)    FWD_CASES6(TILE) FWD_CASE(TILE, 7) FWD_CASE(TILE, 8)
#define FWD_CASES(TILE, OB) FWD_CASES##OB(TILE)

/* Weight gradient: for one (c, i) a NOB x NJ block of taps accumulates gy rows times shifted input
 * rows in registers over the whole image. gy comes from a copy whose rows are padded with zeros to
 * whole vectors, and in a row's last chunk the input lanes past the row are masked to zero, so no
 * product outside the image is formed (an infinite input there would otherwise give NaN). OBW
 * outputs per tile at most, and three taps when NOB x 3 sums, NOB gy and 3 input vectors fit in
 * NREG registers, else two: 16 ymm (or xmm) registers hold 3 x 3 tiles, not the 4 x 3 that
 * spilled. The loads go through ld_NAME into whole variables: memcpy straight into the arrays
 * made gcc's AVX2 code copy each vector to the stack in 16-byte halves and reload it whole, a
 * store-forwarding stall on every step (conv1 of SimpleCNN took 51 us an image, now 9.5). */
#define DEFINE_WGT(NAME, ATTR, V, VI, VL, OBW, NREG)                                               \
    /* halving tree: short dependency chains, a fixed order */                                     \
    ATTR static TS_INLINE float hsum_##NAME(V v) {                                                 \
        float t[VL];                                                                               \
        memcpy(t, &v, sizeof t);                                                                   \
        for (int w = VL / 2; w > 0; w /= 2)                                                        \
            for (int l = 0; l < w; l++) t[l] += t[l + w];                                          \
        return t[0];                                                                               \
    }                                                                                              \
    ATTR static TS_INLINE V ld_##NAME(const float *p) {                                            \
        V v;                                                                                       \
        memcpy(&v, p, sizeof v);                                                                   \
        return v;                                                                                  \
    }                                                                                              \
    ATTR static TS_INLINE void NAME##_tile(                                                        \
        const ts_cgeom *g, const float *xr0, int64_t ws, const float *gyb, int64_t growv,          \
        VI tmask, float *gw, int64_t gstride, bool accum, const int NOB, const int NJ) {           \
        const int64_t nch = growv / VL;                                                            \
        V acc[OBW][3];                                                                             \
        for (int ob = 0; ob < OBW; ob++) acc[ob][0] = acc[ob][1] = acc[ob][2] = (V){0};            \
        for (int64_t oy = 0; oy < g->oh; oy++) {                                                   \
            const float *xr = xr0 + oy * g->sh * ws, *gr = gyb + oy * growv;                       \
            for (int64_t ch = 0; ch < nch; ch++) {                                                 \
                V gv[OBW], xv[3];                                                                  \
                for (int ob = 0; ob < NOB; ob++)                                                   \
                    gv[ob] = ld_##NAME(gr + ob * g->oh * growv + ch * VL);                         \
                for (int jj = 0; jj < NJ; jj++) {                                                  \
                    xv[jj] = ld_##NAME(xr + ch * VL + jj * g->dw);                                 \
                    if (ch == nch - 1) xv[jj] = (V)((VI)xv[jj] & tmask);                           \
                }                                                                                  \
                for (int ob = 0; ob < NOB; ob++)                                                   \
                    for (int jj = 0; jj < NJ; jj++) acc[ob][jj] += gv[ob] * xv[jj];                \
            }                                                                                      \
        }                                                                                          \
        for (int ob = 0; ob < NOB; ob++)                                                           \
            for (int jj = 0; jj < NJ; jj++) {                                                      \
                const float s = hsum_##NAME(acc[ob][jj]);                                          \
                float *d = gw + ob * gstride + jj;                                                 \
                *d = accum ? *d + s : s;                                                           \
            }                                                                                      \
    }                                                                                              \
    ATTR static void NAME(const ts_cgeom *g, const float *gy, const float *x, float *gw,           \
                          float *xp, bool accum) {                                                 \
        const int64_t hp = g->h + 2 * g->ph, ws = pad_stride(g, VL);                               \
        const int64_t nch = (g->ow + VL - 1) / VL, tail = g->ow - (nch - 1) * VL;                  \
        const int64_t growv = nch * VL, gplane = g->oh * growv, taps = g->cg * g->kh * g->kw;      \
        float *gyp = xp + g->cg * hp * ws; /* [og, oh, growv] */                                   \
        VI tmask;                                                                                  \
        for (int l = 0; l < VL; l++) tmask[l] = l < tail ? -1 : 0;                                 \
        for (int64_t gi = 0; gi < g->g; gi++) {                                                    \
            pad_input(g, VL, x + gi * g->cg * g->h * g->w, xp);                                    \
            for (int64_t o = 0; o < g->og; o++)                                                    \
                for (int64_t oy = 0; oy < g->oh; oy++) {                                           \
                    float *d = gyp + (o * g->oh + oy) * growv;                                     \
                    const float *r = gy + ((gi * g->og + o) * g->oh + oy) * g->ow;                 \
                    for (int64_t l = 0; l < growv; l++) d[l] = l < g->ow ? r[l] : 0.0f;            \
                }                                                                                  \
            for (int64_t o0 = 0; o0 < g->og; o0 += OBW) {                                          \
                const int nob = (int)min64(OBW, g->og - o0);                                       \
                /* three taps per tile while the registers allow it */                             \
                const int64_t jb = 3 * nob + nob + 3 <= NREG ? 3 : 2;                              \
                const float *gyb = gyp + o0 * gplane;                                              \
                for (int64_t c = 0; c < g->cg; c++)                                                \
                    for (int64_t i = 0; i < g->kh; i++)                                            \
                        for (int64_t j0 = 0; j0 < g->kw; j0 += jb) {                               \
                            const float *xr0 = xp + (c * hp + i * g->dh) * ws + j0 * g->dw;        \
                            float *gwp =                                                           \
                                gw + (gi * g->og + o0) * taps + (c * g->kh + i) * g->kw + j0;      \
                            const int64_t nj = min64(jb, g->kw - j0);                              \
                            switch (nob) { WGT_CASES(NAME##_tile, OBW) }                           \
                        }                                                                          \
            }                                                                                      \
        }                                                                                          \
    }

#define WGT_CASE(TILE, K)                                                                          \
    case K:                                                                                        \
        if (nj == 3)                                                                               \
            TILE(g, xr0, ws, gyb, growv, tmask, gwp, taps, accum, K, 3);                           \
        else if (nj == 2)                                                                          \
            TILE(g, xr0, ws, gyb, growv, tmask, gwp, taps, accum, K, 2);                           \
        else                                                                                       \
            TILE(g, xr0, ws, gyb, growv, tmask, gwp, taps, accum, K, 1);                           \
        break;
#define WGT_CASES3(TILE) WGT_CASE(TILE, 1) WGT_CASE(TILE, 2) WGT_CASE(TILE, 3)
#define WGT_CASES4(TILE) WGT_CASES3(TILE) WGT_CASE(TILE, 4)
#define WGT_CASES8(TILE)                                                                           \
    WGT_CASES4(TILE) WGT_CASE(TILE, 5) WGT_CASE(TILE, 6) WGT_CASE(TILE, 7) WGT_CASE(TILE, 8)
#define WGT_CASES(TILE, OB) WGT_CASES##OB(TILE)

/* Weight gradient vectorised over output channels, for groups with a multiple of VL of them: for
 * a block of T taps, acc[t] holds the VL channels' sums; each output position adds its gy (one
 * vector of a transposed copy) times one broadcast input value per tap. No lane is wasted on
 * narrow rows and no horizontal sums are needed. */
#define DEFINE_WGT_O(NAME, ATTR, V, VL, T)                                                         \
    ATTR static void NAME(const ts_cgeom *g, const float *gy, const float *x, float *gw,           \
                          float *xp, bool accum) {                                                 \
        const int64_t hp = g->h + 2 * g->ph, ws = pad_stride(g, VL), plane = g->oh * g->ow;        \
        const int64_t taps = g->cg * g->kh * g->kw;                                                \
        float *gyt = xp + g->cg * hp * ws; /* [plane][VL] */                                       \
        for (int64_t gi = 0; gi < g->g; gi++) {                                                    \
            pad_input(g, VL, x + gi * g->cg * g->h * g->w, xp);                                    \
            for (int64_t o0 = 0; o0 < g->og; o0 += VL) {                                           \
                const float *gb = gy + (gi * g->og + o0) * plane;                                  \
                for (int64_t q = 0; q < plane; q++)                                                \
                    for (int l = 0; l < VL; l++) gyt[q * VL + l] = gb[l * plane + q];              \
                for (int64_t t0 = 0; t0 < taps; t0 += T) {                                         \
                    int64_t off[T];                                                                \
                    for (int k = 0; k < T; k++) { /* taps past the end read tap t0 again */        \
                        const int64_t t = t0 + k < taps ? t0 + k : t0;                             \
                        const int64_t c = t / (g->kh * g->kw), i = t / g->kw % g->kh;              \
                        off[k] = (c * hp + i * g->dh) * ws + t % g->kw * g->dw;                    \
                    }                                                                              \
                    V acc[T];                                                                      \
                    for (int k = 0; k < T; k++) acc[k] = (V){0};                                   \
                    for (int64_t oy = 0; oy < g->oh; oy++) {                                       \
                        const float *xr = xp + oy * g->sh * ws;                                    \
                        const float *gr = gyt + oy * g->ow * VL;                                   \
                        for (int64_t ox = 0; ox < g->ow; ox++) {                                   \
                            V gv;                                                                  \
                            memcpy(&gv, gr + ox * VL, sizeof gv);                                  \
                            const float *xq = xr + ox;                                             \
                            for (int k = 0; k < T; k++) acc[k] += gv * xq[off[k]];                 \
                        }                                                                          \
                    }                                                                              \
                    for (int k = 0; k < T && t0 + k < taps; k++) {                                 \
                        float tv[VL];                                                              \
                        memcpy(tv, &acc[k], sizeof tv);                                            \
                        for (int l = 0; l < VL; l++) {                                             \
                            float *d = gw + (gi * g->og + o0 + l) * taps + t0 + k;                 \
                            *d = accum ? *d + tv[l] : tv[l];                                       \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

/* The portable variant: 4-lane vectors (SSE2 on x86-64, NEON elsewhere), the same loops. */
typedef float ts_cv4f __attribute__((vector_size(16)));
typedef int32_t ts_cv4i __attribute__((vector_size(16)));
DEFINE_FWD(fwd_generic, , ts_cv4f, ts_cv4i, 4, 4)
DEFINE_WGT(wgt_generic, , ts_cv4f, ts_cv4i, 4, 4, 16)
DEFINE_WGT_O(wgto_generic, , ts_cv4f, 4, 8)

#ifdef TS_CONV_X86
#define TS_CONV_AVX2   __attribute__((target(TS_ISA_TARGET_AVX2)))
#define TS_CONV_AVX512 __attribute__((target(TS_ISA_TARGET_AVX512)))
typedef float ts_cv8f __attribute__((vector_size(32)));
typedef float ts_cv16f __attribute__((vector_size(64)));
typedef int32_t ts_cv8i __attribute__((vector_size(32)));
typedef int32_t ts_cv16i __attribute__((vector_size(64)));
DEFINE_FWD(fwd_avx2, TS_CONV_AVX2, ts_cv8f, ts_cv8i, 8, 6)
DEFINE_WGT(wgt_avx2, TS_CONV_AVX2, ts_cv8f, ts_cv8i, 8, 3, 16)
DEFINE_FWD(fwd_avx512, TS_CONV_AVX512, ts_cv16f, ts_cv16i, 16, 8)
DEFINE_WGT(wgt_avx512, TS_CONV_AVX512, ts_cv16f, ts_cv16i, 16, 8, 28)
DEFINE_WGT_O(wgto_avx2, TS_CONV_AVX2, ts_cv8f, 8, 8)
DEFINE_WGT_O(wgto_avx512, TS_CONV_AVX512, ts_cv16f, 16, 12)
#endif

/* Per ISA: the kernels, and the same with the weight gradient vectorised over output channels. */
static const ts_conv_direct directs[TS_ISA_COUNT][2] = {
    {{4, 4, fwd_generic, wgt_generic}, {4, 4, fwd_generic, wgto_generic}},
#ifdef TS_CONV_X86
    {{8, 6, fwd_avx2, wgt_avx2}, {8, 6, fwd_avx2, wgto_avx2}},
    {{16, 8, fwd_avx512, wgt_avx512}, {16, 8, fwd_avx512, wgto_avx512}},
#endif
};

static int forced = -1; /* -1 automatic, 0 none (im2col only), 1 + ISA */

static const ts_conv_direct *variant(void) {
    if (forced >= 0) return forced ? directs[forced - 1] : NULL;
#ifdef TS_CONV_X86
    return directs[ts_cpu_isa_get()];
#else
    return directs[TS_ISA_GENERIC];
#endif
}

bool tsi_conv_direct_force_isa(const char *name) {
    if (!name) return forced = -1, true;
    if (strcmp(name, "none") == 0) return forced = 0, true;
    ts_cpu_isa isa;
    if (!tsi_cpu_isa_parse(name, &isa) || isa > tsi_cpu_isa_host()) return false;
#ifndef TS_CONV_X86
    if (isa != TS_ISA_GENERIC) return false;
#endif
    forced = 1 + (int)isa;
    return true;
}

/* Beyond 16 outputs per group the GEMM's arithmetic dominates and BLAS does it better. The weight
 * gradient reduces each register tile once per image, which pays off only over rows that fill
 * their vectors well. */
const ts_conv_direct *tsi_conv_direct_for(const ts_cgeom *g, bool weight_grad) {
    const tsi_conv_limits *lim = tsi_conv_limits_get(); /* conv_select.c's table */
    if (g->sw != 1 || g->direct || g->og > lim->direct_max_outputs_per_group ||
        g->ow < lim->direct_min_row)
        return NULL;
    const ts_conv_direct *d = variant();
    if (!d || !weight_grad) return d;
    if (g->og % d->vl == 0) return d + 1;
    const int64_t lanes = (g->ow + d->vl - 1) / d->vl * d->vl;
    return 4 * g->ow >= 3 * lanes && g->oh * lanes >= 8 * d->vl ? d : NULL;
}

/* the padded input, then the padded (or transposed) gy of the weight gradient */
int64_t tsi_conv_direct_scratch(const ts_conv_direct *d, const ts_cgeom *g) {
    const int64_t growv = (g->ow + d->vl - 1) / d->vl * d->vl;
    return g->cg * (g->h + 2 * g->ph) * pad_stride(g, d->vl) +
           (g->og > d->vl ? g->og : d->vl) * g->oh * growv;
}

int64_t tsi_conv_direct_pack_floats(const ts_conv_direct *d, const ts_cgeom *g) {
    const int64_t ob = d->ob, nblk = (g->og + ob - 1) / ob;
    return g->g * nblk * g->cg * g->kh * g->kw * ob;
}

ts_conv_direct_layout tsi_conv_direct_layout_of(const ts_conv_direct *d, const ts_cgeom *g) {
    return (ts_conv_direct_layout){
        .ob = d->ob, .g = g->g, .og = g->og, .cg = g->cg, .kh = g->kh, .kw = g->kw};
}

/* [group][block][c][i][j][ob]: each tap's OB weights sit together for the broadcasts */
void tsi_conv_direct_pack_into(const ts_conv_direct *d, const ts_cgeom *g, const float *w,
                               float *p) {
    const int64_t ob = d->ob, nblk = (g->og + ob - 1) / ob, taps = g->cg * g->kh * g->kw;
    for (int64_t gi = 0; gi < g->g; gi++)
        for (int64_t bi = 0; bi < nblk; bi++)
            for (int64_t t = 0; t < taps; t++)
                for (int64_t k = 0; k < ob; k++) {
                    const int64_t o = bi * ob + k;
                    p[((gi * nblk + bi) * taps + t) * ob + k] =
                        o < g->og ? w[(gi * g->og + o) * taps + t] : 0.0f;
                }
}

float *tsi_conv_direct_pack(const ts_conv_direct *d, const ts_cgeom *g, const float *w) {
    float *p = malloc(sizeof(float) * (size_t)tsi_conv_direct_pack_floats(d, g) + 1);
    if (p) tsi_conv_direct_pack_into(d, g, w, p);
    return p;
}

void tsi_conv_direct_forward(const ts_conv_direct *d, const ts_cgeom *g, const float *x,
                             const float *wpk, const float *b, float *y, float *scratch) {
    d->fwd(g, x, wpk, b, y, scratch);
}

void tsi_conv_direct_forward_groups(const ts_conv_direct *d, const ts_cgeom *g, int64_t g0,
                                    int64_t g1, const float *x, const float *wpk, const float *b,
                                    float *y, float *scratch) {
    if (g0 >= g1) return;
    ts_cgeom s = *g; /* the kernel reads groups, per-group sizes and offsets within a group */
    s.g = g1 - g0, s.c = s.g * g->cg, s.o = s.g * g->og;
    const int64_t per_group = tsi_conv_direct_pack_floats(d, g) / g->g;
    d->fwd(&s, x + g0 * g->cg * g->h * g->w, wpk + g0 * per_group, b ? b + g0 * g->og : NULL,
           y + g0 * g->og * g->oh * g->ow, scratch);
}

void tsi_conv_direct_weight(const ts_conv_direct *d, const ts_cgeom *g, const float *gy,
                            const float *x, float *gw, float *scratch, bool acc) {
    d->wgt(g, gy, x, gw, scratch, acc);
}
