/* test_qat_module.c — ts_qat_prepare on C modules (src/nn/qat.c) against references written here
 * in float32 / float64: a Conv2d and a Linear prepared for QAT give the fake quantization of a
 * float64 reference of the same arithmetic (weights per channel, symmetric qint8; outputs per
 * tensor, quint8 0..127), the observers follow PyTorch's moving average (first batch as it is, then
 * min + 0.01 (batch min - min) in float32), gradients pass straight through inside the range and
 * are zero outside, frozen observers stay, fake quant can be turned off, the state dict has
 * PyTorch's QAT keys and loads back, ts_moving_average_per_channel_minmax_update, and the errors
 * (an unsupported layer, a second prepare, nothing to prepare). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"
#include "tessera/autograd.h"
#include "tessera/conv.h"
#include "tessera/elementwise.h"
#include "tessera/quant.h"
#include "tessera/reductions.h"
#include "tessera/views.h"
#include "ts_test.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float uni(float a, float b) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return a + (b - a) * (float)((double)(rng >> 40) / 16777216.0);
}

static void host(ts_tensor *t, void *dst, size_t bytes) {
    CHECK(t && ts_copy_to_host(t, dst, bytes) == TS_OK);
}
static ts_tensor *buf(ts_module *m, const char *name) {
    ts_tensor *t = ts_module_get(m, name);
    CHECK(t != NULL);
    return t;
}
static float f32_at(ts_module *m, const char *name, int i) {
    float v[64];
    ts_tensor *t = buf(m, name);
    host(t, v, (size_t)ts_numel(t) * sizeof(float));
    return v[i];
}
static int32_t i32_at(ts_module *m, const char *name, int i) {
    int32_t v[64];
    ts_tensor *t = buf(m, name);
    host(t, v, (size_t)ts_numel(t) * sizeof(int32_t));
    return v[i];
}

/* ------------------------------------------------------------------ references */
/* PyTorch's fake quant of one float32 (its CPU kernel: inv = 1.0f / scale, nearbyint(x * inv) in
 * float32, the sum with zero_point in float32, (clamp - zp) * scale in float32) */
static float ref_fq(float x, float sc, int zp, int qmin, int qmax, int *mask) {
    const float inv = 1.0f / sc, p = x * inv;
    const float q = (float)zp + nearbyintf(p);
    *mask = q >= (float)qmin && q <= (float)qmax;
    const float c = q < (float)qmin ? (float)qmin : q > (float)qmax ? (float)qmax : q;
    return (c - (float)zp) * sc;
}

/* The qparams PyTorch's fused fake quant trains with (FusedMovingAvgObsFakeQuantize: fbgemm's
 * ChooseQuantizationParams of the observed range, preserve_sparsity for the symmetric weights):
 * written here from its definition, in double with float32 ends as fbgemm keeps them */
static void ref_qparams(float mn, float mx, int qmin, int qmax, bool sym, float *sc, int *zp) {
    if (sym && mn < 0 && mx > 0) { /* [-(n + 1), n] quanta of one scale, n = (qmax - qmin) / 2 */
        const int n = (qmax - qmin) / 2;
        const double m = fmax(fabs(mn / (double)(-n - 1)), fabs(mx / (double)n));
        mn = (float)(m * (-n - 1)), mx = (float)(m * n);
    }
    mn = mn < 0 ? mn : 0, mx = mx > 0 ? mx : 0;
    double s = ((double)mx - mn) / (qmax - qmin);
    if ((float)s == 0.0f) s = 0.1;
    CHECK(s >= 6.1e-5); /* the cases here stay above fbgemm's smallest scale */
    double z;
    if (sym && mn < 0 && mx > 0) {
        z = (qmin + qmax) / 2.0;
    } else { /* from the end with the smaller rounding error */
        const double zlo = qmin - mn / s, zhi = qmax - mx / s;
        z = fabs((double)qmin) - fabs(mn / s) < fabs((double)qmax) - fabs(mx / s) ? zlo : zhi;
    }
    *sc = (float)s;
    *zp = z < qmin ? qmin : z > qmax ? qmax : (int)nearbyint(z);
}

/* float32 accumulation of k terms of absolute sum a: |error| <= gamma_k a (a transformed or
 * reordered summation is allowed a factor 8) */
static double acc_err(int k, double a) { return 8.0 * (k + 1) * ldexp(1.0, -24) * a + 1e-30; }

