/* fft_lines_vec.h — the FFT engine over several lines at once (fft_lines_vec.c): lane b of every
 * vector holds line b, so each butterfly of fft_engine_impl.h runs on a whole group of lines with
 * the same arithmetic (the same bits) as one line in fft_engine.c. */
#ifndef TS_FFT_LINES_VEC_H
#define TS_FFT_LINES_VEC_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/cpu/fft_plan.h"

/* Lines a group holds at the ISA in use (float or double); 0: none (the one-line engine). */
int tsi_fft_vec_lanes(bool dbl);

/* g <= lanes lines of the transform kind (C2C of any plan; R2C and C2R of a REAL_EVEN plan) of
 * length n: line b's element j read at src[j si + b ils] (its imaginary part one further; a real
 * line's element j at src[j si + b ils]), written likewise to dst with so / ols, times scale. buf
 * holds lanes * n complex elements and work lanes * p->work, both 64-byte aligned. */
void tsi_fft_vec_group_f32(const tsi_fft_plan *p, ts_fft_kind kind, bool fwd, int64_t n,
                           const float *src, int64_t si, int64_t ils, float *dst, int64_t so,
                           int64_t ols, int64_t g, float scale, void *buf, void *work);
void tsi_fft_vec_group_f64(const tsi_fft_plan *p, ts_fft_kind kind, bool fwd, int64_t n,
                           const double *src, int64_t si, int64_t ils, double *dst, int64_t so,
                           int64_t ols, int64_t g, double scale, void *buf, void *work);

#endif /* TS_FFT_LINES_VEC_H */
