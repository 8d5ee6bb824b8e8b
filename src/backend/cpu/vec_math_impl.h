/* vec_math_impl.h — vectorised float and double math over GCC vector types, included once per
 * vector width (and ISA: the includer sets the target). The includer defines
 *   TSV_F        float vector type (vector_size of a multiple of 16 bytes)
 *   TSV_I        int32 vector type with the same number of lanes
 *   TSV_NAME(x)  the name of function x for this width, e.g. x##_avx512
 *   TSV_FMA(a, b, c)  optionally: a b + c rounded once on TSV_F (else fmaf lane by lane)
 * and, for the double functions, also
 *   TSV_D, TSV_L double and int64 vector types of the same size in bytes
 * and gets static inline functions. Float ones (relative error against the exact value, in units in
 * the last place of float, over the normal range; tests/test_vec_math.c measures them against libm
 * in double):
 *   tsv_exp(x)      e^x, < 2 ulp; 0 below log FLT_MIN = -87.3365 (and for -inf), +inf above
 *                   log FLT_MAX = 88.7228
 *   tsv_log(x)      log x, < 2 ulp; subnormals included, log 0 = -inf, log(x < 0) = NaN
 *   tsv_tanh(x)     < 3 ulp
 *   tsv_erf(x)      < 1.04 ulp (every float of [2^-30, 4) checked: 8 above 1 ulp, just past 1,
 *                   where 1 - erfc takes over); absolute error below 2^-149 among subnormals
 *   tsv_onep_erf(x) 1 + erf(x): erfc(-x) for x < 0, 2 - erfc(x) above, so that gelu's left tail
 *                   keeps its digits (< 5 ulp over [-4, 4]; no cancellation anywhere)
 *   tsv_sigmoid, tsv_silu, tsv_gelu (erf form) and the backward formulas of gelu and silu: the
 *   formulas of kernel_math.h (ts_sigmoid_f, ts_silu_f, ts_gelu_f, ts_gelu_bwd_f, ts_silu_bwd_f)
 *   over the functions above
 * Double ones (in double ulp): tsv_exp_d (< 2 ulp), tsv_log_d (< 2 ulp), tsv_cos_d (< 2 ulp for
 * |x| < 8, absolute error below 1e-26 beyond), and tsv_box_muller_d: ts_philox_box_muller's formula
 * (philox.h).
 * NaN stays NaN everywhere. Only +, -, *, /, comparisons and explicit fused multiply-adds
 * (tsv_fma: a b + c rounded once, from the includer's TSV_FMA, an instruction or an exact
 * emulation, else fmaf per lane) in the Horner steps and range reductions of the float functions:
 * every FMA is correctly rounded, and the compiler contracts nothing else in ISO C mode, so every
 * width gives the same bits for the same input, lane by lane. (kern_sdpa.c asks for contraction
 * and leaves its multiply-adds to it.) The double functions use no FMA, but for the _fd ones of
 * lgamma's and erfinv's fast paths (fused where the ISA has it), whose results are used only where
 * they round to the float the exact formula gives (vec_kernels_impl.h's filter).
 * Sources: exp, log and tanh are Cephes' expf, logf and tanhf; erf's polynomial and the double ones
 * were fitted (Chebyshev, mpmath) for this file, erfc's (relative minimax by Lawson's iteration in
 * mpmath) too. */
#include <string.h>

static inline TSV_F TSV_NAME(tsv_splat)(float v) { return (TSV_F){0} + v; }
/* lanes of a where m is set, of b elsewhere */
static inline TSV_F TSV_NAME(tsv_sel)(TSV_I m, TSV_F a, TSV_F b) {
    return (TSV_F)((m & (TSV_I)a) | (~m & (TSV_I)b));
}
static inline TSV_F TSV_NAME(tsv_abs)(TSV_F x) { return (TSV_F)((TSV_I)x & 0x7fffffff); }
/* |a| with the sign of s */
static inline TSV_F TSV_NAME(tsv_copysign)(TSV_F a, TSV_F s) {
    return (TSV_F)(((TSV_I)a & 0x7fffffff) | ((TSV_I)s & (-0x7fffffff - 1)));
}
/* a * b + c rounded once: the includer's TSV_FMA (the ISA's instruction, or an exact emulation),
 * else fmaf lane by lane. Both are exact, so every width gives the same bits. */
static inline TSV_F TSV_NAME(tsv_fma)(TSV_F a, TSV_F b, TSV_F c) {
#ifdef TSV_FMA
    return TSV_FMA(a, b, c);
#else
    TSV_F r;
    for (int l = 0; l < (int)(sizeof(TSV_F) / sizeof(float)); l++)
        r[l] = __builtin_fmaf(a[l], b[l], c[l]);
    return r;
#endif
}
/* the same with c a constant, for Horner's steps */
static inline TSV_F TSV_NAME(tsv_fmas)(TSV_F a, TSV_F b, float c) {
    return TSV_NAME(tsv_fma)(a, b, TSV_NAME(tsv_splat)(c));
}

/* Cephes' expf after the clamp: e^(x - l) = 2^n e^r, r = x - n log 2 - l (log 2 in two parts, n
 * times the first, of 9 bits, exact; l a small low part of the argument, 0 for exp itself), e^r =
 * 1 + r + r^2 P(r), and 2^n added to the exponent bits of e^r: exact for the normal results
 * (n >= -126 comes with r >= 0 from the clamp at log FLT_MIN, n = 128 with r < 0). The caller
 * masks what lies outside [lo, hi] of tsv_exp. */
