/* test_vision_color.c — torchvision's colour and blur kernels (src/ops/vision_color.c) on float64
 * images against float64 loops written here from torchvision's formulas (grayscale weights,
 * blends, HSV hue rotation, reflect-padded Gaussian), on every test device; uint8 images against
 * the same loops (the kernels compute in float32: a truncated value may differ by one where the
 * float32 result lands within a float32 rounding of an integer, so those are allowed 1); errors. */
#include <math.h>
#include <stdio.h>

#include "tessera.h"
#include "ts_test.h"

enum { C = 3, H = 5, W = 6, N = C * H * W };
static double IMG[N];

static void fill(void) {
    unsigned s = 777;
    for (int i = 0; i < N; i++) {
        s = s * 1103515245u + 12345u;
        IMG[i] = (double)(s >> 8 & 0xffff) / 65536.0;
    }
    /* a gray pixel (max == min) and a saturated one */
    IMG[0] = IMG[H * W] = IMG[2 * H * W] = 0.25;
    IMG[1] = 1, IMG[H * W + 1] = 0, IMG[2 * H * W + 1] = 0;
}

static void host(ts_tensor *t, double *v, int64_t n) {
    ts_tensor *h = ts_contiguous(ts_to(ts_to_dtype(t, TS_F64), ts_cpu()));
    CHECK(h != NULL);
    if (h) CHECK_EQ(ts_copy_to_host(h, v, (size_t)n * sizeof *v), TS_OK);
}

static double px(const double *img, int c, int y, int x) { return img[(c * H + y) * W + x]; }
static double gray_at(const double *img, int y, int x) {
    return 0.2989 * px(img, 0, y, x) + 0.587 * px(img, 1, y, x) + 0.114 * px(img, 2, y, x);
}
static double clamp01(double v, double hi) { return v < 0 ? 0 : v > hi ? hi : v; }

/* torchvision's _rgb2hsv / _hsv2rgb for one pixel, in double */
static void hue_pixel(const double rgb[3], double f, double out[3]) {
    const double r = rgb[0], g = rgb[1], b = rgb[2];
    const double mx = fmax(r, fmax(g, b)), mn = fmin(r, fmin(g, b)), cr = mx - mn;
    const double s = cr / (mx == mn ? 1 : mx), d = mx == mn ? 1 : cr;
    const double rc = (mx - r) / d, gc = (mx - g) / d, bc = (mx - b) / d;
    double h = mx == r ? bc - gc : mx == g ? 2 + rc - bc : 4 + gc - rc;
    h = fmod(h / 6 + 1, 1);
    h = h + f - floor(h + f); /* Python's % 1.0 */
    const double i = floor(h * 6), fr = h * 6 - i, v = mx;
    const double p = clamp01(v * (1 - s), 1), q = clamp01(v * (1 - s * fr), 1);
    const double t = clamp01(v * (1 - s * (1 - fr)), 1);
    const int k = ((int)i % 6 + 6) % 6;
    const double ch[3][6] = {{v, q, p, p, t, v}, {t, v, v, q, p, p}, {p, p, t, v, v, q}};
    for (int c = 0; c < 3; c++) out[c] = ch[c][k];
}

static int reflect(int i, int n) { return i < 0 ? -i : i >= n ? 2 * n - 2 - i : i; }

/* the expected image of each kernel at this factor, from img (float, or integer of max 255) */
static void expected(int kind, const double *img, double f, bool u8, double *out) {
    const double hi = u8 ? 255 : 1;
    double mean = 0;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) mean += u8 ? trunc(gray_at(img, y, x)) : gray_at(img, y, x);
    mean /= H * W;
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                const double v = px(img, c, y, x), g = gray_at(img, y, x);
                double o;
                switch (kind) {
                case 0: /* grayscale (channel 0 only) */
                    o = g;
                    break;
                case 1: /* brightness */
                    o = clamp01(f * v, hi);
                    break;
                case 2: /* contrast */
                    o = clamp01(f * v + (1 - f) * mean, hi);
                    break;
                case 3: /* saturation */
                    o = clamp01(f * v + (1 - f) * (u8 ? trunc(g) : g), hi);
                    break;
                default: { /* hue */
                    double rgb[3] = {px(img, 0, y, x) / hi, px(img, 1, y, x) / hi,
                                     px(img, 2, y, x) / hi},
                           res[3];
                    hue_pixel(rgb, f, res);
                    o = u8 ? res[c] * (255 + 1.0 - 1e-3) : res[c];
                }
                }
                out[(c * H + y) * W + x] = u8 ? trunc(o) : o;
            }
}

