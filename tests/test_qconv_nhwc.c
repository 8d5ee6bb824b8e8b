/* test_qconv_nhwc.c — channels_last int8 activations (decision 0053): ts_qlinear_conv2d and
 * ts_quantized_conv2d on a channels_last input give a channels_last output whose integers are the
 * NCHW route's bit for bit and ONNX Runtime's formula computed here (int64 sums of (x - x_zp) * w
 * over the in-bounds taps plus the bias, wrapped to int32, times the float32 multiplier, clamped,
 * half to even, plus y_zp), over strides, padding with x_zp 0 (oneDNN's own padding) and not,
 * dilation, groups and depthwise, 1x1, a 7x7 stem, uint8 / int8, ReLU, sums past 2^24 (the own
 * kernels through NCHW copies), TS_QCONV=own, and a strided input that is neither layout. Then the
 * consumers the ONNX importer feeds them: ts_qlinear_add, the quantized max / adaptive average
 * pools, the no-copy views (ops/quant_internal.h), dequantization and reshapes, each on
 * channels_last inputs against contiguous ones. On hosts with oneDNN's int8 route: a channels_last
 * uint8 input with x_zp 0 or no padding is read where it lies (counted). Every case also runs
 * from its NCHW input with a channels_last output asked for (tsi_qlinear_conv2d_cl, a chain's
 * first convolution), and again in bands of output rows (qconv_dnnl.c: one row, then a few). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/qconv_dnnl.h"
#include "backend/env_config.h"
#include "core/internal.h"
#include "ops/quant_internal.h"
#include "tessera/quant.h"
#include "ts_test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static int64_t rnd(int64_t lo, int64_t hi) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int64_t)(rng % (uint64_t)(hi - lo + 1));
}

typedef struct qcase {
    int64_t n, c, h, w, co, kh, kw, sh, sw, ph, pw, dh, dw, g;
    bool xu, yu, relu, bias;
    int64_t xzp; /* -1000: random */
    bool big;    /* x at its top, w at -128: sums past 2^24 */
} qcase;

/* the bytes of t in logical (NCHW) order */
static uint8_t *host_bytes(ts_tensor *t) {
    const size_t n = (size_t)ts_numel(t);
    uint8_t *b = malloc(n ? n : 1);
    CHECK(ts_copy_to_host(t, b, n) == TS_OK);
    return b;
}

static bool is_cl(ts_tensor *t) {
    return ts_is_contiguous_format(t, TS_CHANNELS_LAST) && !ts_is_contiguous(t);
}

static bool same_bytes(ts_tensor *a, ts_tensor *b);

/* ONNX Runtime's byte at (n, co, oy, ox) */
static int32_t reference(const qcase *k, const uint8_t *x, const int8_t *w, const int32_t *bias,
                         const float *fm, int64_t xzp, int64_t yzp, int64_t oh, int64_t ow,
                         int64_t n, int64_t co, int64_t oy, int64_t ox) {
    (void)oh, (void)ow;
    const int64_t cg = k->c / k->g, g = co / (k->co / k->g);
    int64_t acc = bias ? bias[co] : 0;
    for (int64_t ci = 0; ci < cg; ci++)
        for (int64_t i = 0; i < k->kh; i++)
            for (int64_t j = 0; j < k->kw; j++) {
                const int64_t y = oy * k->sh - k->ph + i * k->dh,
                              xx = ox * k->sw - k->pw + j * k->dw;
                if (y < 0 || y >= k->h || xx < 0 || xx >= k->w) continue;
                const uint8_t b = x[((n * k->c + g * cg + ci) * k->h + y) * k->w + xx];
                const int64_t xv = k->xu ? b : (int8_t)b;
                acc += (xv - xzp) * w[((co * cg + ci) * k->kh + i) * k->kw + j];
            }
    float f = (float)(int32_t)(uint32_t)(uint64_t)acc * fm[co];
    const int32_t lo0 = k->yu ? 0 : -128, hi = k->yu ? 255 : 127;
    const int32_t lo = k->relu && yzp > lo0 ? (int32_t)yzp : lo0;
    const float flo = (float)(lo - yzp), fhi = (float)(hi - yzp);
    f = f < flo ? flo : f > fhi ? fhi : f;
    return (int32_t)yzp + (int32_t)nearbyintf(f);
}

