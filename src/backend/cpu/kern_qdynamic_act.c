/* kern_qdynamic_act.c — linear layers with int8 dynamic activations and int8 / int4 weights
 * (quant_args.h's ts_wo_args with act_int8; torchao's int8_dynamic_activation_int8_weight /
 * int8_dynamic_activation_int4_weight; decision 0051). Each row of x is quantized once, symmetric
 * per token, to int8, then every output is made of exact int32 sums of int8 products and a float32
 * epilogue. The portable C loops and the AVX512-VNNI ones give the same bits: the same integers,
 * the same float32 operations in the same order.
 *
 * int8: acc = sum_k xq[k] (w[k] - zp) per row; y = ((float)acc * sx) * scale + bias. VNNI
 * (vpdpbusd: unsigned bytes times signed bytes, four at a time into int32 lanes): the weight made
 * unsigned by flipping its sign bit (w + 128), dot = sum (w + 128) xq, acc = dot - (128 + zp) xsum
 * with xsum = sum_k xq (per token).
 *
 * int4: each 128 elements of a row (a "unit", 64 bytes: elements 2j in the low nibbles, 2j + 1 in
 * the high ones) split into 16 "lanes" of 8 elements: lane l holds elements 8l..8l+7 of the unit,
 * all in one group (group sizes are multiples of 32). A lane's sum L = sum xq (q - zp) is an exact
 * int32; the row keeps 16 float32 partial sums f[l] = fma((float)L, scale of L's group, f[l]) over
 * the units in order, then y = tree16(f) * sx + bias (tree16: lanes l + 8, then + 4, + 2, + 1).
 * VNNI: a unit is one load, split into its low and its high nibbles (unsigned), both dotted with xp
 * (the token's xq, each unit laid out as its even elements, then its odd ones, once per token) into
 * int32 lanes that start at -zp * (the lane's sum of xq) (per token and lane, made once a token
 * when every zero point is the same; else that sum times the lane's zero point): the lanes end as
 * L. The scales are read as float16 when each is exactly one (tsi_quant_kparams' scales_f16:
 * ts_quantize_int4_symmetric_weight's), else as float32: the same values.
 *
 * Below AVX512-VNNI (tsi_qgemm_kind_get: AVX-VNNI or AVX2 alone) int8 and int4 weights take
 * 256-bit forms of the VNNI loops (the same dots, corrections and float32 steps; AVX2 with
 * vpmaddubsw, exact: on split bytes for int8, on nibbles for int4). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/host_scratch.h"
#include "backend/cpu/qgemm_vnni.h"
#include "backend/kernel_math.h"
#include "backend/omp_if.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define TS_HAVE_DA8_VNNI 1
#include <immintrin.h>
#define TS_DA8_VNNI __attribute__((target(TS_ISA_TARGET_AVX512 ",avx512vnni")))
/* the per-unit steps, inlined into their loops (their bool arguments constants there) */
#define TS_DA8_INLINE TS_DA8_VNNI __attribute__((always_inline))
/* a prefetch of base + off bytes, in integer arithmetic: past the weight's end it is no pointer
 * (and a prefetch does not fault) */
#define DA_PREFETCH(base, off)                                                                     \
    _mm_prefetch((const char *)((uintptr_t)(base) + (uintptr_t)(off)), _MM_HINT_T0)
#endif

/* output features a block; rows prefetched ahead: int8 (K bytes a row), int4 (K / 2 bytes a row,
 * and its parameters: 32 rows measured best on the GPT-2 shapes, 8 and 16 slower) */
enum { DA_NB = 4, DA_PF = 8, DA_PF4 = 32 };

/* the per-token data every output row reads */
typedef struct da_x {
    const ts_wo_args *a;
    int64_t kp;    /* k rounded up to 128 (xp's row length) */
    int8_t *xq;    /* [m][k]: portable, and int8 on VNNI */
    int32_t *xsum; /* [m]: int8 on VNNI */
    int8_t *xp;    /* [m][kp] int4 on VNNI: nibble order, zero padded */
    int32_t *xc;   /* [m][kp / 8] int4 on VNNI: each lane's start (uniform_zp: -zp * its xq sum;
                    * else minus its xq sum) */
    float *sx;     /* [m]; NaN for a row with NaN or inf */
} da_x;

/* the float32 scale of parameter i */
static inline float scale_of(const ts_wo_args *a, int64_t i) {
    return a->scales_h ? ts_f16_to_f32(a->scales_h[i]) : a->scales[i];
}

/* sum of the 16 partial sums: (l, l + 8), then (+ 4), (+ 2), (+ 1) */
static inline float tree16(const float *v) {
    float h[8], q[4];
    for (int i = 0; i < 8; i++) h[i] = v[i] + v[i + 8];
    for (int i = 0; i < 4; i++) q[i] = h[i] + h[i + 4];
    return (q[0] + q[2]) + (q[1] + q[3]);
}

/* torchao's _int8_symm_per_token_reduced_range_quant in float32: scale = max(max|x| / 127, 1e-5),
 * q = clamp(round_half_even(x * (1 / scale)), -127, 127) */
