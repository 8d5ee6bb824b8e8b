/* test_complex_linalg_math.c — issue 52's second round of complex tensors (src/ops/complex_math.c,
 * complex_linalg.c, complex_inplace.c) on every device, against C99 double complex arithmetic:
 * matmul / mm / bmm / mv / dot / vdot, the transcendental functions (exp, log, log2, log10,
 * sqrt, rsqrt, reciprocal, sin, cos, tan, sinh, cosh, tanh, sigmoid, sgn, square, pow), their
 * branch cuts and special values, eq / ne / isnan / isinf / isfinite / isreal / isclose, the
 * in-place forms (add_, sub_, mul_, div_, pow_, their scalar forms, exp_...), gradients by
 * ts_gradcheck through real wrappers and against the analytic derivative on a complex leaf
 * (PyTorch's convention: the gradient of Re(w f(z)) is conj(w f'(z))), and the refusals. */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tessera.h"
#include "tessera/autograd.h"
#include "tessera/complex.h"
#include "tessera/logic.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define N   12
#define U32 5.9604644775390625e-8  /* 2^-24 */
#define U64 1.1102230246251565e-16 /* 2^-53 */

static void fill(double complex *v, int n, int seed) {
    for (int i = 0; i < n; i++)
        v[i] = 2.5 * sin(0.71 * (i + 1) + 1.3 * seed) + I * 1.7 * cos(0.37 * (i + 2) + seed);
}

/* v as dt holds it */
static double complex held(double complex v, ts_dtype dt) {
    return dt == TS_C64 ? CMPLX((float)creal(v), (float)cimag(v)) : v;
}

static ts_tensor *mkc(ts_shape s, const double complex *v, ts_dtype dt, ts_device d) {
    ts_shape rs = s;
    rs.dims[rs.ndim++] = 2;
    ts_tensor *r = ts_tensor_f64(rs, (const double *)v, (ts_opts){.dtype = TS_F64});
    return ts_to(ts_to_dtype(ts_view_as_complex(r), dt), d);
}

static bool rdc(ts_tensor *t, double complex *out, int64_t n) {
    ts_tensor *h = t ? ts_view_as_real(ts_to_dtype(ts_to(t, ts_cpu()), TS_C128)) : NULL;
    h = h ? ts_contiguous(h) : NULL;
    return h && ts_numel(h) == 2 * n &&
           ts_copy_to_host(h, out, (size_t)n * sizeof(double complex)) == TS_OK;
}
static bool rdb(ts_tensor *t, double *out, int64_t n) {
    ts_tensor *h = t ? ts_to_dtype(ts_to(ts_contiguous(t), ts_cpu()), TS_F64) : NULL;
    return h && ts_numel(h) == n && ts_copy_to_host(h, out, (size_t)n * sizeof(double)) == TS_OK;
}

/* |got - ref| <= tol[i] elementwise (both NaN parts, equal infinities: equal) */
static bool same_special(double g, double r) {
    return (isnan(g) && isnan(r)) || (isinf(r) && g == r);
}
static void check_tol(const char *what, ts_tensor *t, const double complex *ref, const double *tol,
                      int64_t n) {
    double complex got[64];
    bool ok = n <= 64 && rdc(t, got, n);
    int64_t at = -1;
    for (int64_t i = 0; ok && i < n; i++) {
        double dr = creal(got[i]) - creal(ref[i]), di = cimag(got[i]) - cimag(ref[i]);
        bool re_ok = same_special(creal(got[i]), creal(ref[i])) || fabs(dr) <= tol[i];
        bool im_ok = same_special(cimag(got[i]), cimag(ref[i])) || fabs(di) <= tol[i];
        if (!(re_ok && im_ok)) ok = false, at = i;
    }
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__,
                      "%s: element %lld %.17g%+.17gi vs %.17g%+.17gi (tol %g)%s", what,
                      (long long)at, at >= 0 ? creal(got[at]) : 0.0, at >= 0 ? cimag(got[at]) : 0.0,
                      at >= 0 ? creal(ref[at]) : 0.0, at >= 0 ? cimag(ref[at]) : 0.0,
                      at >= 0 ? tol[at] : 0.0, ts_test_error_str());
    ts_error_clear();
}
/* the same with tol * (1 + |ref|) */
static void check_c(const char *what, ts_tensor *t, const double complex *ref, int64_t n,
                    double tol) {
    double tl[64];
    for (int64_t i = 0; i < n && i < 64; i++) tl[i] = tol * (1 + cabs(ref[i]));
    check_tol(what, t, ref, tl, n);
}
/* every bit, the signs of zeros too */
static void check_bits(const char *what, ts_tensor *t, const double complex *ref, int64_t n) {
    double complex got[16];
    bool ok = n <= 16 && rdc(t, got, n);
    int64_t at = -1;
    for (int64_t i = 0; ok && i < n; i++) {
        double g[2] = {creal(got[i]), cimag(got[i])}, r[2] = {creal(ref[i]), cimag(ref[i])};
        for (int k = 0; k < 2; k++)
            if (!(isnan(g[k]) && isnan(r[k])) && memcmp(&g[k], &r[k], sizeof(double)) != 0)
                ok = false, at = i;
    }
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s: element %lld %g%+gi vs %g%+gi%s", what,
                      (long long)at, at >= 0 ? creal(got[at]) : 0.0, at >= 0 ? cimag(got[at]) : 0.0,
                      at >= 0 ? creal(ref[at]) : 0.0, at >= 0 ? cimag(ref[at]) : 0.0,
                      ts_test_error_str());
    ts_error_clear();
}
static void check_bools(const char *what, ts_tensor *t, const bool *ref, int64_t n) {
    double got[64];
    bool ok = t && ts_dtype_of(t) == TS_BOOL && n <= 64 && rdb(t, got, n);
    int64_t at = -1;
    for (int64_t i = 0; ok && i < n; i++)
        if ((got[i] != 0) != ref[i]) ok = false, at = i;
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s: element %lld%s", what, (long long)at,
                      ts_test_error_str());
    ts_error_clear();
}

