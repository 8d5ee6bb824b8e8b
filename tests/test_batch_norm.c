/* test_batch_norm.c — batch_norm's fused training kernels (cpu and sim run the same CPU kernels,
 * under every vector ISA the host has) against a reference computed here in long double: the
 * output, the gradients of input, weight and bias, and the running statistics, for inputs
 * [N, C], [N, C, L] and [N, C, H, W] (one channel; one sample with spatial dims; 4 x 4 and odd
 * sizes), with and without weight and bias, a strided input, channels far from zero, constant
 * channels and tiny variances; tolerances from the arithmetic (unit roundoff times the operations
 * an element goes through, and the double sums' growth); the autograd node; the same bits with 1,
 * 2 and 3 threads and under each ISA; no tensor of the input's size kept for backward (memory
 * statistics); float16 and bfloat16 inputs, with parameters of their dtype or float32 (autocast's
 * form; the kernels compute in float32 and round the half outputs once); the composition where
 * the kernels decline (other mixed dtypes); allocation failures (fault_sweep.h). On cuda:0
 * (TS_REQUIRE_CUDA=1) the same cases run cuda_batch_norm.cu's kernels, shapes that reach each of
 * their paths: 1, 3, 64 and 1000 channels, hw = 1, n * hw = 2 and over 10^6 (many blocks a
 * channel).
 * test_batch_norm_bf16.c adds the half kernels' bits, evaluation mode and autocast. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"
#include "bn_ref.h"
#include "fault_sweep.h"
#include "tol_check.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

/* ------------------------------------------------------------------ inputs */
static uint64_t lcg = 0x9E3779B97F4A7C15ULL;
static double uniform(double lo, double hi) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

enum { X_RANDOM, X_FAR, X_CONSTANT, X_TINY_VAR };

typedef struct bn_case {
    int ndim;           /* 2, 3 or 4 */
    int64_t n, c, h, w; /* [n, c], [n, c, h], [n, c, h, w] */
    bool weight, bias, running, strided;
    double eps, momentum; /* 0: the defaults */
    int xk;
} bn_case;

/* the momentum ts_batch_norm is given: PyTorch's default 0.1 for a 0 in the table */
static double momentum_of(const bn_case *k) { return k->momentum ? k->momentum : 0.1; }

static int64_t hw_of(const bn_case *k) {
    return (k->ndim > 2 ? k->h : 1) * (k->ndim > 3 ? k->w : 1);
}

/* host data in [n, c, hw] order, in double, already rounded to the dtype */
static ts_bn_data make_data(const bn_case *k, ts_dtype dt) {
    const int64_t hw = hw_of(k), tot = k->n * k->c * hw;
    ts_bn_data d = {malloc(sizeof(double) * tot),  malloc(sizeof(double) * tot),
                    malloc(sizeof(double) * k->c), malloc(sizeof(double) * k->c),
                    malloc(sizeof(double) * k->c), malloc(sizeof(double) * k->c)};
    for (int64_t c = 0; c < k->c; c++) {
        const double off = k->xk == X_FAR ? 100.0 * (double)(c % 5 + 1) : uniform(-0.5, 0.5);
        const double sc = k->xk == X_TINY_VAR ? 1e-4 : uniform(0.25, 3.0);
        for (int64_t i = 0; i < k->n; i++)
            for (int64_t j = 0; j < hw; j++) {
                const int64_t at = (i * k->c + c) * hw + j;
                d.x[at] =
                    ts_test_round_to(dt, k->xk == X_CONSTANT ? off : off + sc * uniform(-1, 1));
                d.dy[at] = ts_test_round_to(dt, uniform(-1, 1));
            }
        d.w[c] = ts_test_round_to(dt, uniform(0.5, 2));
        d.b[c] = ts_test_round_to(dt, uniform(-1, 1));
        d.rm[c] = ts_test_round_to(dt, uniform(-1, 1));
        d.rv[c] = ts_test_round_to(dt, uniform(0.5, 2));
    }
    return d;
}

