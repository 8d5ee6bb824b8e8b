/* gemm_small_avx512.c — the register-blocked AVX-512 kernels of gemm_small.c (which see).
 *
 * The accumulators are named variables spelled out by macros, not arrays: with arrays gcc kept
 * them in registers but also stored all 24 to the stack on every step (in the retired TN kernel
 * that made 128 x 784 x 64 take 72 us instead of 65, and up to 170 us in some variants). */
#include "backend/cpu/gemm_small_blocks.h"

#include "backend/cpu/cpu_isa.h"

#ifdef TS_SMALL_GEMM_BLOCKS
#include <immintrin.h>

#define TS_AVX512 __attribute__((target(TS_ISA_TARGET_AVX512)))
typedef float ts_v16 __attribute__((vector_size(64)));
#define FMA(a, b, c)      ((ts_v16)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#define LOAD(mask, p)     ((ts_v16)_mm512_maskz_loadu_ps((mask), (p)))
#define STORE(mask, p, v) _mm512_mask_storeu_ps((p), (mask), (__m512)(v))

/* Lanes [0, r) of a 16-lane vector. */
TS_AVX512 static inline __mmask16 lanes(int64_t r) {
    return r >= 16 ? (__mmask16)0xFFFF : r <= 0 ? (__mmask16)0 : (__mmask16)((1u << r) - 1u);
}

/* ------------------------------------------------------------------ NT: dot-product blocks */
/* acc s<i><j>: 16 partial sums of C[i][j], i < 4 (rows of A), j < 6 (columns of B) */
#define NT_ROW(X, i)  X(i, 0) X(i, 1) X(i, 2) X(i, 3) X(i, 4) X(i, 5)
#define NT_ALL(X)     NT_ROW(X, 0) NT_ROW(X, 1) NT_ROW(X, 2) NT_ROW(X, 3)
#define NT_DECL(i, j) ts_v16 s##i##j = {0};
#define NT_COL(j)                                                                                  \
    {                                                                                              \
        const ts_v16 bv = LOAD(mk, b##j + p);                                                      \
        s0##j = FMA(a0, bv, s0##j);                                                                \
        s1##j = FMA(a1, bv, s1##j);                                                                \
        s2##j = FMA(a2, bv, s2##j);                                                                \
        s3##j = FMA(a3, bv, s3##j);                                                                \
    }
#define NT_OUT(i, j)                                                                               \
    if (i < mr && j < nr) c[i * ldc + j] = _mm512_reduce_add_ps((__m512)s##i##j);

/* Rows and columns past mr / nr read row / column 0 again and are not stored, so every block runs
 * the same code; lanes past k are masked off. */
TS_AVX512 void tsi_nt_block_avx512(int64_t k, const float *a, int64_t lda, const float *b,
                                   int64_t ldb, float *c, int64_t ldc, int mr, int nr) {
    const float *r0 = a, *r1 = a + (1 < mr) * lda, *r2 = a + (2 < mr) * 2 * lda,
                *r3 = a + (3 < mr) * 3 * lda;
    const float *b0 = b, *b1 = b + (1 < nr) * ldb, *b2 = b + (2 < nr) * 2 * ldb,
                *b3 = b + (3 < nr) * 3 * ldb, *b4 = b + (4 < nr) * 4 * ldb,
                *b5 = b + (5 < nr) * 5 * ldb;
    NT_ALL(NT_DECL)
    int64_t p = 0;
    for (; p + 16 <= k; p += 16) { /* whole vectors */
        const __mmask16 mk = 0xFFFF;
        const ts_v16 a0 = LOAD(mk, r0 + p), a1 = LOAD(mk, r1 + p), a2 = LOAD(mk, r2 + p),
                     a3 = LOAD(mk, r3 + p);
        NT_COL(0) NT_COL(1) NT_COL(2) NT_COL(3) NT_COL(4) NT_COL(5)
    }
    if (p < k) { /* the last lanes of k */
        const __mmask16 mk = lanes(k - p);
        const ts_v16 a0 = LOAD(mk, r0 + p), a1 = LOAD(mk, r1 + p), a2 = LOAD(mk, r2 + p),
                     a3 = LOAD(mk, r3 + p);
        NT_COL(0) NT_COL(1) NT_COL(2) NT_COL(3) NT_COL(4) NT_COL(5)
    }
    NT_ALL(NT_OUT)
}

#endif /* TS_SMALL_GEMM_BLOCKS */
