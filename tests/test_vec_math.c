/* test_vec_math.c — the CPU's vectorised math (vec_kernels.h over vec_math_impl.h) on every ISA
 * this host has: each function against libm in double with a bound in ulps, the activations
 * against kernel_math.h's scalar formulas (what CUDA computes), the f16 / bf16 conversions bit for
 * bit against kernel_math.h's over all 65536 halves and many floats, and the same bits from every
 * ISA. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/vec_kernels.h"
#include "backend/kernel_math.h"
#include "backend/philox.h"
#include "ts_test.h"

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint32_t next_u32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static uint64_t next_u64(void) { return ((uint64_t)next_u32() << 32) | next_u32(); }

static float f_of(uint32_t u) { return ts_u32_as_f32(u); }
static double d_of(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* ulp of a float-rounded value of magnitude |r| (the spacing of floats there) */
static double ulp_f(double r) {
    float a = fabsf((float)r);
    if (a >= 3.4028235e38f) return ldexp(1.0, 104);
    return (double)nextafterf(a, INFINITY) - (double)a;
}
static double ulp_d(double r) {
    double a = fabs(r);
    if (a >= 1.7976931348623157e308) return ldexp(1.0, 971);
    return nextafter(a, INFINITY) - a;
}

/* Error of y against ref in ulps of ref, after an absolute allowance; both NaN (or both the same
 * infinity) count as exact, a NaN on one side only as infinitely wrong. */
static double err_ulps(double y, double ref, double atol, bool single) {
    if (isnan(ref) || isnan(y)) return isnan(ref) && isnan(y) ? 0 : INFINITY;
    if (isinf(ref) || isinf(y)) return y == ref ? 0 : INFINITY;
    double e = fabs(y - ref) - atol;
    return e <= 0 ? 0 : e / (single ? ulp_f(ref) : ulp_d(ref));
}

/* ------------------------------------------------------------------ inputs */
enum { NSAMPLE = 1 << 20 };
static float xs[NSAMPLE], ys[NSAMPLE], gs[NSAMPLE];

/* n floats spread over [lo, hi]: evenly in value, evenly in bit pattern (every binade gets its
 * share), and a few special values at the start */
static int64_t fill_range(float *x, int64_t n, float lo, float hi) {
    const float sp[] = {0.0f,    -0.0f,  INFINITY, -INFINITY,       NAN,    1.0f,  -1.0f,  0.625f,
                        -0.625f, 1e-30f, -1e-30f,  1.17549435e-38f, 1e-45f, 88.0f, -87.0f, 0.5f};
    int64_t k = 0;
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) x[k++] = sp[i];
    const int64_t half = (n - k) / 2;
    for (int64_t i = 0; i < half; i++) x[k++] = lo + (hi - lo) * (float)((double)i / (double)half);
    while (k < n) {
        float v = f_of(next_u32());
        if (v >= lo && v <= hi) x[k++] = v;
    }
    return n;
}

/* ------------------------------------------------------------------ against libm in double */
typedef double (*ref_fn)(double);
static double ref_onep_erf(double x) { return x < 0 ? erfc(-x) : 1.0 + erf(x); }

/* The largest error of vk->math_f32(fn) over [lo, hi] in ulps (absolute allowance atol), checked
 * against the bound. */
static void check_f32_fn(const ts_vec_kernels *vk, int fn, const char *name, ref_fn ref, float lo,
                         float hi, double atol, double bound) {
    fill_range(xs, NSAMPLE, lo, hi);
    vk->math_f32(fn, ys, xs, NSAMPLE);
    double worst = 0;
    float at = 0;
    for (int64_t i = 0; i < NSAMPLE; i++) {
        /* the reference of the float result: below FLT_MIN vec math flushes exp to 0 */
        double r = ref((double)xs[i]);
        double e = err_ulps(ys[i], r, atol, true);
        if (e > worst) worst = e, at = xs[i];
    }
    printf("  %-8s %-9s [%g, %g]: worst %.2f ulp at %.9g (bound %.1f)\n", tsi_cpu_isa_name(vk->isa),
           name, lo, hi, worst, at, bound);
    CHECK(worst <= bound);
}

static void test_f32_accuracy(const ts_vec_kernels *vk) {
    /* exp: the normal range of its results; below, 0 (checked apart) */
    check_f32_fn(vk, TSV_EXP, "exp", exp, -87.33f, 88.72f, 0, 2);
    check_f32_fn(vk, TSV_LOG, "log", log, 0.0f, 3.4e38f, 0, 2);
    check_f32_fn(vk, TSV_TANH, "tanh", tanh, -20.0f, 20.0f, 0, 3);
    check_f32_fn(vk, TSV_ERF, "erf", erf, -5.0f, 5.0f, 0, 1.04);
    /* 1 + erf(x) = erfc(-x): the tail keeps its relative accuracy (e^-x^2 carries x^2's rounding,
     * the division's variable its own: a few ulps over the whole range), measured at |x| <= 4 */
    check_f32_fn(vk, TSV_ONEP_ERF, "1+erf", ref_onep_erf, -4.0f, 4.0f, 0, 6);
    /* below exp's range: exactly 0; e^-inf = 0, e^inf = inf, NaN stays NaN; the float above log
     * FLT_MAX gives inf, the one below it and the one above log FLT_MIN their values */
    float x[9] = {-88.0f, -100.0f,     -INFINITY,   INFINITY,    NAN,
                  89.0f,  88.7228394f, 88.7228317f, -87.3365402f},
          y[9];
    vk->math_f32(TSV_EXP, y, x, 9);
    CHECK(y[0] == 0 && y[1] == 0 && y[2] == 0 && y[3] == INFINITY && isnan(y[4]) &&
          y[5] == INFINITY && y[6] == INFINITY);
    for (int i = 7; i < 9; i++) CHECK(err_ulps(y[i], exp((double)x[i]), 0, true) <= 2);
    float lx[5] = {-1.0f, 0.0f, INFINITY, NAN, 1e-45f}, ly[5];
    vk->math_f32(TSV_LOG, ly, lx, 5);
    CHECK(isnan(ly[0]) && ly[1] == -INFINITY && ly[2] == INFINITY && isnan(ly[3]));
    CHECK(fabs(ly[4] - log((double)1e-45f)) <= 2 * ulp_f(log((double)1e-45f)));
}

