/* test_ops_special.c — issue 52's special elementwise functions (lgamma, digamma, polygamma,
 * erfinv, i0/i0e/i1/i1e, sinc, logit, nan_to_num, expm1/exp2/log2/log10/erfc, trunc/fix/frac, sgn,
 * signbit, deg2rad/rad2deg; xlogy, xlog1py, hypot, copysign, atan2, nextafter, ldexp, float_power,
 * logaddexp/logaddexp2, remainder's gradient) on every device: sweeps against long double
 * references (the largest error printed in ulps and bounded), PyTorch's values at the edges (0,
 * -0, poles, +-inf, NaN), result dtypes and the refusals, and ts_gradcheck of each differentiable
 * op. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define NS   1001 /* points per sweep */
#define PI_L 3.141592653589793238462643383279502884L

/* ------------------------------------------------------------------ tensors */
static ts_tensor *mk(const double *v, int64_t n, ts_dtype dt, ts_device d) {
    return ts_to(ts_to_dtype(ts_tensor_f64(TS_SHAPE(n), v, (ts_opts){.device = ts_cpu()}), dt), d);
}
/* the same value, or both NaN; zeros by sign when sz */
static bool same(double a, double b, bool sz) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    if (a == 0 && b == 0 && sz) return signbit(a) == signbit(b);
    return a == b;
}

/* ------------------------------------------------------------------ long double references */
static long double ref_digamma(long double x) {
    if (x == 0) return x == 0 && signbit(x) ? INFINITY : -INFINITY;
    long double r = 0;
    if (x < 0) {
        if (x == floorl(x)) return NAN;
        r = -PI_L / tanl(PI_L * (x - rintl(x)));
        x = 1 - x;
    }
    for (; x < 40; x += 1) r -= 1 / x;
    const long double y = 1 / (x * x);
    return r + logl(x) - 0.5L / x - y / 12 + y * y / 120 - y * y * y / 252 + y * y * y * y / 240;
}
/* (-1)^(n+1) n! sum_k 1 / (x + k)^(n+1): 500 terms, then Euler-Maclaurin's integral, half term and
 * two Bernoulli corrections; trigamma reflects below 1/2 */
static long double ref_polygamma(int n, long double x) {
    if (n == 0) return ref_digamma(x);
    if (n == 1 && x < 0.5L) {
        long double s = sinl(PI_L * (x - rintl(x)));
        return PI_L * PI_L / (s * s) - ref_polygamma(1, 1 - x);
    }
    long double s = 0, f = 1;
    const int N = 500;
    for (int k = 2; k <= n; k++) f *= k;
    for (int k = 0; k < N; k++) s += powl(x + k, -(n + 1));
    const long double a = x + N;
    s += powl(a, -n) / n + 0.5L * powl(a, -(n + 1)) + (n + 1) * powl(a, -(n + 2)) / 12 -
         (long double)(n + 1) * (n + 2) * (n + 3) * powl(a, -(n + 4)) / 720;
    return (n & 1 ? f : -f) * s;
}
/* I_nu(|x|) by its power series in long double (positive terms) */
static long double ref_bessel(int nu, long double a) {
    long double h = a / 2, q = h * h, t = nu ? h : 1, s = t;
    for (int k = 1; k < 2000 && t > s * 1e-24L; k++) {
        t *= q / ((long double)k * (k + nu));
        s += t;
    }
    return s;
}
static long double ref_i0(long double x) { return ref_bessel(0, fabsl(x)); }
static long double ref_i0e(long double x) { return ref_bessel(0, fabsl(x)) * expl(-fabsl(x)); }
static long double ref_i1(long double x) { return copysignl(ref_bessel(1, fabsl(x)), x); }
static long double ref_i1e(long double x) {
    return copysignl(ref_bessel(1, fabsl(x)) * expl(-fabsl(x)), x);
}
/* erfinv by bisection on the long double erf (erfc from 1/2 up, where 1 - |x| is exact) */
static long double ref_erfinv(long double x) {
    const long double ax = fabsl(x);
    if (ax > 1) return NAN;
    if (ax == 1) return copysignl(INFINITY, x);
    if (ax == 0) return x;
    long double lo = 0, hi = 7;
    for (int i = 0; i < 200 && lo < hi; i++) {
        const long double m = 0.5L * (lo + hi);
        if (m == lo || m == hi) break;
        const bool below = ax <= 0.5L ? erfl(m) < ax : erfcl(m) > 1 - ax;
        if (below)
            lo = m;
        else
            hi = m;
    }
    return copysignl(0.5L * (lo + hi), x);
}
static long double ref_polygamma1(long double x) { return ref_polygamma(1, x); }
static long double ref_polygamma2(long double x) { return ref_polygamma(2, x); }
static long double ref_polygamma3(long double x) { return ref_polygamma(3, x); }
static long double ref_sinc(long double x) { return x == 0 ? 1 : sinl(PI_L * x) / (PI_L * x); }
static long double ref_frac(long double x) { return x - truncl(x); }
static long double ref_deg2rad(long double x) { return x * (PI_L / 180); }
static long double ref_rad2deg(long double x) { return x * (180 / PI_L); }
static long double ref_logit(long double x) { return logl(x / (1 - x)); }
static long double ref_logit_eps(long double x) {
    const long double z = x < 0.1L ? 0.1L : x > 0.9L ? 0.9L : x;
    return logl(z / (1 - z));
}
static long double ref_lgamma(long double x) { return lgammal(x); }
static long double ref_expm1(long double x) { return expm1l(x); }
static long double ref_exp2(long double x) { return exp2l(x); }
static long double ref_log2(long double x) { return log2l(x); }
static long double ref_log10(long double x) { return log10l(x); }
static long double ref_erfc(long double x) { return erfcl(x); }
static long double ref_trunc(long double x) { return truncl(x); }

