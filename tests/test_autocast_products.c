/* test_autocast_products.c — autocast's products (mm, matmul, bmm, linear) where the device does
 * not multiply the region's half dtype natively (TSI_AC_LOWER_PRODUCT, src/amp/autocast_policy.c):
 * bf16 on a CPU without AVX512-BF16 (or under an ISA cap: this test is in the *_avx2 / *_generic
 * reruns), f16 on any CPU. There the products take float32 operands as they are and round the
 * result, so a sum that cancels shows the difference: a = [1 + e, -1], b = [1, 1] with e below
 * the half dtype's spacing at 1 gives e (float32 operands, the exact sum e rounded) where the
 * native path gives 0 (a rounded to [1, -1] first). Also: gradients against float64 at float32's
 * bound (the native path's rounding of operands and gradients is 2^16 times coarser), the graph
 * and dtypes the user sees, no float32 result left behind, errors, and the sim device (a GPU's
 * stand-in: native on every host). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "amp/autocast.h"
#include "bf16_check.h"
#include "ts_test.h"

/* Whether autocast's products on dev in dt should keep half operands here (the expectation, from
 * the host's cpuid and the run's caps, not from the code under test). */
static bool expect_native(ts_device_type dev, ts_dtype dt) {
    if (dev == TS_SIM) return true;
#ifdef TS_HAVE_DNNL
    return dt == TS_BF16 && ts_test_host_has_bf16() && !ts_test_bf16_cap(false);
#else
    (void)dt;
    return false; /* the bf16 kernels are oneDNN's: a build without it widens */
#endif
}

/* e: below the half dtype's spacing at 1 (bf16 2^-7, f16 2^-10), exact in it and in float32 */
static double tiny_of(ts_dtype dt) { return dt == TS_BF16 ? ldexp(1, -10) : ldexp(1, -12); }

/* ==================================================================== the cancelling sum */
static void test_cancelling_sum(ts_device dev, ts_dtype lower) {
    ts_scope_begin();
    const double e = tiny_of(lower);
    const float av[2] = {(float)(1 + e), -1.0f}, bv[2] = {1.0f, 1.0f};
    ts_opts o = {.device = dev};
    ts_tensor *a = ts_from_data(TS_SHAPE(1, 2), TS_F32, av, o),
              *b = ts_from_data(TS_SHAPE(2, 1), TS_F32, bv, o);
    ts_tensor *bt = ts_reshape(b, TS_SHAPE(1, 2)); /* linear's weight [out 1, in 2] */
    ts_tensor *a3 = ts_reshape(a, TS_SHAPE(1, 1, 2)), *b3 = ts_reshape(b, TS_SHAPE(1, 2, 1));
    const double want = expect_native(dev.type, lower) ? 0.0 : e;
    const int depth = ts_scope_depth();
    ts_autocast_begin(dev.type, lower);
    ts_tensor *ys[4] = {ts_mm(a, b), ts_matmul(a, b), ts_bmm(a3, b3), ts_linear(a, bt, NULL)};
    ts_autocast_end();
    CHECK_OK();
    CHECK_EQ(ts_scope_depth(), depth);
    const char *names[4] = {"mm", "matmul", "bmm", "linear"};
    for (int i = 0; i < 4; i++) {
        CHECK(ys[i] && ts_dtype_of(ys[i]) == lower);
        if (!ys[i]) continue;
        const double got = ts_item(ys[i]);
        if (got != want)
            printf("  %s %s on %s: %g, want %g\n", names[i], ts_dtype_name(lower),
                   dev.type == TS_SIM ? "sim" : "cpu", got, want);
        CHECK(got == want);
    }
    /* a half operand is widened exactly: [1, -1] in the half dtype against b gives 0 either way,
     * and a float64 operand is not autocast's (float64 result, not rounded) */
    ts_tensor *ah = ts_to_dtype(a, lower), *a64 = ts_to_dtype(a, TS_F64);
    ts_tensor *b64 = ts_to_dtype(b, TS_F64);
    ts_autocast_begin(dev.type, lower);
    ts_tensor *yh = ts_mm(ah, b), *y64 = ts_mm(a64, b64);
    ts_autocast_end();
    CHECK(yh && ts_dtype_of(yh) == lower && ts_item(yh) == 0.0);
    CHECK(y64 && ts_dtype_of(y64) == TS_F64 && ts_item(y64) == e);
    CHECK_OK();
    ts_scope_end();
}

