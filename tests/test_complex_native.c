/* test_complex_native.c — the native complex binary kernels (kern_complex.c through the binary
 * slot, src/ops/complex_native.c's front end; CUDA's cuda_complex.cu shares the formulas):
 * complex64 / complex128 add, sub, mul and div on every device against references computed by
 * definition in long double from the stored inputs, with dense operands long enough for every
 * vector width and its tail, broadcast operands (stride 0, a 0-dim cpu one, a real one promoted as
 * PyTorch promotes it), strided views, and PyTorch 2's results on edge values (inf, nan, signed
 * zeros, a zero divisor, parts whose squares overflow or underflow). Run once more under each
 * lower ISA cap (tests/CMakeLists.txt). */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tessera.h"
#include "tessera/autograd.h"
#include "tessera/complex.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define MAXN 256

typedef ts_tensor *(*bin_fn)(ts_tensor *, ts_tensor *);
static const bin_fn fns[4] = {ts_add, ts_sub, ts_mul, ts_div};
static const char *const names[4] = {"add", "sub", "mul", "div"};

/* a complex tensor of shape s from n values, of dtype dt, on d */
static ts_tensor *mkc(ts_shape s, const double complex *v, ts_dtype dt, ts_device d) {
    ts_shape rs = s;
    rs.dims[rs.ndim++] = 2;
    ts_tensor *r = ts_tensor_f64(rs, (const double *)v, (ts_opts){.dtype = TS_F64});
    return ts_to(ts_to_dtype(ts_view_as_complex(r), dt), d);
}

/* a tensor's values in row-major order, as complex128 (n of them) */
static bool rdc(ts_tensor *t, double complex *out, int64_t n) {
    ts_tensor *h = t ? ts_to_dtype(ts_to(t, ts_cpu()), TS_C128) : NULL;
    h = h ? ts_contiguous(ts_view_as_real(ts_contiguous(h))) : NULL;
    return h && ts_numel(h) == 2 * n &&
           ts_copy_to_host(h, out, (size_t)n * sizeof(double complex)) == TS_OK;
}

static double complex round_to(double complex z, ts_dtype dt) {
    return dt == TS_C64 ? (double)(float)creal(z) + I * (double)(float)cimag(z) : z;
}

/* x op y by definition, in long double; *bound: the rounding error the dtype's formula allows
 * (a few units of its epsilon times the size of the terms) */
static double complex ref_op(int op, double complex x, double complex y, double eps,
                             double *bound) {
    const long double a = creal(x), b = cimag(x), c = creal(y), d = cimag(y);
    long double r, i;
    switch (op) {
    case 0:
        r = a + c, i = b + d, *bound = 2 * eps * (cabs(x) + cabs(y));
        break;
    case 1:
        r = a - c, i = b - d, *bound = 2 * eps * (cabs(x) + cabs(y));
        break;
    case 2:
        r = a * c - b * d, i = a * d + b * c, *bound = 4 * eps * cabs(x) * cabs(y);
        break;
    default: {
        const long double den = c * c + d * d;
        r = (a * c + b * d) / den, i = (b * c - a * d) / den;
        *bound = 8 * eps * cabs(x) / cabs(y);
    }
    }
    return (double)r + I * (double)i;
}

static double complex val(int i, int seed) {
    return 2.5 * sin(0.71 * (i + 1) + 1.3 * seed) + I * 1.7 * cos(0.37 * (i + 2) + seed) +
           (i % 7 == 3 ? 40.0 : 0.0);
}

/* got = xs op ys elementwise (xs, ys: the inputs broadcast to n elements, as stored) */
static void check_vals(const char *what, int op, ts_tensor *t, const double complex *xs,
                       const double complex *ys, int64_t n, ts_dtype dt) {
    static double complex got[MAXN];
    const double eps = dt == TS_C64 ? 0x1p-24 : 0x1p-53;
    bool ok = n <= MAXN && t && ts_dtype_of(t) == dt && rdc(t, got, n);
    int64_t at = -1;
    double complex want = 0;
    for (int64_t i = 0; ok && i < n; i++) {
        double bound;
        want = ref_op(op, xs[i], ys[i], eps, &bound);
        if (!(cabs(got[i] - want) <= bound)) ok = false, at = i;
    }
    ts_test_record(ok);
    if (!ok)
        ts_test_failf(__FILE__, __LINE__, "%s %s %s: element %lld %.9g%+.9gi vs %.9g%+.9gi%s", what,
                      names[op], dt == TS_C64 ? "complex64" : "complex128", (long long)at,
                      at >= 0 ? creal(got[at]) : 0, at >= 0 ? cimag(got[at]) : 0, creal(want),
                      cimag(want), ts_test_error_str());
}

