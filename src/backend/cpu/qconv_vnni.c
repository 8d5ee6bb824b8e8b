/* qconv_vnni.c — the AVX512-VNNI quantized 2-D convolution (qconv_vnni.h), straight in NCHW.
 *
 * Per image and group: the group's input planes are copied once into a padded, column-phased copy
 * (padding = x_zp's byte; stride s: phase q holds the padded columns q, q + s, ..., so every tap
 * reads OW contiguous bytes; signed inputs flipped by 128 as kern_qlinear.c does). Ordinary
 * convolutions: the patches are packed for vpdpbusd as [K / 4][P][4] (P = OH * OW positions, four
 * taps a position), the weights as [Cout / 8][K / 4][8][4]; a tile is 8 output channels by 48
 * positions (24 zmm accumulators, each a broadcast of 4 weight bytes times a vector of 16
 * positions' 4 activation bytes), and its epilogue writes the 16 positions of a channel straight
 * into the NCHW output: no im2col transpose, no output transpose, no weight panels. A 1x1
 * convolution's patches are the planes themselves. The raw sums are exact in int32 (K <= 65536);
 * the zero points come in as kern_qlinear.c's corrections: acc = raw - x_zp * wsum[co] - w_zp[co] *
 * xsum[p] + K * x_zp * w_zp[co] + bias[co] (xsum only when some w_zp is not 0); a block's last
 * tile runs 16 or 32 positions when that covers it. Depthwise convolutions: 16 output positions a
 * vector, x * (w - w_zp) in int32 per tap, - x_zp * sum(w - w_zp) folded into the bias.
 * Requantization: ONNX Runtime's float32 one (fmult; with acc_fbias PyTorch's x86 one) in vectors;
 * the float64 one per element. */
#include "backend/cpu/qconv_vnni.h"

#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/conv_dnnl_wcache.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/host_scratch.h"
#include "backend/cpu/qgemm_vnni.h"
#include "backend/omp_if.h"

#define MR          8     /* output channels a tile */
#define NP          3     /* panels of 16 positions a tile */
#define DW_MAX_TAPS 32768 /* depthwise: 32768 * 255 * 255 < 2^31 */

