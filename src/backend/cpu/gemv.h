/* gemv.h — float32 matrix-vector products on the CPU: y = W x (+ bias), each output one dot product
 * of a row of W, contiguous along k, with x. A linear layer on one row (batch-1 inference, a
 * decoder's step: x @ W^T with W [n, k] row-major) and a matrix times a column reach it through
 * kern_matmul.c; the squeeze-excitation's 1x1-image convolutions (conv_fc_blocked.c) use its row
 * kernel. */
#ifndef TS_GEMV_H
#define TS_GEMV_H

#include <stdbool.h>
#include <stdint.h>

/* y[o * sy] += dot(W row o, x) for o in [o0, o1): W row o at w + o * ldw, k floats; x k floats.
 * wide: the AVX-512 kernel (vectors of 16), else the AVX2 one (8). Four rows at a time with x
 * loaded once for the four; each row's lanes sum the products p = lane (mod 16 or 8) in order of
 * p (the tail of k as one zero-padded vector), then the lanes are summed pairwise: the order is
 * fixed by k alone. x86 builds only (tsi_gemv_rows_present). */
void tsi_gemv_rows_f32(bool wide, int64_t k, const float *x, const float *w, int64_t ldw, float *y,
                       int64_t sy, int64_t o0, int64_t o1);

/* Whether this build has the row kernels (an x86 compiler with vector extensions). */
bool tsi_gemv_rows_present(void);

/* y[o * sy] = bias[o * sbias] + dot(W row o, x) (no bias: the dot product alone) for o in [0, n),
 * with the variant ts_cpu_isa_get() names; threads split the rows when `parallel` and the work
 * pays for them. The result does not depend on the thread count. False, nothing written, where
 * the portable ISA is in use (BLAS keeps those products), on a build without the row kernels, or
 * when the kernel is turned off (tsi_gemv_enable, TS_GEMV=off). y must overlap neither operand. */
bool tsi_gemv_f32(int64_t n, int64_t k, const float *x, const float *w, int64_t ldw,
                  const float *bias, int64_t sbias, float *y, int64_t sy, bool parallel);

/* The rows of one thread's piece of an n-row product of `macs` multiply-adds: all n where threads
 * do not pay for their start (or `parallel` is false, or a parallel region is running), else n
 * split evenly among OpenMP's threads, rounded up to a multiple of 4. */
int64_t tsi_gemv_piece_rows(int64_t n, double macs, bool parallel);

/* Tests and benchmarks: false turns tsi_gemv_f32 off (every call returns false), true back on. */
void tsi_gemv_enable(bool on);

#endif /* TS_GEMV_H */