static float quant_row(const float *x, int64_t K, int8_t *q) {
    float amax = 0;
    bool bad = false;
    for (int64_t k = 0; k < K; k++) {
        const float v = fabsf(x[k]);
        bad |= !(v <= FLT_MAX); /* NaN or inf */
        amax = v > amax ? v : amax;
    }
    if (bad) {
        memset(q, 0, (size_t)K);
        return NAN;
    }
    float s = amax / 127.0f;
    s = s < 1e-5f ? 1e-5f : s;
    const float inv = 1.0f / s;
    for (int64_t k = 0; k < K; k++) {
        float r = nearbyintf(x[k] * inv);
        r = r < -127.0f ? -127.0f : r > 127.0f ? 127.0f : r;
        q[k] = (int8_t)r;
    }
    return s;
}

/* ------------------------------------------------------------------ portable */
static float out_generic(const da_x *d, int64_t m, int64_t n) {
    const ts_wo_args *a = d->a;
    const int64_t K = a->k;
    const int8_t *xq = d->xq + m * K;
    if (!a->int4) {
        const int8_t *w = (const int8_t *)a->w + n * K;
        const int32_t zp = a->zero_points[n];
        int32_t acc = 0;
        for (int64_t k = 0; k < K; k++) acc += (int32_t)xq[k] * ((int32_t)w[k] - zp);
        return ((float)acc * d->sx[m]) * a->scales[n];
    }
    const int64_t gs = a->group_size, G = K / gs;
    const uint8_t *w = a->w + n * (K / 2);
    float f[16] = {0};
    for (int64_t c = 0; c < K; c += 128)
        for (int l = 0; l < 16 && c + 8 * l < K; l++) {
            const int64_t e0 = c + 8 * l, p = n * G + e0 / gs;
            const int32_t zp = a->zero_points[p];
            int32_t acc = 0;
            for (int64_t e = e0; e < e0 + 8; e += 2) {
                const uint8_t b = w[e / 2];
                acc += (int32_t)xq[e] * ((int32_t)(b & 15) - zp) +
                       (int32_t)xq[e + 1] * ((int32_t)(b >> 4) - zp);
            }
            f[l] = fmaf((float)acc, scale_of(a, p), f[l]);
        }
    return tree16(f) * d->sx[m];
}

/* ------------------------------------------------------------------ AVX512-VNNI */
#ifdef TS_HAVE_DA8_VNNI
/* tree16 of a register's lanes, the same additions */
TS_DA8_VNNI static inline float hsum16(__m512 f) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(f), _mm512_extractf32x8_ps(f, 1));
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 p = _mm_add_ps(q, _mm_movehl_ps(q, q)); /* q0 + q2, q1 + q3 */
    return _mm_cvtss_f32(_mm_add_ss(p, _mm_shuffle_ps(p, p, 1)));
}

/* quant_row's numbers, 16 at a time (x * inv, rounded in the current mode as nearbyintf, clamped):
 * into xq (and its sum into *xsum) when xq, else into xp's nibble order (K a multiple of 32; the
 * units' lane starts into xc: zp0 * the lane's xq sum, negated) */
TS_DA8_VNNI static float quant_row_vnni(const float *x, int64_t K, int64_t kp, int8_t *xq,
                                        int32_t *xsum, int8_t *xp, int32_t *xc, int32_t zp0) {
    __m512 mx = _mm512_setzero_ps();
    __mmask16 bad = 0;
    const __m512 big = _mm512_set1_ps(FLT_MAX);
    for (int64_t k = 0; k < K; k += 16) {
        const __mmask16 mk = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1);
        const __m512 v = _mm512_abs_ps(_mm512_maskz_loadu_ps(mk, x + k));
        bad |= _mm512_cmp_ps_mask(v, big, _CMP_NLE_UQ); /* NaN or inf */
        mx = _mm512_max_ps(mx, v);
    }
    if (bad) {
        if (xq) memset(xq, 0, (size_t)K), *xsum = 0;
        if (xp) memset(xp, 0, (size_t)kp), memset(xc, 0, (size_t)(kp / 8) * sizeof *xc);
        return NAN;
    }
    float s = _mm512_reduce_max_ps(mx) / 127.0f;
    s = s < 1e-5f ? 1e-5f : s;
    const __m512 inv = _mm512_set1_ps(1.0f / s), lo = _mm512_set1_ps(-127.0f),
                 hi = _mm512_set1_ps(127.0f);
