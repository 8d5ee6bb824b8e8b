/* test_ternary.c — addcmul, addcdiv and lerp through the backend's one-pass ternary kernel
 * (src/backend/cpu/kern_ternary.c; the front ends in src/ops/ternary.c) on every device:
 * float32 / float64 / float16 / bfloat16 against float64 loops written here (the inputs rounded
 * to the dtype first; tolerances from the arithmetic: the float computation's few roundings
 * relative to the terms' sizes, then the result's own rounding to the dtype), broadcast and
 * transposed operands, lerp's two sides (|w| < 0.5 and above) with a tensor and a scalar weight,
 * the same values as the composition that runs when a gradient is recorded (bit for bit where
 * the formulas agree term for term), gradients through that composition (lerp's scalar weight
 * too), operands of two dtypes and a 0-d cpu operand (the composition), a captured replay, the
 * refusals (devices named in argument order, the op named) and an allocation-failure sweep. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_sweep.h"
#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define MAXN 4096

static void fill(double *v, int64_t n, int seed) {
    for (int64_t i = 0; i < n; i++) v[i] = sin(0.37 * (double)(i + 1) + 1.9 * seed) * 3.0;
}
/* values rounded to dt and back, as the tensor holds them (in a scope of its own: the caller
 * may be inside one) */
static void round_to(double *v, int64_t n, ts_dtype dt) {
    ts_scope_begin();
    ts_tensor *t =
        ts_to_dtype(ts_to_dtype(ts_tensor_f64(TS_SHAPE(n), v, (ts_opts){0}), dt), TS_F64);
    CHECK(t && ts_copy_to_host(t, v, (size_t)n * sizeof(double)) == TS_OK);
    ts_scope_end();
}
static ts_tensor *mk(ts_shape s, const double *v, ts_dtype dt, ts_device d) {
    return ts_to(ts_to_dtype(ts_tensor_f64(s, v, (ts_opts){0}), dt), d);
}
static double eps_of(ts_dtype dt) {
    return dt == TS_F64 ? 0x1p-53 : dt == TS_F32 ? 0x1p-24 : dt == TS_F16 ? 0x1p-11 : 0x1p-8;
}

enum { ADDCMUL, ADDCDIV, LERP, LERP_SCALAR };
static const char *const NAMES[] = {"addcmul", "addcdiv", "lerp", "lerp(scalar)"};

static ts_tensor *run(int op, ts_tensor *a, ts_tensor *b, ts_tensor *c, double p) {
    switch (op) {
    case ADDCMUL:
        return ts_addcmul(a, b, c, p);
    case ADDCDIV:
        return ts_addcdiv(a, b, c, p);
    case LERP:
        return ts_lerp(a, b, c);
    default:
        return ts_lerp_scalar(a, b, p);
    }
}

/* the exact value and a bound on its terms' sizes (for the tolerance) */
static double ref(int op, double a, double b, double c, double p, double *scale) {
    switch (op) {
    case ADDCMUL:
        *scale = fabs(a) + fabs(p * b * c);
        return a + p * b * c;
    case ADDCDIV:
        *scale = fabs(a) + fabs(p * b / c);
        return a + p * b / c;
    case LERP:
        p = c;
        /* fall through */
    default:
        *scale = fabs(a) + fabs(b) + fabs(p * (b - a));
        return a + p * (b - a);
    }
}

/* a [4, 1, 6], b [5, 1] transposed from [1, 5], c [6] (weights in (-1, 1) for lerp, away from
 * 0 for the divisor): out [4, 5, 6] */
