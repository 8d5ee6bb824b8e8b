/* tessera/logic.h — predicates, logical and bitwise forms, cumulative ops and PyTorch's other
 * pointwise forms (src/ops/logic.c, cumulative.c, ternary.c, nan_forms.c, diff.c, repeat.c,
 * gcd.c). Included by tessera.h. */
#ifndef TESSERA_LOGIC_H
#define TESSERA_LOGIC_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Predicates (src/ops/logic.c): TS_BOOL results of t's shape, any dtype; integer and bool inputs
 * are finite, never NaN. isreal: true everywhere (no complex dtypes yet). */
TS_API ts_tensor *ts_isnan(ts_tensor *t);
TS_API ts_tensor *ts_isinf(ts_tensor *t);
TS_API ts_tensor *ts_isfinite(ts_tensor *t);
TS_API ts_tensor *ts_isposinf(ts_tensor *t);
TS_API ts_tensor *ts_isneginf(ts_tensor *t);
TS_API ts_tensor *ts_isreal(ts_tensor *t);
TS_API ts_tensor *ts_logical_xor(ts_tensor *a, ts_tensor *b); /* (a != 0) != (b != 0), broadcast */
/* torch.heaviside: 0 where t < 0, values where t == 0, 1 where t > 0; t and values of one dtype
 * (TS_ERR_DTYPE otherwise), broadcast; not differentiable (TS_ERR_UNSUPPORTED under a graph) */
TS_API ts_tensor *ts_heaviside(ts_tensor *t, ts_tensor *values);
/* torch.any / torch.all over dims (dims.n == 0: every dim): TS_BOOL (TS_U8 for a uint8 input);
 * an empty reduction gives false / true */
TS_API ts_tensor *ts_any(ts_tensor *t, ts_dims dims, bool keepdim);
TS_API ts_tensor *ts_all(ts_tensor *t, ts_dims dims, bool keepdim);
/* |a - b| <= atol + rtol * |b| or a == b (NaN == NaN with equal_nan), a and b of one dtype and
 * broadcast; rtol, atol >= 0 */
TS_API ts_tensor *ts_isclose(ts_tensor *a, ts_tensor *b, double rtol, double atol, bool equal_nan);
/* 1 when every element is close (isclose) / a and b have one shape and equal values (NaN is not
 * equal to NaN), 0 when not, -1 on error */
TS_API int ts_allclose(ts_tensor *a, ts_tensor *b, double rtol, double atol, bool equal_nan);
TS_API int ts_equal(ts_tensor *a, ts_tensor *b);
/* Cumulative ops along dim (src/ops/cumulative.c; the backend's scan slot: cpu and sim).
 * cumsum / cumprod: dtype TS_DTYPE_DEFAULT keeps a float dtype and gives int64 for integers and
 * bool; otherwise t is converted to dtype first. Floats accumulate in double, integers in int64
 * (wrapping). cumprod's gradient handles zeros as PyTorch's. */
TS_API ts_tensor *ts_cumsum(ts_tensor *t, int dim, ts_dtype dtype);
TS_API ts_tensor *ts_cumprod(ts_tensor *t, int dim, ts_dtype dtype);
/* running max / min with their int64 indices (*indices when not NULL): a tie or a NaN takes the
 * later index, a NaN stays once seen (PyTorch's rule) */
TS_API ts_tensor *ts_cummax(ts_tensor *t, int dim, ts_tensor **indices);
TS_API ts_tensor *ts_cummin(ts_tensor *t, int dim, ts_tensor **indices);
TS_API ts_tensor *ts_logcumsumexp(ts_tensor *t,
                                  int dim); /* floats; log(cumsum(exp(t))) computed stably */
/* Pointwise forms (src/ops/ternary.c, nan_forms.c, diff.c, repeat.c, gcd.c), broadcasting and
 * promoting as PyTorch */
TS_API ts_tensor *ts_addcmul(ts_tensor *t, ts_tensor *a, ts_tensor *b,
                             double value); /* t + v*a*b */
TS_API ts_tensor *ts_addcdiv(ts_tensor *t, ts_tensor *a, ts_tensor *b,
                             double value); /* t + v*a/b */
/* start + weight * (end - start), PyTorch's two-sided formula; floats, start / end (/ weight) of
 * one dtype */
TS_API ts_tensor *ts_lerp(ts_tensor *start, ts_tensor *end, ts_tensor *weight);
TS_API ts_tensor *ts_lerp_scalar(ts_tensor *start, ts_tensor *end, double weight);
TS_API ts_tensor *ts_fmax(ts_tensor *a, ts_tensor *b); /* maximum ignoring a NaN operand */
TS_API ts_tensor *ts_fmin(ts_tensor *a, ts_tensor *b);
/* sum / mean treating NaN as absent (dims.n == 0: every dim); floats (nansum: integers too) */
TS_API ts_tensor *ts_nansum(ts_tensor *t, ts_dims dims, bool keepdim);
TS_API ts_tensor *ts_nanmean(ts_tensor *t, ts_dims dims, bool keepdim);
/* torch.diff: the n-th forward difference along dim, prepend / append (NULL: none) joined first;
 * bool: logical_xor */
TS_API ts_tensor *ts_diff(ts_tensor *t, int64_t n, int dim, ts_tensor *prepend, ts_tensor *append);
/* Tensor.repeat / torch.tile: t tiled reps[i] times along dim i (n >= t's ndim for repeat; tile
 * pads reps with ones in front) */
TS_API ts_tensor *ts_repeat(ts_tensor *t, const int64_t *reps, int n);
TS_API ts_tensor *ts_tile(ts_tensor *t, const int64_t *reps, int n);
/* greatest common divisor / least common multiple of integer tensors (non-negative) */
TS_API ts_tensor *ts_gcd(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_lcm(ts_tensor *a, ts_tensor *b);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_LOGIC_H */
