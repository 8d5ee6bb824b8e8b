/* kernel_math_complex.h — the one definition of complex add, sub, mul, div and abs on parts,
 * shared by the CPU kernels (kern_complex.c) and CUDA (cuda_complex.cu). PyTorch's formulas
 * (c10/util/complex.h): the product is (ac - bd) + i (ad + bc) with each product rounded (no
 * scaling, so (1e30 + 1e30 i)^2 in float is nan + inf i, as PyTorch gives); the quotient is Smith's
 * algorithm as NumPy and c10 have it: b scaled by its larger part, and a zero divisor giving
 * a / |c| and b / |d| (inf or nan parts, never a silent zero). */
#ifndef TS_KERNEL_MATH_COMPLEX_H
#define TS_KERNEL_MATH_COMPLEX_H

#include "backend/kernel_math.h"

/* (a + i b) op (c + i d) in T into *yr, *yi; FABS is T's fabs */
#define TS_CX_DEFINE(T, SUF, FABS)                                                                 \
    static inline TS_HD void ts_cadd_##SUF(T a, T b, T c, T d, T *yr, T *yi) {                     \
        *yr = a + c;                                                                               \
        *yi = b + d;                                                                               \
    }                                                                                              \
    static inline TS_HD void ts_csub_##SUF(T a, T b, T c, T d, T *yr, T *yi) {                     \
        *yr = a - c;                                                                               \
        *yi = b - d;                                                                               \
    }                                                                                              \
    static inline TS_HD void ts_cmul_##SUF(T a, T b, T c, T d, T *yr, T *yi) {                     \
        *yr = a * c - b * d;                                                                       \
        *yi = a * d + b * c;                                                                       \
    }                                                                                              \
    static inline TS_HD void ts_cdiv_##SUF(T a, T b, T c, T d, T *yr, T *yi) {                     \
        const T ac = FABS(c), ad = FABS(d);                                                        \
        if (ac >= ad) {                                                                            \
            if (ac == (T)0 && ad == (T)0) { /* a complex inf or nan, as PyTorch */                 \
                *yr = a / ac;                                                                      \
                *yi = b / ad;                                                                      \
            } else {                                                                               \
                const T rat = d / c, scl = (T)1 / (c + d * rat);                                   \
                *yr = (a + b * rat) * scl;                                                         \
                *yi = (b - a * rat) * scl;                                                         \
            }                                                                                      \
        } else { /* |c| < |d|, or a nan part */                                                    \
            const T rat = c / d, scl = (T)1 / (d + c * rat);                                       \
            *yr = (a * rat + b) * scl;                                                             \
            *yi = (b * rat - a) * scl;                                                             \
        }                                                                                          \
    }

TS_CX_DEFINE(float, f32, fabsf)
TS_CX_DEFINE(double, f64, fabs)
#undef TS_CX_DEFINE

/* |a + i b|, PyTorch's abs of a complex (hypot: no overflow or underflow in the squares, and an
 * infinite part gives inf even beside a NaN), branch-free so that the CPU loops vectorise.
 * complex64: ts_hypot_f (the sum of the squares in double, one rounding of a value within 1e-16
 * of the exact one: the correctly rounded result but for near-ties). complex128: both parts
 * scaled by the power of two that puts the larger exponent's range at [1, 2) (exact: the factor
 * and its inverse are normal numbers, the exponent clamped to [1, 2045] so that a subnormal or a
 * near-overflow part stays in range), h = sqrt(fma(x, x, y y)) (~1.25 ulp at worst), corrected
 * by one Newton step on the residual computed exactly with fma, then the inverse factor: within
 * 0.5 ulp but for near-ties, as PyTorch's Sleef_hypotd_u05 (tests/test_complex_abs.c measures
 * it against hypotl). */
static inline TS_HD float ts_cabs_f32(float a, float b) { return ts_hypot_f(a, b); }
static inline TS_HD double ts_cabs_f64(double a, double b) {
    uint64_t ua, ub;
    memcpy(&ua, &a, sizeof ua), memcpy(&ub, &b, sizeof ub);
    const uint64_t ea = (ua >> 52) & 0x7ffu, eb = (ub >> 52) & 0x7ffu;
    uint64_t e = ea > eb ? ea : eb;
    e = e < 1u ? 1u : e > 2045u ? 2045u : e;
    const uint64_t us = (2046u - e) << 52, ui = e << 52; /* 2^(1023 - e) and 2^(e - 1023) */
    double s, inv;
    memcpy(&s, &us, sizeof s), memcpy(&inv, &ui, sizeof inv);
    const double sa = fabs(a) * s, sb = fabs(b) * s;
    const int ge = sa >= sb; /* x the larger (a NaN lands in x or y alike) */
    const double x = ge ? sa : sb, y = ge ? sb : sa;
    const double h = sqrt(fma(x, x, y * y));
    /* one Newton step on the exact residual x^2 + y^2 - h^2: each square split into its rounded
     * value and its exact low part by fma, xx - hh exact (Sterbenz: x >= y, so hh lies in
     * [xx, 2 xx] give or take a rounding) */
    const double xx = x * x, yy = y * y, hh = h * h;
    const double lo = (fma(x, x, -xx) + fma(y, y, -yy)) - fma(h, h, -hh);
    const double r = ((xx - hh) + yy) + lo;
    const double c = (h + r / (h + h)) * inv;
    return ts_bitsel_d((fabs(a) == INFINITY) | (fabs(b) == INFINITY), INFINITY, h == 0 ? 0.0 : c);
}

#endif /* TS_KERNEL_MATH_COMPLEX_H */