static inline TSV_F TSV_NAME(tsv_exp_core)(TSV_F xc, TSV_F l) {
    const TSV_F magic = TSV_NAME(tsv_splat)(12582912.0f); /* 1.5 * 2^23: rounds to an integer */
    const TSV_F t = TSV_NAME(tsv_fma)(xc, TSV_NAME(tsv_splat)(1.44269504088896341f), magic);
    const TSV_F n = t - magic;
    TSV_F r = TSV_NAME(tsv_fma)(n, TSV_NAME(tsv_splat)(-0.693359375f), xc);
    r = TSV_NAME(tsv_fma)(n, TSV_NAME(tsv_splat)(2.12194440e-4f), r) - l;
    TSV_F p = TSV_NAME(tsv_splat)(1.9875691500e-4f);
    p = TSV_NAME(tsv_fmas)(p, r, 1.3981999507e-3f);
    p = TSV_NAME(tsv_fmas)(p, r, 8.3334519073e-3f);
    p = TSV_NAME(tsv_fmas)(p, r, 4.1665795894e-2f);
    p = TSV_NAME(tsv_fmas)(p, r, 1.6666665459e-1f);
    p = TSV_NAME(tsv_fmas)(p, r, 5.0000001201e-1f);
    p = TSV_NAME(tsv_fma)(p, r * r, r) + 1.0f;
    const TSV_I ni = (TSV_I)t - (TSV_I)magic; /* n from the bits of t */
    return (TSV_F)((TSV_I)p + (ni << 23));
}
/* log FLT_MIN rounded up to float: results below FLT_MIN are 0 */
#define TSV_EXP_LO (-87.3365402f)
static inline TSV_F TSV_NAME(tsv_exp)(TSV_F x) {
    /* hi: log FLT_MAX rounded down (above, the result is inf) */
    const TSV_F lo = TSV_NAME(tsv_splat)(TSV_EXP_LO), hi = TSV_NAME(tsv_splat)(88.7228317f);
    const TSV_I under = x<lo, over = x> hi;
    /* clamp without losing NaN: comparisons with NaN are false, so NaN passes through */
    TSV_F xc = TSV_NAME(tsv_sel)(under, lo, x);
    xc = TSV_NAME(tsv_sel)(over, hi, xc);
    TSV_F y = TSV_NAME(tsv_exp_core)(xc, TSV_NAME(tsv_splat)(0.0f));
    y = (TSV_F)(~under & (TSV_I)y); /* below: 0 */
    return TSV_NAME(tsv_sel)(over, TSV_NAME(tsv_splat)(__builtin_inff()), y);
}

/* tsv_exp where x <= 0 or NaN (softmax's x - max), the same bits: no overflow side to clamp */
static inline TSV_F TSV_NAME(tsv_exp_le0)(TSV_F x) {
    const TSV_F lo = TSV_NAME(tsv_splat)(TSV_EXP_LO);
    const TSV_I under = x < lo;
    const TSV_F y =
        TSV_NAME(tsv_exp_core)(TSV_NAME(tsv_sel)(under, lo, x), TSV_NAME(tsv_splat)(0.0f));
    return (TSV_F)(~under & (TSV_I)y);
}

/* Cephes' logf: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) = f - f^2/2 + f^3 P(f) for
 * f = m - 1 (exact), plus e log 2 in two parts. */
static inline TSV_F TSV_NAME(tsv_log)(TSV_F x) {
    const TSV_I sub = x < 1.17549435e-38f; /* subnormal (and 0, negative: fixed below) */
    const TSV_F xs = TSV_NAME(tsv_sel)(sub, x * 8388608.0f, x);
    const TSV_I bits = (TSV_I)xs;
    TSV_I e = ((bits >> 23) & 0xff) - 126 - (sub & 23);
    TSV_F m = (TSV_F)((bits & 0x007fffff) | 0x3f000000); /* [0.5, 1) */
    const TSV_I small = m < 0.707106781186547524f;
    e += small; /* -1 where small */
    const TSV_F f = TSV_NAME(tsv_sel)(small, m + m, m) - 1.0f;
    const TSV_F fe = __builtin_convertvector(e, TSV_F);
    const TSV_F z = f * f;
    TSV_F p = TSV_NAME(tsv_splat)(7.0376836292e-2f);
    p = TSV_NAME(tsv_fmas)(p, f, -1.1514610310e-1f);
    p = TSV_NAME(tsv_fmas)(p, f, 1.1676998740e-1f);
    p = TSV_NAME(tsv_fmas)(p, f, -1.2420140846e-1f);
    p = TSV_NAME(tsv_fmas)(p, f, 1.4249322787e-1f);
    p = TSV_NAME(tsv_fmas)(p, f, -1.6668057665e-1f);
    p = TSV_NAME(tsv_fmas)(p, f, 2.0000714765e-1f);
    p = TSV_NAME(tsv_fmas)(p, f, -2.4999993993e-1f);
    p = TSV_NAME(tsv_fmas)(p, f, 3.3333331174e-1f);
    TSV_F y = p * f * z;
    y = TSV_NAME(tsv_fma)(fe, TSV_NAME(tsv_splat)(-2.12194440e-4f), y);
    y = TSV_NAME(tsv_fma)(z, TSV_NAME(tsv_splat)(-0.5f), y);
    TSV_F r = f + y;
    r = TSV_NAME(tsv_fma)(fe, TSV_NAME(tsv_splat)(0.693359375f), r);
    const TSV_F inf = TSV_NAME(tsv_splat)(__builtin_inff());
    r = TSV_NAME(tsv_sel)(x == inf, inf, r);
    r = TSV_NAME(tsv_sel)(x == 0.0f, -inf, r);
    r = TSV_NAME(tsv_sel)(x < 0.0f, TSV_NAME(tsv_splat)(__builtin_nanf("")), r);
    return TSV_NAME(tsv_sel)(x != x, x, r);
}

