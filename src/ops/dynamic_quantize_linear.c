/* dynamic_quantize_linear.c — ONNX's DynamicQuantizeLinear (ts_dynamic_quantize_linear,
 * include/tessera/quant.h): x float32 to uint8 with the scale and zero point from x's range.
 *
 * On the cpu, for a contiguous x whose values are all finite: one pass for the minimum and maximum,
 * the parameters in float32 on the host, one pass of x / scale. Elsewhere (other devices, NaN or
 * infinities in x) the same formulas composed of tensor ops, as the ONNX importer ran them before:
 * the two routes give the same bytes on finite inputs (every step is one float32 operation). */
#include <math.h>
#include <string.h>

#include "core/clones.h"
#include "core/internal.h"
#include "ops/dynamic_quantize_internal.h"
#include "tessera/quant.h"
#include "tessera/reductions.h"

/* lo / hi over x[0, n) (n >= 1); *bad set when a value is NaN or infinite (v - v is 0 for the
 * finite values alone; min / max pass NaN over: v < lo ? v : lo, as minps) */
static void range_scalar(const float *x, int64_t n, float *lo_out, float *hi_out, int *bad_out) {
    float lo = x[0], hi = x[0], chk = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        chk += v - v;
    }
    *lo_out = lo, *hi_out = hi, *bad_out = chk != 0.0f;
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
/* the same in AVX2, 16 values a step (GCC does not vectorize the scalar form's selects) */
__attribute__((target(TS_ISA_TARGET_AVX2))) static void
range_avx2(const float *x, int64_t n, float *lo_out, float *hi_out, int *bad_out) {
    __m256 l0 = _mm256_set1_ps(x[0]), l1 = l0, h0 = l0, h1 = l0, c0 = _mm256_setzero_ps(), c1 = c0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        l0 = _mm256_min_ps(a, l0), l1 = _mm256_min_ps(b, l1);
        h0 = _mm256_max_ps(a, h0), h1 = _mm256_max_ps(b, h1);
        c0 = _mm256_add_ps(c0, _mm256_sub_ps(a, a)), c1 = _mm256_add_ps(c1, _mm256_sub_ps(b, b));
    }
    float lo[16], hi[16], ck[16];
    _mm256_storeu_ps(lo, l0), _mm256_storeu_ps(lo + 8, l1);
    _mm256_storeu_ps(hi, h0), _mm256_storeu_ps(hi + 8, h1);
    _mm256_storeu_ps(ck, c0), _mm256_storeu_ps(ck + 8, c1);
    float l, h;
    int bad;
    range_scalar(x + i - (i == n ? 1 : 0), n - i + (i == n ? 1 : 0), &l, &h, &bad);
    for (int j = 0; j < 16; j++) {
        l = lo[j] < l ? lo[j] : l;
        h = hi[j] > h ? hi[j] : h;
        bad |= ck[j] != 0.0f;
    }
    *lo_out = l, *hi_out = h, *bad_out = bad;
}
#endif

#if defined(__GNUC__) && defined(__x86_64__)
/* the same in AVX-512, 32 values a step */
__attribute__((target(TS_ISA_TARGET_AVX512))) static void
range_avx512(const float *x, int64_t n, float *lo_out, float *hi_out, int *bad_out) {
    __m512 l0 = _mm512_set1_ps(x[0]), l1 = l0, h0 = l0, h1 = l0, c0 = _mm512_setzero_ps(), c1 = c0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        l0 = _mm512_min_ps(a, l0), l1 = _mm512_min_ps(b, l1);
        h0 = _mm512_max_ps(a, h0), h1 = _mm512_max_ps(b, h1);
        c0 = _mm512_add_ps(c0, _mm512_sub_ps(a, a)), c1 = _mm512_add_ps(c1, _mm512_sub_ps(b, b));
    }
    float lo[32], hi[32], ck[32];
    _mm512_storeu_ps(lo, l0), _mm512_storeu_ps(lo + 16, l1);
    _mm512_storeu_ps(hi, h0), _mm512_storeu_ps(hi + 16, h1);
    _mm512_storeu_ps(ck, c0), _mm512_storeu_ps(ck + 16, c1);
    float l, h;
    int bad;
    range_scalar(x + i - (i == n ? 1 : 0), n - i + (i == n ? 1 : 0), &l, &h, &bad);
    for (int j = 0; j < 32; j++) {
        l = lo[j] < l ? lo[j] : l;
        h = hi[j] > h ? hi[j] : h;
        bad |= ck[j] != 0.0f;
    }
    *lo_out = l, *hi_out = h, *bad_out = bad;
}
#endif

