/* test_activation_functions.c — issue 52's activations (src/ops/activation.c, kernel_math_act.h,
 * elementwise_grad_act.c) on every device: values against long double references over a sweep
 * and the edges (kinks, +-0, +-inf, NaN) in f64, f32, f16 and bf16; gradients against the
 * derivative with PyTorch's choice at each kink (hardtanh / relu6 pass nothing at their bounds,
 * threshold keeps x only where x > threshold, elu's slope at 0 is alpha...) and by ts_gradcheck;
 * the in-place forms; integer hardtanh / relu6 / threshold; glu, prelu (its weight's gradient),
 * softmin; the refusals with PyTorch's messages. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "host_read_util.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define SELU_A 1.6732632423543772848170429916717L
#define SELU_S 1.0507009873554804934193349852946L

/* ------------------------------------------------------------------ tensors */
static ts_tensor *mk(const double *v, int64_t n, ts_dtype dt, ts_device d) {
    return ts_to(ts_to_dtype(ts_tensor_f64(TS_SHAPE(n), v, (ts_opts){.device = ts_cpu()}), dt), d);
}

/* ------------------------------------------------------------------ references (long double)
 * values by the definitions, derivatives with PyTorch's conventions at the kinks and for NaN */
typedef long double ld;
static ld clampl(ld x, ld lo, ld hi) { return x < lo ? lo : (x > hi ? hi : x); }
static ld sigl(ld x) { return 1 / (1 + expl(-x)); }

static ld y_elu(ld x, const double *p) { return x > 0 ? x : p[0] * expm1l(x); }
static ld d_elu(ld x, const double *p) { return x <= 0 ? p[0] * expl(x) : 1; }
static ld y_celu(ld x, const double *p) { return x > 0 ? x : p[0] * expm1l(x / p[0]); }
static ld d_celu(ld x, const double *p) { return x <= 0 ? expl(x / p[0]) : 1; }
static ld y_selu(ld x, const double *p) {
    (void)p;
    return SELU_S * (x > 0 ? x : SELU_A * expm1l(x));
}
static ld d_selu(ld x, const double *p) {
    (void)p;
    return x <= 0 ? SELU_S * SELU_A * expl(x) : SELU_S;
}
static ld y_hardtanh(ld x, const double *p) { return isnan(x) ? x : clampl(x, p[0], p[1]); }
static ld d_hardtanh(ld x, const double *p) { return (x <= p[0] || x >= p[1]) ? 0 : 1; }
static ld y_threshold(ld x, const double *p) { return x <= p[0] ? p[1] : x; }
static ld d_threshold(ld x, const double *p) { return x <= p[0] ? 0 : 1; }
static ld y_hardshrink(ld x, const double *p) { return fabsl(x) <= p[0] ? 0 : x; }
static ld y_softshrink(ld x, const double *p) {
    return isnan(x) ? x : (x > p[0] ? x - p[0] : (x < -p[0] ? x + p[0] : 0));
}
static ld d_shrink(ld x, const double *p) { return (x >= -p[0] && x <= p[0]) ? 0 : 1; }
static ld y_tanhshrink(ld x, const double *p) {
    (void)p;
    return x - tanhl(x);
}
static ld d_tanhshrink(ld x, const double *p) {
    (void)p;
    return tanhl(x) * tanhl(x);
}
static ld y_softsign(ld x, const double *p) {
    (void)p;
    return x / (1 + fabsl(x));
}
static ld d_softsign(ld x, const double *p) {
    (void)p;
    return 1 / ((1 + fabsl(x)) * (1 + fabsl(x)));
}
static ld y_logsigmoid(ld x, const double *p) {
    (void)p;
    return x >= 0 ? -log1pl(expl(-x)) : x - log1pl(expl(x));
}
static ld d_logsigmoid(ld x, const double *p) {
    (void)p;
    return sigl(-x);
}
static ld y_mish(ld x, const double *p) {
    (void)p;
    return x * tanhl(log1pl(expl(x)));
}
static ld d_mish(ld x, const double *p) {
    (void)p;
    const ld t = tanhl(log1pl(expl(x)));
    return t + x * sigl(x) * (1 - t * t);
}
static ld y_hardsigmoid(ld x, const double *p) {
    (void)p;
    return isnan(x) ? x : clampl(x + 3, 0, 6) / 6;
}
static ld d_hardsigmoid(ld x, const double *p) {
    (void)p;
    return (x > -3 && x < 3) ? 1.0L / 6 : 0;
}
static ld y_hardswish(ld x, const double *p) {
    (void)p;
    return isnan(x) ? x : x * clampl(x + 3, 0, 6) / 6;
}
static ld d_hardswish(ld x, const double *p) {
    (void)p;
    return x <= -3 ? 0 : (x < 3 ? x / 3 + 0.5L : 1);
}