/* ==================================================================== gradients */
/* sum(linear(x, w)) under autocast: dw[o, k] = sum_i x[i, k], dx[i, k] = sum_o w[o, k]. Float32
 * operands kept: float32 sums of n terms of float32 values, within gamma_n sum |.| of the exact
 * ones (n u / (1 - n u), u = 2^-24), plus the widened gradient's ones, which are exact. The native
 * path rounds x and w to the half dtype first: errors of ~2^-9 |value|, far outside that bound. */
static double f32_bound(int n, double mag) {
    const double u = ldexp(1, -24);
    return (n * u / (1 - n * u)) * mag;
}

static void test_gradients(ts_device dev, ts_dtype lower) {
    ts_scope_begin();
    enum { N = 64, IN = 3, OUT = 4 };
    ts_manual_seed(7);
    ts_opts o = {.device = dev};
    ts_tensor *x = ts_add_scalar(ts_rand(TS_SHAPE(N, IN), o), 0.5);
    ts_tensor *w = ts_add_scalar(ts_rand(TS_SHAPE(OUT, IN), o), 0.5);
    ts_set_requires_grad(x, true);
    ts_set_requires_grad(w, true);
    ts_autocast_begin(dev.type, lower);
    ts_tensor *y = ts_linear(x, w, NULL);
    ts_tensor *loss = ts_sum(y);
    ts_autocast_end();
    CHECK(y && ts_dtype_of(y) == lower);
    const bool native = expect_native(dev.type, lower);
    /* what the user sees of the graph: the product's node, or the rounding of its float32 result */
    CHECK_STREQ(ts_grad_fn_name(y), native ? "MmBackward0" : "ToCopyBackward0");
    ts_backward(loss);
    CHECK_OK();
    ts_tensor *gw = ts_grad(w), *gx = ts_grad(x);
    CHECK(gw && gx && ts_dtype_of(gw) == TS_F32 && ts_dtype_of(gx) == TS_F32);
    if (!gw || !gx) {
        ts_scope_end();
        return;
    }
    float xs[N * IN], ws[OUT * IN], gws[OUT * IN], gxs[N * IN];
    ts_copy_to_host(ts_to(x, ts_cpu()), xs, sizeof xs);
    ts_copy_to_host(ts_to(w, ts_cpu()), ws, sizeof ws);
    ts_copy_to_host(ts_to(gw, ts_cpu()), gws, sizeof gws);
    ts_copy_to_host(ts_to(gx, ts_cpu()), gxs, sizeof gxs);
    /* native: bf16 / f16 operands and a rounded gradient, bounded by the dtype's rounding */
    const double rel = native ? (lower == TS_BF16 ? ldexp(1, -6) : ldexp(1, -9)) : 0;
    int bad = 0;
    for (int k = 0; k < IN; k++) {
        double s = 0; /* the values are positive: sum |x| = sum x */
        for (int i = 0; i < N; i++) s += xs[i * IN + k];
        for (int oo = 0; oo < OUT; oo++)
            bad += fabs(gws[oo * IN + k] - s) > f32_bound(N, s) + rel * s;
        double t = 0;
        for (int oo = 0; oo < OUT; oo++) t += ws[oo * IN + k];
        for (int i = 0; i < N; i++) bad += fabs(gxs[i * IN + k] - t) > f32_bound(OUT, t) + rel * t;
    }
    CHECK_EQ(bad, 0);
    if (!native) {
        /* and the float32 operands did reach the product: the half dtype's rounding of x would
         * move dw's first column by more than float32's bound */
        double s = 0, sh = 0;
        for (int i = 0; i < N; i++) {
            s += xs[i * IN];
            sh += ts_item(ts_to_dtype(ts_select(ts_select(x, 0, i), 0, 0), lower));
        }
        CHECK(fabs(sh - s) > f32_bound(N, s));
    }

    /* a half leaf's gradient comes back in its dtype (ToCopyBackward0 rounds it) */
    ts_tensor *xh = ts_to_dtype(ts_detach(x), lower);
    ts_set_requires_grad(xh, true);
    ts_autocast_begin(dev.type, lower);
    ts_tensor *lh = ts_sum(ts_linear(xh, w, NULL));
    ts_autocast_end();
    ts_backward(lh);
    CHECK(ts_grad(xh) && ts_dtype_of(ts_grad(xh)) == lower);
    CHECK_OK();
    ts_scope_end();
}