/* erfinv (unary_f32's double-vector formula) against kernel_math.h's ts_erfinv_d rounded: at most
 * 1 ulp on every 397th float of (0, 1), the 2000 floats below 1 and their negatives (the kernel
 * that ts_erfinv runs is checked on cpu by test_ops_special); +-1, out of range, NaN, +-0 as the
 * scalar function */
static void test_erfinv(const ts_vec_kernels *vk) {
    enum { SPREAD = 0x3f800000 / 397, TOP = 2000, N = 2 * (SPREAD + TOP) };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    int n = 0;
    for (uint32_t u = 1; u < 0x3f800000u && n + 2 <= 2 * SPREAD; u += 397, n += 2) {
        memcpy(&x[n], &u, sizeof u);
        x[n + 1] = -x[n];
    }
    for (uint32_t u = 0x3f800000u - TOP; u < 0x3f800000u; u++, n += 2) {
        memcpy(&x[n], &u, sizeof u);
        x[n + 1] = -x[n];
    }
    vk->unary_f32(TS_U_ERFINV, y, x, n);
    int worst = 0, at = 0;
    for (int i = 0; i < n; i++) {
        const float r = (float)ts_erfinv_d(x[i]);
        int32_t a, b;
        memcpy(&a, &y[i], 4), memcpy(&b, &r, 4);
        if (abs(a - b) > worst) worst = abs(a - b), at = i;
    }
    printf("  %-8s erfinv over %d floats: at most %d ulp (at %.9g)\n", tsi_cpu_isa_name(vk->isa), n,
           worst, x[at]);
    CHECK(worst <= 1);
    float sx[7] = {1.0f, -1.0f, 1.5f, -2.0f, NAN, 0.0f, -0.0f}, sy[7];
    vk->unary_f32(TS_U_ERFINV, sy, sx, 7);
    CHECK(sy[0] == INFINITY && sy[1] == -INFINITY && isnan(sy[2]) && isnan(sy[3]) && isnan(sy[4]) &&
          sy[5] == 0 && !signbit(sy[5]) && sy[6] == 0 && signbit(sy[6]));
    free(x), free(y);
}

/* lgamma (unary_f32's shifted Stirling series in double) against libm's double lgamma: within 1
 * ulp of float where |lgamma| >= 1 and 6e-8 absolute below (near its zeros at 1 and 2, which are
 * exactly 0), on 200,000 floats of (0, 60], the 1000 floats either side of 1 and of 2, tiny and
 * huge x; x <= 0, inf and NaN as lgammaf */
