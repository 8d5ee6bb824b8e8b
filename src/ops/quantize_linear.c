/* quantize_linear.c — ONNX's QuantizeLinear of float32 to uint8 / int8 on the cpu in one pass
 * (ts_quantize_linear, include/tessera/quant.h): the bytes of the importer's composed route
 * (src/onnx/ops_quantize.c: ts_div, ts_round, + zero point in float64, ts_clamp, the cast),
 * without its four float temporaries. AVX-512, AVX2 and portable forms give the same bytes. */
#include <math.h>

#include "backend/omp_if.h"
#include "core/clones.h"
#include "core/internal.h"
#include "tessera/quant.h"

/* The definition, one value: v = rint(x / s) + zp in float32, NaN -> 0, clamped to [lo, hi].
 * The composed route adds zp and clamps in float64; rint gives an integer (or +-inf / NaN), so a
 * float32 sum differs only where |v| >= 2^24, which clamps to the same end; a NaN casts to 0
 * there (kernel_math.h's ts_d2u8 / ts_d2i8). */
static void ql_scalar(const float *x, int64_t n, float s, float zp, float lo, float hi, bool sg,
                      void *out) {
    for (int64_t i = 0; i < n; i++) {
        float v = nearbyintf(x[i] / s) + zp;
        v = v != v ? 0.0f : v < lo ? lo : v > hi ? hi : v;
        if (sg)
            ((int8_t *)out)[i] = (int8_t)(int32_t)v;
        else
            ((uint8_t *)out)[i] = (uint8_t)(int32_t)v;
    }
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>

/* 16 values: the definition lane by lane (div and round are IEEE's, as the scalar's) */
__attribute__((target(TS_ISA_TARGET_AVX512))) static inline __m512i
ql16(__m512 x, __m512 s, __m512 zp, __m512 lo, __m512 hi) {
    __m512 v = _mm512_add_ps(
        _mm512_roundscale_ps(_mm512_div_ps(x, s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
        zp);
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v); /* NaN -> 0 */
    return _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(v, lo), hi));
}

__attribute__((target(TS_ISA_TARGET_AVX512))) static void
ql_avx512(const float *x, int64_t n, float s, float zp, float lo, float hi, bool sg, void *out) {
    (void)sg; /* the low byte of the int32 is the uint8 or int8 value (in range after the clamp) */
    const __m512 vs = _mm512_set1_ps(s), vz = _mm512_set1_ps(zp), vl = _mm512_set1_ps(lo),
                 vh = _mm512_set1_ps(hi);
    uint8_t *o = (uint8_t *)out;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512i a = ql16(_mm512_loadu_ps(x + i), vs, vz, vl, vh);
        const __m512i b = ql16(_mm512_loadu_ps(x + i + 16), vs, vz, vl, vh);
        const __m512i c = ql16(_mm512_loadu_ps(x + i + 32), vs, vz, vl, vh);
        const __m512i d = ql16(_mm512_loadu_ps(x + i + 48), vs, vz, vl, vh);
        _mm_storeu_si128((__m128i *)(o + i), _mm512_cvtepi32_epi8(a));
        _mm_storeu_si128((__m128i *)(o + i + 16), _mm512_cvtepi32_epi8(b));
        _mm_storeu_si128((__m128i *)(o + i + 32), _mm512_cvtepi32_epi8(c));
        _mm_storeu_si128((__m128i *)(o + i + 48), _mm512_cvtepi32_epi8(d));
    }
    for (; i < n; i += 16) { /* the tail under a mask: no lane past n is read or written */
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512i a = ql16(_mm512_maskz_loadu_ps(m, x + i), vs, vz, vl, vh);
        _mm512_mask_cvtepi32_storeu_epi8(o + i, m, a);
    }
}

__attribute__((target(TS_ISA_TARGET_AVX2))) static inline __m256i
ql8(const float *x, __m256 s, __m256 zp, __m256 lo, __m256 hi) {
    __m256 v = _mm256_add_ps(_mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x), s),
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                             zp);
    v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q)); /* NaN -> 0 */
    return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi));
}

__attribute__((target(TS_ISA_TARGET_AVX2))) static void
ql_avx2(const float *x, int64_t n, float s, float zp, float lo, float hi, bool sg, void *out) {
    const __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(zp), vl = _mm256_set1_ps(lo),
                 vh = _mm256_set1_ps(hi);
    /* the packs interleave 128-bit lanes: this puts the 4-byte groups back in order */
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    uint8_t *o = (uint8_t *)out;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i a = ql8(x + i, vs, vz, vl, vh), b = ql8(x + i + 8, vs, vz, vl, vh);
        const __m256i c = ql8(x + i + 16, vs, vz, vl, vh), d = ql8(x + i + 24, vs, vz, vl, vh);
        const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
        const __m256i q = sg ? _mm256_packs_epi16(ab, cd) : _mm256_packus_epi16(ab, cd);
        _mm256_storeu_si256((__m256i *)(o + i), _mm256_permutevar8x32_epi32(q, perm));
    }
    ql_scalar(x + i, n - i, s, zp, lo, hi, sg, o + i);
}
#endif

/* one run of n values of one parameter, the form TS_CPU_ISA allows */
static void ql_run(const float *x, int64_t n, float s, float zp, float lo, float hi, bool sg,
                   void *out) {
#if defined(__GNUC__) && defined(__x86_64__)
    const ts_cpu_isa isa = ts_cpu_isa_get();
    if (isa >= TS_ISA_AVX512) return ql_avx512(x, n, s, zp, lo, hi, sg, out);
    if (isa >= TS_ISA_AVX2) return ql_avx2(x, n, s, zp, lo, hi, sg, out);
#endif
    ql_scalar(x, n, s, zp, lo, hi, sg, out);
}