#define DA_Q(v)                                                                                    \
    _mm512_cvtps_epi32(_mm512_min_ps(                                                              \
        _mm512_max_ps(_mm512_roundscale_ps(_mm512_mul_ps((v), inv),                                \
                                           _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC),          \
                      lo),                                                                         \
        hi))
    if (xq) {
        __m512i sum = _mm512_setzero_si512();
        for (int64_t k = 0; k < K; k += 16) {
            const __mmask16 mk = K - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - k)) - 1);
            const __m512i q = DA_Q(_mm512_maskz_loadu_ps(mk, x + k)); /* masked lanes: 0 */
            sum = _mm512_add_epi32(sum, q);
            _mm512_mask_cvtepi32_storeu_epi8(xq + k, mk, q);
        }
        *xsum = _mm512_reduce_add_epi32(sum);
        return s;
    }
    /* each 32 elements: the even ones to the unit's first half, the odd ones to its second */
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
                  od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int64_t k = 0; k < K; k += 32) {
        const __m512i q0 = DA_Q(_mm512_loadu_ps(x + k)), q1 = DA_Q(_mm512_loadu_ps(x + k + 16));
        int8_t *p = xp + (k & ~(int64_t)127) + (k & 127) / 2;
        _mm_storeu_si128((void *)p, _mm512_cvtepi32_epi8(_mm512_permutex2var_epi32(q0, ev, q1)));
        _mm_storeu_si128((void *)(p + 64),
                         _mm512_cvtepi32_epi8(_mm512_permutex2var_epi32(q0, od, q1)));
    }
#undef DA_Q
    if (kp > K) { /* the last unit's missing elements: zeros in both halves */
        const int64_t c = K & ~(int64_t)127, h = (K - c) / 2;
        memset(xp + c + h, 0, (size_t)(64 - h)), memset(xp + c + 64 + h, 0, (size_t)(64 - h));
    }
    const __m512i ones = _mm512_set1_epi8(1), nz = _mm512_set1_epi32(-zp0);
    for (int64_t c = 0; c < kp; c += 128) {
        __m512i ls = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones,
                                         _mm512_loadu_si512((const void *)(xp + c)));
        ls = _mm512_dpbusd_epi32(ls, ones, _mm512_loadu_si512((const void *)(xp + c + 64)));
        _mm512_storeu_si512((void *)(xc + c / 8), _mm512_mullo_epi32(ls, nz));
    }
    return s;
}

/* nr (1..4) int8 rows against token m: raw dots sum (w + 128) xq, corrected to the exact acc */
TS_DA8_VNNI static inline void blk_i8(const da_x *d, int64_t m, int64_t n0, int nr, float *out) {
    const ts_wo_args *a = d->a;
    const int64_t K = a->k;
    const int8_t *w = (const int8_t *)a->w + n0 * K, *x = d->xq + m * K;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512i acc[DA_NB], acc2[DA_NB];
    for (int r = 0; r < nr; r++) acc[r] = acc2[r] = _mm512_setzero_si512();
    int64_t k = 0;
#define DA_W(kk) _mm512_xor_si512(_mm512_loadu_si512((const void *)(w + r * K + (kk))), flip)
    for (; k + 128 <= K; k += 128) {
        const __m512i x0 = _mm512_loadu_si512((const void *)(x + k)),
                      x1 = _mm512_loadu_si512((const void *)(x + k + 64));
        for (int r = 0; r < nr; r++) {
            /* the rows DA_PF ahead (a prefetch past the weight's end does not fault) */
            DA_PREFETCH(w, (r + DA_PF) * K + k);
            DA_PREFETCH(w, (r + DA_PF) * K + k + 64);
            acc[r] = _mm512_dpbusd_epi32(acc[r], DA_W(k), x0);
            acc2[r] = _mm512_dpbusd_epi32(acc2[r], DA_W(k + 64), x1);
        }
    }
    for (; k + 64 <= K; k += 64) {
        const __m512i x0 = _mm512_loadu_si512((const void *)(x + k));
        for (int r = 0; r < nr; r++) acc[r] = _mm512_dpbusd_epi32(acc[r], DA_W(k), x0);
    }
#undef DA_W
    if (k < K) { /* masked-off bytes: x 0, so (0 + 128) * 0 adds nothing */
        const __mmask64 mk = (__mmask64)(~0ull >> (64 - (K - k)));
        const __m512i x0 = _mm512_maskz_loadu_epi8(mk, x + k);
        for (int r = 0; r < nr; r++)
            acc[r] = _mm512_dpbusd_epi32(
                acc[r], _mm512_xor_si512(_mm512_maskz_loadu_epi8(mk, w + r * K + k), flip), x0);
    }
    const int64_t xs = d->xsum[m];
    for (int r = 0; r < nr; r++) {
        const int64_t dot = _mm512_reduce_add_epi32(_mm512_add_epi32(acc[r], acc2[r]));
        const int32_t v = (int32_t)(dot - (128 + (int64_t)a->zero_points[n0 + r]) * xs);
        out[r] = ((float)v * d->sx[m]) * a->scales[n0 + r];
    }
}

static inline int32_t two_halves(const uint16_t *s) {
    int32_t v;
    memcpy(&v, s, sizeof v);
    return v;
}

/* the scales of one unit's lanes from parameter i on (groups of gs: gidx maps lanes to groups;
 * sm: the groups a short last unit has), float16 or float32 */
