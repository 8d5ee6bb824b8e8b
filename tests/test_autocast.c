/* test_autocast.c — autocast regions: values against float32, gradients reaching float32
 * parameters, nesting, disabled regions, device types, threads, the parameter-cast cache (hits,
 * no_grad, stale sources, release, no leaks) and the error paths; then a LeNet-5 step under
 * autocast against the same step in float32. The op policy table is test_autocast_table.c. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "amp/autocast.h"
#include "autocast_util.h"
#include "ts_test.h"

/* ==================================================================== values */
/* Lower-precision ops against float32: within bf16's rounding of inputs and output. */
static void test_lower_values(void) {
    ts_scope_begin();
    ts_tensor *a = randu(TS_SHAPE(8, 16), TS_F32, -1, 1),
              *b = randu(TS_SHAPE(16, 5), TS_F32, -1, 1);
    ts_tensor *x = randu(TS_SHAPE(2, 3, 9, 9), TS_F32, -1, 1);
    ts_tensor *w = randu(TS_SHAPE(4, 3, 3, 3), TS_F32, -1, 1),
              *cb = randu(TS_SHAPE(4), TS_F32, -1, 1);
    ts_tensor *lb = randu(TS_SHAPE(5), TS_F32, -1, 1);
    ts_tensor *lw = ts_contiguous(ts_t(b));
    ts_tensor *ref_mm = ts_mm(a, b), *ref_lin = ts_linear(a, lw, lb);
    ts_tensor *ref_conv = ts_conv2d(x, w, cb, (ts_conv2d_opts){.padding = {1, 1}});
    ts_autocast_begin(cfg_dev.type, cfg_lower);
    ts_tensor *y_mm = ts_mm(a, b), *y_lin = ts_linear(a, lw, lb);
    ts_tensor *y_conv = ts_conv2d(x, w, cb, (ts_conv2d_opts){.padding = {1, 1}});
    ts_autocast_end();
    CHECK_OK();
    CHECK(ts_dtype_of(y_mm) == cfg_lower && ts_dtype_of(y_conv) == cfg_lower);
    /* |sum of 16 products of |v| <= 1| <= 16; bf16 keeps 8 significant bits */
    const double tol = cfg_lower == TS_BF16 ? 0.15 : 0.02;
    CHECK(max_diff(y_mm, ref_mm, 40) < tol);
    CHECK(max_diff(y_lin, ref_lin, 40) < tol);
    CHECK(max_diff(y_conv, ref_conv, ts_numel(ref_conv)) < 2 * tol);
    CHECK(max_diff(y_mm, ref_mm, 40) > 0); /* it did run in lower precision */
    ts_scope_end();
}

/* fp32 ops on lower-precision input compute in f32: the result equals the f32 op on the same
 * (exactly widened) values, which a lower-precision computation would miss by ~1e-3. CUDA's lists
 * (sim); the CPU's do not list softmax, sum or exp: they stay in the lower dtype there. */
static void test_fp32_values(void) {
    ts_scope_begin();
    ts_tensor *x = randu(TS_SHAPE(4, 33), cfg_lower, -3, 3);
    ts_tensor *xf = ts_to_dtype(x, TS_F32);
    ts_tensor *ref_sm = ts_softmax(xf, 1), *ref_sum = ts_sum_dim(xf, 1, false);
    ts_tensor *ref_exp = ts_exp(xf);
    ts_autocast_begin(cfg_dev.type, cfg_lower);
    ts_tensor *sm = ts_softmax(x, 1), *sum = ts_sum_dim(x, 1, false), *e = ts_exp(x);
    ts_autocast_end();
    CHECK_OK();
    if (cfg_dev.type == TS_CPU) {
        CHECK(ts_dtype_of(sm) == cfg_lower && ts_dtype_of(sum) == cfg_lower &&
              ts_dtype_of(e) == cfg_lower);
    } else {
        CHECK(max_diff(sm, ref_sm, 4 * 33) < 1e-6);
        CHECK(max_diff(sum, ref_sum, 4) < 1e-4);
        CHECK(max_diff(e, ref_exp, 4 * 33) < 1e-4);
    }
    /* and without autocast the same ops stay in lower precision */
    CHECK(ts_dtype_of(ts_softmax(x, 1)) == cfg_lower);
    ts_scope_end();
}