/* dense operands of n elements (every vector width's body and tail) */
static void test_dense(ts_device d, ts_dtype dt) {
    static double complex x[MAXN], y[MAXN];
    for (int64_t n = 1; n <= 67; n += n < 20 ? 1 : 23) {
        for (int i = 0; i < n; i++) x[i] = round_to(val(i, 1), dt), y[i] = round_to(val(i, 2), dt);
        for (int op = 0; op < 4; op++) {
            ts_scope_begin();
            ts_tensor *a = mkc(TS_SHAPE(n), x, dt, d), *b = mkc(TS_SHAPE(n), y, dt, d);
            check_vals("dense", op, fns[op](a, b), x, y, n, dt);
            ts_scope_end();
        }
    }
}

/* a [3, 1, 5] with b [4, 1] -> [3, 4, 5]; with a 0-dim b on the device and on the cpu; a scalar;
 * a real float operand (promoted: its imaginary part 0) */
static void test_broadcast(ts_device d, ts_dtype dt) {
    static double complex x[15], y[4], xs[60], ys[60];
    for (int i = 0; i < 15; i++) x[i] = round_to(val(i, 3), dt);
    for (int i = 0; i < 4; i++) y[i] = round_to(val(i, 4), dt);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 5; k++)
                xs[i * 20 + j * 5 + k] = x[i * 5 + k], ys[i * 20 + j * 5 + k] = y[j];
    for (int op = 0; op < 4; op++) {
        ts_scope_begin();
        ts_tensor *a = mkc(TS_SHAPE(3, 1, 5), x, dt, d), *b = mkc(TS_SHAPE(4, 1), y, dt, d);
        check_vals("broadcast", op, fns[op](a, b), xs, ys, 60, dt);
        /* b first: the broadcast operand on the left */
        check_vals("broadcast (b op a)", op, fns[op](b, a), ys, xs, 60, dt);
        ts_tensor *s0 = ts_reshape(mkc(TS_SHAPE(1), y + 1, dt, d), TS_SHAPE());
        ts_tensor *sc = ts_reshape(mkc(TS_SHAPE(1), y + 2, dt, ts_cpu()), TS_SHAPE());
        double complex yb[15], yc[15];
        for (int i = 0; i < 15; i++) yb[i] = y[1], yc[i] = y[2];
        check_vals("0-dim", op, fns[op](a, s0), x, yb, 15, dt);
        check_vals("0-dim cpu", op, fns[op](a, sc), x, yc, 15, dt);
        /* a real float tensor: cast to the complex dtype (PyTorch's promotion) */
        double re[5];
        double complex rc[15];
        for (int i = 0; i < 5; i++) re[i] = 0.5 + 1.25 * i;
        for (int i = 0; i < 15; i++) rc[i] = round_to(re[i % 5], dt);
        ts_tensor *r = ts_to(
            ts_tensor_f64(TS_SHAPE(5), re, (ts_opts){.dtype = dt == TS_C64 ? TS_F32 : TS_F64}), d);
        check_vals("real operand", op, fns[op](a, r), x, rc, 15, dt);
        check_vals("real operand left", op, fns[op](r, a), rc, x, 15, dt);
        ts_scope_end();
    }
}

/* a transposed operand and a sliced one (step 2): strided in the kernels */
static void test_strided(ts_device d, ts_dtype dt) {
    static double complex x[42], y[84], xs[42], ys[42];
    for (int i = 0; i < 42; i++) x[i] = round_to(val(i, 5), dt);
    for (int i = 0; i < 84; i++) y[i] = round_to(val(i, 6), dt);
    /* at = x viewed [6, 7] transposed to [7, 6]; bs = y [7, 12] sliced every other column */
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 6; j++) xs[i * 6 + j] = x[j * 7 + i], ys[i * 6 + j] = y[i * 12 + 2 * j];
    for (int op = 0; op < 4; op++) {
        ts_scope_begin();
        ts_tensor *at = ts_transpose(mkc(TS_SHAPE(6, 7), x, dt, d), 0, 1);
        ts_tensor *bs = ts_slice(mkc(TS_SHAPE(7, 12), y, dt, d), 1, 0, 12, 2);
        check_vals("strided", op, fns[op](at, bs), xs, ys, 42, dt);
        ts_scope_end();
    }
}

/* PyTorch 2.15's results (torch.complex64 and complex128 alike) on edge values: each part nan,
 * the same infinity, the same signed zero or within a relative 1e-6 */
typedef struct edge {
    int op;
    double complex a, b, want;
} edge;

static bool part_ok(double got, double want) {
    if (isnan(want)) return isnan(got);
    if (isinf(want) || want == 0) return got == want && signbit(got) == signbit(want);
    return fabs(got - want) <= 1e-6 * fabs(want);
}

