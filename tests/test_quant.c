/* test_quant.c — quantized tensors and the int8 linear layer (include/tessera/quant.h).
 *
 * References: PyTorch's rounding written out here (q = clamp(zp + nearbyint(x * (1.0f /
 * (float)s)))) at ties, ends and NaN, with values torch 2.x gave (the comments); the int8 products
 * against an int64 sum of (x - x_zp)(w - w_zp) bit for bit, on the portable kernel and on
 * AVX512-VNNI (the ISA switched inside the run); requantization against the float64 formula; the
 * gate: other ops refuse quantized tensors. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/qgemm_vnni.h"
#include "host_values.h"
#include "tessera/quant.h"
#include "tessera/reductions.h"
#include "ts_test.h"

static ts_tensor *f32(int64_t n, const float *v) {
    return ts_tensor_f32(TS_SHAPE(n), v, (ts_opts){0});
}

/* the integers of q as int64 (n <= 4096) */
static int64_t ivals[65536];
static int64_t *ints(ts_tensor *q) {
    static unsigned char buf[65536 * 4];
    ts_scope_begin();
    ts_tensor *r = ts_int_repr(q);
    int64_t n = ts_numel(r);
    ts_dtype dt = ts_dtype_of(r);
    if (!r || ts_copy_to_host(r, buf, sizeof buf) != TS_OK) n = 0;
    for (int64_t i = 0; i < n; i++)
        ivals[i] = dt == TS_I8   ? ((int8_t *)buf)[i]
                   : dt == TS_U8 ? ((uint8_t *)buf)[i]
                                 : ((int32_t *)buf)[i];
    ts_scope_end();
    return ivals;
}

static float fvals[65536];
static float *floats(ts_tensor *t) {
    if (!t || ts_copy_to_host(t, fvals, sizeof fvals) != TS_OK) memset(fvals, 0, sizeof fvals);
    return fvals;
}

/* the definition, in double where it is exact */
static int64_t ref_q(float x, double s, int64_t zp, int64_t lo, int64_t hi, bool q32) {
    const float t = x * (1.0f / (float)s);
    const double v = (double)(float)((float)zp + nearbyintf(t));
    if (isnan(v)) return q32 ? lo : hi;
    return v < lo ? lo : v > hi ? hi : (int64_t)v;
}

/* ------------------------------------------------------------------ rounding, ranges, zero point
 */