bool tsi_qconv_vnni_fits(const ts_qconv_args *a) {
    if (!tsi_qgemm_vnni_available()) return false;
    const bool dw = a->c == a->groups && a->cout == a->groups;
    return !dw || a->kh * a->kw <= DW_MAX_TAPS;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TS_VNNI __attribute__((target(TS_ISA_TARGET_AVX512 ",avx512vnni")))

/* the padded, phased copy of cn planes: plane c, padded row y, phase q at ((c * hp + y) * s + q) *
 * wq; wq = ceil(wp / s) + 16 (a vector may read 15 bytes past a row) */
typedef struct geo {
    int64_t hp, wq, s;
} geo;

static geo geo_of(const ts_qconv_args *a) {
    const int64_t s = a->stride[1], wp = a->w + 2 * a->pad[1];
    return (geo){a->h + 2 * a->pad[0], (wp + s - 1) / s + 16, s};
}

static void pad_planes(const ts_qconv_args *a, const uint8_t *x, int64_t cn, geo g, uint8_t padb,
                       uint8_t flip, uint8_t *xp) {
    const int64_t H = a->h, W = a->w, p0 = a->pad[0], p1 = a->pad[1], s = g.s;
    for (int64_t c = 0; c < cn; c++)
        for (int64_t yp = 0; yp < g.hp; yp++) {
            uint8_t *row = xp + (c * g.hp + yp) * s * g.wq;
            const int64_t y = yp - p0;
            if (y < 0 || y >= H) {
                memset(row, padb, (size_t)(s * g.wq));
                continue;
            }
            const uint8_t *src = x + (c * H + y) * W;
            if (s == 1) {
                memset(row, padb, (size_t)p1);
                for (int64_t t = 0; t < W; t++) row[p1 + t] = src[t] ^ flip;
                memset(row + p1 + W, padb, (size_t)(g.wq - p1 - W));
                continue;
            }
            for (int64_t q = 0; q < s;
                 q++) { /* input column t * s + q - p1 in [0, W): [tlo, thi) */
                uint8_t *rq = row + q * g.wq;
                int64_t tlo = p1 > q ? (p1 - q + s - 1) / s : 0,
                        thi = W + p1 - q > 0 ? (W + p1 - q - 1) / s + 1 : 0;
                thi = thi < g.wq ? thi : g.wq;
                thi = thi > 0 ? thi : 0;
                tlo = tlo < thi ? tlo : thi;
                memset(rq, padb, (size_t)tlo);
                for (int64_t t = tlo; t < thi; t++) rq[t] = (uint8_t)(src[t * s + q - p1] ^ flip);
                memset(rq + thi, padb, (size_t)(g.wq - thi));
            }
        }
}

/* the bytes of tap (c, i, j) at the P positions, row after row of OW, into dst[0 .. P) */
static void tap_row(const ts_qconv_args *a, const uint8_t *xp, geo g, int64_t c, int64_t i,
                    int64_t j, uint8_t *dst) {
    const int64_t jd = j * a->dil[1], q = jd % g.s, off = jd / g.s;
    for (int64_t oy = 0; oy < a->oh; oy++) {
        const int64_t yp = oy * a->stride[0] + i * a->dil[0];
        memcpy(dst + oy * a->ow, xp + ((c * g.hp + yp) * g.s + q) * g.wq + off, (size_t)a->ow);
    }
}

/* the patches of K taps at P positions as [Kp / 4][Pp][4] (rows past K: 0), and each position's
 * sum over the taps when xsum */
TS_VNNI static void pack_patches(const ts_qconv_args *a, const uint8_t *xp, geo g, int64_t K,
                                 int64_t Pp, uint8_t *rows /* 4 * Pp */, uint8_t *packed,
                                 int32_t *xsum) {
    const int64_t P = a->oh * a->ow, KHW = a->kh * a->kw;
    if (xsum) memset(xsum, 0, (size_t)Pp * sizeof *xsum);
    for (int64_t k0 = 0; k0 < K; k0 += 4) {
        const uint8_t *r[4];
        for (int q = 0; q < 4; q++) {
            uint8_t *dst = rows + q * Pp;
            const int64_t k = k0 + q;
            if (k >= K) {
                memset(dst, 0, (size_t)Pp);
            } else {
                const int64_t c = k / KHW, i = (k % KHW) / a->kw, j = k % a->kw;
                tap_row(a, xp, g, c, i, j, dst);
                memset(dst + P, 0, (size_t)(Pp - P));
                if (xsum)
                    for (int64_t p = 0; p < P; p++) xsum[p] += dst[p];
            }
            r[q] = dst;
        }
        uint8_t *out = packed + (k0 / 4) * Pp * 4;
        for (int64_t p = 0; p < Pp; p += 16) {
            const __m128i r0 = _mm_loadu_si128((const __m128i *)(r[0] + p)),
                          r1 = _mm_loadu_si128((const __m128i *)(r[1] + p)),
                          r2 = _mm_loadu_si128((const __m128i *)(r[2] + p)),
                          r3 = _mm_loadu_si128((const __m128i *)(r[3] + p));
            const __m128i lo01 = _mm_unpacklo_epi8(r0, r1), hi01 = _mm_unpackhi_epi8(r0, r1),
                          lo23 = _mm_unpacklo_epi8(r2, r3), hi23 = _mm_unpackhi_epi8(r2, r3);
            __m128i *o = (__m128i *)(out + p * 4);
            _mm_storeu_si128(o, _mm_unpacklo_epi16(lo01, lo23));
            _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(lo01, lo23));
            _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(hi01, hi23));
            _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(hi01, hi23));
        }
    }
}

/* one channel's 16 positions [p, p + lanes) of int32 sums v (the row constant and the w_zp *
 * xsum correction still to come), requantized into dst */
typedef struct rq {
    const ts_qconv_args *a;
    __m512 lo, hi;
    __m512i zp;
} rq;

TS_VNNI static rq rq_of(const ts_qconv_args *a) {
    return (rq){a, _mm512_set1_ps((float)(a->out_min - a->out_zp)),
                _mm512_set1_ps((float)(a->out_max - a->out_zp)), _mm512_set1_epi32(a->out_zp)};
}

/* the 16 requantized bytes of int32 sums v (the row constant and the w_zp * xsum correction still
 * to come; xsum: 16 readable values or NULL) */
