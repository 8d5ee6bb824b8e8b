/* gemm_small_blocks.h — the register-blocked kernels behind gemm_small.c (not public). Call only
 * when the CPU has AVX-512 (ts_gemm_small_f32 checks). */
#ifndef TS_GEMM_SMALL_BLOCKS_H
#define TS_GEMM_SMALL_BLOCKS_H

#include <stdint.h>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define TS_SMALL_GEMM_BLOCKS 1

enum { TS_NT_MR = 4, TS_NT_NR = 6, TS_TN_MR = 12, TS_TN_NR = 32, TS_TN_MAX_K = 256 };

/* NT: C[i][j] = dot(A row i, B column j) over k for the mr x nr block (mr <= TS_NT_MR,
 * nr <= TS_NT_NR) at A rows a.. (stride lda) and B columns b.. (stride ldb, k-contiguous). */
void tsi_nt_block(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                  int64_t ldc, int mr, int nr);
/* TN: C[i][j] = sum_p at[p][i] * b[p][j] for rows [0, mr) (mr <= TS_TN_MR; at has TS_TN_MR
 * readable columns) and columns [0, cols) (cols <= TS_TN_NR) of one block. */
void tsi_tn_block(int64_t k, const float *at, int64_t lda, const float *b, int64_t ldb, float *c,
                  int64_t ldc, int mr, int cols);
#endif

#endif /* TS_GEMM_SMALL_BLOCKS_H */