static ld y_leaky(ld x, const double *p) { return x > 0 ? x : x * p[0]; }
static ld d_leaky(ld x, const double *p) { return x > 0 ? 1 : p[0]; }

/* ------------------------------------------------------------------ the ops */
#define W(NAME, CALL)                                                                              \
    static ts_tensor *NAME(ts_tensor *t, const double *p) {                                        \
        (void)p;                                                                                   \
        return CALL;                                                                               \
    }
W(f_elu, ts_elu(t, p[0]))
W(i_elu, ts_elu_(t, p[0]))
W(f_celu, ts_celu(t, p[0]))
W(i_celu, ts_celu_(t, p[0]))
W(f_selu, ts_selu(t))
W(i_selu, ts_selu_(t))
W(f_hardtanh, ts_hardtanh(t, p[0], p[1]))
W(i_hardtanh, ts_hardtanh_(t, p[0], p[1]))
W(f_relu6, ts_relu6(t))
W(i_relu6, ts_relu6_(t))
W(f_threshold, ts_threshold(t, p[0], p[1]))
W(i_threshold, ts_threshold_(t, p[0], p[1]))
W(f_hardshrink, ts_hardshrink(t, p[0]))
W(f_softshrink, ts_softshrink(t, p[0]))
W(f_tanhshrink, ts_tanhshrink(t))
W(f_softsign, ts_softsign(t))
W(f_logsigmoid, ts_logsigmoid(t))
W(f_mish, ts_mish(t))
W(i_mish, ts_mish_(t))
W(f_hardsigmoid, ts_hardsigmoid(t))
W(i_hardsigmoid, ts_hardsigmoid_(t))
W(f_hardswish, ts_hardswish(t))
W(i_hardswish, ts_hardswish_(t))
W(f_leaky, ts_leaky_relu(t, p[0]))
W(i_leaky, ts_leaky_relu_(t, p[0]))

typedef struct act {
    const char *name, *grad_fn;
    ts_tensor *(*f)(ts_tensor *, const double *), *(*fi)(ts_tensor *, const double *);
    double p[2];
    ld (*y)(ld, const double *), (*dy)(ld, const double *);
    double kinks[4]; /* where the derivative jumps (PyTorch's side checked exactly) */
    int nk;
} act;