/* ------------------------------------------------------------------ the reference */
/* bn_ref.h's, the kernels' double sums in 16 lanes of at most n * ceil(hw / 16) terms each */
static ts_bn_ref reference(const bn_case *k, const ts_bn_data *d, ts_dtype dt, double mom) {
    const int64_t hw = hw_of(k);
    return ts_bn_reference(d, k->n, k->c, hw, k->weight, k->bias, k->eps ? k->eps : 1e-5, mom,
                           (double)(k->n * ((hw + 15) / 16)) + 8, dt);
}

/* ------------------------------------------------------------------ the cases */
static ts_shape shape_of(const bn_case *k) {
    return k->ndim == 2   ? TS_SHAPE(k->n, k->c)
           : k->ndim == 3 ? TS_SHAPE(k->n, k->c, k->h)
                          : TS_SHAPE(k->n, k->c, k->h, k->w);
}

/* x of the case's shape from [n, c, hw] data; strided: a [c, n, hw] tensor transposed */
static ts_tensor *make_x(const bn_case *k, const double *x, ts_dtype dt, ts_device dev) {
    const int64_t hw = hw_of(k);
    ts_opts o = {.dtype = dt, .device = dev};
    ts_tensor *t = ts_tensor_f64(TS_SHAPE(k->n, k->c, hw), x, o);
    if (k->strided) t = ts_transpose(ts_contiguous(ts_transpose(t, 0, 1)), 0, 1);
    t = ts_detach(ts_reshape(t, shape_of(k)));
    ts_set_requires_grad(t, true);
    return t;
}

static ts_tensor *param(const double *p, int64_t c, ts_dtype dt, ts_device dev, bool grad) {
    ts_tensor *t = ts_tensor_f64(TS_SHAPE(c), p, (ts_opts){.dtype = dt, .device = dev});
    ts_set_requires_grad(t, grad);
    return t;
}

/* One case with input x of dtype dt and the parameters and running statistics of dtype pt (dt,
 * or float32 with a half dt: autocast's mixed batch norm). */
