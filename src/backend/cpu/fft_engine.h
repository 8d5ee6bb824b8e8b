/* fft_engine.h — the CPU FFT transforms over a plan (fft_plan.h), in float and in double: the
 * arithmetic in that precision, the twiddles rounded to it from double. */
#ifndef TS_FFT_ENGINE_H
#define TS_FFT_ENGINE_H

#include "backend/cpu/fft_plan.h"

/* A complex transform of c[0..n) in place, unscaled: c[k] = sum_j c[j] e^(-+2 pi i j k / n), minus
 * when fwd. work: plan->work elements. Not for REAL_EVEN plans. */
void tsi_fft_run_f32(const tsi_fft_plan *p, tsi_cf32 *c, tsi_cf32 *work, bool fwd);
void tsi_fft_run_f64(const tsi_fft_plan *p, tsi_cf64 *c, tsi_cf64 *work, bool fwd);

/* Real transforms of even length n = 2h over a REAL_EVEN plan, unscaled, in place in c[0..h]:
 * r2c: in, x packed in c[0..h) as (x_2j, x_2j+1); out, X_0 .. X_h (forward).
 * c2r: in, X_0 .. X_h (the imaginary parts of X_0 and X_h ignored); out, x = the inverse
 * transform of X's Hermitian extension to n, packed in c[0..h) as above. work: plan->work. */
void tsi_fft_r2c_even_f32(const tsi_fft_plan *p, tsi_cf32 *c, tsi_cf32 *work);
void tsi_fft_r2c_even_f64(const tsi_fft_plan *p, tsi_cf64 *c, tsi_cf64 *work);
void tsi_fft_c2r_even_f32(const tsi_fft_plan *p, tsi_cf32 *c, tsi_cf32 *work);
void tsi_fft_c2r_even_f64(const tsi_fft_plan *p, tsi_cf64 *c, tsi_cf64 *work);

#endif /* TS_FFT_ENGINE_H */
