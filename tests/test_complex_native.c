/* test_complex_native.c — the native complex binary kernels (kern_complex.c through the binary
 * slot, src/ops/complex_native.c's front end; CUDA's cuda_complex.cu shares the formulas):
 * complex64 / complex128 add, sub, mul and div on every device against references computed by
 * definition in long double from the stored inputs, with dense operands long enough for every
 * vector width and its tail, broadcast operands (stride 0, a 0-dim cpu one, a real one promoted as
 * PyTorch promotes it), strided views, and PyTorch 2's results on edge values (inf, nan, signed
 * zeros, a zero divisor, parts whose squares overflow or underflow). With a graph
 * (complex_native_grad.c): the same values bit for bit and PyTorch's node names, gradients against
 * PyTorch's formulas in long double, ts_gradcheck, double backward against differences of the
 * gradient; the in-place forms through the kernels. Run once more under each lower ISA cap
 * (tests/CMakeLists.txt). */
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
 * the same infinity, the same signed zero or within a relative 1e-6. Except add and sub, whose
 * parts add independently (C99, NumPy): PyTorch multiplies the second operand by alpha = 1 + 0i
 * first (pytorch/pytorch#82510), so it gives nan + nan i for edge 13 and inf + nan i for
 * 0 + (inf + 0i) */
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

/* ------------------------------------------------------------------ with a graph
 * The kernels run with a graph too (complex_native_grad.c records PyTorch's node), so a result is
 * the same bits with and without one, edge values included. */
static const char *const node_names[4] = {"AddBackward0", "SubBackward0", "MulBackward0",
                                          "DivBackward0"};

/* equal parts, or both parts nan */
static bool same_vals(const double complex *x, const double complex *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const double p[2] = {creal(x[i]), cimag(x[i])}, q[2] = {creal(y[i]), cimag(y[i])};
        for (int k = 0; k < 2; k++)
            if (!(isnan(p[k]) && isnan(q[k])) && memcmp(&p[k], &q[k], sizeof p[k]) != 0)
                return false;
    }
    return true;
}

/* a leaf copy of x (which requires no grad) that requires grad */
static ts_tensor *leaf_of(ts_tensor *x) {
    ts_tensor *l = ts_clone(x);
    return l && ts_set_requires_grad(l, true) == TS_OK ? l : NULL;
}