/* one case: NCHW route, channels_last route, reference; expect_direct: oneDNN must read the
 * channels_last input where it lies */
static void check_case(const qcase *k, bool expect_direct) {
    ts_scope_begin();
    const int64_t cg = k->c / k->g, nx = k->n * k->c * k->h * k->w, nw = k->co * cg * k->kh * k->kw;
    const int64_t oh = (k->h + 2 * k->ph - k->dh * (k->kh - 1) - 1) / k->sh + 1,
                  ow = (k->w + 2 * k->pw - k->dw * (k->kw - 1) - 1) / k->sw + 1,
                  ny = k->n * k->co * oh * ow;
    uint8_t *x = malloc((size_t)nx);
    int8_t *w = malloc((size_t)nw);
    int32_t *bias = malloc((size_t)k->co * sizeof *bias);
    float *fm = malloc((size_t)k->co * sizeof *fm);
    const int64_t xzp = k->xzp != -1000 ? k->xzp : k->xu ? rnd(1, 250) : rnd(-120, 120);
    const int64_t yzp = k->yu ? rnd(0, 255) : rnd(-128, 127);
    for (int64_t i = 0; i < nx; i++)
        x[i] = k->big ? (uint8_t)(k->xu ? 255 : 127) : (uint8_t)rnd(0, 255);
    for (int64_t i = 0; i < nw; i++) w[i] = k->big ? -128 : (int8_t)rnd(-128, 127);
    for (int64_t c = 0; c < k->co; c++) {
        bias[c] = (int32_t)rnd(-40000, 40000);
        fm[c] = k->big ? 1e-7f : (float)(0.0001 * (double)rnd(1, 30));
    }
    const ts_dtype xdt = k->xu ? TS_U8 : TS_I8, ydt = k->yu ? TS_U8 : TS_I8;
    ts_tensor *xr = ts_from_data(TS_SHAPE(k->n, k->c, k->h, k->w), xdt, x, (ts_opts){0});
    ts_tensor *xcl = ts_contiguous_format(xr, TS_CHANNELS_LAST);
    ts_tensor *qx = ts_make_per_tensor_quantized_tensor(xr, 0.02, xzp);
    ts_tensor *qxcl = tsi_quantized_view("test", xcl, 0.02, xzp);
    ts_tensor *qw = ts_make_per_tensor_quantized_tensor(
        ts_from_data(TS_SHAPE(k->co, cg, k->kh, k->kw), TS_I8, w, (ts_opts){0}), 0.01, 0);
    ts_tensor *b = k->bias ? ts_from_data(TS_SHAPE(k->co), TS_I32, bias, (ts_opts){0}) : NULL;
    ts_tensor *m = ts_tensor_f32(TS_SHAPE(k->co), fm, (ts_opts){0});
    CHECK(qxcl && is_cl(qxcl) && tsi_kview(qxcl).data == tsi_kview(xcl).data); /* a view: no copy */
    const int64_t st[2] = {k->sh, k->sw}, pd[2] = {k->ph, k->pw}, dl[2] = {k->dh, k->dw};
    ts_tensor *y0 = ts_qlinear_conv2d(qx, qw, b, st, pd, dl, k->g, m, yzp, ydt, k->relu);
    const uint64_t direct0 = tsi_qconv_dnnl_direct_count();
    ts_tensor *y1 = ts_qlinear_conv2d(qxcl, qw, b, st, pd, dl, k->g, m, yzp, ydt, k->relu);
    const uint64_t direct1 = tsi_qconv_dnnl_direct_count();
    /* the NCHW input asked for a channels_last output (a chain's first convolution) */
    ts_tensor *y2 = tsi_qlinear_conv2d_cl(qx, qw, b, st, pd, dl, k->g, m, yzp, ydt, k->relu);
    CHECK(y0 && y1 && y2);
    if (!y0 || !y1 || !y2) {
        ts_scope_end();
        free(x), free(w), free(bias), free(fm);
        return;
    }
    CHECK(ts_is_contiguous(y0));
    CHECK(is_cl(y1) || k->co == 1 || oh * ow == 1);
    if (tsi_qconv_prefers_channels_last(qx))
        CHECK(is_cl(y2) || k->co == 1 || oh * ow == 1);
    else
        CHECK(ts_is_contiguous(y2)); /* no preference: the input's layout */
    CHECK(same_bytes(y0, y2));
    if (expect_direct) CHECK_EQ(direct1, direct0 + 1);
    uint8_t *b0 = host_bytes(y0), *b1 = host_bytes(y1);
    int64_t diff = 0, diff_ref = 0;
    for (int64_t i = 0; i < ny; i++) {
        diff += b0[i] != b1[i];
        const int64_t p = i % (oh * ow), co = i / (oh * ow) % k->co, n = i / (oh * ow * k->co);
        const int32_t r =
            reference(k, x, w, k->bias ? bias : NULL, fm, xzp, yzp, oh, ow, n, co, p / ow, p % ow);
        diff_ref += (k->yu ? b1[i] : (int8_t)b1[i]) != r;
    }
    if (diff || diff_ref)
        printf("  case c %lld co %lld k %lldx%lld s %lld p %lld g %lld xzp %lld: %lld bytes differ "
               "from NCHW, %lld from the reference\n",
               (long long)k->c, (long long)k->co, (long long)k->kh, (long long)k->kw,
               (long long)k->sh, (long long)k->ph, (long long)k->g, (long long)xzp, (long long)diff,
               (long long)diff_ref);
    CHECK_EQ(diff, 0);
    CHECK_EQ(diff_ref, 0);
    free(b0), free(b1);

    /* the float64 requantization (the own kernels on NCHW copies): channels_last, the same */
    ts_tensor *z0 = ts_quantized_conv2d(qx, qw, b, st, pd, dl, k->g, 0.05, 3, k->relu);
    ts_tensor *z1 = ts_quantized_conv2d(qxcl, qw, b, st, pd, dl, k->g, 0.05, 3, k->relu);
    CHECK(z0 && z1 && (is_cl(z1) || k->co == 1 || oh * ow == 1));
    if (z0 && z1) {
        ts_tensor *i0 = ts_int_repr(z0), *i1 = ts_int_repr(z1);
        uint8_t *c0 = host_bytes(i0), *c1 = host_bytes(i1);
        CHECK(!memcmp(c0, c1, (size_t)ny));
        free(c0), free(c1);
    }
    ts_scope_end();
    free(x), free(w), free(bias), free(fm);
}