static void test_lgamma(const ts_vec_kernels *vk) {
    enum { N = 200000 + 4000 + 8 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    int n = 0;
    for (int i = 1; i <= 200000; i++) x[n++] = (float)(i * 3e-4);
    for (int c = 1; c <= 2; c++) {
        float up = (float)c, down = (float)c;
        for (int i = 0; i < 1000; i++)
            x[n++] = up = nextafterf(up, 100), x[n++] = down = nextafterf(down, 0);
    }
    const float edge[8] = {1.0f, 2.0f, 1e-45f, 1e-30f, 3e38f, 1e30f, 8.0f, 7.9999995f};
    for (int i = 0; i < 8; i++) x[n++] = edge[i];
    vk->unary_f32(TS_U_LGAMMA, y, x, n);
    double worst = 0;
    int at = 0;
    for (int i = 0; i < n; i++) {
        const double r = lgamma((double)x[i]);
        const float rf = (float)r; /* past float's range: inf */
        const double e =
            isinf(rf) ? (y[i] == rf ? 0 : INFINITY) : fabs(y[i] - r) / (ulp_f(fmax(fabs(r), 1.0)));
        if (!(e <= worst)) worst = e, at = i;
    }
    printf("  %-8s lgamma over %d floats: at most %.2f ulp (units of max(|y|, 1)) at %.9g\n",
           tsi_cpu_isa_name(vk->isa), n, worst, x[at]);
    CHECK(worst <= 1);
    float sx[6] = {1.0f, 2.0f, -0.5f, -2.0f, INFINITY, NAN}, sy[6];
    vk->unary_f32(TS_U_LGAMMA, sy, sx, 6);
    CHECK(sy[0] == 0 && sy[1] == 0 && sy[2] == lgammaf(-0.5f) && sy[3] == INFINITY &&
          sy[4] == INFINITY && isnan(sy[5]));
    free(x), free(y);
}

/* digamma (unary_f32's shifted asymptotic series in double) against kernel_math.h's double
 * ts_digamma_d: within 1 ulp of float in units of max(|psi|, 1) on 200,000 floats of (0, 60], the
 * 2000 floats around its root 1.4616; x <= 0, inf, NaN as the scalar function */
static void test_digamma(const ts_vec_kernels *vk) {
    enum { N = 200000 + 2000 + 3 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    int n = 0;
    for (int i = 1; i <= 200000; i++) x[n++] = (float)(i * 3e-4);
    float up = 1.4616321f, down = up;
    for (int i = 0; i < 1000; i++)
        x[n++] = up = nextafterf(up, 100), x[n++] = down = nextafterf(down, 0);
    x[n++] = 1e-45f, x[n++] = 3e38f, x[n++] = 9.9999990f;
    vk->unary_f32(TS_U_DIGAMMA, y, x, n);
    double worst = 0;
    int at = 0;
    for (int i = 0; i < n; i++) {
        const float rf = (float)ts_digamma_d(x[i]);
        const double r = ts_digamma_d(x[i]);
        const double e =
            isinf(rf) ? (y[i] == rf ? 0 : INFINITY) : fabs(y[i] - r) / ulp_f(fmax(fabs(r), 1.0));
        if (!(e <= worst)) worst = e, at = i;
    }
    printf("  %-8s digamma over %d floats: at most %.2f ulp (units of max(|y|, 1)) at %.9g\n",
           tsi_cpu_isa_name(vk->isa), n, worst, x[at]);
    CHECK(worst <= 1);
    float sx[5] = {0.0f, -0.0f, -2.5f, INFINITY, NAN}, sy[5];
    vk->unary_f32(TS_U_DIGAMMA, sy, sx, 5);
    for (int i = 0; i < 5; i++) {
        const float r = ts_digamma_f(sx[i]);
        CHECK(sy[i] == r || (isnan(sy[i]) && isnan(r)));
    }
    free(x), free(y);
}

/* lgamma's and erfinv's fast paths (unary_f32: another formula, or the same with fused
 * multiply-adds, used only where a filter shows it rounds as the exact formula does) against their
 * exact formulas alone (math_f32's TSV_LGAMMA_EXACT / TSV_ERFINV_EXACT), bit for bit: on every
 * 61st float of [0, inf] (lgamma) and of (-1, 1) (erfinv), every float within 2^16 of lgamma's
 * zeros 1 and 2 (where its absolute margin matters), every 4099th negative one, and the 63 inputs
 * where lgamma's fast formula alone rounds otherwise (over every positive float, with and without
 * fused multiply-adds; the filter must send them to the exact formula; erfinv's has none).
 * TS_TEST_EXHAUSTIVE=1 checks every float of those ranges instead (minutes per ISA). */
static const uint32_t lgamma_ties[] = {
    0x1a8446cb, 0x1f116ab8, 0x2caa0a85, 0x3e495843, 0x3f3dc0d0, 0x3f7d688f, 0x3f7e646c, 0x3f7f7df3,
    0x3f7fddbf, 0x3f7ffafc, 0x3f7fffc5, 0x3f7fffe2, 0x3f7ffffe, 0x3f800001, 0x3f800002, 0x3f800003,
    0x3f800004, 0x3f800006, 0x3f80000a, 0x3f80005e, 0x3f800091, 0x3f8000d4, 0x3f8000e0, 0x3f80014c,
    0x3f8002b6, 0x3f800390, 0x3f8006b6, 0x3f8006bd, 0x3f8013ab, 0x3f801c09, 0x3f801e59, 0x3f8035fa,
    0x3f80427a, 0x3f80d746, 0x3f810397, 0x3f814e28, 0x3f8219cb, 0x3f82208c, 0x3f84ffdb, 0x3f8956dc,
    0x3f8d0215, 0x3f8e5f14, 0x3fa02e57, 0x3fa21aa5, 0x3fbee3d4, 0x3fee9415, 0x3ffe472e, 0x3ffeb1b1,
    0x3ffffb5e, 0x3fffff22, 0x3ffffffd, 0x3fffffff, 0x40000001, 0x40000002, 0x40000010, 0x40000021,
    0x40000023, 0x4000004d, 0x4000006d, 0x400000cb, 0x40007bea, 0x4002e08d, 0x401affe4};
/* the floats of [lo, hi) a step apart, through unary_f32's op and math_f32's exact fn in blocks;
 * returns the number of differences (printing the first) */
static int64_t fast_vs_exact(const ts_vec_kernels *vk, ts_unary_op op, int fn, uint64_t lo,
                             uint64_t hi, uint64_t step, int64_t *count) {
    enum { B = 1 << 14 };
    static float x[B], a[B], b[B];
    int64_t bad = 0;
    for (uint64_t u = lo; u < hi;) {
        int m = 0;
        for (; m < B && u < hi; u += step) x[m++] = f_of((uint32_t)u);
        vk->unary_f32(op, a, x, m);
        vk->math_f32(fn, b, x, m);
        for (int i = 0; i < m; i++)
            if (memcmp(&a[i], &b[i], 4) != 0 && !(isnan(a[i]) && isnan(b[i])) && bad++ == 0)
                printf("  first difference at %.9g: %.9g, exact %.9g\n", x[i], a[i], b[i]);
        *count += m;
    }
    return bad;
}
static void test_fast_paths(const ts_vec_kernels *vk) {
    const char *ex = getenv("TS_TEST_EXHAUSTIVE");
    const uint64_t step = ex && ex[0] == '1' ? 1 : 61, nstep = ex && ex[0] == '1' ? 1 : 4099;
    int64_t n = 0, bad = 0;
    bad += fast_vs_exact(vk, TS_U_LGAMMA, TSV_LGAMMA_EXACT, 0, 0x7f800001u, step, &n);
    bad += fast_vs_exact(vk, TS_U_LGAMMA, TSV_LGAMMA_EXACT, 0x80000000u, 0x100000000u, nstep, &n);
    for (uint32_t c = 0x3f800000u; c <= 0x40000000u; c += 0x00800000u)
        bad += fast_vs_exact(vk, TS_U_LGAMMA, TSV_LGAMMA_EXACT, c - 65536, c + 65536, 1, &n);
    for (size_t i = 0; i < sizeof lgamma_ties / sizeof lgamma_ties[0]; i++)
        bad += fast_vs_exact(vk, TS_U_LGAMMA, TSV_LGAMMA_EXACT, lgamma_ties[i], lgamma_ties[i] + 1u,
                             1, &n);
    printf("  %-8s lgamma's fast path over %lld floats: %lld differences from the exact formula\n",
           tsi_cpu_isa_name(vk->isa), (long long)n, (long long)bad);
    CHECK_EQ(bad, 0);
    n = 0, bad = 0;
    bad += fast_vs_exact(vk, TS_U_ERFINV, TSV_ERFINV_EXACT, 0, 0x3f800001u, step, &n);
    bad += fast_vs_exact(vk, TS_U_ERFINV, TSV_ERFINV_EXACT, 0x80000000u, 0xbf800001u, step, &n);
    printf("  %-8s erfinv's fast path over %lld floats: %lld differences from the exact formula\n",
           tsi_cpu_isa_name(vk->isa), (long long)n, (long long)bad);
    CHECK_EQ(bad, 0);
}

static void test_f64_accuracy(const ts_vec_kernels *vk) {
    static double x[NSAMPLE / 4], y[NSAMPLE / 4];
    const int64_t n = NSAMPLE / 4;
    const struct {
        int fn;
        const char *name;
        ref_fn ref;
        double lo, hi, atol, bound;
    } cases[] = {
        {TSV_EXP, "exp", exp, -708.3, 709.7, 0, 2},
        {TSV_LOG, "log", log, 0, 1.7e308, 0, 2},
        /* the Box-Muller angle lies in [0, 2 pi); near a zero of cos the reduction's second
         * part leaves an absolute error of j * 2^-53 * 6e-11 */
        {TSV_COS, "cos", cos, -8, 8, 1e-25, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int64_t i = 0; i < n; i++) {
            if (i < n / 2) {
                x[i] = cases[c].lo + (cases[c].hi - cases[c].lo) * ((double)i / (double)(n / 2));
            } else {
                double v;
                do v = d_of(next_u64());
                while (!(v >= cases[c].lo && v <= cases[c].hi));
                x[i] = v;
            }
        }
        x[0] = 0, x[1] = 1, x[2] = -0.0, x[3] = 1e-310;
        vk->math_f64(cases[c].fn, y, x, n);
        double worst = 0, at = 0;
        for (int64_t i = 0; i < n; i++) {
            if (cases[c].fn == TSV_LOG && x[i] < 0) continue;
            double e = err_ulps(y[i], cases[c].ref(x[i]), cases[c].atol, false);
            if (e > worst) worst = e, at = x[i];
        }
        printf("  %-8s %-9s [%g, %g]: worst %.2f ulp at %.17g (bound %.1f)\n",
               tsi_cpu_isa_name(vk->isa), cases[c].name, cases[c].lo, cases[c].hi, worst, at,
               cases[c].bound);
        CHECK(worst <= cases[c].bound);
    }
    double sx[4] = {INFINITY, -INFINITY, NAN, -746}, sy[4];
    vk->math_f64(TSV_EXP, sy, sx, 4);
    CHECK(sy[0] == INFINITY && sy[1] == 0 && isnan(sy[2]) && sy[3] == 0);
    double lx[4] = {-1, 0, INFINITY, NAN}, ly[4];
    vk->math_f64(TSV_LOG, ly, lx, 4);
    CHECK(isnan(ly[0]) && ly[1] == -INFINITY && ly[2] == INFINITY && isnan(ly[3]));
}

/* ------------------------------------------------------------------ fused multiply-add */
/* tsv_fma against libm's fmaf, bit for bit: random operands, products of short mantissas plus a
 * tiny addend (where a b lies halfway between two floats and only the addend decides: what a
 * double sum rounded to float gets wrong), the same below the normal floats, and the specials. */
static float short_f(int bits, int e) { /* odd `bits`-bit mantissa times 2^e, random sign */
    const uint32_t m = (next_u32() >> (32 - bits)) | 1u | (1u << (bits - 1));
    return (next_u32() & 1 ? -1.0f : 1.0f) * ldexpf((float)m, e);
}
static void test_fma(const ts_vec_kernels *vk) {
    enum { NF = 1 << 18 };
    static float a[NF], b[NF], c[NF], y[NF];
    const uint64_t rng_saved = rng; /* the other tests see the inputs they saw without this one */
    const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, 1e-45f, 3.4e38f};
    int64_t n = 0;
    for (size_t i = 0; i < 9; i++)
        for (size_t j = 0; j < 9; j++)
            for (size_t k = 0; k < 9; k++) a[n] = sp[i], b[n] = sp[j], c[n++] = sp[k];
    a[n] = b[n] = 1 + 0x1p-12f, c[n++] = 0x1p-80f; /* 1 + 2^-11 + 2^-24 + 2^-80: rounds up */
    a[n] = b[n] = 1 + 0x1p-12f, c[n++] = -0x1p-80f;
    while (n < NF) {
        const int kind = (int)(n % 4);
        if (kind == 0) { /* random bits */
            a[n] = f_of(next_u32()), b[n] = f_of(next_u32()), c[n] = f_of(next_u32());
        } else if (kind == 1) { /* random values near each other's scale */
            a[n] = short_f(24, (int)(next_u32() % 40) - 43);
            b[n] = short_f(24, (int)(next_u32() % 40) - 43);
            c[n] = short_f(24, (int)(next_u32() % 60) - 80);
        } else if (kind == 2) { /* a b of up to 26 bits, plus an addend far below its last bit */
            a[n] = short_f(13, -12), b[n] = short_f(13, -12);
            c[n] = fabsf(a[n] * b[n]) * short_f(24, -23 - 30 - (int)(next_u32() % 40));
        } else { /* below the normal floats: a b = A B 2^-180 with A B = 2^30 + 1 (mod 2^31),
                    plus c of about 2^-127: the sum in double loses its last bit, and what is left
                    lies halfway between two subnormal floats */
            uint32_t A, B;
            do {
                A = (next_u32() >> 8) | 1u, B = A;
                for (int it = 0; it < 5; it++) B *= 2u - A * B; /* 1 / A mod 2^32 */
                B = (B * ((1u << 30) + 1u)) & 0x7fffffffu;
            } while (B >= 1u << 24);
            a[n] = ldexpf((float)A, -90) * (next_u32() & 1 ? -1.0f : 1.0f);
            b[n] = ldexpf((float)B, -90);
            c[n] = ldexpf((float)((1u << 22) + (next_u32() >> 10)), -149);
        }
        n++;
    }
    rng = rng_saved;
    vk->fma_f32(y, a, b, c, NF);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < NF; i++) {
        const float r = fmaf(a[i], b[i], c[i]);
        if (memcmp(&r, &y[i], 4) != 0 && !(isnan(r) && isnan(y[i])))
            bad++, first = first < 0 ? i : first;
    }
    if (first >= 0)
        printf("  first at %lld: fma(%a, %a, %a) = %a, fmaf %a\n", (long long)first, a[first],
               b[first], c[first], y[first], fmaf(a[first], b[first], c[first]));
    printf("  %-8s fma: %lld of %d differ from fmaf\n", tsi_cpu_isa_name(vk->isa), (long long)bad,
           NF);
    CHECK_EQ(bad, 0);
}