/* Binary elementwise ops take mixed f32 / lower inputs by type promotion, in and out of regions,
 * and send each input its gradient in its own dtype. */
static void test_binary_mixed(void) {
    ts_scope_begin();
    for (int region = 0; region < 2; region++) {
        ts_tensor *a = randu(TS_SHAPE(3, 4), TS_F32, -1, 1);
        ts_tensor *b = randu(TS_SHAPE(3, 4), cfg_lower, -1, 1);
        ts_set_requires_grad(a, true);
        ts_set_requires_grad(b, true);
        if (region) ts_autocast_begin(cfg_dev.type, cfg_lower);
        ts_tensor *y = ts_add(ts_mul(a, b), ts_sub(b, a));
        ts_tensor *loss = ts_sum(y);
        if (region) ts_autocast_end();
        CHECK(ts_dtype_of(y) == TS_F32);
        ts_backward(loss);
        CHECK_OK();
        CHECK(ts_grad(a) && ts_dtype_of(ts_grad(a)) == TS_F32);
        CHECK(ts_grad(b) && ts_dtype_of(ts_grad(b)) == cfg_lower);
        /* d/da = b - 1, d/db = a + 1 */
        CHECK(max_diff(ts_grad(a), ts_sub_scalar(ts_to_dtype(b, TS_F32), 1), 12) < 1e-6);
        CHECK(max_diff(ts_grad(b), ts_add_scalar(a, 1), 12) < 2e-2);
    }
    ts_scope_end();
}

/* The f16/bf16 max-pool fast path (kernel 2, stride 2) gives the f32 pool's values and argmax on
 * the same values: ties (frequent after rounding) keep the first element, NaN wins. */
static void test_half_max_pool(void) {
    ts_scope_begin();
    ts_tensor *x = ts_div_scalar(ts_round(randu(TS_SHAPE(2, 3, 8, 9), TS_F32, -4, 4)), 4);
    bool nan_at[2 * 3 * 8 * 9] = {false};
    nan_at[5] = nan_at[77] = nan_at[78] = true; /* a NaN, and two in one window */
    ts_tensor *mask =
        ts_from_data(TS_SHAPE(2, 3, 8, 9), TS_BOOL, nan_at, (ts_opts){.device = cfg_dev});
    x = ts_to_dtype(ts_masked_fill(x, mask, NAN), cfg_lower);
    ts_tensor *xf = ts_to_dtype(x, TS_F32);
    ts_set_requires_grad(x, true);
    ts_set_requires_grad(xf, true);
    ts_pool2d_opts o = {.kernel = {2, 2}};
    ts_tensor *y = ts_max_pool2d(x, o), *yf = ts_max_pool2d(xf, o);
    CHECK(y && ts_dtype_of(y) == cfg_lower);
    /* the gradient of the sum marks each window's argmax */
    ts_backward(ts_sum(ts_to_dtype(ts_where(ts_ne(y, y), ts_zeros_like(y), y), TS_F32)));
    ts_backward(ts_sum(ts_where(ts_ne(yf, yf), ts_zeros_like(yf), yf)));
    CHECK_OK();
    const int64_t ny = 2 * 3 * 4 * 4, nx = 2 * 3 * 8 * 9;
    double a[2 * 3 * 8 * 9], b[2 * 3 * 8 * 9];
    host(y, a, ny);
    host(yf, b, ny);
    bool same = true;
    for (int64_t i = 0; i < ny; i++) same &= isnan(a[i]) ? isnan(b[i]) : a[i] == b[i];
    CHECK(same);
    host(ts_grad(x), a, nx);
    host(ts_grad(xf), b, nx);
    same = true;
    for (int64_t i = 0; i < nx; i++) same &= a[i] == b[i];
    CHECK(same);
    ts_scope_end();
}