/* The output of an observed layer: each element of the model's fake-quantized output y equals
 * the fake quantization of the float64 reference Y (within err of the float32 arithmetic) with the
 * layer's own output qparams; where Y +- err straddles a rounding boundary either neighbour is
 * allowed. Returns the number of such ambiguous elements. */
static int check_output(const float *y, const double *Y, const double *err, int n, float sc, int zp,
                        int qmin, int qmax) {
    int amb = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        int m;
        const float lo = ref_fq((float)(Y[i] - err[i]), sc, zp, qmin, qmax, &m);
        const float hi = ref_fq((float)(Y[i] + err[i]), sc, zp, qmin, qmax, &m);
        if (lo != hi) amb++;
        if (y[i] != lo && y[i] != hi) {
            if (bad++ < 5)
                fprintf(stderr, "  output %d: %.9g, expected %.9g (or %.9g)\n", i, y[i], lo, hi);
        }
    }
    CHECK_EQ(bad, 0);
    return amb;
}

/* The weight's per-channel observer after its first batch, its qparams and the fake-quantized
 * weight (wq, float32) the layer must have used. */
static void check_weight_first(ts_module *layer, const float *w, int out, int per, float *wq,
                               int *wmask) {
    for (int o = 0; o < out; o++) {
        float mn = w[o * per], mx = w[o * per];
        for (int i = 1; i < per; i++)
            mn = fminf(mn, w[o * per + i]), mx = fmaxf(mx, w[o * per + i]);
        CHECK(f32_at(layer, "weight_fake_quant.activation_post_process.min_val", o) == mn);
        CHECK(f32_at(layer, "weight_fake_quant.activation_post_process.max_val", o) == mx);
        float sc;
        int zp;
        ref_qparams(mn, mx, -128, 127, true, &sc, &zp);
        CHECK(f32_at(layer, "weight_fake_quant.scale", o) == sc);
        CHECK_EQ(i32_at(layer, "weight_fake_quant.zero_point", o), zp); /* 0 unless one-sided */
        for (int i = 0; i < per; i++)
            wq[o * per + i] = ref_fq(w[o * per + i], sc, zp, -128, 127, &wmask[o * per + i]);
    }
}

/* The output observer after the first batch (min / max of the float64 reference within the
 * arithmetic's error) and its qparams, recomputed from the observed range */
static void check_act_first(ts_module *layer, const double *Y, const double *err, int n, float *sc,
                            int *zp) {
    double mn = Y[0], mx = Y[0], e = 0;
    for (int i = 0; i < n; i++) mn = fmin(mn, Y[i]), mx = fmax(mx, Y[i]), e = fmax(e, err[i]);
    const float omin = f32_at(layer, "activation_post_process.activation_post_process.min_val", 0),
                omax = f32_at(layer, "activation_post_process.activation_post_process.max_val", 0);
    CHECK_NEAR(omin, mn, e + fabs(mn) * 1e-7);
    CHECK_NEAR(omax, mx, e + fabs(mx) * 1e-7);
    ref_qparams(omin, omax, 0, 127, false, sc, zp);
    CHECK(f32_at(layer, "activation_post_process.scale", 0) == *sc);
    CHECK_EQ(i32_at(layer, "activation_post_process.zero_point", 0), *zp);
}

/* ------------------------------------------------------------------ the model */
typedef struct tiny {
    ts_module base;
    ts_module *conv, *fc;
} tiny;

static ts_tensor *tiny_forward(ts_module *self, ts_tensor *x) {
    tiny *m = (tiny *)self;
    return ts_forward(m->fc, ts_flatten(ts_forward(m->conv, x), 1, -1));
}

enum { N = 2, CI = 2, CO = 3, H = 4, K = 3, FIN = CO * H * H, FOUT = 5 };

static tiny *tiny_new(void) {
    tiny *m = ts_module_alloc(sizeof *m, "Tiny", tiny_forward);
    m->conv = ts_module_add(&m->base, "conv",
                            ts_conv2d_new(CI, CO, K, (ts_conv2d_opts){.padding = {1, 1}}));
    m->fc = ts_module_add(&m->base, "fc", ts_linear_new(FIN, FOUT));
    return m;
}

