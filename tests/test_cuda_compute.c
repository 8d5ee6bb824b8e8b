/* test_cuda_compute.c — the CUDA compute kernels against the CPU backend, through the public API,
 * on shapes chosen to reach every kernel path: chunked reductions with a merge pass, the column
 * path, warp and block rows, NaN/tie rules of arg-reductions; transposed, strided and broadcast
 * matmul operands; grouped, dilated and strided convolutions with their gradients; overlapping
 * pools with ties and NaNs; index ops with duplicates; softmax rows with infinities; layer norm
 * on aligned and unaligned rows, with deterministic parameter gradients; optimizer
 * steps (which must match the CPU bit for bit), also with their tensor tables copied behind long
 * queued work; cuDNN's handling of a declined algorithm (forced by a test hook). The TF32 switch
 * is checked in every build.
 *
 * Skips without a CUDA device. TS_TEST_COMPUTE_DEVICE=sim:0 runs it against another device, which
 * checks the test itself on a machine without a GPU. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_bridge.h"
#include "backend/env_config.h"
#include "ts_test.h"

static ts_device dev; /* the device under test */

static ts_opts on_cpu(ts_dtype dt) { return (ts_opts){.dtype = dt, .device = ts_cpu()}; }

/* t as f64 values on the host (malloc'ed), *n elements; NULL on error */
static double *host_values(ts_tensor *t, int64_t *n) {
    ts_scope_begin();
    ts_tensor *c = ts_contiguous(ts_to_dtype(ts_to(t, ts_cpu()), TS_F64));
    *n = c ? ts_numel(c) : 0;
    double *v = c ? malloc((size_t)(*n > 0 ? *n : 1) * sizeof *v) : NULL;
    if (v && ts_copy_to_host(c, v, (size_t)*n * sizeof *v) != TS_OK) {
        free(v);
        v = NULL;
    }
    ts_scope_end();
    return v;
}

/* |got - want| <= atol + rtol * |want| everywhere (NaN matches NaN, an infinity itself), shapes
 * and dtypes equal; prints the first mismatch. */
static bool close_to(const char *what, ts_tensor *got, ts_tensor *want, double atol, double rtol) {
    if (!got || !want) {
        printf("  %s: no result%s\n", what, ts_test_error_str());
        ts_error_clear();
        return false;
    }
    ts_shape sg = ts_shape_of(got), sw = ts_shape_of(want);
    bool ok = sg.ndim == sw.ndim && ts_dtype_of(got) == ts_dtype_of(want);
    for (int d = 0; ok && d < sg.ndim; d++) ok = sg.dims[d] == sw.dims[d];
    if (!ok) {
        printf("  %s: shape or dtype differs\n", what);
        return false;
    }
    int64_t n, m;
    double *g = host_values(got, &n), *w = host_values(want, &m);
    ok = g && w && n == m;
    for (int64_t i = 0; ok && i < n; i++) {
        const bool same = (g[i] != g[i] && w[i] != w[i]) || g[i] == w[i] ||
                          fabs(g[i] - w[i]) <= atol + rtol * fabs(w[i]);
        if (!same) {
            printf("  %s: element %lld: got %.17g, want %.17g\n", what, (long long)i, g[i], w[i]);
            ok = false;
        }
    }
    free(g);
    free(w);
    return ok;
}

#define CHECK_CLOSE(what, got, want, atol, rtol) CHECK(close_to(what, got, want, atol, rtol))
#define CHECK_SAME(what, got, want)              CHECK(close_to(what, got, want, 0.0, 0.0))

/* sum |x| (the scale of a sum's rounding error) */
static double abs_sum(ts_tensor *x) {
    ts_scope_begin();
    double s = ts_item(ts_sum(ts_abs(ts_to_dtype(x, TS_F64))));
    ts_scope_end();
    return s;
}

/* ------------------------------------------------------------------ TF32 switch */
static void test_tf32_switch(void) {
    CHECK(!ts_cuda_allow_tf32()); /* off by default */
    ts_cuda_set_allow_tf32(true);
    CHECK(ts_cuda_allow_tf32());
    ts_cuda_set_allow_tf32(false);
    CHECK(!ts_cuda_allow_tf32());
}

/* ------------------------------------------------------------------ reductions */
typedef ts_tensor *(*red_fn)(ts_tensor *t, int dim, bool keepdim);

/* f(x, dim) on the device and on the cpu */
static void red_case(const char *what, red_fn f, ts_tensor *x, int dim, double atol, double rtol) {
    ts_scope_begin();
    ts_tensor *got = f(ts_to(x, dev), dim, false), *want = f(x, dim, false);
    CHECK_CLOSE(what, got, want, atol, rtol);
    ts_scope_end();
}

static ts_tensor *var1(ts_tensor *t, int d, bool k) { return ts_var_dim(t, d, k, 1.0); }
static ts_tensor *std0(ts_tensor *t, int d, bool k) { return ts_std_dim(t, d, k, 0.0); }