TS_VNNI static inline __attribute__((always_inline)) __m128i
requant16(const rq *r, __m512i v, int64_t rowc, int32_t wzp, const int32_t *xsum, int64_t co) {
    const ts_qconv_args *a = r->a;
    if (a->fmult) {
        v = _mm512_add_epi32(v, _mm512_set1_epi32((int32_t)(uint32_t)(uint64_t)rowc));
        if (xsum && wzp)
            v = _mm512_sub_epi32(
                v, _mm512_mullo_epi32(_mm512_loadu_si512(xsum), _mm512_set1_epi32(wzp)));
        __m512 f = _mm512_cvtepi32_ps(v);
        if (a->acc_fbias) f = _mm512_add_ps(f, _mm512_set1_ps(a->acc_fbias[co]));
        f = _mm512_mul_ps(f, _mm512_set1_ps(a->fmult[co]));
        f = _mm512_min_ps(_mm512_max_ps(f, r->lo), r->hi);
        const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(f), r->zp);
        return a->out_unsigned ? _mm512_cvtusepi32_epi8(q) : _mm512_cvtsepi32_epi8(q);
    }
    int32_t raw[16];
    uint8_t b[16];
    _mm512_storeu_si512(raw, v);
    for (int l = 0; l < 16; l++) {
        const int64_t acc = (int64_t)raw[l] + rowc - (xsum ? (int64_t)wzp * xsum[l] : 0);
        double d = (double)a->out_zp + nearbyint((double)acc * a->mult[co]);
        d = d < a->out_min ? a->out_min : d > a->out_max ? a->out_max : d;
        b[l] = a->out_unsigned ? (uint8_t)d : (uint8_t)(int8_t)d;
    }
    return _mm_loadu_si128((const __m128i *)b);
}

static __mmask16 lanes_mask(int64_t lanes) {
    return (__mmask16)(lanes >= 16 ? 0xffffu : (1u << lanes) - 1u);
}

typedef struct gemm {
    const ts_qconv_args *a;
    int64_t K, Kp, P, Pp, cog;
    const int64_t *xoff; /* [Kp / 4]: the byte offset of each step's 4-byte groups in packed */
    int64_t pv;          /* the positions the tiles cover: P, or OH * wq (direct) */
    int64_t wq;          /* direct: position p = oy * wq + ox, ox >= OW not stored; 0: p = P's */
    const uint8_t *packed;
    const int8_t *wpk;   /* [ceil(cog / MR)][Kp / 4][MR][4] */
    const int32_t *xsum; /* [Pp] or NULL */
    const int64_t *rowc; /* [cog]: bias - x_zp * wsum + K * x_zp * w_zp */
    const int32_t *w_zp; /* [cog] */
    int64_t co0;         /* the group's first output channel (for fmult / mult) */
    uint8_t *out;        /* the group's first output plane */
} gemm;

/* one output channel row of the tile: 4 weight bytes broadcast against the 3 position vectors */
#define TS_QROW(i)                                                                                 \
    do {                                                                                           \
        int32_t wv;                                                                                \
        memcpy(&wv, ws + (i)*4, 4);                                                                \
        const __m512i wb = _mm512_set1_epi32(wv);                                                  \
        c##i##0 = _mm512_dpbusd_epi32(c##i##0, x0, wb);                                            \
        if (np > 1) c##i##1 = _mm512_dpbusd_epi32(c##i##1, x1, wb);                                \
        if (np > 2) c##i##2 = _mm512_dpbusd_epi32(c##i##2, x2, wb);                                \
    } while (0)
#define TS_QZERO(i) __m512i c##i##0 = _mm512_setzero_si512(), c##i##1 = c##i##0, c##i##2 = c##i##0
#define TS_QSAVE(i) acc[i][0] = c##i##0, acc[i][1] = c##i##1, acc[i][2] = c##i##2

/* a tile of np (1 to NP) panels of 16 positions: np is a constant in each caller (tile_np), so
 * a block's last tile computes only the panels it needs */
