/* tessera/elementwise.h — elementwise ops: unary functions, binary arithmetic and comparisons with
 * broadcasting, their forms with a number, in-place variants, where / clamp / masked_fill.
 * Included by tessera.h. */
#ifndef TESSERA_ELEMENTWISE_H
#define TESSERA_ELEMENTWISE_H

#include "tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

TS_API ts_tensor *ts_neg(ts_tensor *t);
TS_API ts_tensor *ts_abs(ts_tensor *t);
TS_API ts_tensor *ts_exp(ts_tensor *t);
TS_API ts_tensor *ts_log(ts_tensor *t);
TS_API ts_tensor *ts_log1p(ts_tensor *t);
TS_API ts_tensor *ts_sqrt(ts_tensor *t);
TS_API ts_tensor *ts_rsqrt(ts_tensor *t);
TS_API ts_tensor *ts_sin(ts_tensor *t);
TS_API ts_tensor *ts_cos(ts_tensor *t);
TS_API ts_tensor *ts_tan(ts_tensor *t);
TS_API ts_tensor *ts_asin(ts_tensor *t);
TS_API ts_tensor *ts_acos(ts_tensor *t);
TS_API ts_tensor *ts_atan(ts_tensor *t);
TS_API ts_tensor *ts_sinh(ts_tensor *t);
TS_API ts_tensor *ts_cosh(ts_tensor *t);
TS_API ts_tensor *ts_asinh(ts_tensor *t);
TS_API ts_tensor *ts_acosh(ts_tensor *t);
TS_API ts_tensor *ts_atanh(ts_tensor *t);
TS_API ts_tensor *ts_erf(ts_tensor *t);
TS_API ts_tensor *ts_tanh(ts_tensor *t);
TS_API ts_tensor *ts_sigmoid(ts_tensor *t);
TS_API ts_tensor *ts_relu(ts_tensor *t);
TS_API ts_tensor *ts_gelu(ts_tensor *t); /* exact (erf) form, PyTorch's default */
TS_API ts_tensor *ts_silu(ts_tensor *t);
TS_API ts_tensor *ts_softplus(ts_tensor *t); /* beta 1, threshold 20 */
TS_API ts_tensor *ts_sign(ts_tensor *t);
TS_API ts_tensor *ts_floor(ts_tensor *t);
TS_API ts_tensor *ts_ceil(ts_tensor *t);
TS_API ts_tensor *ts_round(ts_tensor *t); /* half to even */
/* torch.round(decimals=d): half to even of x * 10^d, divided by 10^d (d < 0: of x / 10^-d, times
 * 10^-d), float dtypes only (d = 0: ts_round, integers too); gradient zero */
TS_API ts_tensor *ts_round_decimals(ts_tensor *t, int64_t decimals);
TS_API ts_tensor *ts_reciprocal(ts_tensor *t);
TS_API ts_tensor *ts_square(ts_tensor *t);
TS_API ts_tensor *ts_logical_not(ts_tensor *t);
/* in place: return t (retained into the scope) or NULL */
TS_API ts_tensor *ts_neg_(ts_tensor *t);
TS_API ts_tensor *ts_abs_(ts_tensor *t);
TS_API ts_tensor *ts_exp_(ts_tensor *t);
TS_API ts_tensor *ts_log_(ts_tensor *t);
TS_API ts_tensor *ts_sqrt_(ts_tensor *t);
TS_API ts_tensor *ts_sigmoid_(ts_tensor *t);
TS_API ts_tensor *ts_relu_(ts_tensor *t);
TS_API ts_tensor *ts_tanh_(ts_tensor *t);
TS_API ts_tensor *ts_silu_(ts_tensor *t);
TS_API ts_tensor *ts_zero_(ts_tensor *t);
TS_API ts_tensor *ts_fill_(ts_tensor *t, double v);

/* special elementwise functions (issue 52), PyTorch's semantics: integer and bool inputs give
 * float32 (trunc / fix keep integers; frac refuses them; nan_to_num copies them) */