/* frozen: momentum 0 taken literally (PyTorch's): the running statistics must not move */
static void run_case(const bn_case *k, ts_dtype dt, ts_dtype pt, ts_device dev, bool frozen) {
    const double mom = frozen ? 0.0 : momentum_of(k);
    /* eps 1e-12 over a tiny variance: dx reaches 5.6e5, beyond float16's 65504 (inf is its
     * rounding) */
    if (dt == TS_F16 && k->xk == X_TINY_VAR && k->eps < 1e-6) return;
    static const char *kinds[] = {"random", "far from 0", "constant channels", "tiny variance"};
    char label[200];
    const ts_shape s = shape_of(k);
    char dims[64];
    snprintf(dims, sizeof dims, "%lld, %lld", (long long)k->n, (long long)k->c);
    for (int i = 2; i < s.ndim; i++)
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), ", %lld", (long long)s.dims[i]);
    snprintf(label, sizeof label, "[%s%s%s%s%s, eps %g, %s, %s%s%s, %s]", dims,
             k->weight ? ", weight" : "", k->bias ? ", bias" : "", k->running ? ", running" : "",
             k->strided ? ", strided" : "", k->eps, kinds[k->xk], ts_dtype_name(dt),
             pt != dt ? " with parameters " : "", pt != dt ? ts_dtype_name(pt) : "",
             ts_device_str(dev));
    ts_bn_data d = make_data(k, dt);
    /* halves: the float32 kernels' bounds, widened by the rounding to the half dtype of what is
     * of that dtype; half running statistics are updated in the half dtype (the update's
     * roundings in its unit) */
    ts_bn_ref r = reference(k, &d, ts_test_is_half(dt) ? TS_F32 : dt, mom);
    const int64_t tot = k->n * k->c * hw_of(k);
    if (ts_test_is_half(dt)) {
        ts_bn_ref rh = reference(k, &d, pt, mom);
        double *t;
        t = r.trm, r.trm = rh.trm, rh.trm = t;
        t = r.trv, r.trv = rh.trv, rh.trv = t;
        ts_bn_ref_free(&rh);
        ts_test_widen_for_half(dt, r.y, r.ty, tot);
        ts_test_widen_for_half(dt, r.dx, r.tdx, tot);
        ts_test_widen_for_half(pt, r.dw, r.tdw, k->c);
        ts_test_widen_for_half(pt, r.db, r.tdb, k->c);
    }
    ts_scope_begin();
    ts_tensor *x = make_x(k, d.x, dt, dev);
    ts_tensor *w = k->weight ? param(d.w, k->c, pt, dev, true) : NULL;
    ts_tensor *b = k->bias ? param(d.b, k->c, pt, dev, true) : NULL;
    ts_tensor *rm = k->running ? param(d.rm, k->c, pt, dev, false) : NULL;
    ts_tensor *rv = k->running ? param(d.rv, k->c, pt, dev, false) : NULL;
    ts_tensor *y = ts_batch_norm(x, rm, rv, w, b, true, mom, k->eps);
    CHECK_OK();
    CHECK(y && ts_dtype_of(y) == dt && ts_shape_of(y).ndim == s.ndim);
    /* every backend's fused kernels (cpu, sim, cuda); a half input runs as it is, its
     * parameters float32 (half ones through their casts) */
    CHECK_STREQ(y ? ts_grad_fn_name(y) : NULL, "NativeBatchNormBackward0");
    CHECK_TOL(label, "y", ts_reshape(y, TS_SHAPE(tot)), r.y, r.ty, tot);
    if (k->running) {
        CHECK_TOL(label, "running_mean", rm, r.rm, r.trm, k->c);
        CHECK_TOL(label, "running_var", rv, r.rv, r.trv, k->c);
        if (frozen) { /* (1 - 0) running + 0 batch: the very same values */
            CHECK(ts_item(ts_sum(ts_ne(rm, param(d.rm, k->c, pt, dev, false)))) == 0);
            CHECK(ts_item(ts_sum(ts_ne(rv, param(d.rv, k->c, pt, dev, false)))) == 0);
        }
    }
    ts_tensor *dy = ts_tensor_f64(TS_SHAPE(tot), d.dy, (ts_opts){.dtype = dt, .device = dev});
    ts_backward_with(y, ts_reshape(dy, s));
    CHECK_OK();
    /* x's gradient in [n, c, hw] order whatever its layout */
    CHECK_TOL(label, "dx", ts_reshape(ts_contiguous(ts_grad(x)), TS_SHAPE(tot)), r.dx, r.tdx, tot);
    if (w) CHECK_TOL(label, "dweight", ts_grad(w), r.dw, r.tdw, k->c);
    if (b) CHECK_TOL(label, "dbias", ts_grad(b), r.db, r.tdb, k->c);
    ts_scope_end();
    ts_bn_ref_free(&r);
    ts_bn_data_free(&d);
}