static const act acts[] = {
    {"elu", "EluBackward0", f_elu, i_elu, {2, 0}, y_elu, d_elu, {0}, 1},
    {"leaky_relu", "LeakyReluBackward0", f_leaky, i_leaky, {0.01, 0}, y_leaky, d_leaky, {0}, 1},
    {"leaky_relu (slope 0.2)",
     "LeakyReluBackward0",
     f_leaky,
     i_leaky,
     {0.2, 0},
     y_leaky,
     d_leaky,
     {0},
     1},
    {"leaky_relu (slope -0.5)",
     "LeakyReluBackward0",
     f_leaky,
     i_leaky,
     {-0.5, 0},
     y_leaky,
     d_leaky,
     {0},
     1},
    {"elu (alpha 1)", "EluBackward0", f_elu, i_elu, {1, 0}, y_elu, d_elu, {0}, 1},
    {"celu", "CeluBackward0", f_celu, i_celu, {0.5, 0}, y_celu, d_celu, {0}, 1},
    {"selu", "EluBackward0", f_selu, i_selu, {0, 0}, y_selu, d_selu, {0}, 1},
    {"hardtanh",
     "HardtanhBackward0",
     f_hardtanh,
     i_hardtanh,
     {-1.5, 2},
     y_hardtanh,
     d_hardtanh,
     {-1.5, 2},
     2},
    {"relu6", "HardtanhBackward0", f_relu6, i_relu6, {0, 6}, y_hardtanh, d_hardtanh, {0, 6}, 2},
    {"threshold",
     "ThresholdBackward0",
     f_threshold,
     i_threshold,
     {1, 5},
     y_threshold,
     d_threshold,
     {1},
     1},
    {"hardshrink",
     "HardshrinkBackward0",
     f_hardshrink,
     NULL,
     {0.75, 0},
     y_hardshrink,
     d_shrink,
     {-0.75, 0.75},
     2},
    {"softshrink",
     "SoftshrinkBackward0",
     f_softshrink,
     NULL,
     {0.75, 0},
     y_softshrink,
     d_shrink,
     {-0.75, 0.75},
     2},
    {"tanhshrink", "SubBackward0", f_tanhshrink, NULL, {0, 0}, y_tanhshrink, d_tanhshrink, {0}, 0},
    {"softsign", "DivBackward0", f_softsign, NULL, {0, 0}, y_softsign, d_softsign, {0}, 0},
    {"logsigmoid",
     "LogSigmoidBackward0",
     f_logsigmoid,
     NULL,
     {0, 0},
     y_logsigmoid,
     d_logsigmoid,
     {0},
     0},
    {"mish", "MishBackward0", f_mish, i_mish, {0, 0}, y_mish, d_mish, {0}, 0},
    {"hardsigmoid",
     "HardsigmoidBackward0",
     f_hardsigmoid,
     i_hardsigmoid,
     {0, 0},
     y_hardsigmoid,
     d_hardsigmoid,
     {-3, 3},
     2},
    {"hardswish",
     "HardswishBackward0",
     f_hardswish,
     i_hardswish,
     {0, 0},
     y_hardswish,
     d_hardswish,
     {-3, 3},
     2},
};
#define NA ((int)(sizeof acts / sizeof *acts))

/* the sweep: NS points on [-8, 8], the kinks, the edges */
#define NS 401
#define NX (NS + 12)
static int points(const act *a, double *x) {
    int n = 0;
    for (int i = 0; i < NS; i++) x[n++] = -8 + 16.0 * (i + 0.123) / NS;
    for (int k = 0; k < a->nk; k++) x[n++] = a->kinks[k];
    static const double edge[] = {0.0, -0.0, 30, -30, 100, -100, NAN};
    for (size_t k = 0; k < sizeof edge / sizeof *edge; k++) x[n++] = edge[k];
    return n;
}

/* unit roundoff of each dtype */
static double eps_of(ts_dtype dt) {
    switch (dt) {
    case TS_F64:
        return DBL_EPSILON / 2;
    case TS_F32:
        return FLT_EPSILON / 2;
    case TS_F16:
        return 1.0 / 2048;
    default:
        return 1.0 / 256;
    }
}

/* values of every op in every float dtype on every device; infinities too */
static void test_values(void) {
    static const ts_dtype dts[] = {TS_F64, TS_F32, TS_F16, TS_BF16};
    double x[NX + 2], xs[NX + 2], y[NX + 2];
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < NA; k++)
            for (int j = 0; j < 4; j++) {
                const act *a = &acts[k];
                const ts_dtype dt = dts[j];
                int n = points(a, x);
                x[n++] = INFINITY;
                x[n++] = -INFINITY;
                ts_scope_begin();
                ts_tensor *t = mk(x, n, dt, devs[di]);
                /* the input as the dtype holds it: the reference's argument */
                bool ok = rd(t, xs, n) && rd(a->f(t, a->p), y, n);
                /* computed in the input's type (f16 / bf16 in float): a few roundings of the
                 * result's size, one rounding of the dtype for the halves (three for the
                 * compositions, whose every op rounds to the dtype, as PyTorch's do) */
                const bool composite = a->f == f_tanhshrink; /* softsign is one kernel */
                const double tol = (dt == TS_F64 || dt == TS_F32 ? 16
                                    : composite                  ? 3
                                                                 : 1) *
                                   eps_of(dt);
                double worst = 0;
                int bad = -1;
                for (int i = 0; ok && i < n; i++) {
                    const double r = (double)a->y(xs[i], a->p);
                    const double m = fabs(r) > 1 ? fabs(r) : 1;
                    if (!ts_test_near(y[i], r, tol * m)) {
                        bad = i;
                        break;
                    }
                    if (isfinite(r)) worst = fmax(worst, fabs(y[i] - r) / m);
                }
                ts_scope_end();
                ts_test_record(ok && bad < 0);
                if (!ok || bad >= 0)
                    ts_test_failf(
                        __FILE__, __LINE__, "%s %s on %s: x = %.17g gives %.17g, want %.17g%s",
                        a->name, ts_dtype_name(dt), ts_device_str(devs[di]),
                        bad >= 0 ? xs[bad] : 0.0, bad >= 0 ? y[bad] : 0.0,
                        bad >= 0 ? (double)a->y(xs[bad], a->p) : 0.0, ts_test_error_str());
                else if (di == 0 && dt != TS_BF16)
                    printf("  %-14s %-8s largest error %.2f units of roundoff\n", a->name,
                           ts_dtype_name(dt), worst / eps_of(dt));
                ts_error_clear();
            }
}