static void test_per_tensor(void) {
    ts_scope_begin();
    /* torch.quantize_per_tensor([0.5, 1.5, 2.5, -0.5, -1.5], 1.0, 0, qint8) = [0, 2, 2, 0, -2] */
    const float ties[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 3.5f, -2.5f};
    int64_t *v = ints(ts_quantize_per_tensor(f32(7, ties), 1.0, 0, TS_QINT8));
    const int64_t want_ties[] = {0, 2, 2, 0, -2, 4, -2};
    for (int i = 0; i < 7; i++) CHECK_EQ(v[i], want_ties[i]);
    /* the zero point is added: x = 1, scale 0.5, zp 3 -> 5; zp -5 -> -3 */
    const float one[] = {1.0f, -1.0f};
    v = ints(ts_quantize_per_tensor(f32(2, one), 0.5, 3, TS_QINT8));
    CHECK_EQ(v[0], 5);
    CHECK_EQ(v[1], 1);
    v = ints(ts_quantize_per_tensor(f32(2, one), 0.5, -5, TS_QINT8));
    CHECK_EQ(v[0], -3);
    /* ranges: torch gives qint8 [127, 127, -128] and quint8 [255, 255, 0] for [nan, inf, -inf];
     * qint32 [min, max, min, max] for [nan, 1e30, -1e30, 2.5e9] (scale 1, zp 3) */
    const float ends[] = {NAN, INFINITY, -INFINITY, 1000.0f, -1000.0f, 127.4f, 127.6f, -128.6f};
    v = ints(ts_quantize_per_tensor(f32(8, ends), 1.0, 0, TS_QINT8));
    const int64_t want8[] = {127, 127, -128, 127, -128, 127, 127, -128};
    for (int i = 0; i < 8; i++) CHECK_EQ(v[i], want8[i]);
    v = ints(ts_quantize_per_tensor(f32(8, ends), 1.0, 0, TS_QUINT8));
    const int64_t wantu8[] = {255, 255, 0, 255, 0, 127, 128, 0};
    for (int i = 0; i < 8; i++) CHECK_EQ(v[i], wantu8[i]);
    const float big[] = {NAN, 1e30f, -1e30f, 2.5e9f, -7.5f};
    v = ints(ts_quantize_per_tensor(f32(5, big), 1.0, 3, TS_QINT32));
    CHECK_EQ(v[0], INT32_MIN);
    CHECK_EQ(v[1], INT32_MAX);
    CHECK_EQ(v[2], INT32_MIN);
    CHECK_EQ(v[3], INT32_MAX);
    CHECK_EQ(v[4], -5); /* 3 + nearbyint(-7.5) = 3 - 8 */
    /* random values against the definition, every dtype; fbgemm's example: 0.273939937 /
     * 0.00214854861 is 127.5 through the float reciprocal (-> 128), 127.499992 by division (-> 127)
     */
    const float fb[] = {0.273939937f};
    CHECK_EQ(ints(ts_quantize_per_tensor(f32(1, fb), 0.00214854861, 0, TS_QINT32))[0], 128);
    ts_manual_seed(3);
    ts_tensor *x = ts_mul_scalar(ts_randn(TS_SHAPE(3000), (ts_opts){0}), 3);
    float *xv = floats(x);
    float xs[3000];
    memcpy(xs, xv, sizeof xs);
    const ts_dtype dts[] = {TS_QINT8, TS_QUINT8, TS_QINT32};
    const int64_t zps[] = {-7, 131, 100000};
    for (int d = 0; d < 3; d++) {
        int64_t lo = dts[d] == TS_QINT8 ? -128 : dts[d] == TS_QUINT8 ? 0 : INT32_MIN;
        int64_t hi = dts[d] == TS_QINT8 ? 127 : dts[d] == TS_QUINT8 ? 255 : INT32_MAX;
        ts_tensor *q = ts_quantize_per_tensor(x, 0.0137, zps[d], dts[d]);
        v = ints(q);
        int bad = 0;
        for (int i = 0; i < 3000; i++)
            bad += v[i] != ref_q(xs[i], 0.0137, zps[d], lo, hi, dts[d] == TS_QINT32);
        CHECK_EQ(bad, 0);
        /* dequantize: float scale times the integer difference (fbgemm's per-tensor formula) */
        float *dq = floats(ts_dequantize(q));
        bad = 0;
        for (int i = 0; i < 3000; i++) bad += dq[i] != (float)0.0137 * (float)(v[i] - zps[d]);
        CHECK_EQ(bad, 0);
        CHECK_EQ(ts_q_scale(q), 0.0137);
        int64_t z = 0;
        CHECK_EQ(ts_q_zero_point(q, &z), TS_OK);
        CHECK_EQ(z, zps[d]);
        CHECK_EQ(ts_qscheme_of(q), TS_PER_TENSOR_AFFINE);
        CHECK_EQ(ts_dtype_of(q), dts[d]);
    }
    CHECK_STREQ(ts_dtype_name(TS_QUINT8), "quint8");
    CHECK_EQ((int)ts_dtype_size(TS_QINT32), 4);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ per channel, per group */
static void test_per_channel_group(void) {
    ts_scope_begin();
    ts_manual_seed(5);
    ts_tensor *x = ts_mul_scalar(ts_randn(TS_SHAPE(2, 3, 4), (ts_opts){0}), 2);
    float xs[24];
    memcpy(xs, floats(x), sizeof xs);
    const double sc[] = {0.02, 0.05, 0.1};
    const int64_t zp[] = {0, 10, 250};
    ts_tensor *s = ts_tensor_f64(TS_SHAPE(3), sc, (ts_opts){0});
    ts_tensor *z = ts_tensor_i64(TS_SHAPE(3), zp, (ts_opts){0});
    ts_tensor *q = ts_quantize_per_channel(x, s, z, 1, TS_QUINT8);
    int64_t *v = ints(q);
    int bad = 0;
    for (int i = 0; i < 24; i++) {
        int c = (i / 4) % 3;
        bad += v[i] != ref_q(xs[i], sc[c], zp[c], 0, 255, false);
    }
    CHECK_EQ(bad, 0);
    float *dq = floats(ts_dequantize(q));
    bad = 0;
    for (int i = 0; i < 24; i++) {
        int c = (i / 4) % 3; /* PyTorch's dequantize_val: float difference times the double scale */
        bad += dq[i] != (float)((double)((float)v[i] - (float)zp[c]) * sc[c]);
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(ts_q_per_channel_axis(q), 1);
    CHECK_EQ(ts_qscheme_of(q), TS_PER_CHANNEL_AFFINE);
    CHECK_NEAR(ts_item(ts_select(ts_q_per_channel_scales(q), 0, 2)), 0.1, 0);
    CHECK_NEAR(ts_item(ts_select(ts_q_per_channel_zero_points(q), 0, 1)), 10, 0);
    CHECK(isnan(ts_q_scale(q)));
    CHECK_ERR_HAS(TS_ERR_ARG, "per-tensor");

    /* int4 in groups of 4 along the last dim: [2, 8] -> params [2, 2] */
    const float wv[16] = {0, 1, 2, 3, 4, 5, 6, 7, -1, -2, -3, -4, 0.5f, 1.5f, 2.5f, 30};
    ts_tensor *w = ts_tensor_f32(TS_SHAPE(2, 8), wv, (ts_opts){0});
    const float gs[] = {1, 0.5f, 1, 0.5f};
    const int64_t gz[] = {0, 8, 8, 0};
    ts_tensor *q4 =
        ts_quantize_per_group(w, ts_tensor_f32(TS_SHAPE(2, 2), gs, (ts_opts){0}),
                              ts_tensor_i64(TS_SHAPE(2, 2), gz, (ts_opts){0}), 4, TS_QUINT4X2);
    v = ints(q4);
    /* row 0: 0..3 at scale 1 zp 0; 4..7 at 0.5 zp 8 -> 16.. clamped to 15; row 1: -1..-4 at 1 zp
     * 8 -> 7..4; 0.5, 1.5, 2.5 at 0.5 -> 1, 3, 5 (ties stay exact), 30 -> 60 -> 15 */
    const int64_t want4[] = {0, 1, 2, 3, 15, 15, 15, 15, 7, 6, 5, 4, 1, 3, 5, 15};
    for (int i = 0; i < 16; i++) CHECK_EQ(v[i], want4[i]);
    dq = floats(ts_dequantize(q4));
    CHECK_EQ(dq[1], 1.0f);
    CHECK_EQ(dq[4], 3.5f); /* (15 - 8) * 0.5 */
    CHECK_EQ(dq[9], -2.0f);
    CHECK_EQ(ts_q_group_size(q4), 4);
    CHECK_EQ(ts_q_per_channel_axis(q4), 1);
    CHECK_EQ(ts_numel(ts_q_per_channel_scales(q4)), 4);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ bad arguments, the gate */
static void test_refusals(void) {
    ts_scope_begin();
    const float v[] = {1, 2, 3, 4};
    ts_tensor *x = f32(4, v);
    CHECK(!ts_quantize_per_tensor(x, 0, 0, TS_QINT8));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantize_per_tensor: scale");
    CHECK(!ts_quantize_per_tensor(x, -1, 0, TS_QINT8));
    CHECK_ERR_HAS(TS_ERR_ARG, "scale");
    CHECK(!ts_quantize_per_tensor(x, INFINITY, 0, TS_QINT8));
    CHECK_ERR_HAS(TS_ERR_ARG, "scale");
    CHECK(!ts_quantize_per_tensor(x, NAN, 0, TS_QINT8));
    CHECK_ERR_HAS(TS_ERR_ARG, "scale");
    CHECK(!ts_quantize_per_tensor(x, 1e-50, 0, TS_QINT8));
    CHECK_ERR_HAS(TS_ERR_ARG, "normal float32");
    CHECK(!ts_quantize_per_tensor(x, 1, 128, TS_QINT8));
    CHECK_ERR_HAS(TS_ERR_ARG, "zero_point 128 is outside [-128, 127]");
    CHECK(!ts_quantize_per_tensor(x, 1, -1, TS_QUINT8));
    CHECK_ERR_HAS(TS_ERR_ARG, "zero_point -1");
    CHECK(!ts_quantize_per_tensor(x, 1, 16, TS_QUINT4X2));
    CHECK_ERR_HAS(TS_ERR_ARG, "zero_point 16");
    CHECK(!ts_quantize_per_tensor(x, 1, 0, TS_I8));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "dtype must be");
    CHECK(!ts_quantize_per_tensor(ts_to_dtype(x, TS_F64), 1, 0, TS_QINT8));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "float32");
    CHECK(!ts_quantize_per_tensor(f32(3, v), 1, 0, TS_QUINT4X2));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "even");
    ts_tensor *x2 = ts_reshape(x, TS_SHAPE(2, 2));
    const double s2[] = {1, 1}, s3[] = {1, 1, 1}, sbad[] = {1, 0};
    const int64_t z2[] = {0, 0}, z3[] = {0, 0, 0}, zbad[] = {0, 300};
    ts_tensor *S2 = ts_tensor_f64(TS_SHAPE(2), s2, (ts_opts){0});
    ts_tensor *Z2 = ts_tensor_i64(TS_SHAPE(2), z2, (ts_opts){0});
    CHECK(!ts_quantize_per_channel(x2, S2, Z2, 2, TS_QINT8));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantize_per_channel: axis 2");
    CHECK(!ts_quantize_per_channel(x2, S2, Z2, -1, TS_QINT8));
    CHECK_ERR_HAS(TS_ERR_ARG, "axis -1");
    CHECK(!ts_quantize_per_channel(x2, ts_tensor_f64(TS_SHAPE(3), s3, (ts_opts){0}),
                                   ts_tensor_i64(TS_SHAPE(3), z3, (ts_opts){0}), 0, TS_QINT8));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "expected 2 scales");
    CHECK(!ts_quantize_per_channel(x2, ts_tensor_f64(TS_SHAPE(2), sbad, (ts_opts){0}), Z2, 0,
                                   TS_QINT8));
    CHECK_ERR_HAS(TS_ERR_ARG, "scale 1 must be positive");
    CHECK(!ts_quantize_per_channel(x2, S2, ts_tensor_i64(TS_SHAPE(2), zbad, (ts_opts){0}), 0,
                                   TS_QUINT8));
    CHECK_ERR_HAS(TS_ERR_ARG, "zero_point 1 300");
    CHECK(!ts_quantize_per_channel(x2, Z2, Z2, 0, TS_QINT8));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "scales must be a floating");
    CHECK(!ts_quantize_per_group(x2, S2, Z2, 3, TS_QUINT4X2));
    CHECK_ERR_HAS(TS_ERR_ARG, "group_size 3");
    CHECK(!ts_quantize_per_group(x2, S2, Z2, 0, TS_QUINT4X2));
    CHECK_ERR_HAS(TS_ERR_ARG, "group_size 0");
    CHECK(!ts_quantize_per_group(x2, S2, Z2, 1, TS_QUINT4X2));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "must have shape [2, 2]");

    /* the gate: ops without a quantized path refuse, naming themselves */
    ts_tensor *q = ts_quantize_per_tensor(x, 0.5, 0, TS_QINT8);
    CHECK(q != NULL);
    CHECK(!ts_add(q, q));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "add: quantized tensors are not supported");
    CHECK(!ts_sum(q));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "quantized tensors are not supported");
    CHECK(!ts_to_dtype(q, TS_F32));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "quantized");
    CHECK(!ts_flip(q, TS_DIMS(0))); /* the view ops take it (test_quant_ops); a copy does not */
    CHECK_ERR_HAS(TS_ERR_DTYPE, "flip: quantized tensors are not supported");
    CHECK(!ts_zeros(TS_SHAPE(2), (ts_opts){.dtype = TS_QINT8}));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "quantized dtype qint8");
    CHECK(!ts_dequantize(x));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "dequantize: expected a quantized tensor");
    CHECK(!ts_int_repr(x));
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(ts_qscheme_of(x) == TS_QSCHEME_NONE);
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(!ts_q_per_channel_scales(q));
    CHECK_ERR_HAS(TS_ERR_ARG, "per-channel");
    CHECK_EQ(ts_q_per_channel_axis(q), -1);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_q_group_size(q), -1);
    CHECK_ERR(TS_ERR_ARG);
    CHECK_EQ(ts_numel(q), 4); /* queries that read no element pass */
    CHECK_EQ((int)ts_element_size(q), 1);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ int8 linear */