static ts_tensor *polygamma1(ts_tensor *t) { return ts_polygamma(1, t); }
static ts_tensor *polygamma2(ts_tensor *t) { return ts_polygamma(2, t); }
static ts_tensor *polygamma3(ts_tensor *t) { return ts_polygamma(3, t); }
static ts_tensor *logit_none(ts_tensor *t) { return ts_logit(t, NAN); }
static ts_tensor *logit_eps(ts_tensor *t) { return ts_logit(t, 0.1); }

/* ------------------------------------------------------------------ unary sweeps */
typedef struct uop {
    const char *name;
    ts_tensor *(*f)(ts_tensor *);
    long double (*ref)(long double);
    double lo, hi; /* the sweep */
    double floor;  /* errors in units of eps * max(|ref|, floor): where the function has zeros */
    double ulp_d;  /* bounds on the largest error, float64 and float32 */
    double ulp_f;
    bool diff; /* gradcheck over [glo, ghi] */
    double glo, ghi;
} uop;

static const uop uops[] = {
    {"expm1", ts_expm1, ref_expm1, -20, 20, 0, 2, 2, true, -2, 2},
    {"exp2", ts_exp2, ref_exp2, -60, 60, 0, 2, 2, true, -2, 2},
    {"log2", ts_log2, ref_log2, 1e-3, 1e3, 1, 2, 2, true, 0.5, 3},
    {"log10", ts_log10, ref_log10, 1e-3, 1e3, 1, 2, 2, true, 0.5, 3},
    {"erfc", ts_erfc, ref_erfc, -3, 9, 0, 4, 4, true, -2, 2},
    {"lgamma", ts_lgamma, ref_lgamma, -9.7, 40, 1, 8, 8, true, 0.3, 5},
    {"digamma", ts_digamma, ref_digamma, -9.7, 60, 1, 16, 1, true, 0.3, 5},
    {"polygamma(1)", polygamma1, ref_polygamma1, -9.7, 60, 0, 12, 1, true, 0.3, 5},
    {"polygamma(2)", polygamma2, ref_polygamma2, 0.05, 60, 0, 12, 1, true, 0.3, 5},
    {"polygamma(3)", polygamma3, ref_polygamma3, 0.05, 60, 0, 12, 1, true, 0.3, 5},
    {"erfinv", ts_erfinv, ref_erfinv, -0.999999, 0.999999, 0, 4, 1, true, -0.9, 0.9},
    {"i0", ts_i0, ref_i0, -80, 80, 0, 24, 1, true, -3, 3},
    {"i0e", ts_i0e, ref_i0e, -80, 80, 0, 24, 1, true, -3, 3},
    {"i1", ts_i1, ref_i1, -80, 80, 0, 24, 1, true, -3, 3},
    {"i1e", ts_i1e, ref_i1e, -80, 80, 0, 24, 1, true, -3, 3},
    /* PyTorch's sinc rounds pi x first: near the zeros the error is absolute */
    {"sinc", ts_sinc, ref_sinc, -6.3, 6.3, 1, 16, 16, true, -2.2, 2.2},
    {"frac", ts_frac, ref_frac, -7.3, 7.3, 1, 0, 0, true, 0.1, 0.9},
    {"deg2rad", ts_deg2rad, ref_deg2rad, -720, 720, 0, 1, 1, true, -2, 2},
    {"rad2deg", ts_rad2deg, ref_rad2deg, -7, 7, 0, 1, 1, true, -2, 2},
    {"logit", logit_none, ref_logit, 0.001, 0.999, 1, 4, 4, true, 0.1, 0.9},
    {"logit(eps 0.1)", logit_eps, ref_logit_eps, 0.01, 0.99, 1, 4, 4, true, 0.15, 0.85},
    {"trunc", ts_trunc, ref_trunc, -7.3, 7.3, 0, 0, 0, false, 0, 0},
};
#define NU (int)(sizeof uops / sizeof *uops)

/* the sweep's points: evenly spaced, off the poles of the gamma family (negative integers) */
static double sweep_x(const uop *u, int i) {
    double x = u->lo + (u->hi - u->lo) * i / (NS - 1);
    if (x < 0 && fabs(x - rint(x)) < 1e-3) x += 2e-3;
    return x;
}

static double eps_of(ts_dtype dt) {
    return dt == TS_F64 ? DBL_EPSILON / 2 : dt == TS_F32 ? FLT_EPSILON / 2 : 0;
}

/* The largest error of u over the sweep on device d in dtype dt, in units of eps * max(|ref|,
 * floor) (eps: half the type's epsilon; the reference rounded to the type first for float32,
 * whose results are compared with what float32 can hold). */
static double sweep_err(const uop *u, ts_device d, ts_dtype dt) {
    static double x[NS], got[NS];
    for (int i = 0; i < NS; i++) x[i] = sweep_x(u, i);
    if (dt == TS_F32)
        for (int i = 0; i < NS; i++) x[i] = (float)x[i];
    ts_scope_begin();
    ts_tensor *y = u->f(mk(x, NS, dt, d));
    const bool ok = y && ts_dtype_of(y) == dt && rd(y, got, NS);
    ts_scope_end();
    if (!ok) return INFINITY;
    double worst = 0;
    for (int i = 0; i < NS; i++) {
        const long double r = u->ref(x[i]);
        const double rr = dt == TS_F32 ? (double)(float)r : (double)r;
        if (isinf(rr) || isnan(rr)) {
            if (!same(got[i], rr, false)) return INFINITY;
            continue;
        }
        const double unit = eps_of(dt) * fmax(fmax(fabs(rr), u->floor), DBL_MIN);
        const double e = (double)(fabsl((long double)got[i] - r) / unit);
        if (e > worst) worst = e;
    }
    return worst;
}