/* y = conv(x, wq) + b in float64, with padding 1, and each element's error bound */
static void conv_ref(const float *x, const float *wq, const float *b, double *Y, double *err) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < CO; o++)
            for (int h = 0; h < H; h++)
                for (int v = 0; v < H; v++) {
                    double s = b[o], a = fabs(b[o]);
                    for (int c = 0; c < CI; c++)
                        for (int i = 0; i < K; i++)
                            for (int j = 0; j < K; j++) {
                                const int hh = h + i - 1, vv = v + j - 1;
                                if (hh < 0 || hh >= H || vv < 0 || vv >= H) continue;
                                const double t = (double)x[((n * CI + c) * H + hh) * H + vv] *
                                                 wq[((o * CI + c) * K + i) * K + j];
                                s += t, a += fabs(t);
                            }
                    const int k = ((n * CO + o) * H + h) * H + v;
                    Y[k] = s, err[k] = acc_err(CI * K * K, a);
                }
}

/* y = x wq^T + b in float64 ([rows, in] x [out, in]) and the error bounds */
static void linear_ref(const float *x, const float *wq, const float *b, int rows, int in, int out,
                       double *Y, double *err) {
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++) {
            double s = b[o], a = fabs(b[o]);
            for (int i = 0; i < in; i++) {
                const double t = (double)x[r * in + i] * wq[o * in + i];
                s += t, a += fabs(t);
            }
            Y[r * out + o] = s, err[r * out + o] = acc_err(in, a);
        }
}

/* Forward of a prepared conv and linear, one training batch: every observer, qparam and output
 * against the references. */
static void test_forward(void) {
    ts_manual_seed(3);
    tiny *m = tiny_new();
    CHECK(ts_qat_prepare(&m->base, (ts_qat_opts){0}) == TS_OK);
    CHECK_OK();
    static float x[N * CI * H * H], w[CO * CI * K * K], b[CO], wq[CO * CI * K * K];
    static int wmask[CO * CI * K * K];
    for (int i = 0; i < N * CI * H * H; i++) x[i] = uni(-2, 2);
    host(buf(m->conv, "weight"), w, sizeof w);
    host(buf(m->conv, "bias"), b, sizeof b);
    ts_scope_begin();
    ts_tensor *xt = ts_tensor_f32(TS_SHAPE(N, CI, H, H), x, (ts_opts){0});
    ts_tensor *h = ts_forward(m->conv, xt);
    CHECK_OK();
    static float hy[N * FIN];
    host(h, hy, sizeof hy);
    check_weight_first(m->conv, w, CO, CI * K * K, wq, wmask);
    static double Y[N * FIN], E[N * FIN];
    conv_ref(x, wq, b, Y, E);
    float sc;
    int zp;
    check_act_first(m->conv, Y, E, N * FIN, &sc, &zp);
    int amb = check_output(hy, Y, E, N * FIN, sc, zp, 0, 127);
    CHECK(amb <= N * FIN / 10);
    /* the linear on the conv's (fake-quantized) output */
    static float fw[FOUT * FIN], fb[FOUT], fwq[FOUT * FIN], out[N * FOUT];
    static int fmask[FOUT * FIN];
    host(buf(m->fc, "weight"), fw, sizeof fw);
    host(buf(m->fc, "bias"), fb, sizeof fb);
    ts_tensor *y = ts_forward(m->fc, ts_flatten(h, 1, -1));
    CHECK_OK();
    host(y, out, sizeof out);
    check_weight_first(m->fc, fw, FOUT, FIN, fwq, fmask);
    static double Y2[N * FOUT], E2[N * FOUT];
    linear_ref(hy, fwq, fb, N, FIN, FOUT, Y2, E2);
    check_act_first(m->fc, Y2, E2, N * FOUT, &sc, &zp);
    amb = check_output(out, Y2, E2, N * FOUT, sc, zp, 0, 127);
    CHECK(amb <= 1);
    /* the whole model: the same as its layers one after the other (observers now at their second
     * batch: compared in eval mode, where nothing is observed) */
    ts_module_eval(&m->base);
    ts_tensor *y1 = ts_forward(&m->base, xt),
              *y2 = ts_forward(m->fc, ts_flatten(ts_forward(m->conv, xt), 1, -1));
    static float a1[N * FOUT], a2[N * FOUT];
    host(y1, a1, sizeof a1);
    host(y2, a2, sizeof a2);
    CHECK(!memcmp(a1, a2, sizeof a1));
    ts_scope_end();
    CHECK_OK();
    ts_module_free(&m->base);
}

/* The moving average over three batches, the weight changed between them; frozen observers stay;
 * eval mode observes nothing; fake quant off gives the float layer. */
