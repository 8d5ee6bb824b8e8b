/* test_batch_norm_bf16.c — batch_norm on a bfloat16 / float16 input with float32 parameters and
 * statistics (PyTorch's CPU kernel for half input, which autocast now uses: the output and the
 * input's gradient in the input's dtype, the parameters' gradients and the running statistics
 * float32). test_batch_norm.c holds these kernels to its long double reference (every shape and
 * kind of data there, with float32 and half parameters); this file adds:
 *   - the bits: in training the half kernels give exactly the float32 kernels' output and input
 *     gradient on the widened input, rounded once to the half dtype, and their weight and bias
 *     gradients and running statistics bit for bit (1, 3 and 64 channels, segments longer than
 *     the kernels' float chunks, a constant channel, 1000 channels of 2, a 10^6-element
 *     channel), on every test device (cuda:0 too: cuda_batch_norm.cu's sums are the widened
 *     input's), and every vector ISA the same bits as the portable one;
 *   - evaluation mode (the running statistics) against float64 with a bound from the float32
 *     arithmetic and one rounding to the half dtype;
 *   - a NaN stays in its channel;
 *   - autocast: a BatchNorm2d keeps a bf16 input bf16 and its gradients float32, and a
 *     ResNet-style stem and block (conv-bn-relu, conv-bn, residual add) forward and backward
 *     tracks the float32 run within what bf16 rounding explains, with PyTorch's dtypes; a narrow
 *     ResNet-18 makes 24 casts a step (the stem's input, 20 convolution weights, the fc's weight
 *     and bias, the loss's sum) and gives the same bits with ts_set_eval_fusion on and off. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp/autocast.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/kernel_math.h"
#include "same_bits.h"
#include "state_snapshot.h"
#include "tol_check.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

static uint64_t lcg = 0x2545F4914F6CDD1DULL;
static double uniform(double lo, double hi) {
    lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

/* n values of dtype dt (rounded there), channel-wise offsets; constant: channel `constant` holds
 * one value */
static double *values(int64_t n, int64_t c, int64_t hw, ts_dtype dt, int64_t constant) {
    double *v = malloc(sizeof(double) * (size_t)(n * c * hw));
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t j = 0; j < hw; j++)
                v[(i * c + ch) * hw + j] =
                    ts_test_round_to(dt, ch == constant ? 1.75 : (double)(ch % 3) + uniform(-2, 2));
    return v;
}

static ts_tensor *leaf(ts_shape s, const double *v, ts_dtype dt, ts_device dev, bool grad) {
    ts_tensor *t = ts_tensor_f64(s, v, (ts_opts){.dtype = dt, .device = dev});
    ts_set_requires_grad(t, grad);
    return t;
}

/* ------------------------------------------------------------------ the bits */
typedef struct bits_case {
    int64_t n, c, h, w;
    bool affine, running;
    int64_t constant; /* a constant channel, or -1 */
} bits_case;