/* dy/dx by backward of sum(y) at every point (kinks and NaN included), f64 and f32, the grad_fn's
 * name, and ts_gradcheck over the sweep where no kink lies in it */
static ts_tensor *g_act(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    const act *a = ctx;
    return a->f(in[0], a->p);
}

static void test_grads(void) {
    double x[NX], xs[NX], g[NX];
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < NA; k++)
            for (int j = 0; j < 2; j++) {
                const act *a = &acts[k];
                const ts_dtype dt = j ? TS_F32 : TS_F64;
                const int n = points(a, x);
                ts_scope_begin();
                ts_tensor *t = ts_detach(mk(x, n, dt, devs[di]));
                ts_set_requires_grad(t, true);
                ts_tensor *y = a->f(t, a->p);
                CHECK(y && strcmp(ts_grad_fn_name(y), a->grad_fn) == 0);
                ts_backward(ts_sum(y));
                bool ok = rd(t, xs, n) && rd(ts_grad(t), g, n);
                const double tol = 64 * eps_of(dt);
                int bad = -1;
                for (int i = 0; ok && i < n && bad < 0; i++) {
                    const double r = (double)a->dy(xs[i], a->p);
                    if (!ts_test_near(g[i], r, tol * (fabs(r) > 1 ? fabs(r) : 1))) bad = i;
                }
                ts_scope_end();
                ts_test_record(ok && bad < 0);
                if (!ok || bad >= 0)
                    ts_test_failf(
                        __FILE__, __LINE__, "%s' %s on %s: x = %.17g gives %.17g, want %.17g%s",
                        a->name, ts_dtype_name(dt), ts_device_str(devs[di]),
                        bad >= 0 ? xs[bad] : 0.0, bad >= 0 ? g[bad] : 0.0,
                        bad >= 0 ? (double)a->dy(xs[bad], a->p) : 0.0, ts_test_error_str());
                ts_error_clear();
            }
    /* central differences where the function is smooth on the sampled points */
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-6};
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < NA; k++) {
            const act *a = &acts[k];
            double v[9];
            /* -3.95, -2.99, -2.04, ..., 3.70: no kink within 1e-6 of any */
            for (int i = 0; i < 9; i++) v[i] = -4.3 + 8.6 * (i + 0.37) / 9;
            ts_scope_begin();
            ts_tensor *t = ts_detach(mk(v, 9, TS_F64, devs[di]));
            ts_set_requires_grad(t, true);
            const bool ok = ts_gradcheck(g_act, (void *)a, &t, 1, go);
            ts_scope_end();
            ts_test_record(ok);
            if (!ok)
                ts_test_failf(__FILE__, __LINE__, "gradcheck %s on %s%s", a->name,
                              ts_device_str(devs[di]), ts_test_error_str());
            ts_error_clear();
        }
}

/* the `_` forms: the same values into the same tensor, the same gradient through it; a leaf that
 * requires grad is refused */
