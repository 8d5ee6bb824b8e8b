/* test_fake_quantize.c — ts_fake_quantize_per_tensor_affine / _per_channel_affine (QAT) against
 * a reference written here in integers and float64 (qval = zp + round_half_even((float)(x *
 * (1.0f / scale))), y = float32((clamp(qval) - zp) * (float)scale), mask = qval in range),
 * values worked by hand at ties and the ends of the range, the gradient's mask (the
 * straight-through estimator), the argument errors, a strided input and the sim device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"
#include "tessera/autograd.h"
#include "tessera/elementwise.h"
#include "tessera/quant.h"
#include "tessera/reductions.h"
#include "tessera/views.h"
#include "ts_test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uni(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static ts_tensor *f32(ts_shape s, const float *v) {
    return ts_from_data(s, TS_F32, v, (ts_opts){0});
}

/* the reference for one element: the float32 product x * (1 / scale) is exact in double and
 * rounded once to float, as the float32 multiply; its rounding half to even in double */
static float ref_one(float x, double scale, int64_t zp, int64_t qmin, int64_t qmax, int *mask) {
    const float sc = (float)scale, inv = (float)(1.0 / (double)sc);
    const float p = (float)((double)x * (double)inv);
    if (isnan(p)) return *mask = 0, NAN;
    if (isinf(p)) return *mask = 0, (float)((double)((p > 0 ? qmax : qmin) - zp) * sc);
    double r = floor((double)p);
    const double f = (double)p - r;
    if (f > 0.5 || (f == 0.5 && fmod(r, 2.0) != 0)) r += 1;
    const double q = r + (double)zp; /* exact: |p| < 2^24 in these tests */
    *mask = q >= (double)qmin && q <= (double)qmax;
    const double c = q < (double)qmin ? (double)qmin : q > (double)qmax ? (double)qmax : q;
    return (float)((c - (double)zp) * (double)sc);
}

