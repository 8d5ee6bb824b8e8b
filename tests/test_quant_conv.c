/* test_quant_conv.c — the quantized 2-D convolution (ts_quantized_conv2d, include/tessera/quant.h)
 * against an exact reference written here: the accumulator as an int64 sum of (x - x_zp)(w -
 * w_zp[co]) over the in-bounds taps of each window (a padded tap contributes nothing, which is
 * what padding with x_zp must give) plus the bias, requantized by the float64 formula of quant.h.
 * Strides, padding, dilation, groups (depthwise: the direct kernel; grouped with several channels
 * a group: im2col and the GEMM), per-tensor and per-channel weights, quint8 and qint8, ReLU, the
 * extreme sums; then the refusals. ts_qlinear_conv2d (ONNX's QLinearConv) on the same cases against
 * ONNX Runtime's formula: the sum wrapped to int32, times the float32 multiplier, half to even,
 * into an output dtype that may differ from x's. Each function runs on the portable kernels and
 * on the host's best (the AVX512-VNNI ones, qconv_vnni.c: direct and im2col routes, depthwise). */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "tessera/elementwise.h"
#include "tessera/quant.h"
#include "ts_test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static int64_t rnd(int64_t lo, int64_t hi) { /* xorshift in [lo, hi] */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int64_t)(rng % (uint64_t)(hi - lo + 1));
}

/* a quantized tensor of the integers v (int8 or uint8 storage as dt) */
static ts_tensor *qints(ts_shape s, ts_dtype dt, const int64_t *v, double scale, int64_t zp) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    unsigned char *b = malloc((size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) b[i] = (unsigned char)(v[i] & 255);
    ts_tensor *r = ts_from_data(s, dt == TS_QUINT8 ? TS_U8 : TS_I8, b, (ts_opts){0});
    free(b);
    return ts_make_per_tensor_quantized_tensor(r, scale, zp);
}

typedef struct conv_case {
    int64_t n, c, h, w, co, kh, kw, sh, sw, ph, pw, dh, dw, groups;
    bool xu, pc, relu, bias, extreme;
    bool ties; /* scales powers of two: acc * mult lands on halves, rounded to even */
} conv_case;