static void test_sweeps(void) {
    for (int k = 0; k < NU; k++)
        for (int di = 0; di < ndev; di++) {
            const uop *u = &uops[k];
            const double ed = sweep_err(u, devs[di], TS_F64), ef = sweep_err(u, devs[di], TS_F32);
            if (di == 0)
                printf("  %-15s max error f64 %6.2f ulp, f32 %6.2f ulp\n", u->name, ed, ef);
            /* float32 adds the half ulp of rounding the reference */
            const bool ok = ed <= u->ulp_d + 0.5 && ef <= u->ulp_f + 1;
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__,
                              "%s on %s: error f64 %.3g (bound %g) f32 %.3g (%g)", u->name,
                              ts_device_str(devs[di]), ed, u->ulp_d, ef, u->ulp_f);
        }
}

/* float16 / bfloat16 compute in float and round once: within the half type's rounding of the
 * float32 result */
static void test_half(void) {
    static const double x[6] = {0.3, 0.75, 1.5, 2.25, 3.5, 4.75};
    double a[6], b[6];
    const ts_dtype hs[2] = {TS_F16, TS_BF16};
    for (int k = 0; k < NU; k++)
        for (int h = 0; h < 2; h++) {
            const uop *u = &uops[k];
            if (u->lo > 0.3 || u->hi < 4.75) continue;
            ts_scope_begin();
            ts_tensor *th = mk(x, 6, hs[h], devs[0]);
            ts_tensor *yh = u->f(th), *yf = u->f(ts_to_dtype(th, TS_F32));
            bool ok = yh && yf && ts_dtype_of(yh) == hs[h] && rd(yh, a, 6) &&
                      rd(ts_to_dtype(ts_to_dtype(yf, hs[h]), TS_F32), b, 6);
            for (int i = 0; ok && i < 6; i++) ok = same(a[i], b[i], false);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "%s %s: not the float result rounded once",
                              u->name, ts_dtype_name(hs[h]));
        }
}

/* ------------------------------------------------------------------ edges: PyTorch 2's values */
#define E_NAN NAN
#define E_INF INFINITY
#define NE    9
static const double ex[NE] = {0.0, -0.0, -1.0, -2.5, INFINITY, -INFINITY, NAN, 1e-30, -1e-30};
typedef struct edge {
    const char *name;
    ts_tensor *(*f)(ts_tensor *);
    double want[NE]; /* float64, from PyTorch 2 (the deliberate departures noted) */
} edge;
static const edge edges[] = {
    {"lgamma",
     ts_lgamma,
     {E_INF, E_INF, E_INF, -0.05624371649767405, E_INF, E_INF, E_NAN, 69.07755278982137,
      69.07755278982137}},
    {"digamma",
     ts_digamma,
     {-E_INF, E_INF, E_NAN, 1.1031566406452433, E_INF, E_NAN, E_NAN, -9.999999999999999e+29,
      9.999999999999999e+29}},
    /* PyTorch: 6.58e32 at -1 (its sin(pi x) is not 0 there): the pole is +inf here; at -2.5
     * mpmath's 9.53924664498912375 (PyTorch's series gives ...4937520, 5e-12 off) */
    {"polygamma(1)",
     polygamma1,
     {E_INF, E_INF, E_INF, 9.5392466449891238, 0, E_NAN, E_NAN, 9.999999999999998e+59,
      9.999999999999998e+59}},
    /* PyTorch: NaN at +inf; the limit 0 here */
    {"polygamma(2)",
     polygamma2,
     {-E_INF, -E_INF, -E_INF, -0.1082040516417282, -0.0, -E_INF, E_NAN, -1.9999999999999995e+90,
      1.9999999999999995e+90}},
    {"erfinv",
     ts_erfinv,
     {0.0, -0.0, -E_INF, E_NAN, E_NAN, E_NAN, E_NAN, 8.862269254527579e-31,
      -8.862269254527579e-31}},
    /* PyTorch: NaN at +-inf (its Chebyshev series), inf here as I0 and I1 are */
    {"i0", ts_i0, {1, 1, 1.2660658777520082, 3.289839144050123, E_INF, E_INF, E_NAN, 1, 1}},
    {"i0e", ts_i0e, {1, 1, 0.46575960759364043, 0.27004644161220276, 0, 0, E_NAN, 1, 1}},
    {"i1",
     ts_i1,
     {0.0, -0.0, -0.565159103992485, -2.5167162452886984, E_INF, -E_INF, E_NAN, 5e-31, -5e-31}},
    {"i1e",
     ts_i1e,
     {0.0, -0.0, -0.2079104153497085, -0.20658464953126654, 0.0, -0.0, E_NAN, 5e-31, -5e-31}},
    {"sinc",
     ts_sinc,
     {1, 1, 3.8981718325193755e-17, 0.12732395447351627, E_NAN, E_NAN, E_NAN, 1, 1}},
    {"trunc", ts_trunc, {0.0, -0.0, -1, -2, E_INF, -E_INF, E_NAN, 0.0, -0.0}},
    {"frac", ts_frac, {0.0, 0.0, 0.0, -0.5, E_NAN, E_NAN, E_NAN, 1e-30, -1e-30}},
    {"sgn", ts_sgn, {0, 0, -1, -1, 1, -1, 0, 1, -1}},
    {"logit",
     logit_none,
     {-E_INF, -E_INF, E_NAN, E_NAN, E_NAN, E_NAN, E_NAN, -69.07755278982137, E_NAN}},
};
#define NEDGE (int)(sizeof edges / sizeof *edges)