static void check_bits(const bits_case *k, ts_dtype dt, ts_device dev) {
    const ts_shape s = TS_SHAPE(k->n, k->c, k->h, k->w);
    const int64_t hw = k->h * k->w, tot = k->n * k->c * hw;
    char label[160];
    snprintf(label, sizeof label, "[%lld, %lld, %lld, %lld]%s%s %s %s", (long long)k->n,
             (long long)k->c, (long long)k->h, (long long)k->w, k->affine ? " affine" : "",
             k->running ? " running" : "", ts_dtype_name(dt), ts_device_str(dev));
    double *xv = values(k->n, k->c, hw, dt, k->constant);
    double *gv = values(k->n, k->c, hw, dt, -1);
    double *pv = values(1, k->c, 4, TS_F32, -1); /* w, b, running mean, running var (+2) */
    for (int64_t i = 0; i < k->c; i++) pv[3 * k->c + i] = fabs(pv[3 * k->c + i]) + 0.5;
    ts_scope_begin();
    ts_tensor *y[2], *gx[2], *gw[2], *gb[2], *rm[2], *rv[2];
    for (int r = 0; r < 2; r++) { /* r 0: the half input; r 1: its float32 copy */
        ts_tensor *x = leaf(s, xv, r ? TS_F32 : dt, dev, true);
        ts_tensor *w = k->affine ? leaf(TS_SHAPE(k->c), pv, TS_F32, dev, true) : NULL;
        ts_tensor *b = k->affine ? leaf(TS_SHAPE(k->c), pv + k->c, TS_F32, dev, true) : NULL;
        rm[r] = k->running ? leaf(TS_SHAPE(k->c), pv + 2 * k->c, TS_F32, dev, false) : NULL;
        rv[r] = k->running ? leaf(TS_SHAPE(k->c), pv + 3 * k->c, TS_F32, dev, false) : NULL;
        y[r] = ts_batch_norm(x, rm[r], rv[r], w, b, true, 0.2, 0);
        CHECK_OK();
        CHECK(y[r] && ts_dtype_of(y[r]) == (r ? TS_F32 : dt));
        CHECK_STREQ(y[r] ? ts_grad_fn_name(y[r]) : NULL, "NativeBatchNormBackward0");
        ts_backward_with(y[r], leaf(s, gv, r ? TS_F32 : dt, dev, false));
        CHECK_OK();
        gx[r] = ts_grad(x), gw[r] = w ? ts_grad(w) : NULL, gb[r] = b ? ts_grad(b) : NULL;
        CHECK(gx[r] && ts_dtype_of(gx[r]) == (r ? TS_F32 : dt));
    }
    const bool yb = same_bits(y[0], ts_to_dtype(y[1], dt));
    const bool xb = same_bits(gx[0], ts_to_dtype(gx[1], dt));
    const bool wb = !k->affine || (same_bits(gw[0], gw[1]) && same_bits(gb[0], gb[1]));
    const bool sb = !k->running || (same_bits(rm[0], rm[1]) && same_bits(rv[0], rv[1]));
    ts_test_record(yb && xb && wb && sb);
    if (!(yb && xb && wb && sb))
        ts_test_failf(__FILE__, __LINE__, "%s: not the float32 kernels' bits:%s%s%s%s", label,
                      yb ? "" : " y", xb ? "" : " dx", wb ? "" : " dweight/dbias",
                      sb ? "" : " running statistics");
    /* a constant channel normalises to its bias exactly (x - mean is 0) */
    if (k->constant >= 0) {
        double *h = ts_test_host_f64(y[0], tot);
        bool ok = true;
        for (int64_t i = 0; i < k->n; i++)
            for (int64_t j = 0; j < hw; j++)
                ok = ok && h[(i * k->c + k->constant) * hw + j] ==
                               ts_test_round_to(dt, k->affine ? pv[k->c + k->constant] : 0);
        ts_test_record(ok);
        if (!ok) ts_test_failf(__FILE__, __LINE__, "%s: constant channel is not its bias", label);
        free(h);
    }
    ts_scope_end();
    free(xv), free(gv), free(pv);
}

static void test_bits(void) {
    static const bits_case cases[] = {
        {4, 1, 30, 40, true, true, -1},   /* one channel, 1200 elements a segment (3 chunks) */
        {8, 3, 7, 7, true, true, 1},      /* a constant channel */
        {16, 64, 4, 4, true, true, -1},   /* 64 channels: groups, threads */
        {6, 3, 5, 5, false, false, -1},   /* no affine, no running statistics */
        {2, 64, 33, 17, false, true, 5},  /* odd segments */
        {2, 1000, 1, 1, true, true, 7},   /* [N, C]-like: 1000 channels of 2 (CUDA's rows path) */
        {4, 1, 512, 512, true, true, -1}, /* 1M elements: many blocks a channel on CUDA */
    };
    static const ts_dtype dts[] = {TS_BF16, TS_F16};
    for (int d = 0; d < ndev; d++) {
        for (int t = 0; t < 2; t++)
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                check_bits(&cases[i], dts[t], devs[d]);
    }
}