TS_VNNI static inline __attribute__((always_inline)) void
tile_np(const gemm *g, const rq *r, int64_t rb, int64_t p0, const int np) {
    /* the 24 accumulators as named variables: an array indexed in loops ends up on the stack */
    TS_QZERO(0);
    TS_QZERO(1);
    TS_QZERO(2);
    TS_QZERO(3);
    TS_QZERO(4);
    TS_QZERO(5);
    TS_QZERO(6);
    TS_QZERO(7);
    const uint8_t *xb = g->packed + p0 * 4;
    const int8_t *ws = g->wpk + rb * g->Kp * MR;
    const int64_t steps = g->Kp / 4;
    for (int64_t s = 0; s < steps; s++, ws += MR * 4) {
        const uint8_t *xs = xb + g->xoff[s];
        const __m512i x0 = _mm512_loadu_si512(xs), x1 = np > 1 ? _mm512_loadu_si512(xs + 64) : x0,
                      x2 = np > 2 ? _mm512_loadu_si512(xs + 128) : x0;
        TS_QROW(0);
        TS_QROW(1);
        TS_QROW(2);
        TS_QROW(3);
        TS_QROW(4);
        TS_QROW(5);
        TS_QROW(6);
        TS_QROW(7);
    }
    __m512i acc[MR][NP];
    TS_QSAVE(0);
    TS_QSAVE(1);
    TS_QSAVE(2);
    TS_QSAVE(3);
    TS_QSAVE(4);
    TS_QSAVE(5);
    TS_QSAVE(6);
    TS_QSAVE(7);
    /* where each panel's lanes go: segments of lanes [l, l + cnt) of one output row, stored at
     * offset off (where lane 0 would go) with mask m; direct positions ox >= OW dropped */
    int nseg[NP];
    int64_t soff[NP][17];
    __mmask16 smask[NP][17];
    for (int j = 0; j < NP; j++) {
        const int64_t p = p0 + 16 * j;
        nseg[j] = 0;
        if (j >= np) continue;
        if (!g->wq) {
            if (p < g->pv) soff[j][0] = p, smask[j][0] = lanes_mask(g->P - p), nseg[j] = 1;
            continue;
        }
        const int64_t OW = g->a->ow;
        int64_t oy = p / g->wq, ox = p % g->wq;
        for (int64_t l = 0; l < 16 && p + l < g->pv;) {
            const int64_t end = l + g->wq - ox < 16 ? l + g->wq - ox : 16;
            if (ox < OW) {
                const int64_t cnt = OW - ox < end - l ? OW - ox : end - l;
                soff[j][nseg[j]] = oy * OW + ox - l;
                smask[j][nseg[j]++] = (__mmask16)(lanes_mask(cnt) << l);
            }
            ox += end - l;
            if (ox >= g->wq) ox -= g->wq, oy++;
            l = end;
        }
    }
    for (int i = 0; i < MR; i++) {
        const int64_t co = rb * MR + i;
        if (co >= g->cog) break;
        uint8_t *oc = g->out + co * g->P;
        for (int j = 0; j < NP; j++) {
            if (!nseg[j]) continue; /* (direct: a panel of dropped columns alone) */
            const int64_t p = p0 + 16 * j;
            const __m128i q = requant16(r, acc[i][j], g->rowc[co], g->w_zp[co],
                                        g->xsum && !g->wq ? g->xsum + p : NULL, g->co0 + co);
            for (int k = 0; k < nseg[j]; k++) _mm_mask_storeu_epi8(oc + soff[j][k], smask[j][k], q);
        }
    }
}

TS_VNNI static void tile3(const gemm *g, const rq *r, int64_t rb, int64_t p0) {
    tile_np(g, r, rb, p0, 3);
}
TS_VNNI static void tile2(const gemm *g, const rq *r, int64_t rb, int64_t p0) {
    tile_np(g, r, rb, p0, 2);
}
TS_VNNI static void tile1(const gemm *g, const rq *r, int64_t rb, int64_t p0) {
    tile_np(g, r, rb, p0, 1);
}

/* the tile at block rb, positions from p0: as many panels as reach pv */
TS_VNNI static void tile(const gemm *g, const rq *r, int64_t rb, int64_t p0) {
    const int64_t left = g->pv - p0;
    if (left > 32)
        tile3(g, r, rb, p0);
    else if (left > 16)
        tile2(g, r, rb, p0);
    else
        tile1(g, r, rb, p0);
}

/* the weights of a group [cog][K] into [ceil(cog / MR)][Kp / 4][MR][4], and the row constants */
static void pack_weights(const int8_t *w, int64_t cog, int64_t K, int64_t Kp, int8_t *wpk,
                         int64_t *wsum) {
    const int64_t rbs = (cog + MR - 1) / MR;
    memset(wpk, 0, (size_t)(rbs * Kp * MR));
    for (int64_t co = 0; co < cog; co++) {
        int64_t sum = 0;
        int8_t *dst = wpk + (co / MR) * Kp * MR + (co % MR) * 4;
        for (int64_t k = 0; k < K; k++) {
            dst[(k / 4) * MR * 4 + k % 4] = w[co * K + k];
            sum += w[co * K + k];
        }
        wsum[co] = sum;
    }
}

/* ---- the direct route: the group's input as 4-channel groups of bytes, padded and phased: channel
 * 4 cq + e, padded row r * s0 + rp, padded column t * s1 + cp at byte ((((cq * s0 + rp) * s1 + cp)
 * * pl + r * wq + t) * 4 + e; a tap's 16 positions p = oy * wq + ox are then 64 contiguous bytes
 * (positions with ox >= OW are computed and not stored). Channels past cg and the slack are 0. */
typedef struct dgeo {
    int64_t s0, s1, hq, wq, pl, cq, taps;
} dgeo;

