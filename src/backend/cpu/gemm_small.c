/* gemm_small.c — hand-written f32 GEMMs for a linear layer's forward (NT: x @ W^T) and weight
 * gradient (TN: dY^T @ x) on small batches.
 *
 * For a batch of 64, a BLAS library spends a third of these products packing operands, zeroing C
 * (beta = 0 is a separate pass) and handing work to its threads. Both layouts here need no
 * packing at all:
 *   NT — C[i][j] = dot(A row i, B column j), both k-contiguous: a 4 x 6 block of dot products is
 *        kept in 24 AVX-512 registers of 16 partial sums each while k streams by, then each is
 *        summed across its lanes. A and B are read straight from the tensors.
 *   TN — C[i][j] = sum_p At[p][i] * B[p][j], both rows contiguous: a 12 x 32 block of C lives in
 *        registers; each step broadcasts 12 values of At's row p and multiplies two vectors of
 *        B's row p. C is written once, with no beta pass.
 * Edges: masked loads and stores for partial vectors; the last rows of a TN block read a zero-
 * padded copy of their At columns. Threads split C by column blocks; each element is computed by
 * one thread in an order fixed by the shapes, so results do not depend on the thread count.
 * The block kernels (gemm_small_blocks.c) are compiled for AVX-512 with a target attribute and used
 * only when the CPU has it (the library itself is built for baseline x86-64). */
#include "backend/cpu/gemm_small.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cpu/gemm_small_blocks.h"

static bool enabled = true;

void ts_gemm_small_enable(bool on) { enabled = on; }

#ifdef TS_SMALL_GEMM_BLOCKS
static void gemm_nt(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
                    int64_t ldb, float *c, int64_t ldc, bool parallel) {
    const int64_t tm = (m + TS_NT_MR - 1) / TS_NT_MR, tn = (n + TS_NT_NR - 1) / TS_NT_NR;
    (void)parallel;
#ifdef TS_HAVE_OPENMP
#pragma omp parallel for schedule(static) if (parallel)
#endif
    for (int64_t tj = 0; tj < tn; tj++) {
        const int64_t j = tj * TS_NT_NR;
        const int nr = (int)(n - j < TS_NT_NR ? n - j : TS_NT_NR);
        for (int64_t ti = 0; ti < tm; ti++) {
            const int64_t i = ti * TS_NT_MR;
            const int mr = (int)(m - i < TS_NT_MR ? m - i : TS_NT_MR);
            tsi_nt_block(k, a + i * lda, lda, b + j * ldb, ldb, c + i * ldc + j, ldc, mr, nr);
        }
    }
}

static void gemm_tn(int64_t m, int64_t n, int64_t k, const float *at, int64_t lda, const float *b,
                    int64_t ldb, float *c, int64_t ldc, bool parallel) {
    const int64_t tm = (m + TS_TN_MR - 1) / TS_TN_MR, tn = (n + TS_TN_NR - 1) / TS_TN_NR;
    const int64_t full_m = m / TS_TN_MR * TS_TN_MR, rest = m - full_m;
    /* the last rows' At columns, zero-padded to a whole block: shared, read-only */
    float pad[TS_TN_MAX_K * TS_TN_MR];
    if (rest)
        for (int64_t p = 0; p < k; p++)
            for (int64_t i = 0; i < TS_TN_MR; i++)
                pad[p * TS_TN_MR + i] = i < rest ? at[p * lda + full_m + i] : 0.0f;
    (void)parallel;
#ifdef TS_HAVE_OPENMP
#pragma omp parallel for schedule(static) if (parallel)
#endif
    for (int64_t tj = 0; tj < tn; tj++) {
        const int64_t j = tj * TS_TN_NR, cols = n - j < TS_TN_NR ? n - j : TS_TN_NR;
        for (int64_t ti = 0; ti < tm; ti++) {
            const int64_t i = ti * TS_TN_MR;
            if (i < full_m)
                tsi_tn_block(k, at + i, lda, b + j, ldb, c + i * ldc + j, ldc, TS_TN_MR, (int)cols);
            else
                tsi_tn_block(k, pad, TS_TN_MR, b + j, ldb, c + i * ldc + j, ldc, (int)rest,
                             (int)cols);
        }
    }
}

static bool have_avx512(void) { return __builtin_cpu_supports("avx512f"); }
#endif /* TS_SMALL_GEMM_BLOCKS */

bool ts_gemm_small_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t rsa, int64_t csa,
                       const float *b, int64_t rsb, int64_t csb, float *c, int64_t rsc, int64_t csc,
                       bool parallel) {
#ifdef TS_SMALL_GEMM_BLOCKS
    if (!enabled || m < 16 || n < 16 || csc != 1 || rsc < n || !have_avx512()) return false;
    if (csa == 1 && rsb == 1 && rsa >= k && csb >= k && m <= 128 && k >= 64) {
        gemm_nt(m, n, k, a, rsa, b, csb, c, rsc, parallel);
        return true;
    }
    if (rsa == 1 && csb == 1 && csa >= m && rsb >= n && k >= 1 && k <= TS_TN_MAX_K) {
        gemm_tn(m, n, k, a, csa, b, rsb, c, rsc, parallel);
        return true;
    }
#else
    (void)m, (void)n, (void)k, (void)a, (void)rsa, (void)csa, (void)b, (void)rsb, (void)csb;
    (void)c, (void)rsc, (void)csc, (void)parallel;
#endif
    return false;
}