static void test_edges(ts_device d, ts_dtype dt) {
    const double inf = INFINITY, nan = NAN;
#define C(r, i) CMPLX(r, i)
    const edge e[] = {
        {3, C(1, 1), C(0, 0), C(inf, inf)},    /* a zero divisor: a / |c|, b / |d| */
        {3, C(0, 0), C(-0.0, 0), C(nan, nan)}, /* 0 / 0 */
        {3, C(inf, 0), C(2, 0), C(inf, nan)},  /* inf 0 in Smith's b - a rat */
        {3, C(1e30, 1e30), C(1e30, 1e30), C(1, 0)},
        {3, C(3, 4), C(1e-30, 2e-30), C(2.2e30, -4e29)}, /* c^2 + d^2 underflows in float */
        {3, C(nan, 0), C(1, 1), C(nan, nan)},
        {3, C(inf, 1), C(0, inf), C(nan, nan)},
        {3, C(1, -2), C(inf, 0), C(0, -0.0)},
        {2, C(1e30, 1e30), C(1e30, 1e30), C(0, 2e60)}, /* float: nan + inf i (below) */
        {2, C(inf, 0), C(2, 0), C(inf, nan)},
        {2, C(inf, 1), C(0, inf), C(nan, inf)},
        {2, C(1, -2), C(inf, 0), C(inf, -inf)},
        {2, C(0, 0), C(-0.0, 0), C(-0.0, 0)},
        {0, C(inf, 1), C(-inf, 2), C(nan, 3)},
        {1, C(-0.0, 0), C(0, 0), C(-0.0, 0)},
    };
#undef C
    const int ne = (int)(sizeof e / sizeof e[0]);
    for (int k = 0; k < ne; k++) {
        double complex want = e[k].want;
        if (dt == TS_C64 && k == 8) want = CMPLX(nan, inf); /* 1e60 overflows float */
        ts_scope_begin();
        ts_tensor *a = mkc(TS_SHAPE(1), &e[k].a, dt, d), *b = mkc(TS_SHAPE(1), &e[k].b, dt, d);
        /* long enough for the vector bodies: the same pair in every element */
        ts_tensor *a20 = ts_contiguous(ts_expand(a, TS_SHAPE(20))),
                  *b20 = ts_contiguous(ts_expand(b, TS_SHAPE(20)));
        double complex got[20];
        bool ok = rdc(fns[e[k].op](a20, b20), got, 20);
        for (int i = 0; ok && i < 20; i++)
            ok = part_ok(creal(got[i]), creal(want)) && part_ok(cimag(got[i]), cimag(want));
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "edge %d (%s, %s): %g%+gi, PyTorch %g%+gi%s", k,
                          names[e[k].op], dt == TS_C64 ? "complex64" : "complex128", creal(got[0]),
                          cimag(got[0]), creal(want), cimag(want), ts_test_error_str());
        ts_scope_end();
    }
    /* a number: PyTorch promotes it to (s, 0), so inf * 2 has a nan imaginary part */
    ts_scope_begin();
    const double complex z = CMPLX(INFINITY, 0);
    double complex got[1];
    CHECK(rdc(ts_mul_scalar(mkc(TS_SHAPE(1), &z, dt, d), 2.0), got, 1) && isinf(creal(got[0])) &&
          isnan(cimag(got[0])));
    ts_scope_end();
}

/* with a graph the composition over the parts runs (its backward the real ops'): the gradient of
 * sum(real(a * b)) with respect to a is conj(b), PyTorch's convention */
static void test_grad_path(ts_device d) {
    double complex x[6], y[6], want[6];
    for (int i = 0; i < 6; i++) x[i] = val(i, 7), y[i] = val(i, 8), want[i] = conj(y[i]);
    ts_scope_begin();
    ts_tensor *a = mkc(TS_SHAPE(6), x, TS_C128, d), *b = mkc(TS_SHAPE(6), y, TS_C128, d);
    ts_set_requires_grad(a, true);
    ts_backward(ts_sum(ts_real(ts_mul(a, b))));
    double complex g[6];
    bool ok = rdc(ts_grad(a), g, 6);
    for (int i = 0; ok && i < 6; i++) ok = cabs(g[i] - want[i]) <= 1e-12 * (1 + cabs(want[i]));
    CHECK(ok);
    ts_scope_end();
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int k = 0; k < ndev; k++) {
        for (int t = 0; t < 2; t++) {
            const ts_dtype dt = t ? TS_C128 : TS_C64;
            test_dense(devs[k], dt);
            test_broadcast(devs[k], dt);
            test_strided(devs[k], dt);
            test_edges(devs[k], dt);
        }
        test_grad_path(devs[k]);
    }
    CHECK_OK();
    return ts_test_finish();
}