static void test_observers(void) {
    enum { R = 4, IN = 6, OUT = 3 };
    ts_manual_seed(5);
    ts_module *lin = ts_linear_new(IN, OUT);
    CHECK(ts_qat_prepare(lin, (ts_qat_opts){0}) == TS_OK);
    float w[OUT * IN], b[OUT], x[R * IN], wmin[OUT], wmax[OUT], amin = 0, amax = 0;
    host(buf(lin, "bias"), b, sizeof b);
    for (int step = 0; step < 3; step++) {
        ts_scope_begin();
        if (step) { /* w *= 1.5 outside autograd */
            ts_no_grad_begin();
            ts_tensor *wt = buf(lin, "weight");
            CHECK(ts_copy_(wt, ts_mul_scalar(wt, 1.5)) != NULL);
            ts_no_grad_end();
        }
        host(buf(lin, "weight"), w, sizeof w);
        for (int i = 0; i < R * IN; i++) x[i] = uni(-1, 1) * (float)(step + 1);
        ts_tensor *y = ts_forward(lin, ts_tensor_f32(TS_SHAPE(R, IN), x, (ts_opts){0}));
        CHECK(y != NULL);
        /* the weight's observer, exactly: PyTorch's float32 moving average */
        for (int o = 0; o < OUT; o++) {
            float mn = w[o * IN], mx = w[o * IN];
            for (int i = 1; i < IN; i++)
                mn = fminf(mn, w[o * IN + i]), mx = fmaxf(mx, w[o * IN + i]);
            if (step) mn = wmin[o] + 0.01f * (mn - wmin[o]), mx = wmax[o] + 0.01f * (mx - wmax[o]);
            wmin[o] = mn, wmax[o] = mx;
            CHECK(f32_at(lin, "weight_fake_quant.activation_post_process.min_val", o) == mn);
            CHECK(f32_at(lin, "weight_fake_quant.activation_post_process.max_val", o) == mx);
            float sc;
            int zp;
            ref_qparams(mn, mx, -128, 127, true, &sc, &zp);
            CHECK(f32_at(lin, "weight_fake_quant.scale", o) == sc);
            CHECK_EQ(i32_at(lin, "weight_fake_quant.zero_point", o), zp);
        }
        /* the output's observer: the batch's range from the float64 reference (the weight fake
         * quantized with the qparams just computed), averaged from the previous observed range */
        float wq[OUT * IN];
        for (int o = 0; o < OUT; o++)
            for (int i = 0; i < IN; i++) {
                int mk;
                wq[o * IN + i] =
                    ref_fq(w[o * IN + i], f32_at(lin, "weight_fake_quant.scale", o),
                           i32_at(lin, "weight_fake_quant.zero_point", o), -128, 127, &mk);
            }
        double Y[R * OUT], E[R * OUT], lo = INFINITY, hi = -INFINITY, e = 0;
        linear_ref(x, wq, b, R, IN, OUT, Y, E);
        for (int i = 0; i < R * OUT; i++)
            lo = fmin(lo, Y[i]), hi = fmax(hi, Y[i]), e = fmax(e, E[i]);
        const float omin =
                        f32_at(lin, "activation_post_process.activation_post_process.min_val", 0),
                    omax =
                        f32_at(lin, "activation_post_process.activation_post_process.max_val", 0);
        const double elo = step ? amin + 0.01 * (lo - amin) : lo,
                     ehi = step ? amax + 0.01 * (hi - amax) : hi;
        CHECK_NEAR(omin, elo, e + 4e-7 * fabs(elo));
        CHECK_NEAR(omax, ehi, e + 4e-7 * fabs(ehi));
        amin = omin, amax = omax;
        ts_scope_end();
    }
    /* frozen, then eval mode: nothing moves (bit for bit); unfrozen in training: it moves */
    const char *names[] = {"weight_fake_quant.scale",
                           "weight_fake_quant.activation_post_process.min_val",
                           "activation_post_process.scale",
                           "activation_post_process.zero_point",
                           "activation_post_process.activation_post_process.min_val",
                           "activation_post_process.activation_post_process.max_val"};
    uint32_t before[6][OUT], after[6][OUT];
    for (int k = 0; k < 6; k++)
        host(buf(lin, names[k]), before[k], (size_t)ts_numel(buf(lin, names[k])) * 4);
    CHECK(ts_qat_freeze_observers(lin, true) == TS_OK);
    for (int mode = 0; mode < 3; mode++) {
        if (mode == 1) {
            CHECK(ts_qat_freeze_observers(lin, false) == TS_OK);
            ts_module_eval(lin);
        }
        if (mode == 2) ts_module_train(lin, true);
        ts_scope_begin();
        for (int i = 0; i < R * IN; i++) x[i] = uni(-5, 5);
        CHECK(ts_forward(lin, ts_tensor_f32(TS_SHAPE(R, IN), x, (ts_opts){0})) != NULL);
        ts_scope_end();
        bool same = true;
        for (int k = 0; k < 6; k++) {
            host(buf(lin, names[k]), after[k], (size_t)ts_numel(buf(lin, names[k])) * 4);
            same &= !memcmp(before[k], after[k], (size_t)ts_numel(buf(lin, names[k])) * 4);
        }
        CHECK(same == (mode < 2)); /* frozen; eval; then training observes the wider batch */
    }
    /* fake quant off: the float layer's output, bit for bit */
    CHECK(ts_qat_enable_fake_quant(lin, false) == TS_OK);
    ts_module_eval(lin);
    ts_scope_begin();
    ts_tensor *xt = ts_tensor_f32(TS_SHAPE(R, IN), x, (ts_opts){0});
    float a[R * OUT], r[R * OUT];
    host(ts_forward(lin, xt), a, sizeof a);
    host(ts_linear(xt, buf(lin, "weight"), buf(lin, "bias")), r, sizeof r);
    CHECK(!memcmp(a, r, sizeof a));
    CHECK(ts_qat_enable_fake_quant(lin, true) == TS_OK);
    host(ts_forward(lin, xt), a, sizeof a);
    CHECK(memcmp(a, r, sizeof a) != 0);
    ts_scope_end();
    CHECK_OK();
    ts_module_free(lin);
}

