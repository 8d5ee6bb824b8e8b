/* gemm_small.c — hand-written f32 GEMMs for a linear layer's forward (NT: x @ W^T) and weight
 * gradient (TN: dY^T @ x) on small batches.
 *
 * For a batch of 64, a BLAS library spends a third of these products packing operands, zeroing C
 * (beta = 0 is a separate pass) and handing work to its threads. Both layouts here need no
 * packing at all:
 *   NT — C[i][j] = dot(A row i, B column j), both k-contiguous: a block of dot products (4 x 6
 *        with AVX-512, 3 x 4 with AVX2) is kept in registers of partial sums while k streams by,
 *        then each is summed across its lanes. A and B are read straight from the tensors.
 *   TN — C[i][j] = sum_p At[p][i] * B[p][j], both rows contiguous: a block of C (12 x 32 with
 *        AVX-512, 6 x 16 with AVX2) lives in registers; each step broadcasts a column of At's row
 *        p and multiplies two vectors of B's row p. C is written once, with no beta pass.
 *        From k = TS_TN_PACK_K on (the weight gradients of batches of 256) that no longer holds
 *        together: B's column block is copied into a contiguous panel per thread (rows of a
 *        1024-wide x lie 4 KiB apart and all fell into one L1 set), and with AVX2 At too (its
 *        6-column panels used a third of each line they read). 1024 x 784 x 256 on one core
 *        capped at AVX2: 3.7 ms instead of 5.0 (oneDNN's sgemm: 3.7); AVX-512: 1.9 for 2.0.
 * Edges: masked loads and stores for partial vectors; the last rows of a TN block read a zero-
 * padded copy of their At columns. Threads split C by column blocks; each element is computed by
 * one thread in an order fixed by the shapes, so results do not depend on the thread count.
 * The block kernels (gemm_small_avx512.c, gemm_small_avx2.c) are compiled with target attributes
 * (the library itself is built for baseline x86-64) and picked by ts_cpu_isa_get(); the portable
 * path declines and leaves these products to the BLAS library. */
#include "backend/cpu/gemm_small.h"
#include "backend/cpu/host_scratch.h"
#include "backend/env_config.h"
#include "backend/omp_if.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemm_small_blocks.h"
#include "backend/cpu/matmul_select.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* 1 on, 0 off (tsi_gemm_small_enable, or TS_GEMM_SMALL=off at the first call: how the providers
 * were measured), -1 not yet read; racing first calls read the same answer */
static atomic_int enabled = -1;

void tsi_gemm_small_enable(bool on) { atomic_store_explicit(&enabled, on, memory_order_relaxed); }

static bool small_enabled(void) {
    int on = atomic_load_explicit(&enabled, memory_order_relaxed);
    if (on < 0) {
        on = !tsi_env_is(TSI_ENV_GEMM_SMALL, "off");
        atomic_store_explicit(&enabled, on, memory_order_relaxed);
    }
    return on;
}

#ifdef TS_SMALL_GEMM_BLOCKS
/* One ISA's block kernels and their block sizes. */
typedef struct small_variant {
    int nt_mr, nt_nr, tn_mr, tn_nr;
    bool tn_pack_at; /* TN with k >= TS_TN_PACK_K: copy At into contiguous panels first */
    tsi_nt_block_fn nt;
    tsi_tn_block_fn tn;
} small_variant;

/* Indexed by ts_cpu_isa; the portable entry is empty: without AVX2 these shapes go to the BLAS
 * library (or the built-in blocked GEMM), whose packed kernels are the portable path. */
static const small_variant variants[TS_ISA_COUNT] = {
    [TS_ISA_AVX2] = {TS_NT256_MR, TS_NT256_NR, TS_TN256_MR, TS_TN256_NR, true, tsi_nt_block_avx2,
                     tsi_tn_block_avx2},
    [TS_ISA_AVX512] = {TS_NT512_MR, TS_NT512_NR, TS_TN512_MR, TS_TN512_NR, false,
                       tsi_nt_block_avx512, tsi_tn_block_avx512},
};

static void gemm_nt(const small_variant *v, int64_t m, int64_t n, int64_t k, const float *a,
                    int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                    bool parallel) {
    const int64_t tm = (m + v->nt_mr - 1) / v->nt_mr, tn = (n + v->nt_nr - 1) / v->nt_nr;
    TS_PARALLEL_FOR_IF(
        parallel, for (int64_t tj = 0; tj < tn; tj++) {
            const int64_t j = tj * v->nt_nr;
            const int nr = (int)(n - j < v->nt_nr ? n - j : v->nt_nr);
            for (int64_t ti = 0; ti < tm; ti++) {
                const int64_t i = ti * v->nt_mr;
                const int mr = (int)(m - i < v->nt_mr ? m - i : v->nt_mr);
                v->nt(k, a + i * lda, lda, b + j * ldb, ldb, c + i * ldc + j, ldc, mr, nr);
            }
        });
}