/* Every vector ISA the CPU has gives the portable variant's bits on half input, forward and
 * backward (segments with partial chunks and partial vectors). */
static void test_isa_variants(void) {
    static const int64_t shapes[][3] = {{8, 37, 49}, {3, 2, 1025}, {64, 3, 1}};
    for (int dt = 0; dt < 2; dt++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const ts_dtype hd = dt ? TS_F16 : TS_BF16;
            const int64_t N = shapes[s][0], C = shapes[s][1], HW = shapes[s][2], T = N * C * HW;
            uint16_t *in = malloc(sizeof(uint16_t) * (size_t)(2 * T));
            float *par = malloc(sizeof(float) * (size_t)(2 * C));
            for (int64_t i = 0; i < 2 * T; i++) {
                const float v = (float)(uniform(-2, 2) + (i % 7 == 0 ? 30 : 0));
                in[i] = hd == TS_F16 ? ts_f32_to_f16(v) : ts_f32_to_bf16(v);
            }
            for (int64_t i = 0; i < 2 * C; i++) par[i] = (float)uniform(0.5, 2);
            ts_batch_norm_args a = {.n = N, .c = C, .hw = HW, .eps = 1e-5};
            a.x = (ts_kview){.data = (char *)in, .dtype = hd};
            a.dy = (ts_kview){.data = (char *)(in + T), .dtype = hd};
            a.weight = (ts_kview){.data = (char *)par, .dtype = TS_F32};
            a.bias = (ts_kview){.data = (char *)(par + C), .dtype = TS_F32};
            const size_t hb = sizeof(uint16_t) * (size_t)(2 * T), fb = sizeof(float) * 5 * C;
            char *out[TS_ISA_COUNT];
            for (int isa = 0; isa < TS_ISA_COUNT; isa++) {
                char *o = out[isa] = calloc(1, hb + fb);
                uint16_t *ho = (uint16_t *)o;
                float *fo = (float *)(o + hb);
                a.y = (ts_kview){.data = (char *)ho, .dtype = hd};
                a.dx = (ts_kview){.data = (char *)(ho + T), .dtype = hd};
                ts_kview *fs[] = {&a.mean, &a.invstd, &a.var, &a.dweight, &a.dbias};
                for (int i = 0; i < 5; i++)
                    *fs[i] = (ts_kview){.data = (char *)(fo + i * C), .dtype = TS_F32};
                if (!tsi_cpu_batch_norm_isa((ts_cpu_isa)isa, &a, false) ||
                    !tsi_cpu_batch_norm_isa((ts_cpu_isa)isa, &a, true)) {
                    free(o), out[isa] = NULL;
                    continue;
                }
                if (isa > 0) {
                    const bool same = !memcmp(out[0], o, hb + fb);
                    ts_test_record(same);
                    if (!same)
                        ts_test_failf(__FILE__, __LINE__, "%s [%lld, %lld, %lld]: %s differs",
                                      ts_dtype_name(hd), (long long)N, (long long)C, (long long)HW,
                                      tsi_cpu_isa_name((ts_cpu_isa)isa));
                }
            }
            for (int isa = 0; isa < TS_ISA_COUNT; isa++) free(out[isa]);
            free(in), free(par);
        }
}

/* ------------------------------------------------------------------ evaluation mode */
/* y = (x - rm) * s + b, s = w / sqrt(rv + eps), against float64. The float32 arithmetic: scale
 * (add, rsqrt, times w: a few roundings, 4u), shift = b - rm * s, y = x * s + shift: each term
 * within 8u of its magnitude, with u = 2^-24; then one rounding to the half dtype. */
