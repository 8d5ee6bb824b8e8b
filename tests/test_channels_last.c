/* test_channels_last.c — the channels_last memory format (PyTorch's): ts_contiguous_format and
 * ts_is_contiguous_format, the ops that keep the format (elementwise, casts, clones, gradients),
 * and conv2d on NHWC activations, forward and both gradients, on cpu and sim:0 in float32, bf16,
 * float64 and f16, through oneDNN's NHWC primitives (no activation reorders: counted), through
 * NCHW copies (TS_CONV=builtin, float64, f16), and through the allocation-free loops when memory
 * runs out.
 *
 * Convolution bounds, per output against float64 convolutions of the same values: a float32 sum
 * of K products, |r - exact| <= gamma_{K+1} S (the product's rounding counted as one more term;
 * S the same sum over absolute values, gamma_k = k u / (1 - k u), u = 2^-24); float64 the same
 * with u = 2^-53 against a long-double-free reference: the NCHW float64 path (the same sums in
 * another order, so 2 gamma_{K+1} S); bf16 and f16 bf16_check.h's bound (a float32 sum rounded
 * once to the half dtype; f16 with 2^-11).
 *
 * On cuda:0 (when there is one; TS_REQUIRE_CUDA=1 makes its absence a failure, TS_TEST_ONLY_CUDA=1
 * tests it alone) the same cases run in float32, f16 and bf16 through cuDNN's NHWC convolutions
 * (cuda_conv_nhwc.cu), then again through its NCHW copies (TS_CUDA_TEST_CONV_NHWC_COPY=1), with
 * the fused bias + ReLU / clip epilogue, all against the float64 convolutions: the same bounds,
 * with two CUDA terms — the half dtypes' float32 accumulation on tensor cores is held to u = 2^-23
 * (their accumulators need not round to nearest), and a bias is added to the convolution's stored
 * half value (cudnnAddTensor's arithmetic, PyTorch's too), one more rounding of at most
 * u_half |y - bias| in the exact values. Under TS_CUDA_CONV_NHWC=0 the outputs are NCHW. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/conv_dnnl.h"
#include "backend/cpu/kern_conv_drivers.h"
#include "backend/cpu/matmul_dnnl.h"
#include "backend/cuda/cuda_bridge.h"
#include "backend/env_config.h"
#include "bf16_check.h"
#include "conv_sweep.h"
#include "fault_sweep.h"
#include "nn/conv_fused.h"
#include "tol_check.h"
#include "ts_test.h"

/* ------------------------------------------------------------------ the format itself */
static ts_tensor *randn(ts_shape s, ts_dtype dt, ts_device d) {
    return ts_to_dtype(ts_randn(s, (ts_opts){.dtype = TS_F32, .device = d}), dt);
}

static bool nhwc_strides(ts_tensor *t) {
    const ts_shape s = ts_shape_of(t);
    return ts_stride(t, 1) == 1 && ts_stride(t, 3) == s.dims[1] &&
           ts_stride(t, 2) == s.dims[1] * s.dims[3] &&
           ts_stride(t, 0) == s.dims[1] * s.dims[2] * s.dims[3];
}

static bool same_values(ts_tensor *a, ts_tensor *b) {
    ts_scope_begin();
    const bool eq = ts_item(ts_sum(ts_to_dtype(ts_eq(a, b), TS_F64))) == (double)ts_numel(a);
    ts_scope_end();
    return eq;
}

