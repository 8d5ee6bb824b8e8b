/* kernel_math_complex.h — the one definition of complex add, sub, mul and div on a pair of parts,
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

#endif /* TS_KERNEL_MATH_COMPLEX_H */
