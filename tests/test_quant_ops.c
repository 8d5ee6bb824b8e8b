/* test_quant_ops.c — quantized pooling, add, cat, reshape, tensors made from integers and the
 * observers' qparams (include/tessera/quant.h) against references written here: max pooling as
 * an integer max over the in-bounds taps, adaptive average pooling as PyTorch's NCHW formula,
 * add / cat as dequantize (float32) -> float op -> quantize, calculate_qparams against values
 * worked by hand (ties included: round half to even). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/quant.h"
#include "ts_test.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static int64_t rnd(int64_t lo, int64_t hi) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int64_t)(rng % (uint64_t)(hi - lo + 1));
}

static ts_tensor *qu8(ts_shape s, const uint8_t *v, double scale, int64_t zp) {
    return ts_make_per_tensor_quantized_tensor(ts_from_data(s, TS_U8, v, (ts_opts){0}), scale, zp);
}

/* qint8 [2, 2] of {-128, 0, 5, 127} per channel along axis: scales {0.5, 0.25}, zero points
 * {0, 1} */
static ts_tensor *qi8_per_channel(int axis) {
    const int8_t w[4] = {-128, 0, 5, 127};
    return ts_make_per_channel_quantized_tensor(
        ts_from_data(TS_SHAPE(2, 2), TS_I8, w, (ts_opts){0}),
        ts_tensor_f64(TS_SHAPE(2), (double[]){0.5, 0.25}, (ts_opts){0}),
        ts_tensor_i64(TS_SHAPE(2), (int64_t[]){0, 1}, (ts_opts){0}), axis);
}

static void host_u8(ts_tensor *q, uint8_t *out, size_t n) {
    ts_copy_to_host(ts_int_repr(q), out, n);
}

/* uint8 and int8 (the byte kernel compares int8 with the top bit flipped); W = 37: the byte
 * kernel's vector loops with tails */
