/* test_special_functions.c — torch.special's remaining functions (include/tessera/special.h) on
 * every device: ndtr / log_ndtr / erfcx / entr swept against long double references, ndtri by its
 * round trip, the Bessel functions against 80-digit values of their power series
 * (tests/gen_special_functions.py) and the Wronskian, the incomplete gamma functions against their
 * finite sums at integer a, zeta against its closed forms, the polynomials against their
 * trigonometric and explicit forms; PyTorch's edge values, result dtypes, refusals, and
 * ts_gradcheck of each differentiable function. */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "tessera.h"
#include "tessera/special.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define PI_L 3.141592653589793238462643383279502884L
#define EPS  DBL_EPSILON

static ts_tensor *mk(const double *v, int64_t n, ts_dtype dt, ts_device d) {
    return ts_to(ts_to_dtype(ts_tensor_f64(TS_SHAPE(n), v, (ts_opts){.device = ts_cpu()}), dt), d);
}
static bool rd(ts_tensor *t, double *out, int64_t n) {
    ts_tensor *h = t ? ts_to_dtype(ts_to(t, ts_cpu()), TS_F64) : NULL;
    return h && ts_numel(h) == n && ts_copy_to_host(h, out, (size_t)n * sizeof(double)) == TS_OK;
}
static bool same(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

/* |got - want| <= ulps eps |want| + abs_tol, reported once per op and device */
static void near_all(const char *what, ts_device d, const double *got, const long double *want,
                     int n, double ulps, double abs_tol) {
    double worst = 0;
    int at = -1;
    for (int i = 0; i < n; i++) {
        const double w = (double)want[i], e = fabs(got[i] - w);
        if (isnan(w) || isinf(w)) {
            if (!same(got[i], w)) worst = INFINITY, at = i;
            continue;
        }
        const double r = e == 0 ? 0 : e / (ulps * EPS * fabs(w) + abs_tol);
        if (!(r <= worst)) worst = r, at = i;
    }
    ts_test_record(worst <= 1);
    if (!(worst <= 1))
        ts_test_failf(__FILE__, __LINE__, "%s on %s: element %d got %.17g want %.17Lg", what,
                      ts_device_str(d), at, got[at], want[at]);
}

/* ------------------------------------------------------------------ sweeps (f64) */
enum { NS = 401 };
typedef ts_tensor *(*unfn)(ts_tensor *);

static void sweep(const char *what, unfn f, long double (*ref)(long double), double lo, double hi,
                  double ulps, double abs_tol) {
    static double x[NS], got[NS];
    static long double want[NS];
    for (int i = 0; i < NS; i++) {
        x[i] = lo + (hi - lo) * i / (NS - 1);
        want[i] = ref(x[i]);
    }
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        CHECK(rd(f(mk(x, NS, TS_F64, devs[di])), got, NS));
        near_all(what, devs[di], got, want, NS, ulps, abs_tol);
        ts_scope_end();
    }
}

static long double r_ndtr(long double x) { return 0.5L * erfcl(-x / sqrtl(2.0L)); }
static long double r_log_ndtr(long double x) {
    return x > 0 ? log1pl(-0.5L * erfcl(x / sqrtl(2.0L))) : logl(r_ndtr(x));
}
static long double r_erfcx(long double x) { return expl(x * x) * erfcl(x); }
static long double r_entr(long double x) { return x == 0 ? 0 : -x * logl(x); }

