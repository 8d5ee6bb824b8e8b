/* gemm_small.h — a hand-written f32 GEMM for a linear layer's forward on small batches, where BLAS
 * libraries lose much of the machine to packing and zeroing. */
#ifndef TS_GEMM_SMALL_H
#define TS_GEMM_SMALL_H

#include <stdbool.h>
#include <stdint.h>

/* C[m,n] = A[m,k] @ B[k,n] (strides in elements, as tsi_gemm_blocked_f32) when the operands have
 * the layout it is written for and ts_cpu_isa_get() is AVX-512 or AVX2 (the portable path
 * declines: BLAS does these products there); returns false, touching nothing, otherwise:
 *   NT: A row-major (csa == 1), B the transpose of a row-major matrix (rsb == 1), m <= 128,
 *       k >= 64 (x @ W^T of a linear layer on a batch of m rows).
 * C must be row-major (csc == 1) and overlap neither operand; m and n at least 16. Each element's
 * summation order is fixed by the shapes alone, so the result does not depend on the thread
 * count. `parallel` lets it use OpenMP threads. */
bool tsi_gemm_small_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t rsa, int64_t csa,
                        const float *b, int64_t rsb, int64_t csb, float *c, int64_t rsc,
                        int64_t csc, bool parallel);

/* Tests: false turns the kernels off (every call returns false), true back on. */
void tsi_gemm_small_enable(bool on);

#endif /* TS_GEMM_SMALL_H */