static void test_edges(void) {
    double got[NE];
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < NEDGE; k++) {
            const edge *e = &edges[k];
            ts_scope_begin();
            bool ok = rd(e->f(mk(ex, NE, TS_F64, devs[di])), got, NE);
            for (int i = 0; ok && i < NE; i++)
                ok = isnan(e->want[i]) || isinf(e->want[i]) || e->want[i] == 0
                         ? same(got[i], e->want[i], true)
                         : fabs(got[i] - e->want[i]) <= 1e-14 * fabs(e->want[i]);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok) {
                ts_test_failf(__FILE__, __LINE__, "%s edges on %s", e->name,
                              ts_device_str(devs[di]));
                for (int i = 0; i < NE; i++)
                    fprintf(stderr, "   %g -> %.17g (want %.17g)\n", ex[i], got[i], e->want[i]);
            }
        }
}

/* Values that need their own numbers: nan_to_num's defaults per dtype, logit's eps, signbit */
static void test_values(void) {
    static const double v[4] = {NAN, INFINITY, -INFINITY, 1.5};
    double got[8];
    for (int di = 0; di < ndev; di++) {
        ts_device d = devs[di];
        ts_scope_begin();
        CHECK(rd(ts_nan_to_num(mk(v, 4, TS_F16, d), 0, NAN, NAN), got, 4));
        CHECK(got[0] == 0 && got[1] == 65504 && got[2] == -65504 && got[3] == 1.5);
        CHECK(rd(ts_nan_to_num(mk(v, 4, TS_F32, d), 1, 2, NAN), got, 4));
        CHECK(got[0] == 1 && got[1] == 2 && got[2] == -FLT_MAX && got[3] == 1.5);
        CHECK(rd(ts_nan_to_num(mk(v, 4, TS_F64, d), 0, NAN, -7), got, 4));
        CHECK(got[0] == 0 && got[1] == DBL_MAX && got[2] == -7 && got[3] == 1.5);
        CHECK(rd(ts_nan_to_num(mk(v, 4, TS_BF16, d), 0, NAN, NAN), got, 4));
        CHECK(got[1] == 3.38953138925153547590470800371487866880e38);
        /* integers: a copy */
        static const double iv[3] = {1, -2, 3};
        ts_tensor *ti = ts_nan_to_num(mk(iv, 3, TS_I64, d), 0, NAN, NAN);
        CHECK(ti && ts_dtype_of(ti) == TS_I64 && rd(ti, got, 3) && got[1] == -2);
        /* signbit: -0 and -NaN have it, integers by sign, bool never */
        static const double sv[5] = {0.0, -0.0, -1, 2, -NAN};
        ts_tensor *sb = ts_signbit(mk(sv, 5, TS_F32, d));
        CHECK(sb && ts_dtype_of(sb) == TS_BOOL && rd(sb, got, 5));
        CHECK(got[0] == 0 && got[1] == 1 && got[2] == 1 && got[3] == 0 && got[4] == 1);
        CHECK(rd(ts_signbit(mk(iv, 3, TS_I32, d)), got, 3) && got[0] == 0 && got[1] == 1);
        /* logit with eps clamps first */
        static const double lv[4] = {0, 1, -1, 2};
        CHECK(rd(ts_logit(mk(lv, 4, TS_F64, d), 0.1), got, 4));
        CHECK_NEAR(got[0], log(0.1 / 0.9), 1e-15);
        CHECK_NEAR(got[3], -log(0.1 / 0.9), 1e-15);
        /* polygamma(0) is digamma; known values */
        static const double one[2] = {1, 0.5};
        CHECK(rd(ts_polygamma(0, mk(one, 2, TS_F64, d)), got, 2));
        CHECK_NEAR(got[0], -0.57721566490153286061, 1e-15);
        CHECK_NEAR(got[1], -0.57721566490153286061 - 2 * 0.69314718055994530942, 1e-15);
        CHECK(rd(ts_polygamma(1, mk(one, 2, TS_F64, d)), got, 2));
        CHECK_NEAR(got[0], 3.14159265358979323846 * 3.14159265358979323846 / 6, 2e-15);
        CHECK_NEAR(got[1], 3.14159265358979323846 * 3.14159265358979323846 / 2, 4e-15);
        CHECK(rd(ts_polygamma(2, mk(one, 1, TS_F64, d)), got, 1));
        CHECK_NEAR(got[0], -2 * 1.20205690315959428540, 4e-15);
        CHECK(rd(ts_polygamma(3, mk(one, 1, TS_F64, d)), got, 1));
        CHECK_NEAR(got[0], pow(3.14159265358979323846, 4) / 15, 2e-14);
        static const double eh[1] = {0.5};
        CHECK(rd(ts_erfinv(mk(eh, 1, TS_F64, d)), got, 1));
        CHECK_NEAR(got[0], 0.47693627620446987338, 1e-16);
        ts_scope_end();
    }
    CHECK_OK();
}

