/* kern_qdynamic_act.c — linear layers with int8 dynamic activations and int8 / int4 weights
 * (quant_args.h's ts_wo_args with act_int8; torchao's int8_dynamic_activation_int8_weight /
 * int8_dynamic_activation_int4_weight). Each row of x is quantized once, symmetric per token, to
 * int8 (portable C, shared by both paths), then every output is an exact int32 sum of int8
 * products and a float32 epilogue.
 *
 * Portable: acc = sum_k xq[k] * (w[k] - zp) in int32 per row (int8) or per group (int4).
 * AVX512-VNNI (vpdpbusd: unsigned bytes times signed bytes, four at a time into int32 lanes),
 * taken when the CPU has it and the ISA in use is AVX-512, as qgemm_vnni.c:
 *  - int8: the weight made unsigned by flipping its sign bit (w + 128), xq the signed side:
 *    dot = sum (w + 128) xq, acc = dot - (128 + zp) * xsum with xsum = sum_k xq (per token);
 *  - int4: the nibbles (0..15) are already unsigned: dot_g = sum q xq over the group, and the
 *    zero point's share zp_g * xsum_g (xsum_g per token and group) is summed apart in float32:
 *    y = (sum_g scale_g (float)dot_g - sum_g scale_g (float)(zp_g xsum_g)) * sx + bias. Each
 *    128 elements (64 bytes: elements 2j in the low nibbles, 2j + 1 in the high ones) are one
 *    load, split into its low and its high nibbles; xq is laid out to match once per token (xp:
 *    the even elements of each 128, then the odd ones).
 * The integers are the same on both paths; the int4 float epilogue's order differs (rounding). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/host_scratch.h"
#include "backend/cpu/qgemm_vnni.h"
#include "backend/omp_if.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define TS_HAVE_DA8_VNNI 1
#include <immintrin.h>
#define TS_DA8_VNNI __attribute__((target(TS_ISA_TARGET_AVX512 ",avx512vnni")))
/* a prefetch of base + off bytes, in integer arithmetic: past the weight's end it is no pointer
 * (and a prefetch does not fault) */
#define DA_PREFETCH(base, off)                                                                     \
    _mm_prefetch((const char *)((uintptr_t)(base) + (uintptr_t)(off)), _MM_HINT_T0)
#endif

enum { DA_NB = 4, DA_PF = 8 }; /* output features a block; rows prefetched ahead */

/* the per-token data every output row reads */
typedef struct da_x {
    const ts_wo_args *a;
    int64_t groups; /* int4: k / group_size; int8: 1 */
    int64_t kp;     /* k rounded up to 128 (xp's row length) */
    int8_t *xq;     /* [m][k] */
    int8_t *xp;     /* [m][kp] int4 + VNNI: nibble order, zero padded */
    int32_t *xsum;  /* [m][groups] */
    float *xsumf;   /* [m][groups]: xsum as float32 (exact: |xsum| <= 127 k) */
    float *sx;      /* [m]; NaN for a row with NaN or inf */
} da_x;

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
    const int64_t gs = a->group_size, G = d->groups;
    const uint8_t *w = a->w + n * (K / 2);
    float f = 0;
    for (int64_t g = 0; g < G; g++) {
        const int32_t zp = a->zero_points[n * G + g];
        int32_t acc = 0;
        for (int64_t k = g * gs; k < (g + 1) * gs; k += 2) {
            const uint8_t b = w[k / 2];
            acc += (int32_t)xq[k] * ((int32_t)(b & 15) - zp) +
                   (int32_t)xq[k + 1] * ((int32_t)(b >> 4) - zp);
        }
        f += a->scales[n * G + g] * (float)acc;
    }
    return f * d->sx[m];
}

/* ------------------------------------------------------------------ AVX512-VNNI */
#ifdef TS_HAVE_DA8_VNNI
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

/* the zero points' share of int4 row n: sum_g scale_g (float)(zp_g xsum_g), 16 groups at once;
 * with one zero point for all (torchao's symmetric 8da4w weights: 8), zp sum_g scale_g xsum_g
 * (exact alike: zp xsum_g is an integer below 2^24), the zero points not read */