/* The straight-through gradient with fixed qparams: an input three times the observed one puts
 * outputs beyond the range (their gradient zero), and the weight made 1.5 times the observed one
 * puts its largest values beyond qint8 (their gradient zero, as PyTorch's). */
static void test_gradient(void) {
    enum { R = 5, IN = 6, OUT = 4 };
    ts_manual_seed(9);
    ts_module *lin = ts_linear_new(IN, OUT);
    CHECK(ts_qat_prepare(lin, (ts_qat_opts){0}) == TS_OK);
    float x[R * IN], w[OUT * IN], b[OUT], g[R * OUT];
    for (int i = 0; i < R * IN; i++) x[i] = uni(-1, 1);
    for (int i = 0; i < R * OUT; i++) g[i] = uni(-1, 1);
    host(buf(lin, "weight"), w, sizeof w);
    host(buf(lin, "bias"), b, sizeof b);
    ts_scope_begin();
    CHECK(ts_forward(lin, ts_tensor_f32(TS_SHAPE(R, IN), x, (ts_opts){0})) != NULL);
    ts_scope_end();
    CHECK(ts_qat_freeze_observers(lin, true) == TS_OK);
    for (int i = 0; i < R * IN; i++) x[i] *= 3;
    ts_scope_begin(); /* the in-place op's result is a reference the scope drops */
    ts_no_grad_begin();
    CHECK(ts_mul_scalar_(buf(lin, "weight"), 1.5) != NULL);
    ts_no_grad_end();
    ts_scope_end();
    for (int i = 0; i < OUT * IN; i++) w[i] *= 1.5f; /* the same float32 product */
    ts_scope_begin();
    ts_tensor *xt = ts_tensor_f32(TS_SHAPE(R, IN), x, (ts_opts){0});
    ts_set_requires_grad(xt, true);
    ts_tensor *y = ts_forward(lin, xt);
    CHECK(ts_backward(ts_sum(ts_mul(y, ts_tensor_f32(TS_SHAPE(R, OUT), g, (ts_opts){0})))) ==
          TS_OK);
    float gx[R * IN], gw[OUT * IN], gb[OUT];
    host(ts_grad(xt), gx, sizeof gx);
    host(ts_grad(buf(lin, "weight")), gw, sizeof gw);
    host(ts_grad(buf(lin, "bias")), gb, sizeof gb);
    ts_scope_end();
    /* the reference: fixed qparams from the buffers (checked in the tests above) */
    float wq[OUT * IN];
    int wm[OUT * IN], wm0 = 0, am0 = 0, amb = 0;
    for (int o = 0; o < OUT; o++)
        for (int i = 0; i < IN; i++) {
            wq[o * IN + i] =
                ref_fq(w[o * IN + i], f32_at(lin, "weight_fake_quant.scale", o),
                       i32_at(lin, "weight_fake_quant.zero_point", o), -128, 127, &wm[o * IN + i]);
            wm0 += !wm[o * IN + i];
        }
    const float sc = f32_at(lin, "activation_post_process.scale", 0);
    const int zp = i32_at(lin, "activation_post_process.zero_point", 0);
    double Y[R * OUT], E[R * OUT], dpre[R * OUT];
    linear_ref(x, wq, b, R, IN, OUT, Y, E);
    for (int i = 0; i < R * OUT; i++) {
        int m1, m2;
        ref_fq((float)(Y[i] - E[i]), sc, zp, 0, 127, &m1);
        ref_fq((float)(Y[i] + E[i]), sc, zp, 0, 127, &m2);
        amb += m1 != m2;
        dpre[i] = m1 ? g[i] : 0;
        am0 += !m1;
    }
    CHECK_EQ(amb, 0);
    CHECK(wm0 > 0 && am0 > 0 && am0 < R * OUT); /* both sides of the range are exercised */
    for (int r = 0; r < R; r++)
        for (int i = 0; i < IN; i++) {
            double s = 0, a = 0;
            for (int o = 0; o < OUT; o++)
                s += dpre[r * OUT + o] * wq[o * IN + i],
                    a += fabs(dpre[r * OUT + o] * wq[o * IN + i]);
            CHECK_NEAR(gx[r * IN + i], s, acc_err(OUT, a));
        }
    for (int o = 0; o < OUT; o++) {
        double sb = 0, ab = 0;
        for (int r = 0; r < R; r++) sb += dpre[r * OUT + o], ab += fabs(dpre[r * OUT + o]);
        CHECK_NEAR(gb[o], sb, acc_err(R, ab));
        for (int i = 0; i < IN; i++) {
            double s = 0, a = 0;
            for (int r = 0; r < R; r++)
                s += dpre[r * OUT + o] * x[r * IN + i],
                    a += fabs(dpre[r * OUT + o] * x[r * IN + i]);
            if (!wm[o * IN + i])
                CHECK(gw[o * IN + i] == 0);
            else
                CHECK_NEAR(gw[o * IN + i], s, acc_err(R, a));
        }
    }
    CHECK_OK();
    ts_module_free(lin);
}

