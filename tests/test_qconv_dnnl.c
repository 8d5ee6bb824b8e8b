/* test_qconv_dnnl.c — the oneDNN route of the int8 convolution (backend/cpu/qconv_dnnl.c) against
 * the own AVX512-VNNI kernels (qconv_vnni.c) bit for bit, and both against ONNX Runtime's formula
 * computed here (int64 sums of (x - x_zp) * w over the in-bounds taps plus the bias, wrapped to
 * int32, times the float32 multiplier, clamped, half to even, plus y_zp). Shapes: strides,
 * padding, dilation, groups (depthwise and 4 channels a group), 1x1, a 7x7 stem, uint8 and int8
 * inputs and outputs, zero points, ReLU, ties. Then what the route must not take: weight zero
 * points and the float64 requantization (declined before running, the output untouched), and
 * sums of 2^24 or more (oneDNN's float32 store may round them: declined after running, counted;
 * ts_qlinear_conv2d then still gives ORT's integers through the own kernels). Last, the route
 * table of kern_qconv.c and TS_QCONV through ts_qlinear_conv2d: a 1x1 reduction at 14x14 stays on
 * the own kernels, a 3x3 conv goes to oneDNN, TS_QCONV=own|dnnl overrides both. The shapes and the
 * declines run again in bands of output rows (qconv_dnnl.c: one row a band, then a few). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/conv_dnnl.h"
#include "backend/cpu/qconv_dnnl.h"
#include "backend/cpu/qconv_vnni.h"
#include "backend/cpu/qgemm_vnni.h"
#include "backend/env_config.h"
#include "core/internal.h"
#include "tessera/quant.h"
#include "ts_test.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static int64_t rnd(int64_t lo, int64_t hi) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int64_t)(rng % (uint64_t)(hi - lo + 1));
}

typedef struct qcase {
    int64_t n, c, h, w, co, kh, kw, sh, sw, ph, pw, dh, dw, g;
    bool xu, yu, relu, bias, ties;
} qcase;

typedef struct qdata {
    ts_qconv_args a;
    uint8_t *x, *y_dnnl, *y_own;
    int8_t *w;
    int32_t *wzp, *bias;
    float *fm;
    int64_t ny;
} qdata;

static void qdata_free(qdata *d) {
    free(d->x), free(d->y_dnnl), free(d->y_own), free(d->w), free(d->wzp), free(d->bias);
    free(d->fm);
}

/* random operands of k; big: x at its top, w at -128 (the largest sums) */
static qdata make(const qcase *k, bool big) {
    qdata d;
    memset(&d, 0, sizeof d);
    const int64_t cg = k->c / k->g, oh = (k->h + 2 * k->ph - k->dh * (k->kh - 1) - 1) / k->sh + 1,
                  ow = (k->w + 2 * k->pw - k->dw * (k->kw - 1) - 1) / k->sw + 1;
    const int64_t nx = k->n * k->c * k->h * k->w, nw = k->co * cg * k->kh * k->kw;
    d.ny = k->n * k->co * oh * ow;
    d.x = malloc((size_t)nx), d.w = malloc((size_t)nw), d.y_dnnl = malloc((size_t)d.ny);
    d.y_own = malloc((size_t)d.ny), d.wzp = calloc((size_t)k->co, sizeof *d.wzp);
    d.bias = malloc((size_t)k->co * sizeof *d.bias), d.fm = malloc((size_t)k->co * sizeof *d.fm);
    const int32_t xzp = k->xu ? (int32_t)rnd(1, 250) : (int32_t)rnd(-120, 120);
    for (int64_t i = 0; i < nx; i++)
        d.x[i] = big       ? (uint8_t)(k->xu ? 255 : 127)
                 : k->ties ? (uint8_t)(xzp + rnd(-4, 4))
                           : (uint8_t)rnd(0, 255);
    for (int64_t i = 0; i < nw; i++)
        d.w[i] = big ? -128 : (int8_t)(k->ties ? rnd(-4, 4) : rnd(-128, 127));
    for (int64_t c = 0; c < k->co; c++) {
        d.bias[c] = k->bias ? (int32_t)rnd(-40000, 40000) : 0;
        d.fm[c] = k->ties ? (c % 2 ? 0.5f : 0.25f) : (float)(0.0001 * (double)rnd(1, 30));
    }
    const int32_t yzp = k->yu ? (int32_t)rnd(0, 255) : (int32_t)rnd(-128, 127);
    const int32_t lo = k->yu ? 0 : -128, hi = k->yu ? 255 : 127;
    d.a = (ts_qconv_args){.n = k->n,
                          .c = k->c,
                          .h = k->h,
                          .w = k->w,
                          .cout = k->co,
                          .kh = k->kh,
                          .kw = k->kw,
                          .oh = oh,
                          .ow = ow,
                          .groups = k->g,
                          .stride = {k->sh, k->sw},
                          .pad = {k->ph, k->pw},
                          .dil = {k->dh, k->dw},
                          .x = d.x,
                          .x_unsigned = k->xu,
                          .x_zp = xzp,
                          .wt = d.w,
                          .w_zp = d.wzp,
                          .bias = k->bias ? d.bias : NULL,
                          .fmult = d.fm,
                          .out_unsigned = k->yu,
                          .out_zp = yzp,
                          .out_min = k->relu && yzp > lo ? yzp : lo,
                          .out_max = hi};
    return d;
}