TS_DA8_INLINE static inline __m512 unit_scales(const ts_wo_args *a, int64_t i, __m512i gidx,
                                               __mmask8 sm, bool h16) {
    const int64_t gs = a->group_size;
    if (h16) {
        const uint16_t *s = a->scales_h + i;
        if (gs >= 128) return _mm512_set1_ps(_cvtsh_ss(s[0]));
        const __m128i v = sm != 0xff ? _mm_maskz_loadu_epi16(sm, s)
                          : gs == 32 ? _mm_loadl_epi64((const void *)s)
                                     : _mm_cvtsi32_si128(two_halves(s));
        return _mm512_permutexvar_ps(gidx, _mm512_castps128_ps512(_mm_cvtph_ps(v)));
    }
    const float *s = a->scales + i;
    if (gs >= 128) return _mm512_set1_ps(s[0]);
    const __m128 v = sm != 0xff ? _mm_maskz_loadu_ps(sm, s)
                     : gs == 32 ? _mm_loadu_ps(s)
                                : _mm_castsi128_ps(_mm_loadl_epi64((const void *)s));
    return _mm512_permutexvar_ps(gidx, _mm512_castps128_ps512(v));
}

/* the lanes' start for zero points that differ: the lane's zero point times minus its xq sum */
TS_DA8_INLINE static inline __m512i unit_start(const ts_wo_args *a, int64_t i, __m512i gidx,
                                               __mmask8 sm, __m512i nls) {
    const int32_t *z = a->zero_points + i;
    const int64_t gs = a->group_size;
    const __m512i zv =
        gs >= 128 ? _mm512_set1_epi32(z[0])
                  : _mm512_permutexvar_epi32(gidx, _mm512_castsi128_si512(_mm_maskz_loadu_epi32(
                                                       gs == 64 && sm == 0xff ? 3 : sm, z)));
    return _mm512_mullo_epi32(zv, nls);
}

/* one unit (elements c..c+127 of the rows; part: fewer than 128 left) of nr int4 rows against
 * token m into their partial sums f (xp: its nibble-ordered bytes; h16: float16 scales; uz: one
 * zero point for all, the lane starts made per token). Lanes 4i..4i+3 of a unit hold its elements
 * 32i..32i+31, so their group is (c + 32 i) / gs. A short last unit reads only its bytes and its
 * groups' parameters (its other lanes: 0 times a scale of 0). */
TS_DA8_INLINE static inline void unit_u4(const da_x *d, int64_t m, int64_t n0, int nr, int64_t c,
                                         bool part, bool h16, bool uz, __m512i gidx, __m512 *f) {
    const ts_wo_args *a = d->a;
    const int64_t K = a->k, gs = a->group_size, G = K / gs, rb = K / 2;
    const uint8_t *w = a->w + n0 * rb + c / 2;
    const int8_t *xp = d->xp + m * d->kp + c;
    const __mmask64 wm = part ? (__mmask64)((1ull << ((K - c) / 2)) - 1) : ~(__mmask64)0;
    const __mmask8 sm = part ? (__mmask8)((1u << ((K - c) / gs)) - 1) : (__mmask8)0xff;
    const __m512i lo4 = _mm512_set1_epi8(15);
    const __m512i xe = _mm512_loadu_si512((const void *)xp),
                  xo = _mm512_loadu_si512((const void *)(xp + 64)),
                  st = _mm512_loadu_si512((const void *)(d->xc + m * (d->kp / 8) + c / 8));
    for (int r = 0; r < nr; r++) {
        const int64_t i = (n0 + r) * G + c / gs;
        DA_PREFETCH(w, (r + DA_PF4) * rb);
        const __m512i b = part ? _mm512_maskz_loadu_epi8(wm, w + r * rb)
                               : _mm512_loadu_si512((const void *)(w + r * rb));
        __m512i dt = uz ? st : unit_start(a, i, gidx, sm, st);
        dt = _mm512_dpbusd_epi32(dt, _mm512_and_si512(b, lo4), xe);
        dt = _mm512_dpbusd_epi32(dt, _mm512_and_si512(_mm512_srli_epi16(b, 4), lo4), xo);
        f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dt), unit_scales(a, i, gidx, sm, h16), f[r]);
    }
}

/* nr (1..4) int4 rows against token m: the units in order, then tree16 of each row's lanes */
TS_DA8_INLINE static inline void blk_u4(const da_x *d, int64_t m, int64_t n0, int nr, bool h16,
                                        bool uz, float *out) {
    const int64_t K = d->a->k, full = K / 128 * 128;
    const __m512i lane = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512i gidx = d->a->group_size == 32 ? lane : _mm512_srli_epi32(lane, 1);
    __m512 f[DA_NB];
    for (int r = 0; r < nr; r++) f[r] = _mm512_setzero_ps();
    /* the parameters of the rows DA_PF4 ahead (the scales; the zero points when they differ) */
    const int64_t G = K / d->a->group_size, sb = h16 ? 2 : 4;
    const void *sp = h16 ? (const void *)d->a->scales_h : (const void *)d->a->scales;
    for (int r = 0; r < nr; r++)
        for (int64_t o = 0; o < G * 4; o += 64) {
            if (o < G * sb) DA_PREFETCH(sp, (n0 + r + DA_PF4) * G * sb + o);
            if (!uz) DA_PREFETCH(d->a->zero_points, (n0 + r + DA_PF4) * G * 4 + o);
        }
    for (int64_t c = 0; c < full; c += 128) unit_u4(d, m, n0, nr, c, false, h16, uz, gidx, f);
    if (full < K) unit_u4(d, m, n0, nr, full, true, h16, uz, gidx, f);
    for (int r = 0; r < nr; r++) out[r] = hsum16(f[r]) * d->sx[m];
}