static void test_sweeps(void) {
    sweep("ndtr", ts_ndtr, r_ndtr, -37, 8, 8, 0);
    sweep("log_ndtr", ts_log_ndtr, r_log_ndtr, -140, 30, 8, 1e-300);
    sweep("erfcx", ts_erfcx, r_erfcx, -26, 100, 16, 0);
    sweep("entr", ts_entr, r_entr, 0, 50, 4, 0);
    /* ndtri: ndtr(ndtri(p)) = p to a few ulps of x (the slope of ndtr is phi(x)) */
    static double p[NS], got[NS];
    for (int i = 0; i < NS; i++)
        p[i] = i < NS / 2 ? pow(10, -300.0 * i / (NS / 2)) : (double)(i - NS / 2) / (NS / 2 + 1);
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        CHECK(rd(ts_ndtri(mk(p, NS, TS_F64, devs[di])), got, NS));
        double worst = 0;
        int at = 0;
        for (int i = 0; i < NS; i++) {
            if (p[i] == 0 || p[i] == 1) continue;
            const long double x = got[i], phi = expl(-x * x / 2) / sqrtl(2 * PI_L);
            const double err = (double)(fabsl(r_ndtr(x) - p[i]) / (phi * (fabsl(x) + 1)));
            if (!(err <= worst)) worst = err, at = i;
        }
        ts_test_record(worst <= 16 * EPS);
        if (!(worst <= 16 * EPS))
            ts_test_failf(__FILE__, __LINE__, "ndtri round trip on %s: p %.17g x %.17g (%g)",
                          ts_device_str(devs[di]), p[at], got[at], worst / EPS);
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ Bessel functions */
enum { NB = 10 };
static const double bx[NB] = {0.0005, 0.1, 1, 2.5, 4.75, 8, 13.2, 24.9, 25.1, 40};
/* python3 tests/gen_special_functions.py (80-digit power series) */
static const double ref_j0[NB] = {0.99999993750000093,   0.99750156206604002,  0.76519768655796661,
                                  -0.048383776468197998, -0.25512082749137394, 0.1716508071375539,
                                  0.21668592225856409,   0.083245968353015676, 0.10827567149994929,
                                  0.0073668905842372897};
static const double ref_j1[NB] = {
    0.00024999999218750006, 0.049937526036241998, 0.4400505857449335,    0.49709410246427405,
    -0.28918679864711039,   0.23463634685391463,  -0.027066702764779099, -0.13485569953140875,
    -0.11463478413442273,   0.126038318037585};
static const double ref_y0[NB] = {-4.9126887418587586,   -1.5342386513503667,  0.088256964215676956,
                                  0.49807035961523188,   -0.2612325032349756,  0.22352148938756622,
                                  -0.035237877102292876, -0.13649918399676511, -0.11676770763803711,
                                  0.12593641705826092};
static const double ref_y1[NB] = {-1273.2408524848618,  -6.4589510947020266,   -0.78121282130028868,
                                  0.14591813796678579,  0.22922559673872217,   -0.15806046173124749,
                                  -0.21817290664552919, -0.086002557595554446, -0.11062223322783082,
                                  -0.005793505821549633};
static const double ref_k0[NB] = {
    7.7168345200026272,     2.4270690247020168,     0.42102443824070834,    0.062347553200366189,
    0.0048572045578879524,  0.00014647070522281539, 6.3258359450609666e-07, 3.8360965209894869e-12,
    3.1283127143211217e-12, 8.3928611000995672e-19};
static const double ref_k1[NB] = {
    1999.9979457914362,     9.853844780870606,      0.60190723019723458,    0.073890816347747065,
    0.0053459218178228398,  0.00015536921180500115, 6.5612212749546659e-07, 3.9123824362567574e-12,
    3.1900323186042706e-12, 8.4971319548610387e-19};

static void bessel_case(const char *what, unfn f, const double *ref, double sign, double ulps,
                        double abs_tol, bool scaled) {
    double x[NB], got[NB];
    long double want[NB];
    for (int i = 0; i < NB; i++) {
        x[i] = sign * bx[i];
        want[i] = scaled ? ref[i] * expl(bx[i]) : (long double)ref[i];
        if (sign < 0 && ref == ref_j1) want[i] = -want[i]; /* J1 is odd */
    }
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        CHECK(rd(f(mk(x, NB, TS_F64, devs[di])), got, NB));
        near_all(what, devs[di], got, want, NB, ulps, abs_tol);
        ts_scope_end();
    }
}