/* ------------------------------------------------------------------ binary ops */
typedef struct bop {
    const char *name;
    ts_tensor *(*f)(ts_tensor *, ts_tensor *);
    long double (*ref)(long double, long double);
    double alo, ahi, blo, bhi;
    double ulp_d, ulp_f;
    int grad; /* 0 none, 1 both operands, 2 the first only */
} bop;
static long double r_xlogy(long double a, long double b) { return a == 0 ? 0 : a * logl(b); }
static long double r_xlog1py(long double a, long double b) { return a == 0 ? 0 : a * log1pl(b); }
static long double r_hypot(long double a, long double b) { return hypotl(a, b); }
static long double r_copysign(long double a, long double b) { return copysignl(a, b); }
static long double r_atan2(long double a, long double b) { return atan2l(a, b); }
static long double r_logaddexp(long double a, long double b) {
    return fmaxl(a, b) + log1pl(expl(-fabsl(a - b)));
}
static long double r_logaddexp2(long double a, long double b) {
    return fmaxl(a, b) + log1pl(exp2l(-fabsl(a - b))) / logl(2.0L);
}
static long double r_remainder(long double a, long double b) {
    long double m = fmodl(a, b);
    return m != 0 && (m < 0) != (b < 0) ? m + b : m;
}
static long double r_ldexp(long double a, long double b) { return a * exp2l(b); }
static long double r_float_power(long double a, long double b) { return powl(a, b); }
static const bop bops[] = {
    {"xlogy", ts_xlogy, r_xlogy, -3, 3, 0.1, 9, 4, 4, 1},
    {"xlog1py", ts_xlog1py, r_xlog1py, -3, 3, -0.9, 9, 4, 4, 1},
    {"hypot", ts_hypot, r_hypot, -30, 30, -5, 5, 2, 2, 1},
    {"copysign", ts_copysign, r_copysign, -3, 3, -2, 2, 0, 0, 2},
    {"atan2", ts_atan2, r_atan2, -3, 3, -2, 2, 2, 2, 1},
    {"logaddexp", ts_logaddexp, r_logaddexp, -30, 30, -20, 20, 2, 2, 1},
    {"logaddexp2", ts_logaddexp2, r_logaddexp2, -30, 30, -20, 20, 2, 2, 1},
    {"remainder", ts_remainder, r_remainder, -30, 30, 0.7, 3.1, 0, 0, 1},
    {"ldexp", ts_ldexp, r_ldexp, -3, 3, -8, 8, 0.5, 0.5, 1},
    {"float_power", ts_float_power, r_float_power, 0.2, 3, -3, 3, 2, 2, 1},
};
#define NB (int)(sizeof bops / sizeof *bops)

/* b's samples cross a's: a against a broadcast row */
static void test_binary_sweeps(void) {
    enum { NA = 64, NBB = 17 };
    static double a[NA], b[NBB], got[NA * NBB];
    for (int k = 0; k < NB; k++)
        for (int di = 0; di < ndev; di++)
            for (int f = 0; f < 2; f++) {
                const bop *o = &bops[k];
                const ts_dtype dt = f ? TS_F32 : TS_F64;
                for (int i = 0; i < NA; i++) a[i] = o->alo + (o->ahi - o->alo) * i / (NA - 1);
                for (int j = 0; j < NBB; j++) b[j] = o->blo + (o->bhi - o->blo) * j / (NBB - 1);
                if (o->f == ts_ldexp)
                    for (int j = 0; j < NBB; j++) b[j] = rint(b[j]);
                if (f) {
                    for (int i = 0; i < NA; i++) a[i] = (float)a[i];
                    for (int j = 0; j < NBB; j++) b[j] = (float)b[j];
                }
                ts_scope_begin();
                ts_tensor *ta = ts_reshape(mk(a, NA, dt, devs[di]), TS_SHAPE(NA, 1));
                ts_tensor *y = o->f(ta, mk(b, NBB, dt, devs[di]));
                const ts_dtype want = o->f == ts_float_power ? TS_F64 : dt;
                bool ok = y && ts_dtype_of(y) == want && rd(y, got, NA * NBB);
                double worst = 0;
                for (int i = 0; ok && i < NA; i++)
                    for (int j = 0; j < NBB; j++) {
                        const long double r = o->ref(a[i], b[j]);
                        const ts_dtype rdt = want;
                        const double rr = rdt == TS_F32 ? (double)(float)r : (double)r;
                        const double unit = eps_of(rdt) * fmax(fabs(rr), 1e-300);
                        const double e = (double)(fabsl(got[i * NBB + j] - r) / unit);
                        worst = fmax(worst, e);
                    }
                ts_scope_end();
                const double bound = (want == TS_F64 ? o->ulp_d : o->ulp_f) + (f ? 1 : 0.5);
                if (di == 0 && ok)
                    printf("  %-15s %s max error %6.2f ulp\n", o->name, ts_dtype_name(dt), worst);
                ok = ok && worst <= bound;
                ts_test_record(ok);
                if (!ok)
                    ts_test_failf(__FILE__, __LINE__, "%s %s on %s: error %.3g ulp (bound %g)%s",
                                  o->name, ts_dtype_name(dt), ts_device_str(devs[di]), worst, bound,
                                  ts_test_error_str());
            }
}

