/* dynamic_quantize_internal.h — DynamicQuantizeLinear's cpu steps (dynamic_quantize_linear.c),
 * shared with the ops that quantize an activation on the fly (matmul_integer_to_float.c). */
#ifndef TS_OPS_DYNAMIC_QUANTIZE_INTERNAL_H
#define TS_OPS_DYNAMIC_QUANTIZE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

/* ONNX's scale and zero point of x[0, n) (n >= 1), each step one float32 operation: *scale, the
 * zero point as a float (*zp) and as its byte (*zq). false (nothing set) when a value of x is NaN
 * or infinite (the tensor-op route of ts_dynamic_quantize_linear takes those). */
bool tsi_dql_params(const float *x, int64_t n, float *scale, float *zp, uint8_t *zq);

/* y = saturate(rint(x / scale) + zp) for rows of k values (x finite); sums (NULL: none) gets each
 * row's byte sum (exact for k < 2^24: the sum is kept in 32 bits). */
void tsi_dql_quantize_rows(const float *x, int64_t rows, int64_t k, float scale, float zp,
                           uint8_t *y, int64_t *sums);

#endif /* TS_OPS_DYNAMIC_QUANTIZE_INTERNAL_H */
