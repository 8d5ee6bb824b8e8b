/* gemm_blocked.h — the built-in cache-blocked f32/f64 GEMM used when no CPU BLAS is found. */
#ifndef TS_GEMM_BLOCKED_H
#define TS_GEMM_BLOCKED_H

#include <stdbool.h>
#include <stdint.h>

/* C[m,n] = A[m,k] @ B[k,n], overwriting C. Every matrix is addressed by element strides (row
 * stride, column stride), so transposed and broadcast (stride 0) operands need no copy; C must not
 * overlap A or B. k == 0 writes zeros. `parallel` lets the call use OpenMP threads when the work is
 * large; callers that already run one GEMM per thread pass false. Returns false, C unwritten, when
 * its packing buffers cannot be allocated. */
bool tsi_gemm_blocked_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t rsa, int64_t csa,
                          const float *b, int64_t rsb, int64_t csb, float *c, int64_t rsc,
                          int64_t csc, bool parallel);
bool tsi_gemm_blocked_f64(int64_t m, int64_t n, int64_t k, const double *a, int64_t rsa,
                          int64_t csa, const double *b, int64_t rsb, int64_t csb, double *c,
                          int64_t rsc, int64_t csc, bool parallel);

/* The micro-kernel family in use: "avx512", "avx2" or "generic" (ts_cpu_isa_get(): the CPU's best,
 * capped by TS_CPU_ISA). Tests force each family the CPU supports in turn; forcing one it lacks
 * returns false. NULL restores the automatic choice. Not thread-safe: call while no GEMM runs. */
const char *tsi_gemm_blocked_isa(void);
bool tsi_gemm_blocked_force_isa(const char *name);

#endif /* TS_GEMM_BLOCKED_H */
