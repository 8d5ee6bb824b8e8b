/* kern_cdist.c — CPU cdist (issue 52): the p-norm distances of two sets of rows without the
 * [P, R, M] differences. Each set's rows are packed as doubles (any dtype and strides in; x1
 * row by row, x2 in blocks of 8 rows column by column) into panels (all the rows for up to
 * CD_PANEL_BYTES, zero rows up to what the tiles read), so the differences, powers and sums are in
 * double whatever the dtype, each output's sum in column order; tiles of CD_IB x1 rows by CD_JB x2
 * rows then read the panels CD_MC columns at a time (kern_cdist_impl.h). float32 with p = 2 on AVX2
 * runs in float32 instead (kern_cdist_f32.c), as PyTorch's does. Tiles run in parallel
 * (OpenMP) when the work is large, each output written by one tile in a fixed order, so the
 * numbers do not depend on threads. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cdist_math.h"
#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_loops.h"
#include "backend/cpu/host_scratch.h"
#include "backend/cpu/kern_cdist_f32.h"
#include "backend/kernel_math.h"
#include "backend/omp_if.h"

#define CD_IB 16  /* x1 rows a tile (a multiple of 4) */
#define CD_JB 32  /* x2 rows a tile (a multiple of 8) */
#define CD_MC 256 /* columns a tile takes at a time */
/* below this many column visits (P * R * M of a pair of panels) the tiles run on one thread;
 * below CD_PACK_PAR_MIN packed elements the packing does */
#define CD_PAR_MIN      (1 << 18)
#define CD_PACK_PAR_MIN (1 << 16)
#define CD_PANEL_BYTES  (4 << 20) /* each set's packed rows at a time */

typedef ts_cdist_kind cd_kind; /* cdist_math.h: one definition with CUDA */
typedef double cd_v4 __attribute__((vector_size(32)));
typedef long long cd_i4 __attribute__((vector_size(32)));

/* the portable variant: GCC's vectors of four doubles in SSE2 halves (its warning that such values
 * pass differently without AVX concerns calls across files; these functions are static; GCC
 * reports it at the end of the file, so it is off for the whole file) */
#ifdef __clang__
#pragma clang diagnostic ignored "-Wunknown-warning-option"
#endif
#pragma GCC diagnostic ignored "-Wpsabi"
#define CD_NAME(x) cd_generic_##x
#define CD_ATTR
#define CD_FMA(a, b, c) ((a) * (b) + (c))
#include "backend/cpu/kern_cdist_impl.h"
#undef CD_NAME
#undef CD_ATTR
#undef CD_FMA
#if defined(__x86_64__) || defined(__i386__)
#define CD_X86          1
#define CD_NAME(x)      cd_avx2_##x
#define CD_ATTR         __attribute__((target(TS_ISA_TARGET_AVX2)))
#define CD_FMA(a, b, c) ((cd_v4)_mm256_fmadd_pd((a), (b), (c)))
#include "backend/cpu/kern_cdist_impl.h"
#undef CD_NAME
#undef CD_ATTR
#undef CD_FMA
#endif

/* the general p: |d|^p summed in column order, one pair at a time */
static void tile_pgen(double p, const double *xp, int64_t ld, int ni, const double *yp,
                      int64_t ystride, int nb, int64_t m0, int64_t m1, double *acc) {
    for (int i = 0; i < ni; i++)
        for (int j = 0; j < 8 * nb; j++) {
            const double *x = xp + (size_t)i * (size_t)ld;
            const double *y = yp + (size_t)(j / 8) * (size_t)ystride + j % 8;
            double s = acc[(size_t)i * CD_JB + j];
            for (int64_t m = m0; m < m1; m++) s = ts_cdist_fold(TS_CD_PGEN, s, x[m] - y[8 * m], p);
            acc[(size_t)i * CD_JB + j] = s;
        }
}