static void test_max_pool_dtype(bool sgn) {
    ts_scope_begin();
    enum { P = 6, H = 7, W = 37 };
    uint8_t x[P * H * W], y[P * H * W];
    for (int i = 0; i < P * H * W; i++) x[i] = (uint8_t)rnd(0, 255);
    x[3] = x[4] = 0x80, x[5] = 0x7f, x[6] = 0; /* int8's extremes, ties */
    ts_tensor *q = sgn ? ts_make_per_tensor_quantized_tensor(
                             ts_from_data(TS_SHAPE(2, 3, H, W), TS_I8, x, (ts_opts){0}), 0.05, 17)
                       : qu8(TS_SHAPE(2, 3, H, W), x, 0.05, 17);
    const int64_t cfg[][7] = {/* kh kw sh sw ph pw ceil */
                              {3, 3, 2, 2, 1, 1, 0}, {3, 3, 2, 2, 1, 1, 1}, {2, 3, 1, 2, 0, 1, 1},
                              {3, 2, 3, 3, 0, 0, 1}, {2, 2, 2, 2, 1, 1, 1}, {3, 3, 1, 1, 1, 1, 0},
                              {1, 4, 1, 3, 0, 2, 1}};
    int bad = 0;
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        const int64_t *k = cfg[c], dil[2] = {1 + (int64_t)(c == 2), 1};
        ts_tensor *r = ts_quantized_max_pool2d(q, k, k + 2, k + 4, dil, k[6] != 0);
        CHECK(r != NULL);
        if (!r) continue;
        const int64_t OH = ts_shape_of(r).dims[2], OW = ts_shape_of(r).dims[3];
        /* PyTorch's output size: floor or ceil, the last window starting inside input + pad */
        for (int d = 0; d < 2; d++) {
            const int64_t in = d ? W : H, span = in + 2 * k[4 + d] - dil[d] * (k[d] - 1) - 1;
            int64_t o = (span + (k[6] ? k[2 + d] - 1 : 0)) / k[2 + d] + 1;
            if (k[6] && (o - 1) * k[2 + d] >= in + k[4 + d]) o--;
            bad += o != (d ? OW : OH);
        }
        int64_t zp = -1;
        ts_q_zero_point(r, &zp);
        bad += zp != 17 || ts_q_scale(r) != 0.05;
        host_u8(r, y, (size_t)(P * OH * OW));
        for (int p = 0; p < P; p++)
            for (int64_t oy = 0; oy < OH; oy++)
                for (int64_t ox = 0; ox < OW; ox++) {
                    int m = -1000;
                    for (int64_t i = 0; i < k[0]; i++)
                        for (int64_t j = 0; j < k[1]; j++) {
                            const int64_t yy = oy * k[2] - k[4] + i * dil[0],
                                          xx = ox * k[3] - k[5] + j * dil[1];
                            if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
                            const uint8_t b = x[(p * H + yy) * W + xx];
                            const int v = sgn ? (int8_t)b : b;
                            m = v > m ? v : m;
                        }
                    const uint8_t b = y[(p * OH + oy) * OW + ox];
                    bad += (sgn ? (int8_t)b : b) != m;
                }
    }
    CHECK_EQ(bad, 0);
    CHECK(!ts_quantized_max_pool2d(q, (int64_t[2]){2, 2}, (int64_t[2]){1, 1}, (int64_t[2]){2, 0},
                                   (int64_t[2]){1, 1}, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantized_max_pool2d: kernel_size (2)");
    CHECK_OK();
    ts_scope_end();
}

static void test_max_pool(void) {
    test_max_pool_dtype(false);
    test_max_pool_dtype(true);
}

static void test_adaptive_avg(void) {
    ts_scope_begin();
    enum { P = 4, H = 7, W = 9 };
    uint8_t x[P * H * W], y[P * H * W];
    for (int i = 0; i < P * H * W; i++) x[i] = (uint8_t)rnd(0, 255);
    /* a plane of ties: sums of 2 and 4 equal values + 1 */
    for (int i = 0; i < H * W; i++) x[i] = (uint8_t)(10 + (i % 2));
    ts_tensor *q = qu8(TS_SHAPE(P, H, W), x, 0.02, 3);
    const int64_t outs[][2] = {{1, 1}, {3, 4}, {2, 2}, {5, 6}, {7, 9}, {4, 8}};
    int bad = 0;
    for (size_t c = 0; c < sizeof outs / sizeof outs[0]; c++) {
        const int64_t OH = outs[c][0], OW = outs[c][1];
        ts_tensor *r = ts_quantized_adaptive_avg_pool2d(q, OH, OW);
        CHECK(r != NULL);
        if (!r) continue;
        bad += ts_shape_of(r).dims[1] != OH || ts_shape_of(r).dims[2] != OW;
        host_u8(r, y, (size_t)(P * OH * OW));
        for (int p = 0; p < P; p++)
            for (int64_t i = 0; i < OH; i++)
                for (int64_t j = 0; j < OW; j++) {
                    const int64_t h0 = i * H / OH, h1 = ((i + 1) * H + OH - 1) / OH,
                                  w0 = j * W / OW, w1 = ((j + 1) * W + OW - 1) / OW;
                    int64_t s = 0;
                    for (int64_t a = h0; a < h1; a++)
                        for (int64_t b = w0; b < w1; b++) s += x[(p * H + a) * W + b];
                    const float kr = (float)(1.0 / (double)((h1 - h0) * (w1 - w0)));
                    bad += y[(p * OH + i) * OW + j] != (uint8_t)nearbyintf((float)s * kr);
                }
    }
    CHECK_EQ(bad, 0);
    CHECK(!ts_quantized_adaptive_avg_pool2d(q, 0, 2));
    CHECK_ERR_HAS(TS_ERR_ARG, "output_size (0, 2)");
    CHECK_OK();
    ts_scope_end();
}

static int64_t qref(float v, double s, int64_t zp, int64_t lo, int64_t hi) {
    const float r = (float)zp + nearbyintf(v * (1.0f / (float)s));
    return r < lo ? lo : r > hi ? hi : (int64_t)r;
}

static void test_add_cat(void) {
    ts_scope_begin();
    enum { N = 300 };
    uint8_t a[N], b[N], y[2 * N];
    for (int i = 0; i < N; i++) a[i] = (uint8_t)rnd(0, 255), b[i] = (uint8_t)rnd(0, 255);
    const double sa = 0.031, sb = 0.017, so = 0.045;
    const int64_t za = 120, zb = 7, zo = 60;
    ts_tensor *qa = qu8(TS_SHAPE(3, 100), a, sa, za), *qb = qu8(TS_SHAPE(3, 100), b, sb, zb);
    int bad = 0;
    for (int relu = 0; relu < 2; relu++) {
        ts_tensor *r = ts_quantized_add(qa, qb, so, zo, relu);
        CHECK(r != NULL);
        if (!r) continue;
        host_u8(r, y, N);
        for (int i = 0; i < N; i++) {
            float v = (float)sa * (float)(a[i] - za) + (float)sb * (float)(b[i] - zb);
            if (relu && v < 0) v = 0;
            bad += y[i] != qref(v, so, zo, 0, 255);
        }
    }
    ts_tensor *c = ts_quantized_cat((ts_tensor *[]){qa, qb}, 2, 0, so, zo);
    CHECK(c != NULL);
    if (c) {
        CHECK_EQ(ts_shape_of(c).dims[0], 6);
        host_u8(c, y, 2 * N);
        for (int i = 0; i < 2 * N; i++) {
            const float v =
                i < N ? (float)sa * (float)(a[i] - za) : (float)sb * (float)(b[i - N] - zb);
            bad += y[i] != qref(v, so, zo, 0, 255);
        }
    }
    CHECK_EQ(bad, 0);
    ts_tensor *q8 = ts_make_per_tensor_quantized_tensor(
        ts_zeros(TS_SHAPE(3, 100), (ts_opts){.dtype = TS_I8}), 0.1, 0);
    CHECK(!ts_quantized_add(qa, q8, 0.1, 0, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantized_add: input");
    CHECK(!ts_quantized_add(qa, qb, 0.1, 256, true));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantized_add_relu: output zero_point 256");
    CHECK(!ts_quantized_cat((ts_tensor *[]){qa, q8}, 2, 0, 0.1, 0));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "quantized_cat: tensors must have one dtype");
    CHECK_OK();
    ts_scope_end();
}

static void test_make_reshape(void) {
    ts_scope_begin();
    const uint8_t v[6] = {0, 1, 2, 250, 255, 7};
    ts_tensor *q = qu8(TS_SHAPE(2, 3), v, 0.5, 4);
    CHECK(q && ts_dtype_of(q) == TS_QUINT8);
    ts_tensor *r = ts_quantized_reshape(q, TS_SHAPE(3, 1, 2));
    CHECK(r && ts_shape_of(r).ndim == 3 && ts_q_scale(r) == 0.5);
    uint8_t got[6];
    host_u8(r, got, 6);
    CHECK(memcmp(got, v, 6) == 0);
    CHECK(!ts_quantized_reshape(q, TS_SHAPE(4)));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "quantized_reshape: shape");
    ts_tensor *pc = qi8_per_channel(0);
    CHECK(pc && ts_dtype_of(pc) == TS_QINT8 && ts_q_per_channel_axis(pc) == 0);
    float f[4];
    ts_copy_to_host(ts_dequantize(pc), f, sizeof f);
    CHECK(f[0] == -64.0f && f[1] == 0.0f && f[2] == 1.0f && f[3] == 31.5f);
    CHECK(!ts_make_per_tensor_quantized_tensor(ts_zeros(TS_SHAPE(2), (ts_opts){0}), 1, 0));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "input must be int8, uint8 or int32");
    CHECK(!ts_make_per_tensor_quantized_tensor(ts_zeros(TS_SHAPE(2), (ts_opts){.dtype = TS_U8}), 1,
                                               300));
    CHECK_ERR_HAS(TS_ERR_ARG, "zero_point 0 (300)");
    CHECK(!ts_quantized_reshape(pc, TS_SHAPE(4)));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "quantized per tensor");
    CHECK_OK();
    ts_scope_end();
}