/* ==================================================================== gradients */
/* The casts are differentiable: a linear layer's f32 parameters get f32 gradients. */
static void test_gradients(void) {
    ts_scope_begin();
    ts_tensor *x = randu(TS_SHAPE(5, 3), TS_F32, -1, 1);
    ts_tensor *w = randu(TS_SHAPE(4, 3), TS_F32, -1, 1), *b = randu(TS_SHAPE(4), TS_F32, -1, 1);
    ts_set_requires_grad(x, true);
    ts_set_requires_grad(w, true);
    ts_set_requires_grad(b, true);
    ts_autocast_begin(cfg_dev.type, cfg_lower);
    ts_tensor *y = ts_linear(x, w, b);
    ts_tensor *loss = ts_sum(y); /* fp32 on CUDA's lists (sim); the CPU's leave sum alone */
    ts_autocast_end();
    CHECK(ts_dtype_of(y) == cfg_lower &&
          ts_dtype_of(loss) == (cfg_dev.type == TS_CPU ? cfg_lower : TS_F32));
    CHECK_STREQ(ts_grad_fn_name(loss), "SumBackward0");
    ts_backward(loss);
    CHECK_OK();
    ts_tensor *gw = ts_grad(w), *gb = ts_grad(b), *gx = ts_grad(x);
    CHECK(gw && gb && gx);
    if (gw && gb && gx) {
        CHECK(ts_dtype_of(gw) == TS_F32 && ts_dtype_of(gb) == TS_F32 && ts_dtype_of(gx) == TS_F32);
        /* d sum(x w^T + b) / dw[o, k] = sum_i x[i, k]; / db = 5; / dx[i, k] = sum_o w[o, k] */
        double xs[15], ws[12], g[15];
        host(x, xs, 15);
        host(w, ws, 12);
        host(gw, g, 12);
        for (int o = 0; o < 4; o++)
            for (int k = 0; k < 3; k++) {
                double s = 0;
                for (int i = 0; i < 5; i++) s += xs[i * 3 + k];
                CHECK_NEAR(g[o * 3 + k], s, 0.05);
            }
        host(gb, g, 4);
        for (int o = 0; o < 4; o++) CHECK_NEAR(g[o], 5.0, 1e-6);
        host(gx, g, 15);
        for (int i = 0; i < 5; i++)
            for (int k = 0; k < 3; k++) {
                double s = 0;
                for (int o = 0; o < 4; o++) s += ws[o * 3 + k];
                CHECK_NEAR(g[i * 3 + k], s, 0.05);
            }
    }
    ts_scope_end();
}

/* ts_backward inside a region (not what PyTorch recommends, but allowed): the gradients still
 * reach the parameters in their dtype. */
static void test_backward_in_region(void) {
    ts_scope_begin();
    ts_tensor *x = randu(TS_SHAPE(4, 6), TS_F32, -1, 1);
    ts_tensor *w = randu(TS_SHAPE(3, 6), TS_F32, -1, 1), *b = randu(TS_SHAPE(3), TS_F32, -1, 1);
    ts_set_requires_grad(w, true);
    ts_set_requires_grad(b, true);
    ts_autocast_begin(cfg_dev.type, cfg_lower);
    ts_tensor *logits = ts_linear(ts_exp(x), w, b);
    ts_tensor *loss =
        ts_cross_entropy(logits, ts_tensor_i64(TS_SHAPE(4), (const int64_t[]){0, 2, 1, 1},
                                               (ts_opts){.device = cfg_dev}));
    ts_backward(loss);
    ts_autocast_end();
    CHECK_OK();
    CHECK(ts_grad(w) && ts_dtype_of(ts_grad(w)) == TS_F32);
    CHECK(ts_grad(b) && ts_dtype_of(ts_grad(b)) == TS_F32);
    ts_scope_end();
}

/* cat's argument list of any length: more tensors than the frame keeps inline */
static void test_long_list(void) {
    ts_scope_begin();
    ts_tensor *ts[11];
    for (int i = 0; i < 11; i++) {
        ts[i] = randu(TS_SHAPE(1, 2), i % 3 ? cfg_lower : TS_F32, -1, 1);
        ts_set_requires_grad(ts[i], true);
    }
    ts_autocast_begin(cfg_dev.type, cfg_lower);
    ts_tensor *c = ts_cat(ts, 11, 0), *all_low = ts_stack(ts + 1, 2, 0);
    ts_autocast_end();
    CHECK(c && ts_dtype_of(c) == TS_F32 && ts_size(c, 0) == 11);
    CHECK(all_low && ts_dtype_of(all_low) == cfg_lower);
    ts_backward(ts_sum(c));
    CHECK_OK();
    for (int i = 0; i < 11; i++)
        CHECK(ts_grad(ts[i]) && ts_dtype_of(ts_grad(ts[i])) == ts_dtype_of(ts[i]));
    ts_scope_end();
}