static void test_against_reference(void) {
    /* the halves: their kernels read them in float32 chunks */
    static const ts_dtype dts[] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    /* ndim, n, c, h, w, weight, bias, running, strided, eps, momentum, kind */
    static const bn_case cases[] = {
        {2, 8, 3, 0, 0, true, true, true, false, 0, 0, X_RANDOM}, /* [N, C] */
        {2, 200, 17, 0, 0, true, true, true, false, 0, 0.3, X_RANDOM},
        {2, 2, 5, 0, 0, false, false, true, false, 0, 0, X_RANDOM},   /* two samples */
        {3, 4, 6, 33, 0, true, true, true, false, 0, 0, X_RANDOM},    /* [N, C, L] */
        {3, 1, 3, 7, 0, true, false, true, false, 1e-3, 0, X_RANDOM}, /* one sample */
        {4, 4, 1, 20, 20, true, true, true, false, 0, 0, X_RANDOM},   /* one channel */
        {4, 1, 4, 5, 3, false, true, false, false, 0, 0, X_RANDOM},   /* one sample */
        {4, 16, 32, 4, 4, true, true, true, false, 0, 0, X_RANDOM},   /* 4 x 4: groups */
        {4, 8, 70, 3, 3, true, true, true, false, 0, 0, X_RANDOM},    /* partial groups */
        {4, 6, 8, 17, 19, false, false, false, false, 0, 0, X_RANDOM},
        {4, 5, 6, 8, 8, true, true, true, true, 0, 0, X_RANDOM}, /* strided */
        {4, 4, 10, 9, 9, true, true, true, false, 0, 0, X_FAR},
        {4, 3, 5, 4, 4, true, true, true, false, 0, 0, X_CONSTANT},
        {4, 3, 5, 6, 6, true, true, true, false, 1e-3, 0, X_TINY_VAR}, /* eps matters */
        {4, 3, 5, 6, 6, true, true, true, false, 1e-12, 0, X_TINY_VAR},
        {4, 64, 8, 16, 16, true, true, true, false, 0, 0, X_RANDOM}, /* threads */
        /* the CUDA kernels' paths: [N, C] (hw = 1) takes the rows kernels; NCHW chunks of 4096
         * positions of a channel, at most 1024 of them; up to 32 channels a block in rows */
        {2, 2, 1000, 0, 0, true, true, true, false, 0, 0, X_RANDOM}, /* n * hw = 2 */
        {3, 2, 1000, 3, 0, true, true, true, false, 0, 0, X_FAR},    /* 1000 short channels */
        {4, 4, 64, 40, 40, true, true, true, false, 0, 0, X_FAR},    /* 2 chunks a channel */
        {4, 2, 1, 1024, 512, true, true, true, false, 0, 0, X_FAR},  /* 1M: 256 chunks */
        {2, 1048576, 3, 0, 0, true, true, true, false, 0, 0, X_FAR}, /* rows: 1024 chunks */
    };
    for (int di = 0; di < ndev; di++)
        for (int t = 0; t < 4; t++)
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                run_case(&cases[i], dts[t], dts[t], devs[di], false);
                /* a half input with float32 parameters and statistics (autocast's) */
                if (ts_test_is_half(dts[t])) run_case(&cases[i], dts[t], TS_F32, devs[di], false);
            }
    /* momentum 0 (frozen statistics): [N, C], [N, C, L] and [N, C, H, W] far from zero */
    for (int di = 0; di < ndev; di++)
        for (int t = 0; t < 4; t++)
            for (size_t i = 0; i < 4; i++)
                run_case(&cases[(size_t[]){0, 3, 11, 15}[i]], dts[t], dts[t], devs[di], true);
}

/* ------------------------------------------------------------------ threads */
/* The same bits with 1, 2 and 3 threads: each channel's sums run in one order, whichever task
 * holds it. In float64 too, where another order of the double sums would show in the last bits. */
static void test_thread_independence(void) {
    enum { N = 16, C = 24, HW = 100 };
    static double res[3][4][N * C * HW];
    const int saved = ts_get_num_threads();
    for (int k = 0; k < 2; k++) {
        const ts_dtype dt = k ? TS_F64 : TS_F32;
        ts_scope_begin();
        ts_manual_seed(5);
        ts_opts o = {.dtype = dt, .requires_grad = true};
        ts_tensor *x = ts_randn(TS_SHAPE(N, C, HW), o), *w = ts_randn(TS_SHAPE(C), o);
        ts_tensor *b = ts_randn(TS_SHAPE(C), o),
                  *g = ts_randn(TS_SHAPE(N, C, HW), (ts_opts){.dtype = dt});
        for (int t = 0; t < 3; t++) {
            ts_set_num_threads(t + 1);
            ts_tensor *y = ts_batch_norm(x, NULL, NULL, w, b, true, 0, 0);
            ts_backward_with(y, g);
            ts_tensor *out[4] = {y, ts_grad(x), ts_grad(w), ts_grad(b)};
            for (int i = 0; i < 4; i++)
                CHECK(out[i] && ts_copy_to_host(out[i], res[t][i], ts_nbytes(out[i])) == TS_OK);
            ts_set_grad(x, NULL), ts_set_grad(w, NULL), ts_set_grad(b, NULL);
        }
        const size_t es = k ? sizeof(double) : sizeof(float);
        for (int t = 1; t < 3; t++)
            for (int i = 0; i < 4; i++)
                CHECK(!memcmp(res[0][i], res[t][i], (size_t)(i < 2 ? N * C * HW : C) * es));
        ts_scope_end();
    }
    ts_set_num_threads(saved);
}