static uint64_t rng = 88172645463325252ull;
static int64_t rnd(int64_t lo, int64_t hi) { /* xorshift in [lo, hi] */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int64_t)(rng % (uint64_t)(hi - lo + 1));
}

/* x (quint8 / qint8) and w (qint8, per channel when pc) with the given integers */

static int lin_case(int64_t M, int64_t N, int64_t K, bool xu, bool pc, bool extreme) {
    int fails = 0;
    ts_scope_begin();
    const int64_t xlo = xu ? 0 : -128, xhi = xu ? 255 : 127;
    int64_t *xv = malloc((size_t)(M * K) * sizeof *xv), *wv = malloc((size_t)(N * K) * sizeof *wv);
    for (int64_t i = 0; i < M * K; i++) xv[i] = extreme ? xhi : rnd(xlo, xhi);
    for (int64_t i = 0; i < N * K; i++) wv[i] = extreme ? -128 : rnd(-128, 127);
    const int64_t xzp = extreme ? 0 : rnd(xlo, xhi);
    /* scales powers of two, so quantizing the exact values gives the integers back */
    ts_tensor *x = ts_test_quantized(TS_SHAPE(M, K), xu ? TS_QUINT8 : TS_QINT8, xv, 0.25, xzp);
    double *ws = malloc((size_t)N * sizeof *ws);
    int64_t *wz = malloc((size_t)N * sizeof *wz);
    float *wf = malloc((size_t)(N * K) * sizeof *wf);
    for (int64_t n = 0; n < N; n++) {
        ws[n] = pc ? ldexp(1, -(int)rnd(2, 6)) : 0.0625;
        wz[n] = pc && !extreme ? rnd(-3, 3) : 0;
        for (int64_t k = 0; k < K; k++)
            wf[n * K + k] = (float)((double)(wv[n * K + k] - wz[n]) * ws[n]);
    }
    ts_tensor *wfl = ts_tensor_f32(TS_SHAPE(N, K), wf, (ts_opts){0});
    ts_tensor *w =
        pc ? ts_quantize_per_channel(wfl, ts_tensor_f64(TS_SHAPE(N), ws, (ts_opts){0}),
                                     ts_tensor_i64(TS_SHAPE(N), wz, (ts_opts){0}), 0, TS_QINT8)
           : ts_quantize_per_tensor(wfl, 0.0625, 0, TS_QINT8);
    int32_t *bias = malloc((size_t)N * sizeof *bias);
    for (int64_t n = 0; n < N; n++) bias[n] = extreme ? 0 : (int32_t)rnd(-100000, 100000);
    ts_tensor *b = ts_tensor_i32(TS_SHAPE(N), bias, (ts_opts){0});
    const double os = 0.37;
    const int64_t ozp = xu ? 100 : -20;
    ts_tensor *acc[2], *y[2], *yr[2];
    /* portable, then the best the host has; there one weight's third call (yr) takes its VNNI
     * packing from the weight cache, which keeps it at the second (kern_qlinear.c) */
    for (int isa = 0; isa < 2; isa++) {
        atomic_store(&tsi_cpu_isa_chosen, isa == 0 ? TS_ISA_GENERIC : (int)tsi_cpu_isa_host());
        acc[isa] = ts_quantized_linear_acc(x, w, b);
        y[isa] = ts_quantized_linear(x, w, b, os, ozp, false);
        yr[isa] = ts_quantized_linear(x, w, b, os, ozp, true);
    }
    atomic_store(&tsi_cpu_isa_chosen, -1);
    int32_t *a0 = malloc((size_t)(M * N) * sizeof(int32_t)), *a1 = malloc((size_t)(M * N) * 4);
    ts_copy_to_host(acc[0], a0, (size_t)(M * N) * 4);
    ts_copy_to_host(acc[1], a1, (size_t)(M * N) * 4);
    int64_t lo = xu ? 0 : -128, hi = xu ? 255 : 127;
    int bad_acc = 0, bad_q = 0;
    for (int isa = 0; isa < 2; isa++) {
        int64_t *yq = ints(y[isa]);
        int64_t *yq_copy = malloc((size_t)(M * N) * sizeof *yq_copy);
        memcpy(yq_copy, yq, (size_t)(M * N) * sizeof *yq);
        int64_t *yrq = ints(yr[isa]);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                int64_t s = bias[n];
                for (int64_t k = 0; k < K; k++)
                    s += (xv[m * K + k] - xzp) * (wv[n * K + k] - wz[n]);
                bad_acc += (isa ? a1 : a0)[m * N + n] != (int32_t)s;
                double mult = 0.25 * (pc ? ws[n] : 0.0625) / os;
                double r = (double)ozp + nearbyint((double)s * mult);
                int64_t want = r < lo ? lo : r > hi ? hi : (int64_t)r;
                int64_t want_relu = want < ozp ? ozp : want;
                bad_q += yq_copy[m * N + n] != want;
                bad_q += yrq[m * N + n] != want_relu;
            }
        free(yq_copy);
    }
    if (bad_acc || bad_q) {
        printf("  qlinear M %lld N %lld K %lld %s %s: %d accumulators, %d outputs wrong\n",
               (long long)M, (long long)N, (long long)K, xu ? "quint8" : "qint8",
               pc ? "per-channel" : "per-tensor", bad_acc, bad_q);
        fails++;
    }
    if (ts_error() != TS_OK) printf("  error: %s\n", ts_error_message()), fails++;
    free(xv), free(wv), free(ws), free(wz), free(wf), free(bias), free(a0), free(a1);
    ts_scope_end();
    return fails;
}