static void test_reduce_sums(void) {
    ts_scope_begin();
    ts_manual_seed(11);
    /* 5M positive values: a plain running float sum would be off by hundreds */
    ts_tensor *big = ts_rand(TS_SHAPE(5000000), on_cpu(TS_F32));
    const double s = abs_sum(big);
    {
        ts_scope_begin();
        CHECK_CLOSE("sum 5M", ts_sum(ts_to(big, dev)), ts_sum(big), 1e-6 * s, 0);
        CHECK_CLOSE("mean 5M", ts_mean(ts_to(big, dev)), ts_mean(big), 1e-6, 0);
        ts_scope_end();
    }
    ts_tensor *rows = ts_add_scalar(ts_mul_scalar(ts_randn(TS_SHAPE(4, 300000), on_cpu(0)), 3), 10);
    red_case("sum rows (block, merged)", ts_sum_dim, rows, 1, 1e-6 * abs_sum(rows) / 4, 0);
    red_case("mean rows", ts_mean_dim, rows, 1, 1e-5, 0);
    red_case("var rows", var1, rows, 1, 0, 1e-4);
    red_case("std rows", std0, rows, 1, 0, 1e-4);
    red_case("logsumexp rows", ts_logsumexp_dim, rows, 1, 0, 1e-6);
    red_case("amax rows", ts_amax_dim, rows, 1, 0, 0);
    red_case("argmin rows", ts_argmin_dim, rows, 1, 0, 0);

    ts_tensor *cols = ts_rand(TS_SHAPE(3000, 64), on_cpu(0));
    red_case("sum dim 0 (columns, merged)", ts_sum_dim, cols, 0, 1e-5, 1e-6);
    red_case("var dim 0 (columns)", var1, cols, 0, 0, 1e-4);
    red_case("logsumexp dim 0", ts_logsumexp_dim, cols, 0, 0, 1e-6);
    ts_tensor *tall = ts_rand(TS_SHAPE(200000, 3), on_cpu(0));
    red_case("sum dim 0 of [200000, 3]", ts_sum_dim, tall, 0, 1e-6 * 200000, 0);
    red_case("sum dim 1 of [200000, 3] (short rows)", ts_sum_dim, tall, 1, 1e-6, 1e-6);
    ts_tensor *mid = ts_randn(TS_SHAPE(1000, 700), on_cpu(0));
    red_case("sum rows (warp)", ts_sum_dim, mid, 1, 1e-4, 1e-6);
    red_case("std rows (warp)", std0, mid, 1, 0, 1e-5);
    ts_tensor *near1 =
        ts_add_scalar(ts_mul_scalar(ts_rand(TS_SHAPE(100, 50), on_cpu(0)), 0.2), 0.9);
    red_case("prod rows", ts_prod_dim, near1, 1, 0, 1e-5);

    /* reduced dims that do not merge (0 and 2 of a permuted view) */
    ts_tensor *cube = ts_permute(ts_randn(TS_SHAPE(30, 40, 50), on_cpu(0)), TS_DIMS(2, 0, 1));
    CHECK_CLOSE("sum over dims 0, 2 of a permuted view",
                ts_sum_dims(ts_to(cube, dev), TS_DIMS(0, 2), false),
                ts_sum_dims(cube, TS_DIMS(0, 2), false), 1e-4, 1e-5);
    CHECK_CLOSE("var over dims 0, 2", ts_var_dims(ts_to(cube, dev), TS_DIMS(0, 2), true, 1),
                ts_var_dims(cube, TS_DIMS(0, 2), true, 1), 0, 1e-5);

    /* other dtypes */
    ts_tensor *h = ts_to_dtype(mid, TS_F16), *bf = ts_to_dtype(mid, TS_BF16);
    red_case("sum rows f16", ts_sum_dim, h, 1, 0.05, 1e-3);
    red_case("sum rows bf16", ts_sum_dim, bf, 1, 0.5, 1e-2);
    red_case("amax rows f16", ts_amax_dim, h, 1, 0, 0);
    ts_tensor *d = ts_to_dtype(rows, TS_F64);
    red_case("sum rows f64", ts_sum_dim, d, 1, 1e-12 * abs_sum(d), 0);
    red_case("var rows f64", var1, d, 1, 0, 1e-12);
    ts_tensor *ints = ts_randint(-1000000, 1000000, TS_SHAPE(1000, 3000), on_cpu(TS_I64));
    red_case("sum rows i64", ts_sum_dim, ints, 1, 0, 0);
    red_case("amin rows i64", ts_amin_dim, ints, 1, 0, 0);
    red_case("sum rows i32", ts_sum_dim, ts_to_dtype(ints, TS_I32), 1, 0, 0);
    /* +-2 and +-3: the products wrap around int64, which is order-independent */
    ts_tensor *sign =
        ts_sub_scalar(ts_mul_scalar(ts_randint(0, 2, TS_SHAPE(64, 3000), on_cpu(0)), 2), 1);
    ts_tensor *f23 = ts_mul(ts_randint(2, 4, TS_SHAPE(64, 3000), on_cpu(0)), sign);
    red_case("prod (wrapping) i64", ts_prod_dim, f23, 1, 0, 0);
    ts_tensor *flags = ts_gt_scalar(ints, 0);
    red_case("sum bool", ts_sum_dim, flags, 1, 0, 0);
    red_case("amax bool", ts_amax_dim, flags, 0, 0, 0);
    ts_scope_end();
}