static void range(const float *x, int64_t n, float *lo_out, float *hi_out, int *bad_out) {
#if defined(__GNUC__) && defined(__x86_64__)
    if (ts_cpu_isa_get() >= TS_ISA_AVX512) return range_avx512(x, n, lo_out, hi_out, bad_out);
    if (ts_cpu_isa_get() >= TS_ISA_AVX2) return range_avx2(x, n, lo_out, hi_out, bad_out);
#endif
    range_scalar(x, n, lo_out, hi_out, bad_out);
}

/* y = clamp(rint(x / scale) + zp, 0, 255): x finite, so x / scale is too; the bytes' sum (mod
 * 2^32) returned */
static uint32_t span_scalar(const float *x, int64_t n, float scale, float zp, uint8_t *y) {
    uint32_t sum = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = rintf(x[i] / scale) + zp;
        v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
        y[i] = (uint8_t)(int32_t)v;
        sum += y[i];
    }
    return sum;
}

#if defined(__GNUC__) && defined(__x86_64__)
/* the same, 8 / 16 values a step: each lane's steps the scalar's (one division, rint in the
 * current rounding mode, one addition; max / min as the two selects on values that are never NaN:
 * -0 becomes 0 either way) */
__attribute__((target(TS_ISA_TARGET_AVX2))) static uint32_t
span_avx2(const float *x, int64_t n, float scale, float zp, uint8_t *y) {
    const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zp), lo = _mm256_setzero_ps(),
                 hi = _mm256_set1_ps(255.0f);
    __m256i acc = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v =
            _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), s), _MM_FROUND_CUR_DIRECTION);
        v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, z), lo), hi);
        const __m256i q = _mm256_cvtps_epi32(v);
        acc = _mm256_add_epi32(acc, q);
        const __m128i w =
            _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        _mm_storel_epi64((__m128i *)(void *)(y + i), _mm_packus_epi16(w, w));
    }
    uint32_t lanes[8], sum = span_scalar(x + i, n - i, scale, zp, y + i);
    _mm256_storeu_si256((__m256i *)(void *)lanes, acc);
    for (int j = 0; j < 8; j++) sum += lanes[j];
    return sum;
}

__attribute__((target(TS_ISA_TARGET_AVX512))) static uint32_t
span_avx512(const float *x, int64_t n, float scale, float zp, uint8_t *y) {
    const __m512 s = _mm512_set1_ps(scale), z = _mm512_set1_ps(zp), lo = _mm512_setzero_ps(),
                 hi = _mm512_set1_ps(255.0f);
    __m512i acc = _mm512_setzero_si512();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 q = _mm512_div_ps(_mm512_maskz_loadu_ps(m, x + i), s);
        __m512 v = _mm512_roundscale_ps(q, _MM_FROUND_CUR_DIRECTION);
        v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v, z), lo), hi);
        const __m512i qi = _mm512_cvtps_epi32(v);
        acc = _mm512_mask_add_epi32(acc, m, acc, qi);
        _mm512_mask_cvtepi32_storeu_epi8(y + i, m, qi);
    }
    return (uint32_t)_mm512_reduce_add_epi32(acc);
}
#endif

static uint32_t span(const float *x, int64_t n, float scale, float zp, uint8_t *y) {
#if defined(__GNUC__) && defined(__x86_64__)
    if (ts_cpu_isa_get() >= TS_ISA_AVX512) return span_avx512(x, n, scale, zp, y);
    if (ts_cpu_isa_get() >= TS_ISA_AVX2) return span_avx2(x, n, scale, zp, y);
#endif
    return span_scalar(x, n, scale, zp, y);
}