static void test_linear(void) {
    printf("vector ISA %s, VNNI kernel %s\n", tsi_cpu_isa_name(ts_cpu_isa_get()),
           tsi_qgemm_vnni_available() ? "available" : "absent (portable kernel only)");
    /* the last four: qgemm_vnni.c's 8 x 48 blocks (M >= 8): exact blocks, row and panel
     * remainders, k not a multiple of 4, threaded (M N K >= 2^18) */
    const int64_t shapes[][3] = {{1, 1, 1},   {3, 5, 7},     {4, 16, 4},    {5, 17, 9},
                                 {9, 33, 65}, {13, 48, 128}, {2, 70, 300},  {64, 40, 96},
                                 {8, 48, 4},  {17, 100, 37}, {23, 145, 61}, {40, 112, 200}};
    int fails = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int v = 0; v < 4; v++)
            fails += lin_case(shapes[i][0], shapes[i][1], shapes[i][2], v & 1, v & 2, false);
    /* the largest sums: every x 255, every w -128, K = 65536: -2139095040, inside int32 */
    fails += lin_case(2, 3, 65536, true, false, true);
    CHECK_EQ(fails, 0);

    ts_scope_begin();
    const float xv[] = {1, 2, 3, 4};
    ts_tensor *xq = ts_quantize_per_tensor(f32(4, xv), 0.5, 0, TS_QUINT8);
    ts_tensor *wq = ts_quantize_per_tensor(
        ts_tensor_f32(TS_SHAPE(2, 4), (float[8]){0}, (ts_opts){0}), 0.5, 0, TS_QINT8);
    CHECK(!ts_quantized_linear(xq, xq, NULL, 1, 0, false));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "quantized_linear: weight must be qint8");
    CHECK(!ts_quantized_linear(xq, wq, NULL, 0, 0, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "output scale");
    CHECK(!ts_quantized_linear(xq, wq, NULL, 1, 300, false));
    CHECK_ERR_HAS(TS_ERR_ARG, "output zero_point 300");
    CHECK(!ts_quantized_linear(xq, wq, ts_zeros(TS_SHAPE(3), (ts_opts){.dtype = TS_I32}), 1, 0,
                               false));
    CHECK_ERR_HAS(TS_ERR_ARG, "bias must be int32 or float32 [2]");
    ts_tensor *w5 =
        ts_quantize_per_tensor(ts_zeros(TS_SHAPE(2, 5), (ts_opts){0}), 0.5, 0, TS_QINT8);
    CHECK(!ts_quantized_linear(xq, w5, NULL, 1, 0, false));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "weight must be [out_features, 4]");
    CHECK(!ts_dynamic_quantized_linear(xq, wq, NULL, true));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "input must be float32");
    CHECK_OK();
    ts_scope_end();
}