static void test_graph_values(ts_device d, ts_dtype dt) {
    const double inf = INFINITY, nan = NAN;
    enum { NV = 24 };
    double complex x[NV], y[NV];
    const double complex ex[8] = {CMPLX(inf, 0), CMPLX(1, 1),       CMPLX(0, 0),    CMPLX(nan, 0),
                                  CMPLX(inf, 1), CMPLX(1e30, 1e30), CMPLX(-0.0, 0), CMPLX(1, -2)};
    const double complex ey[8] = {CMPLX(2, 0),   CMPLX(0, 0),       CMPLX(-0.0, 0), CMPLX(1, 1),
                                  CMPLX(0, inf), CMPLX(1e30, 1e30), CMPLX(0, 0),    CMPLX(inf, 0)};
    for (int i = 0; i < NV; i++)
        x[i] = round_to(i < 8 ? ex[i] : val(i, 11), dt),
        y[i] = round_to(i < 8 ? ey[i] : val(i, 12), dt);
    double re[5] = {0.5, -1.25, 2, 0, 3.5};
    for (int op = 0; op < 4; op++) {
        ts_scope_begin();
        ts_tensor *a = mkc(TS_SHAPE(NV), x, dt, d), *b = mkc(TS_SHAPE(NV), y, dt, d);
        ts_tensor *ag = leaf_of(a), *bg = leaf_of(b);
        double complex plain[NV], graph[NV];
        ts_tensor *yg = fns[op](ag, bg);
        bool ok =
            rdc(fns[op](a, b), plain, NV) && rdc(yg, graph, NV) && same_vals(plain, graph, NV);
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "%s %s on %s: values differ with a graph%s",
                          names[op], dt == TS_C64 ? "complex64" : "complex128", ts_device_str(d),
                          ts_test_error_str());
        CHECK(ts_grad_fn_name(yg) && strcmp(ts_grad_fn_name(yg), node_names[op]) == 0);
        /* a real operand, a broadcast one and a 0-dim cpu one, each requiring grad */
        ts_tensor *r = ts_to(
            ts_tensor_f64(TS_SHAPE(5), re, (ts_opts){.dtype = dt == TS_C64 ? TS_F32 : TS_F64}), d);
        ts_tensor *a5 = ts_reshape(ts_narrow(a, 0, 0, 20), TS_SHAPE(4, 5));
        ts_tensor *s0 = ts_reshape(mkc(TS_SHAPE(1), y + 9, dt, ts_cpu()), TS_SHAPE());
        ts_tensor *pairs[3][2] = {{a5, r}, {r, a5}, {a5, s0}};
        for (int k = 0; k < 3; k++) {
            double complex p1[20], p2[20];
            ts_tensor *l = leaf_of(pairs[k][0]), *m = leaf_of(pairs[k][1]);
            ts_tensor *y2 = fns[op](l, m);
            ok = rdc(fns[op](pairs[k][0], pairs[k][1]), p1, 20) && rdc(y2, p2, 20) &&
                 same_vals(p1, p2, 20) && ts_grad_fn_name(y2) &&
                 strcmp(ts_grad_fn_name(y2), node_names[op]) == 0;
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "%s case %d on %s: values differ with a graph%s",
                              names[op], k, ts_device_str(d), ts_test_error_str());
        }
        ts_scope_end();
    }
    /* a number: inf * 2 is inf + nan i with a graph too; 2 - z is PyTorch's RsubBackward1 */
    ts_scope_begin();
    const double complex z = CMPLX(INFINITY, 0);
    ts_tensor *zg = leaf_of(mkc(TS_SHAPE(1), &z, dt, d));
    double complex got[1];
    ts_tensor *m2 = ts_mul_scalar(zg, 2.0), *r2 = ts_rsub_scalar(zg, 2.0);
    CHECK(rdc(m2, got, 1) && isinf(creal(got[0])) && isnan(cimag(got[0])));
    CHECK(ts_grad_fn_name(m2) && strcmp(ts_grad_fn_name(m2), "MulBackward0") == 0);
    CHECK(ts_grad_fn_name(r2) && strcmp(ts_grad_fn_name(r2), "RsubBackward1") == 0);
    ts_scope_end();
}

/* a real tensor's values as doubles (n of them) */
static bool rdr(ts_tensor *t, double *out, int64_t n) {
    ts_tensor *h = t ? ts_contiguous(ts_to_dtype(ts_to(t, ts_cpu()), TS_F64)) : NULL;
    return h && ts_numel(h) == n && ts_copy_to_host(h, out, (size_t)n * sizeof(double)) == TS_OK;
}

/* PyTorch's gradient of operand k (0: a, 1: b) of a op b for the seed w, in long double: add w, w;
 * sub w, -w; mul w conj(b), w conj(a); div w / conj(b), -w conj(a / b^2). *t: the size of its
 * terms (|w| times the operands' sizes), the scale of the rounding bound */
static double complex grad_ref(int op, int k, double complex w, double complex a, double complex b,
                               double *t) {
    const long double complex W = w, A = a, B = b;
    const double sb = fmin(1.0, cabs(b)), big = fmax(1.0, fmax(cabs(a), cabs(b)));
    *t = cabs(w) * big * big / (sb * sb);
    switch (op) {
    case 0:
        return w;
    case 1:
        return k ? -w : w;
    case 2:
        return (double complex)(k ? W * conjl(A) : W * conjl(B));
    default:
        return (double complex)(k ? -W * conjl(A / (B * B)) : W / conjl(B));
    }
}

/* gradients of a [4, 5] op b [5] (complex, broadcast), a op r and r5 op a (r real [4, 5], r5 real
 * [5]) against grad_ref from the seed w: each element is at most three rounded complex operations
 * on terms of size t (a few eps t each), plus the sum over the broadcast rows (4 eps sum t) */
