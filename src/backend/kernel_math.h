/* kernel_math.h — the one definition of each scalar math function, shared by CPU loops and CUDA. */
#ifndef TS_KERNEL_MATH_H
#define TS_KERNEL_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Host+device marker: the same inline bodies compile into CPU loops and CUDA kernels, so the two
 * backends cannot drift apart numerically. */
#ifdef __CUDACC__
#define TS_HD __host__ __device__
#else
#define TS_HD
#endif

typedef uint16_t ts_f16_bits;
typedef uint16_t ts_bf16_bits;

/* ------------------------------------------------------------------ bit casts */
static inline TS_HD uint32_t ts_f32_as_u32(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

static inline TS_HD float ts_u32_as_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* ------------------------------------------------------------------ f16 / bf16 */
/* Round to nearest even by integer arithmetic, so the result does not depend on the FPU's
 * flush-to-zero or rounding mode; NaN stays a (quiet) NaN with its sign. */
static inline TS_HD ts_f16_bits ts_f32_to_f16(float f) {
    uint32_t x = ts_f32_as_u32(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* Inf or NaN */
        return (ts_f16_bits)(sign | 0x7c00u |
                             (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
    if (ax >= 0x477ff000u) return (ts_f16_bits)(sign | 0x7c00u); /* >= 65520 rounds to Inf */
    if (ax < 0x38800000u) {                                      /* below 2^-14: half subnormal */
        uint32_t e = ax >> 23;
        if (e < 102) return (ts_f16_bits)sign; /* below 2^-25: rounds to zero */
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e; /* 14..24: value / 2^-24 = m >> shift */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) r++; /* a carry into 0x400 is the min normal */
        return (ts_f16_bits)(sign | r);
    }
    uint32_t h = (ax >> 13) - (112u << 10); /* rebias 127 -> 15 */
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (ts_f16_bits)(sign | h);
}

/* A signalling NaN comes back quiet (its payload kept), as the F16C instruction, every other
 * hardware conversion and arithmetic on it do. */
static inline TS_HD float ts_f16_to_f32(ts_f16_bits h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return ts_u32_as_f32(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
    if (e == 0) { /* zero or subnormal: m * 2^-24 is exact in f32 */
        float v = (float)m * 5.9604644775390625e-08f;
        return sign ? -v : v;
    }
    return ts_u32_as_f32(sign | ((e + 112u) << 23) | (m << 13));
}

static inline TS_HD ts_bf16_bits ts_f32_to_bf16(float f) {
    uint32_t x = ts_f32_as_u32(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (ts_bf16_bits)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u); /* ties to even; overflow carries into Inf */
    return (ts_bf16_bits)(x >> 16);
}

static inline TS_HD float ts_bf16_to_f32(ts_bf16_bits b) {
    return ts_u32_as_f32((uint32_t)b << 16);
}

/* ------------------------------------------------------------------ float -> integer */
/* C leaves out-of-range float->int casts undefined; these give x86's answer (the "integer
 * indefinite" minimum) for NaN and out-of-range values, which is what PyTorch produces on CPU. */
static inline TS_HD int64_t ts_d2i64(double x) {
    return (x >= -9223372036854775808.0 && x < 9223372036854775808.0) ? (int64_t)x : INT64_MIN;
}
static inline TS_HD int32_t ts_d2i32(double x) {
    return (x > -2147483649.0 && x < 2147483648.0) ? (int32_t)x : INT32_MIN;
}
/* PyTorch casts float to uint8 through int64 so negative values wrap consistently. */
static inline TS_HD uint8_t ts_d2u8(double x) { return (uint8_t)(uint64_t)ts_d2i64(x); }
/* int8, int16 and uint16 from float go through int32 (PyTorch's x86 results: 300.7 -> 44 in int8,
 * -1.5 -> 65535 in uint16); uint32 through int64 like uint8; uint64 converts in range and wraps
 * a negative value through int64 (-1.5 -> 2^64 - 1). Out of range is undefined in C: these are
 * Tessera's definitions there. */
static inline TS_HD int8_t ts_d2i8(double x) { return (int8_t)ts_d2i32(x); }
static inline TS_HD int16_t ts_d2i16(double x) { return (int16_t)ts_d2i32(x); }
static inline TS_HD uint16_t ts_d2u16(double x) { return (uint16_t)ts_d2i32(x); }
static inline TS_HD uint32_t ts_d2u32(double x) { return (uint32_t)(uint64_t)ts_d2i64(x); }
static inline TS_HD uint64_t ts_d2u64(double x) {
    return (x >= 0.0 && x < 18446744073709551616.0) ? (uint64_t)x : (uint64_t)ts_d2i64(x);
}

/* ------------------------------------------------------------------ activations (f32) */
static inline TS_HD float ts_relu_f(float x) { return x > 0.0f ? x : (x != x ? x : 0.0f); }
/* exact erf form, PyTorch's default gelu */
static inline TS_HD float ts_gelu_f(float x) {
    return x * 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
}
/* never evaluates exp of a large positive number, so no overflow to Inf/Inf */
static inline TS_HD float ts_sigmoid_f(float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}
static inline TS_HD float ts_silu_f(float x) { return x * ts_sigmoid_f(x); }
/* beta 1, threshold 20 like torch.nn.functional.softplus */
static inline TS_HD float ts_softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
/* PyTorch: sign(NaN) = 0 and sign(-0) = 0 */
static inline TS_HD float ts_sign_f(float x) { return (float)((x > 0.0f) - (x < 0.0f)); }
/* half to even under the default rounding mode (nearbyint semantics) */
static inline TS_HD float ts_round_even_f(float x) { return rintf(x); }
static inline TS_HD float ts_rsqrt_f(float x) { return 1.0f / sqrtf(x); }
static inline TS_HD float ts_reciprocal_f(float x) { return 1.0f / x; }
/* C fmod = torch.fmod: result has the sign of the dividend */
static inline TS_HD float ts_fmod_f(float a, float b) { return fmodf(a, b); }
/* torch.remainder and torch.floor_divide on floats (ATen's div_floor: exact for integral values) */
static inline TS_HD float ts_rem_f(float a, float b) {
    float m = fmodf(a, b);
    return (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) ? m + b : m;
}
static inline TS_HD float ts_floordiv_f(float a, float b) {
    if (b == 0.0f) return a / b;
    float m = fmodf(a, b), d = (a - m) / b;
    if (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) d -= 1.0f;
    if (d == 0.0f) return copysignf(0.0f, a / b);
    float f = floorf(d);
    return d - f > 0.5f ? f + 1.0f : f;
}

/* ------------------------------------------------------------------ activations (f64) */
static inline TS_HD double ts_relu_d(double x) { return x > 0.0 ? x : (x != x ? x : 0.0); }
static inline TS_HD double ts_gelu_d(double x) {
    return x * 0.5 * (1.0 + erf(x * 0.70710678118654752440));
}
static inline TS_HD double ts_sigmoid_d(double x) {
    if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}
static inline TS_HD double ts_silu_d(double x) { return x * ts_sigmoid_d(x); }
static inline TS_HD double ts_softplus_d(double x) { return x > 20.0 ? x : log1p(exp(x)); }
static inline TS_HD double ts_sign_d(double x) { return (double)((x > 0.0) - (x < 0.0)); }
static inline TS_HD double ts_round_even_d(double x) { return rint(x); }
static inline TS_HD double ts_rsqrt_d(double x) { return 1.0 / sqrt(x); }
static inline TS_HD double ts_reciprocal_d(double x) { return 1.0 / x; }
static inline TS_HD double ts_fmod_d(double a, double b) { return fmod(a, b); }
static inline TS_HD double ts_rem_d(double a, double b) {
    double m = fmod(a, b);
    return (m != 0.0 && ((b < 0.0) != (m < 0.0))) ? m + b : m;
}
static inline TS_HD double ts_floordiv_d(double a, double b) {
    if (b == 0.0) return a / b;
    double m = fmod(a, b), d = (a - m) / b;
    if (m != 0.0 && ((b < 0.0) != (m < 0.0))) d -= 1.0;
    if (d == 0.0) return copysign(0.0, a / b);
    double f = floor(d);
    return d - f > 0.5 ? f + 1.0 : f;
}

/* m ? x : y as a bit select (m 0 or 1): a loop the compiler vectorises, where ISO C's trapping
 * math keeps it from turning a float ?: into a select */
static inline TS_HD float ts_bitsel_f(int m, float x, float y) {
    uint32_t a, b;
    memcpy(&a, &x, sizeof a), memcpy(&b, &y, sizeof b);
    const uint32_t k = 0u - (uint32_t)m, r = (a & k) | (b & ~k);
    float f;
    memcpy(&f, &r, sizeof f);
    return f;
}
static inline TS_HD double ts_bitsel_d(int m, double x, double y) {
    uint64_t a, b;
    memcpy(&a, &x, sizeof a), memcpy(&b, &y, sizeof b);
    const uint64_t k = 0u - (uint64_t)m, r = (a & k) | (b & ~k);
    double f;
    memcpy(&f, &r, sizeof f);
    return f;
}

/* backend.h's ts_ternary_op (op: its value) in float (f32, f16, bf16) and double: PyTorch's
 * addcmul, addcdiv and lerp kernels, term for term (lerp: its two-sided form, exact at both
 * ends; both sides computed, then one picked by ts_bitsel); the CPU and CUDA kernels both call
 * these */
#define TS_TERNARY_BODY(ABS, T, SEL)                                                               \
    switch (op) {                                                                                  \
    case 0:                                                                                        \
        return a + p * b * c;                                                                      \
    case 1:                                                                                        \
        return a + p * b / c;                                                                      \
    case 2: {                                                                                      \
        const T lo = a + c * (b - a), hi = b - (b - a) * (1 - c);                                  \
        return SEL(ABS(c) < 0.5f, lo, hi);                                                         \
    }                                                                                              \
    default: {                                                                                     \
        const T lo = a + p * (b - a), hi = b - (b - a) * (1 - p);                                  \
        return SEL(ABS(p) < 0.5f, lo, hi);                                                         \
    }                                                                                              \
    }
static inline TS_HD float ts_ternary_f(int op, float a, float b, float c, float p) {
    TS_TERNARY_BODY(fabsf, float, ts_bitsel_f)
}
static inline TS_HD double ts_ternary_d(int op, double a, double b, double c, double p) {
    TS_TERNARY_BODY(fabs, double, ts_bitsel_d)
}
#undef TS_TERNARY_BODY

/* issue 52's activations (elu, hardtanh, mish...) and their TS_ACT_PARAM_UNARY list */
#include "backend/kernel_math_act.h"

/* ------------------------------------------------------------------ libm's unary functions
 * The ts_unary_ops that are one libm function each (float: name##f, double: name), as one list of
 * (op, name) pairs: the CPU loops and the CUDA kernels expand it with their X, which also gets the
 * trailing arguments. Expanded where backend.h's ts_unary_op is in scope. */
#define TS_LIBM_UNARY(X, ...)                                                                      \
    X(TS_U_SIN, sin, __VA_ARGS__)                                                                  \
    X(TS_U_COS, cos, __VA_ARGS__)                                                                  \
    X(TS_U_TAN, tan, __VA_ARGS__)                                                                  \
    X(TS_U_ASIN, asin, __VA_ARGS__)                                                                \
    X(TS_U_ACOS, acos, __VA_ARGS__)                                                                \
    X(TS_U_ATAN, atan, __VA_ARGS__)                                                                \
    X(TS_U_SINH, sinh, __VA_ARGS__)                                                                \
    X(TS_U_COSH, cosh, __VA_ARGS__)                                                                \
    X(TS_U_ASINH, asinh, __VA_ARGS__)                                                              \
    X(TS_U_ACOSH, acosh, __VA_ARGS__)                                                              \
    X(TS_U_ATANH, atanh, __VA_ARGS__)                                                              \
    X(TS_U_ERF, erf, __VA_ARGS__)                                                                  \
    X(TS_U_EXPM1, expm1, __VA_ARGS__)                                                              \
    X(TS_U_EXP2, exp2, __VA_ARGS__)                                                                \
    X(TS_U_LOG2, log2, __VA_ARGS__)                                                                \
    X(TS_U_LOG10, log10, __VA_ARGS__)                                                              \
    X(TS_U_ERFC, erfc, __VA_ARGS__)                                                                \
    X(TS_U_LGAMMA, lgamma, __VA_ARGS__)                                                            \
    X(TS_U_TRUNC, trunc, __VA_ARGS__)
/* the function of a TS_LIBM_UNARY name for a compute type: f float, d double */
#define TS_LIBM_f(name) name##f
#define TS_LIBM_d(name) name

/* ------------------------------------------------------------------ special functions (issue 52)
 * PyTorch's conventions at the poles and edges (checked against PyTorch 2). The series-based
 * functions (digamma, polygamma, erfinv, the Bessel functions) are written once, in double, and
 * float, f16 and bf16 round the double result (more accurate than PyTorch's float kernels, never
 * less); the others compute in the input's type as PyTorch does. */
#define TS_KM_PI 3.14159265358979323846

/* digamma's asymptotic series in y = 1 / x^2 (Bernoulli numbers B2..B14): psi(x) ~ log x - 1/(2x)
 * - TS_DIGAMMA_SERIES(y). A macro so the CPU's double vectors (vec_kernels_impl.h) evaluate the
 * very same expression as the scalar function below. */
#define TS_DIGAMMA_SERIES(y)                                                                       \
    ((y) * (1.0 / 12 -                                                                             \
            (y) * (1.0 / 120 -                                                                     \
                   (y) * (1.0 / 252 -                                                              \
                          (y) * (1.0 / 240 -                                                       \
                                 (y) * (1.0 / 132 - (y) * (691.0 / 32760 - (y) * (1.0 / 12))))))))

/* digamma: psi(+-0) = -+inf, negative integers and -inf NaN. Reflection below 0 (with the
 * argument reduced to [-1/2, 1/2] first, exact, so tan keeps its digits near the poles), the
 * recurrence up to 10, then the asymptotic series in Bernoulli numbers B2..B14. */
static inline TS_HD double ts_digamma_d(double x) {
    if (x == 0) return copysign(INFINITY, -x);
    double r = 0;
    if (x < 0) {
        if (x == floor(x)) return NAN;
        r = -TS_KM_PI / tan(TS_KM_PI * (x - rint(x)));
        x = 1 - x;
    }
    while (x < 10) {
        r -= 1 / x;
        x += 1;
    }
    if (x == INFINITY) return x;
    const double y = 1 / (x * x);
    return r + log(x) - 0.5 / x - TS_DIGAMMA_SERIES(y);
}

/* (2j)! / B_2j, j = 1..12: the Euler-Maclaurin tail of the Hurwitz zeta function */
static inline TS_HD double ts_zeta_em_coef(int j) {
    switch (j) {
    case 1:
        return 12.0; /* 2! / (1/6) */
    case 2:
        return -720.0; /* 4! / (-1/30) */
    case 3:
        return 30240.0; /* 6! / (1/42) */
    case 4:
        return -1209600.0; /* 8! / (-1/30) */
    case 5:
        return 47900160.0; /* 10! / (5/66) */
    case 6:
        return -479001600.0 * 2730.0 / 691.0; /* 12! / (-691/2730) */
    case 7:
        return 87178291200.0 * 6.0 / 7.0; /* 14! / (7/6) */
    case 8:
        return -20922789888000.0 * 510.0 / 3617.0; /* 16! / (-3617/510) */
    case 9:
        return 6402373705728000.0 * 798.0 / 43867.0; /* 18! / (43867/798) */
    case 10:
        return -2432902008176640000.0 * 330.0 / 174611.0;
    case 11:
        return 1124000727777607680000.0 * 138.0 / 854513.0;
    default:
        return -620448401733239439360000.0 * 2730.0 / 236364091.0;
    }
}

/* Hurwitz zeta(s, q) = sum_k (q + k)^-s for s > 1: the terms until q + k > 9 (and at least 10),
 * then the integral of the rest, half the last term and the Bernoulli corrections. q a
 * non-positive integer: +inf (the pole); q < 0 needs an integral s (PyTorch's, Cephes' rules). */
static inline TS_HD double ts_zeta_d(double s, double q) {
    if (s == 1) return INFINITY;
    if (!(s > 1)) return NAN;
    if (q == INFINITY) return 0;
    if (q <= 0) {
        if (q == floor(q)) return INFINITY;
        if (s != floor(s)) return NAN;
    }
    double sum = pow(q, -s), a = q, b = 0;
    int i = 0;
    while (i < 9 || a <= 9) {
        i++;
        a += 1;
        b = pow(a, -s);
        sum += b;
        if (fabs(b / sum) < 1.1e-16) return sum;
    }
    const double w = a;
    sum += b * w / (s - 1) - 0.5 * b;
    double fac = 1, k = 0;
    for (int j = 1; j <= 12; j++) {
        fac *= s + k;
        b /= w;
        const double t = fac * b / ts_zeta_em_coef(j);
        sum += t;
        if (fabs(t / sum) < 1.1e-16) break;
        k += 1;
        fac *= s + k;
        b /= w;
        k += 1;
    }
    return sum;
}

/* polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 1; n = 1 (trigamma) reflects below 1/2,
 * psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x), with the argument reduced first (+inf at the poles);
 * n = 0 is digamma. */
static inline TS_HD double ts_polygamma_d(int n, double x) {
    if (n == 0) return ts_digamma_d(x);
    if (n == 1) {
        if (x < 0.5) {
            const double sp = sin(TS_KM_PI * (x - rint(x)));
            return TS_KM_PI * TS_KM_PI / (sp * sp) - ts_zeta_d(2, 1 - x);
        }
        return ts_zeta_d(2, x);
    }
    double f = 1;
    for (int k = 2; k <= n; k++) f *= k;
    return ((n & 1) ? f : -f) * ts_zeta_d(n + 1, x);
}

/* erfinv: Winitzki's closed form (relative error 2e-3) refined by three Halley steps on
 * erf(y) = |x|, written as (1 - |x|) - erfc(y) from |x| = 1/2 up, where 1 - |x| is exact and erfc
 * keeps the tail's digits; y ~ x sqrt(pi) / 2 starts tiny arguments. +-1: +-inf, |x| > 1: NaN. */
static inline TS_HD double ts_erfinv_d(double x) {
    const double ax = fabs(x);
    if (!(ax <= 1)) return NAN;
    if (ax == 1) return copysign(INFINITY, x);
    if (x == 0) return x;
    double y;
    if (ax < 1e-3) {
        y = 0.88622692545275801365 * ax * (1 + 0.26179938779914943654 * ax * ax);
    } else {
        const double l = log((1 - ax) * (1 + ax)), t = 2 / (TS_KM_PI * 0.147) + 0.5 * l;
        y = sqrt(sqrt(t * t - l / 0.147) - t);
    }
    for (int i = 0; i < 3; i++) {
        const double f = ax <= 0.5 ? erf(y) - ax : (1 - ax) - erfc(y);
        const double q = f / (1.12837916709551257390 * exp(-y * y));
        y -= q / (1 + y * q);
    }
    return copysign(y, x);
}

/* erfinv for float, f16 and bf16: erfinv(x) = x p(w) with w = -log(1 - x^2), p a polynomial in
 * w - 2.5 below w = 5 and in sqrt(w) - 3 above (Giles' variables, "Approximating the erfinv
 * function", GPU Computing Gems, 2011), refitted to degree 12 / 13 (Chebyshev fits against 40-digit
 * erfinv, tools/fit_erfinv.py: relative error 5e-11 / 4e-11 on w in [0, 16.5], which covers every
 * float below 1), all in double. Checked on every 13th float of (0, 1) against ts_erfinv_d rounded:
 * at most 1 ulp, 0.07% off by one (PyTorch's float kernel: at most 1 ulp too); 12x faster than
 * rounding ts_erfinv_d. +-1, |x| > 1 and NaN go to the double function. */
/* the two polynomials' coefficients, highest degree first (the vectorised CPU kernel,
 * vec_math_impl.h's tsv_erfinv_d, evaluates the same ones) */
#define TS_ERFINV_CENTRAL                                                                          \
    -2.12035651318190038987e-11, 1.23028889731208042283e-10, 8.3270008210308130359e-10,            \
        -1.08543970931123768455e-8, 1.36914960151991516646e-8, 4.786448243400271283e-7,            \
        -0.00000341711523274501038134, -0.00000499588144876005954419, 0.000218250649399950022911,  \
        -0.00125270808362228086134, -0.00417731781014003475823, 0.246640276785267754707,           \
        1.50140935111079192467
#define TS_ERFINV_TAIL                                                                             \
    -0.00000382676165171305238312, 0.0000179275724320442279577, -0.0000227853509399844867626,      \
        -0.0000435374913713209499354, 0.000204556908875044191579, -0.00028406394177385726224,      \
        -0.000148434798132114734339, 0.00148386578481552248771, -0.00355888045855192674232,        \
        0.00568517826390345487794, -0.00764379937176498794227, 0.00944552173857235062903,          \
        1.00167527657830080949, 2.83297679873366099328
static inline TS_HD float ts_erfinv_f(float xf) {
    const double x = xf, ax = fabs(x);
    if (!(ax < 1)) return (float)ts_erfinv_d(x);
    const double w = -log((1 - ax) * (1 + ax));
    const double central[13] = {TS_ERFINV_CENTRAL};
    const double tail[14] = {TS_ERFINV_TAIL};
    const int mid = w < 5;
    const double t = mid ? w - 2.5 : sqrt(w) - 3;
    const double *c = mid ? central : tail;
    double p = c[0];
    for (int i = 1; i < (mid ? 13 : 14); i++) p = p * t + c[i];
    return (float)(p * x);
}

/* e^-a I_nu(a) (scaled) or I_nu(a) for a = |x| >= 0 and nu 0 or 1: the power series up to 25
 * (positive terms: no cancellation), Hankel's asymptotic series above (its smallest term, near
 * k = 2a, is e^-2a < 1e-21 there); the unscaled large case multiplies by e^(a/2) twice so that it
 * overflows where I_nu does, not where e^a does. I_nu(inf) = inf (PyTorch's CPU kernel gives
 * NaN there), the scaled one 0. */
static inline TS_HD double ts_bessel_i_d(int nu, double a, int scaled) {
    if (a != a) return a;
    if (a <= 25) {
        const double h = 0.5 * a, q = h * h;
        double term = nu ? h : 1, sum = term;
        for (int k = 1; k < 200 && term > sum * 1e-18; k++) {
            term *= q / ((double)k * (double)(k + nu));
            sum += term;
        }
        return scaled ? sum * exp(-a) : sum;
    }
    if (a == INFINITY) return scaled ? 0 : a;
    const double mu = 4.0 * nu * nu;
    double term = 1, sum = 1;
    for (int k = 1; k < 60; k++) {
        term *= -(mu - (2.0 * k - 1) * (2.0 * k - 1)) / (8.0 * k * a);
        sum += term;
        if (fabs(term) < 1e-18 * fabs(sum)) break;
    }
    const double r = sum / sqrt(2 * TS_KM_PI * a);
    if (scaled) return r;
    const double e = exp(0.5 * a);
    return e * (r * e);
}
static inline TS_HD double ts_i0_d(double x) { return ts_bessel_i_d(0, fabs(x), 0); }
static inline TS_HD double ts_i0e_d(double x) { return ts_bessel_i_d(0, fabs(x), 1); }
static inline TS_HD double ts_i1_d(double x) { return copysign(ts_bessel_i_d(1, fabs(x), 0), x); }
static inline TS_HD double ts_i1e_d(double x) { return copysign(ts_bessel_i_d(1, fabs(x), 1), x); }
static inline TS_HD float ts_digamma_f(float x) { return (float)ts_digamma_d(x); }
static inline TS_HD float ts_i0_f(float x) { return (float)ts_i0_d(x); }
static inline TS_HD float ts_i0e_f(float x) { return (float)ts_i0e_d(x); }
static inline TS_HD float ts_i1_f(float x) { return (float)ts_i1_d(x); }
static inline TS_HD float ts_i1e_f(float x) { return (float)ts_i1e_d(x); }
static inline TS_HD float ts_polygamma_f(int n, float x) { return (float)ts_polygamma_d(n, x); }

/* torch.sinc: sin(pi x) / (pi x), 1 at 0, in the input's type as PyTorch computes it */
static inline TS_HD float ts_sinc_f(float x) {
    if (x == 0.0f) return 1.0f;
    const float p = 3.14159265358979323846f * x;
    return sinf(p) / p;
}
static inline TS_HD double ts_sinc_d(double x) {
    if (x == 0.0) return 1.0;
    const double p = TS_KM_PI * x;
    return sin(p) / p;
}
/* torch.frac: x - trunc(x) (inf gives NaN) */
static inline TS_HD float ts_frac_f(float x) { return x - truncf(x); }
static inline TS_HD double ts_frac_d(double x) { return x - trunc(x); }
/* deg2rad / rad2deg: times the constant rounded to the type (PyTorch's mul by a number) */
static inline TS_HD float ts_deg2rad_f(float x) { return x * (float)(TS_KM_PI / 180); }
static inline TS_HD double ts_deg2rad_d(double x) { return x * (TS_KM_PI / 180); }
static inline TS_HD float ts_rad2deg_f(float x) { return x * (float)(180 / TS_KM_PI); }
static inline TS_HD double ts_rad2deg_d(double x) { return x * (180 / TS_KM_PI); }
/* torch.logit: log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps >= 0 (eps < 0: none);
 * the ratio apart so that the CPU's float kernel can take the vectorised log of a run of them */
static inline TS_HD float ts_logit_ratio_f(float x, float eps) {
    const float z = eps < 0.0f ? x : (x < eps ? eps : (x > 1.0f - eps ? 1.0f - eps : x));
    return z / (1.0f - z);
}
static inline TS_HD float ts_logit_f(float x, float eps) { return logf(ts_logit_ratio_f(x, eps)); }
static inline TS_HD double ts_logit_d(double x, double eps) {
    const double z = eps < 0.0 ? x : (x < eps ? eps : (x > 1.0 - eps ? 1.0 - eps : x));
    return log(z / (1.0 - z));
}
/* nan_to_num's passes: NaN -> nan_v and +inf -> pos_v; then -inf -> neg_v */
static inline TS_HD float ts_nan_to_num_f(float x, float nan_v, float pos_v) {
    return x != x ? nan_v : (x == INFINITY ? pos_v : x);
}
static inline TS_HD double ts_nan_to_num_d(double x, double nan_v, double pos_v) {
    return x != x ? nan_v : (x == INFINITY ? pos_v : x);
}
/* ... or in one pass where -inf's value is -(+inf's) */
static inline TS_HD float ts_nan_to_num_sym_f(float x, float nan_v, float pos_v) {
    return x != x ? nan_v : (x == INFINITY ? pos_v : (x == -INFINITY ? -pos_v : x));
}
static inline TS_HD double ts_nan_to_num_sym_d(double x, double nan_v, double pos_v) {
    return x != x ? nan_v : (x == INFINITY ? pos_v : (x == -INFINITY ? -pos_v : x));
}
static inline TS_HD float ts_neginf_to_f(float x, float v) { return x == -INFINITY ? v : x; }
static inline TS_HD double ts_neginf_to_d(double x, double v) { return x == -INFINITY ? v : x; }

#include "backend/kernel_math_special.h" /* ndtr ... the polynomials */

/* The one-argument special ops as (op, name): ts_<name>_f and ts_<name>_d, expanded like
 * TS_LIBM_UNARY. */
#define TS_SPECIAL_UNARY(X, ...)                                                                   \
    X(TS_U_DIGAMMA, digamma, __VA_ARGS__)                                                          \
    X(TS_U_ERFINV, erfinv, __VA_ARGS__)                                                            \
    X(TS_U_I0, i0, __VA_ARGS__)                                                                    \
    X(TS_U_I0E, i0e, __VA_ARGS__)                                                                  \
    X(TS_U_I1, i1, __VA_ARGS__)                                                                    \
    X(TS_U_I1E, i1e, __VA_ARGS__)                                                                  \
    X(TS_U_SINC, sinc, __VA_ARGS__)                                                                \
    X(TS_U_FRAC, frac, __VA_ARGS__)                                                                \
    X(TS_U_DEG2RAD, deg2rad, __VA_ARGS__)                                                          \
    X(TS_U_RAD2DEG, rad2deg, __VA_ARGS__)                                                          \
    TS_KMS_UNARY_OPS(X, __VA_ARGS__)
/* the function of a TS_SPECIAL_UNARY / TS_SPECIAL_BINARY name for a compute type (f or d) */
#define TS_SPECIAL_f(name) ts_##name##_f
#define TS_SPECIAL_d(name) ts_##name##_d

/* The unary ops with numbers, as (op, expression, the trailing arguments) over the caller's `a`
 * (the argument, of the compute type CT) and `p0`, `p1` (doubles, the backend's unary parameters);
 * FAM f or d. */
#define TS_SPECIAL_PARAM_UNARY(X, FAM, CT, ...)                                                    \
    X(TS_U_POLYGAMMA, ts_polygamma_##FAM((int)p0, a), __VA_ARGS__)                                 \
    X(TS_U_LOGIT, ts_logit_##FAM(a, p0 >= 0 ? (CT)p0 : (CT)-1), __VA_ARGS__)                       \
    X(TS_U_NAN_TO_NUM, ts_nan_to_num_##FAM(a, (CT)p0, (CT)p1), __VA_ARGS__)                        \
    X(TS_U_NEGINF_TO, ts_neginf_to_##FAM(a, (CT)p0), __VA_ARGS__)                                  \
    X(TS_U_NAN_TO_NUM_SYM, ts_nan_to_num_sym_##FAM(a, (CT)p0, (CT)p1), __VA_ARGS__)                \
    TS_ACT_PARAM_UNARY(X, FAM, CT, __VA_ARGS__)

/* ---- binary (issue 52): PyTorch's kernels' formulas, in the input's type */
/* xlogy: NaN y gives NaN, else x == 0 gives 0, else x log(y); xlog1py alike with log1p */
static inline TS_HD float ts_xlogy_f(float x, float y) {
    return y != y ? y : (x == 0.0f ? 0.0f : x * logf(y));
}
static inline TS_HD double ts_xlogy_d(double x, double y) {
    return y != y ? y : (x == 0.0 ? 0.0 : x * log(y));
}
static inline TS_HD float ts_xlog1py_f(float x, float y) {
    return y != y ? y : (x == 0.0f ? 0.0f : x * log1pf(y));
}
static inline TS_HD double ts_xlog1py_d(double x, double y) {
    return y != y ? y : (x == 0.0 ? 0.0 : x * log1p(y));
}
/* float: the root of the sum of squares in double (no overflow or underflow there; one rounding
 * of a result within 1e-16 of the exact one: hypotf's value but for near-ties) with hypot's
 * infinities (an infinite argument gives inf, even with a NaN), branch-free so that the loops
 * vectorise */
static inline TS_HD float ts_hypot_f(float a, float b) {
    const double x = a, y = b;
    const float r = (float)sqrt(x * x + y * y);
    return ts_bitsel_f((fabsf(a) == INFINITY) | (fabsf(b) == INFINITY), INFINITY, r);
}
static inline TS_HD double ts_hypot_d(double a, double b) { return hypot(a, b); }
static inline TS_HD float ts_copysign_f(float a, float b) { return copysignf(a, b); }
static inline TS_HD double ts_copysign_d(double a, double b) { return copysign(a, b); }
static inline TS_HD float ts_atan2_f(float a, float b) { return atan2f(a, b); }
static inline TS_HD double ts_atan2_d(double a, double b) { return atan2(a, b); }
static inline TS_HD float ts_nextafter_f(float a, float b) { return nextafterf(a, b); }
static inline TS_HD double ts_nextafter_d(double a, double b) { return nextafter(a, b); }
/* logaddexp: a where both are the same infinity (inf - inf would be NaN), else
 * max + log1p(exp(-|a - b|)); logaddexp2 in base 2 */
static inline TS_HD float ts_logaddexp_f(float a, float b) {
    if (isinf(a) && a == b) return a;
    const float m = a > b ? a : b;
    return m + log1pf(expf(-fabsf(a - b)));
}
static inline TS_HD double ts_logaddexp_d(double a, double b) {
    if (isinf(a) && a == b) return a;
    const double m = a > b ? a : b;
    return m + log1p(exp(-fabs(a - b)));
}
static inline TS_HD float ts_logaddexp2_f(float a, float b) {
    if (isinf(a) && a == b) return a;
    const float m = a > b ? a : b;
    return m + log1pf(exp2f(-fabsf(a - b))) * 1.44269504088896340736f;
}
static inline TS_HD double ts_logaddexp2_d(double a, double b) {
    if (isinf(a) && a == b) return a;
    const double m = a > b ? a : b;
    return m + log1p(exp2(-fabs(a - b))) * 1.44269504088896340736;
}
/* the cheap ones (libm calls or a few operations, which the CPU's loops keep inline), then
 * kernel_math_special.h's series and recurrences */
#define TS_SPECIAL_BINARY(X, ...)                                                                  \
    TS_SPECIAL_BASIC_BINARY(X, __VA_ARGS__)                                                        \
    TS_KMS_BINARY_OPS(X, __VA_ARGS__)
#define TS_SPECIAL_BASIC_BINARY(X, ...)                                                            \
    X(TS_B_XLOGY, xlogy, __VA_ARGS__)                                                              \
    X(TS_B_XLOG1PY, xlog1py, __VA_ARGS__)                                                          \
    X(TS_B_HYPOT, hypot, __VA_ARGS__)                                                              \
    X(TS_B_COPYSIGN, copysign, __VA_ARGS__)                                                        \
    X(TS_B_ATAN2, atan2, __VA_ARGS__)                                                              \
    X(TS_B_NEXTAFTER, nextafter, __VA_ARGS__)                                                      \
    X(TS_B_LOGADDEXP, logaddexp, __VA_ARGS__)                                                      \
    X(TS_B_LOGADDEXP2, logaddexp2, __VA_ARGS__)

/* ------------------------------------------------------------------ activation backwards
 * g is the incoming gradient; the second operand is what the forward saved (named below). The
 * formulas and their order of operations are PyTorch's CPU kernels (threshold_backward,
 * sigmoid_backward, tanh_backward, GeluBackward, silu_backward), so f32 results round alike. */
/* y = relu output (or input: same sign); a NaN passes the gradient like threshold_backward */
static inline TS_HD float ts_relu_bwd_f(float g, float y) { return y <= 0.0f ? 0.0f : g; }
static inline TS_HD double ts_relu_bwd_d(double g, double y) { return y <= 0.0 ? 0.0 : g; }
/* y = sigmoid output */
static inline TS_HD float ts_sigmoid_bwd_f(float g, float y) { return g * (1.0f - y) * y; }
static inline TS_HD double ts_sigmoid_bwd_d(double g, double y) { return g * (1.0 - y) * y; }
/* y = tanh output */
static inline TS_HD float ts_tanh_bwd_f(float g, float y) { return g * (1.0f - y * y); }
static inline TS_HD double ts_tanh_bwd_d(double g, double y) { return g * (1.0 - y * y); }
/* x = gelu input; exact erf form: g * (Phi(x) + x * phi(x)) */
static inline TS_HD float ts_gelu_bwd_f(float g, float x) {
    const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
    const float pdf = 0.39894228040143267794f * expf(x * x * -0.5f);
    return g * (cdf + x * pdf);
}
static inline TS_HD double ts_gelu_bwd_d(double g, double x) {
    const double cdf = 0.5 * (1.0 + erf(x * 0.70710678118654752440));
    const double pdf = 0.39894228040143267794 * exp(x * x * -0.5);
    return g * (cdf + x * pdf);
}
/* x = silu input: g * (s * (1 + x * (1 - s))), s = sigmoid(x). Not PyTorch's g * s * (...): g s
 * can fall below the normal floats (tiny g) while the result does not, and a subnormal product
 * keeps fewer digits (42 ulp seen). s (1 + x (1 - s)) = silu'(x) is normal wherever s is:
 * |1 + x (1 - s)| exceeds 1 except near its zero at x = -2.4, where s is 0.08 and the computed
 * factor, when not 0, about 2^-24 or more. So every intermediate is normal when s and the result
 * are; a subnormal s (x < -87.3) has lost its digits in sigmoid already. vec_math_impl.h's
 * tsv_silu_bwd takes the same order. */
static inline TS_HD float ts_silu_bwd_f(float g, float x) {
    const float s = ts_sigmoid_f(x);
    return g * (s * (1.0f + x * (1.0f - s)));
}
static inline TS_HD double ts_silu_bwd_d(double g, double x) {
    const double s = ts_sigmoid_d(x);
    return g * (s * (1.0 + x * (1.0 - s)));
}

/* ------------------------------------------------------------------ clamp, maximum, minimum */
/* min(max(x, lo), hi) like torch.clamp: a NaN x stays NaN, lo > hi gives hi. Pass -inf / +inf
 * (or the integer limits) for an unbounded side. */
static inline TS_HD float ts_clamp_f(float x, float lo, float hi) {
    float v = x < lo ? lo : x;
    return v > hi ? hi : v;
}
static inline TS_HD double ts_clamp_d(double x, double lo, double hi) {
    double v = x < lo ? lo : x;
    return v > hi ? hi : v;
}
static inline TS_HD int64_t ts_clamp_i64(int64_t x, int64_t lo, int64_t hi) {
    int64_t v = x < lo ? lo : x;
    return v > hi ? hi : v;
}
static inline TS_HD uint64_t ts_clamp_u64(uint64_t x, uint64_t lo, uint64_t hi) {
    uint64_t v = x < lo ? lo : x;
    return v > hi ? hi : v;
}
/* torch.maximum / torch.minimum: NaN in either operand gives NaN */
static inline TS_HD float ts_maximum_f(float a, float b) { return (a > b || a != a) ? a : b; }
static inline TS_HD float ts_minimum_f(float a, float b) { return (a < b || a != a) ? a : b; }
static inline TS_HD double ts_maximum_d(double a, double b) { return (a > b || a != a) ? a : b; }
static inline TS_HD double ts_minimum_d(double a, double b) { return (a < b || a != a) ? a : b; }

/* ------------------------------------------------------------------ integers */
/* Wrapping (two's complement) arithmetic: signed overflow would be undefined in C. */
static inline TS_HD int64_t ts_ipow_i64(int64_t base, int64_t exp) {
    if (exp < 0) { /* torch: 1 ** -n = 1, (-1) ** -n = +-1, anything else 0 */
        if (base == 1) return 1;
        if (base == -1) return (exp & 1) ? -1 : 1;
        return 0;
    }
    uint64_t r = 1, b = (uint64_t)base;
    uint64_t e = (uint64_t)exp;
    while (e) {
        if (e & 1u) r *= b;
        b *= b;
        e >>= 1;
    }
    return (int64_t)r;
}
/* Truncating division. Division by zero gives 0 instead of trapping; INT64_MIN / -1 wraps. */
static inline TS_HD int64_t ts_idiv_i64(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0u - (uint64_t)a);
    return a / b;
}
/* C % (sign of the dividend, = torch.fmod on integers). x % 0 gives 0 instead of trapping. */
static inline TS_HD int64_t ts_imod_i64(int64_t a, int64_t b) {
    if (b == 0 || b == -1) return 0;
    return a % b;
}
/* Python's // and % (torch.floor_divide, torch.remainder): the remainder takes the divisor's sign.
 * x // 0 and x % 0 give 0; INT64_MIN // -1 wraps. */
static inline TS_HD int64_t ts_irem_i64(int64_t a, int64_t b) {
    int64_t r = ts_imod_i64(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline TS_HD int64_t ts_ifloordiv_i64(int64_t a, int64_t b) {
    int64_t q = ts_idiv_i64(a, b), r = ts_imod_i64(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
/* uint64: unsigned quotient, remainder and power (x / 0 and x % 0 give 0) */
static inline TS_HD uint64_t ts_udiv_u64(uint64_t a, uint64_t b) { return b ? a / b : 0; }
static inline TS_HD uint64_t ts_umod_u64(uint64_t a, uint64_t b) { return b ? a % b : 0; }
static inline TS_HD uint64_t ts_upow_u64(uint64_t b, uint64_t e) {
    uint64_t r = 1;
    while (e) {
        if (e & 1u) r *= b;
        b *= b;
        e >>= 1;
    }
    return r;
}

#endif /* TS_KERNEL_MATH_H */