/* At's columns [i0, i0 + mr) over k rows, zero-padded to mr, as a contiguous k x mr panel */
static void pack_at(const float *at, int64_t lda, int64_t m, int64_t k, int64_t i0, int mr,
                    float *d) {
    const int64_t w = m - i0 < mr ? m - i0 : mr;
    for (int64_t p = 0; p < k; p++, d += mr) {
        memcpy(d, at + p * lda + i0, sizeof(float) * (size_t)w);
        for (int64_t i = w; i < mr; i++) d[i] = 0.0f;
    }
}

static void gemm_tn(const small_variant *v, int64_t m, int64_t n, int64_t k, const float *at,
                    int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                    bool parallel) {
    const int mr_full = v->tn_mr, nr = v->tn_nr;
    const int64_t tm = (m + mr_full - 1) / mr_full, tn = (n + nr - 1) / nr;
    const int64_t full_m = m / mr_full * mr_full, rest = m - full_m;
    const bool pack = k >= TS_TN_PACK_K;
    /* packed At panels (every block's, when packing pays), else the last rows' At columns,
     * zero-padded to a whole block: shared, read-only */
    ts_block *pk_block = NULL; /* cached host scratch: no fresh pages at every weight gradient */
    float *pk = pack && v->tn_pack_at
                    ? tsi_host_scratch_get(sizeof(float) * (size_t)(tm * k * mr_full), &pk_block)
                    : NULL;
    float pad[TS_TN_MAX_K * TS_TN_MAX_MR];
    if (!pk && rest) pack_at(at, lda, m, k, full_m, mr_full, pad);
    /* OpenMP's if clause, not a branch around the region: called inside another parallel region
     * (a batch of products, one per thread), the work-sharing loops below must bind to a team of
     * this thread alone */
    (void)parallel;
#ifdef TS_HAVE_OPENMP
#pragma omp parallel if (parallel)
#endif
    {
        if (pk) {
#ifdef TS_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
            for (int64_t ti = 0; ti < tm; ti++)
                pack_at(at, lda, m, k, ti * mr_full, mr_full, pk + ti * k * mr_full);
        }
        float bp[TS_TN_MAX_K * TS_TN_MAX_NR]; /* this thread's packed B panel */
#ifdef TS_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
        for (int64_t tj = 0; tj < tn; tj++) {
            const int64_t j = tj * nr, cols = n - j < nr ? n - j : nr;
            const float *bb = b + j;
            int64_t lb = ldb;
            if (pack) {
                for (int64_t p = 0; p < k; p++)
                    memcpy(bp + p * nr, b + p * ldb + j, sizeof(float) * (size_t)cols);
                bb = bp, lb = nr;
            }
            for (int64_t ti = 0; ti < tm; ti++) {
                const int64_t i = ti * mr_full;
                const int mr = i < full_m ? mr_full : (int)rest;
                float *cb = c + i * ldc + j;
                if (pk)
                    v->tn(k, pk + ti * k * mr_full, mr_full, bb, lb, cb, ldc, mr, (int)cols);
                else if (i < full_m)
                    v->tn(k, at + i, lda, bb, lb, cb, ldc, mr, (int)cols);
                else
                    v->tn(k, pad, mr_full, bb, lb, cb, ldc, mr, (int)cols);
            }
        }
    }
    tsi_host_scratch_put(pk_block);
}
#endif /* TS_SMALL_GEMM_BLOCKS */

bool tsi_gemm_small_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t rsa, int64_t csa,
                        const float *b, int64_t rsb, int64_t csb, float *c, int64_t rsc,
                        int64_t csc, bool parallel) {
#ifdef TS_SMALL_GEMM_BLOCKS
    const small_variant *v = &variants[ts_cpu_isa_get()];
    const int64_t sa[2] = {rsa, csa}, sb[2] = {rsb, csb}, sc[2] = {rsc, csc};
    if (!small_enabled() || !v->nt) return false;
    /* the layouts and sizes it takes: matmul_select.c's */
    if (tsi_mm_small_nt(m, n, k, sa, sb, sc)) {
        gemm_nt(v, m, n, k, a, rsa, b, csb, c, rsc, parallel);
        return true;
    }
    if (tsi_mm_small_tn(m, n, k, sa, sb, sc)) {
        gemm_tn(v, m, n, k, a, csa, b, rsb, c, rsc, parallel);
        return true;
    }
#else
    (void)m, (void)n, (void)k, (void)a, (void)rsa, (void)csa, (void)b, (void)rsb, (void)csb;
    (void)c, (void)rsc, (void)csc, (void)parallel;
#endif
    return false;
}