/* PyTorch's QAT state-dict keys, in its order, and a load into a fresh prepared model that then
 * computes the same outputs */
static void test_state_dict(void) {
    ts_manual_seed(4);
    tiny *m = tiny_new();
    CHECK(ts_qat_prepare(&m->base, (ts_qat_opts){0}) == TS_OK);
    /* n: the element count, -1 the layer's weight's, -2 its output channels' */
    static const struct {
        const char *key;
        ts_dtype dt;
        int ndim;
        int64_t n;
    } want[] = {{"weight", TS_F32, 0, -1},
                {"bias", TS_F32, 1, -2},
                {"weight_fake_quant.fake_quant_enabled", TS_I64, 1, 1},
                {"weight_fake_quant.observer_enabled", TS_I64, 1, 1},
                {"weight_fake_quant.scale", TS_F32, 1, -2},
                {"weight_fake_quant.zero_point", TS_I32, 1, -2},
                {"weight_fake_quant.activation_post_process.eps", TS_F32, 1, 1},
                {"weight_fake_quant.activation_post_process.min_val", TS_F32, 1, -2},
                {"weight_fake_quant.activation_post_process.max_val", TS_F32, 1, -2},
                {"activation_post_process.fake_quant_enabled", TS_I64, 1, 1},
                {"activation_post_process.observer_enabled", TS_I64, 1, 1},
                {"activation_post_process.scale", TS_F32, 1, 1},
                {"activation_post_process.zero_point", TS_I32, 1, 1},
                {"activation_post_process.activation_post_process.eps", TS_F32, 1, 1},
                {"activation_post_process.activation_post_process.min_val", TS_F32, 0, 1},
                {"activation_post_process.activation_post_process.max_val", TS_F32, 0, 1}};
    const int nw = (int)(sizeof want / sizeof *want);
    ts_tensor_list sd = ts_module_state_dict(&m->base);
    CHECK_EQ(sd.n, 2 * nw);
    for (int i = 0; i < sd.n && i < 2 * nw; i++) {
        const bool conv = i < nw;
        char key[160];
        snprintf(key, sizeof key, "%s.%s", conv ? "conv" : "fc", want[i % nw].key);
        CHECK_STREQ(sd.names[i], key);
        CHECK(ts_dtype_of(sd.tensors[i]) == want[i % nw].dt);
        const int64_t n = want[i % nw].n == -1   ? (conv ? CO * CI * K * K : FOUT * FIN)
                          : want[i % nw].n == -2 ? (conv ? CO : FOUT)
                                                 : want[i % nw].n;
        const int nd = want[i % nw].n == -1 ? (conv ? 4 : 2) : want[i % nw].ndim;
        CHECK_EQ(ts_ndim(sd.tensors[i]), nd);
        CHECK_EQ(ts_numel(sd.tensors[i]), n);
    }
    ts_tensor_list_free(&sd);
    CHECK(f32_at(m->conv, "weight_fake_quant.activation_post_process.eps", 0) == FLT_EPSILON);
    CHECK(isinf(f32_at(m->fc, "activation_post_process.activation_post_process.min_val", 0)));
    /* a trained state loads into a fresh prepared model: the same eval outputs */
    static float x[N * CI * H * H];
    for (int i = 0; i < N * CI * H * H; i++) x[i] = uni(-2, 2);
    ts_scope_begin();
    ts_tensor *xt = ts_tensor_f32(TS_SHAPE(N, CI, H, H), x, (ts_opts){0});
    CHECK(ts_forward(&m->base, xt) != NULL);
    ts_module_eval(&m->base);
    float a[N * FOUT], c[N * FOUT];
    host(ts_forward(&m->base, xt), a, sizeof a);
    ts_manual_seed(99);
    tiny *m2 = tiny_new();
    CHECK(ts_qat_prepare(&m2->base, (ts_qat_opts){0}) == TS_OK);
    sd = ts_module_state_dict(&m->base);
    CHECK(ts_module_load_state_dict(&m2->base, &sd, true) == TS_OK);
    ts_tensor_list_free(&sd);
    ts_module_eval(&m2->base);
    host(ts_forward(&m2->base, xt), c, sizeof c);
    CHECK(!memcmp(a, c, sizeof a));
    ts_scope_end();
    CHECK_OK();
    ts_module_free(&m2->base);
    ts_module_free(&m->base);
}

