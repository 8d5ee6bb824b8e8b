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
/* Batched strided products in `dt` (TS_F32 or TS_BF16): for each of bsz batches, C = A B with
 * A [m x k], B [k x n], C [m x n]; s*[0] the batch stride (0: one matrix for every batch), s*[1]
 * the row stride and s*[2] the column stride, in elements. bf16 operands are multiplied exactly
 * and summed in float32; C is rounded to bf16 once (oneDNN's bf16 matmul, AMX tiles or
 * AVX512-BF16's vdpbf16ps). false, having written nothing the caller relies on, as above. */
bool tsi_dnnl_matmul_strided(int dt, int64_t bsz, int64_t m, int64_t n, int64_t k, const void *a,
                             const int64_t sa[3], const void *b, const int64_t sb[3], void *c,
                             const int64_t sc[3]);
/* The same with C = A B + bias (bias [n], contiguous, of dt, added to every row; NULL: none).
 * float32: the bias is added to the rounded product (the bits of the product and then an add);
 * bf16: to the float32 sums, before the one rounding. false as above. */
bool tsi_dnnl_matmul_strided_bias(int dt, int64_t bsz, int64_t m, int64_t n, int64_t k,
                                  const void *a, const int64_t sa[3], const void *b,
                                  const int64_t sb[3], void *c, const int64_t sc[3],
                                  const void *bias);
/* A whole batch of float32 products in one call (strides as tsi_dnnl_matmul_strided), where oneDNN
 * runs it with its brgemm kernels, which thread over the batch and the blocks of C and never
 * split k, so each element's sum does not depend on the thread count. 1: done. 0, having written
 * nothing: declined (oneDNN absent, switched off, or it would pick another kernel: gemm:jit under
 * an AVX2 cap, a reference loop for layouts brgemm does not take, such as a column stride of 2).
 * -1: it takes the batch but could not run it (scratchpad or oneDNN's objects not had): the
 * caller reports out of memory rather than multiply another way, which rounds differently. */
int tsi_dnnl_matmul_batched_f32(int64_t bsz, int64_t m, int64_t n, int64_t k, const float *a,
                                const int64_t sa[3], const float *b, const int64_t sb[3], float *c,
                                const int64_t sc[3]);
/* Tests and benchmarks: false makes tsi_dnnl_matmul_batched_f32 decline every batch (the products
 * then go one by one), true restores it. */
void tsi_dnnl_matmul_batched_enable(bool on);
/* Whether oneDNN multiplies bf16 with bf16 instructions here: the CPU has AVX512-BF16 (or AMX)
 * and neither TS_CPU_ISA nor ONEDNN_MAX_CPU_ISA caps oneDNN below them. Without them a bf16
 * primitive would emulate the products (slower than widening to float32), so callers widen. */
bool tsi_dnnl_bf16_native(void);
/* "avx512_core_amx", "avx512_core_bf16", ... : the ISA oneDNN's kernels run with ("none"
 * without oneDNN). */
const char *tsi_dnnl_isa_name(void);
/* The same name for oneDNN's effective ISA now, without making the engine first (the GEMM
 * provider's description, which runs while the caps are set). */
const char *tsi_dnnl_effective_isa(void);
/* Products the primitive has run so far (tests check that it, not a fallback, ran): float32,
 * and bf16 apart. */
uint64_t tsi_dnnl_matmul_count(void);
uint64_t tsi_dnnl_matmul_bf16_count(void);
/* Primitives built so far (a cache miss builds one; tests check what the cache keys on). */
uint64_t tsi_dnnl_matmul_builds(void);

#endif /* TS_MATMUL_DNNL_H */