static void test_values(ts_device dev, ts_dtype dt) {
    enum { NA = 24, NB = 5, NC = 6, NO = 120 };
    static double a[NA], b[NB], c[NC], got[NO];
    fill(a, NA, 1), fill(b, NB, 2), fill(c, NC, 3);
    round_to(a, NA, dt), round_to(b, NB, dt);
    for (int op = 0; op < 4; op++) {
        double cc[NC];
        for (int i = 0; i < NC; i++)
            cc[i] = op == ADDCDIV ? (c[i] >= 0 ? 0.5 + c[i] : c[i] - 0.5)
                    : op == LERP  ? c[i] / 3.1 /* both sides of 0.5 */
                                  : c[i];
        round_to(cc, NC, dt);
        const double ps[2] = {op >= LERP ? 0.3 : 0.75, op >= LERP ? -0.8 : -2.0};
        for (int k = 0; k < 2; k++) {
            ts_scope_begin();
            ts_tensor *ta = mk(TS_SHAPE(4, 1, 6), a, dt, dev);
            ts_tensor *tb = ts_transpose(mk(TS_SHAPE(1, 5), b, dt, dev), 0, 1);
            ts_tensor *tc = mk(TS_SHAPE(6), cc, dt, dev);
            ts_tensor *y = run(op, ta, tb, tc, ps[k]);
            bool ok = y && ts_dtype_of(y) == dt && ts_numel(y) == NO && rd(y, got, NO);
            double worst = 0;
            for (int i = 0; ok && i < 4; i++)
                for (int j = 0; j < 5; j++)
                    for (int m = 0; m < 6; m++) {
                        /* the scalar as the kernel holds it: float for every dtype but f64 */
                        const double pv = dt == TS_F64 ? ps[k] : (double)(float)ps[k];
                        double scale;
                        const double r = ref(op, a[i * 6 + m], b[j], cc[m], pv, &scale);
                        /* float64 computes in double, the others in float: 4 roundings of the
                         * terms, then the result's own rounding to dt */
                        const double ce = dt == TS_F64 ? 0x1p-53 : 0x1p-24;
                        const double tol = 4 * ce * scale + eps_of(dt) * fabs(r) + 1e-300;
                        const double e = fabs(got[(i * 5 + j) * 6 + m] - r) / tol;
                        if (!(e <= 1)) ok = false;
                        if (e > worst) worst = e;
                    }
            if (!ok)
                printf("  %s %s on %s: worst error %.3g of the bound\n", NAMES[op],
                       ts_dtype_name(dt), ts_device_str(dev), worst);
            ts_test_record(ok);
            ts_scope_end();
        }
    }
}

static ts_tensor *grad_on(ts_tensor *t) {
    ts_set_requires_grad(t, true);
    return t;
}

/* no gradient (the kernel) and a recorded gradient (the composition) give the same values:
 * bit for bit for addcmul, addcdiv and lerp with a tensor weight (the same formula term for
 * term), within one rounding of (1 - w) for lerp with a scalar weight at |w| >= 0.5 (the
 * composition rounds 1 - w from double, PyTorch and the kernel compute it in float) */
static void test_matches_composition(ts_device dev, ts_dtype dt) {
    enum { N = 1000 };
    static double a[N], b[N], c[N], y0[N], y1[N];
    fill(a, N, 4), fill(b, N, 5), fill(c, N, 6);
    for (int i = 0; i < N; i++) c[i] = c[i] / 3.0 + (i % 2 ? 0.01 : -0.01);
    for (int op = 0; op < 4; op++) {
        ts_scope_begin();
        ts_tensor *ta = mk(TS_SHAPE(N), a, dt, dev), *tb = mk(TS_SHAPE(N), b, dt, dev),
                  *tc = mk(TS_SHAPE(N), c, dt, dev);
        const double p = op == LERP_SCALAR ? 0.7 : 1.25;
        ts_tensor *fused = run(op, ta, tb, tc, p);
        ts_tensor *ga = grad_on(ts_clone(ta));
        ts_tensor *composed = run(op, ga, tb, tc, p);
        bool ok = fused && composed && rd(fused, y0, N) && rd(ts_detach(composed), y1, N);
        const double tol = op == LERP_SCALAR ? 8 * eps_of(dt) : 0;
        for (int i = 0; ok && i < N; i++)
            if (!(fabs(y0[i] - y1[i]) <= tol * (fabs(a[i]) + fabs(b[i])))) {
                printf("  %s %s on %s at %d: %.17g (kernel) vs %.17g (composed)\n", NAMES[op],
                       ts_dtype_name(dt), ts_device_str(dev), i, y0[i], y1[i]);
                ok = false;
            }
        ts_test_record(ok);
        ts_scope_end();
    }
}

/* a transposed first operand (its stride differs from the output's), then all contiguous (one
 * run of more elements than the kernel's float16 chunk, 256): every op, float32 and float16 */