static void test_binary_edges(void) {
    static const double a[6] = {0, 0, 1, NAN, 0, 2}, b[6] = {0, NAN, 0, 1, INFINITY, -1};
    /* PyTorch 2's float32 results */
    static const struct {
        ts_tensor *(*f)(ts_tensor *, ts_tensor *);
        double want[6];
    } cases[] = {
        {ts_xlogy, {0, NAN, -INFINITY, NAN, 0, NAN}},
        {ts_hypot, {0, NAN, 1, NAN, INFINITY, 2.2360680103302002}},
        {ts_copysign, {0, 0, 1, NAN, 0, -2}},
        {ts_atan2, {0, NAN, 1.5707963705062866, NAN, 0, 2.0344438552856445}},
        {ts_nextafter,
         {0, NAN, 0.99999994039535522, NAN, 1.4012984643248171e-45, 1.9999998807907104}},
        {ts_logaddexp,
         {0.69314718246459961, NAN, 1.3132617473602295, NAN, INFINITY, 2.0485873222351074}},
        {ts_logaddexp2, {1, NAN, 1.5849624872207642, NAN, INFINITY, 2.1699249744415283}},
    };
    static const double ia[3] = {INFINITY, -INFINITY, INFINITY},
                        ib[3] = {INFINITY, -INFINITY, -INFINITY};
    double got[6];
    for (int di = 0; di < ndev; di++) {
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
            ts_scope_begin();
            bool ok =
                rd(cases[k].f(mk(a, 6, TS_F32, devs[di]), mk(b, 6, TS_F32, devs[di])), got, 6);
            for (int i = 0; ok && i < 6; i++) ok = same(got[i], cases[k].want[i], false);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok) {
                ts_test_failf(__FILE__, __LINE__, "binary edge case %zu on %s", k,
                              ts_device_str(devs[di]));
                for (int i = 0; i < 6; i++) fprintf(stderr, "   %.17g\n", got[i]);
            }
        }
        ts_scope_begin();
        CHECK(rd(ts_logaddexp(mk(ia, 3, TS_F64, devs[di]), mk(ib, 3, TS_F64, devs[di])), got, 3));
        CHECK(got[0] == INFINITY && got[1] == -INFINITY && got[2] == INFINITY);
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ dtypes and refusals */
static void test_dtypes(void) {
    static const double iv[3] = {1, 2, -3};
    ts_scope_begin();
    ts_tensor *ti = mk(iv, 3, TS_I64, ts_cpu()), *tb = mk(iv, 3, TS_BOOL, ts_cpu());
    ts_tensor *(*const to_f32[])(ts_tensor *) = {
        ts_lgamma, ts_digamma, ts_erfinv, ts_i0,    ts_i0e,  ts_i1,      ts_i1e,    ts_sinc,
        ts_expm1,  ts_exp2,    ts_log2,   ts_log10, ts_erfc, ts_deg2rad, ts_rad2deg};
    for (size_t k = 0; k < sizeof to_f32 / sizeof *to_f32; k++) {
        ts_tensor *y = to_f32[k](ti), *z = to_f32[k](tb);
        CHECK(y && ts_dtype_of(y) == TS_F32 && z && ts_dtype_of(z) == TS_F32);
    }
    double got[3];
    CHECK(rd(ts_lgamma(ti), got, 3) && got[0] == 0 && got[2] == INFINITY);
    ts_tensor *t = ts_trunc(ti);
    CHECK(t && ts_dtype_of(t) == TS_I64 && rd(t, got, 3) && got[2] == -3);
    t = ts_sgn(tb);
    CHECK(t && ts_dtype_of(t) == TS_BOOL);
    CHECK(ts_frac(ti) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "frac: not implemented for 'Long'");
    CHECK(ts_trunc(tb) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "trunc: not implemented for 'Bool'");
    CHECK(ts_polygamma(-1, ti) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "polygamma(n, x) does not support negative n");
    /* binary: integers give float32 where PyTorch does, and are refused where it refuses */
    ts_tensor *(*const b_f32[])(ts_tensor *, ts_tensor *) = {ts_xlogy, ts_xlog1py, ts_copysign,
                                                             ts_atan2, ts_ldexp};
    for (size_t k = 0; k < sizeof b_f32 / sizeof *b_f32; k++) {
        ts_tensor *y = b_f32[k](ti, ti);
        CHECK(y && ts_dtype_of(y) == TS_F32);
    }
    const char *refused[] = {"hypot", "nextafter", "logaddexp", "logaddexp2"};
    ts_tensor *(*const b_ref[])(ts_tensor *, ts_tensor *) = {ts_hypot, ts_nextafter, ts_logaddexp,
                                                             ts_logaddexp2};
    for (int k = 0; k < 4; k++) {
        CHECK(b_ref[k](ti, ti) == NULL);
        char msg[64];
        snprintf(msg, sizeof msg, "%s: not implemented for 'Long'", refused[k]);
        CHECK_ERR_HAS(TS_ERR_DTYPE, msg);
    }
    /* float16 with int64 is float16 (PyTorch's promotion) */
    ts_tensor *th = mk(iv, 3, TS_F16, ts_cpu());
    t = ts_hypot(th, ti);
    CHECK(t && ts_dtype_of(t) == TS_F16);
    t = ts_float_power(th, ti);
    CHECK(t && ts_dtype_of(t) == TS_F64);
    t = ts_ldexp(th, ti);
    CHECK(t && ts_dtype_of(t) == TS_F16 && rd(t, got, 3) && got[0] == 2 && got[2] == -0.375);
    /* nextafter under a graph: the forward runs and the gradient is PyTorch 2's, g for the
     * first operand (broadcast back to its shape) and zero for the second */
    static const double nb[2][3] = {{1, 5, -2}, {-1, 0, 9}}, gw[2][3] = {{1, 2, 3}, {4, 5, 6}};
    ts_tensor *ga = ts_tensor_f64(TS_SHAPE(3), iv, (ts_opts){.requires_grad = true});
    ts_tensor *gb = ts_tensor_f64(TS_SHAPE(2, 3), &nb[0][0], (ts_opts){.requires_grad = true});
    ts_tensor *na = ts_nextafter(ga, gb);
    double gg[6];
    CHECK(na && ts_requires_grad(na) && rd(na, gg, 6) && gg[0] == nextafter(iv[0], nb[0][0]) &&
          gg[5] == nextafter(iv[2], nb[1][2]));
    ts_backward(ts_sum(ts_mul(na, ts_tensor_f64(TS_SHAPE(2, 3), &gw[0][0], (ts_opts){0}))));
    CHECK(rd(ts_grad(ga), gg, 3) && gg[0] == 5 && gg[1] == 7 && gg[2] == 9);
    CHECK(rd(ts_grad(gb), gg, 6) && gg[0] == 0 && gg[5] == 0 && !signbit(gg[3]));
    ts_scope_end();
}

/* ------------------------------------------------------------------ gradients */
static ts_tensor *g_unary(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    return ((const uop *)ctx)->f(in[0]);
}
static ts_tensor *g_binary(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    return ((const bop *)ctx)->f(in[0], in[1]);
}
static ts_tensor *g_nan_to_num(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_nan_to_num(in[0], 0, NAN, NAN);
}