TS_API ts_tensor *ts_expm1(ts_tensor *t);
TS_API ts_tensor *ts_exp2(ts_tensor *t);
TS_API ts_tensor *ts_log2(ts_tensor *t);
TS_API ts_tensor *ts_log10(ts_tensor *t);
TS_API ts_tensor *ts_erfc(ts_tensor *t);
TS_API ts_tensor *ts_erfinv(ts_tensor *t);
TS_API ts_tensor *ts_lgamma(ts_tensor *t);
TS_API ts_tensor *ts_digamma(ts_tensor *t);          /* psi(0) = -inf, negative integers NaN */
TS_API ts_tensor *ts_polygamma(int n, ts_tensor *t); /* n >= 0; n = 0 is digamma */
TS_API ts_tensor *ts_i0(ts_tensor *t);   /* modified Bessel functions of the first kind */
TS_API ts_tensor *ts_i0e(ts_tensor *t);  /* e^-|x| i0(x) (torch.special.i0e) */
TS_API ts_tensor *ts_i1(ts_tensor *t);   /* torch.special.i1 */
TS_API ts_tensor *ts_i1e(ts_tensor *t);  /* e^-|x| i1(x) */
TS_API ts_tensor *ts_sinc(ts_tensor *t); /* sin(pi x) / (pi x), 1 at 0 */
TS_API ts_tensor *ts_logit(ts_tensor *t, double eps); /* eps NAN or < 0: no clamp */
/* NaN -> nan, +inf -> posinf, -inf -> neginf; posinf / neginf NAN: the dtype's largest / lowest
 * finite value */
TS_API ts_tensor *ts_nan_to_num(ts_tensor *t, double nan, double posinf, double neginf);
TS_API ts_tensor *ts_trunc(ts_tensor *t);
TS_API ts_tensor *ts_fix(ts_tensor *t);     /* trunc */
TS_API ts_tensor *ts_frac(ts_tensor *t);    /* x - trunc(x) */
TS_API ts_tensor *ts_sgn(ts_tensor *t);     /* sign (real tensors) */
TS_API ts_tensor *ts_signbit(ts_tensor *t); /* bool: the sign bit (-0.0 and -NaN set it) */
TS_API ts_tensor *ts_deg2rad(ts_tensor *t);
TS_API ts_tensor *ts_rad2deg(ts_tensor *t);
TS_API ts_tensor *ts_xlogy(ts_tensor *a,
                           ts_tensor *b); /* a log(b), 0 where a == 0 unless b is NaN */