/* ------------------------------------------------------------------ matmul family */
/* C[m, n] = sum_k A[m, k] B[k, n] in double complex, and the bound of its rounding:
 * (k + 4) u sum_k |A||B| (k - 1 additions, a complex product's two roundings and a sum of two) */
static void ref_mm(const double complex *a, const double complex *b, int m, int k, int n,
                   bool conj_a, double u, double complex *c, double *tol) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double complex s = 0;
            double mag = 0;
            for (int l = 0; l < k; l++) {
                double complex x = conj_a ? conj(a[i * k + l]) : a[i * k + l];
                s += x * b[l * n + j];
                mag += cabs(x) * cabs(b[l * n + j]);
            }
            c[i * n + j] = s;
            tol[i * n + j] = (k + 4) * u * mag + 1e-300;
        }
}

static void test_matmul(void) {
    double complex a[24], b[40], ah[24], bh[40], ref[64];
    double tol[64];
    fill(a, 24, 1);
    fill(b, 40, 2);
    const ts_dtype dts[2] = {TS_C64, TS_C128};
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < 2; k++) {
            const ts_dtype dt = dts[k];
            const double u = dt == TS_C64 ? U32 : U64;
            for (int i = 0; i < 24; i++) ah[i] = held(a[i], dt);
            for (int i = 0; i < 40; i++) bh[i] = held(b[i], dt);
            char what[96];
            ts_scope_begin();
            const ts_device d = devs[di];
            snprintf(what, sizeof what, "%s on %s", ts_dtype_name(dt), ts_device_str(d));
            /* mm / matmul [3, 4] @ [4, 5] */
            ts_tensor *A = mkc(TS_SHAPE(3, 4), a, dt, d), *B = mkc(TS_SHAPE(4, 5), b, dt, d);
            ref_mm(ah, bh, 3, 4, 5, false, u, ref, tol);
            ts_tensor *y = ts_mm(A, B);
            CHECK(y && ts_dtype_of(y) == dt && ts_device_of(y).type == d.type);
            check_tol("mm", y, ref, tol, 15);
            check_tol("matmul 2-d", ts_matmul(A, B), ref, tol, 15);
            /* a transposed (strided) operand: A^T [4, 3] read back as [3, 4] */
            ts_tensor *At = ts_transpose(ts_contiguous(ts_transpose(A, 0, 1)), 0, 1);
            check_tol("mm strided", ts_mm(At, B), ref, tol, 15);
            /* bmm [2, 3, 4] @ [2, 4, 5] and matmul's broadcast [2, 3, 4] @ [4, 5] */
            ts_tensor *A2 = mkc(TS_SHAPE(2, 3, 4), a, dt, d);
            ts_tensor *B2 = mkc(TS_SHAPE(2, 4, 5), b, dt, d);
            double complex r2[30];
            double t2[30];
            ref_mm(ah, bh, 3, 4, 5, false, u, r2, t2);
            ref_mm(ah + 12, bh + 20, 3, 4, 5, false, u, r2 + 15, t2 + 15);
            check_tol("bmm", ts_bmm(A2, B2), r2, t2, 30);
            ref_mm(ah + 12, bh, 3, 4, 5, false, u, r2 + 15, t2 + 15);
            check_tol("matmul broadcast", ts_matmul(A2, B), r2, t2, 30);
            /* mv [3, 4] @ [4], dot, vdot (conjugates its first operand), matmul of vectors */
            ts_tensor *v = mkc(TS_SHAPE(4), b, dt, d);
            ref_mm(ah, bh, 3, 4, 1, false, u, ref, tol);
            check_tol("mv", ts_mv(A, v), ref, tol, 3);
            check_tol("matmul mat-vec", ts_matmul(A, v), ref, tol, 3);
            ts_tensor *x = mkc(TS_SHAPE(4), a, dt, d);
            ref_mm(ah, bh, 1, 4, 1, false, u, ref, tol);
            y = ts_dot(x, v);
            CHECK(y && ts_ndim(y) == 0);
            check_tol(what, y, ref, tol, 1);
            check_tol("matmul vec-vec", ts_matmul(x, v), ref, tol, 1);
            ref_mm(ah, bh, 1, 4, 1, true, u, ref, tol);
            check_tol("vdot", ts_vdot(x, v), ref, tol, 1);
            /* PyTorch's refusals: a real operand, two complex dtypes, mismatched sizes */
            ts_tensor *R = ts_to(ts_ones(TS_SHAPE(4, 5), (ts_opts){0}), d);
            CHECK(ts_matmul(A, R) == NULL);
            CHECK_ERR_HAS(TS_ERR_DTYPE, "matmul: expected both operands to have the same dtype");
            CHECK(ts_mm(ts_real(A), B) == NULL);
            CHECK_ERR_HAS(TS_ERR_DTYPE, "mm: expected both operands");
            CHECK(ts_dot(x, ts_to_dtype(v, dt == TS_C64 ? TS_C128 : TS_C64)) == NULL);
            CHECK_ERR_HAS(TS_ERR_DTYPE, "dot: expected both operands");
            CHECK(ts_mm(A, A) == NULL);
            CHECK(ts_error() == TS_ERR_SHAPE);
            ts_error_clear();
            CHECK(ts_bmm(A, B) == NULL); /* bmm needs 3-d operands */
            CHECK(ts_error() != TS_OK);
            ts_error_clear();
            ts_scope_end();
        }
    CHECK_OK();
}

