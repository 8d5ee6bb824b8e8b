/* test_transforms.c — sample transforms: Philox draws against Random123's known answers, to-tensor
 * and normalize exactly as torchvision computes them, crop/flip against naive references and their
 * statistics, compose, user callbacks, error paths and memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

static int64_t live_cpu(void) {
    ts_mem_stats s;
    ts_memory_stats(ts_cpu(), &s);
    return s.live_tensors;
}

/* The u53 mapping of philox.h, written out: ((w1 << 32 | w0) >> 11) * 2^-53. */
static double u53(uint32_t w0, uint32_t w1) {
    return (double)((((uint64_t)w1 << 32) | w0) >> 11) / 9007199254740992.0;
}

static void *host_bytes(ts_tensor *t) {
    size_t n = ts_nbytes(t);
    void *p = malloc(n ? n : 1);
    if (ts_copy_to_host(t, p, n) != TS_OK) memset(p, 0xEE, n);
    return p;
}

static bool shape_is(ts_tensor *t, ts_shape s) {
    if (!t) return false;
    ts_shape g = ts_shape_of(t);
    if (g.ndim != s.ndim) return false;
    for (int i = 0; i < s.ndim; i++)
        if (g.dims[i] != s.dims[i]) return false;
    return true;
}

/* ------------------------------------------------------------------ randomness */
static void test_uniform(void) {
    /* Random123 kat_vectors for Philox-4x32-10: counter {0,0,0,0}, key {0,0} gives words
     * 6627e8d5 e169c58d ...; counter {243f6a88 85a308d3 13198a2e 03707344}, key {a4093822
     * 299f31d0} gives d16cfe09 94fdcceb ... The counter is {index lo, index hi, epoch, k}. */
    ts_transform_ctx c0 = {.seed = 0, .epoch = 0, .index = 0};
    CHECK(ts_transform_uniform(&c0, 0) == u53(0x6627e8d5u, 0xe169c58du));
    ts_transform_ctx c1 = {.seed = 0x299f31d0a4093822ULL,
                           .epoch = 0x13198a2e,
                           .index = (int64_t)0x85a308d3243f6a88ULL};
    CHECK(ts_transform_uniform(&c1, 0x03707344) == u53(0xd16cfe09u, 0x94fdccebu));

    /* a function of (seed, epoch, index, k) only, and each of them matters */
    ts_transform_ctx c = {.seed = 7, .epoch = 3, .index = 12};
    double u = ts_transform_uniform(&c, 2);
    CHECK(u == ts_transform_uniform(&c, 2));
    CHECK(u != ts_transform_uniform(&c, 1));
    CHECK(u != ts_transform_uniform(&(ts_transform_ctx){8, 3, 12}, 2));
    CHECK(u != ts_transform_uniform(&(ts_transform_ctx){7, 4, 12}, 2));
    CHECK(u != ts_transform_uniform(&(ts_transform_ctx){7, 3, 13}, 2));
    /* U[0, 1): mean 1/2, variance 1/12 over 20000 draws (5 sigma bounds) */
    double s = 0, s2 = 0, mn = 1, mx = 0;
    for (int i = 0; i < 20000; i++) {
        ts_transform_ctx ci = {.seed = 99, .epoch = i % 3, .index = i};
        double v = ts_transform_uniform(&ci, i % 5);
        s += v;
        s2 += v * v;
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
    }
    CHECK(mn >= 0 && mx < 1);
    CHECK_NEAR(s / 20000, 0.5, 5 * sqrt(1.0 / 12 / 20000));
    CHECK_NEAR(s2 / 20000 - (s / 20000) * (s / 20000), 1.0 / 12, 0.005);
    CHECK(isnan(ts_transform_uniform(&c, -1)));
    CHECK_ERR(TS_ERR_ARG);
    CHECK(isnan(ts_transform_uniform(NULL, 0)));
    CHECK_ERR(TS_ERR_ARG);
}