static void check_eval(ts_dtype dt, ts_device dev, int64_t c, bool affine) {
    const int64_t n = 4, hw = 9, tot = n * c * hw;
    const double eps = 1e-5, u = ldexp(1, -24);
    double *xv = values(n, c, hw, dt, -1), *pv = values(1, c, 4, TS_F32, -1);
    for (int64_t i = 0; i < c; i++) pv[3 * c + i] = fabs(pv[3 * c + i]) + 0.25;
    double *want = malloc(sizeof(double) * (size_t)tot),
           *tol = malloc(sizeof(double) * (size_t)tot);
    for (int64_t i = 0; i < n; i++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t j = 0; j < hw; j++) {
                const int64_t at = (i * c + ch) * hw + j;
                const double w = affine ? pv[ch] : 1, b = affine ? pv[c + ch] : 0;
                const double s = w / sqrt(pv[3 * c + ch] + eps), m = pv[2 * c + ch];
                want[at] = (xv[at] - m) * s + b;
                tol[at] = 8 * u * (fabs(xv[at] * s) + fabs(m * s) + fabs(b));
            }
    ts_test_widen_for_half(dt, want, tol, tot);
    ts_scope_begin();
    ts_tensor *x = leaf(TS_SHAPE(n, c, 3, 3), xv, dt, dev, false);
    ts_tensor *w = affine ? leaf(TS_SHAPE(c), pv, TS_F32, dev, false) : NULL;
    ts_tensor *b = affine ? leaf(TS_SHAPE(c), pv + c, TS_F32, dev, false) : NULL;
    ts_tensor *rm = leaf(TS_SHAPE(c), pv + 2 * c, TS_F32, dev, false);
    ts_tensor *rv = leaf(TS_SHAPE(c), pv + 3 * c, TS_F32, dev, false);
    ts_tensor *y = ts_batch_norm(x, rm, rv, w, b, false, 0, eps);
    CHECK_OK();
    CHECK(y && ts_dtype_of(y) == dt);
    char label[96];
    snprintf(label, sizeof label, "eval %s %lld channels%s %s", ts_dtype_name(dt), (long long)c,
             affine ? " affine" : "", ts_device_str(dev));
    CHECK_TOL(label, "y", ts_reshape(y, TS_SHAPE(tot)), want, tol, tot);
    ts_scope_end();
    free(xv), free(pv), free(want), free(tol);
}

static void test_eval(void) {
    static const int64_t cs[] = {1, 3, 64};
    for (int d = 0; d < ndev; d++)
        for (int t = 0; t < 2; t++)
            for (int i = 0; i < 3; i++)
                for (int a = 0; a < 2; a++) check_eval(t ? TS_F16 : TS_BF16, devs[d], cs[i], a);
}

/* ------------------------------------------------------------------ NaN */
/* One NaN in channel 1: that channel's output and input gradient are NaN throughout (its mean
 * is), the other channels' finite. */
static void test_nan(void) {
    for (int d = 0; d < ndev; d++) {
        ts_scope_begin();
        const int64_t n = 4, c = 3, hw = 600, tot = n * c * hw;
        double *xv = values(n, c, hw, TS_BF16, -1);
        xv[(2 * c + 1) * hw + 517] = NAN;
        ts_tensor *x = leaf(TS_SHAPE(n, c, 20, 30), xv, TS_BF16, devs[d], true);
        ts_tensor *w = ts_ones(TS_SHAPE(c), (ts_opts){.device = devs[d], .requires_grad = true});
        ts_tensor *y = ts_batch_norm(x, NULL, NULL, w, NULL, true, 0, 0);
        ts_backward_with(y, ts_ones_like(y));
        CHECK_OK();
        double *hy = ts_test_host_f64(y, tot), *hg = ts_test_host_f64(ts_grad(x), tot);
        double *hw_ = ts_test_host_f64(ts_grad(w), c);
        bool ok = true;
        for (int64_t i = 0; i < tot; i++) {
            const bool in_nan = (i / hw) % c == 1;
            ok = ok && in_nan == (bool)isnan(hy[i]) && in_nan == (bool)isnan(hg[i]);
        }
        ok = ok && isnan(hw_[1]) && !isnan(hw_[0]) && !isnan(hw_[2]);
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "%s: a NaN left its channel or was lost",
                          ts_device_str(devs[d]));
        free(hy), free(hg), free(hw_), free(xv);
        ts_scope_end();
    }
}