TS_DA8_VNNI static void run_vnni(const da_x *d, int64_t n0, int64_t nn) {
    const ts_wo_args *a = d->a;
    const bool h16 = a->scales_h != NULL, uz = a->uniform_zp;
    for (int64_t m = 0; m < a->m; m++) {
        float out[DA_NB];
        for (int64_t n = n0; n < n0 + nn; n += DA_NB) {
            const int nr = n0 + nn - n < DA_NB ? (int)(n0 + nn - n) : DA_NB;
            if (!a->int4) {
                if (nr == DA_NB)
                    blk_i8(d, m, n, DA_NB, out);
                else
                    blk_i8(d, m, n, nr, out);
            } else if (nr == DA_NB) { /* full blocks: each case with constant arguments */
                if (h16 && uz)
                    blk_u4(d, m, n, DA_NB, true, true, out);
                else if (h16)
                    blk_u4(d, m, n, DA_NB, true, false, out);
                else if (uz)
                    blk_u4(d, m, n, DA_NB, false, true, out);
                else
                    blk_u4(d, m, n, DA_NB, false, false, out);
            } else {
                blk_u4(d, m, n, nr, h16, uz, out);
            }
            for (int r = 0; r < nr; r++)
                a->y[m * a->n + n + r] = out[r] + (a->bias ? a->bias[n + r] : 0.0f);
        }
    }
}
#endif

/* ------------------------------------------------------------------ AVX-VNNI and AVX2 (int8) */
#ifdef TS_HAVE_DA8_VNNI
#define TS_DA8_AVX2    __attribute__((target(TS_ISA_TARGET_AVX2)))
#define TS_DA8_AVXVNNI __attribute__((target(TS_ISA_TARGET_AVX2 ",avxvnni")))

/* blk_i8's integers with 8 int32 lanes a row: the same dot sum (w + 128) xq modulo 2^32 (lanes
 * added in any order give it), the same correction and float32 steps. A k tail of under 32 bytes
 * goes through zero-padded copies (x 0 adds nothing). avxvnni: vpdpbusd ymm; else vpmaddubsw on
 * w + 128 split into its low 7 bits and its top bit (a pair of 255 * 127 products leaves int16,
 * which vpmaddubsw saturates; 127 * 127 * 2 does not), each pair then summed into int32 by
 * vpmaddwd (by 1 and by 128). */
#define DA_DOT_AVXVNNI(acc, u, x0) ((acc) = _mm256_dpbusd_avx_epi32((acc), (u), (x0)))
#define DA_DOT_AVX2(acc, u, x0)                                                                    \
    do {                                                                                           \
        const __m256i lo_ = _mm256_and_si256((u), m7),                                             \
                      hi_ = _mm256_and_si256(_mm256_srli_epi16((u), 7), b1);                       \
        (acc) = _mm256_add_epi32(                                                                  \
            (acc), _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo_, (x0)), one),       \
                                    _mm256_madd_epi16(_mm256_maddubs_epi16(hi_, (x0)), h128)));    \
    } while (0)
#define DA_BLK_I8_256(NAME, ATTR, DOT)                                                             \
    ATTR __attribute__((always_inline)) static inline void NAME(const da_x *d, int64_t m,          \
                                                                int64_t n0, int nr, float *out) {  \
        const ts_wo_args *a = d->a;                                                                \
        const int64_t K = a->k;                                                                    \
        const int8_t *w = (const int8_t *)a->w + n0 * K, *x = d->xq + m * K;                       \
        const __m256i flip = _mm256_set1_epi8((char)0x80), m7 = _mm256_set1_epi8(0x7f),            \
                      b1 = _mm256_set1_epi8(1), one = _mm256_set1_epi16(1),                        \
                      h128 = _mm256_set1_epi16(128);                                               \
        (void)m7, (void)b1, (void)one, (void)h128;                                                 \
        __m256i acc[DA_NB];                                                                        \
        for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_si256();                              \
        int64_t k = 0;                                                                             \
        for (; k + 32 <= K; k += 32) {                                                             \
            const __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(x + k));         \
            for (int r = 0; r < nr; r++) {                                                         \
                if ((k & 63) == 0) DA_PREFETCH(w, (r + DA_PF) * K + k);                            \
                const __m256i u = _mm256_xor_si256(                                                \
                    _mm256_loadu_si256((const __m256i *)(const void *)(w + r * K + k)), flip);     \
                DOT(acc[r], u, x0);                                                                \
            }                                                                                      \
        }                                                                                          \
        if (k < K) {                                                                               \
            int8_t xt[32] = {0}, wt[32] = {0};                                                     \
            memcpy(xt, x + k, (size_t)(K - k));                                                    \
            const __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)xt);              \
            for (int r = 0; r < nr; r++) {                                                         \
                memcpy(wt, w + r * K + k, (size_t)(K - k));                                        \
                const __m256i u =                                                                  \
                    _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)wt), flip); \
                DOT(acc[r], u, x0);                                                                \
            }                                                                                      \
        }                                                                                          \
        const int64_t xs = d->xsum[m];                                                             \
        for (int r = 0; r < nr; r++) {                                                             \
            int32_t l[8];                                                                          \
            _mm256_storeu_si256((__m256i *)(void *)l, acc[r]);                                     \
            uint32_t u32 = 0;                                                                      \
            for (int i = 0; i < 8; i++) u32 += (uint32_t)l[i];                                     \
            const int64_t dot = (int32_t)u32;                                                      \
            const int32_t v = (int32_t)(dot - (128 + (int64_t)a->zero_points[n0 + r]) * xs);       \
            out[r] = ((float)v * d->sx[m]) * a->scales[n0 + r];                                    \
        }                                                                                          \
    }