bool tsi_dql_params(const float *x, int64_t n, float *scale, float *zp, uint8_t *zq) {
    float lo, hi;
    int bad;
    range(x, n, &lo, &hi, &bad);
    if (bad || !isfinite(lo) || !isfinite(hi)) return false;
    hi = hi > 0.0f ? hi : 0.0f;
    lo = lo < 0.0f ? lo : 0.0f;
    const float sc = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    float zf = -lo / sc;
    zf = rintf(zf < 0.0f ? 0.0f : zf > 255.0f ? 255.0f : zf);
    *scale = sc, *zp = zf, *zq = (uint8_t)(int32_t)zf;
    return true;
}

void tsi_dql_quantize_rows(const float *x, int64_t rows, int64_t k, float scale, float zp,
                           uint8_t *y, int64_t *sums) {
    for (int64_t r = 0; r < rows; r++) {
        const uint32_t s = span(x + r * k, k, scale, zp, y + r * k);
        if (sums) sums[r] = s;
    }
}

/* the formulas in tensor ops (any device; NaN and infinities as those ops take them) */
static bool composed(ts_tensor *x, ts_tensor **y, ts_tensor **scale, ts_tensor **zp) {
    ts_tensor *hi = ts_maximum_scalar(ts_max(x), 0), *lo = ts_minimum_scalar(ts_min(x), 0);
    ts_tensor *range = ts_sub(hi, lo);
    range = ts_where(ts_eq(hi, lo), ts_ones_like(range), range);
    ts_tensor *s = ts_div_scalar(range, 255);
    ts_tensor *z = ts_to_dtype(ts_round(ts_clamp(ts_neg(ts_div(lo, s)), 0, 255)), TS_U8);
    ts_tensor *q = ts_round(ts_div(x, s));
    q = ts_add(ts_to_dtype(q, TS_F64), ts_to_dtype(z, TS_F64));
    *y = ts_to_dtype(ts_clamp(q, 0, 255), TS_U8);
    *scale = s, *zp = z;
    return *y && *scale && *zp;
}

ts_tensor *ts_dynamic_quantize_linear(ts_tensor *x, ts_tensor **scale, ts_tensor **zero_point) {
    const char *op = "dynamic_quantize_linear";
    tsi_init();
    if (scale) *scale = NULL;
    if (zero_point) *zero_point = NULL;
    if (!scale || !zero_point)
        return tsi_error_set(TS_ERR_ARG, "%s: scale and zero_point (outputs) must not be NULL", op),
               NULL;
    if (!tsi_check_input(op, x, "input")) return NULL;
    if (x->dtype != TS_F32)
        return tsi_error_set(TS_ERR_DTYPE, "%s: input must be float32 (got %s)", op, tsi_desc(x)),
               NULL;
    ts_tensor *y = NULL, *s = NULL, *z = NULL;
    ts_scope_begin();
    bool done = false;
    const int64_t n = tsi_numel(x->shape);
    if (tsi_device(x).type == TS_CPU && tsi_is_contiguous(x) && n > 0) {
        const float *xd = (const float *)tsi_kview(x).data;
        float sc, zf;
        uint8_t zq;
        if (tsi_dql_params(xd, n, &sc, &zf, &zq)) {
            y = tsi_new(op, x->shape, TS_U8, tsi_device(x));
            if (y) {
                tsi_dql_quantize_rows(xd, 1, n, sc, zf, (uint8_t *)y->storage->data, NULL);
                y = tsi_own(y);
                s = ts_from_data(TS_SHAPE(), TS_F32, &sc, (ts_opts){.device = tsi_device(x)});
                z = ts_from_data(TS_SHAPE(), TS_U8, &zq, (ts_opts){.device = tsi_device(x)});
            }
            done = true;
        }
    }
    if (!done) composed(x, &y, &s, &z);
    const bool ok = y && s && z && ts_error() == TS_OK;
    if (ok) {
        ts_keep(y), ts_keep(s), ts_keep(z);
        *scale = s, *zero_point = z;
    }
    ts_scope_end();
    return ok ? y : NULL;
}