/* Cephes' tanhf: an odd polynomial below 0.625, 1 - 2 / (e^2|x| + 1) above. */
static inline TSV_F TSV_NAME(tsv_tanh)(TSV_F x) {
    const TSV_F a = TSV_NAME(tsv_abs)(x);
    const TSV_F big = 1.0f - 2.0f / (TSV_NAME(tsv_exp)(a + a) + 1.0f);
    const TSV_F z = x * x;
    TSV_F p = TSV_NAME(tsv_splat)(-5.70498872745e-3f);
    p = TSV_NAME(tsv_fmas)(p, z, 2.06390887954e-2f);
    p = TSV_NAME(tsv_fmas)(p, z, -5.37397155531e-2f);
    p = TSV_NAME(tsv_fmas)(p, z, 1.33314422036e-1f);
    p = TSV_NAME(tsv_fmas)(p, z, -3.33332819422e-1f);
    const TSV_F small = TSV_NAME(tsv_fma)(p * z, x, x);
    return TSV_NAME(tsv_sel)(a >= 0.625f, TSV_NAME(tsv_copysign)(big, x), small);
}

/* erfc(a) for a = |x| >= 0 in one piece: e^-a^2 w P(q) with w = 1 / (a + 2) and q = (a - 2) / (a +
 * 2) in [-1, 1), P of degree 9 fitted to (a + 2) e^(a^2) erfc(a) for a in [0, 9.35] (relative
 * minimax, mpmath; beyond, e^-a^2 is below FLT_MIN and erfc is 0). One division and no second
 * piece: erf adds x P(x^2) below 1, where 1 - erfc would lose erf's relative digits near 0. q
 * computed as (a + a) w - 1 (one fma) rather than 1 - 4 w or (a - 2) w keeps w's rounding from
 * moving the argument by up to (a + 2) ulps (bench/results/vec-math.md). */
/* erf(x) / x - 1 for |x| < 1 (the leading coefficient less 1, exactly: 1.128379166f and 1 are
 * within a factor of 2), so that erf is x + x P rounded once, as fdlibm's erff forms it */
static inline TSV_F TSV_NAME(tsv_erf_poly)(TSV_F x) {
    const TSV_F z = x * x;
    TSV_F p = TSV_NAME(tsv_splat)(7.8069031588e-05f);
    p = TSV_NAME(tsv_fmas)(p, z, -7.9978530994e-04f);
    p = TSV_NAME(tsv_fmas)(p, z, 5.1871621981e-03f);
    p = TSV_NAME(tsv_fmas)(p, z, -2.6853347197e-02f);
    p = TSV_NAME(tsv_fmas)(p, z, 1.1283578724e-01f);
    p = TSV_NAME(tsv_fmas)(p, z, -3.7612625957e-01f);
    return TSV_NAME(tsv_fmas)(p, z, 1.2837916613e-01f);
}
/* e^-a^2 for a >= 0 (or NaN) with a^2 = h + l exactly (l = fma(a, a, -h)), l taken off the reduced
 * argument, so that a^2's rounding, which would cost a^2 / 2 ulps, costs none. Lanes where *under
 * is set (e^-a^2 below FLT_MIN, a = inf included) hold garbage: the callers mask them (after
 * erfc's product, where inf's 0 w would make NaN). */
static inline TSV_F TSV_NAME(tsv_exp_mx2)(TSV_F a, TSV_I *under) {
    const TSV_F h = a * a, l = TSV_NAME(tsv_fma)(a, a, -h), lo = TSV_NAME(tsv_splat)(TSV_EXP_LO);
    *under = -h < lo;
    return TSV_NAME(tsv_exp_core)(TSV_NAME(tsv_sel)(*under, lo, -h), l);
}
/* erfc(a) for a >= 0 from e = tsv_exp_mx2(a, &under) */
static inline TSV_F TSV_NAME(tsv_erfc_e)(TSV_F a, TSV_F e, TSV_I under) {
    const TSV_F w = 1.0f / (a + 2.0f), q = TSV_NAME(tsv_fmas)(a + a, w, -1.0f);
    TSV_F p = TSV_NAME(tsv_splat)(-5.589686848e-5f);
    p = TSV_NAME(tsv_fmas)(p, q, -5.443167572e-4f);
    p = TSV_NAME(tsv_fmas)(p, q, -7.243650170e-4f);
    p = TSV_NAME(tsv_fmas)(p, q, 3.055178478e-3f);
    p = TSV_NAME(tsv_fmas)(p, q, 6.436992217e-3f);
    p = TSV_NAME(tsv_fmas)(p, q, -2.150599060e-2f);
    p = TSV_NAME(tsv_fmas)(p, q, -3.643642400e-2f);
    p = TSV_NAME(tsv_fmas)(p, q, 2.794717929e-1f);
    p = TSV_NAME(tsv_fmas)(p, q, -6.871608986e-1f);
    p = TSV_NAME(tsv_fmas)(p, q, 1.021582710f);
    return (TSV_F)(~under & (TSV_I)(e * w * p));
}
static inline TSV_F TSV_NAME(tsv_erfc_abs)(TSV_F a) {
    TSV_I under;
    const TSV_F e = TSV_NAME(tsv_exp_mx2)(a, &under);
    return TSV_NAME(tsv_erfc_e)(a, e, under);
}
static inline TSV_F TSV_NAME(tsv_erf)(TSV_F x) {
    const TSV_F a = TSV_NAME(tsv_abs)(x);
    const TSV_F big = TSV_NAME(tsv_copysign)(1.0f - TSV_NAME(tsv_erfc_abs)(a), x);
    return TSV_NAME(tsv_sel)(a < 1.0f, TSV_NAME(tsv_fma)(x, TSV_NAME(tsv_erf_poly)(x), x), big);
}
/* 1 + erf(x) from c = erfc(|x|): 2 - c for x >= 0, c below (no cancellation: the left tail keeps
 * its relative digits) */
