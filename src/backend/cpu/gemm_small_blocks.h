/* gemm_small_blocks.h — the register-blocked kernels behind gemm_small.c (not public), one set per
 * ISA: gemm_small_avx512.c and gemm_small_avx2.c. Call a set only when ts_cpu_isa_get() allows it
 * (tsi_gemm_small_f32 checks). */
#ifndef TS_GEMM_SMALL_BLOCKS_H
#define TS_GEMM_SMALL_BLOCKS_H

#include <stdint.h>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define TS_SMALL_GEMM_BLOCKS 1

/* The longest k of a TN product (the batch of a weight gradient), and the most rows of a TN block
 * of any ISA (its zero-padded edge copy lives on the stack). */
enum { TS_TN_MAX_K = 256, TS_TN_MAX_MR = 12, TS_TN_MAX_NR = 32 };
/* From this k on, a TN product copies each column block of B into a contiguous k x nr panel
 * (rows 4 KiB apart, as x's of a 1024-wide layer, all fell into one L1 set) and, on AVX2, At
 * into contiguous k x mr panels (its 6-column panels used a third of each line they read). */
enum { TS_TN_PACK_K = 128 };

/* NT: C[i][j] = dot(A row i, B column j) over k for the mr x nr block (mr, nr at most the ISA's
 * block) at A rows a.. (stride lda) and B columns b.. (stride ldb, k-contiguous). */
typedef void (*tsi_nt_block_fn)(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                                float *c, int64_t ldc, int mr, int nr);
/* TN: C[i][j] = sum_p at[p][i] * b[p][j] for rows [0, mr) (at has the ISA's full block of readable
 * columns) and columns [0, cols) of one block. */
typedef void (*tsi_tn_block_fn)(int64_t k, const float *at, int64_t lda, const float *b,
                                int64_t ldb, float *c, int64_t ldc, int mr, int cols);

/* AVX-512: NT blocks of 4 x 6 dot products, TN blocks of 12 x 32. */
enum { TS_NT512_MR = 4, TS_NT512_NR = 6, TS_TN512_MR = 12, TS_TN512_NR = 32 };
void tsi_nt_block_avx512(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float *c, int64_t ldc, int mr, int nr);
void tsi_tn_block_avx512(int64_t k, const float *at, int64_t lda, const float *b, int64_t ldb,
                         float *c, int64_t ldc, int mr, int cols);

/* AVX2 + FMA (16 registers): NT blocks of 3 x 4 dot products, TN blocks of 6 x 16. */
enum { TS_NT256_MR = 3, TS_NT256_NR = 4, TS_TN256_MR = 6, TS_TN256_NR = 16 };
void tsi_nt_block_avx2(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                       float *c, int64_t ldc, int mr, int nr);
void tsi_tn_block_avx2(int64_t k, const float *at, int64_t lda, const float *b, int64_t ldb,
                       float *c, int64_t ldc, int mr, int cols);
#endif

#endif /* TS_GEMM_SMALL_BLOCKS_H */