/* ------------------------------------------------------------------ the activations */
/* Each vectorised op against the scalar formula of kernel_math.h evaluated in double (the exact
 * value of the formula) and against the same formula in float (what CUDA and the f32 scalar path
 * compute), in ulps of the result. Where a formula subtracts nearly equal terms no float
 * evaluation can hold a relative bound: 1 + erf(z) for z < 0 (in the float formula; the vector
 * form takes erfc(-z)), cdf + x pdf and 1 + x (1 - s) in the backwards, whose results
 * cross zero, and 1 - s itself. There the allowance is 8 float roundings of what cancelled: the
 * terms' absolute values summed (`scale_v` for the vector form, `scale_f` for libm's) minus the
 * result's, plus 1e-9 for gelu's far tails, where x^2's rounding in e^(-x^2/2) weighs x^2 ulps
 * (values below 1e-5 there). */
typedef struct act_case {
    const char *name;
    ts_unary_op uop;  /* or */
    ts_binary_op bop; /* (TS_B_COUNT when a unary op) */
    double (*ref_d)(double g, double x);
    float (*ref_f)(float g, float x);
    double (*scale_v)(double g, double x); /* NULL: no cancellation */
    double (*scale_f)(double g, double x);
    float lo, hi;
    double bound_d, bound_f, atol;
} act_case;