/* ==================================================================== regions */
static void test_nesting(void) {
    ts_scope_begin();
    ts_tensor *a = randu(TS_SHAPE(2, 3), TS_F32, -1, 1), *b = randu(TS_SHAPE(3, 2), TS_F32, -1, 1);
    const ts_device_type t = cfg_dev.type;
    CHECK(!ts_autocast_is_enabled(t));
    ts_autocast_begin(t, cfg_lower);
    CHECK(ts_autocast_is_enabled(t) && ts_autocast_get_dtype(t) == cfg_lower);
    CHECK(ts_dtype_of(ts_mm(a, b)) == cfg_lower);
    ts_autocast_begin_ex(t, (ts_autocast_opts){.disabled = true}); /* enabled=False */
    CHECK(!ts_autocast_is_enabled(t));
    CHECK(ts_dtype_of(ts_mm(a, b)) == TS_F32);
    ts_autocast_begin(t, cfg_other); /* a nested region with the other dtype */
    CHECK(ts_dtype_of(ts_mm(a, b)) == cfg_other);
    ts_autocast_end();
    CHECK(ts_dtype_of(ts_mm(a, b)) == TS_F32);
    ts_autocast_end();
    CHECK(ts_dtype_of(ts_mm(a, b)) == cfg_lower);
    ts_autocast_end();
    CHECK(!ts_autocast_is_enabled(t));
    CHECK(ts_dtype_of(ts_mm(a, b)) == TS_F32);
    CHECK_OK();
    ts_scope_end();
}

/* A region for one device type leaves ops on the others alone. */
static void test_device_types(void) {
    ts_scope_begin();
    ts_tensor *ac = ts_rand(TS_SHAPE(2, 3), (ts_opts){0}),
              *bc = ts_rand(TS_SHAPE(3, 2), (ts_opts){0});
    ts_tensor *as = ts_to(ac, ts_sim(1)), *bs = ts_to(bc, ts_sim(1));
    ts_autocast_begin(TS_SIM, TS_DTYPE_DEFAULT);
    CHECK(ts_dtype_of(ts_mm(as, bs)) == TS_BF16); /* the default on sim */
    CHECK(ts_dtype_of(ts_mm(ac, bc)) == TS_F32);
    CHECK(!ts_autocast_is_enabled(TS_CPU));
    ts_autocast_end();
    ts_autocast_begin(TS_CPU, TS_DTYPE_DEFAULT);
    CHECK(ts_dtype_of(ts_mm(ac, bc)) == TS_BF16);
    CHECK(ts_dtype_of(ts_mm(as, bs)) == TS_F32);
    ts_autocast_end();
    /* TS_DEVICE_DEFAULT is the default device's type */
    ts_device_push(ts_sim(0));
    ts_autocast_begin(TS_DEVICE_DEFAULT, TS_F16);
    CHECK(ts_autocast_is_enabled(TS_SIM) && !ts_autocast_is_enabled(TS_CPU));
    CHECK(ts_dtype_of(ts_mm(as, bs)) == TS_F16);
    ts_autocast_end();
    ts_device_pop();
    CHECK(ts_autocast_get_dtype(TS_CPU) == TS_BF16 && ts_autocast_get_dtype(TS_SIM) == TS_BF16 &&
          ts_autocast_get_dtype(TS_CUDA) == TS_F16);
    CHECK_OK();
    ts_scope_end();
}

typedef struct thread_arg {
    ts_device dev;
    bool enabled_seen;
    ts_dtype dtype_seen;
    bool carry_state;
    tsi_autocast_state state;
    ts_tensor *param;
} thread_arg;

static void *other_thread(void *p) {
    thread_arg *t = p;
    if (t->carry_state) tsi_autocast_state_set(&t->state);
    ts_scope_begin();
    t->enabled_seen = ts_autocast_is_enabled(t->dev.type);
    ts_tensor *x = ts_rand(TS_SHAPE(2, 3), (ts_opts){.device = t->dev});
    ts_tensor *w = t->param ? t->param : ts_rand(TS_SHAPE(4, 3), (ts_opts){.device = t->dev});
    t->dtype_seen = ts_dtype_of(ts_linear(x, w, NULL));
    ts_scope_end();
    /* a worker handed a state and never cleared: its cache goes with the thread */
    return NULL;
}