static dgeo dgeo_of(const ts_qconv_args *a, int64_t cg) {
    const int64_t s0 = a->stride[0], s1 = a->stride[1], hp = a->h + 2 * a->pad[0],
                  wp = a->w + 2 * a->pad[1], hq = (hp + s0 - 1) / s0, wq = (wp + s1 - 1) / s1;
    return (dgeo){s0, s1, hq, wq, (hq + 1) * wq + 64, (cg + 3) / 4, a->kh * a->kw};
}

static void direct_offsets(const ts_qconv_args *a, dgeo d, int64_t *xoff) {
    for (int64_t t = 0; t < d.taps; t++) {
        const int64_t id = (t / a->kw) * a->dil[0], jd = (t % a->kw) * a->dil[1];
        const int64_t in_plane = (id / d.s0) * d.wq + jd / d.s1;
        for (int64_t q = 0; q < d.cq; q++)
            xoff[t * d.cq + q] =
                (((q * d.s0 + id % d.s0) * d.s1 + jd % d.s1) * d.pl + in_plane) * 4;
    }
}

/* w [cog][cg][KH][KW] into [ceil(cog / MR)][taps][cq][MR][4], and the row constants */
static void pack_weights_direct(dgeo d, const int8_t *w, int64_t cog, int64_t cg, int8_t *wpk,
                                int64_t *wsum) {
    const int64_t rbs = (cog + MR - 1) / MR, steps = d.taps * d.cq;
    memset(wpk, 0, (size_t)(rbs * steps * MR * 4));
    for (int64_t co = 0; co < cog; co++) {
        int64_t sum = 0;
        int8_t *dst = wpk + (co / MR) * steps * MR * 4 + (co % MR) * 4;
        for (int64_t c = 0; c < cg; c++)
            for (int64_t t = 0; t < d.taps; t++) {
                const int8_t v = w[(co * cg + c) * d.taps + t];
                dst[(t * d.cq + c / 4) * MR * 4 + c % 4] = v;
                sum += v;
            }
        wsum[co] = sum;
    }
}

/* ---- the packed weights of every group ([G][wpk bytes] then [G][cog] int64 sums), kept across
 * calls in conv_dnnl_wcache.c's cache for a weight with an identity (quant_args.h) */
typedef struct wlayout {
    char tag[8];
    int64_t cout, cg, kh, kw, groups, direct, kp;
} wlayout;

typedef struct wfill {
    const ts_qconv_args *a;
    dgeo d;
    int64_t cg, cog, K, Kp;
    bool direct;
    size_t gbytes;
} wfill;

static bool fill_weights(void *ctx, void *buf) {
    const wfill *f = ctx;
    const int64_t G = f->a->groups;
    int64_t *sums = (int64_t *)(void *)((char *)buf + (size_t)G * f->gbytes);
    for (int64_t gi = 0; gi < G; gi++) {
        int8_t *wpk = (int8_t *)buf + (size_t)gi * f->gbytes;
        const int8_t *w = f->a->wt + gi * f->cog * f->K;
        if (f->direct)
            pack_weights_direct(f->d, w, f->cog, f->cg, wpk, sums + gi * f->cog);
        else
            pack_weights(w, f->cog, f->K, f->Kp, wpk, sums + gi * f->cog);
    }
    return true;
}