static bool same_float(float a, float b) {
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

/* scale 0.5 (inverse 2), zero point 3, range [0, 10]: ties go to even */
static void test_hand_values(void) {
    ts_scope_begin();
    const float x[] = {0.25f, 0.75f,    -1.25f,    -1.75f, -1.5f, 3.5f,
                       3.75f, INFINITY, -INFINITY, NAN,    1.0f,  -0.25f};
    const float want[] = {0.0f, 1.0f, -1.0f, -1.5f, -1.5f, 3.5f,
                          3.5f, 3.5f, -1.5f, NAN,   1.0f,  -0.0f};
    const bool want_mask[] = {1, 1, 1, 0, 1, 1, 0, 0, 0, 0, 1, 1};
    enum { N = sizeof x / sizeof *x };
    ts_tensor *y = NULL, *m = NULL;
    CHECK_EQ(
        ts_fake_quantize_per_tensor_affine_cachemask(f32(TS_SHAPE(N), x), 0.5, 3, 0, 10, &y, &m),
        TS_OK);
    float got[N];
    bool gm[N];
    CHECK_EQ(ts_copy_to_host(y, got, sizeof got), TS_OK);
    CHECK_EQ(ts_copy_to_host(m, gm, sizeof gm), TS_OK);
    CHECK_EQ(ts_dtype_of(m), TS_BOOL);
    for (int i = 0; i < N; i++) {
        if (!(same_float(got[i], want[i]) || (want[i] == 0 && got[i] == 0)))
            ts_test_failf(__FILE__, __LINE__, "x %g: y %g, want %g", x[i], got[i], want[i]);
        ts_test_record(same_float(got[i], want[i]) || (want[i] == 0 && got[i] == 0));
        CHECK_EQ(gm[i], want_mask[i]);
    }
    ts_scope_end();
}

/* random values over and past the range, per tensor, for quint8 / qint8 / a narrow range */
static void test_per_tensor_random(void) {
    ts_scope_begin();
    enum { N = 4099 };
    static float x[N], y[N];
    static bool m[N];
    const struct {
        double scale;
        int64_t zp, qmin, qmax;
    } cfg[] = {{0.0371, 17, 0, 255}, {0.0125, -5, -128, 127}, {0.3, 0, -7, 7}, {1e-3, 0, 0, 0}};
    for (size_t c = 0; c < sizeof cfg / sizeof *cfg; c++) {
        const double span = cfg[c].scale * (double)(cfg[c].qmax - cfg[c].qmin + 40);
        for (int i = 0; i < N; i++) x[i] = (float)((uni() - 0.5) * 2.0 * span);
        for (int i = 0; i < 64; i++) /* exact ties: (k + 1/2) * scale, scaled back */
            x[i] = (float)(((double)(i - 32) + 0.5) * (double)(float)cfg[c].scale);
        ts_tensor *ty = NULL, *tm = NULL;
        CHECK_EQ(ts_fake_quantize_per_tensor_affine_cachemask(f32(TS_SHAPE(N), x), cfg[c].scale,
                                                              cfg[c].zp, cfg[c].qmin, cfg[c].qmax,
                                                              &ty, &tm),
                 TS_OK);
        ts_copy_to_host(ty, y, sizeof y);
        ts_copy_to_host(tm, m, sizeof m);
        int bad = 0, bad_mask = 0, inside = 0;
        for (int i = 0; i < N; i++) {
            int wm;
            const float w = ref_one(x[i], cfg[c].scale, cfg[c].zp, cfg[c].qmin, cfg[c].qmax, &wm);
            if (!same_float(w, y[i]) && !(w == 0 && y[i] == 0)) {
                if (bad++ < 3) printf("  cfg %zu x %.9g: y %.9g want %.9g\n", c, x[i], y[i], w);
            }
            bad_mask += (int)m[i] != wm;
            inside += wm;
        }
        CHECK_EQ(bad, 0);
        CHECK_EQ(bad_mask, 0);
        CHECK(inside > 0 && inside < N); /* both sides of the range were seen */
        /* the plain form gives the same y */
        float y2[N];
        ts_copy_to_host(ts_fake_quantize_per_tensor_affine(f32(TS_SHAPE(N), x), cfg[c].scale,
                                                           cfg[c].zp, cfg[c].qmin, cfg[c].qmax),
                        y2, sizeof y2);
        CHECK(memcmp(y, y2, sizeof y) == 0);
    }
    ts_scope_end();
}

/* per channel along each axis of [3, 4, 5]; a strided (transposed) input */
static void test_per_channel(void) {
    ts_scope_begin();
    enum { A = 3, B = 4, C = 5, N = A * B * C };
    float x[N], y[N];
    bool m[N];
    for (int i = 0; i < N; i++) x[i] = (float)((uni() - 0.5) * 6.0);
    const int64_t dims[3] = {A, B, C};
    for (int axis = 0; axis < 3; axis++) {
        const int64_t K = dims[axis];
        float s[5];
        int32_t z[5];
        for (int k = 0; k < K; k++) s[k] = (float)(0.01 + 0.02 * k), z[k] = (int32_t)(k * 7 - 10);
        ts_tensor *ty = NULL, *tm = NULL;
        CHECK_EQ(ts_fake_quantize_per_channel_affine_cachemask(
                     f32(TS_SHAPE(A, B, C), x), f32(TS_SHAPE(K), s),
                     ts_from_data(TS_SHAPE(K), TS_I32, z, (ts_opts){0}), axis, -128, 127, &ty, &tm),
                 TS_OK);
        ts_copy_to_host(ty, y, sizeof y);
        ts_copy_to_host(tm, m, sizeof m);
        int bad = 0;
        for (int a = 0; a < A; a++)
            for (int b = 0; b < B; b++)
                for (int c = 0; c < C; c++) {
                    const int e = (a * B + b) * C + c, k = axis == 0 ? a : axis == 1 ? b : c;
                    int wm;
                    const float w = ref_one(x[e], s[k], z[k], -128, 127, &wm);
                    bad += !same_float(w, y[e]) && !(w == 0 && y[e] == 0);
                    bad += (int)m[e] != wm;
                }
        CHECK_EQ(bad, 0);
    }
    /* a transposed input: the values of its contiguous copy */
    ts_tensor *xt = ts_transpose(f32(TS_SHAPE(A, B, C), x), 0, 2); /* [C, B, A] */
    float s[5] = {0.05f, 0.04f, 0.03f, 0.02f, 0.01f};
    int64_t z[5] = {0, 1, 2, 3, 4};
    ts_tensor *sc = f32(TS_SHAPE(C), s), *zp = ts_from_data(TS_SHAPE(C), TS_I64, z, (ts_opts){0});
    float y1[N], y2[N];
    ts_copy_to_host(ts_fake_quantize_per_channel_affine(xt, sc, zp, 0, -128, 127), y1, sizeof y1);
    ts_copy_to_host(ts_fake_quantize_per_channel_affine(ts_contiguous(xt), sc, zp, 0, -128, 127),
                    y2, sizeof y2);
    CHECK(memcmp(y1, y2, sizeof y1) == 0);
    CHECK_OK();
    ts_scope_end();
}

/* dx = dy * mask: the gradient of sum(y * w) is w where the rounded value is in range, else 0 */
static void test_gradient(void) {
    ts_scope_begin();
    enum { N = 257 };
    float x[N], w[N], g[N];
    for (int i = 0; i < N; i++) x[i] = (float)((uni() - 0.5) * 8.0), w[i] = (float)(1 + i % 5);
    ts_tensor *tx = f32(TS_SHAPE(N), x);
    ts_set_requires_grad(tx, true);
    ts_tensor *y = ts_fake_quantize_per_tensor_affine(tx, 0.02, 100, 0, 255);
    CHECK_OK();
    CHECK_EQ(ts_backward(ts_sum(ts_mul(y, f32(TS_SHAPE(N), w)))), TS_OK);
    ts_copy_to_host(ts_grad(tx), g, sizeof g);
    int bad = 0, passed = 0;
    for (int i = 0; i < N; i++) {
        int wm;
        ref_one(x[i], 0.02, 100, 0, 255, &wm);
        bad += g[i] != (wm ? w[i] : 0.0f);
        passed += wm;
    }
    CHECK_EQ(bad, 0);
    CHECK(passed > 10 && passed < N - 10);
    /* per channel: [2, 3] along axis 1 */
    float x2[6] = {0.1f, 5.0f, -0.3f, -9.0f, 0.2f, 0.0f}, s2[3] = {0.1f, 0.02f, 0.05f}, g2[6];
    int32_t z2[3] = {0, 0, 0};
    ts_tensor *t2 = f32(TS_SHAPE(2, 3), x2);
    ts_set_requires_grad(t2, true);
    ts_tensor *y2 = ts_fake_quantize_per_channel_affine(
        t2, f32(TS_SHAPE(3), s2), ts_from_data(TS_SHAPE(3), TS_I32, z2, (ts_opts){0}), 1, -128,
        127);
    CHECK_EQ(ts_backward(ts_sum(y2)), TS_OK);
    ts_copy_to_host(ts_grad(t2), g2, sizeof g2);
    /* 5.0 / 0.02 = 250 > 127 and -9.0 / 0.1 = -90 in range */
    const float want[6] = {1, 0, 1, 1, 1, 1};
    CHECK(memcmp(g2, want, sizeof want) == 0);
    ts_scope_end();
}

static void test_errors(void) {
    ts_scope_begin();
    float v[4] = {0, 1, 2, 3};
    ts_tensor *x = f32(TS_SHAPE(2, 2), v);
    CHECK(ts_fake_quantize_per_tensor_affine(x, 0.1, 0, 10, 5) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "quant_min 10 must be less than or equal to quant_max 5");
    CHECK(ts_fake_quantize_per_tensor_affine(x, 0.1, 300, 0, 255) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "fake_quantize_per_tensor_affine: zero_point 300");
    CHECK(ts_fake_quantize_per_tensor_affine(x, 0.0, 0, 0, 255) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "scale must be positive");
    CHECK(ts_fake_quantize_per_tensor_affine(x, -1.0, 0, 0, 255) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "scale must be positive");
    CHECK(ts_fake_quantize_per_tensor_affine(x, NAN, 0, 0, 255) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "scale");
    CHECK(ts_fake_quantize_per_tensor_affine(x, 0.1, 0, 0, (int64_t)1 << 40) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "within int32");
    CHECK(ts_fake_quantize_per_tensor_affine(ts_to_dtype(x, TS_F64), 0.1, 0, 0, 255) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "input must be float32");
    CHECK(ts_fake_quantize_per_tensor_affine(NULL, 0.1, 0, 0, 255) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "fake_quantize_per_tensor_affine: input is NULL");
    ts_tensor *y = NULL, *m = NULL;
    CHECK_EQ(ts_fake_quantize_per_tensor_affine_cachemask(x, 0.1, 0, 0, 255, &y, NULL), TS_ERR_ARG);
    ts_error_clear();

    float s[2] = {0.1f, 0.2f}, s3[3] = {0.1f, 0.1f, 0.1f}, bad_s[2] = {0.1f, -0.2f};
    int32_t z[2] = {0, 0}, bad_z[2] = {0, 200};
    ts_tensor *ts2 = f32(TS_SHAPE(2), s), *tz = ts_from_data(TS_SHAPE(2), TS_I32, z, (ts_opts){0});
    CHECK(ts_fake_quantize_per_channel_affine(x, ts2, tz, 2, -128, 127) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "fake_quantize_per_channel_affine: axis 2 is out of range");
    CHECK(ts_fake_quantize_per_channel_affine(x, ts2, tz, -1, -128, 127) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "axis -1");
    CHECK(ts_fake_quantize_per_channel_affine(x, f32(TS_SHAPE(3), s3), tz, 0, -128, 127) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "input.size(axis) = 2");
    CHECK(ts_fake_quantize_per_channel_affine(x, f32(TS_SHAPE(2), bad_s), tz, 0, -128, 127) ==
          NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "scale 1 must be positive");
    CHECK(ts_fake_quantize_per_channel_affine(
              x, ts2, ts_from_data(TS_SHAPE(2), TS_I32, bad_z, (ts_opts){0}), 0, -128, 127) ==
          NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "zero_point 1 200 must be between quant_min -128");
    CHECK(ts_fake_quantize_per_channel_affine(x, ts2, ts2, 0, -128, 127) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "zero_point must be an integer tensor");
    CHECK(ts_fake_quantize_per_channel_affine(x, tz, tz, 0, -128, 127) == NULL);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "scale must be a floating tensor");
    CHECK(ts_fake_quantize_per_channel_affine(x, ts2, tz, 0, 5, -5) == NULL);
    CHECK_ERR_HAS(TS_ERR_ARG, "must be less than or equal to quant_max");
    CHECK(ts_fake_quantize_per_channel_affine(f32(TS_SHAPE(0), v), ts2, tz, 0, -128, 127) == NULL);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "input.size(axis) = 0");
    /* 2^56 channels of an empty input: their parameters (2^59 bytes) cannot be allocated; the
     * error is the out-of-memory one, not a later check run without the buffers */
    ts_tensor *huge = ts_empty(TS_SHAPE((int64_t)1 << 56, 0), (ts_opts){0});
    CHECK(huge != NULL);
    CHECK(ts_fake_quantize_per_channel_affine(huge, ts2, tz, 0, -128, 127) == NULL);
    CHECK_ERR_HAS(TS_ERR_OOM, "out of memory for 72057594037927936 parameters");
    /* the scope opened around reading the parameters is closed: on success and on a failure */
    const int depth = ts_scope_depth();
    CHECK(ts_fake_quantize_per_channel_affine(x, ts2, tz, 0, -128, 127) != NULL);
    CHECK_EQ(ts_scope_depth(), depth);
    CHECK(ts_fake_quantize_per_channel_affine(x, f32(TS_SHAPE(2), bad_s), tz, 0, -128, 127) ==
          NULL);
    ts_error_clear();
    CHECK_EQ(ts_scope_depth(), depth);
    /* an empty input is fine */
    ts_tensor *e = ts_fake_quantize_per_tensor_affine(f32(TS_SHAPE(0, 3), v), 0.1, 0, 0, 255);
    CHECK(e && ts_numel(e) == 0);
    CHECK_OK();
    (void)m;
    ts_scope_end();
}