static void test_strided_large(ts_device dev) {
    enum { R = 30, C = 40, N = R * C };
    static double a[N], b[N], c[N], got[N];
    static const ts_dtype dts[2] = {TS_F32, TS_F16};
    for (int k = 0; k < 4; k++) {
        const ts_dtype dt = dts[k % 2];
        const bool tr = k < 2;
        fill(a, N, 13), fill(b, N, 14), fill(c, N, 15);
        for (int i = 0; i < N; i++) c[i] = c[i] / 4 + (c[i] >= 0 ? 0.1 : -0.1);
        round_to(a, N, dt), round_to(b, N, dt), round_to(c, N, dt);
        for (int op = 0; op < 4; op++) {
            ts_scope_begin();
            /* at[i][j] = a[j * C + i]: a [R, C] transposed to [C, R] */
            ts_tensor *ta = tr ? ts_transpose(mk(TS_SHAPE(R, C), a, dt, dev), 0, 1)
                               : mk(TS_SHAPE(C, R), a, dt, dev);
            ts_tensor *tb = mk(TS_SHAPE(C, R), b, dt, dev), *tc = mk(TS_SHAPE(C, R), c, dt, dev);
            const double p = op == LERP_SCALAR ? 0.6 : 1.5;
            ts_tensor *y = run(op, ta, tb, tc, p);
            bool ok = y && rd(y, got, N);
            for (int i = 0; ok && i < C; i++)
                for (int j = 0; j < R; j++) {
                    const int o = i * R + j;
                    double scale;
                    const double r = ref(op, a[tr ? j * C + i : o], b[o], c[o], p, &scale);
                    ok = fabs(got[o] - r) <= 4 * 0x1p-24 * scale + eps_of(dt) * fabs(r);
                    if (!ok)
                        printf("  %s %s%s on %s at %d: %.9g, want %.9g\n", NAMES[op],
                               ts_dtype_name(dt), tr ? " transposed" : "", ts_device_str(dev), o,
                               got[o], r);
                }
            ts_test_record(ok);
            ts_scope_end();
        }
    }
}

/* gradients (the composition) by finite differences */
static ts_tensor *g_addcmul(ts_tensor *const *x, int n, void *ctx) {
    (void)ctx, (void)n;
    return ts_addcmul(x[0], x[1], x[2], 0.5);
}
static ts_tensor *g_addcdiv(ts_tensor *const *x, int n, void *ctx) {
    (void)ctx, (void)n;
    return ts_addcdiv(x[0], x[1], x[2], -1.5);
}
static ts_tensor *g_lerp(ts_tensor *const *x, int n, void *ctx) {
    (void)ctx, (void)n;
    return ts_lerp(x[0], x[1], x[2]);
}
static ts_tensor *g_lerp_lo(ts_tensor *const *x, int n, void *ctx) {
    (void)ctx, (void)n;
    return ts_lerp_scalar(x[0], x[1], 0.3);
}
static ts_tensor *g_lerp_hi(ts_tensor *const *x, int n, void *ctx) {
    (void)ctx, (void)n;
    return ts_lerp_scalar(x[0], x[1], -0.8);
}
static void test_grads(ts_device dev) {
    double a[6], b[3], c[6];
    fill(a, 6, 7), fill(b, 3, 8), fill(c, 6, 9);
    for (int i = 0; i < 6; i++) c[i] = c[i] / 4 + (c[i] >= 0 ? 0.6 : -0.6);
    ts_gradcheck_fn fns[3] = {g_addcmul, g_addcdiv, g_lerp};
    for (int f = 0; f < 3; f++) {
        ts_scope_begin();
        ts_tensor *x[3] = {grad_on(mk(TS_SHAPE(2, 3), a, TS_F64, dev)),
                           grad_on(mk(TS_SHAPE(3), b, TS_F64, dev)),
                           grad_on(mk(TS_SHAPE(2, 3), c, TS_F64, dev))};
        CHECK(ts_gradcheck(fns[f], NULL, x, 3, (ts_gradcheck_opts){0}));
        ts_scope_end();
    }
    /* lerp with a scalar weight (two operands), on both sides of 0.5 */
    ts_gradcheck_fn lfns[2] = {g_lerp_lo, g_lerp_hi};
    for (int f = 0; f < 2; f++) {
        ts_scope_begin();
        ts_tensor *x[2] = {grad_on(mk(TS_SHAPE(2, 3), a, TS_F64, dev)),
                           grad_on(mk(TS_SHAPE(3), b, TS_F64, dev))};
        CHECK(ts_gradcheck(lfns[f], NULL, x, 2, (ts_gradcheck_opts){0}));
        ts_scope_end();
    }
}

