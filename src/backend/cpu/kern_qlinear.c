/* kern_qlinear.c — the int8 product of a quantized linear layer (backend.h's qlinear,
 * quant_args.h's ts_qlinear_args): a portable kernel and packed ones (AVX512-VNNI: qgemm_vnni.c;
 * AVX-VNNI and AVX2: qgemm_avx2.c; tsi_qgemm_kind_get picks), then
 * the epilogue (int32 accumulators, requantized integers: float64, or with fmult PyTorch's x86
 * float32 arithmetic, quant_args.h; floats in float64 as PyTorch's dynamic
 * Linear, or floats in ONNX's float32 order: fmul / fadd, ts_matmul_integer_to_float). A weight may
 * be read where it lies (w_strided: ONNX's [K, N] uint8 / int8 B), packed from there once.
 *
 * Both compute raw[m][n] = sum_k x[m][k] * w[n][k] exactly in int32 and correct it in int64:
 * acc = raw - x_zp * wsum[n] - w_zp[n] * xsum[m] + k * x_zp * w_zp[n] + bias[n], which is
 * sum_k (x - x_zp)(w - w_zp[n]) + bias[n] exactly. VNNI multiplies unsigned by signed bytes, so
 * signed activations go in as x + 128 with x_zp + 128 (the same differences). |x * w| <= 255 * 128,
 * so k <= 65536 keeps every partial sum inside int32 (the front end refuses more). */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/conv_dnnl_wcache.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/host_scratch.h"
#include "backend/cpu/qgemm_vnni.h"
#include "backend/omp_if.h"
#include "backend/quant_math.h"
#include "core/clones.h"

static inline int32_t x_at(const ts_qlinear_args *a, int64_t i) {
    return a->x_unsigned ? ((const uint8_t *)a->x)[i] : ((const int8_t *)a->x)[i];
}

/* out_acc's row: the sum wrapped to int32 anyway, so the same value modulo 2^32 in uint32 (no
 * branch per element; the AVX2 variant vectorizes it) */
TS_CPU_BODY void acc_row_body(uint32_t *o, const int32_t *raw, const int64_t *ws, const int32_t *wz,
                              const int32_t *bias, uint32_t xz, uint32_t xs, uint32_t kx,
                              int64_t nn) {
    if (bias)
        for (int64_t j = 0; j < nn; j++)
            o[j] = (uint32_t)raw[j] - xz * (uint32_t)ws[j] + (uint32_t)wz[j] * (kx - xs) +
                   (uint32_t)bias[j];
    else
        for (int64_t j = 0; j < nn; j++)
            o[j] = (uint32_t)raw[j] - xz * (uint32_t)ws[j] + (uint32_t)wz[j] * (kx - xs);
}
TS_CPU_VARIANTS(acc_row,
                (uint32_t * o, const int32_t *raw, const int64_t *ws, const int32_t *wz,
                 const int32_t *bias, uint32_t xz, uint32_t xs, uint32_t kx, int64_t nn),
                (o, raw, ws, wz, bias, xz, xs, kx, nn))

/* out_f's row: (float)((double)acc * fscale + fbias). acc summed in double is exact (every term an
 * integer: |raw| < 2^31, |wsum| <= 128 * 65536 fits int32, the partial sums stay under 2^40), so
 * the same value as the int64 sum converted; no branch per element (the AVX2 variant vectorizes) */
TS_CPU_BODY void f_row_body(float *o, const int32_t *raw, const int64_t *ws, const int32_t *wz,
                            const int32_t *bias, const double *fs, const float *fb, double xz,
                            double xs, double kx, int64_t nn) {
    for (int64_t j = 0; j < nn; j++) {
        const double w = (double)wz[j];
        double acc = (double)raw[j] - xz * (double)(int32_t)ws[j] + w * (kx - xs);
        if (bias) acc += (double)bias[j];
        o[j] = (float)(acc * fs[j] + (fb ? (double)fb[j] : 0.0));
    }
}
TS_CPU_VARIANTS(f_row,
                (float *o, const int32_t *raw, const int64_t *ws, const int32_t *wz,
                 const int32_t *bias, const double *fs, const float *fb, double xz, double xs,
                 double kx, int64_t nn),
                (o, raw, ws, wz, bias, fs, fb, xz, xs, kx, nn))

