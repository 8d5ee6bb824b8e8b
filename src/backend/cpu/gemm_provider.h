/* gemm_provider.h — the library GEMMs behind the CPU kernels: oneDNN where present (its matmul
 * primitive for large products, its sgemm below that; JIT kernels for the best ISA the CPU has,
 * capped by TS_CPU_ISA), OpenBLAS otherwise (and for f64). */
#ifndef TS_GEMM_PROVIDER_H
#define TS_GEMM_PROVIDER_H

#include <stdbool.h>
#include <stdint.h>

/* Row-major C[m x n] = op(A) op(B) + beta C, op transposing when ta / tb. Returns false when no
 * library is built in or chosen, or the sizes are beyond it (the caller then runs the built-in
 * blocked GEMM). TS_GEMM=dnnl|dnnl-sgemm|openblas|blocked forces a provider (benchmarks, tests). */
bool tsi_lib_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                   const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
bool tsi_lib_dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
                   const double *b, int64_t ldb, double beta, double *c, int64_t ldc);

/* Whether the float32 provider runs a product of this many multiply-adds near the machine's peak
 * (oneDNN's matmul primitive, from matmul_select.c's near_peak_macs): the hand-written small-batch
 * kernels leave such products to it. */
bool tsi_lib_sgemm_near_peak(double macs);

/* Whether oneDNN's matmul primitive runs a float32 product C[m x n] = op(A) op(B) (k the
 * reduction) with beta 0 (the others go to the provider's GEMM): every layout where oneDNN is the
 * provider; where OpenBLAS is (the AVX2 kernels), those with B transposed and the A^T B ones over
 * a short reduction into wide rows, where oneDNN's AVX2 kernels beat OpenBLAS's (its NN products
 * run at half OpenBLAS's speed, its long-reduction A^T B ones too: bench/results/cpu-matmul.md). */
bool tsi_lib_sgemm_primitive(bool ta, bool tb, int64_t m, int64_t n, int64_t k);

/* Whether oneDNN's matmul primitive is the float32 provider with its brgemm kernels (oneDNN chosen,
 * not TS_GEMM=dnnl-sgemm, the kernels in use AVX-512): kern_matmul.c then gives it whole batches
 * of products. */
bool tsi_lib_sgemm_primitive_provider(void);

/* Where tsi_lib_sgemm sends a float32 product first (tests check the rules): oneDNN's matmul
 * primitive, oneDNN's sgemm (where it is the provider, or a thin product beside OpenBLAS), the
 * BLAS, or none (the built-in blocked GEMM). */
typedef enum { TSI_SGEMM_PRIMITIVE, TSI_SGEMM_DNNL, TSI_SGEMM_BLAS, TSI_SGEMM_NONE } tsi_sgemm_lib;
tsi_sgemm_lib tsi_lib_sgemm_route(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float beta);

/* A library GEMM is chosen for this precision (else every product runs the blocked GEMM). */
bool tsi_lib_gemm_present(bool f64);
/* "oneDNN 2.6.3 (avx512_core)", "OpenBLAS 0.3.21 (Haswell)", "built-in blocked GEMM" */
const char *tsi_lib_gemm_name(bool f64);

#endif /* TS_GEMM_PROVIDER_H */