DA_BLK_I8_256(blk_i8_avxvnni, TS_DA8_AVXVNNI, DA_DOT_AVXVNNI)
DA_BLK_I8_256(blk_i8_avx2, TS_DA8_AVX2, DA_DOT_AVX2)
#undef DA_BLK_I8_256
#undef DA_DOT_AVXVNNI
#undef DA_DOT_AVX2

/* ------------------------------------------------------------------ AVX-VNNI and AVX2 (int4)
 * blk_u4's integers and float32 steps with the 16 lanes of a unit in two registers of 8 (lanes
 * 0-7: bytes 0-31 of the unit's weights and of each half of xp; lanes 8-15: bytes 32-63), each
 * lane's sum exact (AVX2: vpmaddubsw of a nibble, at most 15 * 127 * 2 a pair, then vpmaddwd by
 * 1), the same fma per lane, and tree16 as hsum16 adds. The lanes' scales and zero points come
 * from the unit's groups (4 for group size 32, 2 for 64, 1 above) spread by vpermps; a short last
 * unit fills them one by one, 0 past its groups (its other lanes: 0 + 0 times a scale of 0). */
#define DA_DOT4_AVXVNNI(acc, u, x0) ((acc) = _mm256_dpbusd_avx_epi32((acc), (u), (x0)))
#define DA_DOT4_AVX2(acc, u, x0)                                                                   \
    ((acc) = _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16((u), (x0)), one)))