/* ------------------------------------------------------------------ autocast */
/* A stem (conv-bn-relu) and a basic block (conv-bn-relu, conv-bn, add the block's input, relu),
 * through ts_forward_conv_bn as the ResNets run them. */
typedef struct net {
    ts_module *c0, *b0, *c1, *b1, *c2, *b2, *relu;
} net;

static net net_new(ts_device dev, int64_t ch) {
    ts_manual_seed(3);
    const ts_conv2d_opts o = {.padding = {1, 1}, .no_bias = true};
    net m = {ts_conv2d_new(3, ch, 3, o),
             ts_batch_norm2d_new(ch, (ts_norm_opts){0}),
             ts_conv2d_new(ch, ch, 3, o),
             ts_batch_norm2d_new(ch, (ts_norm_opts){0}),
             ts_conv2d_new(ch, ch, 3, o),
             ts_batch_norm2d_new(ch, (ts_norm_opts){0}),
             ts_relu_new()};
    ts_module **all[] = {&m.c0, &m.b0, &m.c1, &m.b1, &m.c2, &m.b2, &m.relu};
    for (int i = 0; i < 7; i++) *all[i] = ts_module_to(*all[i], dev);
    /* non-trivial batch-norm parameters */
    ts_module *bns[] = {m.b0, m.b1, m.b2};
    for (int i = 0; i < 3; i++) {
        ts_tensor_list ps = ts_module_named_parameters(bns[i]);
        ts_no_grad_begin();
        for (int p = 0; p < ps.n; p++)
            ts_copy_(ps.tensors[p], ts_add_scalar(ts_rand(TS_SHAPE(ch), (ts_opts){.device = dev}),
                                                  p ? -0.7 : 0.6));
        ts_no_grad_end();
        ts_tensor_list_free(&ps);
    }
    return m;
}

static void net_free(net *m) {
    ts_module *all[] = {m->c0, m->b0, m->c1, m->b1, m->c2, m->b2, m->relu};
    for (int i = 0; i < 7; i++) ts_module_free(all[i]);
}

typedef struct run_out {
    double loss;
    ts_tensor *out, *gx, *gp; /* gp: every parameter's gradient, concatenated (float32) */
    ts_dtype act[3];          /* the stem's, the block's first and its last activation */
    bool grads_f32;
} run_out;

/* ||a - b|| / ||b|| over two float tensors of one size */
static double rel_rms(ts_tensor *a, ts_tensor *b) {
    ts_scope_begin();
    ts_tensor *a64 = ts_to_dtype(a, TS_F64), *b64 = ts_to_dtype(b, TS_F64);
    ts_tensor *d = ts_sub(a64, b64);
    const double r = sqrt(ts_item(ts_sum(ts_mul(d, d))) / ts_item(ts_sum(ts_mul(b64, b64))));
    ts_scope_end();
    return r;
}

/* t times (1 + d) elementwise, d uniform in [-u, u] (the noise model's perturbation) */
static void perturb(ts_tensor *t, double u, ts_device dev) {
    ts_no_grad_begin();
    ts_tensor *d = ts_rand(ts_shape_of(t), (ts_opts){.device = dev});
    ts_mul_(t, ts_add_scalar(ts_mul_scalar(d, 2 * u), 1 - u));
    ts_no_grad_end();
}

/* One forward and backward: float32, under a bf16 autocast region, or float32 with the input and
 * the convolution weights perturbed by relative noise of size `noise` (seeded by noise_seed). */