/* arg-reductions: first occurrence among ties across chunks, the first NaN wins; max/min: NaN */
static void test_reduce_rules(void) {
    ts_scope_begin();
    enum { R = 4, L = 20000 };
    float *h = malloc(sizeof(float) * R * L);
    if (!h) return;
    srand(5);
    for (int i = 0; i < R * L; i++) h[i] = (float)(rand() % 5);
    h[1 * L + 300] = h[1 * L + 19000] = 9.0f;        /* a tie of the maximum in far-apart chunks */
    h[1 * L + 12000] = h[1 * L + 4000] = -3.0f;      /* and of the minimum */
    h[2 * L + 7000] = h[2 * L + 15000] = NAN;        /* the first NaN (7000) wins */
    for (int i = 0; i < L; i++) h[3 * L + i] = 1.0f; /* all equal: index 0 */
    ts_tensor *t = ts_tensor_f32(TS_SHAPE(R, L), h, on_cpu(0));
    free(h);
    ts_tensor *td = ts_to(t, dev);
    CHECK_SAME("argmax rows", ts_argmax_dim(td, 1, false), ts_argmax_dim(t, 1, false));
    CHECK_SAME("argmin rows", ts_argmin_dim(td, 1, false), ts_argmin_dim(t, 1, false));
    CHECK_SAME("amax rows (NaN)", ts_amax_dim(td, 1, false), ts_amax_dim(t, 1, false));
    CHECK_SAME("amin rows (NaN)", ts_amin_dim(td, 1, false), ts_amin_dim(t, 1, false));
    CHECK_SAME("argmax all", ts_argmax(td), ts_argmax(t));
    /* and against the rules themselves, not only the cpu */
    int64_t n = 0;
    double *am = host_values(ts_argmax_dim(td, 1, false), &n);
    double *an = host_values(ts_argmin_dim(td, 1, false), &n);
    CHECK(am && an && n == R);
    if (am && an && n == R) {
        CHECK_EQ(am[1], 300);  /* first of the tied maxima */
        CHECK_EQ(an[1], 4000); /* first of the tied minima */
        CHECK_EQ(am[2], 7000); /* first NaN */
        CHECK_EQ(an[2], 7000);
        CHECK_EQ(am[3], 0);
        CHECK_EQ(an[3], 0);
    }
    free(am);
    free(an);
    ts_tensor *idx_d = NULL, *idx_c = NULL;
    CHECK_SAME("max_dim values", ts_max_dim(td, 1, true, &idx_d), ts_max_dim(t, 1, true, &idx_c));
    CHECK_SAME("max_dim indices", idx_d, idx_c);
    /* the same along dim 0 of the transpose: the column path, merged over chunks */
    ts_tensor *tt = ts_contiguous(ts_t(t));
    CHECK_SAME("argmax columns", ts_argmax_dim(ts_to(tt, dev), 0, false),
               ts_argmax_dim(tt, 0, false));
    CHECK_SAME("argmin columns", ts_argmin_dim(ts_to(tt, dev), 0, false),
               ts_argmin_dim(tt, 0, false));
    CHECK_SAME("amax columns", ts_amax_dim(ts_to(tt, dev), 0, false), ts_amax_dim(tt, 0, false));
    ts_tensor *th = ts_to_dtype(t, TS_F16);
    CHECK_SAME("argmax rows f16", ts_argmax_dim(ts_to(th, dev), 1, false),
               ts_argmax_dim(th, 1, false));
    ts_tensor *ti = ts_randint(0, 3, TS_SHAPE(R, L), on_cpu(0));
    CHECK_SAME("argmax rows i64", ts_argmax_dim(ts_to(ti, dev), 1, false),
               ts_argmax_dim(ti, 1, false));
    CHECK_SAME("argmin rows i64", ts_argmin_dim(ts_to(ti, dev), 1, false),
               ts_argmin_dim(ti, 1, false));

    /* reductions over nothing: sum 0, prod 1, mean/var NaN, logsumexp -inf */
    ts_tensor *e = ts_zeros(TS_SHAPE(3, 0), on_cpu(0)), *ed = ts_to(e, dev);
    CHECK_SAME("empty sum", ts_sum_dim(ed, 1, false), ts_sum_dim(e, 1, false));
    CHECK_SAME("empty prod", ts_prod_dim(ed, 1, false), ts_prod_dim(e, 1, false));
    CHECK_SAME("empty mean", ts_mean_dim(ed, 1, false), ts_mean_dim(e, 1, false));
    CHECK_SAME("empty var", ts_var_dim(ed, 1, false, 1), ts_var_dim(e, 1, false, 1));
    CHECK_SAME("empty logsumexp", ts_logsumexp_dim(ed, 1, false), ts_logsumexp_dim(e, 1, false));
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ matmul */
static void mm_case(const char *what, ts_tensor *a, ts_tensor *b, double atol, double rtol) {
    ts_scope_begin();
    CHECK_CLOSE(what, ts_matmul(ts_to(a, dev), ts_to(b, dev)), ts_matmul(a, b), atol, rtol);
    ts_scope_end();
}

static void test_matmul(void) {
    ts_scope_begin();
    ts_manual_seed(21);
    ts_tensor *a = ts_randn(TS_SHAPE(3, 70, 50), on_cpu(0));
    ts_tensor *b = ts_randn(TS_SHAPE(3, 50, 40), on_cpu(0));
    mm_case("bmm f32", a, b, 1e-4, 1e-5);
    /* operands as transposes of contiguous matrices: cuBLAS's transpose flags */
    ts_tensor *at = ts_transpose(ts_contiguous(ts_transpose(a, 1, 2)), 1, 2);
    ts_tensor *bt = ts_transpose(ts_contiguous(ts_transpose(b, 1, 2)), 1, 2);
    mm_case("bmm a^T^T", at, b, 1e-4, 1e-5);
    mm_case("bmm b^T^T", a, bt, 1e-4, 1e-5);
    mm_case("bmm both transposed", at, bt, 1e-4, 1e-5);
    /* broadcast batch (stride 0) and vectors */
    ts_tensor *w = ts_randn(TS_SHAPE(50, 40), on_cpu(0));
    mm_case("batch @ matrix (broadcast)", a, w, 1e-4, 1e-5);
    mm_case("matrix @ batch (broadcast)", ts_randn(TS_SHAPE(70, 50), on_cpu(0)), b, 1e-4, 1e-5);
    mm_case("vector @ matrix", ts_randn(TS_SHAPE(50), on_cpu(0)), w, 1e-4, 1e-5);
    mm_case("matrix @ vector", w, ts_randn(TS_SHAPE(40), on_cpu(0)), 1e-4, 1e-5);
    /* strides cuBLAS cannot take: copied to scratch first */
    ts_tensor *wide = ts_randn(TS_SHAPE(3, 70, 100), on_cpu(0));
    mm_case("strided a (step 2)", ts_slice(wide, 2, 0, 100, 2), b, 1e-4, 1e-5);
    ts_tensor *tall = ts_randn(TS_SHAPE(3, 100, 40), on_cpu(0));
    mm_case("strided b (step 2)", a, ts_slice(tall, 1, 0, 100, 2), 1e-4, 1e-5);
    /* dtypes */
    mm_case("bmm f64", ts_to_dtype(a, TS_F64), ts_to_dtype(b, TS_F64), 1e-12, 1e-12);
    mm_case("bmm f16", ts_to_dtype(a, TS_F16), ts_to_dtype(b, TS_F16), 0.05, 1e-2);
    mm_case("bmm bf16", ts_to_dtype(a, TS_BF16), ts_to_dtype(b, TS_BF16), 0.3, 2e-2);
    ts_tensor *ia = ts_randint(-50, 50, TS_SHAPE(3, 20, 30), on_cpu(0));
    ts_tensor *ib = ts_randint(-50, 50, TS_SHAPE(3, 30, 10), on_cpu(0));
    mm_case("bmm i64", ia, ib, 0, 0);
    mm_case("bmm i32", ts_to_dtype(ia, TS_I32), ts_to_dtype(ib, TS_I32), 0, 0);
    /* an empty inner dim gives zeros */
    mm_case("k = 0", ts_zeros(TS_SHAPE(4, 0), on_cpu(0)), ts_zeros(TS_SHAPE(0, 5), on_cpu(0)), 0,
            0);
    /* TF32 when allowed: looser, still close */
    ts_cuda_set_allow_tf32(true);
    mm_case("bmm f32 with TF32", a, b, 0.05, 1e-2);
    ts_cuda_set_allow_tf32(false);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ convolution */
/* forward and the gradients of sum(y * r) for x, w and b on both devices */
static void conv_case(const char *what, ts_shape xs, ts_shape ws, bool bias, ts_conv2d_opts o,
                      ts_dtype dt, double atol, double rtol) {
    ts_scope_begin();
    ts_tensor *in[2][3] = {{NULL}};
    ts_tensor *x = ts_to_dtype(ts_randn(xs, on_cpu(0)), dt);
    ts_tensor *w = ts_to_dtype(ts_randn(ws, on_cpu(0)), dt);
    ts_tensor *b = bias ? ts_to_dtype(ts_randn(TS_SHAPE(ws.dims[0]), on_cpu(0)), dt) : NULL;
    ts_tensor *y[2] = {NULL, NULL}, *r = NULL;
    for (int k = 0; k < 2; k++) {
        const ts_device d = k == 0 ? ts_cpu() : dev;
        in[k][0] = ts_clone(ts_to(x, d));
        in[k][1] = ts_clone(ts_to(w, d));
        in[k][2] = b ? ts_clone(ts_to(b, d)) : NULL;
        for (int i = 0; i < 3; i++)
            if (in[k][i]) ts_set_requires_grad(in[k][i], true);
        y[k] = ts_conv2d(in[k][0], in[k][1], in[k][2], o);
        if (!r) r = ts_to_dtype(ts_randn(ts_shape_of(y[0]), on_cpu(0)), dt);
        ts_backward(ts_sum(ts_mul(y[k], ts_to(r, d))));
    }
    char name[160];
    snprintf(name, sizeof name, "%s: output", what);
    CHECK_CLOSE(name, y[1], y[0], atol, rtol);
    const char *gname[3] = {"grad x", "grad w", "grad b"};
    for (int i = 0; i < 3; i++) {
        if (!in[0][i]) continue;
        snprintf(name, sizeof name, "%s: %s", what, gname[i]);
        /* weight and bias gradients sum over the batch and positions: a wider tolerance */
        const double scale = i == 0 ? 1.0 : 4.0;
        CHECK_CLOSE(name, ts_grad(in[1][i]), ts_grad(in[0][i]), atol * scale, rtol * scale);
    }
    CHECK_OK();
    ts_scope_end();
}

static void test_conv(void) {
    ts_manual_seed(31);
    ts_conv2d_opts odd = {.stride = {2, 1}, .padding = {1, 2}, .dilation = {2, 1}, .groups = 2};
    conv_case("grouped dilated f32", TS_SHAPE(4, 6, 17, 15), TS_SHAPE(8, 3, 3, 3), true, odd,
              TS_F32, 1e-4, 1e-4);
    conv_case("grouped dilated f64", TS_SHAPE(4, 6, 17, 15), TS_SHAPE(8, 3, 3, 3), true, odd,
              TS_F64, 1e-10, 1e-10);
    conv_case("grouped dilated f16", TS_SHAPE(2, 6, 11, 9), TS_SHAPE(8, 3, 3, 3), true, odd, TS_F16,
              0.05, 1e-2);
    conv_case("grouped dilated bf16", TS_SHAPE(2, 6, 11, 9), TS_SHAPE(8, 3, 3, 3), true, odd,
              TS_BF16, 0.4, 3e-2);
    conv_case("1x1 no bias", TS_SHAPE(2, 16, 8, 8), TS_SHAPE(32, 16, 1, 1), false,
              (ts_conv2d_opts){0}, TS_F32, 1e-4, 1e-4);
    conv_case("depthwise", TS_SHAPE(2, 8, 9, 9), TS_SHAPE(8, 1, 3, 3), true,
              (ts_conv2d_opts){.padding = {1, 1}, .groups = 8}, TS_F32, 1e-4, 1e-4);
    conv_case("5x5 stride 2 batch 9", TS_SHAPE(9, 3, 32, 32), TS_SHAPE(16, 3, 5, 5), true,
              (ts_conv2d_opts){.stride = {2, 2}, .padding = {2, 2}}, TS_F32, 1e-4, 1e-4);
}

/* TS_CUDA_TEST_CUDNN_DECLINE=1 makes cuDNN's best-ranked algorithm count as declined: the call
 * must still give the right result (the next candidate, or im2col when none is left), and a
 * second call of the same shape must not try the declined one again (the choice is cached). */
static void test_cudnn_declines(void) {
    long long r0, d0, r1, d1, r2, d2;
    tsc_cudnn_counters(&r0, &d0);
    if (dev.type != TS_CUDA || r0 < 0) {
        printf("cuDNN declines: %s\n",
               dev.type != TS_CUDA ? "not a cuda device under test" : "no cuDNN in this build");
        return;
    }
    setenv("TS_CUDA_TEST_CUDNN_DECLINE", "1", 1);
    tsi_env_reload(TSI_ENV_CUDA_TEST_CUDNN_DECLINE);
    ts_scope_begin();
    ts_manual_seed(37);
    /* a shape no other case uses, so that its algorithm is ranked here */
    ts_tensor *x = ts_randn(TS_SHAPE(3, 5, 23, 19), on_cpu(0));
    ts_tensor *w = ts_randn(TS_SHAPE(7, 5, 3, 3), on_cpu(0));
    const ts_conv2d_opts o = {.padding = {1, 1}};
    ts_tensor *want = ts_conv2d(x, w, NULL, o);
    ts_tensor *xd = ts_to(x, dev), *wd = ts_to(w, dev);
    CHECK_CLOSE("conv2d, best algorithm declined", ts_conv2d(xd, wd, NULL, o), want, 1e-4, 1e-4);
    tsc_cudnn_counters(&r1, &d1);
    CHECK_CLOSE("conv2d again", ts_conv2d(xd, wd, NULL, o), want, 1e-4, 1e-4);
    tsc_cudnn_counters(&r2, &d2);
    printf("cuDNN declines: first call %lld run, %lld declined; second call %lld run, %lld "
           "declined\n",
           r1 - r0, d1 - d0, r2 - r1, d2 - d1);
    CHECK(d1 >= d0 + 1);                 /* the hook's decline */
    CHECK(d2 == d1);                     /* nothing declined is tried again */
    CHECK(r2 - r1 == (r1 > r0 ? 1 : 0)); /* the cached algorithm, or im2col */
    ts_scope_end();
    unsetenv("TS_CUDA_TEST_CUDNN_DECLINE");
    tsi_env_reload(TSI_ENV_CUDA_TEST_CUDNN_DECLINE);
    CHECK_OK();
}

/* ------------------------------------------------------------------ pooling */
typedef enum { P_MAX, P_AVG, P_AVG_EX, P_ADAPTIVE } pool_kind;

static ts_tensor *pool(pool_kind k, ts_tensor *x, ts_pool2d_opts o) {
    switch (k) {
    case P_MAX:
        return ts_max_pool2d(x, o);
    case P_AVG:
        return ts_avg_pool2d(x, o);
    case P_AVG_EX:
        o.exclude_pad = true;
        return ts_avg_pool2d(x, o);
    default:
        return ts_adaptive_avg_pool2d(x, o.kernel[0], o.kernel[1]); /* kernel = output size */
    }
}

/* forward and the input gradient of sum(y * r); x from the host values given (ties, NaNs) */
static void pool_case(const char *what, pool_kind k, ts_tensor *x, ts_pool2d_opts o, double tol) {
    ts_scope_begin();
    ts_tensor *leaf[2], *y[2], *r = NULL;
    for (int i = 0; i < 2; i++) {
        leaf[i] = ts_clone(ts_to(x, i == 0 ? ts_cpu() : dev));
        ts_set_requires_grad(leaf[i], true);
        y[i] = pool(k, leaf[i], o);
        if (!r) r = ts_to_dtype(ts_randn(ts_shape_of(y[0]), on_cpu(0)), ts_dtype_of(x));
        ts_backward(ts_sum(ts_mul(y[i], ts_to(r, ts_device_of(leaf[i])))));
    }
    char name[160];
    snprintf(name, sizeof name, "%s: output", what);
    CHECK_CLOSE(name, y[1], y[0], tol, tol);
    snprintf(name, sizeof name, "%s: grad", what);
    CHECK_CLOSE(name, ts_grad(leaf[1]), ts_grad(leaf[0]), tol, tol);
    CHECK_OK();
    ts_scope_end();
}

static void test_pool(void) {
    ts_scope_begin();
    ts_manual_seed(41);
    /* values on a coarse grid: many ties, which must pick the same (first) maximum */
    ts_tensor *x = ts_round(ts_mul_scalar(ts_randn(TS_SHAPE(2, 3, 17, 15), on_cpu(0)), 2));
    ts_pool2d_opts o3 = {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
    pool_case("max 3x3/2 pad 1 (ties)", P_MAX, x, o3, 0);
    ts_pool2d_opts od = {.kernel = {3, 2}, .stride = {1, 2}, .padding = {1, 1}, .dilation = {2, 1}};
    pool_case("max dilated", P_MAX, x, od, 0);
    ts_pool2d_opts oc = o3;
    oc.ceil_mode = true;
    pool_case("max ceil_mode", P_MAX, x, oc, 0);
    pool_case("avg include pad", P_AVG, x, o3, 1e-6);
    pool_case("avg exclude pad", P_AVG_EX, x, o3, 1e-6);
    pool_case("avg ceil_mode", P_AVG, x, oc, 1e-6);
    pool_case("adaptive 5x4", P_ADAPTIVE, x, (ts_pool2d_opts){.kernel = {5, 4}}, 1e-6);
    pool_case("adaptive 3x7", P_ADAPTIVE, x, (ts_pool2d_opts){.kernel = {3, 7}}, 1e-6);
    pool_case("max f64", P_MAX, ts_to_dtype(x, TS_F64), o3, 0);
    pool_case("max f16", P_MAX, ts_to_dtype(x, TS_F16), o3, 1e-3);
    pool_case("avg bf16", P_AVG, ts_to_dtype(x, TS_BF16), o3, 2e-2);
    /* NaN inputs: the NaN is the maximum and takes the gradient */
    float h[2 * 16];
    for (int i = 0; i < 32; i++) h[i] = (float)(i % 7);
    h[5] = NAN;
    h[21] = NAN;
    h[22] = NAN;
    ts_tensor *xn = ts_tensor_f32(TS_SHAPE(1, 2, 4, 4), h, on_cpu(0));
    pool_case("max with NaN", P_MAX, xn, (ts_pool2d_opts){.kernel = {2, 2}}, 0);
    pool_case("max with NaN, overlapping", P_MAX, xn,
              (ts_pool2d_opts){.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}, 0);
    ts_scope_end();
}

/* ------------------------------------------------------------------ index ops */
static void test_index(void) {
    ts_scope_begin();
    ts_manual_seed(51);
    ts_tensor *x = ts_randn(TS_SHAPE(50, 300, 7), on_cpu(0));
    ts_tensor *idx = ts_randint(0, 300, TS_SHAPE(40), on_cpu(0)); /* duplicates likely */
    CHECK_SAME("index_select dim 1", ts_index_select(ts_to(x, dev), 1, ts_to(idx, dev)),
               ts_index_select(x, 1, idx));
    ts_tensor *idx7 = ts_randint(0, 7, TS_SHAPE(9), on_cpu(0));
    CHECK_SAME("index_select last dim", ts_index_select(ts_to(x, dev), 2, ts_to(idx7, dev)),
               ts_index_select(x, 2, idx7));
    ts_tensor *bx = ts_gt_scalar(x, 0);
    CHECK_SAME("index_select bool", ts_index_select(ts_to(bx, dev), 1, ts_to(idx, dev)),
               ts_index_select(bx, 1, idx));
    ts_tensor *gi = ts_randint(0, 50, TS_SHAPE(20, 300, 7), on_cpu(0));
    CHECK_SAME("gather dim 0", ts_gather(ts_to(x, dev), 0, ts_to(gi, dev)), ts_gather(x, 0, gi));
    ts_tensor *gt = ts_transpose(x, 0, 2); /* a strided source */
    ts_tensor *gti = ts_randint(0, 7, TS_SHAPE(7, 300, 50), on_cpu(0));
    CHECK_SAME("gather strided", ts_gather(ts_to(gt, dev), 0, ts_to(gti, dev)),
               ts_gather(gt, 0, gti));

    /* scatter_add with many duplicates: float sums in any order, integers exactly */
    ts_tensor *src = ts_randn(TS_SHAPE(20, 500), on_cpu(0));
    ts_tensor *si = ts_randint(0, 100, TS_SHAPE(20, 500), on_cpu(0));
    ts_tensor *dst = ts_zeros(TS_SHAPE(20, 100), on_cpu(0));
    CHECK_CLOSE("scatter_add f32",
                ts_scatter_add(ts_to(dst, dev), 1, ts_to(si, dev), ts_to(src, dev)),
                ts_scatter_add(dst, 1, si, src), 1e-4, 1e-5);
    ts_tensor *isrc = ts_randint(-1000, 1000, TS_SHAPE(20, 500), on_cpu(0));
    ts_tensor *idst = ts_zeros(TS_SHAPE(20, 100), on_cpu(TS_I64));
    CHECK_SAME("scatter_add i64",
               ts_scatter_add(ts_to(idst, dev), 1, ts_to(si, dev), ts_to(isrc, dev)),
               ts_scatter_add(idst, 1, si, isrc));
    ts_tensor *i32src = ts_to_dtype(isrc, TS_I32), *i32dst = ts_to_dtype(idst, TS_I32);
    CHECK_SAME("scatter_add i32",
               ts_scatter_add(ts_to(i32dst, dev), 1, ts_to(si, dev), ts_to(i32src, dev)),
               ts_scatter_add(i32dst, 1, si, i32src));
    ts_tensor *hsrc = ts_to_dtype(ts_mul_scalar(src, 0.1), TS_F16);
    ts_tensor *hdst = ts_zeros(TS_SHAPE(20, 100), on_cpu(TS_F16));
    CHECK_CLOSE("scatter_add f16",
                ts_scatter_add(ts_to(hdst, dev), 1, ts_to(si, dev), ts_to(hsrc, dev)),
                ts_scatter_add(hdst, 1, si, hsrc), 0.02, 1e-2);
    ts_tensor *bsrc = ts_gt_scalar(src, 1.5), *bdst = ts_zeros(TS_SHAPE(20, 100), on_cpu(TS_BOOL));
    CHECK_SAME("scatter_add bool",
               ts_scatter_add(ts_to(bdst, dev), 1, ts_to(si, dev), ts_to(bsrc, dev)),
               ts_scatter_add(bdst, 1, si, bsrc));
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ softmax */
static void sm_case(const char *what, ts_tensor *x, int dim, double tol) {
    ts_scope_begin();
    char name[160];
    snprintf(name, sizeof name, "softmax %s", what);
    CHECK_CLOSE(name, ts_softmax(ts_to(x, dev), dim), ts_softmax(x, dim), tol * 0.1, tol);
    snprintf(name, sizeof name, "log_softmax %s", what);
    CHECK_CLOSE(name, ts_log_softmax(ts_to(x, dev), dim), ts_log_softmax(x, dim), tol, tol);
    /* the gradients (cuda's fused kernel for rows along a contiguous last dim, the composition
     * otherwise), against the cpu's from the same upstream gradient */
    if (ts_numel(x) > 1 && ts_dtype_is_floating(ts_dtype_of(x)))
        for (int lg = 0; lg < 2; lg++) {
            ts_tensor *g = ts_to_dtype(ts_randn(ts_shape_of(x), on_cpu(0)), ts_dtype_of(x));
            ts_tensor *leaf[2] = {ts_clone(x), ts_to(x, dev)};
            for (int i = 0; i < 2; i++) {
                ts_set_requires_grad(leaf[i], true);
                ts_tensor *y = lg ? ts_log_softmax(leaf[i], dim) : ts_softmax(leaf[i], dim);
                ts_backward_with(y, i ? ts_to(g, dev) : g);
            }
            snprintf(name, sizeof name, "%s gradient %s", lg ? "log_softmax" : "softmax", what);
            CHECK_CLOSE(name, ts_grad(leaf[1]), ts_grad(leaf[0]), tol, tol);
        }
    ts_scope_end();
}

static void test_softmax(void) {
    ts_scope_begin();
    ts_manual_seed(61);
    sm_case("rows of 50 (warp)", ts_mul_scalar(ts_randn(TS_SHAPE(300, 50), on_cpu(0)), 4), 1, 1e-5);
    sm_case("rows of 5000 (block)", ts_mul_scalar(ts_randn(TS_SHAPE(8, 5000), on_cpu(0)), 4), 1,
            1e-5);
    ts_tensor *c = ts_mul_scalar(ts_randn(TS_SHAPE(3000, 64), on_cpu(0)), 4);
    sm_case("dim 0 (columns)", c, 0, 1e-5);
    sm_case("dim 1 of [5, 7, 9] (strided rows)", ts_randn(TS_SHAPE(5, 7, 9), on_cpu(0)), 1, 1e-5);
    sm_case("dim 0 of [40000, 2] (strided, few columns)", ts_randn(TS_SHAPE(40000, 2), on_cpu(0)),
            0, 1e-5);
    sm_case("f64", ts_to_dtype(c, TS_F64), 0, 1e-12);
    sm_case("f16", ts_to_dtype(c, TS_F16), 1, 2e-3);
    sm_case("bf16", ts_to_dtype(c, TS_BF16), 1, 2e-2);
    /* rows with -inf (ignored), all -inf (NaN), +inf (NaN), NaN (NaN) */
    const float inf = INFINITY;
    const float h[4 * 5] = {1, -inf, 2, 3, -inf, -inf, -inf, -inf, -inf, -inf,
                            1, inf,  2, 3, 4,    1,    NAN,  2,    3,    4};
    sm_case("infinities and NaN", ts_tensor_f32(TS_SHAPE(4, 5), h, on_cpu(0)), 1, 1e-6);
    sm_case("scalar", ts_scalar(3, on_cpu(0)), 0, 0);
    /* cross entropy is log_softmax + gather + reductions on the generic entries */
    ts_tensor *logits = ts_randn(TS_SHAPE(64, 10), on_cpu(0));
    ts_tensor *target = ts_randint(0, 10, TS_SHAPE(64), on_cpu(0));
    CHECK_CLOSE("cross_entropy", ts_cross_entropy(ts_to(logits, dev), ts_to(target, dev)),
                ts_cross_entropy(logits, target), 1e-6, 1e-6);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ layer norm */
/* The fused layer norm (cuda_layer_norm.cu) against the CPU's kernels: y and the gradients of x,
 * weight and bias, on x at element offset `off` of its buffer (1: a base that is not 16-byte
 * aligned, the element-by-element path; 0: 16-byte vectors where the row length allows), warp and
 * block rows; a second backward gives the same bits (partial sums in a fixed order, no atomics).
 * test_layer_norm.c checks the values against a float64 reference on every shape. */
static void ln_case(const char *what, int64_t R, int64_t C, int64_t off, ts_dtype dt, double tol,
                    double tol_sum) {
    ts_scope_begin();
    char name[160];
    ts_manual_seed(71);
    ts_tensor *flat = ts_to_dtype(
        ts_add_scalar(ts_mul_scalar(ts_randn(TS_SHAPE(R * C + 1), on_cpu(0)), 3), 2), dt);
    ts_tensor *w = ts_to_dtype(ts_randn(TS_SHAPE(C), on_cpu(0)), dt);
    ts_tensor *b = ts_to_dtype(ts_randn(TS_SHAPE(C), on_cpu(0)), dt);
    ts_tensor *dy = ts_to_dtype(ts_randn(TS_SHAPE(R, C), on_cpu(0)), dt);
    ts_tensor *xc = ts_detach(ts_reshape(ts_narrow(flat, 0, off, R * C), TS_SHAPE(R, C)));
    ts_tensor *xd =
        ts_detach(ts_reshape(ts_narrow(ts_to(flat, dev), 0, off, R * C), TS_SHAPE(R, C)));
    ts_tensor *wd = ts_to(w, dev), *bd = ts_to(b, dev);
    ts_tensor *leaves[6] = {xc, w, b, xd, wd, bd};
    for (int i = 0; i < 6; i++) ts_set_requires_grad(leaves[i], true);
    ts_tensor *yc = ts_layer_norm(xc, TS_SHAPE(C), w, b, 0);
    ts_tensor *yd = ts_layer_norm(xd, TS_SHAPE(C), wd, bd, 0);
    snprintf(name, sizeof name, "layer_norm %s: y", what);
    CHECK_CLOSE(name, yd, yc, tol, tol);
    /* (the CPU's halves run its float32 kernels under a cast back) */
    if (dev.type == TS_CUDA || dt == TS_F32 || dt == TS_F64)
        CHECK_STREQ(yd ? ts_grad_fn_name(yd) : NULL, "NativeLayerNormBackward0");
    ts_backward_with(yc, dy);
    ts_backward_with(yd, ts_to(dy, dev));
    static const char *gnames[3] = {"dx", "dweight", "dbias"};
    ts_tensor *first[3];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "layer_norm %s: %s", what, gnames[i]);
        CHECK_CLOSE(name, ts_grad(leaves[3 + i]), ts_grad(leaves[i]), i ? tol_sum : tol, tol);
        first[i] = ts_grad(leaves[3 + i]) ? ts_clone(ts_grad(leaves[3 + i])) : NULL;
        ts_set_grad(leaves[3 + i], NULL);
    }
    ts_backward_with(ts_layer_norm(xd, TS_SHAPE(C), wd, bd, 0), ts_to(dy, dev));
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "layer_norm %s: %s again", what, gnames[i]);
        CHECK_SAME(name, ts_grad(leaves[3 + i]), first[i]);
    }
    CHECK_OK();
    ts_scope_end();
}

static void test_layer_norm(void) {
    ln_case("[300, 64] (warp rows, vectors)", 300, 64, 0, TS_F32, 1e-5, 3e-4);
    ln_case("[300, 64] at offset 1 (warp rows, elements)", 300, 64, 1, TS_F32, 1e-5, 3e-4);
    ln_case("[40, 3000] (block rows, vectors)", 40, 3000, 0, TS_F32, 1e-5, 1e-4);
    ln_case("[40, 3000] at offset 1 (block rows, elements)", 40, 3000, 1, TS_F32, 1e-5, 1e-4);
    ln_case("[9000, 33] f64", 9000, 33, 0, TS_F64, 1e-12, 1e-9);
    ln_case("[200, 768] f16", 200, 768, 0, TS_F16, 4e-3, 0.1);
    ln_case("[200, 1030] bf16 at offset 1", 200, 1030, 1, TS_BF16, 3e-2, 0.5);
}

/* ------------------------------------------------------------------ optimizer steps */
static ts_optim *make_opt(int which, ts_tensor *const *p, int n) {
    switch (which) {
    case 0:
        return ts_sgd_new_params(p, n, (ts_sgd_opts){.lr = 0.1});
    case 1:
        return ts_sgd_new_params(
            p, n,
            (ts_sgd_opts){.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01});
    case 2:
        return ts_sgd_new_params(
            p, n, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .maximize = true});
    case 3:
        return ts_adam_new_params(
            p, n, (ts_adam_opts){.lr = 1e-2, .weight_decay = 0.01, .amsgrad = true});
    case 4:
        return ts_adamw_new_params(p, n, (ts_adam_opts){.lr = 1e-2, .weight_decay = 0.01});
    case 5:
        return ts_rmsprop_new_params(
            p, n,
            (ts_rmsprop_opts){.lr = 1e-2, .centered = true, .momentum = 0.5, .weight_decay = 0.01});
    default:
        return ts_rmsprop_new_params(p, n, (ts_rmsprop_opts){.lr = 1e-2, .maximize = true});
    }
}