/* a captured replay runs the kernel on new inputs */
static void test_capture(ts_device dev) {
    double a[8], b[8], c[8], got[8];
    fill(a, 8, 10), fill(b, 8, 11), fill(c, 8, 12);
    ts_scope_begin();
    ts_tensor *ta = mk(TS_SHAPE(8), a, TS_F32, dev), *tb = mk(TS_SHAPE(8), b, TS_F32, dev),
              *tc = mk(TS_SHAPE(8), c, TS_F32, dev);
    ts_graph *g = ts_graph_capture_begin(dev, (ts_graph_opts){0});
    ts_tensor *y = g ? ts_addcmul(ta, tb, tc, 2.0) : NULL;
    CHECK(g && y && ts_graph_capture_end() == TS_OK && ts_graph_kernel_count(g) == 1);
    for (int i = 0; i < 8; i++) a[i] += 1;
    ts_tensor *na = mk(TS_SHAPE(8), a, TS_F32, ts_cpu());
    CHECK(ts_copy_(ta, na) != NULL && ts_graph_replay(g) == TS_OK && rd(y, got, 8));
    round_to(a, 8, TS_F32), round_to(b, 8, TS_F32), round_to(c, 8, TS_F32);
    for (int i = 0; i < 8; i++) {
        double scale;
        const double r = ref(ADDCMUL, a[i], b[i], c[i], 2.0, &scale);
        CHECK(fabs(got[i] - r) <= 5 * 0x1p-24 * scale);
    }
    ts_graph_free(g);
    ts_scope_end();
}

/* operands of two dtypes (the composition promotes: the one-pass kernel takes one dtype only),
 * tensor1 or tensor2 the wider one, and a 0-d cpu operand beside device tensors */
static void test_mixed(ts_device dev) {
    double a[6], b[6], c[6], got[6];
    fill(a, 6, 16), fill(b, 6, 17), fill(c, 6, 18);
    for (int i = 0; i < 6; i++) c[i] = c[i] / 4 + (c[i] >= 0 ? 0.5 : -0.5);
    round_to(a, 6, TS_F32), round_to(b, 6, TS_F32), round_to(c, 6, TS_F32);
    for (int k = 0; k < 4; k++) {
        ts_scope_begin();
        const int op = k % 2 ? ADDCDIV : ADDCMUL;
        const ts_dtype d1 = k < 2 ? TS_F64 : TS_F32, d2 = k < 2 ? TS_F32 : TS_F64;
        ts_tensor *ta = mk(TS_SHAPE(6), a, TS_F32, dev), *tb = mk(TS_SHAPE(6), b, d1, dev),
                  *tc = mk(TS_SHAPE(6), c, d2, dev);
        ts_tensor *y = run(op, ta, tb, tc, 0.75);
        bool ok = y && ts_dtype_of(y) == TS_F64 && rd(y, got, 6);
        for (int i = 0; ok && i < 6; i++) {
            double scale;
            const double r = ref(op, a[i], b[i], c[i], 0.75, &scale);
            ok = fabs(got[i] - r) <= 4 * 0x1p-53 * scale;
        }
        if (!ok) printf("  %s of float32 and float64 on %s\n", NAMES[op], ts_device_str(dev));
        ts_test_record(ok);
        ts_scope_end();
    }
    /* a 0-d cpu tensor as tensor1 (allowed beside any device), float32 */
    ts_scope_begin();
    ts_tensor *s0 = mk(TS_SHAPE(), b, TS_F32, ts_cpu());
    ts_tensor *y =
        ts_addcmul(mk(TS_SHAPE(6), a, TS_F32, dev), s0, mk(TS_SHAPE(6), c, TS_F32, dev), 2.0);
    bool ok = y && ts_dtype_of(y) == TS_F32 && rd(y, got, 6);
    for (int i = 0; ok && i < 6; i++) {
        double scale;
        const double r = ref(ADDCMUL, a[i], b[0], c[i], 2.0, &scale);
        ok = fabs(got[i] - r) <= 4 * 0x1p-24 * scale;
    }
    ts_test_record(ok);
    ts_scope_end();
    CHECK_OK();
}

/* every allocation of the one-pass path failed in turn (fault_sweep.h): a clear out-of-memory
 * error, nothing leaked, and the ops succeed once it is cleared */