static void test_color(ts_device dev) {
    ts_scope_begin();
    ts_tensor *img = ts_tensor_f64(TS_SHAPE(C, H, W), IMG, (ts_opts){.device = dev});
    double u8v[N];
    for (int i = 0; i < N; i++) u8v[i] = floor(IMG[i] * 255.999);
    ts_tensor *u8 =
        ts_to_dtype(ts_tensor_f64(TS_SHAPE(C, H, W), u8v, (ts_opts){.device = dev}), TS_U8);
    double got[N], want[N];
    static const double factors[5][3] = {
        {1, 1, 1}, {0.0, 0.4, 1.7}, {0.0, 0.4, 1.7}, {0.0, 0.4, 1.7}, {-0.5, 0.13, 0.37}};
    for (int kind = 0; kind < 5; kind++)
        for (int fi = 0; fi < 3; fi++)
            for (int u = 0; u < 2; u++) {
                const double f = factors[kind][fi];
                ts_tensor *x = u ? u8 : img;
                ts_tensor *y = kind == 0   ? ts_rgb_to_grayscale(x, 1)
                               : kind == 1 ? ts_adjust_brightness(x, f)
                               : kind == 2 ? ts_adjust_contrast(x, f)
                               : kind == 3 ? ts_adjust_saturation(x, f)
                                           : ts_adjust_hue(x, f);
                CHECK(y && ts_dtype_of(y) == (u ? TS_U8 : TS_F64));
                const int64_t n = kind == 0 ? H * W : N;
                host(y, got, n);
                expected(kind, u ? u8v : IMG, f, u, want);
                /* float64: a few roundings of values <= 1 (hue: float32 arithmetic) */
                const double tol = u ? 1 : kind == 4 ? 1e-6 : 1e-15;
                int bad = 0;
                for (int64_t i = 0; i < n; i++)
                    if (!ts_test_near(got[i], want[i], tol) && bad++ < 2)
                        printf("  %s kind %d f %g %s [%lld]: %.17g want %.17g\n",
                               ts_device_str(dev), kind, f, u ? "u8" : "f64", (long long)i, got[i],
                               want[i]);
                CHECK_EQ(bad, 0);
            }
    /* three output channels repeat the one */
    host(ts_rgb_to_grayscale(img, 3), got, N);
    CHECK_NEAR(got[2 * H * W + 7], gray_at(IMG, 1, 1), 1e-16);
    CHECK_OK();
    ts_scope_end();
}

static void test_blur(ts_device dev) {
    ts_scope_begin();
    ts_tensor *img = ts_tensor_f64(TS_SHAPE(1, C, H, W), IMG, (ts_opts){.device = dev});
    const int kx = 5, ky = 3;
    const double sx = 1.3, sy = 0.7;
    double gx[5], gy[3], sumx = 0, sumy = 0;
    for (int i = 0; i < kx; i++) sumx += gx[i] = exp(-0.5 * pow((i - 2) / sx, 2));
    for (int i = 0; i < ky; i++) sumy += gy[i] = exp(-0.5 * pow((i - 1) / sy, 2));
    double got[N];
    host(ts_gaussian_blur(img, kx, ky, sx, sy), got, N);
    int bad = 0;
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                double s = 0;
                for (int j = 0; j < ky; j++)
                    for (int i = 0; i < kx; i++)
                        s += gy[j] / sumy * gx[i] / sumx *
                             px(IMG, c, reflect(y + j - 1, H), reflect(x + i - 2, W));
                bad += !ts_test_near(got[(c * H + y) * W + x], s, 1e-15);
            }
    CHECK_EQ(bad, 0);
    CHECK(!ts_gaussian_blur(img, 4, 3, 1, 1));
    CHECK_ERR_HAS(TS_ERR_ARG, "odd and positive");
    CHECK(!ts_gaussian_blur(img, 3, 3, 0, 1));
    CHECK_ERR_HAS(TS_ERR_ARG, "sigma");
    CHECK(!ts_gaussian_blur(img, 13, 3, 1, 1));
    CHECK_ERR_HAS(TS_ERR_ARG, "reflect padding");
    ts_scope_end();
}

static void test_errors(void) {
    ts_scope_begin();
    ts_tensor *img = ts_tensor_f64(TS_SHAPE(C, H, W), IMG, (ts_opts){0});
    CHECK(!ts_adjust_hue(img, 0.6));
    CHECK_ERR_HAS(TS_ERR_ARG, "hue_factor");
    CHECK(!ts_adjust_contrast(img, -1));
    CHECK_ERR_HAS(TS_ERR_ARG, "contrast_factor");
    CHECK(!ts_rgb_to_grayscale(img, 2));
    CHECK_ERR_HAS(TS_ERR_ARG, "num_output_channels");
    CHECK(!ts_adjust_saturation(ts_zeros(TS_SHAPE(2, H, W), (ts_opts){0}), 1));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "channel");
    CHECK(!ts_rgb_to_grayscale(ts_zeros(TS_SHAPE(H, W), (ts_opts){0}), 1));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "3 dims");
    CHECK(!ts_adjust_brightness(NULL, 1));
    CHECK_ERR_HAS(TS_ERR_ARG, "img");
    ts_tensor *one = ts_zeros(TS_SHAPE(1, H, W), (ts_opts){0});
    CHECK(ts_adjust_hue(one, 0.2) == one); /* PIL's behaviour: unchanged */
    ts_release(one);
    ts_scope_end();
}