/* fmul's row (ONNX's MatMulInteger -> Cast -> Mul [-> Add]): the sum wrapped to int32 as acc_row's,
 * then (float)acc * fm[j] and + fa[j], each rounded to float32 as the unfused ops round them (ISO C
 * mode: no contraction into an fma) */
TS_CPU_BODY void mf_row_body(float *o, const int32_t *raw, const int64_t *ws, const int32_t *wz,
                             const float *fm, const float *fa, uint32_t xz, uint32_t xs,
                             uint32_t kx, int64_t nn) {
    if (fa)
        for (int64_t j = 0; j < nn; j++) {
            const uint32_t acc =
                (uint32_t)raw[j] - xz * (uint32_t)ws[j] + (uint32_t)wz[j] * (kx - xs);
            const float p = (float)(int32_t)acc * fm[j];
            o[j] = p + fa[j];
        }
    else
        for (int64_t j = 0; j < nn; j++) {
            const uint32_t acc =
                (uint32_t)raw[j] - xz * (uint32_t)ws[j] + (uint32_t)wz[j] * (kx - xs);
            o[j] = (float)(int32_t)acc * fm[j];
        }
}
TS_CPU_VARIANTS(mf_row,
                (float *o, const int32_t *raw, const int64_t *ws, const int32_t *wz,
                 const float *fm, const float *fa, uint32_t xz, uint32_t xs, uint32_t kx,
                 int64_t nn),
                (o, raw, ws, wz, fm, fa, xz, xs, kx, nn))

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
/* mf_row for rows of a block, 16 columns a step: the same uint32 sum modulo 2^32 (ws[j] truncated
 * to 32 bits as the cast does), then the int32 -> float32 conversion, the product and the sum, each
 * one rounding. A column's constants loaded once for the block's rows. */
__attribute__((target(TS_ISA_TARGET_AVX512))) static void
mf_block_avx512(float *o, int64_t ldo, const int32_t *raw, int64_t ld, int64_t mr,
                const int64_t *ws, const int32_t *wz, const float *fm, const float *fa, uint32_t xz,
                const int64_t *xs, uint32_t kx, int64_t nn) {
    const __m512i vxz = _mm512_set1_epi32((int32_t)xz);
    for (int64_t j = 0; j < nn; j += 16) {
        const __mmask16 m = nn - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (nn - j)) - 1);
        const __m256i w0 = _mm512_cvtepi64_epi32(_mm512_maskz_loadu_epi64((__mmask8)m, ws + j));
        const __m256i w1 =
            _mm512_cvtepi64_epi32(_mm512_maskz_loadu_epi64((__mmask8)(m >> 8), ws + j + 8));
        const __m512i xw = _mm512_mullo_epi32(
            vxz, _mm512_inserti64x4(_mm512_castsi256_si512(w0), w1, 1)); /* xz * ws[j] */
        const __m512i wzv = _mm512_maskz_loadu_epi32(m, wz + j);
        const __m512 fmv = _mm512_maskz_loadu_ps(m, fm + j);
        const __m512 fav = fa ? _mm512_maskz_loadu_ps(m, fa + j) : _mm512_setzero_ps();
        for (int64_t r = 0; r < mr; r++) {
            const __m512i vd = _mm512_set1_epi32((int32_t)(kx - (uint32_t)xs[r]));
            __m512i acc = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(m, raw + r * ld + j), xw);
            acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(wzv, vd));
            __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), fmv);
            if (fa) p = _mm512_add_ps(p, fav);
            _mm512_mask_storeu_ps(o + r * ldo + j, m, p);
        }
    }
}
#endif

