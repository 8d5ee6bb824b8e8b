/* test_onnx_quant_ms.c — the edges of ONNX Runtime's com.microsoft quantized operators
 * (src/onnx/ops_qoperator_ms_*.c) on one-node models (tests/onnx_support/onnx_op_util.h), on every
 * test device; tests/data/onnx_quant's ORT-made cases (test_ort_ms_*) cover the float32 orders.
 * QLinearMul: ties to even and saturation at both ends, uint8 and int8, broadcasting both ways and
 * a scalar; QLinearLeakyRelu's table over all 256 values (ties, both saturations); QLinearConcat of
 * inputs with Y's parameters (copied), another zero point, halves and saturating scales; the global
 * average pool's ties NCHW and NHWC, images near MLAS's limit of 2^24 (its int32 sums wrap: values
 * from ORT 1.32) and the limit itself; then the refusals (QLinearAveragePool's too: its values are
 * tests/data/onnx_quant's test_ort_ms_avgpool_* cases). The scales here are powers of two, so
 * every reference is exact in float64 whatever the order of ORT's float32 steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx_op_util.h"

static model *ms_model(const char *op, const char *ins) {
    model *b = model_new(op, "com.microsoft", 13, ins, "y");
    import(b, "com.microsoft", 1);
    return b;
}

static double sat(double v, bool s8) {
    const double lo = s8 ? -128 : 0, hi = s8 ? 127 : 255;
    return v < lo ? lo : v > hi ? hi : v;
}

static int64_t numel(ts_shape s) {
    int64_t k = 1;
    for (int d = 0; d < s.ndim; d++) k *= s.dims[d];
    return k;
}

static ts_tensor *q8(ts_device dev, bool s8, ts_shape s, const int *v) {
    int8_t b[64];
    for (int64_t i = 0; i < numel(s); i++) b[i] = (int8_t)(s8 ? v[i] : (uint8_t)v[i]);
    return tensor(dev, s8 ? TS_I8 : TS_U8, s, b);
}

static ts_tensor *zp(ts_device dev, bool s8, int v) { return q8(dev, s8, TS_SHAPE(), &v); }

static ts_tensor *scale(ts_device dev, float v) { return tensor(dev, TS_F32, TS_SHAPE(), &v); }

/* the offset in an input of shape s (ns dims) of output element i (shape o, nd dims): numpy's
 * broadcasting, right-aligned, size-1 dims repeated */
static int64_t bcast(int64_t i, const int64_t *o, int nd, const int64_t *s, int ns) {
    int64_t off = 0, stride = 1;
    for (int d = nd - 1; d >= 0; d--) {
        const int64_t c = i % o[d], sd = d - (nd - ns);
        i /= o[d];
        if (sd < 0) continue;
        if (s[sd] != 1) off += c * stride;
        stride *= s[sd];
    }
    return off;
}

/* ------------------------------------------------------------------ QLinearMul */
typedef struct mul_case {
    int na, nb, no;
    int64_t sa[3], sb[3], so[3];
    int a[8], b[8];
} mul_case;