/* Regions are per thread; the data-parallel hand-over (tsi_autocast_state_get/set) carries one. */
static void test_threads(void) {
    ts_scope_begin();
    ts_mem_stats before, after;
    ts_memory_stats(cfg_dev, &before);
    ts_tensor *w = randu(TS_SHAPE(4, 3), TS_F32, -1, 1);
    ts_set_requires_grad(w, true);
    ts_autocast_begin(cfg_dev.type, cfg_lower);
    thread_arg a = {.dev = cfg_dev, .param = w};
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, other_thread, &a), 0);
    pthread_join(th, NULL);
    CHECK(!a.enabled_seen && a.dtype_seen == TS_F32);
    thread_arg b = {.dev = cfg_dev, .param = w, .carry_state = true};
    b.state = tsi_autocast_state_get();
    CHECK_EQ(pthread_create(&th, NULL, other_thread, &b), 0);
    pthread_join(th, NULL);
    CHECK(b.enabled_seen && b.dtype_seen == cfg_lower);
    ts_autocast_end();
    /* and a region in another thread does not reach this one */
    CHECK(!ts_autocast_is_enabled(cfg_dev.type));
    ts_scope_end();
    /* the worker's cached cast of w (and w) are gone: nothing outlives the threads */
    ts_memory_stats(cfg_dev, &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    CHECK_OK();
}