TS_VNNI static void pack_quads(const ts_qconv_args *a, dgeo d, const uint8_t *x, int64_t cg,
                               uint8_t padb, uint8_t flip, uint8_t *xq) {
    const int64_t H = a->h, W = a->w, p0 = a->pad[0], p1 = a->pad[1], hp = H + 2 * p0,
                  wp = W + 2 * p1;
    memset(xq, 0, (size_t)(d.cq * d.s0 * d.s1 * d.pl * 4));
    const __m128i fl = _mm_set1_epi8((char)flip);
    for (int64_t q = 0; q < d.cq; q++)
        for (int64_t y = 0; y < hp; y++) {
            const int64_t yy = y - p0, rp = y % d.s0, r = y / d.s0;
            const bool in_row = yy >= 0 && yy < H;
            const uint8_t *src[4];
            for (int e = 0; e < 4; e++)
                src[e] = in_row && 4 * q + e < cg ? x + ((4 * q + e) * H + yy) * W : NULL;
            if (d.s1 == 1 && src[0] && src[1] && src[2] && src[3]) {
                uint8_t *row = xq + (((q * d.s0 + rp) * d.pl) + r * d.wq) * 4;
                for (int64_t t = 0; t < p1; t++)
                    for (int e = 0; e < 4; e++) row[t * 4 + e] = padb;
                int64_t t = 0;
                for (; t + 16 <= W; t += 16) {
                    const __m128i r0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src[0] + t)),
                                                     fl),
                                  r1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src[1] + t)),
                                                     fl),
                                  r2 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src[2] + t)),
                                                     fl),
                                  r3 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src[3] + t)),
                                                     fl);
                    const __m128i lo01 = _mm_unpacklo_epi8(r0, r1),
                                  hi01 = _mm_unpackhi_epi8(r0, r1),
                                  lo23 = _mm_unpacklo_epi8(r2, r3),
                                  hi23 = _mm_unpackhi_epi8(r2, r3);
                    __m128i *o = (__m128i *)(void *)(row + (p1 + t) * 4);
                    _mm_storeu_si128(o, _mm_unpacklo_epi16(lo01, lo23));
                    _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(lo01, lo23));
                    _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(hi01, hi23));
                    _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(hi01, hi23));
                }
                for (; t < W; t++)
                    for (int e = 0; e < 4; e++) row[(p1 + t) * 4 + e] = src[e][t] ^ flip;
                for (int64_t u = p1 + W; u < wp; u++)
                    for (int e = 0; e < 4; e++) row[u * 4 + e] = padb;
                continue;
            }
            /* any stride or a partial group of 4 channels: each column phase cp holds the padded
             * columns cp, cp + s1, ...; its t-th is input column t * s1 + cp - p1, in [0, W) for t
             * in [tlo, thi) */
            uint8_t pv[4];
            for (int e = 0; e < 4; e++) pv[e] = 4 * q + e >= cg ? 0 : padb;
            for (int64_t cp = 0; cp < d.s1; cp++) {
                uint8_t *dst = xq + ((((q * d.s0 + rp) * d.s1 + cp) * d.pl) + r * d.wq) * 4;
                const int64_t nt = (wp - cp + d.s1 - 1) / d.s1;
                int64_t tlo = p1 > cp ? (p1 - cp + d.s1 - 1) / d.s1 : 0,
                        thi = W + p1 - cp > 0 ? (W + p1 - cp - 1) / d.s1 + 1 : 0;
                thi = !in_row ? 0 : thi < nt ? thi : nt;
                tlo = tlo < thi ? tlo : thi;
                for (int64_t t = 0; t < tlo; t++) memcpy(dst + t * 4, pv, 4);
                /* the present channels are the first nc (the rest 0): a word of 4 a column */
                int nc = 0;
                while (nc < 4 && src[nc]) nc++;
                const uint32_t fw =
                    (uint32_t)(flip * 0x01010101u) & (nc == 4 ? ~0u : (1u << (8 * nc)) - 1u);
                const int64_t s1 = d.s1, o = cp - p1;
#define TS_QUAD_COLS(NC)                                                                           \
    for (int64_t t = tlo; t < thi; t++) {                                                          \
        uint32_t v = 0;                                                                            \
        for (int e = 0; e < (NC); e++) v |= (uint32_t)src[e][t * s1 + o] << (8 * e);               \
        v ^= fw;                                                                                   \
        memcpy(dst + t * 4, &v, 4);                                                                \
    }
                switch (nc) {
                case 4:
                    TS_QUAD_COLS(4);
                    break;
                case 3:
                    TS_QUAD_COLS(3);
                    break;
                case 2:
                    TS_QUAD_COLS(2);
                    break;
                case 1:
                    TS_QUAD_COLS(1);
                    break;
                default:
                    TS_QUAD_COLS(0);
                    break;
                }
#undef TS_QUAD_COLS
                for (int64_t t = thi; t < nt; t++) memcpy(dst + t * 4, pv, 4);
            }
        }
}

/* one channel: 16 output positions a vector, sum x * (w - w_zp) over the taps in int32 (padding
 * holds x_zp's byte), then - x_zp * sum(w - w_zp) with the bias: the same sum as of (x - x_zp)(w -
 * w_zp), modulo 2^32 as ORT's int32 (and exactly: every partial sum fits) */