/* ==================================================================== the other policies */
/* Only the four products change: an fp32 op, a promoting one and the convolution (lower, keeps
 * its half operands everywhere) give the dtypes and graph they give on a native device. */
static void test_other_ops_unchanged(ts_device dev, ts_dtype lower) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    ts_tensor *x = ts_rand(TS_SHAPE(2, 3, 6, 6), o), *w = ts_rand(TS_SHAPE(4, 3, 3, 3), o);
    ts_tensor *h = ts_to_dtype(ts_rand(TS_SHAPE(4, 5), o), lower), *f = ts_rand(TS_SHAPE(4, 5), o);
    ts_set_requires_grad(w, true);
    ts_autocast_begin(dev.type, lower);
    ts_tensor *sm = ts_prod(h); /* fp32 (on the CPU's and CUDA's lists) */
    ts_tensor *cat = ts_cat((ts_tensor *const[]){h, f}, 2, 0); /* promote */
    ts_tensor *hh = ts_cat((ts_tensor *const[]){h, h}, 2, 0);  /* promote, both half */
    ts_tensor *c = ts_conv2d(x, w, NULL, (ts_conv2d_opts){0}); /* lower, operands cast */
    ts_autocast_end();
    CHECK_OK();
    CHECK(sm && ts_dtype_of(sm) == TS_F32);
    CHECK(cat && ts_dtype_of(cat) == TS_F32);
    CHECK(hh && ts_dtype_of(hh) == lower);
    CHECK(c && ts_dtype_of(c) == lower);
    CHECK(c && strcmp(ts_grad_fn_name(c), "ToCopyBackward0") != 0);
    ts_scope_end();
}

/* ==================================================================== memory and errors */
static void test_nothing_left(ts_device dev, ts_dtype lower) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    ts_tensor *a = ts_rand(TS_SHAPE(8, 16), o), *b = ts_rand(TS_SHAPE(16, 4), o);
    ts_tensor *w = ts_rand(TS_SHAPE(4, 16), o), *bias = ts_rand(TS_SHAPE(4), o);
    ts_mem_stats before, after;
    ts_autocast_begin(dev.type, lower);
    /* one live tensor more per product: its result (no float32 result, no cast left behind) */
    ts_memory_stats(dev, &before);
    ts_tensor *y1 = ts_mm(a, b), *y2 = ts_linear(a, w, bias);
    ts_memory_stats(dev, &after);
    CHECK_EQ(after.live_tensors - before.live_tensors, 2);
    CHECK(y1 && y2 && ts_dtype_of(y2) == lower);
    /* a user's mistake: named by the op, nothing left behind, the scopes balanced */
    const int depth = ts_scope_depth();
    ts_memory_stats(dev, &before);
    ts_tensor *bad = ts_mm(a, w);
    CHECK(bad == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "mm:");
    ts_tensor *bad2 = ts_linear(a, b, NULL);
    CHECK(bad2 == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "linear:");
    ts_memory_stats(dev, &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    CHECK_EQ(ts_scope_depth(), depth);
    ts_autocast_end();
    CHECK_EQ(tsi_autocast_any, 0);
    ts_scope_end();
}

int main(void) {
    if (ts_device_count(TS_SIM) < 1) return ts_test_skip("needs TS_SIM_DEVICES >= 1");
    const char *cap = ts_test_bf16_cap(false);
    printf("host bf16: %s, cap: %s -> cpu bf16 products %s\n",
           ts_test_host_has_bf16() ? "yes" : "no", cap ? cap : "none",
           expect_native(TS_CPU, TS_BF16) ? "native" : "on float32 operands");
    const ts_device devs[2] = {ts_cpu(), {TS_SIM, 0}};
    const ts_dtype dts[2] = {TS_BF16, TS_F16};
    for (int d = 0; d < 2; d++)
        for (int t = 0; t < 2; t++) {
            test_cancelling_sum(devs[d], dts[t]);
            test_gradients(devs[d], dts[t]);
            test_other_ops_unchanged(devs[d], dts[t]);
            test_nothing_left(devs[d], dts[t]);
        }
    return ts_test_finish();
}