/* ratio 0.5 (exact): odd products give halves, to even; products past 2 * 255 saturate */
static void test_mul(ts_device dev, bool s8) {
    ts_scope_begin();
    const float sa = s8 ? 0.25f : 0.5f, sb = s8 ? 1.0f : 0.5f, sc = 0.5f;
    const int za = s8 ? -3 : 3, zb = 1, zc = s8 ? -10 : 10;
    const mul_case cases[] = {
        /* A [2, 1, 4] * B [3, 1]: both broadcast */
        {3, 2, 3, {2, 1, 4}, {3, 1}, {2, 3, 4}, {0, 4, 255, 6, 8, 200, 3, 2}, {2, 255, 0}},
        /* A [3] * B [] (a scalar) and A [1] * B [2, 3] */
        {1, 0, 1, {3}, {0}, {3}, {1, 4, 6}, {70}},
        {1, 2, 2, {1}, {2, 3}, {2, 3}, {9}, {0, 1, 2, 3, 255, 128}},
    };
    const mul_case cases_s8[] = {
        {3, 2, 3, {2, 1, 4}, {3, 1}, {2, 3, 4}, {-128, 127, -2, 0, 1, 5, -4, 100}, {2, 127, -128}},
        {1, 0, 1, {3}, {0}, {3}, {-5, 0, 4}, {70}},
        {1, 2, 2, {1}, {2, 3}, {2, 3}, {-9}, {0, 1, 2, 3, 127, -128}},
    };
    for (int k = 0; k < 3; k++) {
        const mul_case *mc = s8 ? &cases_s8[k] : &cases[k];
        ts_shape shp_a = {.ndim = mc->na}, shp_b = {.ndim = mc->nb}, shp_o = {.ndim = mc->no};
        for (int d = 0; d < 3; d++)
            shp_a.dims[d] = mc->sa[d], shp_b.dims[d] = mc->sb[d], shp_o.dims[d] = mc->so[d];
        const int64_t count = numel(shp_o);
        double want[24];
        for (int64_t i = 0; i < count; i++) {
            const int a = mc->a[bcast(i, mc->so, mc->no, mc->sa, mc->na)],
                      b = mc->b[bcast(i, mc->so, mc->no, mc->sb, mc->nb)];
            want[i] = sat(nearbyint((double)(a - za) * (b - zb) * sa * sb / sc) + zc, s8);
        }
        model *m = ms_model("QLinearMul", "a as az b bs bz cs cz");
        ts_module *mod = load(m, dev);
        ts_tensor *in[8] = {q8(dev, s8, shp_a, mc->a),
                            scale(dev, sa),
                            zp(dev, s8, za),
                            q8(dev, s8, shp_b, mc->b),
                            scale(dev, sb),
                            zp(dev, s8, zb),
                            scale(dev, sc),
                            zp(dev, s8, zc)};
        ts_tensor *y = NULL;
        CHECK(run(mod, 8, in, 1, &y));
        check_values(y, s8 ? TS_I8 : TS_U8, shp_o, want, NULL, "QLinearMul");
        ts_module_free(mod);
        model_free();
    }
    ts_scope_end();
}

/* ------------------------------------------------------------------ QLinearLeakyRelu */
/* x_scale 1, alpha 0.75, y_scale 0.5: negatives give halves (ties), both ends saturate */
static void test_leaky_relu(ts_device dev, bool s8) {
    ts_scope_begin();
    const int xz = s8 ? -3 : 100, yz = s8 ? -10 : 60;
    int x[256];
    double want[256];
    for (int i = 0; i < 256; i++) {
        x[i] = s8 ? i - 128 : i;
        const double v = x[i] - xz;
        want[i] = sat(nearbyint((v >= 0 ? v : 0.75 * v) / 0.5) + yz, s8);
    }
    int8_t xb[256];
    for (int i = 0; i < 256; i++) xb[i] = (int8_t)(s8 ? x[i] : (uint8_t)x[i]);
    model *m = ms_model("QLinearLeakyRelu", "x xs xz ys yz");
    a_float(m, "alpha", 0.75f);
    ts_module *mod = load(m, dev);
    ts_tensor *in[5] = {tensor(dev, s8 ? TS_I8 : TS_U8, TS_SHAPE(2, 128), xb), scale(dev, 1.0f),
                        zp(dev, s8, xz), scale(dev, 0.5f), zp(dev, s8, yz)};
    ts_tensor *y = NULL;
    CHECK(run(mod, 5, in, 1, &y));
    check_values(y, s8 ? TS_I8 : TS_U8, TS_SHAPE(2, 128), want, NULL, "QLinearLeakyRelu");
    ts_module_free(mod);
    model_free();
    ts_scope_end();
}

/* ------------------------------------------------------------------ QLinearConcat */
/* along the last axis (-1): X0 on Y's parameters (copied), X1 halves (ties), X2 a scale of 4
 * (saturating both ways), X3 Y's scale with another zero point (through its table) */