static void test_bessel(void) {
    /* J, Y oscillate: an absolute error near their zeros (PyTorch's own is ~1e-7 there) */
    bessel_case("bessel_j0", ts_bessel_j0, ref_j0, 1, 16, 4 * EPS, false);
    bessel_case("bessel_j0(-x)", ts_bessel_j0, ref_j0, -1, 16, 4 * EPS, false);
    bessel_case("bessel_j1", ts_bessel_j1, ref_j1, 1, 16, 4 * EPS, false);
    bessel_case("bessel_j1(-x)", ts_bessel_j1, ref_j1, -1, 16, 4 * EPS, false);
    bessel_case("bessel_y0", ts_bessel_y0, ref_y0, 1, 16, 8 * EPS, false);
    bessel_case("bessel_y1", ts_bessel_y1, ref_y1, 1, 16, 8 * EPS, false);
    bessel_case("modified_bessel_k0", ts_modified_bessel_k0, ref_k0, 1, 16, 0, false);
    bessel_case("modified_bessel_k1", ts_modified_bessel_k1, ref_k1, 1, 16, 0, false);
    bessel_case("scaled_modified_bessel_k0", ts_scaled_modified_bessel_k0, ref_k0, 1, 16, 0, true);
    bessel_case("scaled_modified_bessel_k1", ts_scaled_modified_bessel_k1, ref_k1, 1, 16, 0, true);
    /* the Wronskian J1 Y0 - J0 Y1 = 2 / (pi x) over a sweep through every method's range */
    static double x[NS], j0[NS], j1[NS], y0[NS], y1[NS];
    for (int i = 0; i < NS; i++) x[i] = 1e-4 * pow(1e6, (double)i / (NS - 1));
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        ts_tensor *t = mk(x, NS, TS_F64, devs[di]);
        CHECK(rd(ts_bessel_j0(t), j0, NS) && rd(ts_bessel_j1(t), j1, NS));
        CHECK(rd(ts_bessel_y0(t), y0, NS) && rd(ts_bessel_y1(t), y1, NS));
        double worst = 0;
        for (int i = 0; i < NS; i++) {
            const double w = (double)(((long double)j1[i] * y0[i] - (long double)j0[i] * y1[i]) *
                                      PI_L * x[i] / 2) -
                             1;
            if (!(fabs(w) <= worst)) worst = fabs(w);
        }
        CHECK(worst <= 64 * EPS);
        /* spherical j0 = sin(x) / x */
        double s[NS];
        CHECK(rd(ts_spherical_bessel_j0(t), s, NS));
        worst = 0;
        for (int i = 0; i < NS; i++) {
            const double e = fabs(s[i] - (double)(sinl(x[i]) / x[i]));
            if (!(e <= worst)) worst = e;
        }
        CHECK(worst <= 2 * EPS);
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ two arguments */
typedef ts_tensor *(*binfn)(ts_tensor *, ts_tensor *);
static void binary_check(const char *what, binfn f, const double *a, const double *b,
                         const long double *want, int n, double ulps, double abs_tol) {
    double got[64];
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        CHECK(rd(f(mk(a, n, TS_F64, devs[di]), mk(b, n, TS_F64, devs[di])), got, n));
        near_all(what, devs[di], got, want, n, ulps, abs_tol);
        ts_scope_end();
    }
}

/* Q(n, x) = e^-x sum_{k<n} x^k / k!, P = e^-x sum_{k>=n} x^k / k! (positive terms, long double) */
static long double r_igam(int n, long double x, bool upper) {
    long double t = expl(-x), q = 0, p = 0;
    for (int k = 0; k < 2000; k++) {
        if (k < n)
            q += t;
        else
            p += t;
        t *= x / (k + 1);
        if (k > n && t < p * 1e-22L) break;
    }
    return upper ? q : p;
}

