/* test_onnx_quant.c — ONNX's integer and quantized operators (src/onnx/ops_qoperator.c), which the
 * backend suite covers thinly, on one-node models packed with protobuf-c
 * (tests/onnx_support/onnx_op_util.h), on every test device: MatMulInteger and ConvInteger with
 * per-row / per-column / per-channel zero points and int32 wrap-around, QLinearMatMul and
 * QLinearConv with ties to even, saturation, per-channel scales and a bias, all exact against
 * integer references. Then the errors: bad attributes refused at load, bad shapes and dtypes at
 * run time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_test.h"

#ifndef TS_HAVE_ONNX
int main(void) { return ts_test_skip("this build has no ONNX support (protobuf-c not found)"); }
#else
#include "onnx/onnx_internal.h"
#include "onnx_op_util.h"

/* ------------------------------------------------------------------ quantized operators */
static void test_matmul_integer(ts_device dev) {
    ts_scope_begin();
    model *b = model_new("MatMulInteger", "", 10, "a b az bz", "y");
    ts_module *m = load(b, dev);
    uint8_t a[2 * 3 * 4], bm[4 * 5], az[3] = {3, 128, 255}, bz[5] = {0, 7, 200, 255, 1};
    for (int i = 0; i < 24; i++) a[i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < 20; i++) bm[i] = (uint8_t)(i * 53 + 5);
    double want[2 * 3 * 5];
    for (int bt = 0; bt < 2; bt++) /* per-row zero points of a, per-column ones of b */
        for (int r = 0; r < 3; r++)
            for (int cl = 0; cl < 5; cl++) {
                int64_t s = 0;
                for (int k = 0; k < 4; k++)
                    s += ((int64_t)a[(bt * 3 + r) * 4 + k] - az[r]) *
                         ((int64_t)bm[k * 5 + cl] - bz[cl]);
                want[(bt * 3 + r) * 5 + cl] = (double)s;
            }
    ts_tensor *in[4] = {tensor(dev, TS_U8, TS_SHAPE(2, 3, 4), a),
                        tensor(dev, TS_U8, TS_SHAPE(4, 5), bm), tensor(dev, TS_U8, TS_SHAPE(3), az),
                        tensor(dev, TS_U8, TS_SHAPE(5), bz)};
    ts_tensor *y = NULL;
    CHECK(run(m, 4, in, 1, &y));
    check_values(y, TS_I32, TS_SHAPE(2, 3, 5), want, NULL, "MatMulInteger");
    ts_module_free(m);
    model_free();
    /* 40000 products of 255 * 255 pass 2^31: int32 sums wrap */
    b = model_new("MatMulInteger", "", 10, "a b", "y");
    m = load(b, dev);
    enum { K = 40000 };
    ts_tensor *ab[2] = {ts_full(TS_SHAPE(1, K), 255, (ts_opts){.dtype = TS_U8, .device = dev}),
                        ts_full(TS_SHAPE(K, 1), 255, (ts_opts){.dtype = TS_U8, .device = dev})};
    double wrapped = (double)(int32_t)(uint32_t)((uint64_t)K * 255 * 255);
    CHECK(run(m, 2, ab, 1, &y));
    check_values(y, TS_I32, TS_SHAPE(1, 1), &wrapped, NULL, "MatMulInteger wrap");
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

/* ONNX's requantization: round(acc * (sa * sb / sy), half to even) + zp, saturated to [0, 255];
 * the scale product in float32 as ONNX's reference computes it */
static double requant(double acc, float sa, float sb, float sy, int zp) {
    float prod = sa * sb, mult = prod / sy;
    double v = nearbyint(acc * (double)mult) + zp; /* the default rounding: half to even */
    return v < 0 ? 0 : v > 255 ? 255 : v;
}

static void test_qlinear_matmul(ts_device dev) {
    ts_scope_begin();
    model *b = model_new("QLinearMatMul", "", 10, "a as az b bs bz ys yz", "y");
    ts_module *m = load(b, dev);
    /* scales per row of a and per column of b; row 0 gives 5 * 0.5 = 2.5 and -6 * 0.25 = -1.5:
     * ties, to even (2 and -2, where rounding half up gives 3 and -1); row 1 gives 366 and -369:
     * saturated to 255 and 0 */
    uint8_t a[2 * 3] = {3, 4, 2, 250, 0, 2}, bm[3 * 2] = {5, 2, 6, 2, 9, 255}, az = 2, bz = 4;
    uint8_t yz = 10;
    float as[2] = {0.5f, 1.5f}, bs[2] = {1.0f, 0.5f}, ys = 1.0f;
    double want[4];
    for (int r = 0; r < 2; r++)
        for (int cl = 0; cl < 2; cl++) {
            double acc = 0;
            for (int k = 0; k < 3; k++) acc += (double)(a[r * 3 + k] - az) * (bm[k * 2 + cl] - bz);
            want[r * 2 + cl] = requant(acc, as[r], bs[cl], ys, yz);
        }
    ts_tensor *in[8] = {
        tensor(dev, TS_U8, TS_SHAPE(2, 3), a), tensor(dev, TS_F32, TS_SHAPE(2), as),
        tensor(dev, TS_U8, TS_SHAPE(), &az),   tensor(dev, TS_U8, TS_SHAPE(3, 2), bm),
        tensor(dev, TS_F32, TS_SHAPE(2), bs),  tensor(dev, TS_U8, TS_SHAPE(), &bz),
        tensor(dev, TS_F32, TS_SHAPE(1), &ys), tensor(dev, TS_U8, TS_SHAPE(1), &yz)};
    ts_tensor *y = NULL;
    CHECK(run(m, 8, in, 1, &y));
    check_values(y, TS_U8, TS_SHAPE(2, 2), want, NULL, "QLinearMatMul");
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

/* y[o][i][j] = sum over c, ky, kx of (x - xz) (w - wz[o]) at the strided, dilated, padded taps
 * (group 2), + bias[o]: float64 holds these integers exactly */
typedef struct conv_geom {
    int stride, dil, pad_t, pad_l, oh, ow;
} conv_geom;

static double conv_at(const uint8_t *x, int xz, const uint8_t *w, int wz, const conv_geom *g, int o,
                      int i, int j) {
    double s = 0; /* x [1, 4, 5, 5], w [4, 2, 3, 3], group 2: output o reads channels (o/2)*2.. */
    for (int c = 0; c < 2; c++)
        for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
                int yy = i * g->stride + ky * g->dil - g->pad_t,
                    xx = j * g->stride + kx * g->dil - g->pad_l;
                if (yy < 0 || yy >= 5 || xx < 0 || xx >= 5) continue;
                int ch = (o / 2) * 2 + c;
                s += (double)(x[(ch * 5 + yy) * 5 + xx] - xz) *
                     (w[((o * 2 + c) * 3 + ky) * 3 + kx] - wz);
            }
    return s;
}

static void test_qlinear_conv(ts_device dev, bool quantized) {
    ts_scope_begin();
    model *b = quantized ? model_new("QLinearConv", "", 10, "x xs xz w ws wz ys yz bias", "y")
                         : model_new("ConvInteger", "", 10, "x w xz wz", "y");
    conv_geom g = quantized ? (conv_geom){2, 1, 1, 1, 3, 3} : (conv_geom){1, 2, 1, 0, 2, 1};
    a_int(b, "group", 2);
    a_ints(b, "strides", 2, (int64_t[]){g.stride, g.stride});
    a_ints(b, "dilations", 2, (int64_t[]){g.dil, g.dil});
    a_ints(b, "pads", 4, quantized ? (int64_t[]){1, 1, 1, 1} : (int64_t[]){1, 0, 0, 0});
    ts_module *m = load(b, dev);
    CHECK(m != NULL);
    uint8_t x[4 * 25], w[4 * 2 * 9], xz = 120, wz[4] = {0, 128, 255, 3};
    for (int i = 0; i < 100; i++) x[i] = (uint8_t)(i * 97 + 13);
    for (int i = 0; i < 72; i++) w[i] = (uint8_t)(i * 61 + 29);
    int32_t bias[4] = {-3000, 17, 0, 123456};
    float xs = 0.02f, ws[4] = {0.5f, 0.01f, 0.003f, 0.25f}, ys = 0.75f;
    uint8_t yz = 100;
    double want[4 * 9];
    for (int o = 0; o < 4; o++)
        for (int i = 0; i < g.oh; i++)
            for (int j = 0; j < g.ow; j++) {
                double acc = conv_at(x, xz, w, wz[o], &g, o, i, j);
                want[(o * g.oh + i) * g.ow + j] =
                    quantized ? requant(acc + bias[o], xs, ws[o], ys, yz) : acc;
            }
    ts_tensor *tx = tensor(dev, TS_U8, TS_SHAPE(1, 4, 5, 5), x),
              *tw = tensor(dev, TS_U8, TS_SHAPE(4, 2, 3, 3), w);
    ts_tensor *txz = tensor(dev, TS_U8, TS_SHAPE(), &xz),
              *twz = tensor(dev, TS_U8, TS_SHAPE(4), wz);
    ts_tensor *y = NULL;
    if (quantized) {
        ts_tensor *in[9] = {tx,
                            tensor(dev, TS_F32, TS_SHAPE(), &xs),
                            txz,
                            tw,
                            tensor(dev, TS_F32, TS_SHAPE(4), ws),
                            twz,
                            tensor(dev, TS_F32, TS_SHAPE(), &ys),
                            tensor(dev, TS_U8, TS_SHAPE(), &yz),
                            tensor(dev, TS_I32, TS_SHAPE(4), bias)};
        CHECK(run(m, 9, in, 1, &y));
    } else {
        ts_tensor *in[4] = {tx, tw, txz, twz};
        CHECK(run(m, 4, in, 1, &y));
    }
    check_values(y, quantized ? TS_U8 : TS_I32, TS_SHAPE(1, 4, g.oh, g.ow), want, NULL,
                 quantized ? "QLinearConv" : "ConvInteger");
    if (quantized) {
        /* the node keeps x_scale * w_scale / y_scale between runs: a new y_scale tensor, then
         * x_scale's same tensor written in place, must each make it again */
        ts_tensor *txs = tensor(dev, TS_F32, TS_SHAPE(), &xs),
                  *tws = tensor(dev, TS_F32, TS_SHAPE(4), ws),
                  *tyz = tensor(dev, TS_U8, TS_SHAPE(), &yz),
                  *tb = tensor(dev, TS_I32, TS_SHAPE(4), bias);
        const float ys1 = 0.5f;
        ts_tensor *tys = tensor(dev, TS_F32, TS_SHAPE(), &ys),
                  *tys1 = tensor(dev, TS_F32, TS_SHAPE(), &ys1);
        for (int step = 0; step < 3; step++) { /* steps 1 and 2: the same y_scale tensor */
            const float xs2 = step == 2 ? 0.03f : xs, ys2 = step ? ys1 : ys;
            if (step == 2) ts_fill_(txs, (double)xs2);
            for (int o = 0; o < 4; o++)
                for (int i = 0; i < g.oh; i++)
                    for (int j = 0; j < g.ow; j++)
                        want[(o * g.oh + i) * g.ow + j] = requant(
                            conv_at(x, xz, w, wz[o], &g, o, i, j) + bias[o], xs2, ws[o], ys2, yz);
            ts_tensor *in[9] = {tx, txs, txz, tw, tws, twz, step ? tys1 : tys, tyz, tb};
            y = NULL;
            CHECK(run(m, 9, in, 1, &y));
            check_values(y, TS_U8, TS_SHAPE(1, 4, g.oh, g.ow), want, NULL, "QLinearConv again");
        }
    }
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

/* The node keeps the convolution options it read between runs, keyed by the input's shape:
 * auto_pad SAME_UPPER, kernel 5, stride 3 pads 1 a side at 9 x 9 and 2 at 10 x 10 (both
 * symmetric), so runs at 9, 9, 9, 10, 10, 9 must each take their own padding. */
static void test_qlinear_conv_shapes(ts_device dev) {
    ts_scope_begin();
    model *b = model_new("QLinearConv", "", 10, "x xs xz w ws wz ys yz", "y");
    a_str(b, "auto_pad", "SAME_UPPER");
    a_ints(b, "kernel_shape", 2, (int64_t[]){5, 5});
    a_ints(b, "strides", 2, (int64_t[]){3, 3});
    ts_module *m = load(b, dev);
    CHECK(m != NULL);
    uint8_t x[100], w[25], xz = 9, wz = 0, yz = 3;
    for (int i = 0; i < 100; i++) x[i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < 25; i++) w[i] = (uint8_t)(i * 53 + 7);
    const float xs = 0.02f, ws = 0.01f, ys = 0.5f;
    static const int sizes[] = {9, 9, 9, 10, 10, 9};
    /* the same parameter tensors at every run: the node's state (and its options) stays */
    ts_tensor *par[7] = {
        tensor(dev, TS_F32, TS_SHAPE(), &xs),        tensor(dev, TS_U8, TS_SHAPE(), &xz),
        tensor(dev, TS_U8, TS_SHAPE(1, 1, 5, 5), w), tensor(dev, TS_F32, TS_SHAPE(), &ws),
        tensor(dev, TS_U8, TS_SHAPE(), &wz),         tensor(dev, TS_F32, TS_SHAPE(), &ys),
        tensor(dev, TS_U8, TS_SHAPE(), &yz)};
    for (int r = 0; r < 6 && m; r++) {
        const int h = sizes[r], oh = (h + 2) / 3, pad = ((oh - 1) * 3 + 5 - h) / 2;
        double want[16];
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < oh; j++) {
                double acc = 0;
                for (int ky = 0; ky < 5; ky++)
                    for (int kx = 0; kx < 5; kx++) {
                        const int yy = i * 3 + ky - pad, xx = j * 3 + kx - pad;
                        if (yy >= 0 && yy < h && xx >= 0 && xx < h)
                            acc += (double)(x[yy * h + xx] - xz) * (w[ky * 5 + kx] - wz);
                    }
                want[i * oh + j] = requant(acc, xs, ws, ys, yz);
            }
        ts_tensor *in[8] = {tensor(dev, TS_U8, TS_SHAPE(1, 1, h, h), x),
                            par[0],
                            par[1],
                            par[2],
                            par[3],
                            par[4],
                            par[5],
                            par[6]};
        ts_tensor *y = NULL;
        CHECK(run(m, 8, in, 1, &y));
        check_values(y, TS_U8, TS_SHAPE(1, 1, oh, oh), want, NULL, "QLinearConv at a new size");
    }
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

/* x -> Q -> DQ -> GlobalAveragePool -> Q -> DQ -> Flatten -> Q -> DQ -> y, the parameters
 * initializers: the load fuses DQ -> GlobalAveragePool -> Q into ORT's QLinearGlobalAveragePool
 * (src/onnx/rewrite_qdq.c) and drops the DQ / Q pair around Flatten (of one scale and zero point);
 * y is checked against MLAS's formula (int32 channel sums, float32 requantization). With
 * mixed the pool's Q has another 8-bit type than its DQ: the pool does not fuse (ORT's rule); with
 * flat_other the Q after Flatten has another scale: that pair stays. */
static int count_graph_op(ts_module *m, const char *op) {
    const tso_graph *g = ((tso_model *)m)->graph;
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) k += !strcmp(g->nodes[i].op_type, op);
    return k;
}

static void test_qdq_global_pool(ts_device dev, bool s8, bool mixed, bool flat_other) {
    ts_scope_begin();
    enum { C = 5, H = 3, W = 4 };
    const float s0 = 0.05f, s1 = 0.0125f;
    const int32_t z0 = s8 ? -3 : 120, z1 = s8 ? 7 : 60;
    model *b = model_new("QuantizeLinear", "", 13, "x s0 z0", "q0");
    b->g.n_input = 1;                 /* x alone: the parameters are initializers */
    b->g.output[0]->name = text("y"); /* the last node's output */
    add_node(b, "DequantizeLinear", "", "q0 s0 z0", "d0");
    add_node(b, "GlobalAveragePool", "", "d0", "p");
    add_node(b, "QuantizeLinear", "", "p s1 z1", "q1");
    add_node(b, "DequantizeLinear", "", "q1 s1 z1", "d1");
    add_node(b, "Flatten", "", "d1", "f");
    add_node(b, "QuantizeLinear", "", flat_other ? "f s2 z1" : "f s1 z1", "q2");
    add_node(b, "DequantizeLinear", "", flat_other ? "q2 s2 z1" : "q2 s1 z1", "y");
    init_f32(b, "s0", 1, &s0);
    init_8bit(b, "z0", s8, 1, &z0);
    init_f32(b, "s1", 1, &s1);
    init_8bit(b, "z1", s8 != mixed, 1, &z1);
    const float s2 = s1 * 1.5f;
    if (flat_other) init_f32(b, "s2", 1, &s2);
    ts_module *m = load(b, dev);
    CHECK(m != NULL);
    if (!m) {
        model_free();
        ts_scope_end();
        return;
    }
    CHECK_EQ(count_graph_op(m, "QDQGlobalAveragePool"), mixed ? 0 : 1);
    CHECK_EQ(count_graph_op(m, "GlobalAveragePool"), mixed ? 1 : 0);
    CHECK_EQ(count_graph_op(m, "DequantizeLinear"),
             (mixed ? 2 : 1) + flat_other); /* mixed: d0 and y */
    float x[2 * C * H * W];
    for (int i = 0; i < 2 * C * H * W; i++) x[i] = (float)(next_value() * 8.0);
    x[3] = 1e9f, x[4] = -1e9f; /* saturating bytes */
    ts_tensor *y = NULL;
    CHECK(run(m, 1, (ts_tensor *[]){tensor(dev, TS_F32, TS_SHAPE(2, C, H, W), x)}, 1, &y));
    if (!mixed && !flat_other) {
        const int lo = s8 ? -128 : 0, hi = s8 ? 127 : 255;
        double want[2 * C];
        const float scale = s0 / (s1 * (float)(H * W));
        for (int nc = 0; nc < 2 * C; nc++) {
            int64_t acc = 0;
            for (int p = 0; p < H * W; p++) {
                double q = rint((double)(x[nc * H * W + p] / s0)) + z0;
                acc += (int64_t)(q < lo ? lo : q > hi ? hi : q) - z0;
            }
            double v = rint((double)((float)acc * scale)) + z1;
            v = v < lo ? lo : v > hi ? hi : v;
            want[nc] = (double)((float)(v - z1) * s1);
        }
        check_values(y, TS_F32, TS_SHAPE(2, C), want, NULL, "QDQ GlobalAveragePool");
    }
    ts_module_free(m);
    model_free();
    ts_scope_end();
}

/* ------------------------------------------------------------------ errors */
static void test_load_errors(void) {
    model *b = model_new("ConvInteger", "", 10, "x w", "y");
    a_str(b, "auto_pad", "SAME_MIDDLE");
    refused(b, TS_ERR_UNSUPPORTED, "auto_pad 'SAME_MIDDLE'");
}

static void test_run_errors(ts_device dev) {
    ts_scope_begin();
    ts_opts f32 = {.device = dev}, u8 = {.dtype = TS_U8, .device = dev};
    ts_tensor *in[4] = {0};
    /* QLinearMatMul: a_zero_point of the wrong length; y_scale per row; float a */
    ts_tensor *q[8] = {ts_zeros(TS_SHAPE(2, 3), u8),
                       ts_scalar(1, f32),
                       ts_zeros(TS_SHAPE(3), u8),
                       ts_zeros(TS_SHAPE(3, 2), u8),
                       ts_scalar(1, f32),
                       ts_zeros(TS_SHAPE(), u8),
                       ts_scalar(1, f32),
                       ts_zeros(TS_SHAPE(), u8)};
    model *b = model_new("QLinearMatMul", "", 10, "a as az b bs bz ys yz", "y");
    fails(b, dev, 8, q, TS_ERR_SHAPE, "a_zero_point");
    q[2] = ts_zeros(TS_SHAPE(), u8), q[6] = ts_ones(TS_SHAPE(2), f32);
    b = model_new("QLinearMatMul", "", 10, "a as az b bs bz ys yz", "y");
    fails(b, dev, 8, q, TS_ERR_UNSUPPORTED, "y_scale must be one value");
    q[6] = ts_scalar(1, f32), q[0] = ts_zeros(TS_SHAPE(2, 3), f32);
    b = model_new("QLinearMatMul", "", 10, "a as az b bs bz ys yz", "y");
    fails(b, dev, 8, q, TS_ERR_DTYPE, "a must be uint8");
    /* a zero point and a scale of a's rank but not its per-row form [2, 1] */
    in[0] = ts_zeros(TS_SHAPE(2, 3), u8), in[1] = ts_zeros(TS_SHAPE(3, 2), u8);
    in[2] = ts_zeros(TS_SHAPE(2, 3), u8);
    b = model_new("MatMulInteger", "", 10, "a b az", "y");
    fails(b, dev, 3, in, TS_ERR_SHAPE, "a_zero_point uint8 [2, 3] on");
    q[0] = ts_zeros(TS_SHAPE(2, 3), u8), q[1] = ts_ones(TS_SHAPE(2, 3), f32);
    b = model_new("QLinearMatMul", "", 10, "a as az b bs bz ys yz", "y");
    fails(b, dev, 8, q, TS_ERR_SHAPE, "a_scale float32 [2, 3] on");
    /* ConvInteger: a weight of another rank */
    b = model_new("ConvInteger", "", 10, "x w", "y");
    in[0] = ts_zeros(TS_SHAPE(1, 1, 4, 4), u8), in[1] = ts_zeros(TS_SHAPE(1, 1, 2), u8);
    fails(b, dev, 2, in, TS_ERR_SHAPE, "expected x [N, C, D1, ...]");
    /* a 3-D ConvInteger: the integer path runs 1-D and 2-D convolutions, and says so */
    b = model_new("ConvInteger", "", 10, "x w", "y");
    in[0] = ts_zeros(TS_SHAPE(1, 1, 2, 2, 2), u8), in[1] = ts_zeros(TS_SHAPE(1, 1, 1, 1, 1), u8);
    fails(b, dev, 2, in, TS_ERR_UNSUPPORTED, "kernel_shape: 3 spatial dims");
    ts_scope_end();
}

/* every case on one device */
static void on_device(ts_device dev) {
    test_matmul_integer(dev);
    test_qlinear_matmul(dev);
    test_qlinear_conv(dev, false);
    test_qlinear_conv(dev, true);
    test_qlinear_conv_shapes(dev);
    test_qdq_global_pool(dev, false, false, false);
    test_qdq_global_pool(dev, true, false, false);
    test_qdq_global_pool(dev, false, true, false);
    test_qdq_global_pool(dev, false, false, true);
    test_run_errors(dev);
}

int main(void) { return op_test_main(test_load_errors, on_device); }
#endif