static void test_inplace(void) {
    double x[NX], y0[NX], y1[NX], g0[NX], g1[NX];
    for (int di = 0; di < ndev; di++)
        for (int k = 0; k < NA; k++) {
            const act *a = &acts[k];
            if (!a->fi) continue;
            const int n = points(a, x);
            ts_scope_begin();
            const ts_opts lo = {.dtype = TS_F64, .device = devs[di], .requires_grad = true};
            ts_tensor *l0 = ts_tensor_f64(TS_SHAPE(n), x, lo),
                      *l1 = ts_tensor_f64(TS_SHAPE(n), x, lo);
            ts_tensor *r0 = a->f(l0, a->p);
            ts_tensor *m = ts_mul_scalar(l1, 1); /* a non-leaf to write into */
            ts_tensor *r1 = a->fi(m, a->p);
            CHECK(r1 == m);
            ts_backward(ts_sum(ts_mul(r0, r0)));
            ts_backward(ts_sum(ts_mul(r1, r1)));
            const bool ok =
                rd(r0, y0, n) && rd(r1, y1, n) && rd(ts_grad(l0), g0, n) && rd(ts_grad(l1), g1, n);
            bool same = ok;
            for (int i = 0; same && i < n; i++)
                same = ts_test_near(y0[i], y1[i], 0) && ts_test_near(g0[i], g1[i], 0);
            ts_test_record(same);
            if (!same)
                ts_test_failf(__FILE__, __LINE__, "%s in place on %s differs%s", a->name,
                              ts_device_str(devs[di]), ts_test_error_str());
            /* without a graph too */
            ts_tensor *plain = mk(x, n, TS_F64, devs[di]);
            CHECK(a->fi(plain, a->p) == plain && rd(plain, y1, n));
            for (int i = 0; i < n; i++) CHECK(ts_test_near(y0[i], y1[i], 0));
            CHECK(a->fi(l0, a->p) == NULL);
            CHECK_ERR_HAS(TS_ERR_STATE, "a leaf Variable that requires grad");
            ts_scope_end();
            ts_error_clear();
        }
}

/* PyTorch's integer forms: the numbers truncated, clamp / compare in the dtype */
static void test_integers(void) {
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        const ts_opts o = {.device = devs[di]};
        const int64_t iv[5] = {-3, 0, 2, 7, (int64_t)1 << 62};
        ts_tensor *ti = ts_tensor_i64(TS_SHAPE(5), iv, o);
        int64_t r[5];
        ts_tensor *h = ts_to(ts_hardtanh(ti, -1.5, 1.5), ts_cpu());
        CHECK(h && ts_dtype_of(h) == TS_I64 && ts_copy_to_host(h, r, sizeof r) == TS_OK);
        CHECK(r[0] == -1 && r[1] == 0 && r[2] == 1 && r[3] == 1 && r[4] == 1);
        ts_tensor *u8 =
            ts_to_dtype(ts_tensor_i64(TS_SHAPE(4), (int64_t[]){253, 0, 2, 7}, o), TS_U8);
        uint8_t b[4];
        h = ts_to(ts_relu6(u8), ts_cpu());
        CHECK(h && ts_dtype_of(h) == TS_U8 && ts_copy_to_host(h, b, sizeof b) == TS_OK);
        CHECK(b[0] == 6 && b[1] == 0 && b[2] == 2 && b[3] == 6);
        /* 2^62 + 1 > 2^62 as integers (a double compare would say equal) */
        const int64_t big[2] = {((int64_t)1 << 62) + 1, ((int64_t)1 << 62)};
        h = ts_to(ts_threshold(ts_tensor_i64(TS_SHAPE(2), big, o), 0x1p62, -5.5), ts_cpu());
        CHECK(h && ts_copy_to_host(h, r, 2 * sizeof *r) == TS_OK);
        CHECK(r[0] == big[0] && r[1] == -5);
        ts_tensor *tt = ts_tensor_i64(TS_SHAPE(5), iv, o);
        CHECK(ts_threshold_(tt, 2.5, 20) == tt);
        h = ts_to(tt, ts_cpu());
        CHECK(h && ts_copy_to_host(h, r, sizeof r) == TS_OK);
        CHECK(r[0] == 20 && r[1] == 20 && r[2] == 20 && r[3] == 7 && r[4] == iv[4]);
        CHECK(ts_threshold(u8, 1, 300) == NULL);
        CHECK_ERR_HAS(TS_ERR_ARG, "cannot be converted to type uint8");
        /* tanhshrink and softsign of integers are float32, as PyTorch */
        ts_tensor *f = ts_softsign(ti);
        CHECK(f && ts_dtype_of(f) == TS_F32);
        CHECK(ts_tanhshrink(ti) && ts_dtype_of(ts_tanhshrink(ti)) == TS_F32);
        ts_scope_end();
        CHECK_OK();
    }
}