/* ts_moving_average_per_channel_minmax_update: the first batch as it is ([0] before), then the
 * average per channel along ch_axis 1; a channel at (+inf, -inf) takes the batch's; NaN
 * propagates; the errors */
static void test_per_channel_update(void) {
    ts_scope_begin();
    const float x1[6] = {1, -2, 3, 4, 0.5f, -6}; /* [2, 3]: channels along dim 1 */
    const float x2[6] = {10, 20, -30, 5, 7, NAN};
    ts_tensor *e = ts_empty(TS_SHAPE(0), (ts_opts){0}), *mn, *mx;
    ts_tensor *a = ts_tensor_f32(TS_SHAPE(2, 3), x1, (ts_opts){0}),
              *b2 = ts_tensor_f32(TS_SHAPE(2, 3), x2, (ts_opts){0});
    CHECK(ts_moving_average_per_channel_minmax_update(e, e, a, 1, 0.01, &mn, &mx) == TS_OK);
    float lo[3], hi[3];
    host(mn, lo, sizeof lo);
    host(mx, hi, sizeof hi);
    CHECK(lo[0] == 1 && lo[1] == -2 && lo[2] == -6 && hi[0] == 4 && hi[1] == 0.5f && hi[2] == 3);
    ts_tensor *mn2, *mx2;
    CHECK(ts_moving_average_per_channel_minmax_update(mn, mx, b2, 1, 0.01, &mn2, &mx2) == TS_OK);
    host(mn2, lo, sizeof lo);
    host(mx2, hi, sizeof hi);
    CHECK(lo[0] == 1.0f + 0.01f * (5.0f - 1.0f) && hi[0] == 4.0f + 0.01f * (10.0f - 4.0f));
    CHECK(lo[1] == -2.0f + 0.01f * (7.0f + 2.0f) && hi[1] == 0.5f + 0.01f * (20.0f - 0.5f));
    CHECK(isnan(lo[2]) && isnan(hi[2]));
    const float fresh_lo[3] = {INFINITY, 0, 0}, fresh_hi[3] = {-INFINITY, 1, 1};
    ts_tensor *fl = ts_tensor_f32(TS_SHAPE(3), fresh_lo, (ts_opts){0}),
              *fh = ts_tensor_f32(TS_SHAPE(3), fresh_hi, (ts_opts){0});
    CHECK(ts_moving_average_per_channel_minmax_update(fl, fh, a, 1, 0.5, &mn2, &mx2) == TS_OK);
    host(mn2, lo, sizeof lo);
    host(mx2, hi, sizeof hi);
    CHECK(lo[0] == 1 && hi[0] == 4 && lo[1] == -1 && hi[1] == 0.75f);
    CHECK(ts_moving_average_per_channel_minmax_update(fl, fh, a, 2, 0.5, &mn2, &mx2) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "ch_axis 2 is out of range");
    CHECK(ts_moving_average_per_channel_minmax_update(fl, fh, a, 0, 0.5, &mn2, &mx2) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "moving_average_per_channel_minmax_update");
    CHECK(ts_moving_average_per_channel_minmax_update(fl, fh, a, 1, NAN, &mn2, &mx2) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "averaging_constant must be finite");
    ts_scope_end();
}

