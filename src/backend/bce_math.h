/* bce_math.h — binary_cross_entropy's loss of one element, defined once for the CPU and CUDA
 * kernels (host and device): PyTorch's formula, each log clamped at -100 so that an input of
 * exactly 0 or 1 gives a finite loss,
 *     loss = (t - 1) max(log1p(-x), -100) - t max(log x, -100),
 * and the domain test PyTorch's kernel makes of every element: x and t in [0, 1] (NaN is not). */
#ifndef TS_BACKEND_BCE_MATH_H
#define TS_BACKEND_BCE_MATH_H

#include <math.h>

#include "backend/kernel_math.h"

/* the bits of backend.h's bce result: an input, a target outside [0, 1] */
#define TS_BCE_BAD_INPUT  1
#define TS_BCE_BAD_TARGET 2

/* max(v, -100) as PyTorch's std::max and ts_clamp_min (a NaN stays NaN); a compare and a select,
 * which vectorise where fmaxf is a call */
static inline TS_HD float ts_bce_clamp_f(float v) { return v < -100.0f ? -100.0f : v; }
static inline TS_HD double ts_bce_clamp_d(double v) { return v < -100.0 ? -100.0 : v; }

/* the loss from the two logs, lx = log x and lq = log1p(-x) (a vectorised log may give lx) */
static inline TS_HD float ts_bce_from_logs_f(float t, float lx, float lq) {
    return (t - 1.0f) * ts_bce_clamp_f(lq) - t * ts_bce_clamp_f(lx);
}
static inline TS_HD double ts_bce_from_logs_d(double t, double lx, double lq) {
    return (t - 1.0) * ts_bce_clamp_d(lq) - t * ts_bce_clamp_d(lx);
}
/* the same in a half type's steps, as PyTorch's kernel computes over Half / BFloat16: each log,
 * t - 1, each product and the difference rounded to the type (r: float -> the type -> float) */
static inline TS_HD float ts_bce_from_logs_rounded(float t, float lx, float lq, float (*r)(float)) {
    return r(r(r(t - 1.0f) * ts_bce_clamp_f(r(lq))) - r(t * ts_bce_clamp_f(r(lx))));
}
static inline TS_HD float ts_round_f16(float v) { return ts_f16_to_f32(ts_f32_to_f16(v)); }
static inline TS_HD float ts_round_bf16(float v) { return ts_bf16_to_f32(ts_f32_to_bf16(v)); }
static inline TS_HD float ts_bce_f(float x, float t) {
    return ts_bce_from_logs_f(t, logf(x), log1pf(-x));
}
static inline TS_HD double ts_bce_d(double x, double t) {
    return ts_bce_from_logs_d(t, log(x), log1p(-x));
}

/* TS_BCE_BAD_INPUT / TS_BCE_BAD_TARGET for a pair outside the domain, 0 inside; an int of
 * comparisons, no branch, so that a loop of it still vectorises */
static inline TS_HD int ts_bce_bad_f(float x, float t) {
    return (int)!(x >= 0.0f && x <= 1.0f) | (int)!(t >= 0.0f && t <= 1.0f) << 1;
}
static inline TS_HD int ts_bce_bad_d(double x, double t) {
    return (int)!(x >= 0.0 && x <= 1.0) | (int)!(t >= 0.0 && t <= 1.0) << 1;
}
#endif
