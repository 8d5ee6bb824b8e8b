/* cuda_elementwise.h — the elementwise entries of the "cuda" backend (backend.h semantics; each
 * file one family), installed into the table by tsc_install_elementwise. */
#ifndef TS_CUDA_ELEMENTWISE_H
#define TS_CUDA_ELEMENTWISE_H

#include "backend/cuda/cuda_internal.h"

/* cuda_copy.cu */
void tsc_copy(const ts_backend *be, int index, const ts_kview *dst, const ts_kview *src);
void tsc_fill(const ts_backend *be, int index, const ts_kview *dst, double value);
/* cuda_unary.cu */
void tsc_unary(const ts_backend *be, int index, ts_unary_op op, const ts_kview *out,
               const ts_kview *a, double p0, double p1);
/* cuda_binary.cu */
void tsc_binary(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                const ts_kview *a, const ts_kview *b);
/* cuda_complex.cu: tsc_binary on complex64 / complex128 (add, sub, mul, div) */
void tsc_complex_binary(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                        const ts_kview *a, const ts_kview *b);
/* cuda_complex.cu: tsc_unary on complex64 / complex128 (abs, out float32 / float64) */
void tsc_complex_unary(const ts_backend *be, int index, ts_unary_op op, const ts_kview *out,
                       const ts_kview *a);
void tsc_where(const ts_backend *be, int index, const ts_kview *out, const ts_kview *cond,
               const ts_kview *a, const ts_kview *b);
/* cuda_ternary.cu */
void tsc_ternary(const ts_backend *be, int index, ts_ternary_op op, const ts_kview *out,
                 const ts_kview *a, const ts_kview *b, const ts_kview *c, double p);
/* cuda_binary_scalar.cu */
void tsc_binary_scalar(const ts_backend *be, int index, ts_binary_op op, const ts_kview *out,
                       const ts_kview *a, double s);
/* cuda_random.cu */
void tsc_random(const ts_backend *be, int index, ts_random_kind kind, const ts_kview *out,
                double p0, double p1, uint64_t seed, uint64_t offset);

static inline void tsc_install_elementwise(ts_backend *be) {
    be->copy = tsc_copy;
    be->fill = tsc_fill;
    be->unary = tsc_unary;
    be->binary = tsc_binary;
    be->binary_scalar = tsc_binary_scalar;
    be->where = tsc_where;
    be->ternary = tsc_ternary;
    be->random = tsc_random;
}

#endif /* TS_CUDA_ELEMENTWISE_H */