#define DA_BLK_U4_256(NAME, ATTR, DOT)                                                             \
    ATTR __attribute__((always_inline)) static inline void NAME(                                   \
        const da_x *d, int64_t m, int64_t n0, int nr, bool h16, bool uz, float *out) {             \
        const ts_wo_args *a = d->a;                                                                \
        const int64_t K = a->k, gs = a->group_size, G = K / gs, rb = K / 2;                        \
        const __m256i lo4 = _mm256_set1_epi8(15), one = _mm256_set1_epi16(1);                      \
        (void)one;                                                                                 \
        const __m256i i0 = gs == 32 ? _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1)                    \
                                    : _mm256_setzero_si256(),                                      \
                      i1 = gs == 32   ? _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3)                  \
                           : gs == 64 ? _mm256_set1_epi32(1)                                       \
                                      : _mm256_setzero_si256();                                    \
        __m256 f0[DA_NB], f1[DA_NB];                                                               \
        for (int r = 0; r < nr; r++) f0[r] = f1[r] = _mm256_setzero_ps();                          \
        for (int64_t c = 0; c < K; c += 128) {                                                     \
            const bool part = K - c < 128;                                                         \
            const int8_t *xp = d->xp + m * d->kp + c;                                              \
            const int32_t *xc = d->xc + m * (d->kp / 8) + c / 8;                                   \
            const __m256i xe0 = _mm256_loadu_si256((const void *)xp),                              \
                          xe1 = _mm256_loadu_si256((const void *)(xp + 32)),                       \
                          xo0 = _mm256_loadu_si256((const void *)(xp + 64)),                       \
                          xo1 = _mm256_loadu_si256((const void *)(xp + 96)),                       \
                          st0 = _mm256_loadu_si256((const void *)xc),                              \
                          st1 = _mm256_loadu_si256((const void *)(xc + 8));                        \
            const uint8_t *w = a->w + n0 * rb + c / 2;                                             \
            for (int r = 0; r < nr; r++) {                                                         \
                const int64_t i = (n0 + r) * G + c / gs;                                           \
                DA_PREFETCH(w, (r + DA_PF4) * rb);                                                 \
                __m128 sv;                                                                         \
                __m128i zv = _mm_setzero_si128();                                                  \
                __m256i b0, b1;                                                                    \
                if (!part) {                                                                       \
                    b0 = _mm256_loadu_si256((const void *)(w + r * rb));                           \
                    b1 = _mm256_loadu_si256((const void *)(w + r * rb + 32));                      \
                    if (gs == 32)                                                                  \
                        sv = h16 ? _mm_cvtph_ps(_mm_loadl_epi64((const void *)(a->scales_h + i)))  \
                                 : _mm_loadu_ps(a->scales + i);                                    \
                    else if (gs == 64)                                                             \
                        sv = h16 ? _mm_cvtph_ps(_mm_cvtsi32_si128(two_halves(a->scales_h + i)))    \
                                 : _mm_castsi128_ps(                                               \
                                       _mm_loadl_epi64((const void *)(a->scales + i)));            \
                    else                                                                           \
                        sv = _mm_set1_ps(h16 ? _cvtsh_ss(a->scales_h[i]) : a->scales[i]);          \
                    if (!uz)                                                                       \
                        zv = gs == 32   ? _mm_loadu_si128((const void *)(a->zero_points + i))      \
                             : gs == 64 ? _mm_loadl_epi64((const void *)(a->zero_points + i))      \
                                        : _mm_set1_epi32(a->zero_points[i]);                       \
                } else {                                                                           \
                    uint8_t wt[64] = {0};                                                          \
                    float s4[4] = {0};                                                             \
                    int32_t z4[4] = {0};                                                           \
                    memcpy(wt, w + r * rb, (size_t)((K - c) / 2));                                 \
                    b0 = _mm256_loadu_si256((const void *)wt);                                     \
                    b1 = _mm256_loadu_si256((const void *)(wt + 32));                              \
                    for (int64_t g = 0; g < (K - c) / gs; g++)                                     \
                        s4[g] = scale_of(a, i + g), z4[g] = uz ? 0 : a->zero_points[i + g];        \
                    sv = _mm_loadu_ps(s4), zv = _mm_loadu_si128((const void *)z4);                 \
                }                                                                                  \
                const __m256 sw = _mm256_castps128_ps256(sv);                                      \
                __m256i d0 = st0, d1 = st1;                                                        \
                if (!uz) {                                                                         \
                    const __m256i zw = _mm256_castsi128_si256(zv);                                 \
                    d0 = _mm256_mullo_epi32(_mm256_permutevar8x32_epi32(zw, i0), st0);             \
                    d1 = _mm256_mullo_epi32(_mm256_permutevar8x32_epi32(zw, i1), st1);             \
                }                                                                                  \
                DOT(d0, _mm256_and_si256(b0, lo4), xe0);                                           \
                DOT(d0, _mm256_and_si256(_mm256_srli_epi16(b0, 4), lo4), xo0);                     \
                DOT(d1, _mm256_and_si256(b1, lo4), xe1);                                           \
                DOT(d1, _mm256_and_si256(_mm256_srli_epi16(b1, 4), lo4), xo1);                     \
                f0[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_permutevar8x32_ps(sw, i0),  \
                                        f0[r]);                                                    \
                f1[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), _mm256_permutevar8x32_ps(sw, i1),  \
                                        f1[r]);                                                    \
            }                                                                                      \
        }                                                                                          \
        for (int r = 0; r < nr; r++) {                                                             \
            const __m256 h = _mm256_add_ps(f0[r], f1[r]);                                          \
            const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));   \
            const __m128 p = _mm_add_ps(q, _mm_movehl_ps(q, q));                                   \
            out[r] = _mm_cvtss_f32(_mm_add_ss(p, _mm_shuffle_ps(p, p, 1))) * d->sx[m];             \
        }                                                                                          \
    }
DA_BLK_U4_256(blk_u4_avxvnni, TS_DA8_AVXVNNI, DA_DOT4_AVXVNNI)
DA_BLK_U4_256(blk_u4_avx2, TS_DA8_AVX2, DA_DOT4_AVX2)
#undef DA_BLK_U4_256
#undef DA_DOT4_AVXVNNI
#undef DA_DOT4_AVX2

/* the 256-bit loops over tokens and blocks of rows, int8 or int4 weights */
#define DA_RUN_256(NAME, ATTR, BLK, BLK4)                                                          \
    ATTR static void NAME(const da_x *d, int64_t n0, int64_t nn) {                                 \
        const ts_wo_args *a = d->a;                                                                \
        const bool h16 = a->scales_h != NULL, uz = a->uniform_zp;                                  \
        for (int64_t m = 0; m < a->m; m++) {                                                       \
            float out[DA_NB];                                                                      \
            for (int64_t n = n0; n < n0 + nn; n += DA_NB) {                                        \
                const int nr = n0 + nn - n < DA_NB ? (int)(n0 + nn - n) : DA_NB;                   \
                if (!a->int4 && nr == DA_NB)                                                       \
                    BLK(d, m, n, DA_NB, out);                                                      \
                else if (!a->int4)                                                                 \
                    BLK(d, m, n, nr, out);                                                         \
                else if (nr == DA_NB && h16 && uz) /* torchao's 8da4w: constant arguments */       \
                    BLK4(d, m, n, DA_NB, true, true, out);                                         \
                else                                                                               \
                    BLK4(d, m, n, nr, h16, uz, out);                                               \
                for (int r = 0; r < nr; r++)                                                       \
                    a->y[m * a->n + n + r] = out[r] + (a->bias ? a->bias[n + r] : 0.0f);           \
            }                                                                                      \
        }                                                                                          \
    }
DA_RUN_256(run_avxvnni, TS_DA8_AVXVNNI, blk_i8_avxvnni, blk_u4_avxvnni)
DA_RUN_256(run_avx2, TS_DA8_AVX2, blk_i8_avx2, blk_u4_avx2)
#undef DA_RUN_256
#endif