static inline TSV_F TSV_NAME(tsv_onep_erf_c)(TSV_F x, TSV_F c) {
    return TSV_NAME(tsv_sel)(x >= 0.0f, 2.0f - c, c);
}
static inline TSV_F TSV_NAME(tsv_onep_erf)(TSV_F x) {
    return TSV_NAME(tsv_onep_erf_c)(x, TSV_NAME(tsv_erfc_abs)(TSV_NAME(tsv_abs)(x)));
}

/* ts_sigmoid_f's formula: 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below (one division) */
static inline TSV_F TSV_NAME(tsv_sigmoid)(TSV_F x) {
    const TSV_F e = TSV_NAME(tsv_exp)(-TSV_NAME(tsv_abs)(x)), d = 1.0f + e;
    return TSV_NAME(tsv_sel)(x >= 0.0f, TSV_NAME(tsv_splat)(1.0f), e) / d;
}
static inline TSV_F TSV_NAME(tsv_silu)(TSV_F x) { return x * TSV_NAME(tsv_sigmoid)(x); }
/* g (s (1 + x (1 - s))): silu'(x) first, so no intermediate is subnormal where s and the result
 * are normal (ts_silu_bwd_f's order and reasoning) */
static inline TSV_F TSV_NAME(tsv_silu_bwd)(TSV_F g, TSV_F x) {
    const TSV_F s = TSV_NAME(tsv_sigmoid)(x);
    return g * (s * TSV_NAME(tsv_fma)(x, 1.0f - s, TSV_NAME(tsv_splat)(1.0f)));
}
static inline TSV_F TSV_NAME(tsv_gelu)(TSV_F x) {
    return x * 0.5f * TSV_NAME(tsv_onep_erf)(x * 0.70710678118654752440f);
}
/* g (cdf + x pdf). The density's e^(-x^2/2) comes from the e^-z^2 of the cdf's z = x / sqrt 2
 * rounded to float: x / sqrt 2 = z + k with k = (x c - z) + x c' (c + c' = 1 / sqrt 2, the first
 * part exact by fma), so x^2 / 2 = z^2 + 2 z k + k^2 and e^(-x^2/2) = e^-z^2 (1 - 2 z k) to float
 * precision (|2 z k| < 2^-13 and k^2 < 2^-36 where e^-z^2 is not 0). */
static inline TSV_F TSV_NAME(tsv_gelu_bwd)(TSV_F g, TSV_F x) {
    const TSV_F z = x * 0.70710678118654752440f, a = TSV_NAME(tsv_abs)(z);
    TSV_I under;
    TSV_F e = TSV_NAME(tsv_exp_mx2)(a, &under);
    const TSV_F cdf = 0.5f * TSV_NAME(tsv_onep_erf_c)(z, TSV_NAME(tsv_erfc_e)(a, e, under));
    e = (TSV_F)(~under & (TSV_I)e);
    const TSV_F k =
        TSV_NAME(tsv_fma)(x, TSV_NAME(tsv_splat)(1.21016171e-8f),
                          TSV_NAME(tsv_fma)(x, TSV_NAME(tsv_splat)(0.70710678118654752440f), -z));
    /* 2 z k as 2 a k with z's sign, e 2 a first: 0 where e is 0, so no inf times 0 for large x */
    const TSV_F kz = (TSV_F)((TSV_I)k ^ ((TSV_I)z & (-0x7fffffff - 1))); /* k times z's sign */
    const TSV_F pdf = 0.39894228040143267794f * TSV_NAME(tsv_fma)(-(e * (a + a)), kz, e);
    return g * TSV_NAME(tsv_fma)(x, pdf, cdf);
}

#ifdef TSV_D
static inline TSV_D TSV_NAME(tsv_splat_d)(double v) { return (TSV_D){0} + v; }
static inline TSV_D TSV_NAME(tsv_sel_d)(TSV_L m, TSV_D a, TSV_D b) {
    return (TSV_D)((m & (TSV_L)a) | (~m & (TSV_L)b));
}
/* the lanes of m (each 0 or all ones) as bits, lane 0 the lowest: the includer's TSV_MASK_D (one
 * instruction: movmskpd, vpmovq2m), else lane by lane */