/* sim runs the cpu kernel: the same bits, the tensors on sim:0 */
static void test_sim(void) {
    ts_scope_begin();
    ts_sim_configure(1, 0);
    enum { N = 300 };
    float x[N], a[N], b[N], s[3] = {0.01f, 0.03f, 0.07f};
    int32_t z[3] = {-3, 0, 5};
    for (int i = 0; i < N; i++) x[i] = (float)((uni() - 0.5) * 5.0);
    ts_tensor *xc = f32(TS_SHAPE(N / 3, 3), x), *xs = ts_to(xc, ts_sim(0));
    ts_tensor *sc = f32(TS_SHAPE(3), s), *zc = ts_from_data(TS_SHAPE(3), TS_I32, z, (ts_opts){0});
    ts_tensor *ys = ts_fake_quantize_per_channel_affine(xs, ts_to(sc, ts_sim(0)),
                                                        ts_to(zc, ts_sim(0)), 1, -128, 127);
    CHECK(ys && ts_device_equal(ts_device_of(ys), ts_sim(0)));
    ts_copy_to_host(ys, a, sizeof a);
    ts_copy_to_host(ts_fake_quantize_per_channel_affine(xc, sc, zc, 1, -128, 127), b, sizeof b);
    CHECK(memcmp(a, b, sizeof a) == 0);
    ts_copy_to_host(ts_fake_quantize_per_tensor_affine(xs, 0.02, 7, 0, 255), a, sizeof a);
    ts_copy_to_host(ts_fake_quantize_per_tensor_affine(xc, 0.02, 7, 0, 255), b, sizeof b);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(ts_fake_quantize_per_tensor_affine(ts_to(xc, ts_meta()), 0.02, 7, 0, 255) == NULL);
    ts_error_clear();
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    test_hand_values();
    test_per_tensor_random();
    test_per_channel();
    test_gradient();
    test_errors();
    test_sim();
    return ts_test_finish();
}