typedef struct ter_st {
    ts_tensor *a, *b, *c;
} ter_st;
static void *ter_setup(void) {
    double v[12];
    fill(v, 12, 19);
    ter_st *s = calloc(1, sizeof *s);
    ts_scope_begin();
    s->a = ts_keep(mk(TS_SHAPE(3, 4), v, TS_F32, ts_cpu()));
    s->b = ts_keep(mk(TS_SHAPE(4), v, TS_F32, ts_cpu()));
    for (int i = 0; i < 12; i++) v[i] = 0.25 + 0.01 * i;
    s->c = ts_keep(mk(TS_SHAPE(3, 4), v, TS_F32, ts_cpu()));
    ts_scope_end();
    return s;
}
static bool ter_run(void *p) {
    ter_st *s = p;
    ts_scope_begin();
    bool ok = true;
    for (int op = 0; op < 4; op++) ok = ok && run(op, s->a, s->b, s->c, 0.7) != NULL;
    ts_scope_end();
    return ok && ts_error() == TS_OK;
}
static void ter_teardown(void *p) {
    ter_st *s = p;
    ts_release(s->a), ts_release(s->b), ts_release(s->c);
    free(s);
}
static void test_fault_sweep(void) {
    const ts_sweep_case c = {
        .name = "ternary", .setup = ter_setup, .run = ter_run, .teardown = ter_teardown};
    const ts_sweep_stats st = ts_fault_sweep(&c, 1000);
    CHECK(st.errors > 0 && st.oom == st.errors);
    CHECK_OK();
}

static void test_refusals(void) {
    double v[3] = {1, 2, 3};
    ts_scope_begin();
    ts_tensor *f = mk(TS_SHAPE(3), v, TS_F32, ts_cpu()), *d = mk(TS_SHAPE(3), v, TS_F64, ts_cpu());
    ts_tensor *bad = mk(TS_SHAPE(2), v, TS_F32, ts_cpu());
    CHECK(ts_lerp_scalar(f, d, 0.5) == NULL && ts_error() == TS_ERR_DTYPE);
    CHECK(strstr(ts_error_message(), "lerp") != NULL);
    ts_error_clear();
    CHECK(ts_addcmul(f, bad, f, 1.0) == NULL && ts_error() == TS_ERR_SHAPE);
    ts_error_clear();
    CHECK(ts_lerp(f, f, bad) == NULL && ts_error() == TS_ERR_SHAPE);
    ts_error_clear();
    if (ndev > 1) {
        ts_tensor *s = ts_to(f, devs[1]);
        CHECK(ts_addcdiv(f, s, f, 1.0) == NULL && ts_error() == TS_ERR_DEVICE);
        CHECK(strstr(ts_error_message(), "addcdiv") != NULL);
        ts_error_clear();
        /* lerp names itself for every operand on another device (tensor and scalar weight) */
        for (int k = 0; k < 3; k++) {
            ts_tensor *y = k == 0   ? ts_lerp(f, s, f)
                           : k == 1 ? ts_lerp(f, f, s)
                                    : ts_lerp_scalar(s, f, 0.25);
            CHECK(y == NULL && ts_error() == TS_ERR_DEVICE);
            CHECK(strstr(ts_error_message(), "lerp: expected all tensors") != NULL);
            ts_error_clear();
        }
    }
    if (ts_device_count(TS_SIM) >= 2) { /* the first two devices in argument order */
        ts_tensor *s0 = ts_to(f, ts_sim(0)), *s1 = ts_to(f, ts_sim(1));
        CHECK(ts_addcmul(f, s0, s1, 1.0) == NULL);
        CHECK_ERR_HAS(TS_ERR_DEVICE, "two devices, cpu and sim:0");
        CHECK(ts_addcdiv(s1, f, s0, 1.0) == NULL);
        CHECK_ERR_HAS(TS_ERR_DEVICE, "two devices, sim:1 and cpu");
    }
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    static const ts_dtype dts[4] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (int d = 0; d < ndev; d++) {
        for (int k = 0; k < 4; k++) test_values(devs[d], dts[k]);
        test_matches_composition(devs[d], TS_F32);
        test_matches_composition(devs[d], TS_F64);
        test_strided_large(devs[d]);
        test_grads(devs[d]);
        test_mixed(devs[d]);
        if (devs[d].type != TS_CPU) test_capture(devs[d]);
    }
    test_refusals();
    test_fault_sweep();
    CHECK_OK();
    return ts_test_finish();
}