/* the epilogue of one row's block of columns [n0, n0 + nn): raw sums in raw[0..nn) */
static void epilogue(const ts_qlinear_args *a, int64_t m, int64_t n0, int64_t nn,
                     const int32_t *raw, int32_t x_zp, int64_t xsum, const int64_t *wsum) {
    if (a->fmul) {
        const uint32_t xz = (uint32_t)x_zp;
        mf_row(a->out_f + m * a->n + n0, raw, wsum + n0, a->w_zp + n0, a->fmul + n0,
               a->fadd ? a->fadd + n0 : NULL, xz, (uint32_t)xsum, (uint32_t)a->k * xz, nn);
        return;
    }
    if (a->out_acc) {
        const uint32_t xz = (uint32_t)x_zp;
        acc_row((uint32_t *)(void *)(a->out_acc + m * a->n + n0), raw, wsum + n0, a->w_zp + n0,
                a->bias ? a->bias + n0 : NULL, xz, (uint32_t)xsum, (uint32_t)a->k * xz, nn);
        return;
    }
    if (!a->out_q) {
        f_row(a->out_f + m * a->n + n0, raw, wsum + n0, a->w_zp + n0, a->bias ? a->bias + n0 : NULL,
              a->fscale + n0, a->fbias ? a->fbias + n0 : NULL, (double)x_zp, (double)xsum,
              (double)a->k * (double)x_zp, nn);
        return;
    }
    for (int64_t j = 0; j < nn; j++) {
        const int64_t n = n0 + j, wz = a->w_zp[n];
        const int64_t acc = (int64_t)raw[j] - (int64_t)x_zp * wsum[n] - wz * xsum +
                            a->k * (int64_t)x_zp * wz + (a->bias ? a->bias[n] : 0);
        const int64_t o = m * a->n + n;
        if (a->out_acc) {
            a->out_acc[o] = (int32_t)(uint32_t)(uint64_t)acc; /* wraps, as MatMulInteger */
        } else if (a->out_q) {
            double v;
            if (a->fmult) { /* PyTorch's x86 (fbgemm): int32 sum, + float bias, * multiplier */
                v = (double)a->out_zp +
                    (double)ts_qm_requant_f32((int32_t)(uint32_t)(uint64_t)acc,
                                              a->acc_fbias ? a->acc_fbias[n] : 0.0f, a->fmult[n],
                                              (float)(a->out_min - a->out_zp),
                                              (float)(a->out_max - a->out_zp));
            } else {
                v = (double)a->out_zp + nearbyint((double)acc * a->mult[n]);
                v = v < a->out_min ? a->out_min : v > a->out_max ? a->out_max : v;
            }
            if (a->out_unsigned)
                ((uint8_t *)a->out_q)[o] = (uint8_t)v;
            else
                ((int8_t *)a->out_q)[o] = (int8_t)v;
        } else {
            a->out_f[o] =
                (float)((double)acc * a->fscale[n] + (a->fbias ? (double)a->fbias[n] : 0));
        }
    }
}

/* the VNNI kernel's epilogue: rows m0 .. m0 + mr of a block, row r's raw sums at raw + r * ld */
static void epilogue_block(const ts_qlinear_args *a, int64_t m0, int64_t mr, int64_t n0, int64_t nn,
                           const int32_t *raw, int64_t ld, int32_t x_zp, const int64_t *xsum,
                           const int64_t *wsum) {
#if defined(__GNUC__) && defined(__x86_64__)
    if (a->fmul && ts_cpu_isa_get() >= TS_ISA_AVX512) {
        mf_block_avx512(a->out_f + m0 * a->n + n0, a->n, raw, ld, mr, wsum + n0, a->w_zp + n0,
                        a->fmul + n0, a->fadd ? a->fadd + n0 : NULL, (uint32_t)x_zp, xsum,
                        (uint32_t)a->k * (uint32_t)x_zp, nn);
        return;
    }
#endif
    for (int64_t r = 0; r < mr; r++) epilogue(a, m0 + r, n0, nn, raw + r * ld, x_zp, xsum[r], wsum);
}