static void test_grad_values(ts_device d, ts_dtype dt) {
    const double eps = dt == TS_C64 ? 0x1p-24 : 0x1p-53;
    const ts_dtype rdt = dt == TS_C64 ? TS_F32 : TS_F64;
    double complex x[20], y[5], w[20];
    double rv[20];
    for (int i = 0; i < 20; i++)
        x[i] = round_to(val(i, 13), dt), w[i] = round_to(val(i, 15), dt),
        rv[i] = (double)(float)(1.5 * cos(0.9 * i) + (i % 3 == 0 ? 2.5 : 0.75));
    for (int i = 0; i < 5; i++) y[i] = round_to(val(i, 14), dt);
    for (int op = 0; op < 4; op++)
        for (int cs = 0; cs < 3; cs++) {
            ts_scope_begin();
            ts_tensor *a = leaf_of(mkc(TS_SHAPE(4, 5), x, dt, d));
            ts_tensor *o =
                cs == 0 ? leaf_of(mkc(TS_SHAPE(5), y, dt, d))
                : cs == 1
                    ? leaf_of(ts_to(ts_tensor_f64(TS_SHAPE(4, 5), rv, (ts_opts){.dtype = rdt}), d))
                    : leaf_of(ts_to(ts_tensor_f64(TS_SHAPE(5), rv, (ts_opts){.dtype = rdt}), d));
            const bool swap = cs == 2; /* r5 op a: the real operand on the left */
            ts_tensor *yv = swap ? fns[op](o, a) : fns[op](a, o);
            CHECK(ts_backward_with(yv, mkc(TS_SHAPE(4, 5), w, dt, d)) == TS_OK);
            /* the operands as PyTorch sees them: the real one with a zero imaginary part */
            double complex ga[20], go_ref[20] = {0}, got_o[20];
            double bo[20] = {0}, ro[20];
            bool ok = rdc(ts_grad(a), ga, 20);
            const int64_t no = cs == 1 ? 20 : 5;
            if (cs == 0)
                ok = ok && rdc(ts_grad(o), got_o, 5);
            else {
                ok = ok && rdr(ts_grad(o), ro, no) && ts_dtype_of(ts_grad(o)) == rdt;
                for (int64_t i = 0; i < no; i++) got_o[i] = ro[i];
            }
            for (int i = 0; ok && i < 20; i++) {
                const double complex oi = cs == 0 ? y[i % 5] : rv[cs == 1 ? i : i % 5];
                const double complex lhs = swap ? oi : x[i], rhs = swap ? x[i] : oi;
                double ta, to;
                const double complex ra = grad_ref(op, swap, w[i], lhs, rhs, &ta);
                double complex ro_i = grad_ref(op, !swap, w[i], lhs, rhs, &to);
                if (cs != 0) ro_i = creal(ro_i); /* a real operand's gradient: the real part */
                if (!(cabs(ga[i] - ra) <= 16 * eps * ta)) {
                    ok = false;
                    ts_test_failf(__FILE__, __LINE__, "%s case %d grad a[%d]: %g%+gi, want %g%+gi",
                                  names[op], cs, i, creal(ga[i]), cimag(ga[i]), creal(ra),
                                  cimag(ra));
                }
                go_ref[cs == 1 ? i : i % 5] += ro_i;
                bo[cs == 1 ? i : i % 5] += 16 * eps * to + 4 * eps * cabs(ro_i);
            }
            for (int64_t i = 0; ok && i < no; i++)
                if (!(cabs(got_o[i] - go_ref[i]) <= bo[i])) {
                    ok = false;
                    ts_test_failf(__FILE__, __LINE__,
                                  "%s case %d grad of the other operand [%lld]: %g%+gi, want "
                                  "%g%+gi",
                                  names[op], cs, (long long)i, creal(got_o[i]), cimag(got_o[i]),
                                  creal(go_ref[i]), cimag(go_ref[i]));
                }
            ts_test_record(ok);
            ts_scope_end();
        }
    CHECK_OK();
}

/* ts_gradcheck (float64 central differences) through real wrappers: every op, a broadcast
 * operand, a real operand on either side, a number */