static void test_grads(void) {
    double x[7], y[7];
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5};
    for (int di = 0; di < ndev; di++) {
        ts_opts o = {.dtype = TS_F64, .device = devs[di], .requires_grad = true};
        for (int k = 0; k < NU; k++) {
            const uop *u = &uops[k];
            if (!u->diff) continue;
            for (int i = 0; i < 7; i++) x[i] = u->glo + (u->ghi - u->glo) * (i + 0.37) / 7;
            ts_scope_begin();
            ts_tensor *t = ts_to(ts_tensor_f64(TS_SHAPE(7), x, (ts_opts){0}), devs[di]);
            t = ts_detach(ts_to_dtype(t, TS_F64));
            ts_set_requires_grad(t, true);
            const bool ok = ts_gradcheck(g_unary, (void *)u, &t, 1, go);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck %s on %s%s", u->name,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
        }
        for (int k = 0; k < NB; k++) {
            const bop *b = &bops[k];
            if (!b->grad) continue;
            for (int i = 0; i < 7; i++) {
                x[i] = b->alo + (b->ahi - b->alo) * (i + 0.37) / 7;
                y[i] = b->blo + (b->bhi - b->blo) * (i + 0.61) / 7;
                if (x[i] == 0) x[i] = 0.3;
            }
            ts_scope_begin();
            ts_tensor *in[2] = {ts_tensor_f64(TS_SHAPE(7), x, o), ts_tensor_f64(TS_SHAPE(7), y, o)};
            if (b->grad == 2) ts_set_requires_grad(in[1], false);
            const bool ok = ts_gradcheck(g_binary, (void *)b, in, 2, go);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck %s on %s%s", b->name,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
        }
        /* nan_to_num: the gradient is 0 where the input was NaN or infinite */
        static const double nv[4] = {NAN, INFINITY, -INFINITY, 2};
        ts_scope_begin();
        ts_tensor *t = ts_tensor_f64(TS_SHAPE(4), nv, o);
        ts_tensor *s = ts_sum(ts_nan_to_num(t, 0, NAN, NAN));
        double gv[4];
        ts_backward(s);
        CHECK(rd(ts_grad(t), gv, 4));
        CHECK(gv[0] == 0 && gv[1] == 0 && gv[2] == 0 && gv[3] == 1);
        static const double fv[3] = {0.5, 1.5, -2};
        ts_tensor *f3 = ts_tensor_f64(TS_SHAPE(3), fv, o);
        CHECK(ts_gradcheck(g_nan_to_num, NULL, &f3, 1, go));
        /* logit outside [0, 1] without eps: NaN gradient (PyTorch); with eps: 0 outside */
        static const double lv[3] = {-0.5, 0.05, 0.5};
        ts_tensor *tl = ts_tensor_f64(TS_SHAPE(3), lv, o);
        ts_backward(ts_sum(ts_logit(tl, NAN)));
        CHECK(rd(ts_grad(tl), gv, 3));
        CHECK(isnan(gv[0]) && fabs(gv[2] - 4) < 1e-15);
        ts_tensor *tl2 = ts_tensor_f64(TS_SHAPE(3), lv, o);
        ts_backward(ts_sum(ts_logit(tl2, 0.1)));
        CHECK(rd(ts_grad(tl2), gv, 3));
        CHECK(gv[0] == 0 && gv[1] == 0 && fabs(gv[2] - 4) < 1e-15);
        /* i1, i1e and sinc at 0: 1/2, 1/2, 0; xlogy's first operand at 0: 0 */
        static const double z[1] = {0};
        ts_tensor *tz = ts_tensor_f64(TS_SHAPE(1), z, o);
        ts_backward(ts_sum(ts_i1(tz)));
        CHECK(rd(ts_grad(tz), gv, 1) && gv[0] == 0.5);
        ts_tensor *tz2 = ts_tensor_f64(TS_SHAPE(1), z, o);
        ts_backward(ts_sum(ts_sinc(tz2)));
        CHECK(rd(ts_grad(tz2), gv, 1) && gv[0] == 0);
        ts_scope_end();
        CHECK_OK();
    }
}

/* float32 logit's paths in the CPU kernel (kern_unary.c's logit_vec_f32), under every ISA this
 * host has: dense operands read and written where they lie, a strided input (a slice of step 2)
 * and a transposed one through the chunk buffer, with and without eps, over three chunks of 512,
 * with values outside [0, 1], 0, 1 and NaN. Every layout gives the dense call's bits; a NaN
 * result has logf's bits (the other backends'); the rest lies within 4 ulp + 2^-23 of the float64
 * logit of the float input (the float ratio's rounding: 2^-24 relative, so 2^-24 absolute after
 * the log). */