static void quantize_linear_run(const float *x, int64_t n, float scale, int32_t zero_point,
                                bool is_signed, void *out) {
    const float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
    ql_run(x, n, scale, (float)zero_point, lo, hi, is_signed, out);
}

/* the scale / zero point as one value or one per element of x's dim axis (*count) */
static bool param_count(const char *op, const char *what, ts_tensor *v, ts_tensor *x, int axis,
                        int64_t *count) {
    *count = tsi_numel(v->shape);
    if (*count == 1) return true;
    if (axis < 0 || axis >= x->shape.ndim)
        return tsi_error_set(TS_ERR_ARG, "%s: axis %d is outside x %s (%s %s is per axis)", op,
                             axis, tsi_desc(x), what, tsi_desc(v)),
               false;
    if (v->shape.ndim == 1 && x->shape.dims[axis] == *count) return true;
    return tsi_error_set(TS_ERR_SHAPE,
                         "%s: %s %s must have one value or one per element of dim %d of x %s", op,
                         what, tsi_desc(v), axis, tsi_desc(x)),
           false;
}

ts_tensor *ts_quantize_linear(ts_tensor *x, ts_tensor *scale, ts_tensor *zero_point, int axis) {
    const char *op = "quantize_linear";
    tsi_init();
    if (!tsi_check_input(op, x, "x") || !tsi_check_input(op, scale, "scale") ||
        (zero_point && !tsi_check_input(op, zero_point, "zero_point")))
        return NULL;
    if (x->dtype != TS_F32 || scale->dtype != TS_F32)
        return tsi_error_set(TS_ERR_DTYPE, "%s: x and scale must be float32 (got %s, %s)", op,
                             tsi_desc(x), tsi_desc(scale)),
               NULL;
    const ts_dtype qt = zero_point ? zero_point->dtype : TS_U8;
    if (qt != TS_U8 && qt != TS_I8)
        return tsi_error_set(TS_ERR_DTYPE, "%s: zero_point must be uint8 or int8 (got %s)", op,
                             tsi_desc(zero_point)),
               NULL;
    const int r = x->shape.ndim;
    if (axis < 0) axis += r; /* checked where a parameter is per axis */
    ts_tensor *ts[3] = {x, scale, zero_point};
    for (int i = 0; i < 3; i++)
        if (ts[i] && tsi_device(ts[i]).type != TS_CPU)
            return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: only on the cpu (%s is on %s)", op,
                                 i == 0   ? "x"
                                 : i == 1 ? "scale"
                                          : "zero_point",
                                 ts_device_str(tsi_device(ts[i]))),
                   NULL;
    int64_t ns = 1, nz = 1;
    if (!param_count(op, "scale", scale, x, axis, &ns) ||
        (zero_point && !param_count(op, "zero_point", zero_point, x, axis, &nz)))
        return NULL;
    if (ns != nz && ns != 1 && nz != 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: scale %s and zero_point %s differ in length", op,
                             tsi_desc(scale), tsi_desc(zero_point)),
               NULL;
    const int64_t channels = ns > nz ? ns : nz;
    ts_tensor *xc = tsi_contiguous(op, x);
    ts_tensor *sc = xc ? tsi_contiguous(op, scale) : NULL;
    ts_tensor *zc = sc && zero_point ? tsi_contiguous(op, zero_point) : NULL;
    ts_tensor *y = sc && (zc || !zero_point) ? tsi_new(op, x->shape, qt, tsi_device(x)) : NULL;
    const int64_t n = tsi_numel(x->shape);
    if (y && n) {
        int64_t outer = 1, inner = 1;
        if (channels > 1) {
            for (int d = 0; d < axis; d++) outer *= x->shape.dims[d];
            for (int d = axis + 1; d < r; d++) inner *= x->shape.dims[d];
        } else {
            inner = n;
        }
        const float *xd = (const float *)tsi_kview(xc).data;
        const float *sd = (const float *)tsi_kview(sc).data;
        const void *zd = zc ? tsi_kview(zc).data : NULL;
        const bool sg = qt == TS_I8;
        uint8_t *yd = (uint8_t *)y->storage->data;
        /* pieces of at most 16384 values (of one parameter each) over the threads */
        const int64_t piece = 16384, per_row = (inner + piece - 1) / piece;
        const int64_t pieces = outer * channels * per_row;
        TS_PARALLEL_FOR_IF(
            pieces > 1 && n >= ((int64_t)1 << 16), for (int64_t p = 0; p < pieces; p++) {
                const int64_t row = p / per_row, c = row % channels;
                const int64_t i0 = row * inner + (p % per_row) * piece;
                const int64_t len =
                    inner - (p % per_row) * piece < piece ? inner - (p % per_row) * piece : piece;
                const float s = sd[ns == 1 ? 0 : c];
                const int32_t z = !zd  ? 0
                                  : sg ? ((const int8_t *)zd)[nz == 1 ? 0 : c]
                                       : ((const uint8_t *)zd)[nz == 1 ? 0 : c];
                quantize_linear_run(xd + i0, len, s, z, sg, yd + i0);
            });
    }
    ts_release(xc);
    ts_release(sc);
    ts_release(zc);
    return tsi_own(y);
}