/* ts_reshape / ts_flatten of a per-tensor quantized tensor (a quantized model's flatten after its
 * pool) give ts_quantized_reshape's result, -1 inferred; per channel keeps its error; ts_dropout
 * passes a quantized input through in eval mode and refuses it in training */
static void test_reshape_flatten_dropout(void) {
    ts_scope_begin();
    const uint8_t v[6] = {3, 1, 2, 250, 255, 7};
    ts_tensor *q = qu8(TS_SHAPE(2, 3, 1), v, 0.25, 9);
    ts_tensor *f = ts_flatten(q, 1, -1), *r = ts_reshape(q, TS_SHAPE(-1, 2));
    CHECK(f && ts_dtype_of(f) == TS_QUINT8 && ts_shape_of(f).ndim == 2 && ts_size(f, 1) == 3);
    CHECK(r && ts_shape_of(r).ndim == 2 && ts_size(r, 0) == 3 && ts_size(r, 1) == 2);
    int64_t zp = -1;
    CHECK(f && r && ts_q_scale(f) == 0.25 && ts_q_zero_point(r, &zp) == TS_OK && zp == 9);
    uint8_t got[6] = {0};
    host_u8(f, got, 6);
    CHECK(memcmp(got, v, 6) == 0);
    memset(got, 0, sizeof got);
    host_u8(r, got, 6);
    CHECK(memcmp(got, v, 6) == 0);
    CHECK(!ts_reshape(q, TS_SHAPE(4)));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "reshape");
    ts_tensor *pc = qi8_per_channel(0);
    CHECK(!ts_flatten(pc, 0, -1));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "quantized per tensor");
    ts_tensor *d = ts_dropout(q, 0.5, false);
    CHECK(d == q);
    CHECK(!ts_dropout(q, 0.5, true));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "dropout: a quantized input is passed through in eval mode only "
                                "(training with p 0.5: take ts_dequantize first; got");
    /* the NULL input keeps flatten's own message (the quantized route reads no NULL) */
    CHECK(!ts_flatten(NULL, 0, -1));
    CHECK_ERR_HAS(TS_ERR_ARG, "flatten: tensor");
    CHECK(ts_dropout(q, 0.0, true) == q);
    CHECK_OK();
    ts_scope_end();
}

/* ---- view ops on per-tensor quantized tensors: each gives the quantized tensor of the same view
 * of the integers (a contiguous copy with q's scale and zero point), checked byte for byte against
 * the view op on the plain uint8 tensor of those integers */
static ts_tensor *v_view(ts_tensor *t) { return ts_view(t, TS_SHAPE(4, 2, 3)); }
static ts_tensor *v_transpose(ts_tensor *t) { return ts_transpose(t, 1, 2); }
static ts_tensor *v_permute(ts_tensor *t) { return ts_permute(t, TS_DIMS(2, 0, 1)); }
static ts_tensor *v_narrow(ts_tensor *t) { return ts_narrow(t, 1, 1, 2); }
static ts_tensor *v_select(ts_tensor *t) { return ts_select(t, 2, 1); }
static ts_tensor *v_slice(ts_tensor *t) { return ts_slice(t, 1, 0, 4, 2); }
static ts_tensor *v_unsqueeze(ts_tensor *t) { return ts_unsqueeze(t, 1); }
static ts_tensor *v_squeeze(ts_tensor *t) { return ts_squeeze_dim(ts_narrow(t, 0, 1, 1), 0); }
static ts_tensor *v_expand(ts_tensor *t) {
    return ts_expand(ts_narrow(t, 2, 2, 1), TS_SHAPE(2, 4, 3));
}
static ts_tensor *v_t(ts_tensor *t) { return ts_t(ts_select(t, 0, 1)); }
static ts_tensor *v_movedim(ts_tensor *t) { return ts_movedim(t, TS_DIMS(0), TS_DIMS(2)); }
static ts_tensor *v_contiguous(ts_tensor *t) { return ts_contiguous(t); }
static ts_tensor *v_detach(ts_tensor *t) { return ts_detach(t); }
static ts_tensor *v_split(ts_tensor *t) {
    ts_tensor *o[3] = {0};
    return ts_split(t, 3, 1, o, 3) == 2 ? o[1] : NULL; /* the short piece */
}
static ts_tensor *v_chunk(ts_tensor *t) {
    ts_tensor *o[2] = {0};
    return ts_chunk(t, 2, 2, o, 2) == 2 ? o[0] : NULL;
}
static ts_tensor *v_unbind(ts_tensor *t) {
    ts_tensor *o[4] = {0};
    return ts_unbind(t, 1, o, 4) == 4 ? o[3] : NULL;
}

static bool same_shape(ts_tensor *a, ts_tensor *b) {
    const ts_shape x = ts_shape_of(a), y = ts_shape_of(b);
    if (x.ndim != y.ndim) return false;
    for (int i = 0; i < x.ndim; i++)
        if (x.dims[i] != y.dims[i]) return false;
    return true;
}