static void test_convert_normalize(ts_device dev) {
    ts_scope_begin();
    ts_tensor *img = ts_tensor_f64(TS_SHAPE(C, H, W), IMG, (ts_opts){.device = dev});
    double u8v[N], got[N];
    for (int i = 0; i < N; i++) u8v[i] = floor(IMG[i] * 255.999);
    ts_tensor *u8 =
        ts_to_dtype(ts_tensor_f64(TS_SHAPE(C, H, W), u8v, (ts_opts){.device = dev}), TS_U8);
    int bad = 0;
    host(ts_convert_image_dtype(u8, TS_F64), got, N); /* over 255 */
    for (int i = 0; i < N; i++) bad += !ts_test_near(got[i], u8v[i] / 255, 1e-16);
    host(ts_convert_image_dtype(img, TS_U8), got, N); /* x 255.999, truncated */
    for (int i = 0; i < N; i++) bad += got[i] != trunc(IMG[i] * (255 + 1.0 - 1e-3));
    ts_tensor *i16 = ts_convert_image_dtype(u8, TS_I16); /* x 32768 / 256 */
    CHECK(i16 && ts_dtype_of(i16) == TS_I16);
    host(i16, got, N);
    for (int i = 0; i < N; i++) bad += got[i] != u8v[i] * 128;
    host(ts_convert_image_dtype(i16, TS_U8), got, N); /* floor division back */
    for (int i = 0; i < N; i++) bad += got[i] != u8v[i];
    CHECK_EQ(bad, 0);
    CHECK(ts_convert_image_dtype(img, TS_F64) == img);
    ts_release(img);
    CHECK(!ts_convert_image_dtype(ts_to_dtype(img, TS_F32), TS_I32));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "safely");

    /* normalize: per channel (x - mean) / std */
    const double mean[C] = {0.485, 0.456, 0.406}, std[C] = {0.229, 0.224, 0.225};
    host(ts_image_normalize(img, mean, C, std, C, false), got, N);
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += !ts_test_near(got[i], (IMG[i] - mean[i / (H * W)]) / std[i / (H * W)], 1e-15);
    CHECK_EQ(bad, 0);
    const double zero[1] = {0};
    CHECK(!ts_image_normalize(img, mean, 1, zero, 1, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "zero");
    ts_tensor *cp = ts_clone(img);
    CHECK(ts_image_normalize(cp, mean, 1, std, 1, true) == cp);
    ts_release(cp);
    host(cp, got, N);
    CHECK_NEAR(got[5], (IMG[5] - mean[0]) / std[0], 1e-15);
    CHECK_OK();
    ts_scope_end();
}

/* PyTorch's interpolate(mode='bilinear', antialias=True) of x = arange(48).reshape(1, 1, 8, 6)
 * ** 1.5 / 47 (float64) to 3 x 4 and (first 8 values) to 11 x 5, from torch 2.x:
 * F.interpolate(x, size=(3, 4), mode='bilinear', antialias=True, align_corners=False) */
static void test_resize_antialias(ts_device dev) {
    static const double down[12] = {0.4896227688947148, 0.6036175988593295, 0.7355102460337197,
                                    0.8751119185692088, 2.178977549380812,  2.387048901703906,
                                    2.608142132383014,  2.829288019816518,  4.587515523870771,
                                    4.857189467580129,  5.140083143925697,  5.4197855202171725};
    static const double up[8] = {0.004559270516717325, 0.035170418881050075, 0.08536786752609385,
                                 0.1489069333032419,   0.22337954219223163,  0.1969433757411301,
                                 0.26567640572281687,  0.3468944085593226};
    ts_scope_begin();
    double v[48], got[55];
    for (int i = 0; i < 48; i++) v[i] = pow(i, 1.5) / 47;
    ts_tensor *x = ts_tensor_f64(TS_SHAPE(1, 1, 8, 6), v, (ts_opts){.device = dev});
    host(ts_resize_antialias(x, 3, 4), got, 12);
    int bad = 0;
    for (int i = 0; i < 12; i++) bad += !ts_test_near(got[i], down[i], 4e-15); /* values <= 6 */
    host(ts_resize_antialias(x, 11, 5), got, 55);
    for (int i = 0; i < 8; i++) bad += !ts_test_near(got[i], up[i], 1e-15);
    CHECK_EQ(bad, 0);
    CHECK(!ts_resize_antialias(x, 0, 4));
    CHECK_ERR_HAS(TS_ERR_ARG, "positive");
    ts_scope_end();
}

int main(void) {
    fill();
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int n = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < n; i++) {
        test_color(devs[i]);
        test_blur(devs[i]);
        test_convert_normalize(devs[i]);
        test_resize_antialias(devs[i]);
    }
    test_errors();
    return ts_test_finish();
}
