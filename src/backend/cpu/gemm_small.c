/* gemm_small.c — a hand-written f32 GEMM for a linear layer's forward (NT: x @ W^T) on small
 * batches.
 *
 * For a batch of 64, a BLAS library spends a third of this product packing operands, zeroing C
 * (beta = 0 is a separate pass) and handing work to its threads. NT needs no packing at all:
 * C[i][j] = dot(A row i, B column j), both k-contiguous: a block of dot products (4 x 6 with
 * AVX-512, 3 x 4 with AVX2) is kept in registers of partial sums while k streams by, then each is
 * summed across its lanes. A and B are read straight from the tensors. (Its TN kernels, for the
 * weight gradient dY^T @ x, were retired: no measured shape preferred them to the library, decision
 * 0044, bench/results/cpu-matmul.md "Retired kernels".)
 * Edges: masked loads for partial vectors. Threads split C by column blocks; each element is
 * computed by one thread in an order fixed by the shapes, so results do not depend on the thread
 * count.
 * The block kernels (gemm_small_avx512.c, gemm_small_avx2.c) are compiled with target attributes
 * (the library itself is built for baseline x86-64) and picked by ts_cpu_isa_get(); the portable
 * path declines and leaves these products to the BLAS library. */
#include "backend/cpu/gemm_small.h"
#include "backend/env_config.h"
#include "backend/omp_if.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/gemm_small_blocks.h"
#include "backend/cpu/matmul_select.h"

#include <stdatomic.h>

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
/* One ISA's block kernel and its block size. */
typedef struct small_variant {
    int nt_mr, nt_nr;
    tsi_nt_block_fn nt;
} small_variant;

/* Indexed by ts_cpu_isa; the portable entry is empty: without AVX2 these shapes go to the BLAS
 * library (or the built-in blocked GEMM), whose packed kernels are the portable path. */
static const small_variant variants[TS_ISA_COUNT] = {
    [TS_ISA_AVX2] = {TS_NT256_MR, TS_NT256_NR, tsi_nt_block_avx2},
    [TS_ISA_AVX512] = {TS_NT512_MR, TS_NT512_NR, tsi_nt_block_avx512},
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
#else
    (void)m, (void)n, (void)k, (void)a, (void)rsa, (void)csa, (void)b, (void)rsb, (void)csb;
    (void)c, (void)rsc, (void)csc, (void)parallel;
#endif
    return false;
}