static ts_tensor *gc_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    ts_tensor *z = ts_view_as_complex(in[0]), *w = ts_view_as_complex(in[1]), *r = in[2];
    ts_tensor *num = ts_add(ts_mul(z, w), r);                     /* [3, 4] */
    ts_tensor *den = ts_sub(ts_add_scalar(w, 4.0), ts_mul(r, z)); /* |r z| < 4 - |w| */
    ts_tensor *y = ts_sub(ts_div(num, den), ts_div(r, ts_add_scalar(w, 3.0)));
    return ts_view_as_real(ts_mul_scalar(y, 0.5));
}

static void test_gradcheck(ts_device d) {
    double zv[24], wv[8], rv[12];
    for (int i = 0; i < 24; i++) zv[i] = 0.9 * sin(0.7 * i + 0.3);
    for (int i = 0; i < 8; i++) wv[i] = 0.6 * cos(1.1 * i);
    for (int i = 0; i < 12; i++) rv[i] = 0.4 * sin(1.3 * i + 1);
    ts_scope_begin();
    ts_tensor *in[3] = {ts_tensor_f64(TS_SHAPE(3, 4, 2), zv, (ts_opts){.device = d}),
                        ts_tensor_f64(TS_SHAPE(4, 2), wv, (ts_opts){.device = d}),
                        ts_tensor_f64(TS_SHAPE(3, 4), rv, (ts_opts){.device = d})};
    for (int i = 0; i < 3; i++) ts_set_requires_grad(in[i], true);
    CHECK(ts_gradcheck(gc_fn, NULL, in, 3, (ts_gradcheck_opts){0}));
    ts_scope_end();
}

/* double backward: H v by create_graph against the central difference of v . grad f (as
 * test_double_backward.c), f real of x in R^12 through complex ops out of place and in place */
enum { NX = 12 };
static ts_tensor *f_complex(ts_tensor *x, bool inplace) {
    ts_tensor *z = ts_view_as_complex(ts_reshape(ts_narrow(x, 0, 0, 6), TS_SHAPE(3, 2)));
    ts_tensor *w = ts_view_as_complex(ts_reshape(ts_narrow(x, 0, 6, 6), TS_SHAPE(3, 2)));
    ts_tensor *r = ts_narrow(x, 0, 3, 3), *y;
    ts_tensor *den = ts_add_scalar(w, 3.0);
    if (inplace) {
        y = ts_mul_scalar(z, 1.0);
        ts_mul_(y, w);
        ts_div_(y, den);
        ts_add_(y, r);
        ts_sub_(y, ts_mul(z, z));
    } else {
        y = ts_sub(ts_add(ts_div(ts_mul(z, w), den), r), ts_mul(z, z));
    }
    ts_tensor *p = ts_view_as_real(ts_mul(y, ts_conj(y))); /* |y|^2 and 0 */
    return ts_add(ts_sum(p), ts_sum(ts_view_as_real(ts_div(r, den))));
}

static const double x0[NX] = {0.3, -0.7, 1.1, 0.4, -0.2, 0.9, 0.5, 0.25, -0.6, 0.8, 0.1, -0.35};
static const double v0[NX] = {1, -0.5, 0.25, 2, -1, 0.75, 0.5, -1.5, 1.25, -0.25, 0.6, 1};

static double directional_grad(const double *xv, ts_device d, bool inplace) {
    ts_scope_begin();
    ts_tensor *t = ts_tensor_f64(TS_SHAPE(NX), xv, (ts_opts){.device = d, .requires_grad = true});
    ts_tensor *g = NULL;
    ts_autograd_grad((ts_tensor *[]){f_complex(t, inplace)}, NULL, 1, &t, 1, (ts_grad_opts){0}, &g);
    double h[NX] = {0}, s = 0;
    CHECK(rdr(g, h, NX));
    ts_scope_end();
    for (int i = 0; i < NX; i++) s += h[i] * v0[i];
    return s;
}