/* ONNX Runtime's byte at output o (n, co, oy, ox) */
static int32_t reference(const qdata *d, int64_t n, int64_t co, int64_t oy, int64_t ox) {
    const ts_qconv_args *a = &d->a;
    const int64_t cg = a->c / a->groups, g = co / (a->cout / a->groups);
    int64_t acc = a->bias ? a->bias[co] : 0;
    for (int64_t ci = 0; ci < cg; ci++)
        for (int64_t i = 0; i < a->kh; i++)
            for (int64_t j = 0; j < a->kw; j++) {
                const int64_t y = oy * a->stride[0] - a->pad[0] + i * a->dil[0],
                              x = ox * a->stride[1] - a->pad[1] + j * a->dil[1];
                if (y < 0 || y >= a->h || x < 0 || x >= a->w) continue;
                const uint8_t b = d->x[((n * a->c + g * cg + ci) * a->h + y) * a->w + x];
                const int64_t xv = a->x_unsigned ? b : (int8_t)b;
                acc += (xv - a->x_zp) * d->w[((co * cg + ci) * a->kh + i) * a->kw + j];
            }
    float f = (float)(int32_t)(uint32_t)(uint64_t)acc * d->fm[co];
    const float lo = (float)(a->out_min - a->out_zp), hi = (float)(a->out_max - a->out_zp);
    f = f < lo ? lo : f > hi ? hi : f;
    return a->out_zp + (int32_t)nearbyintf(f);
}

static int64_t case_no;

static void check_case(const qcase *k) {
    qdata d = make(k, false);
    d.a.out = d.y_own;
    CHECK(tsi_qconv_vnni(&d.a));
    /* a weight identity (far from real storage uids): the first call reorders into scratch, the
     * second fills the cache of reordered weights, the third reads it; each bit for bit */
    d.a.w_uid = ((uint64_t)1 << 62) + (uint64_t)case_no++, d.a.w_version = 1;
    tsi_wcache_stats w0, w1;
    tsi_dnnl_conv_wcache_stats(&w0);
    for (int call = 0; call < 3; call++) {
        memset(d.y_dnnl, 0xA5, (size_t)d.ny);
        d.a.out = d.y_dnnl;
        const uint64_t runs0 = tsi_qconv_dnnl_count();
        CHECK_EQ((int)tsi_qconv_dnnl(&d.a), (int)TSI_QDNNL_DONE);
        CHECK_EQ(tsi_qconv_dnnl_count(), runs0 + 1);
        if (call < 2) CHECK(!memcmp(d.y_dnnl, d.y_own, (size_t)d.ny));
    }
    tsi_dnnl_conv_wcache_stats(&w1);
    CHECK(w1.fills >= w0.fills + 1 && w1.hits >= w0.hits + 1);
    int64_t diff_own = 0, diff_ref = 0, first = -1;
    for (int64_t i = 0; i < d.ny; i++)
        if (d.y_dnnl[i] != d.y_own[i]) diff_own++, first = first < 0 ? i : first;
    const int64_t P = d.a.oh * d.a.ow;
    for (int64_t n = 0; n < d.a.n; n++)
        for (int64_t co = 0; co < d.a.cout; co++)
            for (int64_t p = 0; p < P; p++) {
                const int64_t o = (n * d.a.cout + co) * P + p;
                const int32_t r = reference(&d, n, co, p / d.a.ow, p % d.a.ow);
                const int32_t got = k->yu ? d.y_dnnl[o] : (int8_t)d.y_dnnl[o];
                diff_ref += got != r;
            }
    if (diff_own || diff_ref)
        printf("  case c %lld co %lld k %lldx%lld s %lld g %lld: %lld bytes differ from the own "
               "kernels (first %lld), %lld from the reference\n",
               (long long)k->c, (long long)k->co, (long long)k->kh, (long long)k->kw,
               (long long)k->sh, (long long)k->g, (long long)diff_own, (long long)first,
               (long long)diff_ref);
    CHECK_EQ(diff_own, 0);
    CHECK_EQ(diff_ref, 0);
    qdata_free(&d);
}