static void test_views(void) {
    ts_scope_begin();
    static ts_tensor *(*const ops[])(ts_tensor *) = {
        v_view,   v_transpose, v_permute, v_narrow,     v_select, v_slice, v_unsqueeze, v_squeeze,
        v_expand, v_t,         v_movedim, v_contiguous, v_detach, v_split, v_chunk,     v_unbind};
    static const char *const names[] = {
        "view",   "transpose", "permute", "narrow",     "select", "slice", "unsqueeze", "squeeze",
        "expand", "t",         "movedim", "contiguous", "detach", "split", "chunk",     "unbind"};
    uint8_t v[24];
    for (int i = 0; i < 24; i++) v[i] = (uint8_t)rnd(0, 255);
    ts_tensor *q = qu8(TS_SHAPE(2, 4, 3), v, 0.125, 17);
    ts_tensor *p = ts_from_data(TS_SHAPE(2, 4, 3), TS_U8, v, (ts_opts){0});
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        ts_tensor *r = ops[k](q), *e = ts_contiguous(ops[k](p));
        int64_t zp = -1;
        const bool ok = r && e && ts_dtype_of(r) == TS_QUINT8 && ts_q_scale(r) == 0.125 &&
                        ts_q_zero_point(r, &zp) == TS_OK && zp == 17 && same_shape(r, e) &&
                        ts_is_contiguous(r);
        uint8_t got[24] = {0}, want[24] = {1};
        const size_t n = e ? (size_t)ts_numel(e) : 0;
        if (ok) host_u8(r, got, n), ts_copy_to_host(e, want, n);
        if (!ok || memcmp(got, want, n) != 0) {
            fprintf(stderr, "view op %s on a quantized tensor: wrong result\n", names[k]);
            CHECK(false);
        }
    }
    /* a copy, not an alias: the input keeps its integers (no op writes a quantized tensor) */
    ts_tensor *tr = ts_transpose(q, 0, 2);
    CHECK(tr && ts_is_contiguous(tr) && ts_storage_offset(tr) == 0);
    uint8_t back[24];
    host_u8(q, back, 24);
    CHECK(memcmp(back, v, 24) == 0);
    /* detach of any scheme shares the tensor and its parameters */
    ts_tensor *pc = qi8_per_channel(1);
    ts_tensor *pd = ts_detach(pc), *pk = ts_contiguous(pc);
    CHECK(pd && ts_q_per_channel_axis(pd) == 1 && pk && ts_q_per_channel_axis(pk) == 1);
    float f[4] = {0};
    ts_copy_to_host(ts_dequantize(pd), f, sizeof f);
    CHECK(f[0] == -64.0f && f[1] == -0.25f && f[2] == 2.5f && f[3] == 31.5f);
    /* the other views of per-channel and packed int4 tensors refuse, naming the op */
    CHECK(!ts_transpose(pc, 0, 1));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "transpose: views of quantized tensors take qint8, quint8 or "
                                "qint32 quantized per tensor (input: qint8 [2, 2] on cpu, per "
                                "channel)");
    CHECK(!ts_select(pc, 0, 0));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "select: views of quantized tensors");
    ts_tensor *x4 = ts_rand(TS_SHAPE(2, 4), (ts_opts){0});
    ts_tensor *q4 =
        ts_quantize_per_group(x4, ts_full(TS_SHAPE(2, 2), 0.1, (ts_opts){0}),
                              ts_zeros(TS_SHAPE(2, 2), (ts_opts){.dtype = TS_I64}), 2, TS_QUINT4X2);
    CHECK(q4 && ts_detach(q4) && ts_q_group_size(ts_detach(q4)) == 2);
    CHECK(!ts_narrow(q4, 1, 0, 2));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "narrow: views of quantized tensors");
    CHECK(!ts_contiguous(q4));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "packed int4");
    /* channels_last would make a strided quantized tensor: refused (the quantized ops take NCHW) */
    CHECK(!ts_contiguous_format(ts_unsqueeze(q, 0), TS_CHANNELS_LAST));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED,
                  "contiguous: channels_last quantized tensors are not supported (tensor quint8 "
                  "[1, 2, 4, 3] on cpu)");
    /* reading the integers as another dtype, or plain bytes as quantized, has no parameters */
    CHECK(!ts_view_dtype(q, TS_U8));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "view: cannot view quint8 [2, 4, 3] on cpu as uint8");
    CHECK(!ts_view_dtype(p, TS_QUINT8));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "as quint8: a quantized tensor's integers");
    CHECK(ts_view_dtype(q, TS_QUINT8) != NULL);
    CHECK_OK();
    ts_scope_end();
}

/* ts_quantized_mean (and ts_mean / ts_mean_dim / ts_mean_dims on a quantized tensor): with a
 * power-of-two scale every float32 step is exact, so the result is zp + nearbyint(sum(q - zp) /
 * count) with ties to even, clamped: worked here in integers */
static int64_t mean_ref(const uint8_t *v, const int64_t *idx, int n, int64_t zp) {
    int64_t s = 0;
    for (int i = 0; i < n; i++) s += (int64_t)v[idx[i]] - zp;
    const double m = (double)s / n;
    double r = nearbyint(m); /* the test runs in the default rounding mode: ties to even */
    r += (double)zp;
    return r < 0 ? 0 : r > 255 ? 255 : (int64_t)r;
}