static void test_conv(bool dnnl) {
    /* n c h w co kh kw sh sw ph pw dh dw g | xu yu relu bias | xzp big */
    const struct {
        qcase k;
        bool direct;
    } cases[] = {
        {{2, 16, 9, 9, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, true, true, 0, false}, true},
        {{2, 16, 9, 9, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, true, true, 37, false}, false},
        {{1, 8, 11, 10, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, false, false, true, -1000, false},
         false},
        {{2, 32, 8, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32, true, true, true, true, 0, false}, true},
        {{1, 48, 9, 9, 48, 3, 3, 2, 2, 1, 1, 1, 1, 48, true, false, false, true, 5, false}, false},
        {{1, 16, 10, 10, 8, 3, 3, 1, 1, 2, 2, 2, 2, 4, true, true, false, true, 0, false}, true},
        {{3, 64, 5, 7, 40, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, true, false, true, 99, false}, true},
        {{1, 128, 14, 14, 32, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, true, false, true, 7, false}, true},
        {{1, 64, 8, 8, 32, 1, 1, 2, 2, 0, 0, 1, 1, 1, true, false, false, false, 0, false}, true},
        {{1, 3, 20, 18, 16, 7, 7, 2, 2, 3, 3, 1, 1, 1, true, true, true, true, 114, false}, false},
        {{1, 20, 7, 7, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, true, true, true, -1000, false},
         false},
        /* stride 2 with padding read in place (MobileNetV2's depthwise; odd and even heights) */
        {{1, 24, 13, 12, 24, 3, 3, 2, 2, 1, 1, 1, 1, 24, true, true, true, true, 0, false}, true},
        {{2, 16, 10, 9, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, true, false, false, true, 0, false}, true},
        /* int8 inputs: flipped by 128 in a copy, never read in place */
        {{2, 32, 6, 5, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, true, false, true, -7, false}, false},
        {{2, 16, 6, 6, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false, true, true, 0, false}, false},
        /* 576 taps of 255 x -128: the route declines after running, the own kernels redo it */
        {{1, 64, 5, 5, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, false, false, 0, true}, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i].k, dnnl && cases[i].direct);
}