static int run_case(const conv_case *k) {
    int fails = 0;
    ts_scope_begin();
    const int64_t N = k->n, C = k->c, H = k->h, W = k->w, CO = k->co, KH = k->kh, KW = k->kw,
                  G = k->groups, CG = C / G, COG = CO / G;
    const int64_t OH = (H + 2 * k->ph - k->dh * (KH - 1) - 1) / k->sh + 1,
                  OW = (W + 2 * k->pw - k->dw * (KW - 1) - 1) / k->sw + 1;
    const int64_t xlo = k->xu ? 0 : -128, xhi = k->xu ? 255 : 127;
    const int64_t nx = N * C * H * W, nw = CO * CG * KH * KW;
    int64_t *xv = malloc((size_t)nx * sizeof *xv), *wv = malloc((size_t)nw * sizeof *wv);
    const int64_t xzp = k->extreme ? xlo : rnd(xlo + 8, xhi - 8); /* never 0 for quint8 */
    /* ties: small differences, so that the sums stay inside the output range */
    for (int64_t i = 0; i < nx; i++)
        xv[i] = k->extreme ? xhi : k->ties ? rnd(xzp - 6, xzp + 6) : rnd(xlo, xhi);
    for (int64_t i = 0; i < nw; i++)
        wv[i] = k->extreme ? -128 : k->ties ? rnd(-5, 5) : rnd(-128, 127);
    const double xs = k->ties ? 0.5 : 0.0173;
    ts_tensor *x = qints(TS_SHAPE(N, C, H, W), k->xu ? TS_QUINT8 : TS_QINT8, xv, xs, xzp);
    double *ws = malloc((size_t)CO * sizeof *ws);
    int64_t *wz = malloc((size_t)CO * sizeof *wz);
    for (int64_t c = 0; c < CO; c++) {
        ws[c] = k->ties ? (k->pc && c % 2 ? 0.125 : 0.25)
                : k->pc ? 0.001 * (double)rnd(1, 40)
                        : 0.0071;
        wz[c] = k->pc && !k->extreme ? rnd(-5, 5) : 0;
    }
    unsigned char *wb = malloc((size_t)nw);
    for (int64_t i = 0; i < nw; i++) wb[i] = (unsigned char)(wv[i] & 255);
    ts_tensor *wr = ts_from_data(TS_SHAPE(CO, CG, KH, KW), TS_I8, wb, (ts_opts){0});
    ts_tensor *w = k->pc ? ts_make_per_channel_quantized_tensor(
                               wr, ts_tensor_f64(TS_SHAPE(CO), ws, (ts_opts){0}),
                               ts_tensor_i64(TS_SHAPE(CO), wz, (ts_opts){0}), 0)
                         : ts_make_per_tensor_quantized_tensor(wr, ws[0], 0);
    int32_t *bias = malloc((size_t)CO * sizeof *bias);
    /* extreme with a bias: near INT32_MIN, so that ONNX's int32 sum wraps */
    for (int64_t c = 0; c < CO; c++)
        bias[c] = !k->bias ? 0 : k->extreme ? -2147483000 : (int32_t)rnd(-50000, 50000);
    ts_tensor *b = k->bias ? ts_tensor_i32(TS_SHAPE(CO), bias, (ts_opts){0}) : NULL;
    const double os = k->extreme ? 4096.0 : k->ties ? 0.25 : 0.093;
    const int64_t ozp = k->xu ? 77 : -9;
    const int64_t st[2] = {k->sh, k->sw}, pd[2] = {k->ph, k->pw}, dl[2] = {k->dh, k->dw};
    /* float32 multipliers for ts_qlinear_conv2d (ONNX Runtime's: x_scale * w_scale / y_scale) */
    float *fm = malloc((size_t)CO * sizeof *fm);
    for (int64_t c = 0; c < CO; c++) fm[c] = (float)xs * (float)ws[k->pc ? c : 0] / (float)os;
    ts_tensor *fmt = ts_tensor_f32(TS_SHAPE(CO), fm, (ts_opts){0});
    /* the ONNX output's dtype differs from x's in some cases */
    const bool yu8 = k->xu != k->relu;
    const int64_t yzp = yu8 ? 77 : -9, ylo = yu8 ? 0 : -128, yhi = yu8 ? 255 : 127;
    int bad = 0, shape_bad = 0;
    const int64_t ny = N * CO * OH * OW;
    unsigned char *yb = malloc((size_t)ny);
    /* each function on the portable kernels, then on the best the host has (AVX512-VNNI) */
    for (int run = 0; run < 4; run++) {
        const bool ort = run >= 2;
        atomic_store(&tsi_cpu_isa_chosen, run % 2 == 0 ? TS_ISA_GENERIC : (int)tsi_cpu_isa_host());
        ts_tensor *y =
            ort ? ts_qlinear_conv2d(x, w, b, st, pd, dl, G, fmt, yzp, yu8 ? TS_U8 : TS_I8, k->relu)
                : ts_quantized_conv2d(x, w, b, st, pd, dl, G, os, ozp, k->relu);
        atomic_store(&tsi_cpu_isa_chosen, -1);
        if (!y) {
            printf("  error: %s\n", ts_error_message());
            fails++;
            goto out;
        }
        shape_bad += ts_shape_of(y).ndim != 4 || ts_shape_of(y).dims[2] != OH ||
                     ts_shape_of(y).dims[3] != OW;
        if (ort) {
            shape_bad += ts_dtype_of(y) != (yu8 ? TS_U8 : TS_I8);
        } else {
            int64_t yz = -1;
            ts_q_zero_point(y, &yz);
            shape_bad += yz != ozp || ts_q_scale(y) != os || ts_dtype_of(y) != ts_dtype_of(x);
        }
        ts_copy_to_host(ort ? y : ts_int_repr(y), yb, (size_t)ny);
        for (int64_t n = 0; n < N; n++)
            for (int64_t co = 0; co < CO; co++) {
                const int64_t g = co / COG;
                const double mult = xs * ws[k->pc ? co : 0] / os;
                for (int64_t oy = 0; oy < OH; oy++)
                    for (int64_t ox = 0; ox < OW; ox++) {
                        int64_t acc = bias[co];
                        for (int64_t ci = 0; ci < CG; ci++)
                            for (int64_t i = 0; i < KH; i++)
                                for (int64_t j = 0; j < KW; j++) {
                                    const int64_t yy = oy * k->sh - k->ph + i * k->dh,
                                                  xx = ox * k->sw - k->pw + j * k->dw;
                                    if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
                                    acc += (xv[((n * C + g * CG + ci) * H + yy) * W + xx] - xzp) *
                                           (wv[((co * CG + ci) * KH + i) * KW + j] -
                                            wz[k->pc ? co : 0]);
                                }
                        double r, lo, hi;
                        if (ort) { /* int32 wrap, float32 product, half to even */
                            const int32_t a32 = (int32_t)(uint32_t)(uint64_t)acc;
                            r = (double)yzp + (double)nearbyintf((float)a32 * fm[co]);
                            lo = k->relu ? (double)yzp : (double)ylo, hi = (double)yhi;
                        } else {
                            r = (double)ozp + nearbyint((double)acc * mult);
                            lo = k->relu ? (double)ozp : (double)xlo, hi = (double)xhi;
                        }
                        r = r < lo ? lo : r > hi ? hi : r;
                        const int64_t o = ((n * CO + co) * OH + oy) * OW + ox;
                        const bool u = ort ? yu8 : k->xu;
                        const int64_t got = u ? (int64_t)yb[o] : (int64_t)(int8_t)yb[o];
                        bad += got != (int64_t)r;
                    }
            }
    }
out:
    if (bad || shape_bad) {
        printf("  conv N%lld C%lld %lldx%lld CO%lld k%lldx%lld s%lld,%lld p%lld,%lld d%lld,%lld "
               "g%lld %s %s%s: %d outputs wrong%s\n",
               (long long)N, (long long)C, (long long)H, (long long)W, (long long)CO, (long long)KH,
               (long long)KW, (long long)k->sh, (long long)k->sw, (long long)k->ph,
               (long long)k->pw, (long long)k->dh, (long long)k->dw, (long long)G,
               k->xu ? "quint8" : "qint8", k->pc ? "per-channel" : "per-tensor",
               k->relu ? " relu" : "", bad, shape_bad ? ", shape or params wrong" : "");
        fails++;
    }
    free(xv), free(wv), free(ws), free(wz), free(wb), free(bias), free(fm), free(yb);
    ts_scope_end();
    return fails;
}