static run_out net_run(ts_device dev, bool autocast, double noise, uint64_t noise_seed) {
    net m = net_new(dev, 16);
    ts_manual_seed(4);
    ts_tensor *x = ts_randn(TS_SHAPE(8, 3, 8, 8), (ts_opts){.device = dev, .requires_grad = true});
    ts_tensor *t = ts_add_scalar(ts_rand(TS_SHAPE(8, 16, 8, 8), (ts_opts){.device = dev}), 0.5);
    if (noise > 0) {
        ts_manual_seed(noise_seed);
        perturb(x, noise, dev);
        ts_module *convs[] = {m.c0, m.c1, m.c2};
        for (int i = 0; i < 3; i++) {
            ts_tensor_list ps = ts_module_named_parameters(convs[i]);
            for (int p = 0; p < ps.n; p++) perturb(ps.tensors[p], noise, dev);
            ts_tensor_list_free(&ps);
        }
    }
    run_out r = {0};
    if (autocast) ts_autocast_begin(dev.type, TS_BF16);
    ts_tensor *h0 = ts_forward_conv_bn(m.c0, m.b0, m.relu, x);
    ts_tensor *h1 = ts_forward_conv_bn(m.c1, m.b1, m.relu, h0);
    ts_tensor *h2 = ts_forward_conv_bn(m.c2, m.b2, NULL, h1);
    r.out = ts_forward(m.relu, ts_add(h2, h0));
    /* a positive target: no cancellation in the loss */
    ts_tensor *loss = ts_mean(ts_mul(r.out, t));
    if (autocast) ts_autocast_end();
    CHECK_OK();
    r.act[0] = h0 ? ts_dtype_of(h0) : TS_F64, r.act[1] = h1 ? ts_dtype_of(h1) : TS_F64;
    r.act[2] = r.out ? ts_dtype_of(r.out) : TS_F64;
    ts_backward(loss);
    CHECK_OK();
    r.loss = ts_item(loss);
    r.gx = ts_grad(x);
    ts_module *mods[] = {m.c0, m.b0, m.c1, m.b1, m.c2, m.b2};
    ts_tensor *flat[12];
    int nf = 0;
    r.grads_f32 = true;
    for (int i = 0; i < 6; i++) {
        ts_tensor_list ps = ts_module_named_parameters(mods[i]);
        for (int p = 0; p < ps.n; p++) {
            ts_tensor *g = ts_grad(ps.tensors[p]);
            r.grads_f32 = r.grads_f32 && g && ts_dtype_of(g) == TS_F32;
            if (g) flat[nf++] = ts_reshape(g, TS_SHAPE(-1));
        }
        ts_tensor_list_free(&ps);
    }
    r.gp = ts_cat(flat, nf, 0);
    /* the running statistics stay float32 */
    ts_module *bns[] = {m.b0, m.b1, m.b2};
    for (int i = 0; i < 3; i++) {
        ts_tensor_list bs = ts_module_named_buffers(bns[i]);
        for (int k = 0; k < bs.n; k++)
            if (strcmp(bs.names[k], "num_batches_tracked"))
                r.grads_f32 = r.grads_f32 && ts_dtype_of(bs.tensors[k]) == TS_F32;
        ts_tensor_list_free(&bs);
    }
    net_free(&m);
    return r;
}

/* The bound (test_amp_tracking's noise model, docs/AMP.md): how far bf16 rounding can move each
 * result depends on the network's gains (a batch-norm's backward cancels much of its input
 * gradient), so they are measured in float32: two runs with the input and the convolution
 * weights (4 rounding sites) times (1 + d), d uniform in [-u, u] (rms 0.577 u), u = 2^-8, give
 * each result's relative rms change R. Autocast rounds at S sites (rms 0.425 u each): to the
 * output, the input's and the three weights' casts, three convolution outputs, three batch-norm
 * outputs and the add, S = 11; the gradients add the output gradient's rounding, the add's and
 * the three batch-norms' and three convolutions' input gradients, S = 19. Sites that weigh alike
 * and round independently give sqrt(S / 4) * 0.425 / 0.577 times R; twice that (two noise runs
 * estimate R) is the bound. */
static double noise_bound(double r, int sites) {
    return 2 * sqrt(sites / 4.0) * (0.425 / 0.577) * r;
}