#define DW_TAPS_FAST 64
TS_VNNI static void depthwise_plane(const ts_qconv_args *a, const rq *r, const uint8_t *xp, geo g,
                                    int64_t c, int32_t x_zp, uint8_t *out) {
    const int64_t KH = a->kh, KW = a->kw, OW = a->ow, taps = KH * KW;
    const int8_t *w = a->wt + c * taps;
    const int32_t wz = a->w_zp[c];
    int64_t toff[DW_TAPS_FAST], wsum = 0;
    __m512i wv[DW_TAPS_FAST];
    const bool fast = taps <= DW_TAPS_FAST;
    for (int64_t t = 0; fast && t < taps; t++) { /* tap t's offset from the window's first byte */
        const int64_t i = t / KW, jd = (t % KW) * a->dil[1];
        toff[t] = i * a->dil[0] * g.s * g.wq + (jd % g.s) * g.wq + jd / g.s;
        wv[t] = _mm512_set1_epi32(w[t] - wz);
        wsum += w[t] - wz;
    }
    const __m512i zpv = _mm512_set1_epi32(x_zp);
    const int64_t rowc = (a->bias ? a->bias[c] : 0) - (fast ? (int64_t)x_zp * wsum : 0);
    for (int64_t oy = 0; oy < a->oh; oy++) {
        const uint8_t *base = xp + oy * a->stride[0] * g.s * g.wq;
        for (int64_t ox = 0; ox < OW; ox += 16) {
            __m512i acc = _mm512_setzero_si512();
            if (fast) {
                for (int64_t t = 0; t < taps; t++)
                    acc = _mm512_add_epi32(
                        acc, _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                                                    (const __m128i *)(base + toff[t] + ox))),
                                                wv[t]));
            } else {
                for (int64_t i = 0; i < KH; i++) {
                    const uint8_t *rowp = base + i * a->dil[0] * g.s * g.wq;
                    for (int64_t j = 0; j < KW; j++) {
                        const int64_t jd = j * a->dil[1];
                        const __m512i v = _mm512_sub_epi32(
                            _mm512_cvtepu8_epi32(_mm_loadu_si128(
                                (const __m128i *)(rowp + (jd % g.s) * g.wq + jd / g.s + ox))),
                            zpv);
                        acc = _mm512_add_epi32(
                            acc, _mm512_mullo_epi32(v, _mm512_set1_epi32(w[i * KW + j] - wz)));
                    }
                }
            }
            _mm_mask_storeu_epi8(out + oy * OW + ox, lanes_mask(OW - ox),
                                 requant16(r, acc, rowc, 0, NULL, c));
        }
    }
}