/* fbgemm's ChooseQuantizationParams and the dynamic layer against float64 */
static void test_dynamic(void) {
    ts_scope_begin();
    double s;
    int64_t z;
    const float r[] = {-1, 3, 0.5f};
    CHECK_EQ(ts_choose_qparams_per_tensor(f32(3, r), TS_QUINT8, false, &s, &z), TS_OK);
    CHECK_EQ(s, 4.0 / 255); /* (3 - -1) / 255, double as PyTorch's */
    CHECK_EQ(z, 64);        /* 0 - (-1) / s = 63.75 */
    CHECK_EQ(ts_choose_qparams_per_tensor(f32(3, r), TS_QUINT8, true, &s, &z), TS_OK);
    CHECK_EQ(s, 4.0 / 127);
    CHECK_EQ(z, 32); /* 31.75 */
    const float pos[] = {2, 5};
    CHECK_EQ(ts_choose_qparams_per_tensor(f32(2, pos), TS_QUINT8, false, &s, &z), TS_OK);
    CHECK_EQ(z, 0); /* min widened to 0 */
    const float zero[] = {0, 0};
    CHECK_EQ(ts_choose_qparams_per_tensor(f32(2, zero), TS_QUINT8, false, &s, &z), TS_OK);
    CHECK_EQ(s, 0.1); /* fbgemm's replacement of a zero scale */
    const float nan[] = {0, NAN};
    CHECK_EQ(ts_choose_qparams_per_tensor(f32(2, nan), TS_QUINT8, false, &s, &z), TS_ERR_ARG);
    ts_error_clear();

    ts_manual_seed(11);
    enum { M = 7, N = 19, K = 37 };
    ts_tensor *x = ts_randn(TS_SHAPE(M, K), (ts_opts){0});
    ts_tensor *wf = ts_mul_scalar(ts_randn(TS_SHAPE(N, K), (ts_opts){0}), 0.2);
    ts_tensor *w = ts_quantize_per_tensor(wf, 0.01, 0, TS_QINT8);
    ts_tensor *b = ts_randn(TS_SHAPE(N), (ts_opts){0});
    ts_tensor *y = ts_dynamic_quantized_linear(x, w, b, true);
    CHECK(y != NULL);
    /* reference: the same quantized x (choose_qparams, quantize), products in float64 */
    CHECK_EQ(ts_choose_qparams_per_tensor(x, TS_QUINT8, true, &s, &z), TS_OK);
    float xd[M * K], wd[N * K], bd[N], yd[M * N];
    memcpy(xd, floats(ts_dequantize(ts_quantize_per_tensor(x, s, z, TS_QUINT8))), sizeof xd);
    memcpy(wd, floats(ts_dequantize(w)), sizeof wd);
    memcpy(bd, floats(b), sizeof bd);
    memcpy(yd, floats(y), sizeof yd);
    double worst = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double ref = bd[n];
            for (int64_t k = 0; k < K; k++) ref += (double)xd[m * K + k] * wd[n * K + k];
            /* the exact value rounded once to float32, and the dequantized operands each within
             * half an ulp of float32: a few ulps of the largest term */
            double err = fabs(yd[m * N + n] - ref) / (fabs(ref) + 1e-3);
            worst = err > worst ? err : worst;
        }
    CHECK(worst < 1e-5);
    CHECK_EQ(ts_shape_of(y).dims[1], N);
    CHECK_OK();
    ts_scope_end();
}