static void test_cases(void) {
    /* n c h w co kh kw sh sw ph pw dh dw groups | xu pc relu bias extreme */
    const conv_case cases[] = {
        {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, false, false, false, false, false},
        {2, 3, 7, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, false, true, false, false},
        {1, 3, 9, 8, 5, 3, 2, 2, 1, 2, 0, 1, 1, 1, false, true, true, true, false, false},
        {2, 4, 8, 8, 6, 3, 3, 2, 2, 1, 1, 2, 1, 2, true, true, true, true, false, false},
        {1, 6, 7, 9, 6,    3,    3,     1,    1,     1,
         1, 1, 1, 6, true, true, false, true, false, false}, /* depthwise */
        {2, 5, 6, 5, 5, 3, 3, 2, 2, 1, 1, 1, 2, 5, false, true, true, true, false, false},
        {1, 4, 5, 5, 4, 5, 5, 1, 1, 2, 2, 1, 1, 4, true, false, false, false, false, false},
        {1, 3, 6, 6, 6,    3,    3,    1,    2,     1,
         1, 1, 1, 3, true, true, true, true, false, false}, /* 2 a group */
        {1, 8, 5, 7, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, true, false, true, false, false},
        {1, 16, 6, 6, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false, false, true, false, false},
        {1, 2, 4, 4, 2,    3,    3,     1,    1,     3,
         3, 1, 1, 1, true, true, false, true, false, false}, /* all pad */
        {1, 2, 4, 4, 2, 3, 3, 1, 1, 3, 3, 1, 1, 2, true, true, false, true, false, false},
        /* the largest sums: x 255, w -128, 7281 taps a group */
        {1, 809, 3, 3, 2, 3, 3, 1, 1, 0, 0, 1, 1, 1, true, false, false, false, true, false},
        /* ties at every other output: half to even, GEMM and direct */
        {1, 2, 5, 5, 4, 2, 2, 1, 1, 0, 0, 1, 1, 1, true, true, false, false, false, true},
        {1, 4, 5, 5, 4, 2, 2, 1, 1, 1, 1, 1, 1, 4, false, true, false, false, false, true},
        /* the int32 wrap of ONNX's sums: a bias near INT32_MIN */
        {1, 809, 3, 3, 2, 3, 3, 1, 1, 0, 0, 1, 1, 1, true, false, false, true, true, false},
        /* the VNNI kernels' tails: 3 channels (a partial group of 4), 7x7 stride 2 (phases),
         * rows wider than 16 positions, channels past a tile of 8, dilation with stride, and
         * depthwise at stride 2 with rows past 16 */
        {2, 3, 13, 12, 5, 7, 7, 2, 2, 3, 3, 1, 1, 1, true, false, true, true, false, false},
        {1, 8, 5, 37, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, false, true, false, false},
        {1, 5, 9, 9, 11, 3, 3, 2, 1, 2, 1, 2, 1, 1, false, false, false, true, false, false},
        {1, 4, 6, 35, 4, 3, 3, 2, 2, 1, 1, 1, 1, 4, true, true, true, true, false, false},
        {2, 12, 7, 7, 20, 1, 1, 2, 2, 0, 0, 1, 1, 1, true, false, true, true, false, false},
        {1, 16, 6, 6, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, false, true, false, true},
        /* direct: a dilation of 36 drops 36 of each row's 40 columns, so a whole panel of 16
         * positions is dropped and the next one starts in the dropped columns */
        {1, 4, 3, 40, 8, 1, 2, 1, 1, 0, 0, 1, 36, 1, true, false, false, true, false, false},
        /* depthwise: dilation with stride 2 (the taps' offsets), int8; 81 taps (past the table of
         * 64 tap offsets: the other loop) */
        {1, 3, 9, 11, 3, 3, 3, 2, 2, 2, 2, 2, 2, 3, false, true, false, true, false, false},
        {1, 2, 10, 10, 2, 9, 9, 1, 1, 4, 4, 1, 1, 2, true, true, true, true, false, false},
    };
    int fails = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) fails += run_case(&cases[i]);
    CHECK_EQ(fails, 0);
}