static void test_autocast_block(void) {
    const double u = ldexp(1, -8);
    for (int d = 0; d < ndev; d++) {
        ts_scope_begin();
        run_out f = net_run(devs[d], false, 0, 0), a = net_run(devs[d], true, 0, 0);
        double rn[4] = {0}; /* the noise runs' rms of the four relative changes */
        for (int k = 0; k < 2; k++) {
            run_out z = net_run(devs[d], false, u, 100 + (uint64_t)k);
            const double e[4] = {fabs(z.loss - f.loss) / fabs(f.loss), rel_rms(z.out, f.out),
                                 rel_rms(z.gx, f.gx), rel_rms(z.gp, f.gp)};
            for (int i = 0; i < 4; i++) rn[i] += e[i] * e[i] / 2;
        }
        for (int i = 0; i < 4; i++) rn[i] = sqrt(rn[i]);
        CHECK(f.act[0] == TS_F32 && f.act[2] == TS_F32);
        /* PyTorch's dtypes: bf16 activations, float32 parameter gradients and statistics, the
         * float32 input's gradient float32 */
        CHECK(a.act[0] == TS_BF16 && a.act[1] == TS_BF16 && a.act[2] == TS_BF16);
        CHECK(a.grads_f32 && f.grads_f32);
        CHECK(a.gx && ts_dtype_of(a.gx) == TS_F32);
        const double el = fabs(a.loss - f.loss) / fabs(f.loss), eo = rel_rms(a.out, f.out);
        const double ex = rel_rms(a.gx, f.gx), ep = rel_rms(a.gp, f.gp);
        const double bl = noise_bound(rn[0], 11), bo = noise_bound(rn[1], 11);
        const double bx = noise_bound(rn[2], 19), bp = noise_bound(rn[3], 19);
        printf("autocast block (%s): loss %.6f vs %.6f; relative change (bound): loss %.2e "
               "(%.2e), output %.2e (%.2e), input gradient %.2e (%.2e), parameter gradients "
               "%.2e (%.2e)\n",
               ts_device_str(devs[d]), a.loss, f.loss, el, bl, eo, bo, ex, bx, ep, bp);
        CHECK(el <= bl && eo <= bo && ex <= bx && ep <= bp);
        /* and it is bf16 arithmetic: not the float32 run's bits */
        CHECK(eo > 0);
        ts_scope_end();
    }
}

/* BatchNorm2d under autocast with a bf16 input, training and eval: a bf16 output, float32
 * gradients for its parameters, its running statistics float32 and updated as from the widened
 * input. */
static void test_autocast_module(void) {
    for (int d = 0; d < ndev; d++) {
        ts_scope_begin();
        ts_module *bn[2] = {0};
        ts_tensor *y[2] = {0};
        ts_manual_seed(8);
        ts_tensor *x =
            ts_to_dtype(ts_randn(TS_SHAPE(4, 5, 6, 6), (ts_opts){.device = devs[d]}), TS_BF16);
        for (int r = 0; r < 2; r++) {
            bn[r] = ts_module_to(ts_batch_norm2d_new(5, (ts_norm_opts){0}), devs[d]);
            ts_tensor *xr = r ? ts_to_dtype(x, TS_F32) : x;
            if (!r) ts_autocast_begin(devs[d].type, TS_BF16);
            y[r] = ts_forward(bn[r], xr);
            if (!r) ts_autocast_end();
            ts_backward_with(y[r], ts_ones_like(y[r]));
        }
        CHECK_OK();
        CHECK(y[0] && ts_dtype_of(y[0]) == TS_BF16);
        CHECK(same_bits(y[0], ts_to_dtype(y[1], TS_BF16)));
        ts_tensor_list p0 = ts_module_named_parameters(bn[0]),
                       p1 = ts_module_named_parameters(bn[1]);
        ts_tensor_list b0 = ts_module_named_buffers(bn[0]), b1 = ts_module_named_buffers(bn[1]);
        for (int i = 0; i < p0.n && i < p1.n; i++)
            CHECK(same_bits(ts_grad(p0.tensors[i]), ts_grad(p1.tensors[i])));
        for (int i = 0; i < b0.n && i < b1.n; i++) CHECK(same_bits(b0.tensors[i], b1.tensors[i]));
        /* eval: the running statistics, a bf16 output */
        ts_module_eval(bn[0]);
        ts_autocast_begin(devs[d].type, TS_BF16);
        ts_tensor *ye = ts_forward(bn[0], x);
        ts_autocast_end();
        CHECK(ye && ts_dtype_of(ye) == TS_BF16);
        ts_tensor_list_free(&p0), ts_tensor_list_free(&p1);
        ts_tensor_list_free(&b0), ts_tensor_list_free(&b1);
        ts_module_free(bn[0]), ts_module_free(bn[1]);
        ts_scope_end();
        CHECK_OK();
    }
}