/* the dynamic layer bit for bit against its formula (quant_args.h's out_f): acc the exact int64
 * sum of (xq - x_zp)(wq - w_zp[n]), y = (float)((double)acc * (w_scale[n] * (double)(float)x_scale)
 * + (double)bias[n]); per-channel weights with zero points, M past 8 (qgemm_vnni.c's wide
 * blocks) and a row block of one */
static void test_dynamic_exact(void) {
    ts_scope_begin();
    enum { M = 9, N = 50, K = 37 };
    ts_manual_seed(12);
    ts_tensor *x = ts_mul_scalar(ts_randn(TS_SHAPE(M, K), (ts_opts){0}), 3.0);
    double ws[N];
    int64_t wz[N];
    for (int n = 0; n < N; n++) ws[n] = 0.004 + 0.0003 * n, wz[n] = n % 7 - 3;
    ts_tensor *w =
        ts_quantize_per_channel(ts_mul_scalar(ts_randn(TS_SHAPE(N, K), (ts_opts){0}), 0.2),
                                ts_tensor_f64(TS_SHAPE(N), ws, (ts_opts){0}),
                                ts_tensor_i64(TS_SHAPE(N), wz, (ts_opts){0}), 0, TS_QINT8);
    ts_tensor *b = ts_randn(TS_SHAPE(N), (ts_opts){0});
    ts_tensor *y = ts_dynamic_quantized_linear(x, w, b, true);
    double s;
    int64_t z;
    CHECK_EQ(ts_choose_qparams_per_tensor(x, TS_QUINT8, true, &s, &z), TS_OK);
    static int64_t xq[M * K], wq[N * K];
    memcpy(xq, ints(ts_quantize_per_tensor(x, s, z, TS_QUINT8)), sizeof xq);
    memcpy(wq, ints(w), sizeof wq);
    float bd[N], yd[M * N];
    memcpy(bd, floats(b), sizeof bd);
    memcpy(yd, floats(y), sizeof yd);
    int bad = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            int64_t acc = 0;
            for (int64_t k = 0; k < K; k++) acc += (xq[m * K + k] - z) * (wq[n * K + k] - wz[n]);
            const float want = (float)((double)acc * (ws[n] * (double)(float)s) + (double)bd[n]);
            bad += memcmp(&want, &yd[m * N + n], sizeof want) != 0;
        }
    CHECK_EQ(bad, 0);
    CHECK_OK();
    ts_scope_end();
}