static void test_binary(void) {
    enum { NI = 12 };
    static const int an[NI] = {1, 2, 3, 5, 10, 10, 30, 30, 50, 100, 100, 7};
    static const double ax[NI] = {0.5, 3, 0.1, 12, 2, 10, 25, 40, 49, 90, 120, 0.001};
    double a[NI], x[NI];
    long double wp[NI], wq[NI];
    for (int i = 0; i < NI; i++) {
        a[i] = an[i], x[i] = ax[i];
        wp[i] = r_igam(an[i], ax[i], false);
        wq[i] = r_igam(an[i], ax[i], true);
    }
    /* the prefactor e^(a log x - x - lgamma a) carries lgamma's rounding times a few hundred */
    binary_check("igamma", ts_igamma, a, x, wp, NI, 2048, 0);
    binary_check("igammac", ts_igammac, a, x, wq, NI, 2048, 0);
    /* PyTorch's edges: (a, x) = (0, 0) NaN, (0, 1) 1, (1, 0) 0, (-1, 1) NaN, (inf, 1) 0,
     * (2, inf) 1, (2, -1) NaN */
    static const double ea[7] = {0, 0, 1, -1, INFINITY, 2, 2};
    static const double ex[7] = {0, 1, 0, 1, 1, INFINITY, -1};
    static const long double ep[7] = {NAN, 1, 0, NAN, 0, 1, NAN},
                             eq[7] = {NAN, 0, 1, NAN, 1, 0, NAN};
    binary_check("igamma edges", ts_igamma, ea, ex, ep, 7, 0, 0);
    binary_check("igammac edges", ts_igammac, ea, ex, eq, 7, 0, 0);
    /* zeta: closed forms, the pole and PyTorch's domain */
    static const double zs[8] = {2, 4, 2, 3, 1, 0.5, 2, 2.5};
    static const double zq[8] = {1, 1, 0.5, 2, 1, 1, -1, -1.5};
    const long double zw[8] = {PI_L * PI_L / 6, PI_L * PI_L * PI_L * PI_L / 90,
                               PI_L * PI_L / 2, 1.2020569031595942853997381615114L - 1,
                               INFINITY,        NAN,
                               INFINITY,        NAN};
    binary_check("zeta", ts_zeta, zs, zq, zw, 8, 8, 0);
}