static ts_tensor *id_forward(ts_module *self, ts_tensor *x) {
    (void)self;
    return x;
}

static void test_errors(void) {
    CHECK(ts_qat_prepare(NULL, (ts_qat_opts){0}) == TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "qat_prepare: model is NULL");
    /* a second prepare */
    ts_module *lin = ts_linear_new(3, 2);
    CHECK(ts_qat_prepare(lin, (ts_qat_opts){0}) == TS_OK);
    CHECK(ts_qat_prepare(lin, (ts_qat_opts){0}) == TS_ERR_STATE);
    CHECK_ERR_HAS(TS_ERR_STATE, "qat_prepare: the model is already prepared for QAT");
    ts_module_free(lin);
    /* a Conv1d beside a Linear: refused whole, the Linear left as it was */
    ts_module *root = ts_module_alloc(sizeof(ts_module), "Net", id_forward);
    ts_module *fc = ts_module_add(root, "fc", ts_linear_new(3, 2));
    const int k1[1] = {3};
    ts_module_add(root, "conv1d", ts_conv1d_new(2, 2, k1, (ts_convnd_opts){0}));
    CHECK(ts_qat_prepare(root, (ts_qat_opts){0}) == TS_ERR_UNSUPPORTED);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED,
                  "qat_prepare: conv1d (Conv1d) has the 3-dim parameter 'weight', which QAT "
                  "cannot fake-quantize");
    CHECK(ts_module_child(fc, "weight_fake_quant") == NULL);
    ts_error_clear(); /* module_child's "no submodule" */
    ts_tensor_list sd = ts_module_state_dict(root);
    CHECK_EQ(sd.n, 4); /* the float model's keys alone */
    ts_tensor_list_free(&sd);
    ts_module_free(root);
    /* nothing to prepare; not prepared; a bad averaging constant */
    ts_module *relu = ts_relu_new();
    CHECK(ts_qat_prepare(relu, (ts_qat_opts){0}) == TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "has no Linear or Conv2d to prepare");
    CHECK(ts_qat_freeze_observers(relu, true) == TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "qat_freeze_observers: the model (ReLU) is not prepared for QAT");
    CHECK(ts_qat_enable_fake_quant(relu, false) == TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "not prepared for QAT");
    ts_module_free(relu);
    lin = ts_linear_new(3, 2);
    CHECK(ts_qat_prepare(lin, (ts_qat_opts){.averaging_constant = 2}) == TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "averaging_constant must be in (0, 1]");
    ts_module *lin1 = ts_linear_new(3, 2); /* 1, the interval's closed end: the newest batch only */
    CHECK(ts_qat_prepare(lin1, (ts_qat_opts){.averaging_constant = 1}) == TS_OK);
    ts_module_free(lin1);
    /* float64 weights */
    ts_module_to_dtype(lin, TS_F64);
    CHECK(ts_qat_prepare(lin, (ts_qat_opts){0}) == TS_ERR_DTYPE);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "the root (Linear): the weight is float64");
    ts_module_free(lin);
}

int main(void) {
    test_forward();
    test_observers();
    test_gradient();
    test_state_dict();
    test_per_channel_update();
    test_errors();
    return ts_test_finish();
}
