/* tessera/special.h — torch.special's remaining functions (issue 52): the normal distribution,
 * erfcx, entr, Bessel functions, the incomplete gamma functions, zeta, mvlgamma, frexp and the
 * orthogonal polynomials. Elementwise; integer and bool inputs compute in float32 as PyTorch's;
 * float16/bfloat16 compute in double and round. Each returns a new tensor, or NULL with the error
 * set (TS_ERR_ARG, TS_ERR_DTYPE, TS_ERR_DEVICE; TS_ERR_UNSUPPORTED "autograd is not implemented"
 * where PyTorch has no derivative and an input requires grad). */
#ifndef TESSERA_SPECIAL_H
#define TESSERA_SPECIAL_H

#include "tessera.h"

/* normal distribution: P(N(0,1) <= x), its log, its inverse (NaN outside [0, 1]) */
TS_API ts_tensor *ts_ndtr(ts_tensor *t);
TS_API ts_tensor *ts_log_ndtr(ts_tensor *t);
TS_API ts_tensor *ts_ndtri(ts_tensor *t);
TS_API ts_tensor *ts_erfcx(ts_tensor *t); /* e^(x^2) erfc(x) */
TS_API ts_tensor *ts_entr(ts_tensor *t);  /* -x log x, 0 at 0, -inf below */
/* Bessel functions of the first and second kind, orders 0 and 1 (Y: NaN below 0) */
TS_API ts_tensor *ts_bessel_j0(ts_tensor *t);
TS_API ts_tensor *ts_bessel_j1(ts_tensor *t);
TS_API ts_tensor *ts_bessel_y0(ts_tensor *t);
TS_API ts_tensor *ts_bessel_y1(ts_tensor *t);
/* modified Bessel functions of the second kind, plain and times e^x (no gradient: PyTorch's) */
TS_API ts_tensor *ts_modified_bessel_k0(ts_tensor *t);
TS_API ts_tensor *ts_modified_bessel_k1(ts_tensor *t);
TS_API ts_tensor *ts_scaled_modified_bessel_k0(ts_tensor *t);
TS_API ts_tensor *ts_scaled_modified_bessel_k1(ts_tensor *t);
TS_API ts_tensor *ts_spherical_bessel_j0(ts_tensor *t); /* sin(x) / x */
/* Airy's Ai(x) (NaN at +-inf, as PyTorch's; no gradient, as PyTorch's) */
TS_API ts_tensor *ts_airy_ai(ts_tensor *t);
/* Hurwitz zeta(x, q); the regularized lower / upper incomplete gamma P(a, x), Q(a, x) (the
 * gradient flows to q and x alone, as PyTorch's) */
TS_API ts_tensor *ts_zeta(ts_tensor *x, ts_tensor *q);
TS_API ts_tensor *ts_igamma(ts_tensor *a, ts_tensor *x);
TS_API ts_tensor *ts_igammac(ts_tensor *a, ts_tensor *x);
/* multivariate log-gamma of order p >= 1: sum_i lgamma(x - i/2) + p(p-1)/4 log(pi); every element
 * must exceed (p - 1) / 2 (TS_ERR_ARG otherwise, PyTorch's check) */
TS_API ts_tensor *ts_mvlgamma(ts_tensor *t, int64_t p);
/* orthogonal polynomials p_n(x) with n = trunc(n) (n a tensor broadcast with x; 0 for n < 0); no
 * gradient (PyTorch's) */
TS_API ts_tensor *ts_chebyshev_polynomial_t(ts_tensor *x, ts_tensor *n);
TS_API ts_tensor *ts_chebyshev_polynomial_u(ts_tensor *x, ts_tensor *n);
TS_API ts_tensor *ts_chebyshev_polynomial_v(ts_tensor *x, ts_tensor *n);
TS_API ts_tensor *ts_chebyshev_polynomial_w(ts_tensor *x, ts_tensor *n);
TS_API ts_tensor *ts_shifted_chebyshev_polynomial_t(ts_tensor *x, ts_tensor *n);
TS_API ts_tensor *ts_shifted_chebyshev_polynomial_u(ts_tensor *x, ts_tensor *n);
TS_API ts_tensor *ts_shifted_chebyshev_polynomial_v(ts_tensor *x, ts_tensor *n);
TS_API ts_tensor *ts_shifted_chebyshev_polynomial_w(ts_tensor *x, ts_tensor *n);
TS_API ts_tensor *ts_hermite_polynomial_h(ts_tensor *x, ts_tensor *n);
TS_API ts_tensor *ts_hermite_polynomial_he(ts_tensor *x, ts_tensor *n);
TS_API ts_tensor *ts_laguerre_polynomial_l(ts_tensor *x, ts_tensor *n);
TS_API ts_tensor *ts_legendre_polynomial_p(ts_tensor *x, ts_tensor *n);

#endif /* TESSERA_SPECIAL_H */