/* ------------------------------------------------------------------ polynomials */
static void test_polynomials(void) {
    enum { NP = 24 };
    double x[NP], n[NP];
    long double t[NP], u[NP], v[NP], w[NP], st[NP], h[NP], he[NP], l[NP], p[NP];
    for (int i = 0; i < NP; i++) {
        const long double th = 0.1L + 2.9L * i / NP, c = cosl(th);
        const int k = i % 12; /* both the recurrence (n <= 6 or 8) and the closed forms */
        x[i] = (double)c;
        n[i] = k + 0.75; /* truncated to k */
        const long double xl = x[i], th2 = acosl(xl);
        t[i] = cosl(k * th2);
        u[i] = sinl((k + 1) * th2) / sinl(th2);
        v[i] = cosl((k + 0.5L) * th2) / cosl(th2 / 2);
        w[i] = sinl((k + 0.5L) * th2) / sinl(th2 / 2);
        (void)st;
    }
    binary_check("chebyshev_polynomial_t", ts_chebyshev_polynomial_t, x, n, t, NP, 64, 64 * EPS);
    binary_check("chebyshev_polynomial_u", ts_chebyshev_polynomial_u, x, n, u, NP, 64, 64 * EPS);
    binary_check("chebyshev_polynomial_v", ts_chebyshev_polynomial_v, x, n, v, NP, 64, 64 * EPS);
    binary_check("chebyshev_polynomial_w", ts_chebyshev_polynomial_w, x, n, w, NP, 64, 64 * EPS);
    /* shifted: T*_n(x) = T_n(2x - 1) */
    double xs[NP];
    for (int i = 0; i < NP; i++)
        xs[i] = (x[i] + 1) / 2, st[i] = cosl(((int)n[i]) * acosl(2.0L * xs[i] - 1));
    binary_check("shifted_chebyshev_polynomial_t", ts_shifted_chebyshev_polynomial_t, xs, n, st, NP,
                 64, 64 * EPS);
    /* explicit forms at n = 3, 4 (Hermite H, He; Laguerre; Legendre) */
    double x3[NP], n3[NP];
    for (int i = 0; i < NP; i++) {
        const long double z = -3 + 6.0L * i / (NP - 1);
        x3[i] = (double)z;
        n3[i] = i & 1 ? 4 : 3;
        const long double z2 = z * z;
        if (i & 1) {
            h[i] = 16 * z2 * z2 - 48 * z2 + 12;
            he[i] = z2 * z2 - 6 * z2 + 3;
            l[i] = (z2 * z2 - 16 * z2 * z + 72 * z2 - 96 * z + 24) / 24;
            p[i] = (35 * z2 * z2 - 30 * z2 + 3) / 8;
        } else {
            h[i] = 8 * z2 * z - 12 * z;
            he[i] = z2 * z - 3 * z;
            l[i] = (-z2 * z + 9 * z2 - 18 * z + 6) / 6;
            p[i] = (5 * z2 * z - 3 * z) / 2;
        }
    }
    binary_check("hermite_polynomial_h", ts_hermite_polynomial_h, x3, n3, h, NP, 64, 8192 * EPS);
    binary_check("hermite_polynomial_he", ts_hermite_polynomial_he, x3, n3, he, NP, 64, 2048 * EPS);
    binary_check("laguerre_polynomial_l", ts_laguerre_polynomial_l, x3, n3, l, NP, 64, 2048 * EPS);
    binary_check("legendre_polynomial_p", ts_legendre_polynomial_p, x3, n3, p, NP, 64, 2048 * EPS);
    /* PyTorch's edges: n < 0 gives 0; at x = -1, n = 3: T -1, U -4, V -7, W -1 */
    static const double ex[2] = {-1, 0.3}, en[2] = {3, -1};
    static const long double et[2] = {-1, 0}, eu[2] = {-4, 0}, ev[2] = {-7, 0}, ew[2] = {-1, 0};
    binary_check("chebyshev_polynomial_t edges", ts_chebyshev_polynomial_t, ex, en, et, 2, 0, 0);
    binary_check("chebyshev_polynomial_u edges", ts_chebyshev_polynomial_u, ex, en, eu, 2, 0, 0);
    binary_check("chebyshev_polynomial_v edges", ts_chebyshev_polynomial_v, ex, en, ev, 2, 0, 0);
    binary_check("chebyshev_polynomial_w edges", ts_chebyshev_polynomial_w, ex, en, ew, 2, 0, 0);
}