/* oneDNN's route in bands of output rows (qconv_dnnl.c): one row a band, then a few with a
 * shorter last one; the first and last bands take the padding (taller than a band for the 7x7
 * stem and the dilated case), the in-place input with x_zp 0 read at each band's rows. Padding
 * taller than a band on both sides in more geometries than a call keeps: the whole image. */
static void test_bands(bool dnnl) {
    if (!dnnl) return;
    const uint64_t banded0 = tsi_qconv_dnnl_banded_count();
    const int64_t sizes[2] = {1, 1500};
    for (int i = 0; i < 2; i++) {
        tsi_qconv_dnnl_set_band_bytes(sizes[i]);
        test_conv(true);
        /* 11x11 with padding 5, one row a band: 5 top geometries, 5 bottom, one middle */
        const qcase wide = {1, 8, 12, 12, 16,   11,   11,    1,    1, 5,
                            5, 1, 1,  1,  true, true, false, true, 0, false};
        check_case(&wide, true);
    }
    tsi_qconv_dnnl_set_band_bytes(0);
    CHECK(tsi_qconv_dnnl_banded_count() >= banded0 + 20);
}

/* an input that is neither NCHW- nor NHWC-dense (H and W swapped by a transpose): copied
 * contiguous first, the transposed values convolved */
static void test_strided_input(void) {
    ts_scope_begin();
    uint8_t x[2 * 4 * 5 * 6];
    int8_t w[3 * 4 * 3 * 3];
    for (size_t i = 0; i < sizeof x; i++) x[i] = (uint8_t)rnd(0, 255);
    for (size_t i = 0; i < sizeof w; i++) w[i] = (int8_t)rnd(-128, 127);
    ts_tensor *xr = ts_from_data(TS_SHAPE(2, 4, 5, 6), TS_U8, x, (ts_opts){0});
    ts_tensor *xt = ts_transpose(xr, 2, 3); /* [2, 4, 6, 5], strided */
    ts_tensor *qv = tsi_quantized_view("test", xt, 0.1, 9);
    ts_tensor *qc = ts_make_per_tensor_quantized_tensor(ts_contiguous(xt), 0.1, 9);
    ts_tensor *qw = ts_make_per_tensor_quantized_tensor(
        ts_from_data(TS_SHAPE(3, 4, 3, 3), TS_I8, w, (ts_opts){0}), 0.01, 0);
    const float f = 0.003f;
    ts_tensor *m = ts_tensor_f32(TS_SHAPE(1), &f, (ts_opts){0});
    const int64_t one[2] = {1, 1};
    ts_tensor *y0 = ts_qlinear_conv2d(qc, qw, NULL, one, one, one, 1, m, 4, TS_U8, false);
    ts_tensor *y1 = ts_qlinear_conv2d(qv, qw, NULL, one, one, one, 1, m, 4, TS_U8, false);
    CHECK(y0 && y1 && !ts_is_contiguous(qv));
    if (y0 && y1) {
        uint8_t *b0 = host_bytes(y0), *b1 = host_bytes(y1);
        CHECK(!memcmp(b0, b1, (size_t)ts_numel(y0)));
        free(b0), free(b1);
    }
    ts_scope_end();
}

