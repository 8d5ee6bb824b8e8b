/* kern_cdist_f32.c — cdist's float32 Euclidean distances (p = 2) on CPUs with AVX2 + FMA (AVX-512
 * hosts too), as PyTorch computes float32 in float32: the exact differences x - y, squared and
 * summed in float32 with fused multiply-adds, 8 lanes at a time, then the square root. Relative
 * error about M eps32 of the sum (no cancellation: the differences are formed first, unlike the
 * |x|^2 + |y|^2 - 2 x.y of PyTorch's matrix-product route). Each output's sum runs over the
 * columns in order in one lane, so the numbers do not depend on threads; the portable variant
 * (kern_cdist.c, in double) rounds differently, by up to that error (the one cdist exception to
 * decision 0014, for 2x the speed).
 * Rows are packed as floats into panels (x1 row by row, up to F_IB-row multiples of zero rows;
 * x2 in blocks of 16 rows (AVX2) or 32 (AVX-512) stored column by column); tiles of F_IB x1 rows
 * by a block of x2 rows keep their 2 F_IB accumulators in registers over F_MC columns at a time.
 * The AVX-512 tiles run the same FMAs on each output as the AVX2 ones: the same bits. */
#include "backend/cpu/kern_cdist_f32.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/host_scratch.h"
#include "backend/omp_if.h"

#if defined(__x86_64__) || defined(__i386__)

#define F_IB     6   /* x1 rows a tile */
#define F_JB_MAX 32  /* x2 rows a tile: two vectors (16 on AVX2, 32 on AVX-512) */
#define F_MC     512 /* columns a tile takes at a time */
/* below this many column visits the tiles run on one thread; below F_PACK_PAR_MIN packed values
 * the packing does */
#define F_PAR_MIN      (1 << 18)
#define F_PACK_PAR_MIN (1 << 16)
#define F_PANEL_BYTES  (2 << 20) /* each set's packed rows at a time */

#ifdef __clang__
#pragma clang diagnostic ignored "-Wunknown-warning-option"
#endif
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float f_v8 __attribute__((vector_size(32)));
typedef float f_v16 __attribute__((vector_size(64)));

#define F_AVX2   __attribute__((target(TS_ISA_TARGET_AVX2)))
#define F_AVX512 __attribute__((target(TS_ISA_TARGET_AVX512)))

/* F_IB x1 rows (ld floats apart) against one block of 2 W x2 rows (y[m * 2 W + r]), columns
 * [m0, m1), into acc (F_IB x 2 W): per column, each x1 value broadcast, its differences to the
 * block's rows squared into two vectors by FMA */
#define F_TILE(NAME, ATTR, VT, W, SPLAT, FMA)                                                      \
    ATTR static void NAME(const float *x, int64_t ld, const float *y, int64_t m0, int64_t m1,      \
                          float *acc) {                                                            \
        VT a[F_IB], b[F_IB];                                                                       \
        for (int i = 0; i < F_IB; i++) {                                                           \
            memcpy(&a[i], acc + i * 2 * W, sizeof(VT));                                            \
            memcpy(&b[i], acc + i * 2 * W + W, sizeof(VT));                                        \
        }                                                                                          \
        for (int64_t m = m0; m < m1; m++) {                                                        \
            VT yl, yh;                                                                             \
            memcpy(&yl, y + 2 * W * m, sizeof(VT));                                                \
            memcpy(&yh, y + 2 * W * m + W, sizeof(VT));                                            \
            for (int i = 0; i < F_IB; i++) {                                                       \
                const VT v = SPLAT(x[i * ld + m]), d = v - yl, e = v - yh;                         \
                a[i] = FMA(d, d, a[i]), b[i] = FMA(e, e, b[i]);                                    \
            }                                                                                      \
        }                                                                                          \
        for (int i = 0; i < F_IB; i++) {                                                           \
            memcpy(acc + i * 2 * W, &a[i], sizeof(VT));                                            \
            memcpy(acc + i * 2 * W + W, &b[i], sizeof(VT));                                        \
        }                                                                                          \
    }

#define F_SPLAT8(v)      ((f_v8)_mm256_set1_ps(v))
#define F_FMA8(a, b, c)  ((f_v8)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#define F_SPLAT16(v)     ((f_v16)_mm512_set1_ps(v))
#define F_FMA16(a, b, c) ((f_v16)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
F_TILE(f_tile_avx2, F_AVX2, f_v8, 8, F_SPLAT8, F_FMA8)
F_TILE(f_tile_avx512, F_AVX512, f_v16, 16, F_SPLAT16, F_FMA16)

/* the square roots of rows [0, ni) of acc (jb values a row), their first nj values, to d (rows
 * ld apart) */
F_AVX2 static void f_finish(const float *acc, int jb, int ni, int nj, float *d, int64_t ld) {
    for (int i = 0; i < ni; i++, d += ld) {
        const float *a = acc + i * jb;
        int j = 0;
        for (; j + 8 <= nj; j += 8) _mm256_storeu_ps(d + j, _mm256_sqrt_ps(_mm256_loadu_ps(a + j)));
        for (; j < nj; j++) d[j] = sqrtf(a[j]);
    }
}

/* row r of batch b of a float view into dst[0], dst[ds], ... (M values) */
static void f_pack_row(float *dst, int64_t ds, const ts_kview *v, int64_t b, int64_t r, int64_t M) {
    const int64_t s = v->strides[2];
    const float *q = (const float *)(const void *)v->data + b * v->strides[0] + r * v->strides[1];
    if (s == 1 && ds == 1)
        memcpy(dst, q, sizeof(float) * (size_t)M);
    else
        for (int64_t k = 0; k < M; k++) dst[k * ds] = q[k * s];
}