static inline unsigned TSV_NAME(tsv_mask_d)(TSV_L m) {
#ifdef TSV_MASK_D
    return (unsigned)TSV_MASK_D(m);
#else
    unsigned r = 0;
    for (int l = 0; l < (int)(sizeof(TSV_L) / sizeof(int64_t)); l++)
        r |= (unsigned)(m[l] != 0) << l;
    return r;
#endif
}

/* e^x = 2^n e^r, r = x - n log 2 in [-log 2 / 2, log 2 / 2] (two-part log 2, the first exact
 * times n), e^r = 1 + r + r^2 P(r); 2^n applied in two halves so subnormal results round once
 * more at most. n is read from the bits of x log2 e + 1.5 * 2^52 (no int64 conversions, which
 * AVX2 lacks). */
static inline TSV_D TSV_NAME(tsv_exp_d)(TSV_D x) {
    const TSV_L under = x<-745.13321910194122, over = x> 709.782712893384;
    TSV_D xc = TSV_NAME(tsv_sel_d)(under, TSV_NAME(tsv_splat_d)(-745.2), x);
    xc = TSV_NAME(tsv_sel_d)(over, TSV_NAME(tsv_splat_d)(709.8), xc);
    const TSV_D magic = TSV_NAME(tsv_splat_d)(6755399441055744.0); /* 1.5 * 2^52 */
    const TSV_D t = xc * 1.4426950408889634074 + magic;
    const TSV_D n = t - magic;
    TSV_D r = xc - n * 6.93147180369123816490e-01;
    r = r - n * 1.90821492927058770002e-10;
    TSV_D p = TSV_NAME(tsv_splat_d)(2.09146793765839350998e-9);
    p = p * r + 2.5105206373957011116e-8;
    p = p * r + 2.75572736613486362187e-7;
    p = p * r + 2.75572554257464342818e-6;
    p = p * r + 2.4801587325533363819e-5;
    p = p * r + 1.98412698748004919808e-4;
    p = p * r + 1.38888888888837524166e-3;
    p = p * r + 8.33333333332614088398e-3;
    p = p * r + 4.16666666666666697515e-2;
    p = p * r + 1.66666666666666709863e-1;
    p = p * r + 5.0e-1;
    p = 1.0 + (r + r * r * p);
    const TSV_L ni = (TSV_L)t - (TSV_L)magic;
    const TSV_L n1 = ni >> 1, n2 = ni - n1;
    const TSV_D s1 = (TSV_D)((n1 + 1023) << 52), s2 = (TSV_D)((n2 + 1023) << 52);
    TSV_D y = p * s1 * s2;
    y = (TSV_D)(~under & (TSV_L)y);
    return TSV_NAME(tsv_sel_d)(over, TSV_NAME(tsv_splat_d)(__builtin_inf()), y);
}

/* fdlibm's log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f / (2 + f),
 * log(m) = f - (f^2/2 - s (f^2/2 + s^2 T(s^2))), plus e log 2 in two parts. */
static inline TSV_D TSV_NAME(tsv_log_d)(TSV_D x) {
    const TSV_L sub = x < 2.2250738585072014e-308;
    const TSV_D xs = TSV_NAME(tsv_sel_d)(sub, x * 18014398509481984.0, x); /* 2^54 */
    const TSV_L bits = (TSV_L)xs;
    TSV_L e = ((bits >> 52) & 0x7ff) - 1023 - (sub & 54);
    TSV_D m = (TSV_D)((bits & 0x000fffffffffffffLL) | 0x3ff0000000000000LL); /* [1, 2) */
    const TSV_L big = m > 1.4142135623730950488;
    e -= big; /* +1 where big */
    m = TSV_NAME(tsv_sel_d)(big, m * 0.5, m);
    const TSV_D magic = TSV_NAME(tsv_splat_d)(6755399441055744.0);
    const TSV_D fe = (TSV_D)(e + (TSV_L)magic) - magic;
    const TSV_D f = m - 1.0, hfsq = 0.5 * f * f, s = f / (2.0 + f), z = s * s;
    TSV_D q = TSV_NAME(tsv_splat_d)(1.30866261478401021381e-1);
    q = q * z + 1.32687731386568851847e-1;
    q = q * z + 1.53862397028146581885e-1;
    q = q * z + 1.8181795640132906276e-1;
    q = q * z + 2.22222223917139174419e-1;
    q = q * z + 2.85714285708036118108e-1;
    q = q * z + 4.00000000000008769827e-1;
    q = q * z + 6.66666666666666664649e-1;
    const TSV_D R = q * z;
    TSV_D r = fe * 6.93147180369123816490e-01 -
              ((hfsq - (s * (hfsq + R) + fe * 1.90821492927058770002e-10)) - f);
    const TSV_D inf = TSV_NAME(tsv_splat_d)(__builtin_inf());
    r = TSV_NAME(tsv_sel_d)(x == inf, inf, r);
    r = TSV_NAME(tsv_sel_d)(x == 0.0, -inf, r);
    r = TSV_NAME(tsv_sel_d)(x < 0.0, TSV_NAME(tsv_splat_d)(__builtin_nan("")), r);
    return TSV_NAME(tsv_sel_d)(x != x, x, r);
}