/* ---- the consumers */
static ts_tensor *random_u8(ts_shape s, ts_dtype dt) {
    const int64_t n = tsi_numel(s);
    uint8_t *b = malloc((size_t)n);
    for (int64_t i = 0; i < n; i++) b[i] = (uint8_t)rnd(0, 255);
    ts_tensor *t = ts_from_data(s, dt, b, (ts_opts){0});
    free(b);
    return t;
}

/* a and b hold the same logical bytes */
static bool same_bytes(ts_tensor *a, ts_tensor *b) {
    if (!a || !b || ts_numel(a) != ts_numel(b)) return false;
    uint8_t *x = host_bytes(a), *y = host_bytes(b);
    const bool eq = !memcmp(x, y, (size_t)ts_numel(a));
    free(x), free(y);
    return eq;
}

static void test_add(void) {
    ts_scope_begin();
    const ts_dtype dts[2] = {TS_U8, TS_I8};
    for (int d = 0; d < 2; d++) {
        ts_tensor *a = random_u8(TS_SHAPE(2, 24, 5, 7), dts[d]),
                  *b = random_u8(TS_SHAPE(2, 24, 5, 7), dts[d]);
        ts_tensor *acl = ts_contiguous_format(a, TS_CHANNELS_LAST),
                  *bcl = ts_contiguous_format(b, TS_CHANNELS_LAST);
        const float ra = 0.73f, rb = 1.31f, fx = -17.25f;
        ts_tensor *y0 = ts_qlinear_add(a, b, ra, rb, fx);
        ts_tensor *y1 = ts_qlinear_add(acl, bcl, ra, rb, fx);
        ts_tensor *y2 = ts_qlinear_add(a, bcl, ra, rb, fx); /* mixed: made channels_last */
        ts_tensor *y3 = ts_qlinear_add(acl, ts_reshape(b, TS_SHAPE(2, 24, 5, 7)), ra, rb, fx);
        uint8_t one = 77;
        ts_tensor *s = ts_from_data(TS_SHAPE(1), dts[d], &one, (ts_opts){0});
        ts_tensor *y4 = ts_qlinear_add(a, s, ra, rb, fx), *y5 = ts_qlinear_add(acl, s, ra, rb, fx);
        CHECK(y0 && ts_is_contiguous(y0) && y1 && is_cl(y1) && y2 && is_cl(y2) && y3 && is_cl(y3));
        CHECK(same_bytes(y0, y1) && same_bytes(y0, y2) && same_bytes(y0, y3));
        CHECK(same_bytes(y4, y5));
    }
    ts_scope_end();
}