static void test_double_backward(ts_device d, bool inplace) {
    ts_scope_begin();
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(NX), x0, (ts_opts){.device = d, .requires_grad = true});
    ts_tensor *g = NULL, *hv = NULL;
    ts_tensor *y = f_complex(x, inplace);
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, &x, 1, (ts_grad_opts){.create_graph = true}, &g), TS_OK);
    CHECK(g && ts_requires_grad(g));
    ts_tensor *gv = ts_sum(ts_mul(g, ts_tensor_f64(TS_SHAPE(NX), v0, (ts_opts){.device = d})));
    CHECK_EQ(ts_autograd_grad(&gv, NULL, 1, &x, 1, (ts_grad_opts){0}, &hv), TS_OK);
    double got[NX] = {0};
    CHECK(rdr(hv, got, NX));
    ts_scope_end();
    for (int i = 0; i < NX; i++) {
        double xp[NX], xm[NX], e = 1e-5;
        memcpy(xp, x0, sizeof xp);
        memcpy(xm, x0, sizeof xm);
        xp[i] += e;
        xm[i] -= e;
        const double want =
            (directional_grad(xp, d, inplace) - directional_grad(xm, d, inplace)) / (2 * e);
        if (fabs(got[i] - want) > 1e-6 * (1 + fabs(want)))
            fprintf(stderr, "%s on %s: (Hv)[%d] = %.12g, differences give %.12g\n",
                    inplace ? "in place" : "out of place", ts_device_str(d), i, got[i], want);
        CHECK_NEAR(got[i], want, 1e-6 * (1 + fabs(want)));
    }
}

/* in place: the kernel writes the tensor, the same bits as out of place, one version bump,
 * PyTorch's node; and the refusals */
typedef ts_tensor *(*bin_inplace_fn)(ts_tensor *, ts_tensor *);
static const bin_inplace_fn ifns[4] = {ts_add_, ts_sub_, ts_mul_, ts_div_};
typedef ts_tensor *(*sc_inplace_fn)(ts_tensor *, double);
static const sc_inplace_fn sfns[4] = {ts_add_scalar_, ts_sub_scalar_, ts_mul_scalar_,
                                      ts_div_scalar_};
typedef ts_tensor *(*sc_fn)(ts_tensor *, double);
static const sc_fn sofns[4] = {ts_add_scalar, ts_sub_scalar, ts_mul_scalar, ts_div_scalar};

static void test_inplace(ts_device d, ts_dtype dt) {
    double complex x[40], y[40];
    for (int i = 0; i < 40; i++) x[i] = round_to(val(i, 16), dt), y[i] = round_to(val(i, 17), dt);
    x[3] = CMPLX(INFINITY, 0), y[5] = 0; /* edge values too */
    for (int op = 0; op < 4; op++)
        for (int graph = 0; graph < 2; graph++) {
            ts_scope_begin();
            ts_tensor *a = mkc(TS_SHAPE(40), x, dt, d), *b = mkc(TS_SHAPE(40), y, dt, d);
            double complex want[40], got[40], ws[40], gs[40];
            CHECK(rdc(fns[op](a, b), want, 40) && rdc(sofns[op](a, -1.5), ws, 40));
            ts_tensor *lb = graph ? leaf_of(b) : b;
            ts_tensor *t = ts_clone(graph ? leaf_of(a) : a); /* not a leaf: writable */
            const uint64_t v = ts_version(t);
            CHECK(ifns[op](t, lb) == t && ts_version(t) == v + 1);
            CHECK(rdc(t, got, 40) && same_vals(got, want, 40));
            ts_tensor *s = ts_clone(graph ? leaf_of(a) : a);
            CHECK(sfns[op](s, -1.5) == s && rdc(s, gs, 40) && same_vals(gs, ws, 40));
            if (graph) {
                CHECK(ts_grad_fn_name(t) && strcmp(ts_grad_fn_name(t), node_names[op]) == 0);
                CHECK(ts_grad_fn_name(s) && strcmp(ts_grad_fn_name(s), node_names[op]) == 0);
            }
            ts_scope_end();
        }
    /* complex128 into complex64: computed in complex128, then rounded (PyTorch's) */
    ts_scope_begin();
    ts_tensor *a = mkc(TS_SHAPE(40), x, TS_C64, d), *b = mkc(TS_SHAPE(40), y, TS_C128, d);
    double complex want[40], got[40];
    CHECK(rdc(ts_to_dtype(ts_mul(a, b), TS_C64), want, 40));
    ts_tensor *t = ts_clone(a);
    CHECK(ts_mul_(t, b) == t && ts_dtype_of(t) == TS_C64 && rdc(t, got, 40) &&
          same_vals(got, want, 40));
    /* an operand overlapping the destination: as if it were copied first */
    ts_tensor *m = ts_reshape(ts_clone(mkc(TS_SHAPE(36), x, dt, d)), TS_SHAPE(6, 6));
    CHECK(rdc(ts_mul(m, ts_transpose(m, 0, 1)), want, 36));
    CHECK(ts_mul_(m, ts_transpose(m, 0, 1)) == m && rdc(m, got, 36) && same_vals(got, want, 36));
    /* a broadcast operand and a 0-dim cpu one */
    ts_tensor *q = ts_reshape(ts_clone(mkc(TS_SHAPE(40), x, dt, d)), TS_SHAPE(8, 5));
    ts_tensor *r5 = mkc(TS_SHAPE(5), y, dt, d),
              *s0 = ts_reshape(mkc(TS_SHAPE(1), y + 7, dt, ts_cpu()), TS_SHAPE());
    CHECK(rdc(ts_div(ts_sub(q, r5), s0), want, 40));
    CHECK(ts_sub_(q, r5) == q && ts_div_(q, s0) == q && rdc(q, got, 40) &&
          same_vals(got, want, 40));
    CHECK_OK();
    /* refusals: a real destination, a leaf that requires grad, a shape the result does not fit */
    ts_tensor *re = ts_zeros(TS_SHAPE(40), (ts_opts){.device = d});
    CHECK(!ts_mul_(re, a));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "can't be cast to the desired output type");
    ts_error_clear();
    ts_tensor *lf = leaf_of(a);
    CHECK(!ts_add_(lf, b));
    CHECK_ERR_HAS(TS_ERR_STATE, "a leaf Variable that requires grad");
    ts_error_clear();
    CHECK(!ts_add_(r5, q));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "doesn't match the broadcast shape");
    ts_error_clear();
    ts_scope_end();
}

