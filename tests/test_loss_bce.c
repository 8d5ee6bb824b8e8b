/* test_loss_bce.c — ts_binary_cross_entropy (src/nn/loss_bce.c) on cpu and sim:0 in float64:
 * the loss against PyTorch's formula evaluated in double here (each log clamped at -100, the ends 0
 * and 1 included), the input's gradient (x - t) / max(x (1 - x), 1e-12) w finite at 0 and 1, the
 * reductions, gradcheck over input, target and weight, the errors, and no tensor left behind.
 * The backend's bce kernel (kern_bce.c): float32 and the half types (the bits of PyTorch's steps
 * in the dtype), strided operands, the domain test (input and target in [0, 1], NaN not, PyTorch's
 * messages; many threads), meta's composition, allocation failures. Which gradients the backward
 * computes: only those asked for (profiled). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_sweep.h"
#include "tessera/elementwise.h"
#include "tessera/profiler.h"
#include "tessera/views.h"
#include "ts_test.h"

#define N 8
static const double X_[N] = {0.0, 1.0, 1e-30, 0.5, 0.25, 0.9, 1e-3, 0.999};
static const double T_[N] = {1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.2, 0.7};
static const double W_[N] = {0.5, 1.0, 1.5, 2.0, 0.75, 1.25, 1.75, 3.0};

static ts_tensor *vec(const double *v, int64_t n, ts_device dev) {
    return ts_tensor_f64(TS_SHAPE(n), v, (ts_opts){.dtype = TS_F64, .device = dev});
}

static double ref_loss(double x, double t) {
    const double lx = fmax(log(x), -100), lq = fmax(log1p(-x), -100);
    return (t - 1) * lq - t * lx;
}

static void host(ts_tensor *t, double *out, int n) {
    CHECK(ts_copy_to_host(ts_to(t, ts_cpu()), out, (size_t)n * sizeof(double)) == TS_OK);
}

static void test_values_and_gradient(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x = vec(X_, N, dev), *t = vec(T_, N, dev), *w = vec(W_, N, dev);
    ts_set_requires_grad(x, true);
    ts_tensor *none =
        ts_binary_cross_entropy(x, t, (ts_loss_opts){.weight = w, .reduction = TS_REDUCTION_NONE});
    double got[N], sum = 0;
    host(none, got, N);
    for (int i = 0; i < N; i++) {
        const double want = ref_loss(X_[i], T_[i]) * W_[i];
        sum += want;
        CHECK_NEAR(got[i], want, 1e-14 * fabs(want) + 1e-300);
    }
    ts_tensor *mean = ts_binary_cross_entropy(x, t, (ts_loss_opts){.weight = w});
    CHECK_NEAR(ts_item(mean), sum / N, 1e-14 * fabs(sum / N));
    ts_backward(mean);
    double g[N];
    host(ts_grad(x), g, N);
    for (int i = 0; i < N; i++) {
        const double want = (X_[i] - T_[i]) / fmax((1 - X_[i]) * X_[i], 1e-12) * W_[i] / N;
        CHECK(isfinite(g[i]));
        CHECK_NEAR(g[i], want, 1e-13 * fabs(want));
    }
    CHECK_OK();
    ts_scope_end();
}

static ts_device g_dev;
static ts_tensor *f_bce(ts_tensor *const *in, int n, void *ctx) {
    (void)n, (void)ctx;
    return ts_binary_cross_entropy(in[0], in[1],
                                   (ts_loss_opts){.weight = in[2], .reduction = TS_REDUCTION_SUM});
}

static void test_gradcheck(ts_device dev) {
    ts_scope_begin();
    g_dev = dev;
    /* targets inside (0, 1): gradcheck moves them by its step, and a 1 + step is refused */
    const double xs[6] = {0.1, 0.35, 0.5, 0.62, 0.8, 0.93},
                 ts[6] = {0.99, 0.01, 0.3, 0.9, 0.02, 0.97};
    const double ws[3] = {0.5, 1.5, 2.0};
    ts_tensor *in[3] = {ts_reshape(vec(xs, 6, dev), TS_SHAPE(2, 3)),
                        ts_reshape(vec(ts, 6, dev), TS_SHAPE(2, 3)), vec(ws, 3, dev)};
    for (int i = 0; i < 3; i++) ts_set_requires_grad(in[i], true);
    const bool ok = ts_gradcheck(f_bce, NULL, in, 3, (ts_gradcheck_opts){0});
    printf("gradcheck binary_cross_entropy on %s: %s\n", ts_device_str(dev), ok ? "ok" : "FAILED");
    CHECK(ok);
    CHECK_OK();
    ts_scope_end();
}