/* ------------------------------------------------------------------ transcendental functions */
typedef enum {
    F_EXP,
    F_LOG,
    F_LOG2,
    F_LOG10,
    F_SQRT,
    F_RSQRT,
    F_RECIP,
    F_SIN,
    F_COS,
    F_TAN,
    F_SINH,
    F_COSH,
    F_TANH,
    F_SIGMOID,
    F_SGN,
    F_SQUARE,
    F_POW25,
    F_POWM13,
    F_POW0, /* PyTorch's special cases of a number exponent: 1, a, a a, sqrt, rsqrt, 1 / a */
    F_POW1,
    F_POW2,
    F_POWH,
    F_POWMH,
    F_POWM1,
    F_RPOW,
    F_COUNT
} fn_kind;
static const char *const fn_names[F_COUNT] = {
    "exp",   "log",   "log2",  "log10",   "sqrt",     "rsqrt",  "reciprocal", "sin",     "cos",
    "tan",   "sinh",  "cosh",  "tanh",    "sigmoid",  "sgn",    "square",     "pow 2.5", "pow -1.3",
    "pow 0", "pow 1", "pow 2", "pow 0.5", "pow -0.5", "pow -1", "rpow 1.7"};

static double complex ref_fn(fn_kind f, double complex z) {
    switch (f) {
    case F_EXP:
        return cexp(z);
    case F_LOG:
        return clog(z);
    case F_LOG2:
        return clog(z) / log(2.0);
    case F_LOG10:
        return clog(z) / log(10.0);
    case F_SQRT:
        return csqrt(z);
    case F_RSQRT:
        return 1.0 / csqrt(z);
    case F_RECIP:
        return 1.0 / z;
    case F_SIN:
        return csin(z);
    case F_COS:
        return ccos(z);
    case F_TAN:
        return ctan(z);
    case F_SINH:
        return csinh(z);
    case F_COSH:
        return ccosh(z);
    case F_TANH:
        return ctanh(z);
    case F_SIGMOID:
        return 1.0 / (1.0 + cexp(-z));
    case F_SGN:
        return z == 0 ? 0 : z / cabs(z);
    case F_SQUARE:
        return z * z;
    case F_POW25:
        return cpow(z, 2.5);
    case F_POWM13:
        return cpow(z, -1.3);
    case F_POW0:
        return 1;
    case F_POW1:
        return z;
    case F_POW2:
        return z * z;
    case F_POWH:
        return csqrt(z);
    case F_POWMH:
        return 1.0 / csqrt(z);
    case F_POWM1:
        return 1.0 / z;
    default:
        return cpow(1.7, z);
    }
}
static ts_tensor *apply_fn(fn_kind f, ts_tensor *z) {
    switch (f) {
    case F_EXP:
        return ts_exp(z);
    case F_LOG:
        return ts_log(z);
    case F_LOG2:
        return ts_log2(z);
    case F_LOG10:
        return ts_log10(z);
    case F_SQRT:
        return ts_sqrt(z);
    case F_RSQRT:
        return ts_rsqrt(z);
    case F_RECIP:
        return ts_reciprocal(z);
    case F_SIN:
        return ts_sin(z);
    case F_COS:
        return ts_cos(z);
    case F_TAN:
        return ts_tan(z);
    case F_SINH:
        return ts_sinh(z);
    case F_COSH:
        return ts_cosh(z);
    case F_TANH:
        return ts_tanh(z);
    case F_SIGMOID:
        return ts_sigmoid(z);
    case F_SGN:
        return ts_sgn(z);
    case F_SQUARE:
        return ts_square(z);
    case F_POW25:
        return ts_pow_scalar(z, 2.5);
    case F_POWM13:
        return ts_pow_scalar(z, -1.3);
    case F_POW0:
        return ts_pow_scalar(z, 0);
    case F_POW1:
        return ts_pow_scalar(z, 1);
    case F_POW2:
        return ts_pow_scalar(z, 2);
    case F_POWH:
        return ts_pow_scalar(z, 0.5);
    case F_POWMH:
        return ts_pow_scalar(z, -0.5);
    case F_POWM1:
        return ts_pow_scalar(z, -1);
    default:
        return ts_rpow_scalar(z, 1.7);
    }
}