/* rows [r0, r0 + n) of batch b into dst, zero rows up to `rows`: row by row (jb 0) or in blocks
 * of jb rows column by column */
static void f_pack_panel(float *dst, const ts_kview *v, int64_t b, int64_t r0, int64_t n,
                         int64_t rows, int64_t M, int64_t jb) {
    TS_PARALLEL_FOR_IF(
        rows * M >= F_PACK_PAR_MIN && rows > 1, for (int64_t r = 0; r < rows; r++) {
            float *d = jb ? dst + (size_t)(r / jb) * (size_t)(jb * M) + r % jb
                          : dst + (size_t)r * (size_t)M;
            const int64_t ds = jb ? jb : 1;
            if (r < n)
                f_pack_row(d, ds, v, b, r0 + r, M);
            else
                for (int64_t k = 0; k < M; k++) d[k * ds] = 0;
        });
}

static int64_t f_panel_rows(int64_t n, int64_t tile, int64_t M) {
    int64_t r = F_PANEL_BYTES / (M * (int64_t)sizeof(float)) / tile * tile;
    const int64_t all = (n + tile - 1) / tile * tile;
    if (r < tile) r = tile;
    return r < all ? r : all;
}

bool tsi_cpu_cdist_f32_p2(const ts_kview *out, const ts_kview *x1, const ts_kview *x2) {
    const ts_cpu_isa isa = ts_cpu_isa_get();
    if (out->dtype != TS_F32 || x1->dtype != TS_F32 || x2->dtype != TS_F32 || isa < TS_ISA_AVX2)
        return false;
    const bool wide = isa >= TS_ISA_AVX512;
    const int64_t jb = wide ? 32 : 16; /* x2 rows a tile */
    const int64_t B = out->shape[0], P = x1->shape[1], R = x2->shape[1], M = x1->shape[2];
    const int64_t pr = f_panel_rows(P, F_IB, M), rr = f_panel_rows(R, jb, M);
    int nt = 1;
#ifdef TS_HAVE_OPENMP
    if ((double)P * (double)R * (double)M >= F_PAR_MIN && !omp_in_parallel())
        nt = omp_get_max_threads();
#endif
    const size_t acc_n = (size_t)F_IB * F_JB_MAX;
    const size_t bytes = sizeof(float) * ((size_t)(pr + rr) * (size_t)M + acc_n * (size_t)nt);
    ts_block *blk;
    float *xp = tsi_host_scratch_get(bytes, &blk);
    if (!xp) {
        tsi_kernel_oom("cdist", bytes);
        return true;
    }
    float *yp = xp + (size_t)pr * (size_t)M, *accs = yp + (size_t)rr * (size_t)M;
    float *o = (float *)(void *)out->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t pi = 0; pi < P; pi += pr) {
            const int64_t np = P - pi < pr ? P - pi : pr;
            f_pack_panel(xp, x1, b, pi, np, (np + F_IB - 1) / F_IB * F_IB, M, 0);
            for (int64_t pj = 0; pj < R; pj += rr) {
                const int64_t nr = R - pj < rr ? R - pj : rr;
                /* x2 in one panel, packed already for this batch (or one x2 for all batches) */
                const bool packed = rr >= R && (pi > 0 || (b > 0 && x2->strides[0] == 0));
                if (!packed) f_pack_panel(yp, x2, b, pj, nr, (nr + jb - 1) / jb * jb, M, jb);
                const int64_t nbi = (np + F_IB - 1) / F_IB, nbj = (nr + jb - 1) / jb;
                const int64_t tiles = nbi * nbj;
                const bool par =
                    nt > 1 && tiles > 1 && (double)np * (double)nr * (double)M >= F_PAR_MIN;
                TS_PARALLEL_FOR_DYNAMIC_IF(
                    par, for (int64_t t = 0; t < tiles; t++) {
                        int me = 0;
#ifdef TS_HAVE_OPENMP
                        if (par) me = omp_get_thread_num();
#endif
                        float *acc = accs + acc_n * (size_t)me;
                        const int64_t ti = t / nbj * F_IB, tj = t % nbj * jb;
                        const int ni = (int)(np - ti < F_IB ? np - ti : F_IB);
                        const int nj = (int)(nr - tj < jb ? nr - tj : jb);
                        const float *xt = xp + (size_t)ti * (size_t)M;
                        const float *yt = yp + (size_t)tj * (size_t)M;
                        memset(acc, 0, sizeof(float) * acc_n);
                        for (int64_t m0 = 0; m0 < M; m0 += F_MC) {
                            const int64_t m1 = M - m0 < F_MC ? M : m0 + F_MC;
                            if (wide)
                                f_tile_avx512(xt, M, yt, m0, m1, acc);
                            else
                                f_tile_avx2(xt, M, yt, m0, m1, acc);
                        }
                        f_finish(acc, (int)jb, ni, nj, o + (b * P + pi + ti) * R + pj + tj, R);
                    });
            }
        }
    tsi_host_scratch_put(blk);
    return true;
}
#else
bool tsi_cpu_cdist_f32_p2(const ts_kview *out, const ts_kview *x1, const ts_kview *x2) {
    (void)out, (void)x1, (void)x2;
    return false;
}
#endif