TS_VNNI static bool run(const ts_qconv_args *a) {
    const int64_t G = a->groups, cg = a->c / G, cog = a->cout / G, P = a->oh * a->ow;
    const uint8_t flip = a->x_unsigned ? 0 : 0x80, padb = (uint8_t)((uint8_t)a->x_zp ^ flip);
    const int32_t x_zp = a->x_zp + (a->x_unsigned ? 0 : 128);
    const geo g = geo_of(a);
    const size_t plane = (size_t)(g.hp * g.s * g.wq);
    const rq r = rq_of(a);
    const bool dw = cg == 1 && cog == 1;
    if (dw) {
        const size_t bytes = plane * (size_t)a->c + 64;
        ts_block *blk = NULL;
        uint8_t *xp = tsi_host_scratch_get(bytes, &blk);
        if (!xp) return tsi_kernel_oom("quantized_conv2d", bytes), false;
        for (int64_t n = 0; n < a->n; n++) {
            const uint8_t *x = (const uint8_t *)a->x + n * a->c * a->h * a->w;
            uint8_t *out = (uint8_t *)a->out + n * a->cout * P;
            TS_PARALLEL_FOR_IF(
                a->c > 1 && a->c * P * a->kh * a->kw >= ((int64_t)1 << 16),
                for (int64_t c = 0; c < a->c; c++) {
                    pad_planes(a, x + c * a->h * a->w, 1, g, padb, flip, xp + (size_t)c * plane);
                    depthwise_plane(a, &r, xp + (size_t)c * plane, g, c, x_zp, out + c * P);
                });
        }
        tsi_host_scratch_put(blk);
        return true;
    }
    const int64_t K = cg * a->kh * a->kw, rbs = (cog + MR - 1) / MR;
    bool any_wzp = false;
    for (int64_t co = 0; co < a->cout; co++) any_wzp |= a->w_zp[co] != 0;
    /* direct (no weight zero point: no per-position sums needed) or im2col */
    const dgeo d = dgeo_of(a, cg);
    const int64_t Pp = (P + 15) & ~(int64_t)15,
                  Kp = any_wzp ? (K + 3) & ~(int64_t)3 : d.taps * d.cq * 4, steps = Kp / 4,
                  pv = any_wzp ? P : a->oh * d.wq;
    const size_t b_xp = any_wzp ? plane * (size_t)cg : (size_t)(d.cq * d.s0 * d.s1 * d.pl * 4),
                 b_rows = any_wzp ? (size_t)(4 * Pp) : 0,
                 b_packed = any_wzp ? (size_t)(Kp * Pp) : 0, b_wpk = (size_t)(rbs * Kp * MR),
                 b_wall = (size_t)G * (b_wpk + (size_t)cog * sizeof(int64_t)),
                 b_rowc = (size_t)cog * sizeof(int64_t),
                 b_xsum = any_wzp ? (size_t)Pp * sizeof(int32_t) : 0,
                 b_xoff = (size_t)steps * sizeof(int64_t);
#define TS_ALIGN64(v) (((v) + 63) & ~(size_t)63)
    /* the packed weights: cached, else packed here */
    const wlayout key = {"qconv1", a->cout, cg, a->kh, a->kw, G, !any_wzp, Kp};
    const wfill wf = {a, d, cg, cog, K, Kp, !any_wzp, b_wpk};
    const tsi_conv_weight_id wid = {a->w_uid, a->w_version, a->w_offset};
    tsi_wcache_entry *wref = NULL;
    const uint8_t *wall =
        tsi_wcache_get(&wid, &key, sizeof key, b_wall, fill_weights, (void *)&wf, &wref);
    const size_t bytes = TS_ALIGN64(b_xp) + TS_ALIGN64(b_rows) + TS_ALIGN64(b_packed) +
                         (wall ? 0 : TS_ALIGN64(b_wall)) + TS_ALIGN64(b_rowc) + TS_ALIGN64(b_xsum) +
                         TS_ALIGN64(b_xoff) + 256;
    ts_block *blk = NULL;
    uint8_t *base = tsi_host_scratch_get(bytes, &blk);
    if (!base) return tsi_wcache_release(wref), tsi_kernel_oom("quantized_conv2d", bytes), false;
    uint8_t *xp = base, *rows = xp + TS_ALIGN64(b_xp), *packed = rows + TS_ALIGN64(b_rows);
    uint8_t *wown = packed + TS_ALIGN64(b_packed);
    int64_t *rowc = (int64_t *)(void *)(wown + (wall ? 0 : TS_ALIGN64(b_wall)));
    int32_t *xsum = any_wzp ? (int32_t *)(void *)((uint8_t *)rowc + TS_ALIGN64(b_rowc)) : NULL;
    int64_t *xoff = (int64_t *)(void *)((uint8_t *)rowc + TS_ALIGN64(b_rowc) + TS_ALIGN64(b_xsum));
#undef TS_ALIGN64
    if (any_wzp)
        for (int64_t st = 0; st < steps; st++) xoff[st] = st * Pp * 4;
    else
        direct_offsets(a, d, xoff);
    const int64_t pbs = (pv + 16 * NP - 1) / (16 * NP);
    if (!wall) {
        fill_weights((void *)&wf, wown);
        wall = wown;
    }
    const int64_t *wsums = (const int64_t *)(const void *)(wall + (size_t)G * b_wpk);
    for (int64_t gi = 0; gi < G; gi++) {
        const int8_t *wpk = (const int8_t *)wall + (size_t)gi * b_wpk;
        for (int64_t co = 0; co < cog; co++) /* bias - x_zp * wsum + K * x_zp * w_zp */
            rowc[co] = (a->bias ? a->bias[gi * cog + co] : 0) -
                       (int64_t)x_zp * wsums[gi * cog + co] +
                       K * (int64_t)x_zp * a->w_zp[gi * cog + co];
        for (int64_t n = 0; n < a->n; n++) {
            const uint8_t *x = (const uint8_t *)a->x + (n * a->c + gi * cg) * a->h * a->w;
            if (any_wzp) {
                pad_planes(a, x, cg, g, padb, flip, xp);
                pack_patches(a, xp, g, K, Pp, rows, packed, xsum);
            } else {
                pack_quads(a, d, x, cg, padb, flip, xp);
            }
            const gemm gm = {.a = a,
                             .K = K,
                             .Kp = Kp,
                             .P = P,
                             .Pp = Pp,
                             .cog = cog,
                             .xoff = xoff,
                             .pv = pv,
                             .wq = any_wzp ? 0 : d.wq,
                             .packed = any_wzp ? packed : xp,
                             .wpk = wpk,
                             .xsum = xsum,
                             .rowc = rowc,
                             .w_zp = a->w_zp + gi * cog,
                             .co0 = gi * cog,
                             .out = (uint8_t *)a->out + (n * a->cout + gi * cog) * P};
            TS_PARALLEL_FOR_IF(rbs * pbs > 1 && cog * P * K >= ((int64_t)1 << 18),
                               for (int64_t t = 0; t < rbs * pbs; t++)
                                   tile(&gm, &r, t % rbs, (t / rbs) * 16 * NP););
        }
    }
    tsi_host_scratch_put(blk);
    tsi_wcache_release(wref);
    return true;
}

bool tsi_qconv_vnni(const ts_qconv_args *a) { return run(a); }
#else
bool tsi_qconv_vnni(const ts_qconv_args *a) {
    (void)a;
    return false;
}
#endif