static void test_concat(ts_device dev, bool s8) {
    ts_scope_begin();
    const float ys = 1.0f, xs[4] = {1.0f, 0.5f, 4.0f, 1.0f};
    const int o = s8 ? -128 : 0; /* uint8 values shifted into int8's range */
    const int yz = 10 + o, xz[4] = {10 + o, 7 + o, 100 + o, 3 + o}, width[4] = {3, 2, 1, 2};
    const int xv[4][6] = {{0 + o, 255 + o, 17 + o, 9 + o, 128 + o, 40 + o},
                          {0 + o, 8 + o, 10 + o, 255 + o},
                          {0 + o, 102 + o},
                          {0 + o, 2 + o, 3 + o, 255 + o}};
    double want[2 * 8];
    int col = 0;
    for (int k = 0; k < 4; k++) {
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < width[k]; j++)
                want[r * 8 + col + j] =
                    sat(nearbyint(xs[k] * (double)(xv[k][r * width[k] + j] - xz[k]) / ys) + yz, s8);
        col += width[k];
    }
    model *m = ms_model("QLinearConcat", "ys yz x0 s0 z0 x1 s1 z1 x2 s2 z2 x3 s3 z3");
    a_int(m, "axis", -1);
    ts_module *mod = load(m, dev);
    ts_tensor *in[14] = {scale(dev, ys), zp(dev, s8, yz)};
    for (int k = 0; k < 4; k++) {
        in[2 + 3 * k] = q8(dev, s8, TS_SHAPE(1, 2, width[k]), xv[k]);
        in[3 + 3 * k] = scale(dev, xs[k]);
        in[4 + 3 * k] = zp(dev, s8, xz[k]);
    }
    ts_tensor *y = NULL;
    CHECK(run(mod, 14, in, 1, &y));
    check_values(y, s8 ? TS_I8 : TS_U8, TS_SHAPE(1, 2, 8), want, NULL, "QLinearConcat");
    ts_module_free(mod);
    model_free();
    ts_scope_end();
}

/* ------------------------------------------------------------------ QLinearGlobalAveragePool */
/* 2 x 2 images, scale 1 / 4: channel sums less the zero point of 2, 6, -2, -6, 10 give 0.5, 1.5,
 * -0.5, -1.5, 2.5: ties to even; 980 / 4 + 50 saturates; NCHW and NHWC */
static void test_gap_ties(ts_device dev, bool last) {
    ts_scope_begin();
    enum { C = 6 };
    const int xz = 10, yz = 50, acc[C] = {2, 6, -2, -6, 10, 980};
    int nchw[C * 4], x[C * 4];
    double want[C];
    for (int ch = 0; ch < C; ch++) {
        const int s = acc[ch] + 4 * xz, base = s / 4; /* 4 values summing to s */
        for (int j = 0; j < 4; j++) nchw[ch * 4 + j] = base + (j < s - 4 * base);
        want[ch] = sat(nearbyint(acc[ch] / 4.0) + yz, false);
    }
    uint8_t xb[C * 4];
    for (int ch = 0; ch < C; ch++)
        for (int j = 0; j < 4; j++) x[last ? j * C + ch : ch * 4 + j] = nchw[ch * 4 + j];
    for (int i = 0; i < C * 4; i++) xb[i] = (uint8_t)x[i];
    model *m = ms_model("QLinearGlobalAveragePool", "x xs xz ys yz");
    a_int(m, "channels_last", last);
    ts_module *mod = load(m, dev);
    ts_tensor *in[5] = {tensor(dev, TS_U8, last ? TS_SHAPE(1, 2, 2, C) : TS_SHAPE(1, C, 2, 2), xb),
                        scale(dev, 0.5f), zp(dev, false, xz), scale(dev, 0.5f), zp(dev, false, yz)};
    ts_tensor *y = NULL;
    CHECK(run(mod, 5, in, 1, &y));
    check_values(y, TS_U8, last ? TS_SHAPE(1, 1, 1, C) : TS_SHAPE(1, C, 1, 1), want, NULL,
                 last ? "QLinearGlobalAveragePool NHWC" : "QLinearGlobalAveragePool");
    ts_module_free(mod);
    model_free();
    ts_scope_end();
}

/* 4095 x 4097 = 2^24 - 1 values, one repeated: MLAS's int32 sum of 155 or 255 per value less the
 * zero point passes 2^31 and wraps; 72 per value does not, but is past float32's 2^24. The
 * expected values are ONNX Runtime 1.32's for these very models (CPU provider). */