TS_DA8_VNNI static inline __m512 zp_share(const da_x *d, int64_t m, int64_t n) {
    const ts_wo_args *a = d->a;
    const int64_t G = d->groups;
    const float *sc = a->scales + n * G;
    const int32_t *zp = a->zero_points + n * G, *xs = d->xsum + m * G;
    __m512 c = _mm512_setzero_ps();
    if (a->uniform_zp) {
        const float *xf = d->xsumf + m * G;
        for (int64_t g = 0; g < G; g += 16) {
            const __mmask16 mk = G - g >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (G - g)) - 1);
            c = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, sc + g),
                                _mm512_maskz_loadu_ps(mk, xf + g), c);
        }
        return _mm512_mul_ps(c, _mm512_set1_ps((float)a->zero_points[0]));
    }
    for (int64_t g = 0; g < G; g += 16) {
        const __mmask16 mk = G - g >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (G - g)) - 1);
        const __m512i p = _mm512_mullo_epi32(_mm512_maskz_loadu_epi32(mk, zp + g),
                                             _mm512_maskz_loadu_epi32(mk, xs + g));
        c = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, sc + g), _mm512_cvtepi32_ps(p), c);
    }
    return c;
}

/* nr int4 rows against token m (xp: its nibble-ordered bytes). Each 128 elements (64 bytes):
 * one load, the low nibbles (elements 2j) and the high ones (2j + 1) as two registers of unsigned
 * bytes, both dotted with xp into the same int32 lanes: lanes 4i..4i+3 hold elements 32i..32i+31
 * of the 128, so their group is (c + 32 i) / gs. Then (float) lanes times each lane's group scale
 * (a permute of the unit's scales) into the row's float32 accumulator. A last unit of fewer than
 * 128 elements reads only its bytes and its groups' scales. */
TS_DA8_VNNI static inline void blk_u4(const da_x *d, int64_t m, int64_t n0, int nr, float *out) {
    const ts_wo_args *a = d->a;
    const int64_t K = a->k, gs = a->group_size, G = d->groups, rb = K / 2;
    const int8_t *xp = d->xp + m * d->kp;
    const uint8_t *w = a->w + n0 * rb;
    const __m512i lane = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512i gidx = _mm512_srlv_epi32(lane, _mm512_set1_epi32(gs == 32   ? 0
                                                                   : gs == 64 ? 1
                                                                              : 2));
    const __m512i lo4 = _mm512_set1_epi8(15);
    __m512 f[DA_NB];
    for (int r = 0; r < nr; r++) f[r] = _mm512_setzero_ps();
    const int64_t full = K / 128 * 128;
    for (int64_t c = 0; c < full; c += 128) {
        const __m512i xe = _mm512_loadu_si512((const void *)(xp + c)),
                      xo = _mm512_loadu_si512((const void *)(xp + c + 64));
        for (int r = 0; r < nr; r++) {
            DA_PREFETCH(w, (r + DA_PF) * rb + c / 2);
            const __m512i b = _mm512_loadu_si512((const void *)(w + r * rb + c / 2));
            __m512i dt = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(b, lo4), xe);
            dt = _mm512_dpbusd_epi32(dt, _mm512_and_si512(_mm512_srli_epi16(b, 4), lo4), xo);
            const float *sc = a->scales + (n0 + r) * G + c / gs;
            const __m512 sv =
                gs == 32   ? _mm512_permutexvar_ps(gidx, _mm512_castps128_ps512(_mm_loadu_ps(sc)))
                : gs == 64 ? _mm512_permutexvar_ps(gidx, _mm512_castps128_ps512(_mm_castsi128_ps(
                                                             _mm_loadl_epi64((const void *)sc))))
                           : _mm512_set1_ps(sc[0]);
            f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dt), sv, f[r]);
        }
    }
    if (full < K) { /* 32, 64 or 96 elements left: only their bytes and their groups' scales */
        const int64_t c = full, left = K - c;
        const __mmask64 wm = (__mmask64)((1ull << (left / 2)) - 1);
        const __mmask16 sm = (__mmask16)((1u << (left / gs)) - 1);
        const __m512i xe = _mm512_loadu_si512((const void *)(xp + c)),
                      xo = _mm512_loadu_si512((const void *)(xp + c + 64));
        for (int r = 0; r < nr; r++) {
            const __m512i b = _mm512_maskz_loadu_epi8(wm, w + r * rb + c / 2);
            __m512i dt = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(b, lo4), xe);
            dt = _mm512_dpbusd_epi32(dt, _mm512_and_si512(_mm512_srli_epi16(b, 4), lo4), xo);
            const __m512 sv = _mm512_permutexvar_ps(
                gidx, _mm512_maskz_loadu_ps(sm, a->scales + (n0 + r) * G + c / gs));
            f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dt), sv, f[r]);
        }
    }
    for (int r = 0; r < nr; r++)
        out[r] = _mm512_reduce_add_ps(_mm512_sub_ps(f[r], zp_share(d, m, n0 + r))) * d->sx[m];
}