/* w[n][k] as the kernels take it: int8, contiguous [n, k] or read where it lies (w_strided) */
static inline int8_t w_at(const ts_qlinear_args *a, int64_t n, int64_t k) {
    if (!a->w_strided) return a->w[n * a->k + k];
    return (int8_t)(((const uint8_t *)a->w)[n * a->w_sn + k * a->w_sk] ^ a->w_flip);
}

static void wsums(const ts_qlinear_args *a, int64_t *wsum) {
    for (int64_t n = 0; n < a->n; n++) {
        int64_t s = 0;
        for (int64_t k = 0; k < a->k; k++) s += w_at(a, n, k);
        wsum[n] = s;
    }
}

/* the VNNI panels of w, contiguous or strided */
static void pack_w(const ts_qlinear_args *a, int8_t *wp) {
    if (a->w_strided)
        tsi_qgemm_vnni_pack_w_strided((const uint8_t *)a->w, a->w_sn, a->w_sk, a->w_flip, a->n,
                                      a->k, wp);
    else
        tsi_qgemm_vnni_pack_w(a->w, a->n, a->k, wp);
}

/* portable: one row at a time, 64 columns of raw sums per block */
static void qlinear_generic(const ts_qlinear_args *a, const int64_t *wsum) {
    const int64_t M = a->m, N = a->n, K = a->k;
    TS_PARALLEL_FOR_IF(
        M * N * K >= ((int64_t)1 << 18) && M > 1, for (int64_t m = 0; m < M; m++) {
            int64_t xsum = 0;
            for (int64_t k = 0; k < K; k++) xsum += x_at(a, m * K + k);
            int32_t raw[64];
            for (int64_t n0 = 0; n0 < N; n0 += 64) {
                const int64_t nn = N - n0 < 64 ? N - n0 : 64;
                for (int64_t j = 0; j < nn; j++) {
                    const int8_t *w = a->w + (n0 + j) * K;
                    int32_t s = 0;
                    if (a->x_unsigned) {
                        const uint8_t *x = (const uint8_t *)a->x + m * K;
                        for (int64_t k = 0; k < K; k++) s += (int32_t)x[k] * w[k];
                    } else {
                        const int8_t *x = (const int8_t *)a->x + m * K;
                        for (int64_t k = 0; k < K; k++) s += (int32_t)x[k] * w[k];
                    }
                    raw[j] = s;
                }
                epilogue(a, m, n0, nn, raw, a->x_zp, xsum, wsum);
            }
        });
}

/* the VNNI panels of w then its row sums ([np * kp] bytes, [n] int64), kept across calls in
 * conv_dnnl_wcache.c's cache for a weight with an identity */
typedef struct qlin_layout {
    char tag[8];
    int64_t n, k, sn, sk; /* sn, sk: a strided weight's (0, 0: contiguous [n, k]) */
    int64_t flip;
} qlin_layout;

static bool fill_packed(void *ctx, void *buf) {
    const ts_qlinear_args *a = ctx;
    const int64_t kp = (a->k + 3) & ~(int64_t)3, np = (a->n + 15) & ~(int64_t)15;
    pack_w(a, (int8_t *)buf);
    wsums(a, (int64_t *)(void *)((char *)buf + (size_t)np * (size_t)kp));
    return true;
}