static double r_sigmoid_d(double g, double x) { return (void)g, ts_sigmoid_d(x); }
static float r_sigmoid_f(float g, float x) { return (void)g, ts_sigmoid_f(x); }
static double r_silu_d(double g, double x) { return (void)g, ts_silu_d(x); }
static float r_silu_f(float g, float x) { return (void)g, ts_silu_f(x); }
/* gelu's formula rounds x / sqrt 2 to float before erf (ts_gelu_f, CUDA, PyTorch): the double
 * reference takes that rounded z, so the comparison measures the rest of the evaluation */
static double z_f(double x) { return (double)((float)x * 0.70710678118654752440f); }
static double r_gelu_d(double g, double x) {
    return (void)g, x * 0.5 * (x < 0 ? erfc(-z_f(x)) : 1.0 + erf(z_f(x)));
}
static float r_gelu_f(float g, float x) { return (void)g, ts_gelu_f(x); }
static double r_tanh_d(double g, double x) { return (void)g, tanh(x); }
static float r_tanh_f(float g, float x) { return (void)g, tanhf(x); }
static double r_exp_d(double g, double x) { return (void)g, exp(x); }
static float r_exp_f(float g, float x) { return (void)g, expf(x); }
static double r_log_d(double g, double x) { return (void)g, log(x); }
static float r_log_f(float g, float x) { return (void)g, logf(x); }
static double r_gelu_bwd_d(double g, double x) {
    const double cdf = 0.5 * (x < 0 ? erfc(-z_f(x)) : 1.0 + erf(z_f(x)));
    return g * (cdf + x * 0.39894228040143267794 * exp(x * x * -0.5));
}
static float r_gelu_bwd_f(float g, float x) { return ts_gelu_bwd_f(g, x); }
static double r_silu_bwd_d(double g, double x) { return ts_silu_bwd_d(g, x); }
static float r_silu_bwd_f(float g, float x) { return ts_silu_bwd_f(g, x); }
/* the magnitude of 1 + erf(z) as computed: 1 + |erf| where it cancels (z < 0 in the float
 * formula; the vector form takes erfc(-z) there and never cancels) */