TS_DA8_VNNI static void run_vnni(const da_x *d, int64_t n0, int64_t nn) {
    const ts_wo_args *a = d->a;
    for (int64_t m = 0; m < a->m; m++) {
        float out[DA_NB];
        for (int64_t n = n0; n < n0 + nn; n += DA_NB) {
            const int nr = n0 + nn - n < DA_NB ? (int)(n0 + nn - n) : DA_NB;
            if (a->int4) {
                if (nr == DA_NB)
                    blk_u4(d, m, n, DA_NB, out);
                else
                    blk_u4(d, m, n, nr, out);
            } else {
                if (nr == DA_NB)
                    blk_i8(d, m, n, DA_NB, out);
                else
                    blk_i8(d, m, n, nr, out);
            }
            for (int r = 0; r < nr; r++)
                a->y[m * a->n + n + r] = out[r] + (a->bias ? a->bias[n + r] : 0.0f);
        }
    }
}
#endif

bool tsi_cpu_da8_linear(const ts_wo_args *a) {
    const int64_t M = a->m, N = a->n, K = a->k;
    bool vnni = false;
#ifdef TS_HAVE_DA8_VNNI
    vnni = tsi_qgemm_vnni_available();
#endif
    da_x d = {.a = a, .groups = a->int4 ? K / a->group_size : 1, .kp = (K + 127) & ~(int64_t)127};
    const bool perm = vnni && a->int4;
    size_t bytes = (size_t)(M * K) + (perm ? (size_t)(M * d.kp) : 0) +
                   (size_t)(M * d.groups) * (sizeof(int32_t) + sizeof(float)) +
                   (size_t)M * sizeof(float) + 64;
    ts_block *blk = NULL;
    char *s = tsi_host_scratch_get(bytes, &blk);
    if (!s) {
        tsi_kernel_oom("int8_dynamic_activation_linear", bytes);
        return false;
    }
    d.sx = (float *)(void *)s;
    d.xsum = (int32_t *)(void *)(s + (size_t)M * sizeof(float));
    d.xsumf = (float *)(void *)(d.xsum + M * d.groups);
    d.xq = (int8_t *)(d.xsumf + M * d.groups);
    d.xp = perm ? d.xq + M * K : NULL;
    for (int64_t m = 0; m < M; m++) {
        int8_t *q = d.xq + m * K;
        d.sx[m] = quant_row(a->x + m * K, K, q);
        const int64_t gl = K / d.groups;
        for (int64_t g = 0; g < d.groups; g++) {
            int32_t t = 0;
            for (int64_t k = g * gl; k < (g + 1) * gl; k++) t += q[k];
            d.xsum[m * d.groups + g] = t;
            d.xsumf[m * d.groups + g] = (float)t;
        }
        if (perm) { /* each 128: the even elements, then the odd ones; a short last 128 zero
                     * padded */
            int8_t *p = d.xp + m * d.kp;
            memset(p, 0, (size_t)d.kp);
            for (int64_t c = 0; c < K; c += 128)
                for (int64_t j = 0; j < 64 && c + 2 * j < K; j++)
                    p[c + j] = q[c + 2 * j], p[c + 64 + j] = q[c + 2 * j + 1];
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
#endif
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = n0; n < n0 + nn; n++)
                    a->y[m * N + n] = out_generic(&d, m, n) + (a->bias ? a->bias[n] : 0.0f);
        });
    tsi_host_scratch_put(blk);
    return true;
}
