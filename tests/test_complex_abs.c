/* test_complex_abs.c — abs of complex64 / complex128 tensors (the unary slot's complex kernel:
 * kern_complex.c, cuda_complex.cu, one formula in kernel_math_complex.h, ts_cabs_f32 / f64) on
 * every device against hypotl in long double of the stored parts, in units in the last place of
 * the result dtype: parts whose exponents span the whole range (squares that overflow or
 * underflow, subnormals), dense runs long enough for every vector width and its tail, strided
 * views, C99's special values (an infinite part gives inf even beside a NaN), and the graph path
 * (the composition over the parts, its gradient z / |z|). Run once more under each lower ISA cap
 * (tests/CMakeLists.txt).
 *
 * Bounds: complex64 squares and sums in double, then one rounding to float: 0.5 ulp plus ~2^-28;
 * complex128 scales by a power of two, takes the root and corrects it by a Newton step on the
 * exact residual: 0.5 ulp plus O(2^-50), but a subnormal result is rounded twice (the corrected
 * root, then its product by the inverse scale): 0.75 ulp there. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tessera.h"
#include "tessera/autograd.h"
#include "tessera/complex.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define NBIG 1500

/* a complex tensor of n pairs (re, im interleaved in v), dtype dt, on d */
static ts_tensor *mkc(int64_t n, const double *v, ts_dtype dt, ts_device d) {
    ts_tensor *r = ts_tensor_f64(TS_SHAPE(n, 2), v, (ts_opts){.dtype = TS_F64});
    return ts_to(ts_to_dtype(ts_view_as_complex(r), dt), d);
}

/* t's n values as double (t real of the part dtype) */
static bool rd(ts_tensor *t, double *out, int64_t n) {
    ts_tensor *h = t ? ts_contiguous(ts_to_dtype(ts_to(t, ts_cpu()), TS_F64)) : NULL;
    return h && ts_numel(h) == n && ts_copy_to_host(h, out, (size_t)n * sizeof(double)) == TS_OK;
}

/* the stored parts: v rounded to float for complex64 */
static void stored(double *v, int64_t n2, ts_dtype dt) {
    if (dt == TS_C64)
        for (int64_t i = 0; i < n2; i++) v[i] = (double)(float)v[i];
}

/* |got - want| in units in the last place of want in the result dtype (subnormal ulps below) */
static double ulps(double got, long double want, bool f32) {
    if (isinf(want)) return isinf(got) && got > 0 ? 0 : INFINITY;
    if (!(got == got)) return INFINITY;
    const int emin = f32 ? -126 : -1022, mant = f32 ? 24 : 53;
    int e;
    frexpl(want, &e); /* want in [2^(e-1), 2^e) */
    if (e - 1 < emin) e = emin + 1;
    const long double ulp = ldexpl(1.0L, e - mant);
    return (double)(fabsl((long double)got - want) / ulp);
}

/* a deterministic spread of parts: mantissas from a sine, exponents over [lo, hi] */
static double part(int i, int seed, int lo, int hi) {
    const double m = 1.0 + 0.999 * fabs(sin(0.377 * i + 1.91 * seed));
    const int e = lo + (int)((unsigned)(i * 7919 + seed * 104729) % (unsigned)(hi - lo + 1));
    return ((i + seed) % 3 == 0 ? -1 : 1) * ldexp(m, e);
}

/* n values |x_i| against hypotl, at most bound ulps each */
static void check(const char *what, ts_tensor *y, const double *v, int64_t n, ts_dtype dt,
                  double bound) {
    static double got[NBIG];
    const bool f32 = dt == TS_C64;
    bool ok = n <= NBIG && y && ts_dtype_of(y) == (f32 ? TS_F32 : TS_F64) && rd(y, got, n);
    double worst = 0;
    int64_t at = -1;
    for (int64_t i = 0; ok && i < n; i++) {
        const long double want = hypotl((long double)v[2 * i], (long double)v[2 * i + 1]);
        /* the result's own dtype: a float overflows where its exact value passes FLT_MAX */
        const long double wr = f32 ? (long double)(float)want : (long double)(double)want;
        double u = isinf(wr) ? (isinf(got[i]) ? 0 : INFINITY) : ulps(got[i], want, f32);
        if (!f32 && want < DBL_MIN) u *= bound / (0.75 + 1e-6); /* rounded twice: 0.75 allowed */
        if (u > worst) worst = u, at = i;
    }
    ok = ok && worst <= bound;
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s %s: %.3g ulp at %lld (|%.17g%+.17gi| = %.17g)%s",
                      what, f32 ? "complex64" : "complex128", worst, (long long)at,
                      at >= 0 ? v[2 * at] : 0, at >= 0 ? v[2 * at + 1] : 0, at >= 0 ? got[at] : 0,
                      ts_test_error_str());
}

static double bound_of(ts_dtype dt) {
    (void)dt;
    return 0.5 + 1e-6;
}