static double onep_erf_mag(double z, bool vec) {
    return z < 0 && !vec ? 1 + fabs(erf(z)) : 1 + erf(z);
}
static double gelu_mag(double x, bool vec) {
    return 0.5 * fabs(x) * onep_erf_mag(x * 0.70710678118654752440, vec);
}
static double s_gelu_v(double g, double x) { return (void)g, gelu_mag(x, true); }
static double s_gelu_f(double g, double x) { return (void)g, gelu_mag(x, false); }
static double gelu_bwd_mag(double g, double x, bool vec) {
    const double cdf = 0.5 * onep_erf_mag(x * 0.70710678118654752440, vec);
    return fabs(g) * (cdf + fabs(x) * 0.39894228040143267794 * exp(-0.5 * x * x));
}
static double s_gelu_bwd_v(double g, double x) { return gelu_bwd_mag(g, x, true); }
static double s_gelu_bwd_f(double g, double x) { return gelu_bwd_mag(g, x, false); }
/* g s (1 + x (1 - s)): 1 - s cancels s, then 1 + x (1 - s) */
static double s_silu_bwd(double g, double x) {
    const double s = ts_sigmoid_d(x);
    return fabs(g) * s * (1 + fabs(x) * (1 - s) + fabs(x) * s);
}

static void test_activations(const ts_vec_kernels *vk) {
    const act_case cases[] = {
        {"exp", TS_U_EXP, TS_B_COUNT, r_exp_d, r_exp_f, NULL, NULL, -87.3f, 88.7f, 2, 3, 0},
        {"log", TS_U_LOG, TS_B_COUNT, r_log_d, r_log_f, NULL, NULL, 1e-30f, 1e30f, 2, 3, 0},
        {"tanh", TS_U_TANH, TS_B_COUNT, r_tanh_d, r_tanh_f, NULL, NULL, -10, 10, 3, 4, 0},
        {"sigmoid", TS_U_SIGMOID, TS_B_COUNT, r_sigmoid_d, r_sigmoid_f, NULL, NULL, -80, 80, 4, 5,
         0},
        {"silu", TS_U_SILU, TS_B_COUNT, r_silu_d, r_silu_f, NULL, NULL, -80, 80, 5, 6, 0},
        {"gelu", TS_U_GELU, TS_B_COUNT, r_gelu_d, r_gelu_f, s_gelu_v, s_gelu_f, -12, 12, 6, 8,
         1e-9},
        {"gelu_bwd", TS_U_COUNT, TS_B_GELU_BWD, r_gelu_bwd_d, r_gelu_bwd_f, s_gelu_bwd_v,
         s_gelu_bwd_f, -12, 12, 6, 8, 1e-9},
        {"silu_bwd", TS_U_COUNT, TS_B_SILU_BWD, r_silu_bwd_d, r_silu_bwd_f, s_silu_bwd, s_silu_bwd,
         -80, 80, 6, 8, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const act_case *k = &cases[c];
        fill_range(xs, NSAMPLE, k->lo, k->hi);
        for (int64_t i = 0; i < NSAMPLE; i++) gs[i] = (float)((next_u32() >> 8) * 0x1p-23 - 1.0);
        if (k->bop == TS_B_COUNT)
            vk->unary_f32(k->uop, ys, xs, NSAMPLE);
        else
            vk->bwd_f32(k->bop, ys, gs, xs, NSAMPLE);
        double wd = 0, wf = 0;
        float atd = 0, atf = 0;
        for (int64_t i = 0; i < NSAMPLE; i++) {
            const float g = k->bop == TS_B_COUNT ? 1.0f : gs[i];
            const double rd = k->ref_d(g, xs[i]), rf = k->ref_f(g, xs[i]);
            /* 8 roundings of what cancelled in the vector form, and in both for the float one */
            const double cv = k->scale_v ? k->scale_v(g, xs[i]) - fabs(rd) : 0;
            const double cf = k->scale_f ? k->scale_f(g, xs[i]) - fabs(rd) : 0;
            const double ed = err_ulps(ys[i], rd, k->atol + 8 * 0x1p-24 * fmax(cv, 0), true);
            const double ef =
                err_ulps(ys[i], rf, k->atol + 8 * 0x1p-24 * (fmax(cv, 0) + fmax(cf, 0)), true);
            if (ed > wd) wd = ed, atd = xs[i];
            if (ef > wf) wf = ef, atf = xs[i];
        }
        printf("  %-8s %-9s: worst %.2f ulp against double at %.9g (bound %.0f), %.2f against "
               "the float formula at %.9g (bound %.0f)\n",
               tsi_cpu_isa_name(vk->isa), k->name, wd, atd, k->bound_d, wf, atf, k->bound_f);
        CHECK(wd <= k->bound_d);
        CHECK(wf <= k->bound_f);
    }
}

/* silu's backward where g s falls below the normal floats but the result g s (1 + x (1 - s)) does
 * not: x in [-87, -4] (s = sigmoid(x) normal, |1 + x (1 - s)| from 3 to 86) and in [0, 3]
 * (1 + x (1 - s) up to 1.28), g chosen so that g s lies in [FLT_MIN / |1 + x (1 - s)|, FLT_MIN).
 * A product rounded among the subnormals keeps fewer digits (g 1e-38 .. 1e-4 here; 31.7 ulp was
 * once seen on other inputs); the vector and scalar forms must both hold the bound there. */
static void test_silu_bwd_tiny_g(const ts_vec_kernels *vk) {
    enum { NT = 1 << 16 };
    static float x[NT], g[NT], y[NT];
    const uint64_t rng_saved = rng; /* the other tests see the inputs they saw without this one */
    int64_t n = 0;
    while (n < NT) {
        const double xv = n % 4 ? -4 - 83 * (next_u32() * 0x1p-32) : 3 * (next_u32() * 0x1p-32);
        const double s = ts_sigmoid_d((float)xv), h = fabs(1 + (float)xv * (1 - s));
        /* g s between FLT_MIN / h (times a margin for g's rounding) and FLT_MIN, log-uniform */
        const double lo = log(0x1p-126 / h * (1 + 0x1p-20)), hi = log(0x1p-126 * (1 - 0x1p-20));
        if (lo >= hi) continue;
        x[n] = (float)xv;
        g[n] = (float)(exp(lo + (hi - lo) * (next_u32() * 0x1p-32)) / s);
        if (fabs(ts_silu_bwd_d(g[n], x[n])) >= 0x1p-126 && g[n] * s < 0x1p-126) n++;
    }
    rng = rng_saved;
    vk->bwd_f32(TS_B_SILU_BWD, y, g, x, NT);
    double wv = 0, ws = 0, gmin = INFINITY, gmax = 0;
    float atv = 0, ats = 0;
    for (int64_t i = 0; i < NT; i++) {
        const double r = ts_silu_bwd_d(g[i], x[i]);
        const double ev = err_ulps(y[i], r, 0, true),
                     es = err_ulps(ts_silu_bwd_f(g[i], x[i]), r, 0, true);
        if (ev > wv) wv = ev, atv = x[i];
        if (es > ws) ws = es, ats = x[i];
        gmin = fmin(gmin, g[i]), gmax = fmax(gmax, g[i]);
    }
    printf("  %-8s silu_bwd, g s subnormal (g %.1e .. %.1e): worst %.2f ulp at %.9g (vector), "
           "%.2f at %.9g (scalar float), bound 6\n",
           tsi_cpu_isa_name(vk->isa), gmin, gmax, wv, atv, ws, ats);
    CHECK(wv <= 6);
    CHECK(ws <= 6);
}

/* ------------------------------------------------------------------ normal random numbers */
static void test_box_muller(const ts_vec_kernels *vk) {
    enum { N = 1 << 16 };
    static double u1[N], u2[N], y[N];
    for (int i = 0; i < N; i++) {
        u1[i] = (double)(next_u64() >> 11) * 0x1p-53;
        u2[i] =
            i < N / 2 ? (double)(next_u64() >> 11) * 0x1p-53 : (double)(next_u32() >> 8) * 0x1p-24;
    }
    u1[0] = 0, u2[0] = 0, u1[1] = 1 - 0x1p-53, u2[1] = 0.25, u2[2] = 0.5, u2[3] = 0.75;
    vk->normal_f64(y, u1, u2, 0.0, 1.0, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double r = ts_philox_box_muller(u1[i], u2[i]);
        double e = err_ulps(y[i], r, 1e-25, false);
        worst = e > worst ? e : worst;
    }
    printf("  %-8s box-muller: worst %.2f ulp against ts_philox_box_muller (bound 4)\n",
           tsi_cpu_isa_name(vk->isa), worst);
    CHECK(worst <= 4);
}

/* ------------------------------------------------------------------ f16 / bf16 */
static void test_conversions(const ts_vec_kernels *vk) {
    enum { NF = 1 << 20 };
    static uint16_t h[65536], h2[NF];
    static float f[NF];
    /* every half, both directions: half -> float -> half is the identity (NaN quiet) */
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    vk->f16_to_f32(f, h, 65536);
    int bad = 0;
    for (int i = 0; i < 65536; i++) {
        float r = ts_f16_to_f32(h[i]);
        bad += memcmp(&r, &f[i], 4) != 0;
    }
    vk->bf16_to_f32(f, h, 65536);
    for (int i = 0; i < 65536; i++) {
        float r = ts_bf16_to_f32(h[i]);
        bad += memcmp(&r, &f[i], 4) != 0;
    }
    /* floats: every half's value and its neighbours (the ties and both sides of them, across
     * every binade, subnormals, overflow to inf, NaN payloads), then random bit patterns */
    int64_t n = 0;
    for (int i = 0; i < 65536; i++) {
        uint32_t u = ts_f32_as_u32(ts_f16_to_f32((uint16_t)i));
        const uint32_t tie = u + 0x1000u; /* halfway to the next half (normal halves) */
        f[n++] = f_of(u), f[n++] = f_of(tie), f[n++] = f_of(tie - 1), f[n++] = f_of(tie + 1);
    }
    for (int i = 0; i < 65536; i++) { /* bf16 ties */
        uint32_t u = (uint32_t)i << 16;
        f[n++] = f_of(u | 0x8000u), f[n++] = f_of(u | 0x7fffu), f[n++] = f_of(u | 0x8001u);
    }
    while (n < NF) f[n++] = f_of(next_u32());
    vk->f32_to_f16(h2, f, NF);
    for (int64_t i = 0; i < NF; i++) bad += h2[i] != ts_f32_to_f16(f[i]);
    vk->f32_to_bf16(h2, f, NF);
    for (int64_t i = 0; i < NF; i++) bad += h2[i] != ts_f32_to_bf16(f[i]);
    /* odd lengths: the tails */
    for (int len = 0; len < 40; len++) {
        float a[40];
        uint16_t b[41];
        b[len] = 0xabcd;
        vk->f32_to_f16(b, f + 70000, len);
        for (int i = 0; i < len; i++) bad += b[i] != ts_f32_to_f16(f[70000 + i]);
        bad += b[len] != 0xabcd;
        vk->f16_to_f32(a, h + 15000, len);
        for (int i = 0; i < len; i++) bad += a[i] != ts_f16_to_f32(h[15000 + i]);
    }
    printf("  %-8s f16/bf16 conversions: %d differences from kernel_math.h\n",
           tsi_cpu_isa_name(vk->isa), bad);
    CHECK_EQ(bad, 0);
}

/* ------------------------------------------------------------------ every ISA alike */
static void run_all(const ts_vec_kernels *vk, float *out, int64_t n, double *sums) {
    static const ts_unary_op uops[] = {TS_U_EXP,     TS_U_LOG,  TS_U_TANH,
                                       TS_U_SIGMOID, TS_U_GELU, TS_U_SILU};
    int64_t k = 0;
    for (size_t u = 0; u < sizeof uops / sizeof uops[0]; u++, k += n)
        vk->unary_f32(uops[u], out + k, xs, n);
    vk->bwd_f32(TS_B_GELU_BWD, out + k, gs, xs, n), k += n;
    vk->bwd_f32(TS_B_SILU_BWD, out + k, gs, xs, n), k += n;
    vk->math_f32(TSV_ERF, out + k, xs, n), k += n;
    /* erfinv over (-1, 1) (both of its polynomials) and, past the end, +-1, out of range, NaN */
    static float xe[4096 + 5];
    for (int64_t i = 0; i < n; i++) xe[i] = xs[i] / 30.0f;
    const float special[5] = {1.0f, -1.0f, 1.5f, -0.0f, NAN};
    memcpy(xe + n - 5, special, sizeof special);
    vk->unary_f32(TS_U_ERFINV, out + k, xe, n), k += n;
    vk->unary_f32(TS_U_LGAMMA, out + k, xs, n), k += n; /* negatives: libm's, the rest vectors */
    vk->unary_f32(TS_U_DIGAMMA, out + k, xs, n), k += n;
    /* softmax and log_softmax rows and their gradients (from those outputs) */
    vk->softmax_row_f32(out + k, xs, n, false), k += n;
    vk->softmax_row_f32(out + k, xs, n, true), k += n;
    vk->softmax_bwd_row_f32(out + k, out + k - 2 * n, gs, n, false), k += n;
    vk->softmax_bwd_row_f32(out + k, out + k - 2 * n, gs, n, true), k += n;
    const float m = vk->max_f32(xs, n);
    out[k++] = m;
    sums[0] = vk->exp_sum_f32(out + k, xs, m, n);
    static double xd[4096], yd[4096];
    for (int i = 0; i < 4096; i++) xd[i] = xs[i];
    sums[1] = vk->exp_sum_f64(xd, 3.0, 4093);
    vk->normal_f64(yd, xd, xd + 7, 0.5, 1.5, 4001);
    sums[2] = 0;
    for (int i = 0; i < 4001; i++) sums[2] += yd[i] * (i + 1);
}

/* bit for bit, except that any NaN equals any NaN */
static bool same_floats(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, 4) != 0 && !(isnan(a[i]) && isnan(b[i]))) {
            printf("  first difference at %lld: %.9g and %.9g\n", (long long)i, a[i], b[i]);
            return false;
        }
    return true;
}