static void test_errors(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x = vec(X_, N, dev), *t3 = vec(T_, 3, dev);
    /* integer operands: refused, not cast (PyTorch: "Found dtype Long but expected Float") */
    ts_tensor *ints = ts_to_dtype(vec(T_, N, dev), TS_I64);
    CHECK(ts_binary_cross_entropy(x, ints, (ts_loss_opts){0}) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "binary_cross_entropy: expected a floating point target");
    CHECK(ts_binary_cross_entropy(ints, x, (ts_loss_opts){0}) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "binary_cross_entropy: expected a floating point input");
    CHECK(ts_binary_cross_entropy(x, x, (ts_loss_opts){.weight = ints}) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "binary_cross_entropy: expected a floating point weight");
    CHECK(ts_binary_cross_entropy(NULL, t3, (ts_loss_opts){0}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "binary_cross_entropy: input is NULL");
    CHECK(ts_binary_cross_entropy(x, NULL, (ts_loss_opts){0}) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "binary_cross_entropy: target is NULL");
    CHECK(ts_binary_cross_entropy(x, t3, (ts_loss_opts){0}) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "binary_cross_entropy");
    CHECK(ts_binary_cross_entropy(x, vec(T_, N, dev), (ts_loss_opts){.weight = t3}) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "binary_cross_entropy");
    /* a weight of more dims than the input, even of the same count: PyTorch refuses it */
    ts_tensor *w2 = ts_reshape(vec(W_, N, dev), TS_SHAPE(1, N));
    CHECK(ts_binary_cross_entropy(x, vec(T_, N, dev), (ts_loss_opts){.weight = w2}) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "binary_cross_entropy: weight [1, 8] does not broadcast");
    CHECK(ts_binary_cross_entropy(x, vec(T_, N, dev), (ts_loss_opts){.reduction = 7}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
}

/* PyTorch's steps in the tensors' own dtype, each rounded (the composition the kernel replaced) */
static ts_tensor *composed(ts_tensor *x, ts_tensor *t) {
    ts_tensor *lx = ts_clamp_min(ts_log(x), -100), *lq = ts_clamp_min(ts_log1p(ts_neg(x)), -100);
    return ts_sub(ts_mul(ts_sub_scalar(t, 1), lq), ts_mul(t, lx));
}

/* float32, float16, bfloat16, dense and transposed, on 1032 pairs (X_, T_ and a spread over
 * [0, 1]): the bits of PyTorch's steps in the dtype (composed()), and each element against the
 * formula in double on the values as stored within the roundings: float32's logs and 4 operations
 * (8 units of 2^-24 on a sum of two non-negative terms), the half types' 6 roundings to the type
 * (6 units of 2^-11, 2^-8; float16's subnormal products add an absolute 2^-24 each) */
static void test_dtypes(ts_device dev) {
    enum { M = 1024 + N };
    double xv[M], tv[M];
    for (int i = 0; i < M; i++) {
        xv[i] = i < N ? X_[i] : (i - N + 0.5) / 1024;
        tv[i] = i < N ? T_[i] : fmod((i - N) * 0.6180339887498949, 1.0);
    }
    const ts_dtype dts[3] = {TS_F32, TS_F16, TS_BF16};
    const double rel[3] = {8 * 0x1p-24, 6 * 0x1p-11, 6 * 0x1p-8}, abs_[3] = {0, 4 * 0x1p-24, 0};
    for (int k = 0; k < 3; k++) {
        ts_scope_begin();
        ts_tensor *x = ts_to_dtype(vec(xv, M, dev), dts[k]),
                  *t = ts_to_dtype(vec(tv, M, dev), dts[k]);
        /* [2, M / 2] transposed: strides (1, M / 2), walked out of memory order */
        ts_tensor *xs = ts_transpose(ts_reshape(x, TS_SHAPE(2, M / 2)), 0, 1),
                  *ts = ts_transpose(ts_reshape(t, TS_SHAPE(2, M / 2)), 0, 1);
        ts_tensor *dense =
            ts_binary_cross_entropy(x, t, (ts_loss_opts){.reduction = TS_REDUCTION_NONE});
        ts_tensor *strided = ts_reshape(
            ts_contiguous(ts_transpose(
                ts_binary_cross_entropy(xs, ts, (ts_loss_opts){.reduction = TS_REDUCTION_NONE}), 0,
                1)),
            TS_SHAPE(M));
        /* the transposed input with a dense target: the operands' strides differ */
        ts_tensor *mixed =
            ts_reshape(ts_contiguous(ts_transpose(
                           ts_binary_cross_entropy(xs, ts_contiguous(ts),
                                                   (ts_loss_opts){.reduction = TS_REDUCTION_NONE}),
                           0, 1)),
                       TS_SHAPE(M));
        CHECK(dense && ts_dtype_of(dense) == dts[k] && strided && mixed);
        if (dense && strided && mixed) {
            double d[M], st[M], mx[M], c[M], xs64[M], ts64[M];
            host(ts_to_dtype(dense, TS_F64), d, M);
            host(ts_to_dtype(strided, TS_F64), st, M);
            host(ts_to_dtype(mixed, TS_F64), mx, M);
            host(ts_to_dtype(composed(x, t), TS_F64), c, M);
            host(ts_to_dtype(x, TS_F64), xs64, M);
            host(ts_to_dtype(t, TS_F64), ts64, M);
            int same = 0;
            for (int i = 0; i < M; i++) {
                const double want = ref_loss(xs64[i], ts64[i]);
                same += d[i] == c[i] && st[i] == c[i] && mx[i] == c[i];
                CHECK_NEAR(d[i], want, rel[k] * want + abs_[k]);
            }
            CHECK_EQ(same, M);
        }
        CHECK_OK();
        ts_scope_end();
    }
}

/* x[i] = v, every other input 0.5 and target 1 (or the target's element v): n elements, f64 or f32
 */
static ts_tensor *filled(int64_t n, int64_t i, double v, double fill, ts_dtype dt, ts_device dev) {
    double *d = malloc((size_t)n * sizeof *d);
    for (int64_t j = 0; j < n; j++) d[j] = j == i ? v : fill;
    ts_tensor *a = ts_tensor_f64(TS_SHAPE(n), d, (ts_opts){.dtype = TS_F64, .device = dev});
    free(d);
    return ts_to_dtype(a, dt);
}

/* PyTorch's domain test: an input or target outside [0, 1] (NaN included) is refused, TS_ERR_ARG
 * with its message, the input's first; the ends and -0 are inside. 100003 elements run on several
 * threads: the bad one first (the first thread's first chunk) or last (the last thread's). */
static void test_domain(ts_device dev) {
    const double bad[4] = {1.5, -0.25, NAN, INFINITY};
    const int64_t sizes[2] = {N, 100003};
    const ts_dtype dts[3] = {TS_F64, TS_F32, TS_F16};
    for (int z = 0; z < 2; z++) {
        for (int k = 0; k < 3; k++) {
            const int64_t n = sizes[z];
            for (int b = 0; b < 8; b++) { /* each bad value first, then last */
                const int64_t pos = b < 4 ? 0 : n - 1;
                ts_scope_begin();
                ts_tensor *x = filled(n, pos, bad[b % 4], 0.5, dts[k], dev),
                          *t = filled(n, pos, bad[b % 4], 1, dts[k], dev);
                ts_tensor *ok_x = filled(n, pos, 1, 0.5, dts[k], dev),
                          *ok_t = filled(n, pos, -0.0, 1, dts[k], dev);
                CHECK(ts_binary_cross_entropy(x, ok_t, (ts_loss_opts){0}) == NULL);
                CHECK_ERR_HAS(TS_ERR_ARG, "binary_cross_entropy: all elements of input should be "
                                          "between 0 and 1");
                CHECK(ts_binary_cross_entropy(ok_x, t, (ts_loss_opts){0}) == NULL);
                CHECK_ERR_HAS(TS_ERR_ARG, "binary_cross_entropy: all elements of target should be "
                                          "between 0 and 1");
                CHECK(ts_binary_cross_entropy(x, t, (ts_loss_opts){0}) == NULL);
                CHECK_ERR_HAS(TS_ERR_ARG, "all elements of input should");
                /* transposed views: the kernel's strided loop tests them too */
                ts_tensor *xt = ts_transpose(ts_reshape(x, TS_SHAPE(1, n)), 0, 1),
                          *tt = ts_transpose(ts_reshape(t, TS_SHAPE(1, n)), 0, 1),
                          *okt = ts_transpose(ts_reshape(ok_t, TS_SHAPE(1, n)), 0, 1),
                          *okx = ts_transpose(ts_reshape(ok_x, TS_SHAPE(1, n)), 0, 1);
                CHECK(ts_binary_cross_entropy(ts_expand(xt, TS_SHAPE(n, 2)),
                                              ts_expand(okt, TS_SHAPE(n, 2)),
                                              (ts_loss_opts){0}) == NULL);
                CHECK_ERR_HAS(TS_ERR_ARG, "all elements of input should");
                CHECK(ts_binary_cross_entropy(ts_expand(okx, TS_SHAPE(n, 2)),
                                              ts_expand(tt, TS_SHAPE(n, 2)),
                                              (ts_loss_opts){0}) == NULL);
                CHECK_ERR_HAS(TS_ERR_ARG, "all elements of target should");
                /* the ends: x = 1 with t = 1 and x = 0.5 with t = -0: (the mean of) finite losses
                 */
                ts_tensor *y = ts_binary_cross_entropy(ok_x, ok_t, (ts_loss_opts){0});
                CHECK(y && isfinite(ts_item(y)));
                CHECK_OK();
                ts_scope_end();
            }
        }
    }
    /* an empty input tests nothing and gives mean NaN, as PyTorch */
    ts_scope_begin();
    ts_tensor *e = ts_zeros(TS_SHAPE(0), (ts_opts){.dtype = TS_F64, .device = dev});
    ts_tensor *y = ts_binary_cross_entropy(e, e, (ts_loss_opts){0});
    CHECK(y && isnan(ts_item(y)));
    CHECK_OK();
    ts_scope_end();
}

/* A saved operand changed in place after the forward: backward refuses (TS_ERR_STATE, PyTorch's
 * "modified by an inplace operation") and leaves no gradient, also when only the weight changed */
static void test_saved_modified(ts_device dev) {
    for (int which = 0; which < 2; which++) {
        ts_scope_begin();
        ts_tensor *x = vec(X_ + 2, 4, dev), *t = vec(T_ + 2, 4, dev), *w = vec(W_, 4, dev);
        ts_set_requires_grad(x, true);
        ts_tensor *y = ts_binary_cross_entropy(x, t, (ts_loss_opts){.weight = w});
        CHECK(ts_mul_scalar_(which == 0 ? w : t, 2) != NULL);
        ts_backward(y);
        CHECK_ERR_HAS(TS_ERR_STATE, "inplace");
        CHECK(ts_grad(x) == NULL);
        ts_scope_end();
    }
}

/* meta: no values, so no kernel and no test; the composition gives the shapes */
static void test_meta(void) {
    ts_scope_begin();
    const ts_opts o = {.dtype = TS_F32, .device = ts_meta()};
    ts_tensor *y = ts_binary_cross_entropy(ts_zeros(TS_SHAPE(3, 5), o), ts_zeros(TS_SHAPE(3, 5), o),
                                           (ts_loss_opts){.reduction = TS_REDUCTION_NONE});
    CHECK(y && ts_shape_of(y).ndim == 2 && ts_shape_of(y).dims[0] == 3 &&
          ts_shape_of(y).dims[1] == 5);
    CHECK(y && ts_device_of(y).type == TS_META);
    CHECK_OK();
    ts_scope_end();
}

/* the ops named `name` that ran during backward */
static int count_ops(const ts_profile *p, const char *name) {
    size_t n = 0;
    const ts_profile_event *ev = ts_profile_events(p, &n);
    int c = 0;
    for (size_t i = 0; i < n; i++) c += ev[i].kind == TS_PROF_OP && strcmp(ev[i].name, name) == 0;
    return c;
}

/* Without a weight, input and target each asked for alone: the gradient against the formulas
 * (dx = (x - t) / max(x (1 - x), 1e-12) / n, dt = (log1p(-x) - log x) / n), and the other's steps
 * not run: dt's logs for dx alone, dx's division for dt alone (the profiler's op events). */
static void test_unweighted_backward(ts_device dev) {
    const double xs[6] = {0.1, 0.35, 0.5, 0.62, 0.8, 0.93}, tv[6] = {1, 0, 0.3, 0.9, 0, 1};
    for (int which = 0; which < 2; which++) {
        ts_scope_begin();
        ts_tensor *x = vec(xs, 6, dev), *t = vec(tv, 6, dev);
        ts_tensor *leaf = which == 0 ? x : t;
        ts_set_requires_grad(leaf, true);
        ts_tensor *y = ts_binary_cross_entropy(x, t, (ts_loss_opts){0});
        CHECK(ts_profiler_start(NULL) == TS_OK);
        ts_backward(y);
        CHECK(ts_profiler_stop() == TS_OK);
        ts_profile *p = ts_profiler_take();
        CHECK(p != NULL);
        double g[6];
        host(ts_grad(leaf), g, 6);
        for (int i = 0; i < 6; i++) {
            const double want = which == 0 ? (xs[i] - tv[i]) / fmax(xs[i] * (1 - xs[i]), 1e-12) / 6
                                           : (log1p(-xs[i]) - log(xs[i])) / 6;
            CHECK_NEAR(g[i], want, 1e-14 * fabs(want));
        }
        if (p) {
            CHECK_EQ(count_ops(p, "log") + count_ops(p, "log1p"), which == 0 ? 0 : 2);
            CHECK_EQ(count_ops(p, "div"), which == 0 ? 1 : 0);
        }
        ts_profile_free(p);
        CHECK_OK();
        ts_scope_end();
    }
}

/* Allocation failures (fault_sweep.h): a float32 input with a float64 target (the kernel's
 * operands cast first) and a weight, forward and backward; every failure reported, nothing leaked
 */
typedef struct sweep_st {
    ts_tensor *x, *t, *w, *loss;
} sweep_st;

static const float SX_[4] = {0.1f, 0.4f, 0.7f, 0.95f};
static const double ST_[4] = {1, 0, 0.5, 0.25}, SW_[4] = {1, 2, 3, 4};

static void *sweep_setup(void) {
    sweep_st *s = calloc(1, sizeof *s);
    s->x = ts_tensor_f32(TS_SHAPE(4), SX_, (ts_opts){.dtype = TS_F32, .requires_grad = true});
    s->t = ts_tensor_f64(TS_SHAPE(4), ST_, (ts_opts){.dtype = TS_F64});
    s->w = ts_tensor_f64(TS_SHAPE(4), SW_, (ts_opts){.dtype = TS_F64});
    return s;
}

static bool sweep_run(void *p) {
    sweep_st *s = p;
    ts_set_grad(s->x, NULL);
    ts_release(s->loss);
    s->loss = NULL;
    ts_scope_begin();
    ts_tensor *y = ts_binary_cross_entropy(s->x, s->t, (ts_loss_opts){.weight = s->w});
    if (y) ts_backward(y);
    s->loss = ts_retain(y);
    ts_scope_end();
    return y && ts_error() == TS_OK;
}

static void sweep_check(void *p, bool ok) {
    sweep_st *s = p;
    if (!ok) return;
    double want = 0; /* the mean in float64, the float32 input's values promoted */
    for (int i = 0; i < 4; i++) want += ref_loss((double)SX_[i], ST_[i]) * SW_[i] / 4;
    CHECK(s->loss && fabs(ts_item(s->loss) - want) <= 1e-14 * want);
    CHECK(ts_grad(s->x) != NULL);
}

static void sweep_teardown(void *p) {
    sweep_st *s = p;
    ts_release(s->x), ts_release(s->t), ts_release(s->w), ts_release(s->loss);
    free(s);
}

static void test_fault_sweep(void) {
    ts_sweep_case c = {.name = "binary_cross_entropy fwd+bwd",
                       .setup = sweep_setup,
                       .run = sweep_run,
                       .teardown = sweep_teardown,
                       .check = sweep_check,
                       .any_state_on_error = true};
    ts_fault_sweep(&c, 2000);
}

int main(void) {
    ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    ts_mem_stats before, after;
    ts_memory_stats(ts_sim(0), &before);
    for (int d = 0; d < 2; d++) {
        test_values_and_gradient(devs[d]);
        test_gradcheck(devs[d]);
        test_errors(devs[d]);
        test_dtypes(devs[d]);
        test_domain(devs[d]);
        test_unweighted_backward(devs[d]);
        test_saved_modified(devs[d]);
    }
    test_meta();
    test_fault_sweep();
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    return ts_test_finish();
}