/* three steps with the same gradients on both devices: the parameters must agree bit for bit
 * (optim_math.h is shared and the CUDA kernel rounds like the CPU) */
static void optim_case(int which, ts_dtype dt) {
    ts_scope_begin();
    enum { NP = 3 };
    const ts_shape shapes[NP] = {TS_SHAPE(5000), TS_SHAPE(33, 17), TS_SHAPE(7)};
    ts_tensor *p[2][NP];
    for (int i = 0; i < NP; i++) {
        ts_tensor *init = ts_to_dtype(ts_randn(shapes[i], on_cpu(0)), dt);
        for (int k = 0; k < 2; k++) {
            p[k][i] = ts_clone(ts_to(init, k == 0 ? ts_cpu() : dev));
            ts_set_requires_grad(p[k][i], true);
        }
    }
    ts_optim *opt[2] = {make_opt(which, p[0], NP), make_opt(which, p[1], NP)};
    for (int step = 0; step < 3; step++) {
        ts_scope_begin();
        for (int i = 0; i < NP; i++) {
            ts_tensor *g = ts_to_dtype(ts_randn(shapes[i], on_cpu(0)), dt);
            ts_set_grad(p[0][i], g);
            ts_set_grad(p[1][i], ts_to(g, dev));
        }
        ts_optim_step(opt[0]);
        ts_optim_step(opt[1]);
        ts_scope_end();
    }
    for (int i = 0; i < NP; i++) {
        char name[96];
        snprintf(name, sizeof name, "optimizer %d %s param %d", which, ts_dtype_name(dt), i);
        CHECK_SAME(name, p[1][i], p[0][i]);
    }
    ts_optim_free(opt[0]);
    ts_optim_free(opt[1]);
    CHECK_OK();
    ts_scope_end();
}