static void test_format(ts_device d) {
    ts_scope_begin();
    ts_tensor *x = randn(TS_SHAPE(2, 3, 4, 5), TS_F32, d);
    CHECK(ts_is_contiguous_format(x, TS_CONTIGUOUS_FORMAT));
    CHECK(!ts_is_contiguous_format(x, TS_CHANNELS_LAST));
    ts_tensor *c = ts_contiguous_format(x, TS_CHANNELS_LAST);
    CHECK(c && nhwc_strides(c) && ts_is_contiguous_format(c, TS_CHANNELS_LAST));
    CHECK(!ts_is_contiguous(c) && same_values(c, x));
    CHECK(ts_contiguous_format(c, TS_CHANNELS_LAST) == c); /* already: itself */
    /* a permuted NHWC tensor is the same layout */
    ts_tensor *p =
        ts_permute(ts_contiguous(ts_permute(x, TS_DIMS(0, 2, 3, 1))), TS_DIMS(0, 3, 1, 2));
    CHECK(ts_is_contiguous_format(p, TS_CHANNELS_LAST) && same_values(p, x));
    /* back to NCHW */
    ts_tensor *b = ts_contiguous(c);
    CHECK(ts_is_contiguous(b) && same_values(b, x));
    CHECK(ts_is_contiguous(ts_contiguous_format(c, TS_CONTIGUOUS_FORMAT)));
    /* dims of one element: both formats at once */
    ts_tensor *one = randn(TS_SHAPE(4, 8, 1, 1), TS_F32, d);
    CHECK(ts_is_contiguous_format(one, TS_CHANNELS_LAST) && ts_is_contiguous(one));
    /* kept: unary, binary (with a broadcast per-channel operand and a number), casts, clones,
     * activation gradients */
    CHECK(nhwc_strides(ts_relu(c)) && same_values(ts_relu(c), ts_relu(x)));
    ts_tensor *bias = randn(TS_SHAPE(3, 1, 1), TS_F32, d);
    CHECK(nhwc_strides(ts_add(c, bias)) && same_values(ts_add(c, bias), ts_add(x, bias)));
    CHECK(nhwc_strides(ts_mul(c, c)) && same_values(ts_mul(c, c), ts_mul(x, x)));
    CHECK(nhwc_strides(ts_add(x, c))); /* the operand that prefers it decides */
    CHECK(nhwc_strides(ts_mul_scalar(c, 2.0)) &&
          same_values(ts_mul_scalar(c, 2), ts_mul_scalar(x, 2)));
    ts_tensor *h = ts_to_dtype(c, TS_BF16);
    CHECK(nhwc_strides(h) && same_values(h, ts_to_dtype(x, TS_BF16)));
    CHECK(nhwc_strides(ts_clone(c)) && same_values(ts_clone(c), x));
    /* NCHW stays NCHW */
    CHECK(ts_is_contiguous(ts_relu(x)) && ts_is_contiguous(ts_add(x, x)));
    /* the gradient flows through the conversion to the NCHW leaf */
    ts_tensor *leaf = randn(TS_SHAPE(2, 3, 4, 5), TS_F32, d);
    ts_set_requires_grad(leaf, true);
    ts_tensor *r = ts_relu(ts_contiguous_format(leaf, TS_CHANNELS_LAST));
    CHECK(nhwc_strides(r));
    ts_backward(ts_sum(ts_mul(r, r)));
    /* d/dx sum(relu(x)^2) = 2 relu(x) */
    CHECK(ts_grad(leaf) && same_values(ts_grad(leaf), ts_mul_scalar(ts_relu(leaf), 2.0)));
    /* errors: not 4-D, unknown format; nothing else changes */
    CHECK(!ts_contiguous_format(randn(TS_SHAPE(3, 4, 5), TS_F32, d), TS_CHANNELS_LAST));
    CHECK(ts_error() == TS_ERR_SHAPE && strstr(ts_error_message(), "contiguous") &&
          strstr(ts_error_message(), "[3, 4, 5]"));
    ts_error_clear();
    CHECK(!ts_contiguous_format(x, (ts_memory_format)7) && ts_error() == TS_ERR_ARG);
    ts_error_clear();
    CHECK(!ts_contiguous_format(NULL, TS_CHANNELS_LAST) && ts_error() == TS_ERR_ARG);
    ts_error_clear();
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ conv2d */
typedef struct conv_case {
    const char *name;
    int64_t n, c, h, w, o, kh, kw;
    ts_conv2d_opts o_;
    bool bias;
    /* activation reorders of a forward + backward where oneDNN's NHWC kernels are not its fast
     * ones (below AVX-512: tsi_dnnl_conv_nhwc_native), by conv_dnnl.c's keeps_nhwc: 6 for a
     * convolution of 512 taps and 8 M multiply-adds or more (x and y, gy and gx, x and gy into and
     * out of the blocked layout), 2 for the weight gradient of a strided 1x1 one with fewer than 8
     * input channels (oneDNN 2.6.3's AVX2 NHWC kernel gets it wrong); else 0 */
    int reorders_blocked;
    /* the same with AVX-512 (keeps_nhwc's avx512_blocked_faster, float32 primitives): 2 for the
     * forward of a batch whose output is at most 4 pixels wide (x in, y out; dense, wider than
     * 1x1), 2 for the input gradient of 2048 taps per input element and up (gy in, gx out) */
    int reorders_avx512;
} conv_case;

static const conv_case CASES[] = {
    {"3x3 pad 1 (ResNet)", 2, 16, 10, 10, 32, 3, 3, {.padding = {1, 1}}, false, 0, 0},
    {"5x5 with bias, 3 channels in", 3, 3, 14, 14, 6, 5, 5, {.groups = 1}, true, 0, 0},
    {"stride 2, 1x1 (downsample)", 2, 32, 9, 9, 16, 1, 1, {.stride = {2, 2}}, false, 0, 0},
    {"dilated 3x3", 1, 8, 12, 12, 8, 3, 3, {.padding = {2, 2}, .dilation = {2, 2}}, true, 0, 0},
    {"grouped (4 groups)", 2, 16, 8, 8, 24, 3, 3, {.padding = {1, 1}, .groups = 4}, true, 0, 0},
    {"depthwise", 2, 12, 9, 9, 12, 3, 3, {.padding = {1, 1}, .groups = 12}, false, 0, 0},
    {"stride 2 3x3, odd sizes",
     2,
     16,
     11,
     7,
     16,
     3,
     3,
     {.stride = {2, 2}, .padding = {1, 1}},
     true,
     0,
     2},
    {"1x1 stride 2, 4 channels in", 2, 4, 12, 12, 8, 1, 1, {.stride = {2, 2}}, false, 2, 0},
    {"1x1 stride 2, 7 channels in", 3, 7, 9, 9, 5, 1, 1, {.stride = {2, 2}}, true, 2, 0},
    {"3x3, 64 channels (blocked below AVX-512)",
     2,
     64,
     16,
     16,
     64,
     3,
     3,
     {.padding = {1, 1}},
     false,
     6,
     0},
    {"3x3, 4x4 images (blocked forward with AVX-512)",
     2,
     32,
     4,
     4,
     32,
     3,
     3,
     {.padding = {1, 1}},
     true,
     0,
     2},
    {"3x3, one 4x4 image (NHWC: faster at batch 1)",
     1,
     32,
     4,
     4,
     32,
     3,
     3,
     {.padding = {1, 1}},
     false,
     0,
     0},
    {"3x3, 256 channels (blocked input gradient with AVX-512)",
     1,
     256,
     8,
     8,
     256,
     3,
     3,
     {.padding = {1, 1}},
     false,
     6,
     2},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

static double gamma_k(double k, double u) { return k * u / (1 - k * u); }

/* Every element of got within the bound of a float sum of K terms with unit roundoff u (half
 * dtypes: bf16_check.h's bound with their rounding on top), plus extra (NULL: none; else a
 * per-element amount in want's shape); returns the worst share of it. */
static double check_sum_extra(const char *what, ts_tensor *got, ts_tensor *want, ts_tensor *mag,
                              double K, double u, ts_tensor *extra) {
    const ts_dtype dt = ts_dtype_of(got);
    const int64_t n = ts_numel(want);
    double *g = ts_test_host_f64(got, n), *w = ts_test_host_f64(want, n),
           *m = ts_test_host_f64(mag, n), *tol = malloc((size_t)n * sizeof *tol);
    double *x = extra ? ts_test_host_f64(extra, n) : NULL;
    double worst = 0;
    const double uh = ts_test_unit_roundoff(dt);
    for (int64_t i = 0; tol && i < n; i++) {
        tol[i] = ts_test_is_half(dt) ? uh * fabs(w[i]) + (1 + uh) * gamma_k(K, u) * m[i]
                                     : gamma_k(K + 1, u) * m[i];
        if (ts_test_is_half(dt) && dt == TS_F16) tol[i] += 0x1p-25; /* f16's subnormal steps */
        if (x) tol[i] += x[i];
        const double e = fabs(g[i] - w[i]) / (tol[i] > 0 ? tol[i] : 1);
        if (e > worst) worst = e;
    }
    if (tol) CHECK_TOL(what, "element", got, w, tol, n);
    free(g), free(w), free(m), free(tol), free(x);
    return worst;
}

static double check_sum(const char *what, ts_tensor *got, ts_tensor *want, ts_tensor *mag, double K,
                        double u) {
    return check_sum_extra(what, got, want, mag, K, u, NULL);
}

/* One case on device d in dtype dt with x channels_last: the output and the input gradient come
 * channels_last, and all three results lie within their bounds of the float64 convolutions.
 * gy_cl: the output gradient arrives channels_last (else NCHW: the backward converts it). Returns
 * how many activation reorders oneDNN ran. */
static uint64_t check_conv(const conv_case *cc, ts_device d, ts_dtype dt, bool gy_cl) {
    ts_scope_begin();
    const int groups = cc->o_.groups ? cc->o_.groups : 1;
    ts_tensor *x = randn(TS_SHAPE(cc->n, cc->c, cc->h, cc->w), dt, d);
    ts_tensor *w = randn(TS_SHAPE(cc->o, cc->c / groups, cc->kh, cc->kw), dt, d);
    ts_tensor *b = cc->bias ? randn(TS_SHAPE(cc->o), dt, d) : NULL;
    /* the leaf itself channels_last: its gradient comes so (the leaf's layout) */
    ts_tensor *xc = ts_contiguous_format(x, TS_CHANNELS_LAST);
    CHECK(xc && ts_is_contiguous_format(xc, TS_CHANNELS_LAST));
    ts_set_requires_grad(xc, true), ts_set_requires_grad(w, true);
    if (b) ts_set_requires_grad(b, true);
    x = xc;
    const uint64_t reorders = tsi_dnnl_conv_act_reorders();
    ts_tensor *y = ts_conv2d(xc, w, b, cc->o_);
    CHECK(y && ts_dtype_of(y) == dt && nhwc_strides(y));
    ts_tensor *gy = y ? randn(ts_shape_of(y), dt, d) : NULL;
    if (gy && gy_cl) gy = ts_contiguous_format(gy, TS_CHANNELS_LAST);
    ts_backward_with(y, gy);
    const uint64_t ran = tsi_dnnl_conv_act_reorders() - reorders;
    CHECK(ts_grad(xc) && nhwc_strides(ts_grad(xc)));
    ts_conv_f64 e, m;
    ts_test_conv_f64(x, w, b, gy, cc->o_, &e, &m);
    const double u = dt == TS_F64 ? 0x1p-53 : 0x1p-24;
    /* float64: the reference's own sums round too, in another order */
    const double twice = dt == TS_F64 ? 2 : 1;
    const double kf = twice * (double)(cc->c / groups * cc->kh * cc->kw + (b ? 1 : 0));
    const double kd = twice * (double)(cc->o / groups * cc->kh * cc->kw);
    const ts_shape ys = ts_shape_of(e.y);
    const double kw = twice * (double)(ys.dims[0] * ys.dims[2] * ys.dims[3]);
    char label[160];
    snprintf(label, sizeof label, "%s %s %s%s", cc->name, ts_dtype_name(dt),
             d.type == TS_CPU ? "cpu" : "sim", gy_cl ? "" : " (gy NCHW)");
    const double e1 = check_sum(label, y, e.y, m.y, kf, u);
    const double e2 = check_sum(label, ts_grad(x), e.gx, m.gx, kd, u);
    const double e3 = check_sum(label, ts_grad(w), e.gw, m.gw, kw, u);
    if (b) check_sum(label, ts_grad(b), e.gb, m.gb, twice * kw, u);
    printf("%-48s worst of the bound: y %.3f  gx %.3f  gw %.3f  reorders %llu\n", label, e1, e2, e3,
           (unsigned long long)ran);
    CHECK_OK();
    ts_scope_end();
    return ran;
}

/* ------------------------------------------------------------------ conv2d on cuda:0 */
static void test_conv_ambiguous(ts_device d);

/* More shapes for cuDNN's NHWC kernels: the ResNet stem, tensor-core-friendly channel counts,
 * depthwise with a stride, 1x1 with a bias, dilation with asymmetric stride and padding. */
static const conv_case CUDA_CASES[] = {
    {"7x7 stride 2 pad 3 (stem)",
     2,
     3,
     32,
     32,
     64,
     7,
     7,
     {.stride = {2, 2}, .padding = {3, 3}},
     false,
     0,
     0},
    {"3x3, 64 -> 128 stride 2, bias",
     2,
     64,
     14,
     14,
     128,
     3,
     3,
     {.stride = {2, 2}, .padding = {1, 1}},
     true,
     0,
     0},
    {"1x1, 64 -> 256, bias", 2, 64, 7, 7, 256, 1, 1, {.groups = 1}, true, 0, 0},
    {"depthwise stride 2, 32 channels",
     2,
     32,
     15,
     15,
     32,
     3,
     3,
     {.stride = {2, 2}, .padding = {1, 1}, .groups = 32},
     true,
     0,
     0},
    {"grouped 2, dilated, stride 2x1 pad 2x1",
     2,
     16,
     13,
     11,
     32,
     3,
     3,
     {.stride = {2, 1}, .padding = {2, 1}, .dilation = {2, 1}, .groups = 2},
     true,
     0,
     0},
};
#define NCUDA_CASES (sizeof CUDA_CASES / sizeof CUDA_CASES[0])

/* The CUDA backend keeps channels_last for dt (conv2d_channels_last: cuDNN, f32/f16/bf16, not
 * switched off by TS_CUDA_CONV_NHWC=0) */
static bool cuda_keeps(ts_dtype dt) {
    const char *e = getenv("TS_CUDA_CONV_NHWC");
    long long native, copied;
    tsc_conv_nhwc_counters(&native, &copied);
    long long runs, declined;
    tsc_cudnn_counters(&runs, &declined);
    return native >= 0 && runs >= 0 && !(e && !strcmp(e, "0")) &&
           (dt == TS_F32 || dt == TS_F16 || dt == TS_BF16);
}

/* |y - bias| in float64 in y's shape: the convolution's own value, which a half output stores
 * once before the bias is added */
static ts_tensor *conv_part(ts_tensor *y64, ts_tensor *b) {
    ts_tensor *b64 = ts_to_dtype(ts_to(b, ts_cpu()), TS_F64);
    return ts_abs(ts_sub(y64, ts_reshape(b64, TS_SHAPE(ts_numel(b), 1, 1))));
}

/* One case on cuda:0 (d) in dtype dt, x channels_last: y and gx come channels_last (NCHW when the
 * backend does not keep the format), all results within their bounds of the float64 convolutions;
 * then, without autograd, the fused bias + ReLU and bias + clip within the same bounds of the
 * float64 values through the activation (1-Lipschitz), and ReLU's bits those of ts_relu of the
 * plain output (the epilogue acts on the stored value). */
static void check_conv_cuda(const conv_case *cc, ts_device d, ts_dtype dt, bool gy_cl,
                            const char *how) {
    ts_scope_begin();
    const int groups = cc->o_.groups ? cc->o_.groups : 1;
    const bool keeps = cuda_keeps(dt);
    ts_tensor *x = randn(TS_SHAPE(cc->n, cc->c, cc->h, cc->w), dt, d);
    ts_tensor *w = randn(TS_SHAPE(cc->o, cc->c / groups, cc->kh, cc->kw), dt, d);
    ts_tensor *b = cc->bias ? randn(TS_SHAPE(cc->o), dt, d) : NULL;
    ts_tensor *xc = ts_contiguous_format(x, TS_CHANNELS_LAST);
    CHECK(xc && ts_is_contiguous_format(xc, TS_CHANNELS_LAST));
    ts_set_requires_grad(xc, true), ts_set_requires_grad(w, true);
    if (b) ts_set_requires_grad(b, true);
    ts_tensor *y = ts_conv2d(xc, w, b, cc->o_);
    CHECK(y && ts_dtype_of(y) == dt);
    CHECK(y && (keeps ? nhwc_strides(y) && ts_is_contiguous_format(y, TS_CHANNELS_LAST)
                      : ts_is_contiguous(y)));
    ts_tensor *gy = y ? randn(ts_shape_of(y), dt, d) : NULL;
    if (gy && gy_cl) gy = ts_contiguous_format(gy, TS_CHANNELS_LAST);
    ts_backward_with(y, gy);
    CHECK(ts_grad(xc) && (keeps ? nhwc_strides(ts_grad(xc)) : true));
    ts_conv_f64 e, m;
    ts_test_conv_f64(xc, w, b, gy, cc->o_, &e, &m);
    const bool half = ts_test_is_half(dt);
    const double u = half ? 0x1p-23 : 0x1p-24, uh = ts_test_unit_roundoff(dt);
    const double kf = (double)(cc->c / groups * cc->kh * cc->kw + (b ? 1 : 0));
    const double kd = (double)(cc->o / groups * cc->kh * cc->kw);
    const ts_shape ys = ts_shape_of(e.y);
    const double kw = (double)(ys.dims[0] * ys.dims[2] * ys.dims[3]);
    ts_tensor *extra = b && half ? ts_mul_scalar(conv_part(e.y, b), uh * (1 + 4 * uh)) : NULL;
    char label[200];
    snprintf(label, sizeof label, "%s %s cuda (%s)%s", cc->name, ts_dtype_name(dt), how,
             gy_cl ? "" : " (gy NCHW)");
    const double e1 = check_sum_extra(label, y, e.y, m.y, kf, u, extra);
    const double e2 = check_sum(label, ts_grad(xc), e.gx, m.gx, kd, u);
    const double e3 = check_sum(label, ts_grad(w), e.gw, m.gw, kw, u);
    if (b) check_sum(label, ts_grad(b), e.gb, m.gb, kw, u);
    /* the fused epilogue, inference */
    double e4 = 0;
    ts_no_grad_begin();
    ts_tensor *yr = tsi_conv2d_act(xc, w, b, cc->o_, TSI_CONV_ACT_RELU, NAN, NAN);
    ts_tensor *yp = ts_conv2d(xc, w, b, cc->o_);
    ts_tensor *yc = tsi_conv2d_act(xc, w, b, cc->o_, TSI_CONV_ACT_CLIP, -0.5, 1.5);
    ts_no_grad_end();
    CHECK(yr && yp && yc);
    if (yr && yp && yc) {
        CHECK(keeps ? nhwc_strides(yr) && nhwc_strides(yc) : ts_is_contiguous(yr));
        CHECK(same_values(yr, ts_relu(yp)));
        CHECK(same_values(yc, ts_clamp(yp, -0.5, 1.5)));
        ts_tensor *xr = extra ? ts_mul_scalar(conv_part(e.y, b), uh * (1 + 4 * uh)) : NULL;
        e4 = check_sum_extra(label, yr, ts_relu(e.y), m.y, kf, u, xr);
        check_sum_extra(label, yc, ts_clamp(e.y, -0.5, 1.5), m.y, kf, u, xr);
    }
    printf("%-58s worst of the bound: y %.3f  gx %.3f  gw %.3f  relu %.3f\n", label, e1, e2, e3,
           e4);
    CHECK_OK();
    ts_scope_end();
}

/* Every case in f32, f16 and bf16: through cuDNN's NHWC kernels (the native count grows), then
 * through the NCHW copies (TS_CUDA_TEST_CONV_NHWC_COPY=1: only the copied count grows) */
static void test_conv_cuda(ts_device d) {
    test_conv_ambiguous(d);
    const ts_dtype dts[3] = {TS_F32, TS_F16, TS_BF16};
    long long n0, c0, n1, c1, n2, c2;
    tsc_conv_nhwc_counters(&n0, &c0);
    for (int pass = 0; pass < 2; pass++) {
        if (pass) setenv("TS_CUDA_TEST_CONV_NHWC_COPY", "1", 1);
        tsi_env_reload(TSI_ENV_CUDA_TEST_CONV_NHWC_COPY);
        for (size_t i = 0; i < NCASES + NCUDA_CASES; i++) {
            const conv_case *cc = i < NCASES ? &CASES[i] : &CUDA_CASES[i - NCASES];
            for (int k = 0; k < 3; k++)
                check_conv_cuda(cc, d, dts[k], k != 1 || (i % 2) == 0, pass ? "copies" : "cuDNN");
        }
        if (pass) unsetenv("TS_CUDA_TEST_CONV_NHWC_COPY");
        tsi_env_reload(TSI_ENV_CUDA_TEST_CONV_NHWC_COPY);
        if (!pass) tsc_conv_nhwc_counters(&n1, &c1);
    }
    tsc_conv_nhwc_counters(&n2, &c2);
    printf("cuda channels_last passes: cuDNN NHWC %lld, NCHW copies %lld (then with the copies "
           "forced: %lld, %lld)\n",
           n1 - n0, c1 - c0, n2 - n1, c2 - c1);
    if (cuda_keeps(TS_F32)) {
        CHECK(n1 - n0 > 0); /* cuDNN runs NHWC convolutions natively */
        CHECK_EQ(n2 - n1, 0);
        CHECK(c2 - c1 > 0);
    } else {
        CHECK_EQ(n2 - n0, 0);
    }
}

/* NCHW inputs whose layout is channels_last too (one channel, LeNet's; 1x1 images) do not prefer
 * it: the plain path runs, the output is NCHW-contiguous, and its values are the convolution's
 * (an NHWC result written into the NCHW output would scramble them). */
static void test_conv_ambiguous(ts_device d) {
    ts_scope_begin();
    const ts_shape xs[2] = {TS_SHAPE(3, 1, 9, 7), TS_SHAPE(4, 6, 1, 1)};
    const ts_shape ws[2] = {TS_SHAPE(5, 1, 3, 3), TS_SHAPE(8, 6, 1, 1)};
    for (int i = 0; i < 2; i++) {
        ts_tensor *x = randn(xs[i], TS_F32, d), *w = randn(ws[i], TS_F32, d);
        CHECK(ts_is_contiguous_format(x, TS_CHANNELS_LAST) && ts_is_contiguous(x));
        ts_tensor *y = ts_conv2d(x, w, NULL, (ts_conv2d_opts){0});
        CHECK(y && ts_is_contiguous(y));
        ts_tensor *y64 = ts_conv2d(ts_test_f64_leaf(x, false, false),
                                   ts_test_f64_leaf(w, false, false), NULL, (ts_conv2d_opts){0});
        ts_tensor *ya = ts_conv2d(ts_test_f64_leaf(x, true, false),
                                  ts_test_f64_leaf(w, true, false), NULL, (ts_conv2d_opts){0});
        const double K = (double)(ws[i].dims[1] * ws[i].dims[2] * ws[i].dims[3]);
        check_sum(i ? "1x1 images" : "one channel", y, y64, ya, K, 0x1p-24);
    }
    CHECK_OK();
    ts_scope_end();
}

/* A case's activation reorders in oneDNN's NHWC convolutions: below AVX-512 reorders_blocked, or
 * with TS_CONV_NHWC=keep none except the strided 1x1 weight gradient of a narrow input, which
 * always takes the blocked layout there; with AVX-512 reorders_avx512 (its two float32 cases where
 * the blocked kernels win), none with TS_CONV_NHWC=keep */
static bool avx512_isa(void) { return !strncmp(tsi_dnnl_effective_isa(), "avx512", 6); }

/* oneDNN's NHWC kernels everywhere but where the blocked ones win with AVX-512 */
static bool avx512_rule(void) {
    const char *forced = getenv("TS_CONV_NHWC");
    return tsi_dnnl_conv_nhwc_native() && avx512_isa() && !(forced && !strcmp(forced, "keep"));
}

static uint64_t expected_reorders(const conv_case *cc) {
    if (!tsi_dnnl_conv_nhwc_native()) return (uint64_t)cc->reorders_blocked;
    if (avx512_isa()) return avx512_rule() ? (uint64_t)cc->reorders_avx512 : 0;
    return cc->kh == 1 && cc->reorders_blocked == 2 ? 2 : 0;
}

/* Which pass of the 256-channel case takes the blocked kernels with AVX-512: the input gradient
 * alone (gy in, gx out), so with only the weight's gradient asked for nothing is reordered, and
 * with only the input's the same 2 as the whole backward. The counts cannot tell the passes apart
 * when both run (the weight gradient's reorders would be x and gy: 2 as well). */
static void test_conv_blocked_pass(ts_device d) {
    if (!avx512_rule()) return;
    const conv_case *cc = &CASES[NCASES - 1];
    for (int want_w = 0; want_w < 2; want_w++) {
        ts_scope_begin();
        ts_tensor *x = ts_contiguous_format(randn(TS_SHAPE(cc->n, cc->c, cc->h, cc->w), TS_F32, d),
                                            TS_CHANNELS_LAST);
        ts_tensor *w = randn(TS_SHAPE(cc->o, cc->c, cc->kh, cc->kw), TS_F32, d);
        ts_set_requires_grad(want_w ? w : x, true);
        const uint64_t convs = tsi_dnnl_conv_count(), r0 = tsi_dnnl_conv_act_reorders();
        ts_tensor *y = ts_conv2d(x, w, NULL, cc->o_);
        ts_backward_with(y,
                         ts_contiguous_format(randn(ts_shape_of(y), TS_F32, d), TS_CHANNELS_LAST));
        CHECK_OK();
        CHECK(ts_grad(want_w ? w : x) != NULL);
        if (tsi_dnnl_conv_count() > convs)
            CHECK_EQ(tsi_dnnl_conv_act_reorders() - r0, want_w ? 0 : 2);
        ts_scope_end();
    }
}

static void test_conv(ts_device d) {
    test_conv_ambiguous(d);
    test_conv_blocked_pass(d);
    for (size_t i = 0; i < NCASES; i++) {
        const uint64_t before = tsi_dnnl_conv_count() + tsi_dnnl_conv_bf16_count();
        const uint64_t r = check_conv(&CASES[i], d, TS_F32, true);
        const uint64_t ran = tsi_dnnl_conv_count() + tsi_dnnl_conv_bf16_count() - before;
        /* oneDNN's NHWC primitives read and write the activations as they lie: no reorder, where
         * they are its fast kernels (else the blocked ones and reorders, the same values) */
        const uint64_t want = expected_reorders(&CASES[i]);
        if (ran) CHECK_EQ(r, want);
        check_conv(&CASES[i], d, TS_F32, false);
        check_conv(&CASES[i], d, TS_F64, true);
        /* f16, and bf16 where the CPU does not multiply it natively: oneDNN's float32 NHWC
         * primitives on widened NHWC copies, so the same reorders (bf16 natively: its own, none) */
        const ts_dtype halves[2] = {TS_BF16, TS_F16};
        for (int h = 0; h < 2; h++) {
            const bool native = halves[h] == TS_BF16 && tsi_dnnl_bf16_native();
            const uint64_t f32_before = tsi_dnnl_conv_count(),
                           bf16_before = tsi_dnnl_conv_bf16_count();
            const uint64_t rh = check_conv(&CASES[i], d, halves[h], true);
            if (!ran) continue;
            CHECK_EQ(rh, native ? 0 : want);
            CHECK_EQ(native ? tsi_dnnl_conv_bf16_count() - bf16_before
                            : tsi_dnnl_conv_count() - f32_before,
                     ran);
        }
    }
}

/* The built-in kernels forced: NCHW copies around the plain entry points */
static void test_conv_builtin(ts_device d) {
    tsi_conv_force_provider("builtin");
    const uint64_t before = tsi_dnnl_conv_count() + tsi_dnnl_conv_bf16_count();
    for (size_t i = 0; i < NCASES; i += 2) {
        check_conv(&CASES[i], d, TS_F32, true);
        check_conv(&CASES[i], d, TS_BF16, false);
    }
    CHECK_EQ(tsi_dnnl_conv_count() + tsi_dnnl_conv_bf16_count(), before);
    tsi_conv_force_provider(getenv("TS_CONV"));
}

/* ------------------------------------------------------------------ allocation failures */
/* The NCHW copies' allocations failing in turn (the built-in kernels forced): the allocation-free
 * loops run on the NHWC data instead, or the op fails with TS_ERR_OOM; every result is held to
 * the float32 bound. */
static ts_tensor *random_sweep(ts_shape s) { return randn(s, TS_F32, ts_cpu()); }

/* x [2, 3, 7, 6], weight [4, 3, 3, 3] */
static const ts_conv_sweep_spec SWEEP = {
    2, 3, 7, 6, 4, 3, 3, {.stride = {2, 1}, .padding = {1, 1}}, random_sweep, true};

static void *sweep_setup(void) { return ts_conv_sweep_setup(&SWEEP); }

static void sweep_check(void *p, bool ok) {
    ts_conv_sweep *s = p;
    if (!ok) return;
    CHECK(nhwc_strides(s->y));
    check_sum("sweep y", s->y, s->y64, s->ya, 3 * 3 * 3 + 1, 0x1p-24);
    check_sum("sweep gx", s->gx, s->gx64, s->gxa, 4 * 3 * 3, 0x1p-24);
    check_sum("sweep gw", s->gw, s->gw64, s->gwa, 2 * 4 * 6, 0x1p-24);
}

static void test_allocation_failures(void) {
    tsi_conv_force_provider("builtin");
    const ts_sweep_case c = {.name = "channels_last conv2d through NCHW copies",
                             .setup = sweep_setup,
                             .run = ts_conv_sweep_run,
                             .teardown = ts_conv_sweep_teardown,
                             .check = sweep_check};
    const ts_sweep_stats st = ts_fault_sweep(&c, 300);
    CHECK(st.absorbed > 0); /* some failures ran the allocation-free loops */
    CHECK_EQ(st.errors, st.oom);
    tsi_conv_force_provider(getenv("TS_CONV"));
    CHECK_OK();
}

/* ------------------------------------------------------------------ a whole ResNet */
/* A narrow ResNet-18 (CIFAR stem) training step three ways from the same weights: channels_last
 * (the default), NCHW (plain_layout) and float64 NCHW. On the CPU with oneDNN the default step
 * reorders no activation but around the narrow layers' forwards with AVX-512 (the plain one
 * reorders at every call: the counter is live); its loss and parameter gradients are as close to
 * float64's as the NCHW step's (within 4x the NCHW step's error, which is float32 rounding through
 * 20 layers and batch-norm) — the same math in another summation order. test_golden_resnet
 * holds the default against PyTorch's own numbers. */
static ts_module *narrow_resnet(bool plain) {
    ts_manual_seed(11);
    return ts_resnet18_new((ts_resnet_config){
        .num_classes = 10, .width = 8, .cifar_stem = true, .plain_layout = plain});
}

/* sum((a - b)^2) over the parameters' gradients of two models, a's in float64 */
static double grad_dist(ts_module *a, ts_module *ref) {
    ts_tensor_list pa = ts_module_named_parameters(a), pr = ts_module_named_parameters(ref);
    double d = 0;
    ts_scope_begin();
    for (int i = 0; i < pa.n && i < pr.n; i++) {
        ts_tensor *diff =
            ts_sub(ts_to_dtype(ts_grad(pa.tensors[i]), TS_F64), ts_grad(pr.tensors[i]));
        d += ts_item(ts_sum(ts_mul(diff, diff)));
    }
    ts_scope_end();
    ts_tensor_list_free(&pa), ts_tensor_list_free(&pr);
    return d;
}

static double step(ts_module *m, ts_tensor *x, ts_tensor *y, ts_dtype dt, uint64_t *reorders) {
    const uint64_t r0 = tsi_dnnl_conv_act_reorders();
    ts_scope_begin();
    ts_tensor *xin = ts_to_dtype(x, dt);
    ts_tensor *loss = ts_cross_entropy(ts_forward(m, xin), y);
    ts_backward(loss);
    const double l = ts_item(loss);
    ts_scope_end();
    *reorders = tsi_dnnl_conv_act_reorders() - r0;
    return l;
}

static void test_resnet(ts_device d) {
    ts_scope_begin();
    ts_module *cl = ts_module_to(narrow_resnet(false), d),
              *plain = ts_module_to(narrow_resnet(true), d);
    ts_module *ref = ts_module_to_dtype(ts_module_to(narrow_resnet(true), d), TS_F64);
    ts_manual_seed(12);
    ts_tensor *x = ts_randn(TS_SHAPE(4, 3, 16, 16), (ts_opts){.dtype = TS_F32, .device = d});
    ts_tensor *y =
        ts_from_data(TS_SHAPE(4), TS_I64, (int64_t[]){1, 7, 3, 0}, (ts_opts){.device = d});
    const uint64_t convs = tsi_dnnl_conv_count();
    uint64_t r_cl, r_plain, r_ref;
    const double l_cl = step(cl, x, y, TS_F32, &r_cl),
                 l_plain = step(plain, x, y, TS_F32, &r_plain);
    const double l_ref = step(ref, x, y, TS_F64, &r_ref);
    if (tsi_dnnl_conv_count() > convs) { /* oneDNN ran the float32 convolutions */
        /* with AVX-512 the forwards of layer3's and layer4's eight 3x3 convolutions (outputs 4
         * and 2 pixels wide) take the blocked kernels: x in, y out (avx512_blocked_faster) */
        CHECK_EQ(r_cl, avx512_rule() ? 16 : 0);
        CHECK(r_plain > 0);
    }
    const double e_plain = fabs(l_plain - l_ref), e_cl = fabs(l_cl - l_ref);
    CHECK(e_cl <= 4 * e_plain + 1e-6 * fabs(l_ref));
    const double g_plain = sqrt(grad_dist(plain, ref)), g_cl = sqrt(grad_dist(cl, ref));
    CHECK(g_cl <= 4 * g_plain + 1e-9);
    printf("ResNet-18 (width 8) %s: loss error vs float64 %.2e (NCHW %.2e), gradients %.2e "
           "(NCHW %.2e); activation reorders %llu (NCHW %llu)\n",
           ts_device_str(d), e_cl, e_plain, g_cl, g_plain, (unsigned long long)r_cl,
           (unsigned long long)r_plain);
    CHECK_OK();
    ts_module_free(cl), ts_module_free(plain), ts_module_free(ref);
    ts_scope_end();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    printf("oneDNN ISA: %s; native bf16: %s\n", tsi_dnnl_isa_name(),
           tsi_dnnl_bf16_native() ? "yes" : "no");
    for (int i = 0; i < nd; i++) {
        if (devs[i].type == TS_CUDA) { /* cuDNN's NHWC convolutions: docs/CUDA.md */
            test_format(devs[i]);
            test_conv_cuda(devs[i]);
            test_resnet(devs[i]);
            continue;
        }
        test_format(devs[i]);
        test_conv(devs[i]);
        test_conv_builtin(devs[i]);
        test_resnet(devs[i]);
    }
    test_allocation_failures();
    return ts_test_finish();
}