/* row r of batch b of a 3-D view (n columns) as doubles at dst[0], dst[ds], dst[2 ds]... */
static void pack_row(double *dst, int64_t ds, const ts_kview *v, int64_t b, int64_t r, int64_t n) {
    const int64_t s = v->strides[2];
    const int64_t e = b * v->strides[0] + r * v->strides[1];
    const char *base = v->data + e * (int64_t)ts_cpu_dtype_size(v->dtype);
    switch (v->dtype) {
    case TS_F32: {
        const float *q = (const float *)(const void *)base;
        if (s == 1 && ds == 1)
            for (int64_t k = 0; k < n; k++) dst[k] = q[k];
        else
            for (int64_t k = 0; k < n; k++) dst[k * ds] = q[k * s];
        break;
    }
    case TS_F64: {
        const double *q = (const double *)(const void *)base;
        if (s == 1 && ds == 1)
            memcpy(dst, q, sizeof(double) * (size_t)n);
        else
            for (int64_t k = 0; k < n; k++) dst[k * ds] = q[k * s];
        break;
    }
    case TS_F16: {
        const ts_f16_bits *q = (const ts_f16_bits *)(const void *)base;
        for (int64_t k = 0; k < n; k++) dst[k * ds] = ts_f16_to_f32(q[k * s]);
        break;
    }
    case TS_BF16: {
        const ts_bf16_bits *q = (const ts_bf16_bits *)(const void *)base;
        for (int64_t k = 0; k < n; k++) dst[k * ds] = ts_bf16_to_f32(q[k * s]);
        break;
    }
    default:
        break;
    }
}

static void zero_row(double *dst, int64_t ds, int64_t n) {
    for (int64_t k = 0; k < n; k++) dst[k * ds] = 0;
}

typedef struct cd_job {
    const ts_kview *out, *x1, *x2;
    cd_kind kind;
    double p;
    int64_t P, R, M;
    bool avx2;
} cd_job;

/* rows [r0, r0 + n) of batch b of v packed into dst, then zero rows up to `rows`: row by row (x1)
 * or in blocks of 8 rows column by column (x2, blocked) */
static void pack_panel(const cd_job *jb, double *dst, const ts_kview *v, int64_t b, int64_t r0,
                       int64_t n, int64_t rows, bool blocked) {
    const int64_t M = jb->M;
    TS_PARALLEL_FOR_IF(
        rows * M >= CD_PACK_PAR_MIN && rows > 1, for (int64_t r = 0; r < rows; r++) {
            double *d = blocked ? dst + (size_t)(r / 8) * (size_t)(8 * M) + r % 8
                                : dst + (size_t)r * (size_t)M;
            const int64_t ds = blocked ? 8 : 1;
            if (r < n)
                pack_row(d, ds, v, b, r0 + r, M);
            else
                zero_row(d, ds, M);
        });
}

static void store(const ts_kview *out, int64_t at, double v) {
    char *o = out->data;
    switch (out->dtype) {
    case TS_F32:
        ((float *)(void *)o)[at] = (float)v;
        break;
    case TS_F64:
        ((double *)(void *)o)[at] = v;
        break;
    case TS_F16:
        ((ts_f16_bits *)(void *)o)[at] = ts_f32_to_f16((float)v);
        break;
    case TS_BF16:
        ((ts_bf16_bits *)(void *)o)[at] = ts_f32_to_bf16((float)v);
        break;
    default:
        break;
    }
}

/* the outputs of x1 rows [i0, i0 + ni) and x2 rows [j0, j0 + nj) of batch b, from the packed
 * panels at those rows (xp: CD_IB rows, yp: CD_JB rows, zero rows past ni, nj); acc: CD_IB x
 * CD_JB doubles */
static void run_tile(const cd_job *jb, int64_t b, const double *xp, int64_t i0, int ni,
                     const double *yp, int64_t j0, int nj, double *acc) {
    const int64_t M = jb->M;
    const int nb = (nj + 7) / 8, nx = (ni + 3) / 4 * 4;
    memset(acc, 0, sizeof(double) * CD_IB * CD_JB);
    for (int64_t m0 = 0; m0 < M; m0 += CD_MC) {
        const int64_t m1 = M - m0 < CD_MC ? M : m0 + CD_MC;
        if (jb->kind == TS_CD_PGEN) tile_pgen(jb->p, xp, M, nx, yp, 8 * M, nb, m0, m1, acc);
#ifdef CD_X86
        else if (jb->avx2)
            cd_avx2_tile(jb->kind, xp, M, nx, yp, 8 * M, nb, m0, m1, acc);
#endif
        else
            cd_generic_tile(jb->kind, xp, M, nx, yp, 8 * M, nb, m0, m1, acc);
    }
    for (int i = 0; i < ni; i++) {
        const double *a = acc + (size_t)i * CD_JB;
        const int64_t o = (b * jb->P + i0 + i) * jb->R + j0;
        if (jb->kind == TS_CD_P2 && jb->out->dtype == TS_F32) {
            float *d = (float *)(void *)jb->out->data + o;
            for (int j = 0; j < nj; j++) d[j] = (float)sqrt(a[j]);
            continue;
        }
        for (int j = 0; j < nj; j++) store(jb->out, o + j, ts_cdist_finish(jb->kind, a[j], jb->p));
    }
}

