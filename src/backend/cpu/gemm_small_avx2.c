/* gemm_small_avx2.c — the register-blocked AVX2 + FMA kernels of gemm_small.c (which see).
 *
 * AVX2 has 16 vector registers of 8 floats, so the blocks are smaller than AVX-512's: NT keeps
 * 3 x 4 dot products (12 accumulators, 3 rows of A, B streamed through the FMA's memory operand).
 * The accumulators are named variables spelled out by macros, for the reason gemm_small_avx512.c
 * gives. */
#include "backend/cpu/gemm_small_blocks.h"

#include "backend/cpu/cpu_isa.h"

#ifdef TS_SMALL_GEMM_BLOCKS
#include <immintrin.h>

#define TS_AVX2 __attribute__((target(TS_ISA_TARGET_AVX2)))
typedef float ts_v8 __attribute__((vector_size(32)));
#define FMA(a, b, c)      ((ts_v8)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#define LOAD(mask, p)     ((ts_v8)_mm256_maskload_ps((p), (mask)))
#define STORE(mask, p, v) _mm256_maskstore_ps((p), (mask), (__m256)(v))
/* Whole vectors load plainly: a mask would hold a 17th register (the 12 sums, 3 rows of A and B's
 * vector fill the 16), and gcc then kept one sum on the stack, a store-to-load chain per step
 * that ran the NT kernel at a third of the FMA rate. */
#define LOADU(p) ((ts_v8)_mm256_loadu_ps(p))

/* Lanes [0, r) of an 8-lane vector, as a maskload / maskstore mask. */
TS_AVX2 static inline __m256i lanes(int64_t r) {
    const int n = r >= 8 ? 8 : r <= 0 ? 0 : (int)r;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The 8 lanes summed in a fixed order: halves, then pairs. */
TS_AVX2 static inline float hsum(ts_v8 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128((__m256)v), _mm256_extractf128_ps((__m256)v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ------------------------------------------------------------------ NT: dot-product blocks */
/* acc s<i><j>: 8 partial sums of C[i][j], i < 3 (rows of A), j < 4 (columns of B) */
#define NT_ROW(X, i)  X(i, 0) X(i, 1) X(i, 2) X(i, 3)
#define NT_ALL(X)     NT_ROW(X, 0) NT_ROW(X, 1) NT_ROW(X, 2)
#define NT_DECL(i, j) ts_v8 s##i##j = {0};
#define NT_COL(j, LD)                                                                              \
    {                                                                                              \
        const ts_v8 bv = LD(b##j + p);                                                             \
        s0##j = FMA(a0, bv, s0##j);                                                                \
        s1##j = FMA(a1, bv, s1##j);                                                                \
        s2##j = FMA(a2, bv, s2##j);                                                                \
    }
#define NT_OUT(i, j)                                                                               \
    if (i < mr && j < nr) c[i * ldc + j] = hsum(s##i##j);

/* Rows and columns past mr / nr read row / column 0 again and are not stored, so every block runs
 * the same code; lanes past k are masked off. */
TS_AVX2 void tsi_nt_block_avx2(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                               float *c, int64_t ldc, int mr, int nr) {
    const float *r0 = a, *r1 = a + (1 < mr) * lda, *r2 = a + (2 < mr) * 2 * lda;
    const float *b0 = b, *b1 = b + (1 < nr) * ldb, *b2 = b + (2 < nr) * 2 * ldb,
                *b3 = b + (3 < nr) * 3 * ldb;
    NT_ALL(NT_DECL)
    int64_t p = 0;
    for (; p + 8 <= k; p += 8) { /* whole vectors */
        const ts_v8 a0 = LOADU(r0 + p), a1 = LOADU(r1 + p), a2 = LOADU(r2 + p);
        NT_COL(0, LOADU) NT_COL(1, LOADU) NT_COL(2, LOADU) NT_COL(3, LOADU)
    }
    if (p < k) { /* the last lanes of k */
        const __m256i mt = lanes(k - p);
#define LOADT(q) LOAD(mt, q)
        const ts_v8 a0 = LOADT(r0 + p), a1 = LOADT(r1 + p), a2 = LOADT(r2 + p);
        NT_COL(0, LOADT) NT_COL(1, LOADT) NT_COL(2, LOADT) NT_COL(3, LOADT)
#undef LOADT
    }
    NT_ALL(NT_OUT)
}

#endif /* TS_SMALL_GEMM_BLOCKS */