bool tsi_cpu_qlinear(const ts_backend *be, int index, const ts_qlinear_args *a) {
    const int64_t M = a->m, N = a->n, K = a->k;
    const tsi_qgemm_kind kind = tsi_qgemm_kind_get();
    const bool vnni = kind != TSI_QGEMM_PORTABLE; /* a packed kernel: AVX2, AVX-VNNI, AVX512-VNNI */
    const int64_t kp = (K + 3) & ~(int64_t)3, np = (N + 15) & ~(int64_t)15;
    /* VNNI: the packed weight and its sums from the cache when it holds them */
    const size_t b_wp = (size_t)np * (size_t)kp, b_cached = b_wp + (size_t)N * sizeof(int64_t);
    const qlin_layout key = {"qlin1",
                             N,
                             K,
                             a->w_strided ? a->w_sn : 0,
                             a->w_strided ? a->w_sk : 0,
                             a->w_strided ? a->w_flip : 0};
    const tsi_conv_weight_id wid = {a->w_uid, a->w_version, a->w_offset};
    tsi_wcache_entry *wref = NULL;
    const char *cached =
        vnni ? tsi_wcache_get(&wid, &key, sizeof key, b_cached, fill_packed, (void *)a, &wref)
             : NULL;
    const size_t sums = ((size_t)(N + M) * sizeof(int64_t) + 63) & ~(size_t)63;
    size_t bytes = sums;
    if (vnni)
        bytes += (((size_t)M * (size_t)kp + 63) & ~(size_t)63) + (cached ? 0 : b_wp);
    else if (a->w_strided)
        bytes += (size_t)N * (size_t)K; /* w made contiguous [n, k] */
    ts_block *blk = NULL;
    char *scratch = tsi_host_scratch_get(bytes, &blk);
    if (!scratch) {
        tsi_wcache_release(wref);
        tsi_kernel_oom("quantized_linear", bytes);
        return false;
    }
    int64_t *wsum = (int64_t *)scratch;
    if (!cached) wsums(a, wsum);
    if (!vnni && a->w_strided) {
        int8_t *wc = (int8_t *)scratch + sums;
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++) wc[n * K + k] = w_at(a, n, k);
        ts_qlinear_args c = *a;
        c.w = wc;
        c.w_strided = false;
        qlinear_generic(&c, wsum);
    } else if (!vnni) {
        qlinear_generic(a, wsum);
    } else {
        int64_t *xsum = wsum + N;
        uint8_t *xp = (uint8_t *)scratch + sums;
        const int8_t *wp = (const int8_t *)cached;
        if (cached) {
            wsum = (int64_t *)(void *)(cached + b_wp);
        } else {
            int8_t *own = (int8_t *)xp + (((size_t)M * (size_t)kp + 63) & ~(size_t)63);
            pack_w(a, own);
            wp = own;
        }
        /* activations as unsigned bytes (signed: + 128, the zero point too), rows of kp; unsigned
         * rows already of kp bytes are read where they lie (only their sums made) */
        const uint8_t flip = a->x_unsigned ? 0 : 0x80;
        if (!flip && kp == K && a->x_sums) {
            xp = (uint8_t *)a->x; /* only read, its row sums given */
            xsum = (int64_t *)a->x_sums;
        } else if (!flip && kp == K) {
            xp = (uint8_t *)a->x; /* only read */
            for (int64_t m = 0; m < M; m++) {
                uint32_t sum = 0; /* K <= 65536: under 2^24 */
                for (int64_t k = 0; k < K; k++) sum += xp[m * K + k];
                xsum[m] = sum;
            }
        }
        for (int64_t m = 0; (flip || kp != K) && m < M; m++) {
            const uint8_t *x = (const uint8_t *)a->x + m * K;
            int64_t sum = 0;
            for (int64_t k = 0; k < K; k++) sum += xp[m * kp + k] = (uint8_t)(x[k] ^ flip);
            for (int64_t k = K; k < kp; k++) xp[m * kp + k] = 0;
            xsum[m] = sum;
        }
        const int32_t x_zp = a->x_zp + (a->x_unsigned ? 0 : 128);
        tsi_qgemm_run(kind, a, xp, wp, kp, x_zp, xsum, wsum, epilogue_block);
    }
    tsi_host_scratch_put(blk);
    tsi_wcache_release(wref);
    return true;
}