static ts_tensor *g_glu(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    return ts_glu(in[0], *(const int *)ctx);
}
static ts_tensor *g_prelu(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_prelu(in[0], in[1]);
}
static ts_tensor *g_softmin(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    return ts_softmin(in[0], *(const int *)ctx);
}

/* glu, prelu and softmin against hand loops, and their gradients */
static void test_compositions(void) {
    const ts_gradcheck_opts go = {.eps = 1e-6, .atol = 1e-7, .rtol = 1e-6};
    for (int di = 0; di < ndev; di++) {
        ts_scope_begin();
        const ts_opts o = {.dtype = TS_F64, .device = devs[di], .requires_grad = true};
        double v[24], out[24];
        for (int i = 0; i < 24; i++) v[i] = sin(1.7 * i + 0.3) * 3;
        /* glu over dim 1 of [3, 4, 2]: out[i, j, k] = v[i, j, k] sigmoid(v[i, j + 2, k]) */
        ts_tensor *x = ts_tensor_f64(TS_SHAPE(3, 4, 2), v, o);
        ts_tensor *y = ts_glu(x, -2);
        CHECK(y && ts_ndim(y) == 3 && ts_shape_of(y).dims[1] == 2 && rd(y, out, 12));
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++)
                for (int k = 0; k < 2; k++) {
                    const double a = v[i * 8 + j * 2 + k], b = v[i * 8 + (j + 2) * 2 + k];
                    CHECK_NEAR(out[i * 4 + j * 2 + k], a / (1 + exp(-b)), 4e-16 * (1 + fabs(a)));
                }
        for (int d = 0; d < 3; d += 2) { /* dims 0 (size 3: odd) and 2 */
            if (d == 0) {
                CHECK(ts_glu(x, 0) == NULL);
                CHECK_ERR_HAS(TS_ERR_SHAPE,
                              "Halving dimension must be even, but dimension 0 is size 3");
                continue;
            }
            CHECK(ts_gradcheck(g_glu, &d, &x, 1, go));
        }
        /* prelu: a slope per channel of [2, 3, 4], and one slope for all */
        static const double wv[3] = {0.25, -0.5, 2};
        ts_tensor *w = ts_tensor_f64(TS_SHAPE(3), wv, o);
        y = ts_prelu(x = ts_tensor_f64(TS_SHAPE(2, 3, 4), v, o), w);
        CHECK(rd(y, out, 24));
        for (int i = 0; i < 24; i++) {
            const double e = v[i] > 0 ? v[i] : wv[(i / 4) % 3] * v[i];
            CHECK(out[i] == e);
        }
        ts_tensor *in2[2] = {x, w};
        CHECK(ts_gradcheck(g_prelu, NULL, in2, 2, go));
        /* the weight's gradient: sum of g x where x <= 0 over its channel (g = 1), x at 0 too */
        double xz[6] = {-1, 0, 2, -3, 0.5, -0.25}, gw[3], gx[6];
        ts_tensor *x2 = ts_tensor_f64(TS_SHAPE(2, 3), xz, o);
        ts_tensor *w2 = ts_tensor_f64(TS_SHAPE(3), wv, o);
        ts_backward(ts_sum(ts_prelu(x2, w2)));
        CHECK(rd(ts_grad(w2), gw, 3) && rd(ts_grad(x2), gx, 6));
        CHECK(gw[0] == -4 && gw[1] == 0 && gw[2] == -0.25);
        CHECK(gx[0] == 0.25 && gx[1] == -0.5 && gx[2] == 1 && gx[3] == 0.25 && gx[4] == 1 &&
              gx[5] == 2);
        ts_tensor *w1 = ts_tensor_f64(TS_SHAPE(1), wv, o);
        in2[1] = w1;
        CHECK(ts_gradcheck(g_prelu, NULL, in2, 2, go));
        ts_tensor *s0 = ts_prelu(ts_full(TS_SHAPE(), -2, o), w1); /* 0-dim stays 0-dim */
        CHECK(s0 && ts_ndim(s0) == 0 && ts_item(s0) == -0.5);
        /* softmin over dim 1 of [4, 6] */
        y = ts_softmin(x = ts_tensor_f64(TS_SHAPE(4, 6), v, o), 1);
        CHECK(rd(y, out, 24));
        for (int i = 0; i < 4; i++) {
            double s = 0;
            for (int j = 0; j < 6; j++) s += exp(-v[i * 6 + j]);
            for (int j = 0; j < 6; j++) CHECK_NEAR(out[i * 6 + j], exp(-v[i * 6 + j]) / s, 4e-16);
        }
        int one = 1;
        CHECK(ts_gradcheck(g_softmin, &one, &x, 1, go));
        ts_scope_end();
        CHECK_OK();
    }
}