typedef struct gap_big {
    bool s8;
    int v, xz, yz;
    float xs, ys;
    double ort;
} gap_big;

static void test_gap_large(ts_device dev) {
    ts_scope_begin();
    const gap_big cases[] = {
        {false, 255, 100, 7, 0.003f, 0.01f, 0}, /* without the wrap 53 */
        {false, 255, 0, 7, 0.003f, 0.01f, 7},   /* without the wrap 84 */
        {false, 200, 128, 7, 0.003f, 0.01f, 29},
        {true, -128, 100, 0, 0.001f, 0.05f, 1}, /* wraps to a positive sum; without it -5 */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const gap_big *g = &cases[k];
        const ts_dtype dt = g->s8 ? TS_I8 : TS_U8;
        model *m = ms_model("QLinearGlobalAveragePool", "x xs xz ys yz");
        ts_module *mod = load(m, dev);
        ts_tensor *in[5] = {
            ts_full(TS_SHAPE(1, 1, 4095, 4097), g->v, (ts_opts){.dtype = dt, .device = dev}),
            scale(dev, g->xs), zp(dev, g->s8, g->xz), scale(dev, g->ys), zp(dev, g->s8, g->yz)};
        ts_tensor *y = NULL;
        CHECK(run(mod, 5, in, 1, &y));
        check_values(y, dt, TS_SHAPE(1, 1, 1, 1), &g->ort, NULL, "QLinearGlobalAveragePool 2^24-1");
        ts_module_free(mod);
        model_free();
    }
    ts_scope_end();
}

/* ------------------------------------------------------------------ errors */
static void test_load_errors(void) {}