/* About a quarter second of matmuls queued on the device's current stream. */
static void queue_long_work(void) {
    ts_scope_begin();
    ts_tensor *a = ts_full(TS_SHAPE(4096, 4096), 1.0 / 4096, (ts_opts){.device = dev});
    for (int i = 0; i < 48; i++) {
        ts_scope_begin();
        ts_mm(a, a);
        ts_scope_end();
    }
    ts_scope_end();
}

/* The optimizer's and the grad scaler's tensor tables go to the device through pinned memory that
 * is not reused before their copies ran: queued behind long work (so the copies really are
 * pending when the next table is built), many steps of many tensors still match the cpu bit for
 * bit, and the pinned cache served one table per launch. */
static void test_tables_under_load(void) {
    if (dev.type != TS_CUDA) return; /* pinned memory and its statistics need CUDA */
    ts_scope_begin();
    enum { NP = 160 };
    ts_tensor *p[2][NP];
    ts_manual_seed(53);
    for (int i = 0; i < NP; i++) {
        ts_tensor *init = ts_randn(TS_SHAPE(1 + (i % 7) * 13, 3), on_cpu(0));
        for (int k = 0; k < 2; k++) {
            p[k][i] = ts_clone(ts_to(init, k == 0 ? ts_cpu() : dev));
            ts_set_requires_grad(p[k][i], true);
        }
    }
    ts_optim *opt[2];
    ts_grad_scaler *sc[2];
    for (int k = 0; k < 2; k++) {
        opt[k] = ts_sgd_new_params(p[k], NP, (ts_sgd_opts){.lr = 0.1, .momentum = 0.9});
        sc[k] = ts_grad_scaler_new((ts_grad_scaler_opts){0});
        ts_grad_scaler_scale(sc[k], ts_sum(p[k][0])); /* the scale lives on this device */
    }
    ts_mem_stats st0, st1;
    ts_cuda_pinned_memory_stats(&st0);
    for (int step = 0; step < 3; step++) {
        ts_scope_begin();
        for (int i = 0; i < NP; i++) {
            ts_tensor *g = ts_mul_scalar(ts_randn(ts_shape_of(p[0][i]), on_cpu(0)), 65536.0);
            ts_set_grad(p[0][i], g);
            ts_set_grad(p[1][i], ts_to(g, dev));
        }
        queue_long_work();
        for (int k = 0; k < 2; k++) {
            bool stepped = false;
            CHECK_EQ(ts_grad_scaler_step(sc[k], opt[k], &stepped), TS_OK);
            CHECK(stepped);
            CHECK_EQ(ts_grad_scaler_update(sc[k]), TS_OK);
        }
        ts_scope_end();
    }
    ts_cuda_pinned_memory_stats(&st1);
    printf("tensor tables: %llu pinned allocations for 3 unscale and 3 optimizer launches\n",
           (unsigned long long)(st1.alloc_count - st0.alloc_count));
    CHECK(st1.alloc_count >= st0.alloc_count + 6);
    for (int i = 0; i < NP; i++) {
        char name[64];
        snprintf(name, sizeof name, "SGD under load, param %d", i);
        CHECK_SAME(name, p[1][i], p[0][i]);
    }
    for (int k = 0; k < 2; k++) {
        ts_optim_free(opt[k]);
        ts_grad_scaler_free(sc[k]);
    }
    CHECK_OK();
    ts_scope_end();
}