/* PyTorch's refusals */
static void test_errors(void) {
    ts_scope_begin();
    ts_tensor *x = ts_full(TS_SHAPE(2, 3), 1, (ts_opts){0});
    ts_tensor *xi = ts_full(TS_SHAPE(2), 1, (ts_opts){.dtype = TS_I64});
    ts_tensor *xb = ts_full(TS_SHAPE(2), 1, (ts_opts){.dtype = TS_BOOL});
    CHECK(ts_celu(x, 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "alpha cannot be 0 for CELU");
    CHECK(ts_hardtanh(x, 2, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "hardtanh: min_val cannot be greater than max_val");
    CHECK(ts_hardtanh(xb, -1, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "Bool inputs not supported for hardtanh");
    CHECK(ts_threshold(xb, 0, 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "not implemented for 'Bool'");
    CHECK(ts_softshrink(x, -1) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "softshrink: lambda must be in range [0, 3.40282e+38]");
    CHECK(ts_softshrink(x, NAN) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_tensor *(*const float_only[])(ts_tensor *) = {ts_selu, ts_logsigmoid, ts_mish,
                                                     ts_hardsigmoid, ts_hardswish};
    for (size_t i = 0; i < sizeof float_only / sizeof *float_only; i++) {
        CHECK(float_only[i](xi) == NULL);
        CHECK_ERR_HAS(TS_ERR_DTYPE, "not implemented for 'Long'");
    }
    CHECK(ts_elu(xi, 1) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_glu(ts_full(TS_SHAPE(), 1, (ts_opts){0}), 0) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "glu does not support scalars");
    CHECK(ts_glu(x, 2) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_glu(ts_full(TS_SHAPE(2, 4), 1, (ts_opts){.dtype = TS_I64}), 1) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "\"glu_cpu\" not implemented for 'Long'");
    CHECK(ts_prelu(x, ts_full(TS_SHAPE(2), 1, (ts_opts){0})) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "Found parameter numbers = 2 and channel size = 3.");
    CHECK(ts_prelu(x, ts_full(TS_SHAPE(3, 1), 1, (ts_opts){0})) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "scalar or 1D tensor, but got: ndim = 2");
    CHECK(ts_prelu(x, ts_full(TS_SHAPE(3), 1, (ts_opts){.dtype = TS_F64})) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "prelu: Type promoting not supported. Got Float and Double");
    CHECK(ts_prelu(ts_full(TS_SHAPE(3), 1, (ts_opts){0}), ts_full(TS_SHAPE(3), 1, (ts_opts){0})) ==
          NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "channel size = 1");
    CHECK(ts_elu(NULL, 1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
    if (ndev > 1) { /* a weight on another device */
        ts_scope_begin();
        ts_tensor *w = ts_full(TS_SHAPE(3), 1, (ts_opts){.device = devs[1]});
        CHECK(ts_prelu(ts_full(TS_SHAPE(2, 3), 1, (ts_opts){0}), w) == NULL);
        CHECK_ERR_HAS(TS_ERR_DEVICE, "prelu");
        ts_scope_end();
    }
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_values();
    test_grads();
    test_inplace();
    test_integers();
    test_compositions();
    test_errors();
    CHECK_OK();
    return ts_test_finish();
}