/* The rounding bound of a composition of ~a dozen rounded real ops: 24 u (1 + |f| + |z f'(z)|),
 * the last term for the amplification of rounded intermediate values (|z f'| by a central
 * difference in double). */
static double fn_tol(fn_kind f, double complex z, double u) {
    double h = 1e-6 * (1 + cabs(z));
    double complex d = (ref_fn(f, z + h) - ref_fn(f, z - h)) / (2 * h);
    return 24 * u * (1 + cabs(ref_fn(f, z)) + cabs(z) * cabs(d));
}

static void test_functions(void) {
    double complex v[N], vh[N], ref[N];
    double tol[N];
    fill(v, N, 3);
    const ts_dtype dts[2] = {TS_C64, TS_C128};
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < 2; k++) {
            const ts_dtype dt = dts[k];
            const double u = dt == TS_C64 ? U32 : U64;
            for (int i = 0; i < N; i++) vh[i] = held(v[i], dt);
            ts_scope_begin();
            ts_tensor *z = mkc(TS_SHAPE(3, 4), v, dt, devs[di]);
            for (int f = 0; f < F_COUNT; f++) {
                char what[96];
                snprintf(what, sizeof what, "%s %s on %s", fn_names[f], ts_dtype_name(dt),
                         ts_device_str(devs[di]));
                for (int i = 0; i < N; i++) ref[i] = ref_fn(f, vh[i]), tol[i] = fn_tol(f, vh[i], u);
                ts_tensor *y = apply_fn(f, z);
                CHECK(y && ts_dtype_of(y) == dt);
                check_tol(what, y, ref, tol, N);
            }
            /* pow with a complex exponent, and a complex tensor ** a real tensor */
            double complex ev[N];
            for (int i = 0; i < N; i++) ev[i] = held(0.5 * vh[(i / 4) * 4 + 3 - i % 4], dt);
            ts_tensor *w = mkc(TS_SHAPE(3, 4), ev, dt, devs[di]);
            for (int i = 0; i < N; i++) {
                double complex e = ev[i];
                ref[i] = cpow(vh[i], e);
                tol[i] = 24 * u * (1 + cabs(ref[i]) * (1 + cabs(e) * (1 + cabs(clog(vh[i])))));
            }
            check_tol("pow complex", ts_pow(z, w), ref, tol, N);
            ts_tensor *wr = ts_real(w);
            for (int i = 0; i < N; i++) {
                double e = creal(ev[i]);
                ref[i] = cpow(vh[i], e);
                tol[i] = 24 * u * (1 + cabs(ref[i]) * (1 + fabs(e) * (1 + cabs(clog(vh[i])))));
            }
            check_tol("pow real exponent", ts_pow(z, wr), ref, tol, N);
            ts_scope_end();
        }
    CHECK_OK();
}