static void test_shapes(void) {
    /* n c h w co kh kw sh sw ph pw dh dw g | xu yu relu bias ties */
    const qcase cases[] = {
        {2, 16, 9, 9, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, true, true, false},
        {1, 8, 11, 10, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, false, false, true, false},
        {2, 32, 8, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32, true, true, true, true, false}, /* dw */
        {1, 48, 9, 9, 48, 3, 3, 2, 2, 1, 1, 1, 1, 48, true, false, false, true, false},
        {1, 16, 10, 10, 8, 3, 3, 1, 1, 2, 2, 2, 2, 4, false, true, false, true, false},
        {3, 64, 5, 7, 40, 1, 1, 1, 1, 0, 0, 1, 1, 1, true, true, false, true, false}, /* 1x1 */
        {1, 64, 8, 8, 32, 1, 1, 2, 2, 0, 0, 1, 1, 1, true, false, false, false, false},
        {1, 3, 20, 18, 16, 7, 7, 2, 2, 3, 3, 1, 1, 1, true, true, true, true, false}, /* stem */
        {1, 8, 6, 6, 8, 2, 2, 1, 1, 0, 0, 1, 1, 1, true, true, false, false, true},   /* ties */
        {1, 8, 6, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8, false, false, false, false, true},
        {1, 20, 7, 7, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, true, true, true, false},
        /* 5 channels: the epilogue's flat vectors cross positions (lcm(5, 16) = 80 values) */
        {1, 6, 7, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, false, true, true, false},
        {2, 4, 9, 6, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, true, false, true, false},
        /* 3 int8 planes 37 wide: the stem's transpose, 16 pixels at a time and a tail */
        {2, 3, 11, 37, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, true, true, true, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
}

static void test_declines(void) {
    const qcase k = {1, 8, 6, 6, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, false, true, false};
    qdata d = make(&k, false);
    memset(d.y_dnnl, 0xA5, (size_t)d.ny);
    d.a.out = d.y_dnnl;
    d.wzp[3] = 2; /* a weight zero point: the own kernels' xsum correction, not this route's */
    CHECK(!tsi_qconv_dnnl_fits(&d.a));
    CHECK_EQ((int)tsi_qconv_dnnl(&d.a), (int)TSI_QDNNL_DECLINED);
    d.wzp[3] = 0;
    const double mult = 0.01;
    d.a.fmult = NULL, d.a.mult = &mult; /* the float64 requantization */
    CHECK_EQ((int)tsi_qconv_dnnl(&d.a), (int)TSI_QDNNL_DECLINED);
    int64_t touched = 0;
    for (int64_t i = 0; i < d.ny; i++) touched += d.y_dnnl[i] != 0xA5;
    CHECK_EQ(touched, 0);
    qdata_free(&d);

    /* 576 taps of 255 x -128: sums past 2^24 */
    const qcase b = {1, 64, 5, 5, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, true, true, false, false, false};
    d = make(&b, true);
    d.a.out = d.y_dnnl;
    const uint64_t in0 = tsi_qconv_dnnl_inexact_count();
    CHECK_EQ((int)tsi_qconv_dnnl(&d.a), (int)TSI_QDNNL_DECLINED);
    CHECK_EQ(tsi_qconv_dnnl_inexact_count(), in0 + 1);
    /* through the public function: the own kernels take it over, ORT's integers */
    ts_scope_begin();
    ts_tensor *xr = ts_from_data(TS_SHAPE(1, 64, 5, 5), TS_U8, d.x, (ts_opts){0});
    ts_tensor *x = ts_make_per_tensor_quantized_tensor(xr, 0.02, d.a.x_zp);
    ts_tensor *wr = ts_from_data(TS_SHAPE(16, 64, 3, 3), TS_I8, d.w, (ts_opts){0});
    ts_tensor *w = ts_make_per_tensor_quantized_tensor(wr, 0.01, 0);
    ts_tensor *fm = ts_tensor_f32(TS_SHAPE(16), d.fm, (ts_opts){0});
    const int64_t one[2] = {1, 1};
    ts_tensor *y = ts_qlinear_conv2d(x, w, NULL, one, one, one, 1, fm, d.a.out_zp, TS_U8, false);
    CHECK(y != NULL);
    if (y) {
        ts_copy_to_host(y, d.y_own, (size_t)d.ny);
        int64_t bad = 0;
        for (int64_t co = 0; co < 16; co++)
            for (int64_t p = 0; p < 25; p++)
                bad += d.y_own[co * 25 + p] != reference(&d, 0, co, p / 5, p % 5);
        CHECK_EQ(bad, 0);
    }
    CHECK(tsi_qconv_dnnl_inexact_count() >= in0 + 2); /* the route tried first, then gave way */
    ts_scope_end();
    qdata_free(&d);
}

/* ts_qlinear_conv2d of a random u8 input [1, c, h, h] and k x k weights: whether oneDNN ran it */
static bool ran_dnnl(int64_t c, int64_t h, int64_t co, int64_t k) {
    ts_scope_begin();
    const int64_t nx = c * h * h, nw = co * c * k * k;
    uint8_t *xb = malloc((size_t)nx);
    int8_t *wb = malloc((size_t)nw);
    for (int64_t i = 0; i < nx; i++) xb[i] = (uint8_t)rnd(0, 255);
    for (int64_t i = 0; i < nw; i++) wb[i] = (int8_t)rnd(-128, 127);
    ts_tensor *x = ts_make_per_tensor_quantized_tensor(
        ts_from_data(TS_SHAPE(1, c, h, h), TS_U8, xb, (ts_opts){0}), 0.02, 5);
    ts_tensor *w = ts_make_per_tensor_quantized_tensor(
        ts_from_data(TS_SHAPE(co, c, k, k), TS_I8, wb, (ts_opts){0}), 0.01, 0);
    const float f = 0.001f;
    ts_tensor *m = ts_tensor_f32(TS_SHAPE(1), &f, (ts_opts){0});
    const int64_t one[2] = {1, 1}, pad[2] = {k / 2, k / 2};
    const uint64_t runs0 = tsi_qconv_dnnl_count();
    CHECK(ts_qlinear_conv2d(x, w, NULL, one, pad, one, 1, m, 0, TS_U8, true) != NULL);
    ts_scope_end();
    free(xb), free(wb);
    return tsi_qconv_dnnl_count() > runs0;
}

static void test_route(void) {
    unsetenv("TS_QCONV");
    tsi_env_reload(TSI_ENV_QCONV);
    CHECK(!ran_dnnl(128, 14, 32, 1)); /* the table: a 1x1 reduction at 14x14, own kernels */
    CHECK(ran_dnnl(128, 7, 32, 1));   /* at 7x7: oneDNN */
    CHECK(ran_dnnl(16, 14, 32, 3));   /* 3x3: oneDNN */
    setenv("TS_QCONV", "own", 1);
    tsi_env_reload(TSI_ENV_QCONV);
    CHECK(!ran_dnnl(16, 14, 32, 3));
    setenv("TS_QCONV", "dnnl", 1);
    tsi_env_reload(TSI_ENV_QCONV);
    CHECK(ran_dnnl(128, 14, 32, 1));
    unsetenv("TS_QCONV");
    tsi_env_reload(TSI_ENV_QCONV);
}

int main(void) {
    tsi_init(); /* the kernels are called here directly: the allocator behind their scratch */
    if (!tsi_qgemm_vnni_available())
        return ts_test_skip("test_qconv_dnnl: no AVX512-VNNI here (the route needs it)");
    if (!tsi_qconv_dnnl_fits(&(ts_qconv_args){.fmult = (const float[]){1.0f}, .cout = 0}))
        return ts_test_skip("test_qconv_dnnl: built without oneDNN");
    test_shapes();
    /* in bands of output rows: one row a band, then a few (the padded NCHW copy's rows) */
    const uint64_t banded0 = tsi_qconv_dnnl_banded_count();
    tsi_qconv_dnnl_set_band_bytes(1);
    test_shapes();
    tsi_qconv_dnnl_set_band_bytes(700);
    test_shapes();
    test_declines(); /* the sums past 2^24 found in some band */
    tsi_qconv_dnnl_set_band_bytes(0);
    CHECK(tsi_qconv_dnnl_banded_count() >= banded0 + 20);
    test_declines();
    test_route();
    return ts_test_finish();
}