/* panel rows: a multiple of the tile's rows holding about CD_PANEL_BYTES, at most all n rounded
 * up to the unit the tiles read (4 x1 rows, a block of 8 x2 rows) */
static int64_t panel_rows(int64_t n, int64_t tile, int64_t unit, int64_t M) {
    int64_t r = CD_PANEL_BYTES / (M * (int64_t)sizeof(double)) / tile * tile;
    const int64_t all = (n + unit - 1) / unit * unit;
    if (r < tile) r = tile;
    return r < all ? r : all;
}

void tsi_cpu_cdist(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x1,
                   const ts_kview *x2, double p) {
    (void)be, (void)index;
    const int64_t B = out->shape[0], P = x1->shape[1], R = x2->shape[1], M = x1->shape[2];
    if (B <= 0 || P <= 0 || R <= 0 || M <= 0) return;
    /* float32 p = 2 on AVX2: in float32 (kern_cdist_f32.c) */
    if (ts_cdist_kind_of(p) == TS_CD_P2 && tsi_cpu_cdist_f32_p2(out, x1, x2)) return;
    cd_job jb = {out, x1, x2, TS_CD_PGEN, p, P, R, M, false};
    jb.kind = ts_cdist_kind_of(p);
#ifdef CD_X86
    jb.avx2 = ts_cpu_isa_get() >= TS_ISA_AVX2;
#endif
    const int64_t pr = panel_rows(P, CD_IB, 4, M), rr = panel_rows(R, CD_JB, 8, M);
    int nt = 1;
#ifdef TS_HAVE_OPENMP
    if ((double)P * (double)R * (double)M >= CD_PAR_MIN && !omp_in_parallel())
        nt = omp_get_max_threads();
#endif
    const size_t acc_n = (size_t)CD_IB * CD_JB;
    const size_t bytes = sizeof(double) * ((size_t)(pr + rr) * (size_t)M + acc_n * (size_t)nt);
    ts_block *blk;
    double *xp = tsi_host_scratch_get(bytes, &blk);
    if (!xp) {
        tsi_kernel_oom("cdist", bytes);
        return;
    }
    double *yp = xp + (size_t)pr * (size_t)M, *accs = yp + (size_t)rr * (size_t)M;
    for (int64_t b = 0; b < B; b++)
        for (int64_t pi = 0; pi < P; pi += pr) {
            const int64_t np = P - pi < pr ? P - pi : pr;
            pack_panel(&jb, xp, x1, b, pi, np, (np + 3) / 4 * 4, false);
            for (int64_t pj = 0; pj < R; pj += rr) {
                const int64_t nr = R - pj < rr ? R - pj : rr;
                /* x2 in one panel, packed already for this batch (or one x2 for all batches) */
                const bool packed = rr >= R && (pi > 0 || (b > 0 && x2->strides[0] == 0));
                if (!packed) pack_panel(&jb, yp, x2, b, pj, nr, (nr + 7) / 8 * 8, true);
                const int64_t nbi = (np + CD_IB - 1) / CD_IB, nbj = (nr + CD_JB - 1) / CD_JB;
                const int64_t tiles = nbi * nbj;
                const bool par =
                    nt > 1 && tiles > 1 && (double)np * (double)nr * (double)M >= CD_PAR_MIN;
                TS_PARALLEL_FOR_DYNAMIC_IF(
                    par, for (int64_t t = 0; t < tiles; t++) {
                        int me = 0;
#ifdef TS_HAVE_OPENMP
                        if (par) me = omp_get_thread_num();
#endif
                        const int64_t ti = t / nbj * CD_IB, tj = t % nbj * CD_JB;
                        const int ni = (int)(np - ti < CD_IB ? np - ti : CD_IB);
                        const int nj = (int)(nr - tj < CD_JB ? nr - tj : CD_JB);
                        run_tile(&jb, b, xp + (size_t)ti * (size_t)M, pi + ti, ni,
                                 yp + (size_t)tj * (size_t)M, pj + tj, nj,
                                 accs + acc_n * (size_t)me);
                    });
            }
        }
    tsi_host_scratch_put(blk);
}