/* the branch cuts and special values: every bit as C99 / PyTorch */
static void test_special(void) {
    const ts_dtype dts[2] = {TS_C64, TS_C128};
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < 2; k++) {
            const ts_dtype dt = dts[k];
            ts_scope_begin();
            const ts_device d = devs[di];
            double complex s[6] = {CMPLX(-4, -0.0), CMPLX(-4, 0.0), CMPLX(0, 0),
                                   CMPLX(0, -0.0),  CMPLX(4, 0),    CMPLX(-0.0, 0)};
            ts_tensor *z = mkc(TS_SHAPE(6), s, dt, d);
            const double complex sq[6] = {CMPLX(0, -2),   CMPLX(0, 2), CMPLX(0, 0),
                                          CMPLX(0, -0.0), CMPLX(2, 0), CMPLX(0, 0)};
            check_bits("sqrt cut", ts_sqrt(z), sq, 6);
            /* log: the cut's sides (+-i pi), log 0 = -inf */
            double complex lg[6];
            for (int i = 0; i < 6; i++) lg[i] = clog(s[i]);
            check_c("log cut", ts_log(z), lg, 6, 4 * (dt == TS_C64 ? U32 : U64));
            /* 1/0 = inf + NaN i (PyTorch's); 0^2.5 = 0, 0^0 = 1, 0^-1.5 = inf + NaN i */
            double complex zz[1] = {0};
            ts_tensor *z0 = mkc(TS_SHAPE(1), zz, dt, d);
            const double complex inf_nan[1] = {CMPLX(INFINITY, NAN)};
            check_bits("reciprocal 0", ts_reciprocal(z0), inf_nan, 1);
            check_bits("rsqrt 0", ts_rsqrt(z0), inf_nan, 1);
            check_bits("pow 0^-1.5", ts_pow_scalar(z0, -1.5), inf_nan, 1);
            const double complex zero[1] = {0}, one[1] = {1};
            check_bits("pow 0^2.5", ts_pow_scalar(z0, 2.5), zero, 1);
            check_bits("pow 0^0", ts_pow(z0, z0), one, 1);
            check_bits("sgn 0", ts_sgn(z0), zero, 1);
            /* exp(inf + 0i) = inf + 0i; tanh far from the axis: +-1 + tiny i, never NaN; sigmoid
             * of a large negative real part: e^z, no overflow */
            double complex big[4] = {CMPLX(INFINITY, 0), CMPLX(30, 1), CMPLX(-400, 0.5),
                                     CMPLX(-60, 1)};
            ts_tensor *zb = mkc(TS_SHAPE(4), big, dt, d);
            double complex r[4] = {CMPLX(INFINITY, 0)};
            check_bits("exp inf", ts_narrow(ts_exp(zb), 0, 0, 1), r, 1);
            for (int i = 0; i < 4; i++) r[i] = held(ctanh(big[i]), dt);
            check_c("tanh far", ts_narrow(ts_tanh(zb), 0, 1, 3), r + 1, 3, 2 * U32);
            for (int i = 0; i < 4; i++) r[i] = 1.0 / (1.0 + cexp(-big[i]));
            double tl[3];
            for (int i = 0; i < 3; i++) tl[i] = 8 * (dt == TS_C64 ? U32 : U64) * cabs(r[i + 1]);
            if (dt == TS_C64) tl[1] = 1e-300; /* e^-400 underflows float32: 0 */
            if (dt == TS_C64) r[2] = 0;
            check_tol("sigmoid far", ts_narrow(ts_sigmoid(zb), 0, 1, 3), r + 1, tl, 3);
            ts_scope_end();
        }
    CHECK_OK();
}

/* ------------------------------------------------------------------ comparisons, predicates */
static void test_compare(void) {
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        const ts_device d = devs[di];
        double complex a[6] = {CMPLX(1, 2), CMPLX(1, 2),        CMPLX(NAN, 0),
                               CMPLX(3, 0), CMPLX(INFINITY, 1), CMPLX(0, -INFINITY)};
        double complex b[6] = {CMPLX(1, 2), CMPLX(1, -2),       CMPLX(NAN, 0),
                               CMPLX(3, 0), CMPLX(INFINITY, 1), CMPLX(0, 1)};
        ts_tensor *x = mkc(TS_SHAPE(6), a, TS_C64, d), *y = mkc(TS_SHAPE(6), b, TS_C128, d);
        const bool eq[6] = {1, 0, 0, 1, 1, 0};
        bool ne[6];
        for (int i = 0; i < 6; i++) ne[i] = !eq[i];
        check_bools("eq", ts_eq(x, y), eq, 6);
        check_bools("ne", ts_ne(x, y), ne, 6);
        /* a real operand: its imaginary part is 0 */
        double rv[6] = {1, 1, 0, 3, INFINITY, 0};
        ts_tensor *r = ts_to(ts_tensor_f64(TS_SHAPE(6), rv, (ts_opts){0}), d);
        const bool eqr[6] = {0, 0, 0, 1, 0, 0};
        check_bools("eq real", ts_eq(r, x), eqr, 6);
        const bool eq3[6] = {0, 0, 0, 1, 0, 0};
        check_bools("eq scalar", ts_eq_scalar(x, 3), eq3, 6);
        bool ne3[6];
        for (int i = 0; i < 6; i++) ne3[i] = !eq3[i];
        check_bools("ne scalar", ts_ne_scalar(x, 3), ne3, 6);
        const bool nan[6] = {0, 0, 1, 0, 0, 0}, inf[6] = {0, 0, 0, 0, 1, 1},
                   fin[6] = {1, 1, 0, 1, 0, 0}, real[6] = {0, 0, 1, 1, 0, 0};
        check_bools("isnan", ts_isnan(x), nan, 6);
        check_bools("isinf", ts_isinf(x), inf, 6);
        check_bools("isfinite", ts_isfinite(x), fin, 6);
        check_bools("isreal", ts_isreal(x), real, 6);
        /* isclose: |a - b| <= atol + rtol |b| of the complex difference */
        double complex c[4] = {CMPLX(1, 1), CMPLX(1, 1), CMPLX(NAN, 1), CMPLX(100, 0)};
        double complex e[4] = {CMPLX(1, 1.0005), CMPLX(1.002, 1), CMPLX(NAN, 1), CMPLX(100, 0.5)};
        ts_tensor *cx = mkc(TS_SHAPE(4), c, TS_C128, d), *ex = mkc(TS_SHAPE(4), e, TS_C128, d);
        const bool cl[4] = {1, 0, 0, 0}, cln[4] = {1, 0, 1, 0}, clr[4] = {1, 1, 0, 1};
        check_bools("isclose", ts_isclose(cx, ex, 0, 1e-3, false), cl, 4);
        check_bools("isclose equal_nan", ts_isclose(cx, ex, 0, 1e-3, true), cln, 4);
        check_bools("isclose rtol", ts_isclose(cx, ex, 1e-2, 1e-3, false), clr, 4);
        CHECK(ts_allclose(cx, cx, 0, 0, true) == 1 && ts_allclose(cx, ex, 0, 1e-3, true) == 0);
        /* PyTorch's refusals */
        CHECK(ts_lt(x, x) == NULL);
        CHECK_ERR_HAS(TS_ERR_DTYPE, "lt: not implemented for 'ComplexFloat'");
        CHECK(ts_isposinf(x) == NULL);
        CHECK_ERR_HAS(TS_ERR_DTYPE, "isposinf: not implemented for 'ComplexFloat'");
        CHECK(ts_sign(x) == NULL);
        CHECK_ERR_HAS(TS_ERR_DTYPE, "sign: Unlike NumPy, torch.sign");
        CHECK(ts_asin(x) == NULL);
        CHECK_ERR_HAS(TS_ERR_DTYPE, "asin: not implemented for 'ComplexFloat'");
        CHECK(ts_isclose(x, y, 0, 0, false) == NULL);
        CHECK_ERR(TS_ERR_DTYPE);
        ts_scope_end();
    }
    CHECK_OK();
}