/* log x for x in [2^-60, 1] (erfinv's (1 - |x|)(1 + |x|) of a float below 1): tsv_log_d's
 * formula without its special cases (no subnormal, zero, negative, infinite or NaN x) and with
 * T(s^2) cut to degree 4 (s <= 0.1716: the first term left out, 2 s^13 / 13, is below 2e-11):
 * log x within 2e-11, which moves erfinv by under 1e-11 relative, far inside the float
 * result's half ulp (erfinv's polynomials themselves are 5e-11). */
static inline TSV_D TSV_NAME(tsv_log_unit_d)(TSV_D x) {
    const TSV_L bits = (TSV_L)x;
    TSV_L e = ((bits >> 52) & 0x7ff) - 1023;
    TSV_D m = (TSV_D)((bits & 0x000fffffffffffffLL) | 0x3ff0000000000000LL); /* [1, 2) */
    const TSV_L big = m > 1.4142135623730950488;
    e -= big; /* +1 where big */
    m = TSV_NAME(tsv_sel_d)(big, m * 0.5, m);
    const TSV_D magic = TSV_NAME(tsv_splat_d)(6755399441055744.0);
    const TSV_D fe = (TSV_D)(e + (TSV_L)magic) - magic;
    const TSV_D f = m - 1.0, hfsq = 0.5 * f * f, s = f / (2.0 + f), z = s * s;
    TSV_D q = TSV_NAME(tsv_splat_d)(1.8181795640132906276e-1);
    q = q * z + 2.22222223917139174419e-1;
    q = q * z + 2.85714285708036118108e-1;
    q = q * z + 4.00000000000008769827e-1;
    q = q * z + 6.66666666666666664649e-1;
    const TSV_D R = q * z;
    return fe * 6.93147180369123816490e-01 -
           ((hfsq - (s * (hfsq + R) + fe * 1.90821492927058770002e-10)) - f);
}

/* lgamma for z >= 8 (tsv_lgamma_f32's shifted argument) given log z: Stirling's series,
 * (z - 1/2) log z - z + log(2 pi) / 2 + sum B_2k / (2k (2k - 1) z^(2k - 1)) to k = 6 (the first
 * term left out, 1 / (156 z^13), is below 2e-14 at z = 8) */
static inline TSV_D TSV_NAME(tsv_lgamma_stirling_d)(TSV_D z, TSV_D logz) {
    const TSV_D r = 1.0 / z, r2 = r * r;
    TSV_D s = TSV_NAME(tsv_splat_d)(-691.0 / 360360.0);
    s = s * r2 + 1.0 / 1188.0;
    s = s * r2 - 1.0 / 1680.0;
    s = s * r2 + 1.0 / 1260.0;
    s = s * r2 - 1.0 / 360.0;
    s = s * r2 + 1.0 / 12.0;
    return (z - 0.5) * logz - z + 0.91893853320467274178 + s * r;
}

/* kernel_math.h's ts_erfinv_f's polynomial in double lanes: x p(w) from x (|x| < 1) and
 * w = -log((1 - |x|)(1 + |x|)), p one of the two polynomials, picked per lane (the central one's
 * leading 0 leaves its Horner sums unchanged); a vector whose lanes all take one polynomial
 * evaluates only that one. */
static inline TSV_D TSV_NAME(tsv_erfinv_poly_d)(TSV_D x, TSV_D w) {
    static const double central[14] = {0, TS_ERFINV_CENTRAL}, tail[14] = {TS_ERFINV_TAIL};
    enum { DW = sizeof(TSV_D) / sizeof(double) };
    const TSV_L mid = w < 5.0;
    const unsigned m_mid = TSV_NAME(tsv_mask_d)(mid);
    TSV_D p = TSV_NAME(tsv_splat_d)(0.0);
    if (m_mid == (1u << DW) - 1) {
        const TSV_D t = w - 2.5;
        for (int i = 1; i < 14; i++) p = p * t + central[i];
        return p * x;
    }
    TSV_D sq;
    for (int l = 0; l < DW; l++) sq[l] = __builtin_sqrt(w[l]); /* one vector square root */
    if (m_mid == 0) {
        const TSV_D t = sq - 3.0;
        for (int i = 0; i < 14; i++) p = p * t + tail[i];
        return p * x;
    }
    const TSV_D t = TSV_NAME(tsv_sel_d)(mid, w - 2.5, sq - 3.0);
    for (int i = 0; i < 14; i++)
        p = p * t + TSV_NAME(tsv_sel_d)(mid, TSV_NAME(tsv_splat_d)(central[i]),
                                        TSV_NAME(tsv_splat_d)(tail[i]));
    return p * x;
}

/* The fast paths of lgamma and erfinv (vec_kernels_impl.h) below compute an approximation of the
 * exact formulas above that is only ever used where it provably rounds to the same float (a
 * filter on its distance to the nearest float boundary, then the exact formula for the rest), so
 * their bits may differ between ISAs: tsv_mad_d is a b + c fused where the ISA has the instruction
 * (TSV_FMA_D), two roundings elsewhere. */
static inline TSV_D TSV_NAME(tsv_mad_d)(TSV_D a, TSV_D b, TSV_D c) {
#ifdef TSV_FMA_D
    return TSV_FMA_D(a, b, c);
#else
    return a * b + c;
#endif
}
#define TSV_MADS_D(a, b, c) TSV_NAME(tsv_mad_d)(a, b, TSV_NAME(tsv_splat_d)(c))
/* the two multiply-add logs' shared steps: x = 2^e m with m in [sqrt(1/2), sqrt(2)); returns
 * f = m - 1 with fe = e, s = f / (2 + f), z = s^2; and log x from them and the polynomial q(z) */