static void test_optim(void) {
    ts_manual_seed(71);
    const ts_dtype dts[4] = {TS_F32, TS_F64, TS_F16, TS_BF16};
    for (int which = 0; which < 7; which++)
        for (int d = 0; d < 4; d++) optim_case(which, dts[d]);
}

int main(void) {
    test_tf32_switch();
    const char *env = getenv("TS_TEST_COMPUTE_DEVICE");
    if (env && *env) {
        if (!strncmp(env, "sim", 3) && ts_device_count(TS_SIM) < 1) ts_sim_configure(1, 0);
        if (ts_device_parse(env, &dev) != TS_OK || !ts_device_is_available(dev))
            return ts_test_skip("TS_TEST_COMPUTE_DEVICE=%s is not available", env);
    } else if (ts_cuda_is_available()) {
        dev = ts_cuda(0);
    } else {
        if (ts_test_failed_count() > 0) return ts_test_finish();
        return ts_test_skip_no_cuda("test_cuda_compute: the compute kernels are not run here");
    }
    printf("device under test: %s\n", ts_device_str(dev));
    test_reduce_sums();
    test_reduce_rules();
    test_matmul();
    test_conv();
    test_pool();
    test_index();
    test_softmax();
    test_layer_norm();
    test_optim();
    test_cudnn_declines();
    test_tables_under_load();
    return ts_test_finish();
}