/* dense runs: every exponent range, and lengths 1 .. 40 (vector bodies and tails) */
static void test_dense(ts_device d, ts_dtype dt) {
    static double v[2 * NBIG];
    const bool f32 = dt == TS_C64;
    /* the parts' exponents: the whole range, then both parts near each other (the sum's
     * rounding matters), then one part far below the other */
    const int ranges[3][2] = {{f32 ? -149 : -1074, f32 ? 127 : 1023}, {-3, 3}, {-40, 40}};
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < NBIG; i++) {
            v[2 * i] = part(i, 1 + r, ranges[r][0], ranges[r][1]);
            v[2 * i + 1] = part(i, 5 + 3 * r, ranges[r][0], ranges[r][1]);
        }
        stored(v, 2 * NBIG, dt);
        ts_scope_begin();
        check("dense", ts_abs(mkc(NBIG, v, dt, d)), v, NBIG, dt, bound_of(dt));
        ts_scope_end();
    }
    for (int64_t n = 1; n <= 40; n++) {
        for (int i = 0; i < n; i++)
            v[2 * i] = part(i, (int)n, -2, 2), v[2 * i + 1] = part(i, 3 * (int)n, -2, 2);
        stored(v, 2 * n, dt);
        ts_scope_begin();
        check("length", ts_abs(mkc(n, v, dt, d)), v, n, dt, bound_of(dt));
        ts_scope_end();
    }
}

/* a strided view (every third element) and a transposed matrix */
static void test_strided(ts_device d, ts_dtype dt) {
    static double v[2 * 60], w[2 * 60];
    for (int i = 0; i < 60; i++) v[2 * i] = part(i, 2, -5, 5), v[2 * i + 1] = part(i, 9, -5, 5);
    stored(v, 120, dt);
    ts_scope_begin();
    ts_tensor *x = mkc(60, v, dt, d);
    for (int i = 0; i < 20; i++) w[2 * i] = v[6 * i], w[2 * i + 1] = v[6 * i + 1];
    check("stride 3", ts_abs(ts_slice(x, 0, 0, 60, 3)), w, 20, dt, bound_of(dt));
    ts_tensor *m = ts_transpose(ts_reshape(x, TS_SHAPE(6, 10)), 0, 1); /* [10, 6] */
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 6; j++)
            w[2 * (i * 6 + j)] = v[2 * (j * 10 + i)],
                           w[2 * (i * 6 + j) + 1] = v[2 * (j * 10 + i) + 1];
    ts_tensor *y = ts_abs(m);
    CHECK(y && ts_ndim(y) == 2 && ts_size(y, 0) == 10 && ts_size(y, 1) == 6);
    check("transposed", y, w, 60, dt, bound_of(dt));
    ts_scope_end();
}

/* C99 / PyTorch special values (each pair repeated through a vector body) */
static void test_special(ts_device d, ts_dtype dt) {
    const double inf = INFINITY, nan = NAN;
    const bool f32 = dt == TS_C64;
    const double big = f32 ? 3e38 : 1.5e308, tiny = f32 ? 1e-45 : 5e-324;
    const struct {
        double re, im, want;
    } e[] = {
        {inf, nan, inf}, {nan, -inf, inf}, {-inf, 0, inf},    {nan, 0, nan},     {0, nan, nan},
        {0, 0, 0},       {-0.0, -0.0, 0},  {3, 4, 5},         {-3, -4, 5},       {big, big, inf},
        {tiny, 0, tiny}, {0, -tiny, tiny}, {1e-30, 0, 1e-30}, {1e300, 0, 1e300},
    };
    const int ne = (int)(sizeof e / sizeof e[0]);
    for (int k = 0; k < ne; k++) {
        if (f32 && k == 13) continue; /* 1e300 is inf in float */
        double v[2 * 20], got[20];
        for (int i = 0; i < 20; i++) v[2 * i] = e[k].re, v[2 * i + 1] = e[k].im;
        double want = e[k].want;
        if (f32) want = (double)(float)want;
        ts_scope_begin();
        bool ok = rd(ts_abs(mkc(20, v, dt, d)), got, 20);
        for (int i = 0; ok && i < 20; i++)
            ok =
                isnan(want) ? isnan(got[i]) : got[i] == want && !signbit(got[i]); /* +0, never -0 */
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "special %d %s: |%g%+gi| = %g, want %g%s", k,
                          f32 ? "complex64" : "complex128", e[k].re, e[k].im, got[0], want,
                          ts_test_error_str());
        ts_scope_end();
    }
}

/* with a graph: the composition over the parts; d|z|/dz = z / |z| (PyTorch's convention), and the
 * value matches the kernel's within the bound */
static void test_graph(ts_device d, ts_dtype dt) {
    double v[2 * 8];
    for (int i = 0; i < 8; i++) v[2 * i] = part(i, 4, -3, 3), v[2 * i + 1] = part(i, 6, -3, 3);
    stored(v, 16, dt);
    ts_scope_begin();
    ts_tensor *x = mkc(8, v, dt, d);
    ts_set_requires_grad(x, true);
    ts_tensor *y = ts_abs(x);
    check("graph", y, v, 8, dt, dt == TS_C64 ? 2.0 : 2.0);
    ts_backward(ts_sum(y));
    ts_tensor *g = ts_grad(x);
    double gv[16];
    bool ok = g && rd(ts_view_as_real(g), gv, 16);
    const double tol = dt == TS_C64 ? 1e-6 : 1e-14;
    for (int i = 0; ok && i < 8; i++) {
        const double a = hypot(v[2 * i], v[2 * i + 1]);
        ok = fabs(gv[2 * i] - v[2 * i] / a) <= tol && fabs(gv[2 * i + 1] - v[2 * i + 1] / a) <= tol;
    }
    CHECK(ok);
    ts_scope_end();
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int k = 0; k < ndev; k++)
        for (int t = 0; t < 2; t++) {
            const ts_dtype dt = t ? TS_C128 : TS_C64;
            test_dense(devs[k], dt);
            test_strided(devs[k], dt);
            test_special(devs[k], dt);
            test_graph(devs[k], dt);
        }
    CHECK_OK();
    return ts_test_finish();
}