/* ------------------------------------------------------------------ in place */
static void test_inplace(void) {
    double complex a[N], b[N], ref[N];
    fill(a, N, 6);
    fill(b, N, 7);
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        const ts_device d = devs[di];
        const double tol = 8 * U64;
        typedef ts_tensor *(*ipf)(ts_tensor *, ts_tensor *);
        const ipf fns[5] = {ts_add_, ts_sub_, ts_mul_, ts_div_, ts_pow_};
        for (int f = 0; f < 5; f++) {
            ts_tensor *x = mkc(TS_SHAPE(3, 4), a, TS_C128, d),
                      *y = mkc(TS_SHAPE(3, 4), b, TS_C128, d);
            uint64_t v0 = ts_version(x);
            ts_tensor *r = fns[f](x, y);
            CHECK(r == x && ts_version(x) > v0 && ts_dtype_of(x) == TS_C128);
            for (int i = 0; i < N; i++)
                ref[i] = f == 0   ? a[i] + b[i]
                         : f == 1 ? a[i] - b[i]
                         : f == 2 ? a[i] * b[i]
                         : f == 3 ? a[i] / b[i]
                                  : cpow(a[i], b[i]);
            check_c("in place", x, ref, N, f == 4 ? 64 * U64 : tol);
        }
        /* scalar forms, a real and a broadcast operand, a view into its base, unary forms */
        ts_tensor *x = mkc(TS_SHAPE(3, 4), a, TS_C64, d);
        ts_add_scalar_(x, 1.5);
        ts_mul_scalar_(x, -2.0);
        ts_div_scalar_(x, 4.0);
        ts_sub_scalar_(x, 0.25);
        for (int i = 0; i < N; i++)
            ref[i] = held(a[i], TS_C64), ref[i] = (ref[i] + 1.5) * -2.0 / 4.0 - 0.25;
        check_c("scalar in place", x, ref, N, 4 * U32);
        ts_pow_scalar_(x, 2.0);
        for (int i = 0; i < N; i++) ref[i] *= ref[i];
        check_c("pow_scalar_", x, ref, N, 16 * U32);
        double rv[4] = {1, -2, 0.5, 3};
        ts_tensor *row = ts_to(ts_tensor_f64(TS_SHAPE(4), rv, (ts_opts){.dtype = TS_F32}), d);
        ts_tensor *xc = mkc(TS_SHAPE(3, 4), a, TS_C64, d);
        ts_mul_(xc, row);
        for (int i = 0; i < N; i++) ref[i] = held(a[i], TS_C64) * rv[i % 4];
        check_c("mul_ real broadcast", xc, ref, N, 2 * U32);
        ts_tensor *base = mkc(TS_SHAPE(3, 4), a, TS_C128, d);
        ts_add_(ts_select(base, 0, 1), ts_select(base, 0, 0)); /* row 1 += row 0 */
        for (int i = 0; i < N; i++) ref[i] = a[i] + (i / 4 == 1 ? a[i - 4] : 0);
        check_c("add_ through a view", base, ref, N, tol);
        ts_tensor *e = mkc(TS_SHAPE(3, 4), a, TS_C128, d);
        CHECK(ts_exp_(e) == e && ts_sqrt_(e) == e && ts_neg_(e) == e);
        for (int i = 0; i < N; i++) ref[i] = -csqrt(cexp(a[i]));
        check_c("exp_ sqrt_ neg_", e, ref, N, 16 * U64);
        /* refusals: a real tensor cannot hold a complex result; a leaf that requires grad; a
         * result of another shape; abs_ */
        ts_tensor *real = ts_to(ts_ones(TS_SHAPE(3, 4), (ts_opts){0}), d);
        CHECK(ts_add_(real, x) == NULL);
        CHECK_ERR_HAS(TS_ERR_DTYPE,
                      "add_: result type ComplexFloat can't be cast to the desired output type "
                      "Float");
        ts_tensor *leaf = mkc(TS_SHAPE(3, 4), a, TS_C64, d);
        ts_set_requires_grad(leaf, true);
        CHECK(ts_mul_(leaf, x) == NULL);
        CHECK_ERR_HAS(TS_ERR_STATE, "mul_: a leaf Variable that requires grad");
        CHECK(ts_mul_scalar_(leaf, 2) == NULL);
        CHECK_ERR(TS_ERR_STATE);
        ts_tensor *small = ts_select(x, 0, 0);
        CHECK(ts_add_(small, x) == NULL);
        CHECK_ERR_HAS(TS_ERR_SHAPE, "add_: output with shape [4] doesn't match");
        CHECK(ts_abs_(x) == NULL);
        CHECK_ERR_HAS(TS_ERR_DTYPE, "In-place abs is not supported for complex tensors");
        CHECK(ts_maximum(x, x) == NULL);
        CHECK_ERR(TS_ERR_DTYPE);
        ts_scope_end();
    }
    CHECK_OK();
}