static void test_mean(void) {
    ts_scope_begin();
    uint8_t v[24];
    for (int i = 0; i < 24; i++) v[i] = (uint8_t)rnd(0, 255);
    v[0] = 3, v[1] = 4, v[2] = 6, v[3] = 8; /* channel 0: (1 + 2 + 4 + 6) / 4 = 3.25 */
    const int64_t zp = 2;
    ts_tensor *q = qu8(TS_SHAPE(2, 3, 2, 2), v, 0.25, zp);
    /* over the last two dims (ShuffleNetV2's global pool), keepdim both ways */
    for (int keep = 0; keep < 2; keep++) {
        ts_tensor *m = ts_mean_dims(q, TS_DIMS(2, 3), keep);
        CHECK(m && ts_dtype_of(m) == TS_QUINT8 && ts_q_scale(m) == 0.25);
        CHECK(m && ts_shape_of(m).ndim == (keep ? 4 : 2) && ts_numel(m) == 6);
        uint8_t got[6] = {0};
        if (m) host_u8(m, got, 6);
        for (int c = 0; c < 6; c++) {
            const int64_t idx[4] = {4 * c, 4 * c + 1, 4 * c + 2, 4 * c + 3};
            CHECK_EQ((int64_t)got[c], mean_ref(v, idx, 4, zp));
        }
    }
    /* the first dim: the mean of the two images, element by element */
    ts_tensor *m0 = ts_mean_dim(q, 0, false);
    uint8_t g0[12] = {0};
    if (m0) host_u8(m0, g0, 12);
    CHECK(m0 && ts_shape_of(m0).ndim == 3);
    for (int i = 0; i < 12; i++) {
        const int64_t idx[2] = {i, 12 + i};
        CHECK_EQ((int64_t)g0[i], mean_ref(v, idx, 2, zp));
    }
    /* one dim in the middle, and every element */
    ts_tensor *m1 = ts_mean_dim(q, 1, false), *ma = ts_mean(q);
    uint8_t g1[8] = {0}, ga = 0;
    if (m1) host_u8(m1, g1, 8);
    if (ma) host_u8(ma, &ga, 1);
    CHECK(m1 && ts_shape_of(m1).ndim == 3 && ma && ts_shape_of(ma).ndim == 0);
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 4; k++) {
            const int64_t idx[3] = {12 * b + k, 12 * b + 4 + k, 12 * b + 8 + k};
            CHECK_EQ((int64_t)g1[4 * b + k], mean_ref(v, idx, 3, zp));
        }
    int64_t all[24];
    for (int i = 0; i < 24; i++) all[i] = i;
    CHECK_EQ((int64_t)ga, mean_ref(v, all, 24, zp));
    /* a tie: q = {2, 3, 2, 3}, zp 2: (0 + 1 + 0 + 1) / 4 = 0.5 rounds to even */
    const uint8_t t[4] = {2, 3, 2, 3};
    ts_tensor *mt = ts_mean(qu8(TS_SHAPE(4), t, 0.25, zp));
    uint8_t gt = 9;
    if (mt) host_u8(mt, &gt, 1);
    CHECK_EQ((int)gt, 2); /* zp + nearbyint(0.5) = 2 + 0 */
    /* refusals: per channel, empty, a bad dim */
    ts_tensor *pc = qi8_per_channel(0);
    CHECK(!ts_mean_dim(pc, 1, false));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "quantized_mean: input must be qint8, quint8 or qint32 quantized "
                                "per tensor (got qint8 [2, 2] on cpu");
    CHECK(!ts_mean(qu8(TS_SHAPE(0), t, 0.25, zp)));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantized_mean: input quint8 [0] on cpu is empty");
    CHECK(!ts_mean_dim(q, 4, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantized_mean: dimension out of range");
    CHECK_OK();
    ts_scope_end();
}

/* ts_quantized_mul at hand-worked values: the exact product, one float32 multiply, ties to even,
 * broadcast, relu and the range's ends */
static void test_mul(void) {
    ts_scope_begin();
    const uint8_t av[4] = {10, 20, 0, 11}, bv[1] = {14}, t[4] = {11, 13, 12, 10};
    ts_tensor *a = qu8(TS_SHAPE(4), av, 0.5, 10), *b = qu8(TS_SHAPE(1), bv, 0.25, 10);
    /* m = 0.5 * 0.25 / 0.125 = 1: (a - 10) * 4 + 5 = {5, 45, -35 -> 0, 9} */
    uint8_t got[4] = {0};
    host_u8(ts_quantized_mul(a, b, 0.125, 5, false), got, 4);
    CHECK(got[0] == 5 && got[1] == 45 && got[2] == 0 && got[3] == 9);
    host_u8(ts_quantized_mul(a, b, 0.125, 5, true), got, 4); /* relu: at least the zero point */
    CHECK(got[0] == 5 && got[1] == 45 && got[2] == 5 && got[3] == 9);
    /* m = 0.5: c = {1, 3, 2, 0} * 0.5 = {0.5, 1.5, 1, 0} -> {0, 2, 1, 0} (ties to even) */
    ts_tensor *ta = qu8(TS_SHAPE(4), t, 0.5, 10),
              *one = qu8(TS_SHAPE(1), (uint8_t[]){11}, 0.25, 10);
    host_u8(ts_quantized_mul(ta, one, 0.25, 0, false), got, 4);
    CHECK(got[0] == 0 && got[1] == 2 && got[2] == 1 && got[3] == 0);
    ts_tensor *q32 = ts_quantize_per_tensor(ts_ones(TS_SHAPE(2), (ts_opts){0}), 1, 0, TS_QINT32);
    CHECK(!ts_quantized_mul(q32, q32, 1, 0, false));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "quantized_mul: input qint32 [2] on cpu and other qint32 [2] on "
                                "cpu must have one dtype, qint8 or quint8");
    if (!ts_device_count(TS_SIM)) ts_sim_configure(1, 0);
    ts_tensor *bs = ts_make_per_tensor_quantized_tensor(
        ts_from_data(TS_SHAPE(1), TS_U8, bv, (ts_opts){.device = {TS_SIM, 0}}), 0.25, 10);
    CHECK(bs && !ts_quantized_mul(a, bs, 0.125, 5, false)); /* cpu and sim:0 */
    CHECK_ERR_HAS(TS_ERR_DEVICE, "quantized_mul");
    CHECK(!ts_quantized_mul(a, b, 0, 5, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantized_mul");
    CHECK(!ts_quantized_mul(a, ts_dequantize(b), 1, 0, true));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "quantized_mul_relu: other must be qint8, quint8 or qint32 "
                                "quantized per tensor");
    CHECK_OK();
    ts_scope_end();
}

/* ts_quantized_avg_pool2d on a 3x3 plane of 0..8, zero point 1: sums of q - 1 over the windows,
 * divided by 9 (padding counted), by the elements (not counted) or by an override */
static void test_avg_pool(void) {
    ts_scope_begin();
    uint8_t v[9];
    for (int i = 0; i < 9; i++) v[i] = (uint8_t)i;
    ts_tensor *q = qu8(TS_SHAPE(1, 1, 3, 3), v, 0.5, 1);
    const int64_t k[2] = {3, 3}, s1[2] = {1, 1}, p1[2] = {1, 1};
    uint8_t got[9] = {0};
    /* corner (0, 0): 0 + 1 + 3 + 4 - 4 = 4; centre: 36 - 9 = 27; edge (0, 1): 0..5 less 6 = 9 */
    ts_tensor *y = ts_quantized_avg_pool2d(q, k, s1, p1, false, true, 0);
    CHECK(y && ts_size(y, 2) == 3 && ts_q_scale(y) == 0.5);
    if (y) host_u8(y, got, 9);
    CHECK(got[0] == 1 + 0 && got[4] == 1 + 3 && got[1] == 1 + 1); /* 4/9, 27/9, 9/9 */
    if ((y = ts_quantized_avg_pool2d(q, k, s1, p1, false, false, 0))) host_u8(y, got, 9);
    CHECK(got[0] == 1 + 1 && got[4] == 1 + 3 && got[1] == 1 + 2); /* 4/4, 27/9, 9/6 = 1.5 */
    if ((y = ts_quantized_avg_pool2d(q, k, s1, p1, false, true, 2))) host_u8(y, got, 9);
    CHECK(got[0] == 1 + 2 && got[4] == 1 + 14 && got[1] == 1 + 4); /* 4/2, 13.5, 4.5: even */
    /* stride 2, no padding, ceil mode: a second window of one column and row */
    const int64_t k2[2] = {2, 2}, s2[2] = {2, 2}, p0[2] = {0, 0};
    y = ts_quantized_avg_pool2d(q, k2, s2, p0, true, true, 0);
    CHECK(y && ts_size(y, 2) == 2 && ts_size(y, 3) == 2);
    if (y) host_u8(y, got, 4);
    /* (0+1+3+4-4)/4 = 1, (2+5-2)/2 = 2.5 -> 2, (6+7-2)/2 = 5.5 -> 6, (8-1)/1 = 7 */
    CHECK(got[0] == 2 && got[1] == 3 && got[2] == 7 && got[3] == 8);
    /* a 1x1 output (k 3, no padding), and qint32 below zero: the clamp is int32's, not 0 */
    if ((y = ts_quantized_avg_pool2d(q, k, s1, p0, false, true, 0))) host_u8(y, got, 1);
    CHECK(y && ts_size(y, 2) == 1 && ts_size(y, 3) == 1 && got[0] == 1 + 3);
    ts_tensor *q32 = ts_quantize_per_tensor(
        ts_tensor_f32(TS_SHAPE(1, 1, 2, 2), (float[]){-4, -8, -12, -16}, (ts_opts){0}), 1, 0,
        TS_QINT32);
    const int64_t kk[2] = {2, 2};
    ts_tensor *y32 = ts_quantized_avg_pool2d(q32, kk, kk, p0, false, true, 0);
    int32_t g32 = 0;
    if (y32) ts_copy_to_host(ts_int_repr(y32), &g32, sizeof g32);
    CHECK_EQ(g32, -10);
    CHECK(!ts_quantized_avg_pool2d(q, k, s1, NULL, false, true, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantized_avg_pool2d: kernel, stride or padding is NULL");
    const int64_t s0[2] = {1, 0};
    CHECK(!ts_quantized_avg_pool2d(q, k, s0, p1, false, true, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "and stride (0) must be >= 1");
    const int64_t pbig[2] = {2, 2};
    CHECK(!ts_quantized_avg_pool2d(q, k, s1, pbig, false, true, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantized_avg_pool2d: kernel_size (3) and stride (1) must be >= 1 "
                              "and padding (2) between 0 and half the kernel");
    const int64_t k4[2] = {4, 4};
    CHECK(!ts_quantized_avg_pool2d(q, k4, s1, p0, false, true, 0)); /* a 4x4 window over 3x3 */
    CHECK_ERR_HAS(TS_ERR_SHAPE, "quantized_avg_pool2d: the output of input quint8 [1, 1, 3, 3] on "
                                "cpu would be empty");
    CHECK(!ts_quantized_avg_pool2d(q, k, s1, p1, false, true, -1));
    CHECK_ERR_HAS(TS_ERR_ARG, "divisor_override must be positive, but got -1");
    CHECK(!ts_quantized_avg_pool2d(ts_dequantize(q), k, s1, p1, false, true, 0));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "quantized_avg_pool2d: input must be");
    CHECK_OK();
    ts_scope_end();
}

/* hardsigmoid's fixed output parameters per dtype, and hardswish's given ones */
static void test_hard_activations(void) {
    ts_scope_begin();
    ts_tensor *x = ts_tensor_f32(TS_SHAPE(4), (float[]){-4.0f, -1.5f, 0.0f, 3.5f}, (ts_opts){0});
    const ts_dtype dts[3] = {TS_QUINT8, TS_QINT8, TS_QINT32};
    const double scales[3] = {0x1p-8, 0x1p-8, 0x1p-32};
    const int64_t zps[3] = {0, -128, 0};
    for (int i = 0; i < 3; i++) {
        ts_tensor *q = ts_quantize_per_tensor(x, 0.5, i == 0 ? 8 : 0, dts[i]); /* x exact */
        ts_tensor *h = ts_quantized_hardsigmoid(q);
        int64_t zp = 99;
        CHECK(h && ts_dtype_of(h) == dts[i] && ts_q_scale(h) == scales[i] &&
              ts_q_zero_point(h, &zp) == TS_OK && zp == zps[i]);
        float f[4] = {0};
        if (h) ts_copy_to_host(ts_dequantize(h), f, sizeof f);
        /* x = {-4, -1.5, 0, 3.5}: hardsigmoid {0, 0.25, 0.5, 1}, each a multiple of the scale;
         * 1 is past the 8-bit ranges' top (255 / 256) and qint32's 2^-32 scale stops below 0.5
         * (PyTorch's parameters: the same), which float32 dequantizes to 0.5 */
        const float top = i == 2 ? 0.5f : 255.0f / 256;
        CHECK(f[0] == 0.0f && f[1] == 0.25f && f[2] == 0.5f && f[3] == top);
    }
    ts_tensor *q = ts_quantize_per_tensor(x, 0.5, 0, TS_QINT8);
    ts_tensor *hs = ts_quantized_hardswish(q, 0.25, 2);
    float f[4] = {0};
    if (hs) ts_copy_to_host(ts_dequantize(hs), f, sizeof f);
    /* hardswish {-0, -0.375, 0, 3.5}: -0.375 / 0.25 = -1.5 -> -2 (even) */
    CHECK(hs && f[0] == 0.0f && f[1] == -0.5f && f[2] == 0.0f && f[3] == 3.5f);
    CHECK(!ts_quantized_hardswish(q, -1, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantized_hardswish: output scale must be positive, finite and a "
                              "normal float32 (got -1)");
    CHECK(!ts_quantized_hardswish(q, 0.25, 200)); /* past qint8 */
    CHECK_ERR_HAS(TS_ERR_ARG, "quantized_hardswish: output zero_point 200 is outside [-128, 127]");
    CHECK(!ts_quantized_hardsigmoid(x));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "quantized_hardsigmoid: input must be");
    CHECK_OK();
    ts_scope_end();
}

/* ts_to of quantized tensors: cpu -> sim:0 -> cpu keeps the integers and the parameters (per
 * tensor and per channel), the sim copy dequantizes to the cpu's values, int4 is refused */
static void test_device_moves(void) {
    ts_scope_begin();
    if (!ts_device_count(TS_SIM)) ts_sim_configure(1, 0);
    const ts_device sim = {TS_SIM, 0}, cpu = {TS_CPU, 0};
    uint8_t v[12];
    for (int i = 0; i < 12; i++) v[i] = (uint8_t)rnd(0, 255);
    ts_tensor *q = qu8(TS_SHAPE(3, 4), v, 0.375, 11);
    ts_tensor *qs = ts_to(q, sim), *back = qs ? ts_to(qs, cpu) : NULL;
    int64_t zp = -1;
    CHECK(qs && ts_device_of(qs).type == TS_SIM && ts_q_scale(qs) == 0.375 &&
          ts_q_zero_point(qs, &zp) == TS_OK && zp == 11);
    uint8_t got[12] = {0};
    if (back) host_u8(back, got, 12);
    CHECK(back && memcmp(got, v, 12) == 0);
    float a[12] = {0}, b[12] = {1};
    if (qs) ts_copy_to_host(ts_dequantize(qs), a, sizeof a);
    ts_copy_to_host(ts_dequantize(q), b, sizeof b);
    CHECK(memcmp(a, b, sizeof a) == 0);
    ts_tensor *pc = ts_quantize_per_channel(
        ts_rand(TS_SHAPE(2, 3), (ts_opts){0}),
        ts_tensor_f64(TS_SHAPE(2), (double[]){0.1, 0.2}, (ts_opts){0}),
        ts_tensor_i64(TS_SHAPE(2), (int64_t[]){0, 3}, (ts_opts){0}), 0, TS_QINT8);
    ts_tensor *pcs = ts_to(pc, sim);
    CHECK(pcs && ts_q_per_channel_axis(pcs) == 0 && ts_qscheme_of(pcs) == TS_PER_CHANNEL_AFFINE);
    float c[6] = {0}, d[6] = {1};
    if (pcs) ts_copy_to_host(ts_dequantize(pcs), c, sizeof c);
    ts_copy_to_host(ts_dequantize(pc), d, sizeof d);
    CHECK(memcmp(c, d, sizeof c) == 0);
    ts_tensor *q4 = ts_quantize_per_group(
        ts_rand(TS_SHAPE(2, 4), (ts_opts){0}), ts_full(TS_SHAPE(2, 2), 0.1, (ts_opts){0}),
        ts_zeros(TS_SHAPE(2, 2), (ts_opts){.dtype = TS_I64}), 2, TS_QUINT4X2);
    CHECK(q4 && !ts_to(q4, sim));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED,
                  "to: packed int4 tensors (quint4x2 [2, 4] on cpu) do not move "
                  "between devices");
    CHECK_OK();
    ts_scope_end();
}

/* one (min, max) pair through ts_calculate_qparams */
static void qp(float mn, float mx, int64_t qmin, int64_t qmax, bool sym, int64_t szp, float *s,
               int64_t *z) {
    ts_tensor *sc = NULL, *zp = NULL;
    ts_tensor *a = ts_full(TS_SHAPE(), mn, (ts_opts){0}),
              *b = ts_full(TS_SHAPE(), mx, (ts_opts){0});
    *s = NAN, *z = -999;
    if (ts_calculate_qparams(a, b, qmin, qmax, sym, szp, 1.1920928955078125e-07, &sc, &zp) ==
        TS_OK) {
        ts_copy_to_host(sc, s, sizeof *s);
        ts_copy_to_host(zp, z, sizeof *z);
    }
}

static void test_qparams(void) {
    ts_scope_begin();
    float s;
    int64_t z;
    qp(-1.0f, 3.0f, 0, 255, false, 0, &s, &z); /* 4 / 255, zp round(63.75) = 64 */
    CHECK(s == 4.0f / 255.0f && z == 64);
    qp(-1.25f, 126.25f, 0, 255, false, 0, &s, &z); /* scale 0.5 exactly; 1.25 / 0.5 = 2.5 -> 2 */
    CHECK(s == 0.5f && z == 2);
    qp(-3.25f, 124.25f, 0, 255, false, 0, &s, &z); /* 6.5 -> 6 */
    CHECK(s == 0.5f && z == 6);
    qp(-2.0f, 1.0f, -128, 127, true, 0, &s, &z); /* 2 / 127.5 */
    CHECK(s == 2.0f / 127.5f && z == 0);
    qp(-2.0f, 1.0f, 0, 127, true, 128, &s, &z); /* reduce_range quint8 symmetric: 2 / 63.5 */
    CHECK(s == 2.0f / 63.5f && z == 128);
    qp(0.0f, 0.0f, 0, 255, false, 0, &s, &z); /* eps */
    CHECK(s == 1.1920928955078125e-07f && z == 0);
    qp(2.0f, 5.0f, -64, 63, false, 0, &s, &z); /* min widened to 0: zp = qmin */
    CHECK(s == 5.0f / 127.0f && z == -64);
    qp(INFINITY, -INFINITY, 0, 255, false, 0, &s, &z); /* nothing observed */
    CHECK(s == 1.0f && z == 0);
    CHECK_OK();
    /* per channel */
    ts_tensor *sc = NULL, *zp = NULL;
    ts_tensor *mn = ts_tensor_f32(TS_SHAPE(3), (float[]){-1, -0.5f, 0}, (ts_opts){0});
    ts_tensor *mx = ts_tensor_f32(TS_SHAPE(3), (float[]){1, 2, 0.25f}, (ts_opts){0});
    CHECK_EQ(ts_calculate_qparams(mn, mx, -128, 127, true, 0, 1.1920928955078125e-07, &sc, &zp),
             TS_OK);
    float sv[3];
    ts_copy_to_host(sc, sv, sizeof sv);
    CHECK(sv[0] == 1.0f / 127.5f && sv[1] == 2.0f / 127.5f && sv[2] == 0.25f / 127.5f);
    CHECK(ts_calculate_qparams(mx, mn, 0, 255, false, 0, 1e-7, &sc, &zp) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "calculate_qparams: min_val 1 is not <= max_val -1, both finite "
                              "(element 0)");
    CHECK(ts_calculate_qparams(mn, mx, 5, 5, false, 0, 1e-7, &sc, &zp) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "quant_min 5 must be below");
    CHECK(ts_calculate_qparams(mn, mx, 0, 255, false, 0, 0.0, &sc, &zp) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "calculate_qparams: eps must be positive and finite (got 0)");
    CHECK(ts_calculate_qparams(mn, mx, 0, 255, false, 0, INFINITY, &sc, &zp) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "eps must be positive and finite (got inf)");
    /* fbgemm's rule takes no eps: the same range is fine there */
    CHECK_EQ(ts_choose_qparams_minmax(mn, mx, 0, 255, false, &sc, &zp), TS_OK);
    CHECK_OK();
    ts_scope_end();
}

/* ts_qlinear_add (ONNX Runtime's QLinearAdd) against C's fmaf, the single rounding the definition
 * asks for: ties (rates that put v on halves), saturation at both ends, int8 and uint8, a
 * one-value b; then the refusals */
static void test_qlinear_add(void) {
    ts_scope_begin();
    const float rates[][3] = {{0.5f, 0.25f, 0.125f}, {1.3f, 0.77f, -3.1f}, {3.0f, 2.5f, 100.5f}};
    int bad = 0;
    for (int sgn = 0; sgn < 2; sgn++)
        for (int r = 0; r < 3; r++)
            for (int bs = 0; bs < 2; bs++) {
                enum { N = 606 }; /* 8-lane vectors and a tail of 6 */
                unsigned char av[N], bv[N], got[N];
                for (int i = 0; i < N; i++)
                    av[i] = (unsigned char)(i * 7), bv[i] = (unsigned char)(i * 13 + 5);
                const ts_dtype dt = sgn ? TS_I8 : TS_U8;
                ts_tensor *a = ts_from_data(TS_SHAPE(2, 3, N / 6), dt, av, (ts_opts){0});
                ts_tensor *b = bs ? ts_from_data(TS_SHAPE(1), dt, bv + 9, (ts_opts){0})
                                  : ts_from_data(TS_SHAPE(2, 3, N / 6), dt, bv, (ts_opts){0});
                ts_tensor *y = ts_qlinear_add(a, b, rates[r][0], rates[r][1], rates[r][2]);
                CHECK(y && ts_dtype_of(y) == dt && ts_numel(y) == N);
                if (!y) continue;
                ts_copy_to_host(y, got, N);
                for (int i = 0; i < N; i++) {
                    const float x = sgn ? (float)(int8_t)av[i] : (float)av[i];
                    const unsigned char bb = bv[bs ? 9 : i];
                    const float z = sgn ? (float)(int8_t)bb : (float)bb;
                    float v = nearbyintf(fmaf(x, rates[r][0], fmaf(z, rates[r][1], rates[r][2])));
                    const float lo = sgn ? -128.0f : 0.0f, hi = sgn ? 127.0f : 255.0f;
                    v = v < lo ? lo : v > hi ? hi : v;
                    const int g = sgn ? (int)(int8_t)got[i] : (int)got[i];
                    bad += g != (int)v;
                }
            }
    CHECK_EQ(bad, 0);
    ts_tensor *u = ts_zeros(TS_SHAPE(4), (ts_opts){.dtype = TS_U8});
    CHECK(!ts_qlinear_add(u, ts_zeros(TS_SHAPE(4), (ts_opts){.dtype = TS_I8}), 1, 1, 0));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "qlinear_add: a and b must be both uint8 or both int8");
    CHECK(!ts_qlinear_add(u, ts_zeros(TS_SHAPE(3), (ts_opts){.dtype = TS_U8}), 1, 1, 0));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "must have a's shape");
    CHECK(!ts_qlinear_add(u, u, NAN, 1, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "finite");
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    test_qlinear_add();
    test_max_pool();
    test_adaptive_avg();
    test_add_cat();
    test_make_reshape();
    test_reshape_flatten_dropout();
    test_views();
    test_mean();
    test_mul();
    test_avg_pool();
    test_hard_activations();
    test_device_moves();
    test_qparams();
    return ts_test_finish();
}