/* in-place gradients: a chain of in-place ops gives the out-of-place chain's gradients; a.mul_(a)
 * fails the backward as PyTorch's (the saved operand was overwritten) */
static void test_inplace_grads(ts_device d) {
    double complex x[6], y[6], w[6];
    for (int i = 0; i < 6; i++) x[i] = val(i, 18), y[i] = val(i, 19), w[i] = val(i, 20);
    ts_scope_begin();
    ts_tensor *g2[2][2];
    for (int k = 0; k < 2; k++) {
        ts_tensor *a = leaf_of(mkc(TS_SHAPE(6), x, TS_C128, d)),
                  *b = leaf_of(mkc(TS_SHAPE(6), y, TS_C128, d));
        ts_tensor *t = ts_mul_scalar(a, 1.0), *den = ts_add_scalar(b, 4.0);
        if (k) {
            ts_mul_(t, b);
            ts_div_(t, den);
            ts_sub_(t, a);
            ts_add_scalar_(t, 0.5);
        } else {
            t = ts_add_scalar(ts_sub(ts_div(ts_mul(t, b), den), a), 0.5);
        }
        CHECK(ts_backward_with(t, mkc(TS_SHAPE(6), w, TS_C128, d)) == TS_OK);
        g2[k][0] = ts_grad(a), g2[k][1] = ts_grad(b);
    }
    for (int j = 0; j < 2; j++) {
        double complex p[6], q[6];
        CHECK(rdc(g2[0][j], p, 6) && rdc(g2[1][j], q, 6) && same_vals(p, q, 6));
    }
    ts_tensor *a = leaf_of(mkc(TS_SHAPE(6), x, TS_C128, d));
    ts_tensor *t = ts_mul_scalar(a, 1.0);
    CHECK(ts_mul_(t, t) == t);
    CHECK_OK();
    ts_backward_with(t, mkc(TS_SHAPE(6), w, TS_C128, d));
    CHECK_ERR_HAS(TS_ERR_STATE, "modified by an inplace operation");
    ts_error_clear();
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
            test_graph_values(devs[k], dt);
            test_grad_values(devs[k], dt);
            test_inplace(devs[k], dt);
        }
        test_gradcheck(devs[k]);
        test_double_backward(devs[k], false);
        test_double_backward(devs[k], true);
        test_inplace_grads(devs[k]);
    }
    CHECK_OK();
    return ts_test_finish();
}