/* sim runs the cpu kernels under its own accounting; meta has no data: refused */
static void test_devices(void) {
    ts_sim_configure(1, 0);
    ts_scope_begin();
    const float v[] = {0.3f, -1.7f, 2.5f, 9.0f};
    ts_tensor *xs = ts_to(f32(4, v), ts_sim(0));
    ts_tensor *q = ts_quantize_per_tensor(xs, 0.5, 2, TS_QINT8);
    CHECK(ts_device_equal(ts_device_of(q), ts_sim(0)));
    int64_t *iv = ints(q);
    const int64_t want[] = {3, -1, 7, 20};
    for (int i = 0; i < 4; i++) CHECK_EQ(iv[i], want[i]);
    float out[4];
    CHECK_EQ(ts_copy_to_host(ts_to(ts_dequantize(q), ts_cpu()), out, sizeof out), TS_OK);
    CHECK_EQ(out[3], 9.0f);
    ts_tensor *xm = ts_empty(TS_SHAPE(4), (ts_opts){.device = ts_meta()});
    CHECK(!ts_quantize_per_tensor(xm, 0.5, 0, TS_QINT8));
    CHECK_ERR(TS_ERR_DEVICE);
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    test_devices();
    test_per_tensor();
    test_per_channel_group();
    test_refusals();
    test_linear();
    test_dynamic();
    test_dynamic_exact();
    return ts_test_finish();
}
