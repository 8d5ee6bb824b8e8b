/* matmul_select.h — which kernel runs a CPU matrix product: one table of cut-offs
 * (tsi_mm_limits, matmul_select.c's one instance, each row commented with the measurement behind
 * it) and the function that reads it for one float32 / float64 product (tsi_mm_select). The
 * products' paths:
 *   kern_matmul.c   the plain loop (gemm_direct) and the batch loops; the f16 / bf16 products
 *   gemv.c          a row times a matrix, a matrix times a column
 *   gemm_small.c    a linear layer's forward (NT) on small batches
 *   gemm_provider.c the library's GEMM: oneDNN's matmul primitive, its sgemm, OpenBLAS
 *   matmul_dnnl.c   oneDNN's primitive, also batched (a batch of products in one call)
 *   gemm_amx.c      bf16 on AMX tiles
 *   gemm_blocked.c  the built-in blocked GEMM, when no library was found
 * Kernels may still decline what they are asked (no ISA for them, TS_GEMV=off, out of scratch):
 * the caller then takes the next path in tsi_mm_path's order. The ONNX import's MatMul / Gemm and
 * every ts_matmul reach the same choice. */
#ifndef TS_MATMUL_SELECT_H
#define TS_MATMUL_SELECT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct tsi_mm_limits {
    /* products of at most this many multiply-adds run the plain loop (float32 and float64) */
    double direct_max_macs;
    /* a batch of products each under this many runs one product per thread, not each threaded */
    double batch_per_thread_max_macs;
    /* a product of more than this many runs its own threads (gemm_small's parallel flag) */
    double parallel_min_macs;
    /* a batch to oneDNN's batched primitive: at least batch_prim_min_macs in all, each product
     * either plain-loop sized or at least batch_prim_tiny_macs */
    double batch_prim_min_macs, batch_prim_tiny_macs;
    /* gemm_provider.c: under lib_tiny_macs a product stays with the BLAS (oneDNN's call costs
     * more); from prim_min_macs oneDNN's matmul primitive takes it from its sgemm; from
     * near_peak_macs the primitive takes gemm_small's products too */
    double lib_tiny_macs, prim_min_macs, near_peak_macs;
    /* gemm_provider.c with OpenBLAS the provider (AVX2): oneDNN's sgemm takes products with a
     * dimension under thin; its primitive takes A^T B over k <= tn_prim_max_k into n >=
     * tn_prim_min_n */
    int64_t thin, tn_prim_max_k, tn_prim_min_n;
    /* gemm_small.c: m and n at least small_min_mn; NT with m <= small_nt_max_m and k >=
     * small_nt_min_k */
    int64_t small_min_mn, small_nt_max_m, small_nt_min_k;
    /* gemv.c: threads from gemv_parallel_min_macs */
    double gemv_parallel_min_macs;
    /* gemm_amx.c: bf16 products from amx_min_macs on AMX tiles (TS_AMX_GEMM=all: every one) */
    double amx_min_macs;
} tsi_mm_limits;

const tsi_mm_limits *tsi_mm_limits_get(void);

/* The paths of one float32 / float64 product, in the order they are tried */
typedef enum {
    TSI_MM_GEMV,   /* gemv.c (float32, m or n 1, the layouts it reads) */
    TSI_MM_SMALL,  /* gemm_small.c (float32, the NT layout, small batches) */
    TSI_MM_DIRECT, /* the plain loop */
    TSI_MM_LIB,    /* the library's GEMM (gemm_provider.c routes it), else the blocked GEMM */
} tsi_mm_path;

/* One product C [m, n] = A [m, k] B [k, n], strides in elements (rows, columns), float64 when
 * dbl: the first path to try. near_peak: gemm_provider.c's tsi_lib_sgemm_near_peak for its
 * multiply-adds (the provider's answer, read once). */
tsi_mm_path tsi_mm_select(bool dbl, int64_t m, int64_t n, int64_t k, const int64_t sa[2],
                          const int64_t sb[2], const int64_t sc[2], bool near_peak);

/* Benchmarks (bench/bench_mm_paths.c): every product takes TSI_MM_DIRECT (the plain loop, any
 * size) or TSI_MM_LIB first; any other value restores the table's choice. gemv.c and gemm_small.c
 * have their own switches (tsi_gemv_enable, tsi_gemm_small_enable). */
void tsi_mm_select_force(int path);

/* The layout and sizes gemm_small.c's kernels take (strides as above): NT (A's rows and B's
 * columns along k), C's rows contiguous */
bool tsi_mm_small_nt(int64_t m, int64_t n, int64_t k, const int64_t sa[2], const int64_t sb[2],
                     const int64_t sc[2]);

#endif