/* ==================================================================== the cache */
static void test_cache(void) {
    ts_mem_stats before, after;
    ts_memory_stats(cfg_dev, &before);
    ts_scope_begin();
    ts_tensor *x = randu(TS_SHAPE(5, 3), TS_F32, -1, 1), *x2 = randu(TS_SHAPE(2, 3), TS_F32, -1, 1);
    ts_tensor *w = randu(TS_SHAPE(4, 3), TS_F32, -1, 1);
    ts_set_requires_grad(w, true);

    /* the same parameter used twice in a region is cast once: the inputs (no grad) each time */
    ts_autocast_begin(cfg_dev.type, cfg_lower);
    uint64_t c0 = tsi_autocast_cast_count;
    ts_tensor *y1 = ts_linear(x, w, NULL), *y2 = ts_linear(x2, w, NULL);
    CHECK_EQ(tsi_autocast_cast_count - c0, 3);
    CHECK_EQ(tsi_autocast_cache_size(), 1);
    ts_tensor *k1 = tsi_autocast_cast("test", w, cfg_lower),
              *k2 = tsi_autocast_cast("test", w, cfg_lower);
    CHECK(k1 && k1 == k2); /* the same tensor object */
    CHECK_STREQ(ts_grad_fn_name(k1), "ToCopyBackward0");
    ts_release(k1);
    ts_release(k2);
    /* a nested region's end keeps the cache; only the outermost one releases it */
    ts_autocast_begin(cfg_dev.type, cfg_lower);
    ts_autocast_end();
    CHECK_EQ(tsi_autocast_cache_size(), 1);
    ts_tensor *loss = ts_add(ts_sum(y1), ts_sum(y2));
    ts_autocast_end();
    CHECK_EQ(tsi_autocast_cache_size(), 0);
    /* both uses reach w: grad[o, k] = sum of x's and x2's column k */
    ts_backward(loss);
    CHECK(ts_grad(w) && ts_dtype_of(ts_grad(w)) == TS_F32);
    if (ts_grad(w)) {
        ts_tensor *colsum = ts_add(ts_sum_dim(x, 0, true), ts_sum_dim(x2, 0, true));
        CHECK(max_diff(ts_grad(w), ts_expand(colsum, TS_SHAPE(4, 3)), 12) < 0.05);
    }
    ts_set_grad(w, NULL);

    /* cache_enabled=False: every use casts */
    ts_autocast_begin_ex(cfg_dev.type, (ts_autocast_opts){.dtype = cfg_lower, .no_cache = true});
    c0 = tsi_autocast_cast_count;
    ts_linear(x, w, NULL);
    ts_linear(x, w, NULL);
    CHECK_EQ(tsi_autocast_cast_count - c0, 4);
    CHECK_EQ(tsi_autocast_cache_size(), 0);
    ts_autocast_end();

    /* ts_autocast_clear_cache inside a region: the next use casts again */
    ts_autocast_begin(cfg_dev.type, cfg_lower);
    ts_linear(x, w, NULL);
    ts_autocast_clear_cache();
    CHECK_EQ(tsi_autocast_cache_size(), 0);
    c0 = tsi_autocast_cast_count;
    ts_linear(x, w, NULL);
    CHECK_EQ(tsi_autocast_cast_count - c0, 2);
    ts_autocast_end();

    /* a cast first made under no_grad still carries the graph for a later use with grad on */
    ts_autocast_begin(cfg_dev.type, cfg_lower);
    ts_no_grad_begin();
    ts_tensor *yn = ts_linear(x, w, NULL);
    ts_no_grad_end();
    CHECK(!ts_requires_grad(yn));
    c0 = tsi_autocast_cast_count;
    ts_tensor *yg = ts_linear(x, w, NULL);
    CHECK_EQ(tsi_autocast_cast_count - c0, 1); /* x only: w's cast came from the cache */
    ts_tensor *lg = ts_sum(yg);
    ts_autocast_end();
    ts_backward(lg);
    CHECK(ts_grad(w) != NULL);
    if (ts_grad(w))
        CHECK(max_diff(ts_grad(w), ts_expand(ts_sum_dim(x, 0, true), TS_SHAPE(4, 3)), 12) < 0.05);

    /* a parameter changed in place (an optimizer step) is cast again, never served stale */
    ts_autocast_begin(cfg_dev.type, cfg_lower);
    ts_tensor *before_step = ts_linear(x, w, NULL);
    ts_no_grad_begin();
    ts_mul_scalar_(w, 2.0);
    ts_no_grad_end();
    c0 = tsi_autocast_cast_count;
    ts_tensor *after_step = ts_linear(x, w, NULL);
    CHECK_EQ(tsi_autocast_cast_count - c0, 2);
    CHECK_EQ(tsi_autocast_cache_size(), 1);
    ts_autocast_end();
    CHECK(max_diff(after_step, ts_mul_scalar(before_step, 2), 20) < 1e-6);

    /* what is not a parameter is not cached: a non-leaf, a view, a tensor without grad */
    ts_autocast_begin(cfg_dev.type, cfg_lower);
    ts_linear(x, ts_mul_scalar(w, 1.0), NULL);
    ts_linear(x, ts_narrow(w, 0, 0, 2), NULL);
    ts_linear(x, x, NULL);
    CHECK_EQ(tsi_autocast_cache_size(), 0);
    ts_autocast_end();
    CHECK_OK();
    ts_scope_end();
    /* nothing cached outlives the regions */
    ts_memory_stats(cfg_dev, &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
}

/* ==================================================================== errors */
static void test_errors(void) {
    ts_autocast_end();
    CHECK_ERR(TS_ERR_STATE);
    ts_autocast_begin(TS_CPU, TS_F64);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(!ts_autocast_is_enabled(TS_CPU));
    ts_autocast_end(); /* the failed begin still opened a region: begin/end stay paired */
    CHECK_OK();
    ts_autocast_begin(TS_SIM, TS_I32);
    CHECK_ERR(TS_ERR_DTYPE);
    ts_autocast_end();
    ts_autocast_begin((ts_device_type)9, TS_BF16);
    CHECK_ERR(TS_ERR_ARG);
    ts_autocast_end();
    CHECK_OK();
    ts_autocast_end();
    CHECK_ERR(TS_ERR_STATE);
    /* NULL inputs and pending errors pass through a region like anywhere else */
    ts_autocast_begin(TS_CPU, TS_BF16);
    CHECK(ts_mm(NULL, NULL) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_autocast_end();
    CHECK_EQ(tsi_autocast_any, 0);
}

/* ==================================================================== LeNet-5 */
static ts_module *lenet(void) {
    ts_module *m[] = {
        ts_conv2d_new(1, 6, 5, (ts_conv2d_opts){.padding = {2, 2}}),
        ts_relu_new(),
        ts_max_pool2d_new((ts_pool2d_opts){.kernel = {2, 2}}),
        ts_conv2d_new(6, 16, 5, (ts_conv2d_opts){0}),
        ts_relu_new(),
        ts_max_pool2d_new((ts_pool2d_opts){.kernel = {2, 2}}),
        ts_flatten_new(1, -1),
        ts_linear_new(400, 120),
        ts_relu_new(),
        ts_linear_new(120, 84),
        ts_relu_new(),
        ts_linear_new(84, 10),
    };
    return ts_sequential_new((int)(sizeof m / sizeof m[0]), m);
}

/* Forward + backward of LeNet-5 on a batch, with or without autocast; returns the loss and
 * leaves the gradients on the parameters. */
static double lenet_step(ts_module *net, ts_tensor *x, ts_tensor *y, bool autocast,
                         ts_dtype *out_dtype) {
    ts_scope_begin();
    if (autocast) ts_autocast_begin(cfg_dev.type, cfg_lower);
    ts_tensor *logits = ts_forward(net, x);
    ts_tensor *loss = ts_cross_entropy(logits, y);
    if (autocast) ts_autocast_end();
    *out_dtype = logits ? ts_dtype_of(logits) : TS_DTYPE_DEFAULT;
    CHECK(loss && ts_dtype_of(loss) == TS_F32);
    ts_backward(loss);
    double v = ts_item(loss);
    ts_scope_end();
    return v;
}

static void test_lenet(void) {
    ts_manual_seed(7);
    ts_device_push(cfg_dev);
    ts_module *net = lenet();
    ts_device_pop();
    ts_scope_begin();
    ts_tensor *x = randu(TS_SHAPE(8, 1, 28, 28), TS_F32, 0, 1);
    ts_tensor *y = ts_randint(0, 10, TS_SHAPE(8), (ts_opts){.device = cfg_dev});
    ts_tensor_list params = ts_module_named_parameters(net);
    ts_dtype dt;
    double loss32 = lenet_step(net, x, y, false, &dt);
    CHECK(dt == TS_F32);
    ts_tensor **g32 = calloc((size_t)params.n, sizeof *g32);
    for (int i = 0; i < params.n; i++) {
        g32[i] = ts_clone(ts_grad(params.tensors[i]));
        ts_set_grad(params.tensors[i], NULL);
    }
    double loss_ac = lenet_step(net, x, y, true, &dt);
    CHECK_OK();
    CHECK(dt == cfg_lower);
    CHECK_NEAR(loss_ac, loss32, 0.02 * fabs(loss32));
    for (int i = 0; i < params.n; i++) {
        ts_tensor *g = ts_grad(params.tensors[i]);
        CHECK(g && ts_dtype_of(g) == TS_F32);
        if (!g || !g32[i]) continue;
        /* relative error of the whole gradient, in the 2-norm */
        int64_t n = ts_numel(g);
        double *a = calloc((size_t)n, sizeof *a), *b = calloc((size_t)n, sizeof *b), num = 0,
               den = 0;
        host(g, a, n);
        host(g32[i], b, n);
        for (int64_t k = 0; k < n; k++) num += (a[k] - b[k]) * (a[k] - b[k]), den += b[k] * b[k];
        const double rel = sqrt(num / (den + 1e-30));
        /* The last layer's gradient only sees rounding (PyTorch 1.13's bf16 autocast: ~0.5%). The
         * earlier ones also see relu masks and max-pool choices that flip where rounding makes
         * values cross or tie: PyTorch's own bf16 LeNet-5 gradients differ from its f32 ones by
         * 5-19% in the convolutions (seeds 0-2, batch 8), and so do ours. */
        const double tol = i >= params.n - 2 ? 0.02 : 0.3;
        ts_test_record(rel < tol);
        if (rel >= tol)
            ts_test_failf(__FILE__, __LINE__, "%s: LeNet gradient of %s off by %.3g", cfg_name,
                          params.names[i], rel);
        free(a);
        free(b);
    }
    free(g32);
    ts_tensor_list_free(&params);
    ts_scope_end();
    ts_module_free(net);
}

/* ==================================================================== main */
int main(void) {
    if (ts_device_count(TS_SIM) < 2) return ts_test_skip("needs TS_SIM_DEVICES >= 2");
    ts_manual_seed(1);
    for (size_t c = 0; c < N_AUTOCAST_CFGS; c++) {
        autocast_cfg_select(c);
        test_lower_values();
        test_fp32_values();
        test_half_max_pool();
        test_binary_mixed();
        test_gradients();
        test_backward_in_region();
        test_long_list();
        test_nesting();
        test_threads();
        /* the cache serves products whose parameters are cast: not where a CPU's products take
         * float32 operands (bf16 without AVX512-BF16, test_autocast_products.c); the sim
         * configurations test it on every host */
        if (tsi_autocast_products_native(cfg_dev, cfg_lower))
            test_cache();
        else
            printf("%s: cache test skipped: products take float32 operands here\n", cfg_name);
        test_lenet();
    }
    test_device_types();
    test_errors();
    return ts_test_finish();
}
