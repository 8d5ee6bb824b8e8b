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
 * The kernels are compiled for AVX-512 with a target attribute and used only when the CPU has it
 * (the library itself is built for baseline x86-64). */
#include "backend/cpu/gemm_small.h"

#include <stdlib.h>
#include <string.h>

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define TS_SMALL_GEMM 1
#include <immintrin.h>
#define TS_AVX512 __attribute__((target("avx512f")))
#endif

static bool enabled = true;

void ts_gemm_small_enable(bool on) { enabled = on; }

#ifdef TS_SMALL_GEMM
/* ------------------------------------------------------------------ NT: dot-product blocks */
enum { NT_MR = 4, NT_NR = 6 };

/* Lanes [0, r) of a 16-lane vector. */
TS_AVX512 static inline __mmask16 lanes(int64_t r) {
    return r >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << r) - 1u);
}

/* The mr x nr block (mr <= NT_MR, nr <= NT_NR) at A rows a.., B columns b..; rows past mr and
 * columns past nr are never read (their accumulators stay zero and are not stored). */
TS_AVX512 static void nt_block(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                               float *c, int64_t ldc, int mr, int nr) {
    __m512 acc[NT_MR][NT_NR];
    for (int i = 0; i < NT_MR; i++)
        for (int j = 0; j < NT_NR; j++) acc[i][j] = _mm512_setzero_ps();
    int64_t p = 0;
    if (mr == NT_MR && nr == NT_NR) {
        for (; p + 16 <= k; p += 16) {
            __m512 av[NT_MR];
            for (int i = 0; i < NT_MR; i++) av[i] = _mm512_loadu_ps(a + i * lda + p);
            for (int j = 0; j < NT_NR; j++) {
                const __m512 bv = _mm512_loadu_ps(b + j * ldb + p);
                for (int i = 0; i < NT_MR; i++) acc[i][j] = _mm512_fmadd_ps(av[i], bv, acc[i][j]);
            }
        }
    }
    /* the k tail, and whole partial blocks, with masked loads (lanes past k read nothing) */
    for (; p < k; p += 16) {
        const __mmask16 mk = lanes(k - p);
        __m512 av[NT_MR];
        for (int i = 0; i < NT_MR; i++)
            av[i] = i < mr ? _mm512_maskz_loadu_ps(mk, a + i * lda + p) : _mm512_setzero_ps();
        for (int j = 0; j < nr; j++) {
            const __m512 bv = _mm512_maskz_loadu_ps(mk, b + j * ldb + p);
            for (int i = 0; i < NT_MR; i++) acc[i][j] = _mm512_fmadd_ps(av[i], bv, acc[i][j]);
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) c[i * ldc + j] = _mm512_reduce_add_ps(acc[i][j]);
}

TS_AVX512 static void gemm_nt(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                              const float *b, int64_t ldb, float *c, int64_t ldc, bool parallel) {
    const int64_t tm = (m + NT_MR - 1) / NT_MR, tn = (n + NT_NR - 1) / NT_NR;
    (void)parallel;
#ifdef TS_HAVE_OPENMP
#pragma omp parallel for schedule(static) if (parallel)
#endif
    for (int64_t tj = 0; tj < tn; tj++) {
        const int64_t j = tj * NT_NR;
        const int nr = (int)(n - j < NT_NR ? n - j : NT_NR);
        for (int64_t ti = 0; ti < tm; ti++) {
            const int64_t i = ti * NT_MR;
            const int mr = (int)(m - i < NT_MR ? m - i : NT_MR);
            nt_block(k, a + i * lda, lda, b + j * ldb, ldb, c + i * ldc + j, ldc, mr, nr);
        }
    }
}

/* ------------------------------------------------------------------ TN: broadcast blocks */
enum { TN_MR = 12, TN_NR = 32, TN_MAX_K = 256 };

/* The block of C rows [0, mr) x columns [0, 32) under masks m0, m1 (columns 0-15, 16-31), from
 * at (k rows of stride lda, TN_MR readable columns) and b (k rows of stride ldb). */
TS_AVX512 static void tn_block(int64_t k, const float *at, int64_t lda, const float *b, int64_t ldb,
                               float *c, int64_t ldc, int mr, __mmask16 m0, __mmask16 m1) {
    __m512 acc[TN_MR][2];
    for (int i = 0; i < TN_MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    if (m0 == 0xFFFF && m1 == 0xFFFF) {
        for (int64_t p = 0; p < k; p++) {
            const __m512 b0 = _mm512_loadu_ps(b + p * ldb), b1 = _mm512_loadu_ps(b + p * ldb + 16);
            const float *ap = at + p * lda;
            for (int i = 0; i < TN_MR; i++) {
                const __m512 av = _mm512_set1_ps(ap[i]);
                acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
                acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
            }
        }
    } else {
        for (int64_t p = 0; p < k; p++) {
            const __m512 b0 = _mm512_maskz_loadu_ps(m0, b + p * ldb);
            const __m512 b1 = _mm512_maskz_loadu_ps(m1, b + p * ldb + 16);
            const float *ap = at + p * lda;
            for (int i = 0; i < TN_MR; i++) {
                const __m512 av = _mm512_set1_ps(ap[i]);
                acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
                acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
            }
        }
    }
    for (int i = 0; i < mr; i++) {
        _mm512_mask_storeu_ps(c + i * ldc, m0, acc[i][0]);
        _mm512_mask_storeu_ps(c + i * ldc + 16, m1, acc[i][1]);
    }
}

TS_AVX512 static void gemm_tn(int64_t m, int64_t n, int64_t k, const float *at, int64_t lda,
                              const float *b, int64_t ldb, float *c, int64_t ldc, bool parallel) {
    const int64_t tm = (m + TN_MR - 1) / TN_MR, tn = (n + TN_NR - 1) / TN_NR;
    const int64_t full_m = m / TN_MR * TN_MR, rest = m - full_m;
    /* the last rows' At columns, zero-padded to a whole block: shared, read-only */
    float pad[TN_MAX_K * TN_MR];
    if (rest)
        for (int64_t p = 0; p < k; p++)
            for (int64_t i = 0; i < TN_MR; i++)
                pad[p * TN_MR + i] = i < rest ? at[p * lda + full_m + i] : 0.0f;
    (void)parallel;
#ifdef TS_HAVE_OPENMP
#pragma omp parallel for schedule(static) if (parallel)
#endif
    for (int64_t tj = 0; tj < tn; tj++) {
        const int64_t j = tj * TN_NR, cols = n - j < TN_NR ? n - j : TN_NR;
        const __mmask16 m0 = lanes(cols), m1 = lanes(cols - 16 > 0 ? cols - 16 : 0);
        for (int64_t ti = 0; ti < tm; ti++) {
            const int64_t i = ti * TN_MR;
            if (i < full_m)
                tn_block(k, at + i, lda, b + j, ldb, c + i * ldc + j, ldc, TN_MR, m0, m1);
            else
                tn_block(k, pad, TN_MR, b + j, ldb, c + i * ldc + j, ldc, (int)rest, m0, m1);
        }
    }
}

static bool have_avx512(void) { return __builtin_cpu_supports("avx512f"); }
#endif /* TS_SMALL_GEMM */

bool ts_gemm_small_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t rsa, int64_t csa,
                       const float *b, int64_t rsb, int64_t csb, float *c, int64_t rsc, int64_t csc,
                       bool parallel) {
#ifdef TS_SMALL_GEMM
    if (!enabled || m < 16 || n < 16 || csc != 1 || rsc < n || !have_avx512()) return false;
    if (csa == 1 && rsb == 1 && rsa >= k && csb >= k && m <= 128 && k >= 64) {
        gemm_nt(m, n, k, a, rsa, b, csb, c, rsc, parallel);
        return true;
    }
    if (rsa == 1 && csb == 1 && csa >= m && rsb >= n && k >= 1 && k <= TN_MAX_K) {
        gemm_tn(m, n, k, a, csa, b, rsb, c, rsc, parallel);
        return true;
    }
#else
    (void)m, (void)n, (void)k, (void)a, (void)rsa, (void)csa, (void)b, (void)rsb, (void)csb;
    (void)c, (void)rsc, (void)csc, (void)parallel;
#endif
    return false;
}
