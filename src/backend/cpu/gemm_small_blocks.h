/* gemm_small_blocks.h — the register-blocked kernels behind gemm_small.c (not public), one set per
 * ISA: gemm_small_avx512.c and gemm_small_avx2.c. Call a set only when ts_cpu_isa_get() allows it
 * (tsi_gemm_small_f32 checks). */
#ifndef TS_GEMM_SMALL_BLOCKS_H
#define TS_GEMM_SMALL_BLOCKS_H

#include <stdint.h>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define TS_SMALL_GEMM_BLOCKS 1

/* NT: C[i][j] = dot(A row i, B column j) over k for the mr x nr block (mr, nr at most the ISA's
 * block) at A rows a.. (stride lda) and B columns b.. (stride ldb, k-contiguous). */
typedef void (*tsi_nt_block_fn)(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                                float *c, int64_t ldc, int mr, int nr);

/* AVX-512: NT blocks of 4 x 6 dot products. */
enum { TS_NT512_MR = 4, TS_NT512_NR = 6 };
void tsi_nt_block_avx512(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                         float *c, int64_t ldc, int mr, int nr);

/* AVX2 + FMA (16 registers): NT blocks of 3 x 4 dot products. */
enum { TS_NT256_MR = 3, TS_NT256_NR = 4 };
void tsi_nt_block_avx2(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                       float *c, int64_t ldc, int mr, int nr);
#endif

#endif /* TS_GEMM_SMALL_BLOCKS_H */