/* ------------------------------------------------------------------ edges, dtypes, refusals */
static void test_edges(void) {
    static const double e[6] = {-INFINITY, -2, 0, 1e-310, INFINITY, NAN};
    double g[6];
    for (int di = 0; di < ndev; di++) {
        ts_device d = devs[di];
        ts_scope_begin();
        ts_tensor *t = mk(e, 6, TS_F64, d);
        /* PyTorch 2's values at these points */
        CHECK(rd(ts_bessel_j0(t), g, 6) && isnan(g[0]) && g[2] == 1 && isnan(g[4]) && isnan(g[5]));
        CHECK(rd(ts_bessel_y0(t), g, 6) && isnan(g[1]) && g[2] == -INFINITY);
        CHECK(rd(ts_bessel_y1(t), g, 6) && g[3] == -INFINITY);
        CHECK(rd(ts_modified_bessel_k0(t), g, 6) && isnan(g[1]) && g[2] == INFINITY && g[4] == 0);
        CHECK(rd(ts_modified_bessel_k1(t), g, 6) && g[3] == INFINITY);
        CHECK(rd(ts_spherical_bessel_j0(t), g, 6) && g[0] == 0 && g[2] == 1 && g[4] == 0);
        CHECK(rd(ts_ndtr(t), g, 6) && g[0] == 0 && g[2] == 0.5 && g[4] == 1);
        CHECK(rd(ts_log_ndtr(t), g, 6) && g[0] == -INFINITY && g[4] == 0);
        CHECK(rd(ts_erfcx(t), g, 6) && g[0] == INFINITY && g[2] == 1 && g[4] == 0);
        CHECK(rd(ts_entr(t), g, 6) && g[0] == -INFINITY && g[1] == -INFINITY && g[2] == 0 &&
              g[4] == -INFINITY && isnan(g[5]));
        static const double pe[5] = {0, 1, 0.5, -0.1, 1.1};
        CHECK(rd(ts_ndtri(mk(pe, 5, TS_F64, d)), g, 5) && g[0] == -INFINITY && g[1] == INFINITY &&
              g[2] == 0 && isnan(g[3]) && isnan(g[4]));
        /* dtypes: integers compute in float32; f16, bf16 and f32 keep theirs */
        static const double iv[2] = {1, 2};
        ts_tensor *ti = mk(iv, 2, TS_I64, d);
        ts_tensor *r = ts_bessel_j0(ti);
        CHECK(r && ts_dtype_of(r) == TS_F32);
        r = ts_chebyshev_polynomial_t(ti, ti);
        CHECK(r && ts_dtype_of(r) == TS_F32 && rd(r, g, 2) && g[0] == 1 && g[1] == 7);
        r = ts_ndtr(mk(iv, 2, TS_F16, d));
        CHECK(r && ts_dtype_of(r) == TS_F16);
        r = ts_igamma(mk(iv, 2, TS_BF16, d), mk(iv, 2, TS_F32, d));
        CHECK(r && ts_dtype_of(r) == TS_F32);
        /* f32 rounds the double result */
        CHECK(rd(ts_erfcx(mk(iv, 2, TS_F32, d)), g, 2));
        CHECK(g[1] == (double)(float)(double)r_erfcx(2));
        /* mvlgamma: p = 1 is lgamma; p = 3 the sum; the domain check */
        static const double mv[2] = {2.5, 7};
        CHECK(rd(ts_mvlgamma(mk(mv, 2, TS_F64, d), 3), g, 2));
        const long double m3 = lgammal(7) + lgammal(6.5L) + lgammal(6) + 1.5L * logl(PI_L);
        CHECK(fabs(g[1] - (double)m3) <= 8 * EPS * fabs((double)m3));
        CHECK(!ts_mvlgamma(mk(mv, 2, TS_F64, d), 6));
        CHECK_ERR_HAS(TS_ERR_ARG, "greater than (p-1)/2");
        CHECK(!ts_mvlgamma(mk(mv, 2, TS_F64, d), 0));
        CHECK_ERR(TS_ERR_ARG);
        ts_scope_end();
    }
    /* refusals: no derivative in PyTorch */
    ts_scope_begin();
    static const double v[2] = {0.5, 1.5};
    ts_tensor *a = ts_tensor_f64(TS_SHAPE(2), v, (ts_opts){.requires_grad = true});
    ts_tensor *b = ts_tensor_f64(TS_SHAPE(2), v, (ts_opts){0});
    CHECK(!ts_spherical_bessel_j0(a));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "spherical_bessel_j0: autograd is not implemented");
    CHECK(!ts_scaled_modified_bessel_k0(a));
    CHECK_ERR(TS_ERR_UNSUPPORTED);
    CHECK(!ts_legendre_polynomial_p(a, b));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "legendre_polynomial_p: autograd is not implemented");
    CHECK(!ts_zeta(a, b));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "for 'input'");
    CHECK(!ts_igamma(a, b));
    CHECK_ERR(TS_ERR_UNSUPPORTED);
    CHECK(ts_zeta(ts_add_scalar(b, 1), a)); /* the second argument differentiates */
    ts_no_grad_begin();
    CHECK(ts_spherical_bessel_j0(a)); /* no graph: fine */
    ts_no_grad_end();
    CHECK(!ts_ndtr(NULL));
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
    if (ndev > 1) { /* operands on two devices */
        ts_scope_begin();
        CHECK(!ts_igamma(mk(v, 2, TS_F64, devs[0]), mk(v, 2, TS_F64, devs[1])));
        CHECK_ERR(TS_ERR_DEVICE);
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ gradients */
typedef struct gcase {
    const char *name;
    unfn f;
    binfn g;
    double lo, hi;
} gcase;

static ts_tensor *g_call(ts_tensor *const *in, int n, void *ctx) {
    const gcase *c = ctx;
    if (c->f) return c->f(in[0]);
    return c->g(in[0], in[1]);
}
static ts_tensor *g_mvlgamma(ts_tensor *const *in, int n, void *ctx) {
    return ts_mvlgamma(in[0], 3);
}

static void test_grads(void) {
    static const gcase cases[] = {
        {"ndtr", ts_ndtr, NULL, -3, 3},
        {"ndtri", ts_ndtri, NULL, 0.05, 0.95},
        {"log_ndtr", ts_log_ndtr, NULL, -5, 3},
        {"erfcx", ts_erfcx, NULL, -2, 4},
        {"entr", ts_entr, NULL, 0.2, 3},
        {"bessel_j0", ts_bessel_j0, NULL, -6, 6},
        {"bessel_j1", ts_bessel_j1, NULL, -6, 6},
        {"bessel_y0", ts_bessel_y0, NULL, 0.5, 30},
        {"bessel_y1", ts_bessel_y1, NULL, 0.5, 30},
        {"modified_bessel_k0", ts_modified_bessel_k0, NULL, 0.3, 5},
        {"modified_bessel_k1", ts_modified_bessel_k1, NULL, 0.3, 5},
        {"zeta", NULL, ts_zeta, 0.5, 4},
        {"igamma", NULL, ts_igamma, 0.5, 4},
        {"igammac", NULL, ts_igammac, 0.5, 4},
    };
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-6, .rtol = 1e-5};
    for (int di = 0; di < ndev; di++) {
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
            const gcase *c = &cases[k];
            double x[7], s[7];
            for (int i = 0; i < 7; i++) x[i] = c->lo + (c->hi - c->lo) * (i + 0.37) / 7;
            for (int i = 0; i < 7; i++) s[i] = 2 + 0.3 * i; /* zeta's s, igamma's a */
            ts_scope_begin();
            ts_opts o = {.dtype = TS_F64, .device = devs[di], .requires_grad = true};
            ts_tensor *in[2];
            int n = 1;
            if (c->f) {
                in[0] = ts_tensor_f64(TS_SHAPE(7), x, o);
            } else {
                ts_opts o2 = o;
                o2.requires_grad = false;
                in[0] = ts_tensor_f64(TS_SHAPE(7), s, o2);
                in[1] = ts_tensor_f64(TS_SHAPE(7), x, o);
                n = 2;
            }
            const bool ok = ts_gradcheck(g_call, (void *)c, in, n, go);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck %s on %s%s", c->name,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
        }
        ts_scope_begin();
        static const double mv[3] = {1.7, 2.5, 4};
        ts_tensor *m = ts_tensor_f64(
            TS_SHAPE(3), mv, (ts_opts){.dtype = TS_F64, .device = devs[di], .requires_grad = true});
        CHECK(ts_gradcheck(g_mvlgamma, NULL, &m, 1, go));
        ts_scope_end();
    }
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_sweeps();
    test_bessel();
    test_binary();
    test_polynomials();
    test_edges();
    test_grads();
    return ts_test_finish();
}