/* quant_row's bytes of a row in quant_row_vnni's xp layout (each unit of 128: its even elements,
 * then its odd ones; zero padded to kp) with the lanes' starts in xc (zp0 times minus each lane's
 * xq sum), for the 256-bit int4 kernels */
static float quant_row_perm(const float *x, int64_t K, int64_t kp, int8_t *xp, int32_t *xc,
                            int32_t zp0) {
    const float s = quant_row(x, K, xp); /* in place: xp's row holds kp >= K bytes */
    for (int64_t c = 0; c < kp; c += 128) {
        int8_t u[128] = {0};
        memcpy(u, xp + c, (size_t)(K - c < 128 ? K - c : 128));
        for (int j = 0; j < 64; j++) xp[c + j] = u[2 * j], xp[c + 64 + j] = u[2 * j + 1];
        for (int l = 0; l < 16; l++) {
            int32_t sum = 0;
            for (int e = 0; e < 8; e++) sum += u[8 * l + e];
            xc[c / 8 + l] = -zp0 * sum;
        }
    }
    return s;
}

bool tsi_cpu_da8_linear(const ts_wo_args *a) {
    const int64_t M = a->m, N = a->n, K = a->k;
    bool vnni = false;
    tsi_qgemm_kind k256 = TSI_QGEMM_PORTABLE; /* int8 weights below AVX512-VNNI: AVX-VNNI, AVX2 */
#ifdef TS_HAVE_DA8_VNNI
    const tsi_qgemm_kind kind = tsi_qgemm_kind_get();
    vnni = kind == TSI_QGEMM_AVX512VNNI;
    if (kind == TSI_QGEMM_AVXVNNI || kind == TSI_QGEMM_AVX2) k256 = kind;
#endif
    da_x d = {.a = a, .kp = (K + 127) & ~(int64_t)127};
    const bool perm = (vnni || k256) && a->int4;
    /* floats and int32 first (sx, xsum, xc), then the bytes (xq or xp) */
    const size_t bytes =
        (size_t)M * (sizeof(float) + sizeof(int32_t)) +
        (perm ? (size_t)(M * (d.kp / 8)) * sizeof(int32_t) + (size_t)(M * d.kp) : (size_t)(M * K)) +
        64;
    ts_block *blk = NULL;
    char *s = tsi_host_scratch_get(bytes, &blk);
    if (!s) {
        tsi_kernel_oom("int8_dynamic_activation_linear", bytes);
        return false;
    }
    d.sx = (float *)(void *)s;
    d.xsum = (int32_t *)(void *)(d.sx + M);
    d.xc = d.xsum + M;
    char *bytes0 = (char *)(void *)(d.xc + (perm ? M * (d.kp / 8) : 0));
    if (perm)
        d.xp = (int8_t *)bytes0;
    else
        d.xq = (int8_t *)bytes0;
    for (int64_t m = 0; m < M; m++) {
        const float *x = a->x + m * K;
#ifdef TS_HAVE_DA8_VNNI
        if (vnni) {
            /* one zero point for all: the lane starts hold it; else minus the lanes' sums */
            const int32_t zp0 = perm && a->uniform_zp ? a->zero_points[0] : 1;
            d.sx[m] = perm ? quant_row_vnni(x, K, d.kp, NULL, NULL, d.xp + m * d.kp,
                                            d.xc + m * (d.kp / 8), zp0)
                           : quant_row_vnni(x, K, d.kp, d.xq + m * K, d.xsum + m, NULL, NULL, 0);
            continue;
        }
#endif
        if (perm) {
            const int32_t zp0 = a->uniform_zp ? a->zero_points[0] : 1;
            d.sx[m] = quant_row_perm(x, K, d.kp, d.xp + m * d.kp, d.xc + m * (d.kp / 8), zp0);
            continue;
        }
        d.sx[m] = quant_row(x, K, d.xq + m * K);
        if (k256) { /* the 256-bit kernels' correction: the row's xq sum */
            int32_t sum = 0;
            for (int64_t k = 0; k < K; k++) sum += d.xq[m * K + k];
            d.xsum[m] = sum;
        }
    }
    const int64_t per = 16, blocks = (N + per - 1) / per;
    TS_PARALLEL_FOR_IF(
        blocks > 1 && M * N * K >= ((int64_t)1 << 16), for (int64_t b = 0; b < blocks; b++) {
            const int64_t n0 = b * per, nn = N - n0 < per ? N - n0 : per;
#ifdef TS_HAVE_DA8_VNNI
            if (vnni) {
                run_vnni(&d, n0, nn);
                continue;
            }
            if (k256 == TSI_QGEMM_AVXVNNI) {
                run_avxvnni(&d, n0, nn);
                continue;
            }
            if (k256 == TSI_QGEMM_AVX2) {
                run_avx2(&d, n0, nn);
                continue;
            }
#endif
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = n0; n < n0 + nn; n++)
                    a->y[m * N + n] = out_generic(&d, m, n) + (a->bias ? a->bias[n] : 0.0f);
        });
    tsi_host_scratch_put(blk);
    return true;
}