TS_API ts_tensor *ts_xlog1py(ts_tensor *a, ts_tensor *b); /* a log1p(b), torch.special.xlog1py */
TS_API ts_tensor *ts_hypot(ts_tensor *a, ts_tensor *b);   /* float dtypes only */
TS_API ts_tensor *ts_copysign(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_atan2(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_nextafter(ts_tensor *a, ts_tensor *b);   /* float dtypes; gradient (g, 0) */
TS_API ts_tensor *ts_ldexp(ts_tensor *a, ts_tensor *b);       /* a * 2^b */
TS_API ts_tensor *ts_float_power(ts_tensor *a, ts_tensor *b); /* pow in float64 */
TS_API ts_tensor *ts_logaddexp(ts_tensor *a, ts_tensor *b);   /* float dtypes only */
TS_API ts_tensor *ts_logaddexp2(ts_tensor *a, ts_tensor *b);  /* float dtypes only */

/* binary, with broadcasting and PyTorch's type promotion */
TS_API ts_tensor *ts_add(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_sub(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_mul(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_div(ts_tensor *a, ts_tensor *b); /* true division */
TS_API ts_tensor *ts_pow(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_maximum(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_minimum(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_fmod(ts_tensor *a, ts_tensor *b);
/* torch.floor_divide (a // b, rounded down; no gradient) and torch.remainder (a - b * floor(a / b):
 * the divisor's sign; gradient -g floor(a / b) for b). Integers: x // 0 and x % 0 give 0 where
 * PyTorch raises. */
TS_API ts_tensor *ts_floor_divide(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_remainder(ts_tensor *a, ts_tensor *b);
/* torch.div(a, b, rounding_mode=None | 'trunc' | 'floor'): the rounded quotient in the result
 * dtype (integers stay integers; an integer zero divisor is refused, as PyTorch's
 * ZeroDivisionError); the rounded forms record no gradient (PyTorch's is zero). */
typedef enum ts_rounding_mode {
    TS_ROUNDING_NONE = 0,
    TS_ROUNDING_TRUNC,
    TS_ROUNDING_FLOOR
} ts_rounding_mode;
TS_API ts_tensor *ts_div_rounding(ts_tensor *a, ts_tensor *b, ts_rounding_mode mode);
/* torch.bitwise_*: integer and bool tensors (the shifts: integers), broadcasting and promoting
 * like the arithmetic ops; shifts by a negative amount or >= the width give PyTorch's results
 * (<<: 0, >>: the sign). bitwise_not: logical_not on bool. */
TS_API ts_tensor *ts_bitwise_and(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_or(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_xor(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_left_shift(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_right_shift(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_and_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_or_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_xor_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_left_shift_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_right_shift_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_bitwise_not(ts_tensor *t);
TS_API ts_tensor *ts_eq(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_ne(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_lt(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_le(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_gt(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_ge(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_logical_and(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_logical_or(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_add_alpha(ts_tensor *a, ts_tensor *b, double alpha); /* a + alpha*b */
/* scalar forms: the scalar is a "weak" Python number: an integral value keeps integer tensors
 * integer, a fractional one promotes them to the default float dtype; float tensors keep theirs. */
TS_API ts_tensor *ts_add_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_sub_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_rsub_scalar(ts_tensor *a, double s); /* s - a */
TS_API ts_tensor *ts_mul_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_div_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_pow_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_rpow_scalar(ts_tensor *a, double s); /* s ** a */
TS_API ts_tensor *ts_maximum_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_minimum_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_fmod_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_eq_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_ne_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_lt_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_le_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_gt_scalar(ts_tensor *a, double s);
TS_API ts_tensor *ts_ge_scalar(ts_tensor *a, double s);
/* in place: the result must keep a's dtype and shape (PyTorch's rules) */
TS_API ts_tensor *ts_add_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_sub_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_mul_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_div_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_pow_(ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_add_scalar_(ts_tensor *a, double s);
TS_API ts_tensor *ts_sub_scalar_(ts_tensor *a, double s);
TS_API ts_tensor *ts_mul_scalar_(ts_tensor *a, double s);
TS_API ts_tensor *ts_div_scalar_(ts_tensor *a, double s);
TS_API ts_tensor *ts_pow_scalar_(ts_tensor *a, double s);
TS_API ts_tensor *ts_clamp_(ts_tensor *t, double min, double max);

TS_API ts_tensor *ts_where(ts_tensor *cond, ts_tensor *a, ts_tensor *b);
TS_API ts_tensor *ts_clamp(ts_tensor *t, double min, double max); /* NAN = no bound on that side */
TS_API ts_tensor *ts_clamp_min(ts_tensor *t, double min);
TS_API ts_tensor *ts_clamp_max(ts_tensor *t, double max);
/* clamp with tensor bounds (either NULL, not both), broadcasting and promoting: minimum(maximum(t,
 * min), max), NaN propagating; differentiable in t, min and max with PyTorch 2.x's gradients (a
 * tie splits the gradient, as maximum / minimum) */
TS_API ts_tensor *ts_clamp_tensor(ts_tensor *t, ts_tensor *min, ts_tensor *max);
TS_API ts_tensor *ts_clamp_tensor_(ts_tensor *t, ts_tensor *min, ts_tensor *max);
TS_API ts_tensor *ts_masked_fill(ts_tensor *t, ts_tensor *mask, double v);
TS_API ts_tensor *ts_masked_fill_(ts_tensor *t, ts_tensor *mask, double v);

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_ELEMENTWISE_H */