static void test_refusals(void) {
    ts_scope_begin();
    const int64_t one[2] = {1, 1}, zero[2] = {0, 0};
    int64_t v[64] = {0};
    ts_tensor *x = qints(TS_SHAPE(1, 2, 4, 4), TS_QUINT8, v, 0.1, 3);
    ts_tensor *w = ts_make_per_tensor_quantized_tensor(
        ts_zeros(TS_SHAPE(3, 2, 3, 3), (ts_opts){.dtype = TS_I8}), 0.1, 0);
    CHECK(ts_quantized_conv2d(x, w, NULL, one, zero, one, 1, 0.2, 5, false) != NULL);
    CHECK_OK();
    CHECK(!ts_quantized_conv2d(ts_dequantize(x), w, NULL, one, zero, one, 1, 0.2, 5, false));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "quantized_conv2d: input must be quint8 or qint8");
    CHECK(!ts_quantized_conv2d(x, x, NULL, one, zero, one, 1, 0.2, 5, false));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "weight must be qint8");
    CHECK(!ts_quantized_conv2d(x, w, NULL, one, zero, one, 2, 0.2, 5, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "groups 2 must divide");
    CHECK(!ts_quantized_conv2d(x, w, NULL, (int64_t[2]){0, 1}, zero, one, 1, 0.2, 5, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "stride (0)");
    CHECK(!ts_quantized_conv2d(x, w, NULL, one, (int64_t[2]){-1, 0}, one, 1, 0.2, 5, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "padding (-1)");
    CHECK(!ts_quantized_conv2d(x, w, NULL, one, zero, one, 1, 0.0, 5, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "output scale");
    CHECK(!ts_quantized_conv2d(x, w, NULL, one, zero, one, 1, 0.2, 256, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "output zero_point 256");
    CHECK(!ts_quantized_conv2d(x, w, ts_zeros(TS_SHAPE(3), (ts_opts){.dtype = TS_F64}), one, zero,
                               one, 1, 0.2, 5, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "bias must be int32 or float32 [3]");
    CHECK(!ts_quantized_conv2d(x, w, NULL, one, zero, (int64_t[2]){3, 1}, 1, 0.2, 5, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "larger than the padded input");
    ts_tensor *w3 = ts_make_per_tensor_quantized_tensor(
        ts_zeros(TS_SHAPE(3, 2, 3), (ts_opts){.dtype = TS_I8}), 0.1, 0);
    CHECK(!ts_quantized_conv2d(x, w3, NULL, one, zero, one, 1, 0.2, 5, false));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "[Cout, C / groups, KH, KW]");
    /* the float op refuses quantized tensors: the gate */
    CHECK(!ts_relu(x));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "quantized tensors are not supported");
    CHECK_OK();
    ts_scope_end();
}

/* the sim device runs the cpu kernels: the same integers */
static void test_sim(void) {
    ts_sim_configure(1, 0);
    ts_scope_begin();
    float xf[2 * 3 * 5 * 5], wf[4 * 3 * 3 * 3];
    for (int i = 0; i < 150; i++) xf[i] = (float)rnd(-100, 100) / 37.0f;
    for (int i = 0; i < 108; i++) wf[i] = (float)rnd(-100, 100) / 91.0f;
    const int64_t one[2] = {1, 1}, st[2] = {2, 1};
    unsigned char a[2 * 4 * 3 * 5], b[2 * 4 * 3 * 5];
    for (int dev = 0; dev < 2; dev++) {
        ts_device d = dev ? ts_sim(0) : ts_cpu();
        ts_tensor *x = ts_quantize_per_tensor(
            ts_to(ts_tensor_f32(TS_SHAPE(2, 3, 5, 5), xf, (ts_opts){0}), d), 0.03, 128, TS_QUINT8);
        ts_tensor *w = ts_quantize_per_tensor(
            ts_to(ts_tensor_f32(TS_SHAPE(4, 3, 3, 3), wf, (ts_opts){0}), d), 0.01, 0, TS_QINT8);
        ts_tensor *y = ts_quantized_conv2d(x, w, NULL, st, one, one, 1, 0.05, 100, false);
        CHECK(y && ts_device_equal(ts_device_of(y), d));
        CHECK_EQ(ts_copy_to_host(ts_to(ts_int_repr(y), ts_cpu()), dev ? b : a, sizeof a), TS_OK);
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    test_cases();
    test_sim();
    test_refusals();
    return ts_test_finish();
}