static inline TSV_D TSV_NAME(tsv_log_reduce_fd)(TSV_D x, TSV_D *fe, TSV_D *s, TSV_D *z) {
    const TSV_L bits = (TSV_L)x + (0x3ff0000000000000LL - 0x3fe6a09e667f3bcdLL);
    const TSV_L e = (bits >> 52) - 1023;
    const TSV_D m = (TSV_D)((bits & 0x000fffffffffffffLL) + 0x3fe6a09e667f3bcdLL);
    const TSV_D magic = TSV_NAME(tsv_splat_d)(6755399441055744.0);
    const TSV_D f = m - 1.0;
    *fe = (TSV_D)(e + (TSV_L)magic) - magic;
    *s = f / (2.0 + f);
    *z = *s * *s;
    return f;
}
static inline TSV_D TSV_NAME(tsv_log_finish_fd)(TSV_D f, TSV_D fe, TSV_D s, TSV_D z, TSV_D q) {
    const TSV_D hfsq = 0.5 * f * f;
    const TSV_D t =
        TSV_NAME(tsv_mad_d)(s, TSV_NAME(tsv_mad_d)(q, z, hfsq), fe * 1.90821492927058770002e-10);
    return TSV_NAME(tsv_mad_d)(fe, TSV_NAME(tsv_splat_d)(6.93147180369123816490e-01),
                               f - (hfsq - t));
}
/* tsv_log_d's formula for x > 0, normal and finite, without the special cases, with multiply-adds
 * (within a few ulps of tsv_log_d) */
static inline TSV_D TSV_NAME(tsv_log_pos_fd)(TSV_D x) {
    TSV_D fe, s, z;
    const TSV_D f = TSV_NAME(tsv_log_reduce_fd)(x, &fe, &s, &z);
    TSV_D q = TSV_NAME(tsv_splat_d)(1.30866261478401021381e-1);
    q = TSV_MADS_D(q, z, 1.32687731386568851847e-1);
    q = TSV_MADS_D(q, z, 1.53862397028146581885e-1);
    q = TSV_MADS_D(q, z, 1.8181795640132906276e-1);
    q = TSV_MADS_D(q, z, 2.22222223917139174419e-1);
    q = TSV_MADS_D(q, z, 2.85714285708036118108e-1);
    q = TSV_MADS_D(q, z, 4.00000000000008769827e-1);
    q = TSV_MADS_D(q, z, 6.66666666666666664649e-1);
    return TSV_NAME(tsv_log_finish_fd)(f, fe, s, z, q);
}
/* tsv_log_unit_d's formula (its x in [2^-60, 1]) with multiply-adds */
static inline TSV_D TSV_NAME(tsv_log_unit_fd)(TSV_D x) {
    TSV_D fe, s, z;
    const TSV_D f = TSV_NAME(tsv_log_reduce_fd)(x, &fe, &s, &z);
    TSV_D q = TSV_NAME(tsv_splat_d)(1.8181795640132906276e-1);
    q = TSV_MADS_D(q, z, 2.22222223917139174419e-1);
    q = TSV_MADS_D(q, z, 2.85714285708036118108e-1);
    q = TSV_MADS_D(q, z, 4.00000000000008769827e-1);
    q = TSV_MADS_D(q, z, 6.66666666666666664649e-1);
    return TSV_NAME(tsv_log_finish_fd)(f, fe, s, z, q);
}
/* tsv_erfinv_poly_d with multiply-adds */
static inline TSV_D TSV_NAME(tsv_erfinv_poly_fd)(TSV_D x, TSV_D w) {
    static const double central[14] = {0, TS_ERFINV_CENTRAL}, tail[14] = {TS_ERFINV_TAIL};
    enum { DW = sizeof(TSV_D) / sizeof(double) };
    const TSV_L mid = w < 5.0;
    const unsigned m_mid = TSV_NAME(tsv_mask_d)(mid);
    if (m_mid == (1u << DW) - 1) {
        const TSV_D t = w - 2.5;
        TSV_D p = TSV_NAME(tsv_splat_d)(central[1]);
        for (int i = 2; i < 14; i++) p = TSV_MADS_D(p, t, central[i]);
        return p * x;
    }
    TSV_D sq;
#ifdef TSV_SQRT_D
    sq = TSV_SQRT_D(w);
#else
    for (int l = 0; l < DW; l++) sq[l] = __builtin_sqrt(w[l]);
#endif
    if (m_mid == 0) {
        const TSV_D t = sq - 3.0;
        TSV_D p = TSV_NAME(tsv_splat_d)(tail[0]);
        for (int i = 1; i < 14; i++) p = TSV_MADS_D(p, t, tail[i]);
        return p * x;
    }
    const TSV_D t = TSV_NAME(tsv_sel_d)(mid, w - 2.5, sq - 3.0);
    TSV_D p = TSV_NAME(tsv_splat_d)(0.0);
    for (int i = 0; i < 14; i++)
        p = TSV_NAME(tsv_mad_d)(p, t,
                                TSV_NAME(tsv_sel_d)(mid, TSV_NAME(tsv_splat_d)(central[i]),
                                                    TSV_NAME(tsv_splat_d)(tail[i])));
    return p * x;
}
/* lgamma(z) for z in [8, 9]: its Taylor polynomial at 17/2 to degree 11 (coefficients
 * (-1)^n zeta(n, 17/2) / n from n = 2, by sympy at 40 digits; the remainder is below 2.1e-16) */
