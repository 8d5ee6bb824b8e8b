/* matmul_dnnl.h — large float32 matrix products through oneDNN's matmul primitive (when the build
 * found oneDNN). */
#ifndef TS_MATMUL_DNNL_H
#define TS_MATMUL_DNNL_H

#include <stdbool.h>
#include <stdint.h>

/* Row-major C[m x n] = op(A) op(B), op transposing when ta / tb, leading dimensions as BLAS's.
 * Returns false, having written nothing the caller relies on, when oneDNN is absent, declines the
 * shape or memory runs out: the caller then multiplies another way. */
bool tsi_dnnl_matmul_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                         int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc);
/* Products the primitive has run so far (tests check that it, not a fallback, ran). */
uint64_t tsi_dnnl_matmul_count(void);
/* Primitives built so far (a cache miss builds one; tests check what the cache keys on). */
uint64_t tsi_dnnl_matmul_builds(void);

#endif /* TS_MATMUL_DNNL_H */