/* One training step's forward and backward of a narrow ResNet-18 under autocast */
typedef struct net_out {
    ts_tensor *loss, *gx;
    ts_snapshot state;
    uint64_t casts;
} net_out;

static net_out resnet_step(ts_device dev, bool fuse) {
    const bool was = ts_set_eval_fusion(fuse);
    ts_manual_seed(5);
    ts_module *m = ts_module_to(
        ts_resnet18_new((ts_resnet_config){.width = 8, .num_classes = 10, .cifar_stem = true}),
        dev);
    ts_manual_seed(6);
    ts_tensor *x = ts_randn(TS_SHAPE(4, 3, 16, 16), (ts_opts){.device = dev});
    ts_set_requires_grad(x, true);
    net_out r = {0};
    const uint64_t c0 = tsi_autocast_cast_count;
    ts_autocast_begin(dev.type, TS_BF16);
    ts_tensor *y = ts_forward(m, x);
    r.loss = ts_sum(ts_mul(y, y));
    ts_autocast_end();
    r.casts = tsi_autocast_cast_count - c0;
    ts_backward(r.loss);
    r.gx = ts_grad(x);
    r.state = ts_snapshot_with_grads(m);
    ts_module_free(m);
    ts_set_eval_fusion(was);
    return r;
}

static void test_resnet_one(ts_device dev) {
    ts_scope_begin();
    net_out off = resnet_step(dev, false), on = resnet_step(dev, true);
    CHECK(same_bits(on.loss, off.loss) && same_bits(on.gx, off.gx));
    ts_snapshot_check("resnet18 under autocast, eval fusion on and off", &on.state, &off.state);
    /* the activations stay bf16 from the stem's cast to the fc: the stem input's, the 20
     * convolution weights', the fc's weight and bias: 23 casts plus, on sim (CUDA's lists), the
     * loss's sum (float32; the CPU's lists leave sum alone) */
    printf("resnet18 width 8 under autocast (%s): casts %llu with eval fusion on, %llu off\n",
           dev.type == TS_CPU ? "cpu" : "sim:0", (unsigned long long)on.casts,
           (unsigned long long)off.casts);
    CHECK(on.casts == off.casts && on.casts == (dev.type == TS_CPU ? 23u : 24u));
    ts_snapshot_free(&off.state), ts_snapshot_free(&on.state);
    ts_scope_end();
    CHECK_OK();
}

/* A narrow ResNet-18 in training under autocast: its activations stay bf16 from the stem's cast to
 * the fc (the batch-norms take the convolutions' bf16 outputs), and the same loss, gradients,
 * running statistics and casts with ts_set_eval_fusion on and off */
static void test_resnet(void) {
    for (int d = 0; d < ndev; d++)
        if (devs[d].type != TS_CUDA) test_resnet_one(devs[d]);
}

int main(void) {
    ts_scope_begin();
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_bits();
    test_isa_variants();
    test_eval();
    test_nan();
    test_autocast_module();
    test_autocast_block();
    test_resnet();
    ts_scope_end();
    return ts_test_finish();
}