static void test_same_bits(void) {
    enum { N = 4093 };                       /* not a multiple of any width */
    const int64_t per = 17 * (int64_t)N + 1; /* run_all's floats */
    static float ref[17 * 4096 + 1 + 4096], got[17 * 4096 + 1 + 4096];
    fill_range(xs, N, -30.0f, 30.0f);
    for (int i = 0; i < N; i++) /* finite, so the sums are numbers */
        xs[i] = fabsf(xs[i]) < 1e-30f || !isfinite(xs[i]) ? 0.5f : xs[i];
    for (int i = 0; i < 4096; i++) gs[i] = (float)i / 4096.0f - 0.5f;
    double rs[3], gs3[3];
    run_all(tsi_vec_kernels_for(TS_ISA_GENERIC), ref, N, rs);
    for (int isa = TS_ISA_AVX2; isa < TS_ISA_COUNT; isa++) {
        const ts_vec_kernels *vk = tsi_vec_kernels_for((ts_cpu_isa)isa);
        if (!vk) continue;
        run_all(vk, got, N, gs3);
        bool same = same_floats(ref, got, per) && memcmp(rs, gs3, sizeof rs) == 0;
        if (!same)
            printf("  sums %.17g %.17g %.17g / %.17g %.17g %.17g\n", rs[0], rs[1], rs[2], gs3[0],
                   gs3[1], gs3[2]);
        printf("  %s gives the generic variant's bits: %s\n", tsi_cpu_isa_name((ts_cpu_isa)isa),
               same ? "yes" : "NO");
        CHECK(same);
    }
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    for (int isa = 0; isa < TS_ISA_COUNT; isa++) {
        const ts_vec_kernels *vk = tsi_vec_kernels_for((ts_cpu_isa)isa);
        if (!vk) {
            printf("%s: not on this CPU\n", tsi_cpu_isa_name((ts_cpu_isa)isa));
            continue;
        }
        printf("%s:\n", tsi_cpu_isa_name((ts_cpu_isa)isa));
        test_fma(vk);
        test_f32_accuracy(vk);
        test_erfinv(vk);
        test_lgamma(vk);
        test_digamma(vk);
        test_fast_paths(vk);
        test_f64_accuracy(vk);
        test_activations(vk);
        test_silu_bwd_tiny_g(vk);
        test_box_muller(vk);
        test_conversions(vk);
    }
    test_same_bits();
    CHECK(tsi_vec_kernels_get() == tsi_vec_kernels_for(ts_cpu_isa_get()));
    return ts_test_finish();
}