/* ------------------------------------------------------------------ gradients */
/* y = op(z[, w]) as real pairs, z and w from real [.., 2] float64 inputs */
typedef struct grad_case {
    int kind; /* fn_kind, or F_COUNT + 0: pow(z, w), + 1: matmul, + 2: vdot, + 3: bmm,
               * + 4: in place z.mul_(w).add_(w).div_scalar_(2), + 5: mv */
} grad_case;

static ts_tensor *grad_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    const int k = ((const grad_case *)ctx)->kind;
    ts_tensor *z = ts_view_as_complex(in[0]), *w = ts_view_as_complex(in[1]), *y;
    switch (k - F_COUNT) {
    case 0:
        y = ts_pow(z, ts_mul_scalar(w, 0.3));
        break;
    case 1:
        y = ts_matmul(z, ts_transpose(w, 0, 1));
        break;
    case 2:
        y = ts_vdot(ts_flatten(z, 0, -1), ts_flatten(w, 0, -1));
        break;
    case 3:
        y = ts_bmm(ts_unsqueeze(z, 0), ts_unsqueeze(ts_transpose(w, 0, 1), 0));
        break;
    case 4:
        y = ts_mul_scalar(z, 1.0); /* a non-leaf to write */
        ts_mul_(y, w);
        ts_add_(y, w);
        ts_div_scalar_(y, 2.0);
        ts_exp_(y);
        break;
    case 5:
        y = ts_mv(z, ts_select(w, 0, 0));
        break;
    default:
        y = apply_fn(k, z);
        break;
    }
    return ts_view_as_real(y); /* gradcheck takes a random vector-Jacobian product */
}

static void test_grads(void) {
    double zv[2][3][2][2];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 12; j++)
            ((double *)zv[i])[j] = j % 2 ? 0.8 + 0.5 * sin(0.9 * j + 1.7 * i) /* imag >= 0.3 */
                                         : 1.2 * sin(0.9 * j + 1.7 * i + 0.3);
    for (int di = 0; di < ndev; di++) {
        for (int k = 0; k < F_COUNT + 6; k++) {
            ts_scope_begin();
            ts_tensor *in[2];
            for (int i = 0; i < 2; i++) {
                in[i] = ts_to(ts_tensor_f64(TS_SHAPE(3, 2, 2), &zv[i][0][0][0], (ts_opts){0}),
                              devs[di]);
                ts_set_requires_grad(in[i], i == 0 || k >= F_COUNT);
            }
            grad_case c = {k};
            bool ok = ts_gradcheck(grad_fn, &c, in, 2, (ts_gradcheck_opts){0});
            if (!ok)
                printf("gradcheck failed: case %d (%s) on %s\n", k,
                       k < F_COUNT ? fn_names[k] : "composite", ts_device_str(devs[di]));
            CHECK(ok);
            ts_scope_end();
        }
    }
    CHECK_OK();
}