/* ------------------------------------------------------------------ vector ISAs */
/* Every vector ISA this CPU has gives the portable variant's bits, forward and backward, on
 * segments with and without a partial last vector. */
static void test_isa_variants(void) {
    static const int64_t shapes[][3] = {{8, 37, 49}, {5, 20, 16}, {64, 3, 1}, {3, 2, 1025}};
    for (int k = 0; k < 2; k++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const ts_dtype dt = k ? TS_F64 : TS_F32;
            const size_t es = k ? sizeof(double) : sizeof(float);
            const int64_t N = shapes[s][0], C = shapes[s][1], HW = shapes[s][2], T = N * C * HW;
            char *in = malloc(es * (2 * T + 2 * C)), *out[TS_ISA_COUNT];
            const size_t out_bytes = es * (2 * T + 6 * C);
            for (int64_t i = 0; i < 2 * T + 2 * C; i++) {
                const double v = uniform(-2, 2) + (i % 7 == 0 ? 30 : 0);
                if (k)
                    memcpy(in + i * es, &v, es);
                else {
                    const float f = (float)v;
                    memcpy(in + i * es, &f, es);
                }
            }
            ts_batch_norm_args a = {.n = N, .c = C, .hw = HW, .eps = 1e-5};
            a.x = (ts_kview){.data = in, .dtype = dt};
            a.dy = (ts_kview){.data = in + es * T, .dtype = dt};
            a.weight = (ts_kview){.data = in + es * 2 * T, .dtype = dt};
            a.bias = (ts_kview){.data = in + es * (2 * T + C), .dtype = dt};
            for (int isa = 0; isa < TS_ISA_COUNT; isa++) {
                char *o = out[isa] = calloc(1, out_bytes);
                ts_kview *outs[] = {&a.y, &a.dx, &a.mean, &a.invstd, &a.var, &a.dweight, &a.dbias};
                const int64_t at[] = {
                    0, T, 2 * T, 2 * T + C, 2 * T + 2 * C, 2 * T + 3 * C, 2 * T + 4 * C};
                for (int i = 0; i < 7; i++)
                    *outs[i] = (ts_kview){.data = o + es * at[i], .dtype = dt};
                const bool have = tsi_cpu_batch_norm_isa((ts_cpu_isa)isa, &a, false) &&
                                  tsi_cpu_batch_norm_isa((ts_cpu_isa)isa, &a, true);
                if (!have) {
                    free(o), out[isa] = NULL;
                    continue;
                }
                if (isa > 0) {
                    const bool same = !memcmp(out[0], o, out_bytes);
                    ts_test_record(same);
                    if (!same)
                        ts_test_failf(__FILE__, __LINE__,
                                      "%s [%lld, %lld, %lld]: isa %s differs from generic",
                                      ts_dtype_name(dt), (long long)N, (long long)C, (long long)HW,
                                      tsi_cpu_isa_name((ts_cpu_isa)isa));
                }
            }
            for (int isa = 0; isa < TS_ISA_COUNT; isa++) free(out[isa]);
            free(in);
        }
}

/* ------------------------------------------------------------------ memory */
/* Forward and backward on [32, 16, 32, 32] float32 (2 MiB): beyond the output, the three
 * gradients and O(C) statistics, the extra peak stays under a quarter of the input's size:
 * nothing of the input's size is saved or made in between (the composition kept several). */