/* ------------------------------------------------------------------ to_tensor */
static void test_to_tensor(void) {
    ts_transform *tt = ts_to_tensor_new();
    ts_transform_ctx c = {0};
    /* HWC [2, 3, 3] u8 -> CHW [3, 2, 3] f32: out[ch][h][w] = in[h][w][ch] / 255 (f32 division,
     * torchvision's img.permute(2, 0, 1).float().div(255)) */
    uint8_t px[18];
    for (int i = 0; i < 18; i++) px[i] = (uint8_t)(i * 37 + 11);
    ts_tensor *x = ts_from_data(TS_SHAPE(2, 3, 3), TS_U8, px, (ts_opts){.dtype = TS_U8});
    ts_tensor *y = ts_transform_apply(tt, ts_retain(x), &c);
    CHECK(shape_is(y, TS_SHAPE(3, 2, 3)) && ts_dtype_of(y) == TS_F32);
    if (shape_is(y, TS_SHAPE(3, 2, 3))) {
        float *v = host_bytes(y);
        int bad = 0;
        for (int ch = 0; ch < 3; ch++)
            for (int h = 0; h < 2; h++)
                for (int w = 0; w < 3; w++)
                    bad += v[(ch * 2 + h) * 3 + w] != (float)px[(h * 3 + w) * 3 + ch] / 255.0f;
        CHECK_EQ(bad, 0);
        free(v);
    }
    ts_release(y);
    /* every byte value, as a [16, 16] (HW) image -> [1, 16, 16]; 255 maps to exactly 1 */
    uint8_t all[256];
    for (int i = 0; i < 256; i++) all[i] = (uint8_t)i;
    ts_tensor *a = ts_from_data(TS_SHAPE(16, 16), TS_U8, all, (ts_opts){.dtype = TS_U8});
    y = ts_transform_apply(tt, ts_retain(a), &c);
    CHECK(shape_is(y, TS_SHAPE(1, 16, 16)));
    if (y) {
        float *v = host_bytes(y);
        int bad = 0;
        for (int i = 0; i < 256; i++) bad += v[i] != (float)i / 255.0f;
        CHECK_EQ(bad, 0);
        CHECK(v[255] == 1.0f && v[0] == 0.0f);
        free(v);
    }
    ts_release(y);
    /* a non-contiguous u8 image (a transposed view) is read through its strides */
    ts_tensor *tv = ts_permute(x, TS_DIMS(1, 0, 2)); /* [3, 2, 3] HWC view */
    y = ts_transform_apply(tt, ts_retain(tv), &c);
    CHECK(shape_is(y, TS_SHAPE(3, 3, 2)));
    if (y) {
        float *v = host_bytes(y);
        int bad = 0;
        for (int ch = 0; ch < 3; ch++)
            for (int h = 0; h < 3; h++) /* view row h = x column h */
                for (int w = 0; w < 2; w++)
                    bad += v[(ch * 3 + h) * 2 + w] != (float)px[(w * 3 + h) * 3 + ch] / 255.0f;
        CHECK_EQ(bad, 0);
        free(v);
    }
    ts_release(y);
    ts_release(tv);
    /* other dtypes: converted to f32, layout and values kept */
    ts_tensor *d = ts_tensor_f64(TS_SHAPE(2, 2), (double[]){1.5, -2, 300, 0.25}, (ts_opts){0});
    y = ts_transform_apply(tt, ts_retain(d), &c);
    CHECK(shape_is(y, TS_SHAPE(2, 2)) && ts_dtype_of(y) == TS_F32);
    if (y) {
        float *v = host_bytes(y);
        CHECK(v[0] == 1.5f && v[1] == -2.0f && v[2] == 300.0f && v[3] == 0.25f);
        free(v);
    }
    ts_release(y);
    ts_release(d);
    /* errors: a u8 tensor that is no image, a tensor off the cpu */
    ts_tensor *u1 = ts_zeros(TS_SHAPE(4), (ts_opts){.dtype = TS_U8});
    CHECK(ts_transform_apply(tt, u1, &c) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_tensor *s = ts_zeros(TS_SHAPE(2, 2, 1), (ts_opts){.dtype = TS_U8, .device = ts_sim(0)});
    CHECK(ts_transform_apply(tt, s, &c) == NULL);
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK(ts_transform_apply(tt, NULL, &c) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_transform_apply(NULL, ts_retain(x), &c) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_release(x);
    ts_release(a);
    ts_transform_free(tt);
}

/* ------------------------------------------------------------------ normalize */
static void test_normalize(void) {
    ts_transform_ctx c = {0};
    const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, sd[3] = {0.247f, 0.243f, 0.261f};
    ts_transform *nt = ts_normalize_new(3, mean, sd);
    float v[3 * 2 * 2];
    for (int i = 0; i < 12; i++) v[i] = (float)i / 11.0f;
    ts_tensor *x = ts_tensor_f32(TS_SHAPE(3, 2, 2), v, (ts_opts){0});
    /* the caller keeps x: the transform must not write into it */
    ts_tensor *y = ts_transform_apply(nt, ts_retain(x), &c);
    CHECK(shape_is(y, TS_SHAPE(3, 2, 2)) && !ts_shares_storage(x, y));
    if (y) {
        float *o = host_bytes(y), *xi = host_bytes(x);
        int bad = 0;
        for (int i = 0; i < 12; i++) {
            /* torchvision: tensor.sub_(mean).div_(std) in float32 */
            float d = v[i] - mean[i / 4];
            bad += o[i] != d / sd[i / 4];
            bad += xi[i] != v[i];
            bad += fabs((double)o[i] - ((double)v[i] - mean[i / 4]) / sd[i / 4]) > 1e-6;
        }
        CHECK_EQ(bad, 0);
        free(o);
        free(xi);
    }
    ts_release(y);
    /* a fresh tensor the transform owns alone is normalized in place: same values */
    ts_tensor *x2 = ts_clone(x);
    y = ts_transform_apply(nt, ts_retain(x2), &c);
    ts_release(x2); /* now y may be x2 itself */
    if (y) {
        float *o = host_bytes(y);
        int bad = 0;
        for (int i = 0; i < 12; i++) bad += o[i] != (v[i] - mean[i / 4]) / sd[i / 4];
        CHECK_EQ(bad, 0);
        free(o);
    }
    ts_release(y);
    /* f64 works in f64 */
    ts_tensor *xd = ts_to_dtype(x, TS_F64);
    y = ts_transform_apply(nt, ts_retain(xd), &c);
    CHECK(y && ts_dtype_of(y) == TS_F64);
    if (y) {
        double *o = host_bytes(y);
        int bad = 0;
        for (int i = 0; i < 12; i++)
            bad += o[i] != ((double)v[i] - (double)mean[i / 4]) / (double)sd[i / 4];
        CHECK_EQ(bad, 0);
        free(o);
    }
    ts_release(y);
    ts_release(xd);
    /* normalize3 is normalize(3, ...) */
    ts_transform *n3 = ts_normalize3_new(mean[0], mean[1], mean[2], sd[0], sd[1], sd[2]);
    ts_tensor *y1 = ts_transform_apply(nt, ts_retain(x), &c);
    ts_tensor *y2 = ts_transform_apply(n3, ts_retain(x), &c);
    if (y1 && y2) {
        float *a = host_bytes(y1), *b = host_bytes(y2);
        CHECK(memcmp(a, b, sizeof v) == 0);
        free(a);
        free(b);
    }
    ts_release(y1);
    ts_release(y2);
    /* one channel: broadcast over everything (Fashion-MNIST's 0.2860, 0.3530) */
    ts_transform *n1 = ts_normalize_new(1, (const float[]){0.2860f}, (const float[]){0.3530f});
    ts_tensor *x1 = ts_tensor_f32(TS_SHAPE(2, 3), v, (ts_opts){0});
    y = ts_transform_apply(n1, ts_retain(x1), &c);
    if (y) {
        float *o = host_bytes(y);
        int bad = 0;
        for (int i = 0; i < 6; i++) bad += o[i] != (v[i] - 0.2860f) / 0.3530f;
        CHECK_EQ(bad, 0);
        free(o);
    }
    ts_release(y);
    /* errors: channel count, integer input, zero std, NULL arrays */
    CHECK(ts_transform_apply(nt, ts_retain(x1), &c) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    ts_tensor *xi = ts_zeros(TS_SHAPE(3, 2, 2), (ts_opts){.dtype = TS_U8});
    CHECK(ts_transform_apply(nt, xi, &c) == NULL);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_normalize_new(2, mean, (const float[]){1, 0}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_normalize_new(0, mean, sd) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_normalize_new(3, NULL, sd) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_release(x1);
    ts_release(x);
    ts_transform_free(n1);
    ts_transform_free(n3);
    ts_transform_free(nt);
}

/* ------------------------------------------------------------------ crop and flip */
/* Element (plane p, row r, col q, byte b of the pixel) of the zero-padded image, read naively. */
typedef struct img_desc {
    bool hwc;
    int planes, h, w, pix; /* pix: bytes per pixel within a plane */
} img_desc;

static uint8_t padded_byte(const uint8_t *src, img_desc d, int pad, int p, int r, int q, int b) {
    int sr = r - pad, sq = q - pad;
    if (sr < 0 || sr >= d.h || sq < 0 || sq >= d.w) return 0;
    return src[((size_t)(p * d.h + sr) * d.w + sq) * d.pix + b];
}

/* Checks n samples of crop(size, pad) on image src against the naive reference. */
static void check_crop(ts_tensor *x, img_desc d, int size, int pad, int n, int *hist, int nhist) {
    ts_transform *cr = ts_random_crop_new(size, pad);
    uint8_t *src = host_bytes(x);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        ts_transform_ctx c = {.seed = 5, .epoch = 1, .index = i};
        ts_tensor *y = ts_transform_apply(cr, ts_retain(x), &c);
        int span_h = d.h + 2 * pad - size + 1, span_w = d.w + 2 * pad - size + 1;
        int top = (int)(ts_transform_uniform(&c, 0) * span_h);
        int left = (int)(ts_transform_uniform(&c, 1) * span_w);
        if (hist && top * span_w + left < nhist) hist[top * span_w + left]++;
        if (!y || (int64_t)ts_nbytes(y) != (int64_t)d.planes * size * size * d.pix) {
            bad++;
            ts_release(y);
            continue;
        }
        uint8_t *o = host_bytes(y);
        for (int p = 0; p < d.planes; p++)
            for (int r = 0; r < size; r++)
                for (int q = 0; q < size; q++)
                    for (int b = 0; b < d.pix; b++)
                        bad += o[((size_t)(p * size + r) * size + q) * d.pix + b] !=
                               padded_byte(src, d, pad, p, top + r, left + q, b);
        free(o);
        ts_release(y);
    }
    CHECK_EQ(bad, 0);
    free(src);
    ts_transform_free(cr);
}

static void test_crop(void) {
    /* u8 HWC [5, 6, 2] (H != W), crop 4 with padding 2: offsets 0..5 x 0..6 */
    uint8_t px[5 * 6 * 2];
    for (int i = 0; i < 60; i++) px[i] = (uint8_t)(i + 1);
    ts_tensor *x = ts_from_data(TS_SHAPE(5, 6, 2), TS_U8, px, (ts_opts){.dtype = TS_U8});
    enum { SH = 5, SW = 7 };
    int hist[SH * SW] = {0};
    check_crop(x, (img_desc){true, 1, 5, 6, 2}, 4, 2, 2100, hist, SH * SW);
    /* each of the 35 offsets equally likely: 60 expected, 5 sigma ~ 38 */
    int lo = 1 << 30, hi = 0;
    for (int i = 0; i < SH * SW; i++) {
        lo = hist[i] < lo ? hist[i] : lo;
        hi = hist[i] > hi ? hist[i] : hi;
    }
    CHECK(lo >= 22 && hi <= 98);
    /* f32 CHW [2, 4, 5], crop 3 with padding 1; f64 [3, 3] (HW) crop 2, no padding */
    float f[2 * 4 * 5];
    for (int i = 0; i < 40; i++) f[i] = (float)i * 0.5f - 3;
    ts_tensor *xf = ts_tensor_f32(TS_SHAPE(2, 4, 5), f, (ts_opts){0});
    check_crop(xf, (img_desc){false, 2, 4, 5, 4}, 3, 1, 300, NULL, 0);
    ts_tensor *xd =
        ts_tensor_f64(TS_SHAPE(3, 3), (double[]){1, 2, 3, 4, 5, 6, 7, 8, 9}, (ts_opts){0});
    check_crop(xd, (img_desc){false, 1, 3, 3, 8}, 2, 0, 100, NULL, 0);
    /* a padding wider than the crop: some crops are all zeros, none overruns */
    check_crop(xf, (img_desc){false, 2, 4, 5, 4}, 2, 6, 300, NULL, 0);
    /* the crop depends on the epoch */
    ts_transform *cr = ts_random_crop_new(4, 2);
    int differ = 0;
    for (int i = 0; i < 20; i++) {
        ts_tensor *a = ts_transform_apply(cr, ts_retain(x), &(ts_transform_ctx){1, 0, i});
        ts_tensor *b = ts_transform_apply(cr, ts_retain(x), &(ts_transform_ctx){1, 1, i});
        uint8_t *pa = host_bytes(a), *pb = host_bytes(b);
        differ += memcmp(pa, pb, ts_nbytes(a)) != 0;
        free(pa);
        free(pb);
        ts_release(a);
        ts_release(b);
    }
    CHECK(differ >= 10);
    /* errors: crop larger than the padded image, bad sizes, no image */
    ts_transform *big = ts_random_crop_new(10, 2);
    CHECK(ts_transform_apply(big, ts_retain(x), &(ts_transform_ctx){0}) == NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_transform_apply(cr, ts_zeros(TS_SHAPE(4), (ts_opts){0}), &(ts_transform_ctx){0}) ==
          NULL);
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(ts_random_crop_new(0, 1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_random_crop_new(3, -1) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_transform_free(big);
    ts_transform_free(cr);
    ts_release(x);
    ts_release(xf);
    ts_release(xd);
}

/* Applies flip(p) to n samples of x: each output is x or its mirror as the draw says. */
static int check_flip(ts_tensor *x, img_desc d, double p, int n, bool give_away) {
    ts_transform *fl = ts_random_hflip_new(p);
    uint8_t *src = host_bytes(x);
    int bad = 0, flipped = 0;
    for (int i = 0; i < n; i++) {
        ts_transform_ctx c = {.seed = 11, .epoch = 2, .index = i};
        bool want = ts_transform_uniform(&c, 0) < p;
        flipped += want;
        /* give_away: a private clone the transform owns alone (the in-place path) */
        ts_tensor *in = give_away ? ts_clone(x) : ts_retain(x); /* no scope is open */
        ts_tensor *y = ts_transform_apply(fl, in, &c);
        uint8_t *o = host_bytes(y);
        for (int pl = 0; pl < d.planes; pl++)
            for (int r = 0; r < d.h; r++)
                for (int q = 0; q < d.w; q++)
                    for (int b = 0; b < d.pix; b++) {
                        size_t at = ((size_t)(pl * d.h + r) * d.w + q) * d.pix + b;
                        size_t from =
                            ((size_t)(pl * d.h + r) * d.w + (want ? d.w - 1 - q : q)) * d.pix + b;
                        bad += o[at] != src[from];
                    }
        free(o);
        ts_release(y);
    }
    CHECK_EQ(bad, 0);
    /* the caller's x is never written */
    uint8_t *after = host_bytes(x);
    CHECK(memcmp(after, src, ts_nbytes(x)) == 0);
    free(after);
    free(src);
    ts_transform_free(fl);
    return flipped;
}

static void test_flip(void) {
    uint8_t px[3 * 5 * 3];
    for (int i = 0; i < 45; i++) px[i] = (uint8_t)(i * 5 + 1);
    ts_tensor *x = ts_from_data(TS_SHAPE(3, 5, 3), TS_U8, px, (ts_opts){.dtype = TS_U8});
    img_desc hwc = {true, 1, 3, 5, 3};
    int f = check_flip(x, hwc, 0.5, 2000, false);
    CHECK(f > 1000 - 112 && f < 1000 + 112); /* 5 sigma of Binomial(2000, 1/2) */
    CHECK_EQ(check_flip(x, hwc, 0.0, 50, false), 0);
    CHECK_EQ(check_flip(x, hwc, 1.0, 50, false), 50);
    f = check_flip(x, hwc, 0.2, 2000, true);
    CHECK(f > 400 - 90 && f < 400 + 90);
    float v[2 * 3 * 4];
    for (int i = 0; i < 24; i++) v[i] = (float)i - 7.25f;
    ts_tensor *xf = ts_tensor_f32(TS_SHAPE(2, 3, 4), v, (ts_opts){0});
    check_flip(xf, (img_desc){false, 2, 3, 4, 4}, 0.5, 200, false);
    check_flip(xf, (img_desc){false, 2, 3, 4, 4}, 0.5, 200, true);
    ts_tensor *xd = ts_to_dtype(xf, TS_F64);
    check_flip(xd, (img_desc){false, 2, 3, 4, 8}, 0.5, 200, true);
    /* odd width */
    ts_tensor *xo = ts_tensor_f32(TS_SHAPE(1, 2, 3), v, (ts_opts){0});
    check_flip(xo, (img_desc){false, 1, 2, 3, 4}, 1.0, 3, true);
    CHECK(ts_random_hflip_new(1.5) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_random_hflip_new(NAN) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    ts_release(x);
    ts_release(xf);
    ts_release(xd);
    ts_release(xo);
}

/* ------------------------------------------------------------------ compose and callbacks */
static int freed_users;
static void count_free(void *u) {
    (void)u;
    freed_users++;
}

/* x + k, made with ops inside the callback's scope */
static ts_tensor *add_k(ts_tensor *x, const ts_transform_ctx *c, void *user) {
    double k = *(double *)user;
    ts_tensor *y = ts_retain(ts_add_scalar(ts_mul_scalar(x, 1.0), k));
    ts_release(x);
    return y;
}

static ts_tensor *fails(ts_tensor *x, const ts_transform_ctx *c, void *user) {
    ts_release(x);
    if (user) ts_add(NULL, NULL); /* records TS_ERR_ARG */
    return NULL;
}

static void test_compose_and_callbacks(void) {
    /* compose(to_tensor, normalize) equals the two applied in turn */
    uint8_t px[4 * 4];
    for (int i = 0; i < 16; i++) px[i] = (uint8_t)(i * 16 + 3);
    ts_tensor *x = ts_from_data(TS_SHAPE(4, 4, 1), TS_U8, px, (ts_opts){.dtype = TS_U8});
    ts_transform *tn = ts_compose_new(
        2, (ts_transform *[]){ts_to_tensor_new(),
                              ts_normalize_new(1, (const float[]){0.5f}, (const float[]){0.25f})});
    ts_transform_ctx c = {.seed = 3, .epoch = 0, .index = 9};
    ts_tensor *y = ts_transform_apply(tn, ts_retain(x), &c);
    CHECK(shape_is(y, TS_SHAPE(1, 4, 4)));
    if (y) {
        float *o = host_bytes(y);
        int bad = 0;
        for (int i = 0; i < 16; i++) bad += o[i] != ((float)px[i] / 255.0f - 0.5f) / 0.25f;
        CHECK_EQ(bad, 0);
        free(o);
    }
    ts_release(y);
    ts_transform_free(tn);
    /* child i draws with seed + i * 0x9E3779B97F4A7C15: compose(crop, flip) == crop(seed) then
     * flip(seed + step) */
    ts_transform *cf =
        ts_compose_new(2, (ts_transform *[]){ts_random_crop_new(3, 1), ts_random_hflip_new(0.5)});
    ts_transform *cr = ts_random_crop_new(3, 1), *fl = ts_random_hflip_new(0.5);
    int bad = 0;
    for (int i = 0; i < 64; i++) {
        ts_transform_ctx ci = {.seed = 77, .epoch = 1, .index = i};
        ts_transform_ctx c2 = ci;
        c2.seed += 0x9E3779B97F4A7C15ULL;
        ts_tensor *a = ts_transform_apply(cf, ts_retain(x), &ci);
        ts_tensor *b = ts_transform_apply(fl, ts_transform_apply(cr, ts_retain(x), &ci), &c2);
        uint8_t *pa = host_bytes(a), *pb = host_bytes(b);
        bad += !a || !b || memcmp(pa, pb, 9) != 0;
        free(pa);
        free(pb);
        ts_release(a);
        ts_release(b);
    }
    CHECK_EQ(bad, 0);
    ts_transform_free(cf);
    ts_transform_free(cr);
    ts_transform_free(fl);
    /* an empty compose is the identity */
    ts_transform *id = ts_compose_new(0, NULL);
    y = ts_transform_apply(id, ts_retain(x), &c);
    CHECK(y == x);
    ts_release(y);
    ts_transform_free(id);
    /* a NULL child (a failed constructor): the error, and the other children are freed */
    freed_users = 0;
    ts_transform *u = ts_transform_new(add_k, &(double){1}, count_free);
    CHECK(ts_compose_new(2, (ts_transform *[]){u, NULL}) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(freed_users, 1);

    /* user callbacks built from ops: temporaries die inside, the result is the caller's */
    int64_t live0 = live_cpu();
    double k = 2.5;
    ts_transform *ak = ts_transform_new(add_k, &k, NULL);
    ts_tensor *xf = ts_tensor_f32(TS_SHAPE(3), (float[]){1, 2, 3}, (ts_opts){0});
    ts_scope_begin();
    y = ts_transform_apply(ak, ts_retain(xf), &c);
    ts_scope_end(); /* y is not in the scope */
    if (y) {
        float *o = host_bytes(y);
        CHECK(o[0] == 3.5f && o[1] == 4.5f && o[2] == 5.5f);
        free(o);
    }
    ts_release(y);
    ts_release(xf);
    CHECK_EQ(live_cpu(), live0);
    /* a failing callback keeps its error; one that returns NULL silently gets TS_ERR_STATE */
    ts_transform *f1 = ts_transform_new(fails, &k, NULL), *f2 = ts_transform_new(fails, NULL, NULL);
    CHECK(ts_transform_apply(f1, ts_retain(x), &c) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK(ts_transform_apply(f2, ts_retain(x), &c) == NULL);
    CHECK_ERR(TS_ERR_STATE);
    freed_users = 0;
    CHECK(ts_transform_new(NULL, &k, count_free) == NULL);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(freed_users, 1);
    ts_transform_free(ak);
    ts_transform_free(f1);
    ts_transform_free(f2);
    ts_transform_free(NULL);
    ts_release(x);
}

int main(void) {
    int64_t live0 = live_cpu();
    test_uniform();
    test_to_tensor();
    test_normalize();
    test_crop();
    test_flip();
    test_compose_and_callbacks();
    CHECK_OK();
    CHECK_EQ(live_cpu(), live0);
    return ts_test_finish();
}