/* a complex leaf against the analytic derivative: Re(sum(w f(z))) has the gradient
 * conj(w f'(z)), on the cut's sides too (PyTorch's one-sided derivative of sqrt and log) */
static void test_leaf_grads(void) {
    double complex z[8] = {CMPLX(1.5, 0.5),  CMPLX(-0.7, 1.2), CMPLX(-4, 0.0), CMPLX(-4, -0.0),
                           CMPLX(0.3, -2.0), CMPLX(-1, 0.0),   CMPLX(2, -0.4), CMPLX(-0.5, -0.5)};
    double complex w[8], ref[8];
    fill(w, 8, 9);
    const fn_kind fs[] = {F_EXP,  F_LOG,  F_SQRT, F_RSQRT,   F_RECIP, F_SIN,    F_COS,  F_TAN,
                          F_SINH, F_COSH, F_TANH, F_SIGMOID, F_LOG10, F_SQUARE, F_POW25};
    for (int di = 0; di < ndev; di++)
        for (size_t q = 0; q < sizeof fs / sizeof fs[0]; q++) {
            const fn_kind f = fs[q];
            ts_scope_begin();
            ts_tensor *zt = mkc(TS_SHAPE(8), z, TS_C128, devs[di]);
            ts_tensor *wt = mkc(TS_SHAPE(8), w, TS_C128, devs[di]);
            ts_set_requires_grad(zt, true);
            ts_backward(ts_real(ts_sum(ts_mul(wt, apply_fn(f, zt)))));
            for (int i = 0; i < 8; i++) {
                double complex s = csqrt(z[i]), d;
                switch (f) {
                case F_EXP:
                    d = cexp(z[i]);
                    break;
                case F_LOG:
                    d = 1 / z[i];
                    break;
                case F_SQRT:
                    d = 1 / (2 * s);
                    break;
                case F_RSQRT:
                    d = -0.5 / (s * z[i]);
                    break;
                case F_RECIP:
                    d = -1 / (z[i] * z[i]);
                    break;
                case F_SIN:
                    d = ccos(z[i]);
                    break;
                case F_COS:
                    d = -csin(z[i]);
                    break;
                case F_TAN:
                    d = 1 + ctan(z[i]) * ctan(z[i]);
                    break;
                case F_SINH:
                    d = ccosh(z[i]);
                    break;
                case F_COSH:
                    d = csinh(z[i]);
                    break;
                case F_TANH:
                    d = 1 - ctanh(z[i]) * ctanh(z[i]);
                    break;
                case F_SIGMOID: {
                    double complex sg = 1 / (1 + cexp(-z[i]));
                    d = sg * (1 - sg);
                    break;
                }
                case F_LOG10:
                    d = 1 / (z[i] * log(10.0));
                    break;
                case F_SQUARE:
                    d = 2 * z[i];
                    break;
                default:
                    d = 2.5 * cpow(z[i], 1.5);
                    break;
                }
                ref[i] = conj(w[i] * d);
            }
            char what[64];
            snprintf(what, sizeof what, "leaf grad %s on %s", fn_names[f], ts_device_str(devs[di]));
            check_c(what, ts_grad(zt), ref, 8, 64 * U64);
            ts_scope_end();
        }
    /* sgn: (w - Re(w conj(sgn)) sgn) / |z| conjugated (PyTorch's sgn_backward), 0 at 0 */
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        double complex zs[3] = {CMPLX(3, 4), CMPLX(0, 0), CMPLX(-1, 1)};
        ts_tensor *zt = mkc(TS_SHAPE(3), zs, TS_C128, devs[di]);
        ts_tensor *wt = mkc(TS_SHAPE(3), w, TS_C128, devs[di]);
        ts_set_requires_grad(zt, true);
        ts_backward(ts_real(ts_sum(ts_mul(wt, ts_sgn(zt)))));
        for (int i = 0; i < 3; i++) {
            double a = cabs(zs[i]);
            double complex s = a ? zs[i] / a : 0, g = conj(w[i]);
            ref[i] = a ? (g - creal(g * conj(s)) * s) / a : 0;
        }
        check_c("leaf grad sgn", ts_grad(zt), ref, 3, 16 * U64);
        ts_scope_end();
    }
    CHECK_OK();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    ts_mem_stats before[TS_TEST_MAX_DEVICES], after;
    for (int i = 0; i < ndev; i++) ts_memory_stats(devs[i], &before[i]);
    test_matmul();
    test_functions();
    test_special();
    test_compare();
    test_inplace();
    test_grads();
    test_leaf_grads();
    CHECK_OK();
    CHECK_EQ(ts_scope_depth(), 0); /* every op's own scope closed, nothing left alive */
    for (int i = 0; i < ndev; i++) {
        ts_memory_stats(devs[i], &after);
        CHECK_EQ(after.live_tensors, before[i].live_tensors);
    }
    return ts_test_finish();
}
