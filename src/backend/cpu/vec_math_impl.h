/* vec_math_impl.h — vectorised float math over GCC vector types, included once per vector width
 * (and ISA: the includer sets the target). The includer defines
 *   TSV_F        float vector type (vector_size of a multiple of 16 bytes)
 *   TSV_I        int32 vector type with the same number of lanes
 *   TSV_NAME(x)  the name of function x for this width, e.g. x##_avx512
 * and gets static inline functions:
 *   TSV_NAME(tsv_exp)(x)  e^x with a relative error below 2 ulp over the normal range; 0 below
 *                         -87.3 (and for -inf), +inf above 88.72, NaN stays NaN.
 * The formula (Cephes' expf): n = round(x log2 e), r = x - n ln 2 in two parts (exact first
 * product), e^r by a degree-6 polynomial, then scaled by 2^n as two halves so that neither power
 * leaves the normal range. */
#include <string.h>

static inline TSV_F TSV_NAME(tsv_splat)(float v) { return (TSV_F){0} + v; }

static inline TSV_F TSV_NAME(tsv_exp)(TSV_F x) {
    const TSV_F lo = TSV_NAME(tsv_splat)(-87.33654475f), hi = TSV_NAME(tsv_splat)(88.72283905f);
    const TSV_I under = x<lo, over = x> hi;
    /* clamp without losing NaN: comparisons with NaN are false, so NaN passes through */
    TSV_F xc = (TSV_F)((under & (TSV_I)lo) | (~under & (TSV_I)x));
    xc = (TSV_F)((over & (TSV_I)hi) | (~over & (TSV_I)xc));
    const TSV_F magic = TSV_NAME(tsv_splat)(12582912.0f); /* 1.5 * 2^23: rounds to an integer */
    TSV_F t = xc * 1.44269504088896341f + magic;
    TSV_F n = t - magic;
    TSV_F r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    TSV_F p = TSV_NAME(tsv_splat)(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    TSV_I ni = __builtin_convertvector(n, TSV_I);
    TSV_I n1 = ni >> 1, n2 = ni - n1;
    TSV_F s1 = (TSV_F)((n1 + 127) << 23), s2 = (TSV_F)((n2 + 127) << 23);
    TSV_F y = p * s1 * s2;
    y = (TSV_F)(~under & (TSV_I)y); /* below: 0 */
    y = (TSV_F)((over & (TSV_I)TSV_NAME(tsv_splat)(__builtin_inff())) | (~over & (TSV_I)y));
    return y;
}