static inline TSV_D TSV_NAME(tsv_lgamma_8to9_fd)(TSV_D z) {
    const TSV_D t = z - 8.5;
    TSV_D q = TSV_NAME(tsv_splat_d)(-7.899975151791795093185403e-12);
    q = TSV_MADS_D(q, t, 7.820539060389380308907944e-11);
    q = TSV_MADS_D(q, t, -7.908669958187974624605479e-10);
    q = TSV_MADS_D(q, t, 8.216595162548654248556994e-9);
    q = TSV_MADS_D(q, t, -8.842061016950893701530709e-8);
    q = TSV_MADS_D(q, t, 9.978735734399136657552487e-7);
    q = TSV_MADS_D(q, t, -1.205104137230997469801715e-5);
    q = TSV_MADS_D(q, t, 1.615058483450998921011446e-4);
    q = TSV_MADS_D(q, t, -2.594085299317320554033427e-3);
    q = TSV_MADS_D(q, t, 6.241905945946301099614820e-2);
    q = TSV_MADS_D(q, t, 2.080090817579420121402624);
    return TSV_MADS_D(q, t, 9.549267257300997711737140);
}
/* tsv_lgamma_stirling_d with multiply-adds */
static inline TSV_D TSV_NAME(tsv_lgamma_stirling_fd)(TSV_D z, TSV_D logz) {
    const TSV_D r = 1.0 / z, r2 = r * r;
    TSV_D s = TSV_NAME(tsv_splat_d)(-691.0 / 360360.0);
    s = TSV_MADS_D(s, r2, 1.0 / 1188.0);
    s = TSV_MADS_D(s, r2, -1.0 / 1680.0);
    s = TSV_MADS_D(s, r2, 1.0 / 1260.0);
    s = TSV_MADS_D(s, r2, -1.0 / 360.0);
    s = TSV_MADS_D(s, r2, 1.0 / 12.0);
    return TSV_NAME(tsv_mad_d)(z - 0.5, logz,
                               TSV_NAME(tsv_mad_d)(s, r, 0.91893853320467274178 - z));
}

/* cos x: x = j pi/2 + r (pi/2 in two parts, the first with 33 bits so j pi/2 is exact for the
 * |j| < 2^20 this serves), then the sine or cosine polynomial of r in [-pi/4, pi/4]. Accurate
 * for |x| up to about 2^20; the Box-Muller angle stays below 2 pi. */
static inline TSV_D TSV_NAME(tsv_cos_d)(TSV_D x) {
    const TSV_D magic = TSV_NAME(tsv_splat_d)(6755399441055744.0);
    const TSV_D t = x * 6.36619772367581382433e-01 + magic; /* 2 / pi */
    const TSV_D j = t - magic;
    const TSV_L q = (TSV_L)t - (TSV_L)magic;
    const TSV_D r = (x - j * 1.57079632673412561417e+00) - j * 6.07710050650619224932e-11;
    const TSV_D y = r * r;
    TSV_D sp = TSV_NAME(tsv_splat_d)(-7.58669711770691798466e-13);
    sp = sp * y + 1.60585316189861468364e-10;
    sp = sp * y - 2.5052106232447577328e-8;
    sp = sp * y + 2.75573192193391665175e-6;
    sp = sp * y - 1.98412698412650649465e-4;
    sp = sp * y + 8.33333333333333149208e-3;
    sp = sp * y - 1.66666666666666666655e-1;
    const TSV_D sn = r + r * y * sp;
    TSV_D cp = TSV_NAME(tsv_splat_d)(4.74587190204329153657e-14);
    cp = cp * y - 1.14704608876099591073e-11;
    cp = cp * y + 2.08767557910804238071e-9;
    cp = cp * y - 2.75573192214028243942e-7;
    cp = cp * y + 2.48015873015846464282e-5;
    cp = cp * y - 1.38888888888888878653e-3;
    cp = cp * y + 4.1666666666666666666e-2;
    const TSV_D hy = 0.5 * y, w = 1.0 - hy;
    const TSV_D cs = w + (((1.0 - w) - hy) + y * y * cp); /* fdlibm's 1 - y/2 with its lost bits */
    /* cos(j pi/2 + r): j = 0: cos r, 1: -sin r, 2: -cos r, 3: sin r (mod 4) */
    const TSV_L odd = (q & 1) != 0, neg = ((q + 1) & 2) != 0;
    const TSV_D v = TSV_NAME(tsv_sel_d)(odd, sn, cs);
    return (TSV_D)((TSV_L)v ^ (neg & (-0x7fffffffffffffffLL - 1))); /* the sign bit */
}

/* ts_philox_box_muller (philox.h): sqrt(-2 log(1 - u1)) cos(2 pi u2), the angle rounded to double
 * as there */
static inline TSV_D TSV_NAME(tsv_box_muller_d)(TSV_D u1, TSV_D u2) {
    const TSV_D rad = -2.0 * TSV_NAME(tsv_log_d)(1.0 - u1);
    TSV_D sq;
    for (int l = 0; l < (int)(sizeof(TSV_D) / sizeof(double)); l++)
        sq[l] = __builtin_sqrt(rad[l]); /* the compiler makes this one vector square root */
    return sq * TSV_NAME(tsv_cos_d)(6.283185307179586476925 * u2);
}
#endif /* TSV_D */