static void test_pools(void) {
    ts_scope_begin();
    const ts_dtype dts[2] = {TS_U8, TS_I8};
    for (int d = 0; d < 2; d++) {
        ts_tensor *x = random_u8(TS_SHAPE(2, 19, 9, 11), dts[d]);
        ts_tensor *xcl = ts_contiguous_format(x, TS_CHANNELS_LAST);
        ts_tensor *q0 = ts_make_per_tensor_quantized_tensor(x, 0.5, 3),
                  *q1 = tsi_quantized_view("test", xcl, 0.5, 3);
        const int64_t geo[4][8] = {/* kernel, stride, pad, dil */
                                   {3, 3, 2, 2, 1, 1, 1, 1},
                                   {2, 3, 1, 2, 1, 0, 1, 1},
                                   {3, 2, 1, 1, 0, 1, 2, 2},
                                   {1, 1, 1, 1, 0, 0, 1, 1}};
        for (int g = 0; g < 4; g++)
            for (int cm = 0; cm < 2; cm++) {
                const int64_t *p = geo[g];
                ts_tensor *y0 = ts_quantized_max_pool2d(q0, p, p + 2, p + 4, p + 6, cm);
                ts_tensor *y1 = ts_quantized_max_pool2d(q1, p, p + 2, p + 4, p + 6, cm);
                CHECK(y0 && y1 && is_cl(y1));
                ts_tensor *v1 = y1 ? tsi_int_view("test", y1) : NULL;
                CHECK(v1 && is_cl(v1) && tsi_kview(v1).data == tsi_kview(y1).data);
                CHECK(y0 && same_bytes(ts_int_repr(y0), v1));
            }
        const int64_t sizes[3][2] = {{1, 1}, {4, 3}, {9, 11}};
        for (int i = 0; i < 3; i++) {
            ts_tensor *y0 = ts_quantized_adaptive_avg_pool2d(q0, sizes[i][0], sizes[i][1]);
            ts_tensor *y1 = ts_quantized_adaptive_avg_pool2d(q1, sizes[i][0], sizes[i][1]);
            CHECK(y0 && y1 && same_bytes(ts_int_repr(y0), ts_int_repr(y1)));
        }
        /* a view that is neither layout: copied contiguous first */
        ts_tensor *qt = tsi_quantized_view("test", ts_transpose(x, 2, 3), 0.5, 3);
        ts_tensor *qtc = ts_make_per_tensor_quantized_tensor(ts_transpose(x, 2, 3), 0.5, 3);
        const int64_t k[2] = {3, 2}, s1[2] = {1, 2}, z[2] = {1, 1}, o[2] = {1, 1};
        CHECK(same_bytes(ts_int_repr(ts_quantized_max_pool2d(qt, k, s1, z, o, false)),
                         ts_int_repr(ts_quantized_max_pool2d(qtc, k, s1, z, o, false))));
        /* DequantizeLinear's ops, Flatten / Reshape on a channels_last activation */
        ts_tensor *f0 = ts_mul_scalar(ts_sub_scalar(ts_to_dtype(x, TS_F32), 3), 0.5);
        ts_tensor *f1 = ts_mul_scalar(ts_sub_scalar(ts_to_dtype(xcl, TS_F32), 3), 0.5);
        CHECK(f0 && f1 && ts_allclose(f0, f1, 0, 0, false) == 1);
        CHECK(same_bytes(ts_reshape(x, TS_SHAPE(2, -1)), ts_reshape(xcl, TS_SHAPE(2, -1))));
        CHECK(same_bytes(ts_flatten(x, 1, -1), ts_flatten(xcl, 1, -1)));
    }
    ts_scope_end();
}

static void test_prefers(bool dnnl) {
    ts_scope_begin();
    ts_tensor *x = random_u8(TS_SHAPE(1, 4, 3, 3), TS_U8);
    CHECK_EQ((int)tsi_qconv_prefers_channels_last(x), (int)dnnl);
    setenv("TS_QCONV", "nchw", 1); /* the route table, NCHW activations */
    tsi_env_reload(TSI_ENV_QCONV);
    CHECK(!tsi_qconv_prefers_channels_last(x));
    setenv("TS_QCONV", "own", 1);
    tsi_env_reload(TSI_ENV_QCONV);
    CHECK(!tsi_qconv_prefers_channels_last(x));
    /* the own kernels on channels_last: through NCHW copies, the same bytes */
    test_conv(false);
    unsetenv("TS_QCONV");
    tsi_env_reload(TSI_ENV_QCONV);
    ts_scope_end();
}

int main(void) {
    tsi_init();
    const bool dnnl = tsi_qconv_dnnl_available();
    if (!dnnl) printf("  (no oneDNN int8 route here: channels_last runs the own kernels)\n");
    test_conv(dnnl);
    test_bands(dnnl);
    test_strided_input();
    test_add();
    test_pools();
    test_prefers(dnnl);
    return ts_test_finish();
}