static void test_memory(void) {
    const int64_t N = 32, C = 16, HW = 32 * 32;
    ts_scope_begin();
    ts_manual_seed(6);
    ts_tensor *x = ts_randn(TS_SHAPE(N, C, 32, 32), (ts_opts){.requires_grad = true});
    ts_tensor *w = ts_randn(TS_SHAPE(C), (ts_opts){.requires_grad = true});
    ts_tensor *b = ts_randn(TS_SHAPE(C), (ts_opts){.requires_grad = true});
    ts_tensor *rm = ts_zeros(TS_SHAPE(C), (ts_opts){0}), *rv = ts_ones(TS_SHAPE(C), (ts_opts){0});
    ts_tensor *g = ts_randn(TS_SHAPE(N, C, 32, 32), (ts_opts){0});
    ts_mem_stats before, after;
    CHECK(ts_memory_stats(ts_cpu(), &before) == TS_OK);
    CHECK(ts_memory_reset_peak(ts_cpu()) == TS_OK);
    ts_tensor *y = ts_batch_norm(x, rm, rv, w, b, true, 0.1, 0);
    ts_backward_with(y, g);
    CHECK_OK();
    CHECK(ts_memory_stats(ts_cpu(), &after) == TS_OK);
    const double full = (double)(N * C * HW * 4);
    const double extra = (double)after.peak_allocated - (double)before.allocated;
    /* y and dx; dweight, dbias, mean, invstd, var and the running statistics' temporaries, each
     * rounded up to 512 bytes */
    const double need = 2 * full + 16 * 512;
    const double limit = need + full / 4;
    printf("batch_norm [32, 16, 32, 32] forward + backward: %.0f KiB extra peak (outputs and "
           "gradients %.0f KiB, limit %.0f KiB)\n",
           extra / 1024, need / 1024, limit / 1024);
    CHECK(extra <= limit);
    CHECK(ts_grad(x) && ts_grad(w) && ts_grad(b));
    ts_scope_end();
}

/* ------------------------------------------------------------------ the composition's cases */
/* Where the kernels decline (float64 parameters with a float32 input) the composition runs; a
 * half input with float32 parameters takes the kernels, also under autocast (which keeps the
 * input's dtype). */
static void test_fallbacks(void) {
    ts_scope_begin();
    ts_manual_seed(7);
    ts_tensor *x = ts_randn(TS_SHAPE(6, 4, 5), (ts_opts){0});
    ts_tensor *w = ts_randn(TS_SHAPE(4), (ts_opts){0}), *b = ts_randn(TS_SHAPE(4), (ts_opts){0});
    ts_tensor *want = ts_batch_norm(ts_to_dtype(x, TS_F64), NULL, NULL, ts_to_dtype(w, TS_F64),
                                    ts_to_dtype(b, TS_F64), true, 0, 0);
    const double big = ts_item(ts_max(ts_abs(want)));

    /* a float16 input with float32 parameters: the kernels, a float16 output */
    ts_tensor *xh = ts_to_dtype(x, TS_F16);
    ts_set_requires_grad(xh, true);
    ts_tensor *yh = ts_batch_norm(xh, NULL, NULL, w, b, true, 0, 0);
    CHECK_OK();
    CHECK(yh && ts_dtype_of(yh) == TS_F16);
    CHECK_STREQ(yh ? ts_grad_fn_name(yh) : NULL, "NativeBatchNormBackward0");
    CHECK(yh && ts_item(ts_max(ts_abs(ts_sub(ts_to_dtype(yh, TS_F64), want)))) < 1e-2 * big);

    ts_tensor *xm = ts_detach(x);
    ts_set_requires_grad(xm, true);
    ts_tensor *ym = ts_batch_norm(xm, NULL, NULL, ts_to_dtype(w, TS_F64), b, true, 0, 0);
    CHECK_OK();
    CHECK(ym && strcmp(ts_grad_fn_name(ym), "NativeBatchNormBackward0") != 0);
    CHECK(ym && ts_item(ts_max(ts_abs(ts_sub(ts_to_dtype(ym, TS_F64), want)))) < 1e-5 * big);

    ts_tensor *xb = ts_to_dtype(x, TS_BF16);
    ts_set_requires_grad(xb, true);
    ts_autocast_begin(TS_CPU, TS_BF16);
    ts_tensor *ya = ts_batch_norm(xb, NULL, NULL, w, b, true, 0, 0);
    ts_autocast_end();
    CHECK_OK();
    CHECK(ya && ts_dtype_of(ya) == TS_BF16);
    CHECK_STREQ(ya ? ts_grad_fn_name(ya) : NULL, "NativeBatchNormBackward0");

    /* no graph wanted: the kernels' output, no node */
    ts_tensor *yn = ts_batch_norm(x, NULL, NULL, w, b, true, 0, 0);
    CHECK(yn && ts_grad_fn_name(yn) == NULL);
    CHECK(yn && ts_item(ts_max(ts_abs(ts_sub(ts_to_dtype(yn, TS_F64), want)))) < 1e-5 * big);
    ts_scope_end();
}