static void test_run_errors(ts_device dev) {
    ts_scope_begin();
    ts_opts f32 = {.device = dev}, u8 = {.dtype = TS_U8, .device = dev},
            i8 = {.dtype = TS_I8, .device = dev};
    ts_tensor *q[8] = {ts_zeros(TS_SHAPE(2, 3), u8),
                       scale(dev, 1),
                       zp(dev, false, 0),
                       ts_zeros(TS_SHAPE(2, 3), u8),
                       scale(dev, 1),
                       zp(dev, false, 0),
                       scale(dev, 1),
                       zp(dev, false, 0)};
    /* QLinearMul: a scale per channel; float A; A uint8 and B int8; an int8 zero point of uint8 A
     */
    q[1] = ts_ones(TS_SHAPE(2), f32);
    fails(ms_model("QLinearMul", "a as az b bs bz cs cz"), dev, 8, q, TS_ERR_UNSUPPORTED,
          "A_scale must be one float32 (per tensor)");
    q[1] = scale(dev, 1), q[0] = ts_zeros(TS_SHAPE(2, 3), f32);
    fails(ms_model("QLinearMul", "a as az b bs bz cs cz"), dev, 8, q, TS_ERR_DTYPE,
          "A must be uint8 or int8");
    q[0] = ts_zeros(TS_SHAPE(2, 3), u8), q[3] = ts_zeros(TS_SHAPE(2, 3), i8);
    fails(ms_model("QLinearMul", "a as az b bs bz cs cz"), dev, 8, q, TS_ERR_DTYPE,
          "differ in type");
    q[3] = ts_zeros(TS_SHAPE(2, 3), u8), q[2] = zp(dev, true, 0);
    fails(ms_model("QLinearMul", "a as az b bs bz cs cz"), dev, 8, q, TS_ERR_UNSUPPORTED,
          "A_zero_point must be one uint8 value");
    /* the global average pool: no spatial dims; 2^24 values per image; a ratio of 512 */
    ts_tensor *g[5] = {ts_zeros(TS_SHAPE(2, 3), u8), scale(dev, 1), zp(dev, false, 0),
                       scale(dev, 1), zp(dev, false, 0)};
    fails(ms_model("QLinearGlobalAveragePool", "x xs xz ys yz"), dev, 5, g, TS_ERR_SHAPE,
          "X must have a batch, a channel and spatial dims");
    g[0] = ts_zeros(TS_SHAPE(1, 1, 4096, 4096), u8);
    fails(ms_model("QLinearGlobalAveragePool", "x xs xz ys yz"), dev, 5, g, TS_ERR_UNSUPPORTED,
          "image size 16777216");
    g[0] = ts_zeros(TS_SHAPE(1, 2, 1, 1), u8), g[1] = scale(dev, 512);
    fails(ms_model("QLinearGlobalAveragePool", "x xs xz ys yz"), dev, 5, g, TS_ERR_UNSUPPORTED,
          "ratios in [2^-32, 256) only");
    /* QLinearSigmoid on float X; QLinearConcat with no (X, scale, zero point) triple, with X1's
     * type not Y's */
    g[0] = ts_zeros(TS_SHAPE(2), f32), g[1] = scale(dev, 1);
    fails(ms_model("QLinearSigmoid", "x xs xz ys yz"), dev, 5, g, TS_ERR_DTYPE,
          "X must be uint8 or int8");
    g[0] = ts_zeros(TS_SHAPE(2), u8);
    fails(ms_model("QLinearConcat", "x xs xz ys"), dev, 4, g, TS_ERR_ARG,
          "the inputs must be Y_scale, Y_zero_point and (X, X_scale, X_zero_point)");
    ts_tensor *c[8] = {scale(dev, 1), zp(dev, false, 0), ts_zeros(TS_SHAPE(2), u8),
                       scale(dev, 1), zp(dev, false, 0), ts_zeros(TS_SHAPE(2), i8),
                       scale(dev, 1), zp(dev, false, 0)};
    fails(ms_model("QLinearConcat", "ys yz x0 s0 z0 x1 s1 z1"), dev, 8, c, TS_ERR_DTYPE,
          "differ in type");
    /* QLinearAveragePool: no kernel_shape; auto_pad SAME_UPPER; dilations 2; a pad as large as
     * the kernel; 4 spatial dims */
    static const int64_t k2[2] = {2, 2}, d2[2] = {2, 2}, p2[4] = {2, 0, 0, 0};
    ts_tensor *ap[5] = {ts_zeros(TS_SHAPE(1, 2, 4, 4), u8), scale(dev, 1), zp(dev, false, 0),
                        scale(dev, 1), zp(dev, false, 0)};
    fails(ms_model("QLinearAveragePool", "x xs xz ys yz"), dev, 5, ap, TS_ERR_ARG,
          "kernel_shape is required");
    model *p = ms_model("QLinearAveragePool", "x xs xz ys yz");
    a_ints(p, "kernel_shape", 2, k2), a_str(p, "auto_pad", "SAME_UPPER");
    fails(p, dev, 5, ap, TS_ERR_UNSUPPORTED, "auto_pad 'SAME_UPPER'");
    p = ms_model("QLinearAveragePool", "x xs xz ys yz");
    a_ints(p, "kernel_shape", 2, k2), a_ints(p, "dilations", 2, d2);
    fails(p, dev, 5, ap, TS_ERR_UNSUPPORTED, "dilations 2: only 1 runs");
    p = ms_model("QLinearAveragePool", "x xs xz ys yz");
    a_ints(p, "kernel_shape", 2, k2), a_ints(p, "pads", 4, p2);
    fails(p, dev, 5, ap, TS_ERR_ARG, "pads must be smaller than the kernel");
    ap[0] = ts_zeros(TS_SHAPE(1, 1, 2, 2, 2, 2), u8);
    p = ms_model("QLinearAveragePool", "x xs xz ys yz");
    a_ints(p, "kernel_shape", 2, k2);
    fails(p, dev, 5, ap, TS_ERR_UNSUPPORTED, "1 to 3 spatial dims");
    /* QGemm without y_scale: the float32 output is not run */
    model *b = ms_model("QGemm", "a as az b bs bz");
    fails(b, dev, 6, q, TS_ERR_UNSUPPORTED, "no y_scale");
    ts_scope_end();
}

static void on_device(ts_device dev) {
    for (int s8 = 0; s8 < 2; s8++) {
        test_mul(dev, s8);
        test_leaky_relu(dev, s8);
        test_concat(dev, s8);
    }
    test_gap_ties(dev, false);
    test_gap_ties(dev, true);
    test_gap_large(dev);
    test_run_errors(dev);
}

int main(void) { return op_test_main(test_load_errors, on_device); }
#endif