static float logit_ratio_ref(float x, float eps) {
    const float z = eps < 0 ? x : (x < eps ? eps : (x > 1 - eps ? 1 - eps : x));
    return z / (1 - z);
}
static void test_logit_paths(void) {
    enum { N = 1300 };
    static float xv[2 * N], dense[N], got[N];
    for (int i = 0; i < 2 * N; i++) {
        xv[i] = (float)((i * 7919) % 10007) / 10006.0f; /* [0, 1] */
        if (i % 97 == 0) xv[i] = -0.25f;
        if (i % 89 == 0) xv[i] = 1.5f;
        if (i % 101 == 0) xv[i] = NAN;
    }
    const ts_cpu_isa host = tsi_cpu_isa_host(), saved = ts_cpu_isa_get();
    for (int isa = TS_ISA_GENERIC; isa <= (int)host; isa++) {
        atomic_store(&tsi_cpu_isa_chosen, isa);
        for (int e = 0; e < 2; e++) {
            const double eps = e ? 0.05 : NAN;
            ts_scope_begin();
            ts_opts o = {.device = ts_cpu()};
            ts_tensor *x = ts_tensor_f32(TS_SHAPE(N), xv, o);
            /* the first N of a [2N] tensor with step 2: the same values as a strided view */
            float sv[2 * N];
            for (int i = 0; i < N; i++) sv[2 * i] = xv[i], sv[2 * i + 1] = 7.0f;
            ts_tensor *xs = ts_slice(ts_tensor_f32(TS_SHAPE(2 * N), sv, o), 0, 0, 2 * N, 2);
            /* [26, 50] transposed of a [50, 26] holding the values column-major */
            float tv[N];
            for (int r = 0; r < 26; r++)
                for (int c = 0; c < 50; c++) tv[c * 26 + r] = xv[r * 50 + c];
            ts_tensor *xt = ts_t(ts_tensor_f32(TS_SHAPE(50, 26), tv, o));
            ts_tensor *y = ts_logit(x, eps);
            bool ok = y && ts_copy_to_host(y, dense, sizeof dense) == TS_OK;
            for (int i = 0; ok && i < N; i++) {
                const float r = logit_ratio_ref(xv[i], e ? 0.05f : -1.0f);
                const float lf = logf(r);
                if (isnan(dense[i])) {
                    ok = isnan(lf) && !memcmp(&dense[i], &lf, sizeof lf);
                    continue;
                }
                const double lo = 0.05f, hi = 1.0f - 0.05f; /* the kernel's float bounds */
                const double z = e ? fmin(fmax((double)xv[i], lo), hi) : (double)xv[i];
                const double ref = log(z / (1 - z));
                const double err = fabs((double)dense[i] - ref);
                const double tol = 4 * (double)FLT_EPSILON * fabs(ref) + 0x1p-23;
                ok = isinf(ref) ? (double)dense[i] == ref : err <= tol; /* x = 0 or 1 */
            }
            CHECK(ok);
            ts_tensor *ys[2] = {ts_logit(xs, eps), ts_contiguous(ts_logit(xt, eps))};
            for (int k = 0; k < 2; k++) {
                ts_tensor *yk = ys[k];
                bool same_bits = yk && ts_numel(yk) == N &&
                                 ts_copy_to_host(ts_contiguous(ts_reshape(yk, TS_SHAPE(N))), got,
                                                 sizeof got) == TS_OK &&
                                 !memcmp(got, dense, sizeof got);
                CHECK(same_bits);
                if (!same_bits)
                    fprintf(stderr, "  logit %s input, eps %g, isa %s: other bits\n",
                            k ? "transposed" : "strided", eps, tsi_cpu_isa_name((ts_cpu_isa)isa));
            }
            /* a strided output (no public op writes one: the kernel itself) */
            float ob[2 * N];
            ts_kview ko = {
                .data = (char *)ob, .dtype = TS_F32, .ndim = 1, .shape = {N}, .strides = {2}};
            ts_kview ki = {
                .data = (char *)xv, .dtype = TS_F32, .ndim = 1, .shape = {N}, .strides = {1}};
            tsi_cpu_unary(NULL, 0, TS_U_LOGIT, &ko, &ki, e ? 0.05 : -1, 0);
            bool strided_out = true;
            for (int i = 0; i < N; i++) strided_out &= !memcmp(&ob[2 * i], &dense[i], sizeof ob[0]);
            CHECK(strided_out);
            ts_scope_end();
        }
    }
    atomic_store(&tsi_cpu_isa_chosen, (int)saved);
    CHECK_OK();
}

/* float32 erfinv (its own polynomial, kernel_math.h) against the float64 function rounded, on a
 * dense set of floats: every 4099th float of (0, 1) (every binade down to the smallest normals),
 * the 3000 floats just below 1 (the tail's steepest part) and their negatives: at most 1 ulp */
static void test_erfinv_dense(void) {
    enum { SPREAD = 0x3f800000 / 4099, TOP = 3000, N = 2 * (SPREAD + TOP) };
    float *x = malloc(N * sizeof *x), *got = malloc(N * sizeof *got);
    double *xd = malloc(N * sizeof *xd), *ref = malloc(N * sizeof *ref);
    int n = 0;
    for (uint32_t u = 1; u < 0x3f800000u && n + 2 <= 2 * SPREAD; u += 4099) {
        memcpy(&x[n], &u, sizeof u);
        x[n + 1] = -x[n];
        n += 2;
    }
    for (uint32_t u = 0x3f800000u - TOP; u < 0x3f800000u; u++, n += 2) {
        memcpy(&x[n], &u, sizeof u);
        x[n + 1] = -x[n];
    }
    for (int i = 0; i < n; i++) xd[i] = x[i];
    ts_scope_begin();
    ts_tensor *yf = ts_erfinv(ts_tensor_f32(TS_SHAPE(n), x, (ts_opts){0}));
    ts_tensor *yd = ts_erfinv(ts_tensor_f64(TS_SHAPE(n), xd, (ts_opts){0}));
    CHECK(yf && yd && ts_copy_to_host(yf, got, (size_t)n * sizeof *got) == TS_OK &&
          ts_copy_to_host(yd, ref, (size_t)n * sizeof *ref) == TS_OK);
    ts_scope_end();
    int worst = 0, at = 0;
    for (int i = 0; i < n; i++) {
        const float r = (float)ref[i];
        int32_t a, b;
        memcpy(&a, &got[i], 4);
        memcpy(&b, &r, 4);
        const int d = abs(a - b);
        if (d > worst) worst = d, at = i;
    }
    printf("  erfinv float32 over %d floats: at most %d ulp (at %.9g)\n", n, worst, x[at]);
    CHECK(worst <= 1);
    free(x), free(got), free(xd), free(ref);
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_erfinv_dense();
    test_logit_paths();
    test_sweeps();
    test_half();
    test_edges();
    test_values();
    test_binary_sweeps();
    test_binary_edges();
    test_dtypes();
    test_grads();
    CHECK_OK();
    return ts_test_finish();
}