/* The node keeps the input: modifying it in place after the forward makes backward refuse. */
static void test_inplace_after_forward(void) {
    ts_scope_begin();
    ts_tensor *leaf = ts_randn(TS_SHAPE(3, 4, 8), (ts_opts){.requires_grad = true});
    ts_tensor *x = ts_mul_scalar(leaf, 2.0);
    ts_tensor *y = ts_batch_norm(x, NULL, NULL, NULL, NULL, true, 0, 0);
    ts_add_scalar_(x, 1.0);
    ts_backward_with(y, ts_ones_like(y));
    CHECK(strstr(ts_error_message(), "modified by an inplace operation"));
    CHECK_ERR(TS_ERR_STATE);
    ts_scope_end();
}

/* ------------------------------------------------------------------ allocation failures */
typedef struct bn_st {
    ts_module *bn;
    ts_tensor *x, *out;
} bn_st;

static void *sweep_setup(void) {
    bn_st *s = calloc(1, sizeof *s);
    ts_manual_seed(21);
    s->bn = ts_batch_norm2d_new(3, (ts_norm_opts){0});
    ts_scope_begin();
    s->x = ts_keep(ts_randn(TS_SHAPE(2, 3, 4, 5), (ts_opts){.requires_grad = true}));
    ts_scope_end();
    return s;
}

static bool sweep_run(void *p) {
    bn_st *s = p;
    ts_set_grad(s->x, NULL);
    ts_release(s->out);
    s->out = NULL;
    ts_scope_begin();
    ts_tensor *y = ts_forward(s->bn, s->x);
    ts_backward(ts_sum(ts_mul(y, y)));
    s->out = ts_retain(y);
    ts_scope_end();
    return ts_error() == TS_OK;
}

static ts_snapshot sweep_snap(void *p) {
    bn_st *s = p;
    ts_tensor_list l = {0};
    if (s->out) ts_tensor_list_add(&l, "out", s->out);
    if (ts_grad(s->x)) ts_tensor_list_add(&l, "x.grad", ts_grad(s->x));
    ts_snapshot snap = {0};
    ts_snapshot_add(&snap, "", &l);
    ts_tensor_list_free(&l);
    return snap;
}

static void sweep_teardown(void *p) {
    bn_st *s = p;
    ts_module_free(s->bn);
    ts_release(s->x), ts_release(s->out);
    free(s);
}

static void test_fault_sweep(void) {
    /* the running statistics change in the forward: a backward that fails leaves them updated */
    ts_sweep_case c = {.name = "BatchNorm2d fwd+bwd",
                       .setup = sweep_setup,
                       .run = sweep_run,
                       .teardown = sweep_teardown,
                       .snap = sweep_snap,
                       .any_state_on_error = true};
    ts_fault_sweep(&c, 2000);
}

int main(void) {
    if (ts_test_isa_gate()) return 77;
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_against_reference();
    test_thread_independence();
    test_isa_variants();
    test_memory();
    test_fallbacks();
    test_inplace_after_forward();
    test_fault_sweep();
    return ts_test_finish();
}
