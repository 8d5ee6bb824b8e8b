/* test_cuda_quant.c — the CUDA quantization kernels (src/backend/cuda/cuda_quant.cu) against the
 * CPU kernels, bit for bit, through the public API: quantize per tensor / channel / group into
 * every quantized dtype and its dequantize and int_repr; fake quantize per tensor / channel (y, the
 * mask and the straight-through gradient); the int8 linear layer in every epilogue (int32
 * accumulators, requantized quint8 / qint8 with and without relu, the dynamic layer's floats,
 * MatMulIntegerToFloat's float32 order with a strided uint8 / int8 B) on shapes that take
 * cuBLASLt's int8 GEMM (N and K multiples of 4) and the dp4a kernel (the others, K = 1 included).
 * Inputs hold ties (x / scale exactly k + 0.5), saturation, +-inf, NaN, -0, zero points at and off
 * 0. The same float data is quantized on both devices; the integers come back through int_repr.
 *
 * Skips without a CUDA device (a failure under TS_REQUIRE_CUDA=1). TS_TEST_QUANT_DEVICE=sim:0
 * runs it against another device, which checks the test itself on a machine without a GPU. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"
#include "tessera/quant.h"
#include "ts_test.h"

static ts_device dev; /* the device under test */

static ts_opts cpu_opts(ts_dtype dt) { return (ts_opts){.dtype = dt, .device = ts_cpu()}; }

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next_u32(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}
static float uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)(next_u32() >> 8) / 16777216.0f;
}

/* n floats: random in [-span, span], every fourth a tie (k + 0.5) * tie_step, and the specials */
static float *inputs(int64_t n, float span, float tie_step) {
    float *v = malloc((size_t)n * sizeof *v);
    static const float special[] = {INFINITY, -INFINITY, NAN, -0.0f, 0.0f, 1e30f, -1e30f, 1e-40f};
    for (int64_t i = 0; i < n; i++) {
        if (i % 4 == 1)
            v[i] = ((float)((int)(next_u32() % 41) - 20) + 0.5f) * tie_step;
        else
            v[i] = uniform(-span, span);
    }
    for (int64_t i = 0; i < 8 && i * 7 + 3 < n; i++) v[i * 7 + 3] = special[i];
    return v;
}

/* t's bytes on the host (malloc'ed), contiguous; *bytes their count */
static unsigned char *host_bytes(ts_tensor *t, size_t *bytes) {
    *bytes = 0;
    if (!t) return NULL;
    ts_tensor *c = ts_contiguous(ts_to(t, ts_cpu()));
    if (!c) return NULL;
    const size_t es = ts_dtype_size(ts_dtype_of(c));
    *bytes = (size_t)ts_numel(c) * es;
    unsigned char *b = malloc(*bytes ? *bytes : 1);
    if (b && ts_copy_to_host(c, b, *bytes) != TS_OK) free(b), b = NULL;
    return b;
}

/* a (cpu) and b (the device) hold the same bytes; quantized tensors compare their integers */
static void same_bits(const char *what, ts_tensor *a, ts_tensor *b) {
    if (a && ts_qscheme_of(a) != TS_QSCHEME_NONE) a = ts_int_repr(a);
    ts_error_clear();
    if (b && ts_qscheme_of(b) != TS_QSCHEME_NONE) b = ts_int_repr(b);
    ts_error_clear();
    size_t na = 0, nb = 0;
    unsigned char *x = host_bytes(a, &na), *y = host_bytes(b, &nb);
    const bool ok = x && y && na == nb && memcmp(x, y, na) == 0;
    if (!ok && x && y && na == nb) {
        const size_t es = ts_dtype_size(ts_dtype_of(a));
        for (size_t i = 0; i < na; i++)
            if (x[i] != y[i]) {
                printf("  %s: first difference at element %zu (byte %zu: cpu 0x%02x, %s 0x%02x)\n",
                       what, i / es, i, x[i], ts_device_str(dev), y[i]);
                break;
            }
    } else if (!ok) {
        printf("  %s: missing result (%s)\n", what, ts_test_error_str());
    }
    CHECK(ok);
    free(x), free(y);
}

static ts_tensor *floats(const float *v, ts_shape s) {
    return ts_from_data(s, TS_F32, v, cpu_opts(TS_F32));
}

/* ------------------------------------------------------------------ quantize / dequantize */
static void quantize_case(ts_dtype dt, double scale, int64_t zp, float span) {
    ts_scope_begin();
    const ts_shape s = TS_SHAPE(6, 10);
    float *v = inputs(60, span, (float)scale);
    ts_tensor *x = floats(v, s), *xd = ts_to(x, dev);
    ts_tensor *qc = ts_quantize_per_tensor(x, scale, zp, dt);
    ts_tensor *qd = ts_quantize_per_tensor(xd, scale, zp, dt);
    char what[96];
    snprintf(what, sizeof what, "quantize_per_tensor %s scale %g zp %lld", ts_dtype_name(dt), scale,
             (long long)zp);
    same_bits(what, qc, qd);
    snprintf(what, sizeof what, "dequantize %s per tensor", ts_dtype_name(dt));
    same_bits(what, ts_dequantize(qc), ts_dequantize(qd));
    free(v);
    CHECK_OK();
    ts_scope_end();
}

static void per_channel_case(ts_dtype dt, int axis) {
    ts_scope_begin();
    const int64_t dims[3] = {3, 5, 8};
    const int64_t c = dims[axis];
    double sc[8];
    int64_t zp[8];
    int64_t lo = dt == TS_QUINT8 || dt == TS_QUINT4X2 ? 0 : -8, hi = dt == TS_QUINT4X2 ? 15 : 8;
    for (int64_t i = 0; i < c; i++) {
        sc[i] = i % 2 ? 0.25 * (double)(i + 1) : 0.037 * (double)(i + 1); /* ties for the first */
        zp[i] = lo + (i * 5) % (hi - lo + 1);
    }
    float *v = inputs(120, 4.0f, 0.25f);
    ts_tensor *x = floats(v, TS_SHAPE(3, 5, 8)), *xd = ts_to(x, dev);
    ts_tensor *scs = ts_from_data(TS_SHAPE(c), TS_F64, sc, cpu_opts(TS_F64));
    ts_tensor *zps = ts_from_data(TS_SHAPE(c), TS_I64, zp, cpu_opts(TS_I64));
    ts_tensor *qc = ts_quantize_per_channel(x, scs, zps, axis, dt);
    ts_tensor *qd = ts_quantize_per_channel(xd, scs, zps, axis, dt);
    char what[96];
    snprintf(what, sizeof what, "quantize_per_channel %s axis %d", ts_dtype_name(dt), axis);
    same_bits(what, qc, qd);
    snprintf(what, sizeof what, "dequantize %s per channel axis %d", ts_dtype_name(dt), axis);
    same_bits(what, ts_dequantize(qc), ts_dequantize(qd));
    free(v);
    CHECK_OK();
    ts_scope_end();
}

static void per_group_case(ts_dtype dt) {
    ts_scope_begin();
    double sc[8];
    int64_t zp[8];
    for (int i = 0; i < 8; i++) sc[i] = 0.02 + 0.01 * i, zp[i] = dt == TS_QINT8 ? i - 4 : 3 + i;
    float *v = inputs(4 * 64, 1.0f, 0.02f);
    ts_tensor *x = floats(v, TS_SHAPE(4, 64)), *xd = ts_to(x, dev);
    ts_tensor *scs = ts_from_data(TS_SHAPE(4, 2), TS_F64, sc, cpu_opts(TS_F64));
    ts_tensor *zps = ts_from_data(TS_SHAPE(4, 2), TS_I64, zp, cpu_opts(TS_I64));
    ts_tensor *qc = ts_quantize_per_group(x, scs, zps, 32, dt);
    ts_tensor *qd = ts_quantize_per_group(xd, scs, zps, 32, dt);
    char what[96];
    snprintf(what, sizeof what, "quantize_per_group %s", ts_dtype_name(dt));
    same_bits(what, qc, qd);
    snprintf(what, sizeof what, "dequantize %s per group", ts_dtype_name(dt));
    same_bits(what, ts_dequantize(qc), ts_dequantize(qd));
    free(v);
    CHECK_OK();
    ts_scope_end();
}

static void test_quantize(void) {
    const ts_dtype dts[4] = {TS_QINT8, TS_QUINT8, TS_QINT32, TS_QUINT4X2};
    const int64_t zps[4][2] = {{0, -3}, {0, 128}, {0, 1000}, {0, 8}};
    for (int d = 0; d < 4; d++)
        for (int z = 0; z < 2; z++) {
            quantize_case(dts[d], 0.25, zps[d][z], 40.0f); /* ties and saturation */
            quantize_case(dts[d], 0.037, zps[d][z], 3.0f); /* inexact reciprocal */
        }
    for (int d = 0; d < 4; d++)
        for (int axis = 0; axis < 3; axis++)
            if (dts[d] != TS_QUINT4X2 || axis == 2) per_channel_case(dts[d], axis);
    per_group_case(TS_QUINT4X2);
    per_group_case(TS_QINT8);
}

/* ------------------------------------------------------------------ fake quantize */
static void fake_case(bool per_channel, int axis, int64_t qmin, int64_t qmax) {
    ts_scope_begin();
    float *v = inputs(3 * 4 * 6, 3.0f, 0.125f);
    ts_tensor *x = floats(v, TS_SHAPE(3, 4, 6)), *xd = ts_to(x, dev);
    ts_set_requires_grad(x, true), ts_set_requires_grad(xd, true);
    ts_tensor *y[2] = {NULL, NULL}, *m[2] = {NULL, NULL};
    ts_tensor *xs[2] = {x, xd};
    const int64_t c = per_channel ? (int64_t[]){3, 4, 6}[axis] : 1;
    double sc[6];
    int64_t zp[6];
    for (int64_t i = 0; i < c; i++)
        sc[i] = i % 2 ? 0.125 : 0.05 * (double)(i + 1), zp[i] = qmin + (i * 3) % (qmax - qmin + 1);
    for (int i = 0; i < 2; i++) {
        if (per_channel) {
            ts_tensor *scs = ts_from_data(TS_SHAPE(c), TS_F32,
                                          (float[]){(float)sc[0], (float)sc[1], (float)sc[2],
                                                    (float)sc[3], (float)sc[4], (float)sc[5]},
                                          cpu_opts(TS_F32));
            ts_tensor *zps = ts_from_data(TS_SHAPE(c), TS_I64, zp, cpu_opts(TS_I64));
            CHECK_EQ(ts_fake_quantize_per_channel_affine_cachemask(
                         xs[i], ts_to(scs, ts_device_of(xs[i])), ts_to(zps, ts_device_of(xs[i])),
                         axis, qmin, qmax, &y[i], &m[i]),
                     TS_OK);
        } else {
            CHECK_EQ(ts_fake_quantize_per_tensor_affine_cachemask(xs[i], 0.125, zp[0], qmin, qmax,
                                                                  &y[i], &m[i]),
                     TS_OK);
        }
        /* the straight-through gradient of sum(y * w): dx = w * mask */
        ts_tensor *w = ts_to(ts_arange(0, 72, 1, cpu_opts(TS_F32)), ts_device_of(xs[i]));
        CHECK_EQ(ts_backward(ts_sum(ts_mul(y[i], ts_reshape(w, TS_SHAPE(3, 4, 6))))), TS_OK);
    }
    char what[96];
    snprintf(what, sizeof what, "fake_quantize %s axis %d [%lld, %lld] y",
             per_channel ? "per channel" : "per tensor", axis, (long long)qmin, (long long)qmax);
    same_bits(what, y[0], y[1]);
    snprintf(what, sizeof what, "fake_quantize %s axis %d mask",
             per_channel ? "per channel" : "per tensor", axis);
    same_bits(what, m[0], m[1]);
    snprintf(what, sizeof what, "fake_quantize %s axis %d gradient",
             per_channel ? "per channel" : "per tensor", axis);
    same_bits(what, ts_grad(x), ts_grad(xd));
    free(v);
    CHECK_OK();
    ts_scope_end();
}

static void test_fake(void) {
    fake_case(false, 0, -128, 127);
    fake_case(false, 0, 0, 255);
    fake_case(false, 0, 0, 15); /* narrow: saturation and a mask of zeros */
    for (int axis = 0; axis < 3; axis++) fake_case(true, axis, -128, 127);
    fake_case(true, 2, 0, 7);
}

/* ------------------------------------------------------------------ the int8 linear layer */
/* the float data of x [M, K], w [N, K] and the int32 / float32 biases, quantized on each device */
typedef struct lin_case {
    int64_t m, k, n;
    ts_dtype xdt;
    bool w_per_channel;
} lin_case;

static void linear_case(lin_case L) {
    ts_scope_begin();
    const int64_t M = L.m, K = L.k, N = L.n;
    float *xv = inputs(M * K, 2.0f, 0.02f), *wv = inputs(N * K, 1.0f, 0.01f);
    for (int64_t i = 0; i < M * K; i++) /* finite inputs: no inf / NaN in the layer */
        if (!isfinite(xv[i]) || fabsf(xv[i]) > 4.0f) xv[i] = (float)(i % 7) - 3.0f;
    for (int64_t i = 0; i < N * K; i++)
        if (!isfinite(wv[i]) || fabsf(wv[i]) > 4.0f) wv[i] = (float)(i % 5) * 0.1f;
    int32_t *bi = malloc((size_t)N * sizeof *bi);
    float *bf = malloc((size_t)N * sizeof *bf);
    double *ws = malloc((size_t)N * sizeof *ws);
    int64_t *wz = malloc((size_t)N * sizeof *wz);
    for (int64_t i = 0; i < N; i++) {
        bi[i] = (int32_t)(next_u32() % 20001) - 10000;
        bf[i] = uniform(-1, 1);
        ws[i] = 0.004 + 0.001 * (double)(i % 9);
        wz[i] = (i % 5) - 2;
    }
    ts_tensor *x = floats(xv, TS_SHAPE(M, K)), *w = floats(wv, TS_SHAPE(N, K));
    ts_tensor *bic = ts_from_data(TS_SHAPE(N), TS_I32, bi, cpu_opts(TS_I32));
    ts_tensor *bfc = ts_from_data(TS_SHAPE(N), TS_F32, bf, cpu_opts(TS_F32));
    ts_tensor *wsc = ts_from_data(TS_SHAPE(N), TS_F64, ws, cpu_opts(TS_F64));
    ts_tensor *wzc = ts_from_data(TS_SHAPE(N), TS_I64, wz, cpu_opts(TS_I64));
    const int64_t xz = L.xdt == TS_QUINT8 ? 131 : -5;
    ts_tensor *out[2][8];
    for (int d = 0; d < 2; d++) {
        const ts_device on = d ? dev : ts_cpu();
        ts_tensor *xq = ts_quantize_per_tensor(ts_to(x, on), 0.02, xz, L.xdt);
        ts_tensor *wq = L.w_per_channel
                            ? ts_quantize_per_channel(ts_to(w, on), wsc, wzc, 0, TS_QINT8)
                            : ts_quantize_per_tensor(ts_to(w, on), 0.008, 0, TS_QINT8);
        out[d][0] = ts_quantized_linear_acc(xq, wq, ts_to(bic, on));
        out[d][1] =
            ts_quantized_linear(xq, wq, ts_to(bic, on), 0.05, L.xdt == TS_QUINT8 ? 100 : 3, false);
        out[d][2] = ts_quantized_linear(xq, wq, NULL, 0.004, L.xdt == TS_QUINT8 ? 128 : 0,
                                        true); /* small scale: saturates */
        out[d][3] = ts_quantized_linear_acc(xq, wq, NULL);
        out[d][4] = ts_dynamic_quantized_linear(ts_to(x, on), wq, ts_to(bfc, on), false);
        out[d][5] = ts_dynamic_quantized_linear(ts_to(x, on), wq, NULL, true);
        /* scales of powers of two: the multiplier 0.25 * 0.125 / 0.0625 is 0.5 exactly, so
         * every odd accumulator is a tie of the requantization's nearbyint */
        ts_tensor *xq2 = ts_quantize_per_tensor(ts_to(x, on), 0.25, xz, L.xdt);
        ts_tensor *wq2 = ts_quantize_per_tensor(ts_to(w, on), 0.125, 0, TS_QINT8);
        out[d][6] =
            ts_quantized_linear(xq2, wq2, NULL, 0.0625, L.xdt == TS_QUINT8 ? 128 : 0, false);
        /* a float32 bias: PyTorch's x86 requantization (fmult + acc_fbias) */
        out[d][7] =
            ts_quantized_linear(xq, wq, ts_to(bfc, on), 0.05, L.xdt == TS_QUINT8 ? 100 : 3, false);
    }
    static const char *names[8] = {"acc + bias",          "requantized + bias",
                                   "requantized relu",    "acc",
                                   "dynamic + bias",      "dynamic reduce_range",
                                   "requantized at ties", "x86 requantized + float bias"};
    for (int i = 0; i < 8; i++) {
        char what[128];
        snprintf(what, sizeof what, "quantized_linear %s [%lld x %lld] x [%lld x %lld]^T %s %s",
                 names[i], (long long)M, (long long)K, (long long)N, (long long)K,
                 ts_dtype_name(L.xdt), L.w_per_channel ? "per channel" : "per tensor");
        same_bits(what, out[0][i], out[1][i]);
    }
    free(xv), free(wv), free(bi), free(bf), free(ws), free(wz);
    CHECK_OK();
    ts_scope_end();
}

/* MatMulIntegerToFloat: a [M, K], b [K, N] read where it lies (uint8 b: flipped into int8), the
 * float32 epilogue */
static void mif_case(int64_t M, int64_t K, int64_t N, ts_dtype adt, ts_dtype bdt, bool per_col) {
    ts_scope_begin();
    uint8_t *av = malloc((size_t)(M * K)), *bv = malloc((size_t)(K * N));
    for (int64_t i = 0; i < M * K; i++) av[i] = (uint8_t)next_u32();
    for (int64_t i = 0; i < K * N; i++) bv[i] = (uint8_t)next_u32();
    float bsv[64], biasv[64];
    uint8_t bzv[64];
    for (int64_t i = 0; i < N; i++)
        bsv[i] = uniform(0.001f, 0.01f), biasv[i] = uniform(-2, 2), bzv[i] = (uint8_t)(i % 7);
    const float as = 0.013f;
    const uint8_t az = adt == TS_U8 ? 120 : 3;
    ts_tensor *r[2][2];
    for (int d = 0; d < 2; d++) {
        const ts_opts o = {.device = d ? dev : ts_cpu()};
        ts_opts oa = o, ob = o, of = o;
        oa.dtype = adt, ob.dtype = bdt, of.dtype = TS_F32;
        ts_tensor *a = ts_from_data(TS_SHAPE(M, K), adt, av, oa);
        ts_tensor *b = ts_from_data(TS_SHAPE(K, N), bdt, bv, ob);
        ts_tensor *a_s = ts_from_data(TS_SHAPE(), TS_F32, &as, of);
        ts_tensor *a_z = ts_from_data(TS_SHAPE(), adt, &az, oa);
        ts_tensor *b_s = ts_from_data(per_col ? TS_SHAPE(N) : TS_SHAPE(), TS_F32, bsv, of);
        ts_tensor *b_z = ts_from_data(per_col ? TS_SHAPE(N) : TS_SHAPE(), bdt, bzv, ob);
        ts_tensor *bias = ts_from_data(TS_SHAPE(N), TS_F32, biasv, of);
        r[d][0] = ts_matmul_integer_to_float(a, a_s, a_z, b, b_s, b_z, bias);
        /* b read where it lies as the transpose of a [N, K] array: strides (1, K) */
        ts_tensor *bt = ts_transpose(ts_from_data(TS_SHAPE(N, K), bdt, bv, ob), 0, 1);
        r[d][1] = ts_matmul_integer_to_float(a, a_s, NULL, bt, b_s, NULL, NULL);
    }
    char what[128];
    snprintf(what, sizeof what, "matmul_integer_to_float [%lld x %lld] x [%lld x %lld] %s %s",
             (long long)M, (long long)K, (long long)K, (long long)N, ts_dtype_name(adt),
             ts_dtype_name(bdt));
    same_bits(what, r[0][0], r[1][0]);
    same_bits(what, r[0][1], r[1][1]);
    free(av), free(bv);
    CHECK_OK();
    ts_scope_end();
}

static void test_linear(void) {
    /* cuBLASLt's int8 path: N and K multiples of 4; the dp4a kernel: the rest */
    const lin_case cases[] = {
        {4, 64, 32, TS_QUINT8, true}, {4, 64, 32, TS_QINT8, true},  {17, 256, 64, TS_QINT8, false},
        {1, 16, 4, TS_QUINT8, false}, {3, 7, 5, TS_QUINT8, true},   {3, 7, 5, TS_QINT8, false},
        {5, 130, 9, TS_QINT8, true},  {2, 36, 12, TS_QUINT8, true}, {2, 1, 3, TS_QINT8, true},
        {6, 12, 10, TS_QUINT8, true}, {9, 20, 8, TS_QINT8, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) linear_case(cases[i]);
    mif_case(4, 32, 16, TS_U8, TS_I8, true);
    mif_case(4, 32, 16, TS_I8, TS_U8, false);
    mif_case(3, 9, 7, TS_U8, TS_U8, true);
    mif_case(3, 9, 7, TS_I8, TS_I8, false);
}

/* ------------------------------------------------------------------ the weight-only layer */
/* x [M, K] float32 times w quantized on each device (int8 per row, or int4 per group of gs) */
static void wo_case(int64_t M, int64_t K, int64_t N, bool int4, int64_t gs, bool with_bias) {
    ts_scope_begin();
    float *xv = inputs(M * K, 2.0f, 0.5f), *wv = inputs(N * K, 1.0f, 0.01f);
    for (int64_t i = 0; i < M * K; i++)
        if (!isfinite(xv[i]) || fabsf(xv[i]) > 4.0f) xv[i] = (float)(i % 7) * 0.25f - 0.75f;
    for (int64_t i = 0; i < N * K; i++)
        if (!isfinite(wv[i]) || fabsf(wv[i]) > 4.0f) wv[i] = (float)(i % 5) * 0.1f;
    const int64_t np = int4 ? N * (K / gs) : N;
    double *sc = malloc((size_t)np * sizeof *sc);
    int64_t *zp = malloc((size_t)np * sizeof *zp);
    float *bv = malloc((size_t)N * sizeof *bv);
    for (int64_t i = 0; i < np; i++)
        sc[i] = int4 ? 0.15 + 0.01 * (double)(i % 7) : 0.01 + 0.001 * (double)(i % 9),
        zp[i] = int4 ? 8 - (i % 3) : (i % 5) - 2;
    for (int64_t i = 0; i < N; i++) bv[i] = uniform(-1, 1);
    ts_tensor *x = floats(xv, TS_SHAPE(M, K)), *w = floats(wv, TS_SHAPE(N, K));
    ts_tensor *b = floats(bv, TS_SHAPE(N));
    ts_tensor *scs = int4 ? ts_from_data(TS_SHAPE(N, K / gs), TS_F64, sc, cpu_opts(TS_F64))
                          : ts_from_data(TS_SHAPE(N), TS_F64, sc, cpu_opts(TS_F64));
    ts_tensor *zps = int4 ? ts_from_data(TS_SHAPE(N, K / gs), TS_I64, zp, cpu_opts(TS_I64))
                          : ts_from_data(TS_SHAPE(N), TS_I64, zp, cpu_opts(TS_I64));
    ts_tensor *y[2];
    for (int d = 0; d < 2; d++) {
        const ts_device on = d ? dev : ts_cpu();
        ts_tensor *wq = int4 ? ts_quantize_per_group(ts_to(w, on), scs, zps, gs, TS_QUINT4X2)
                             : ts_quantize_per_channel(ts_to(w, on), scs, zps, 0, TS_QINT8);
        y[d] = ts_weight_only_linear(ts_to(x, on), wq, with_bias ? ts_to(b, on) : NULL);
    }
    char what[128];
    snprintf(what, sizeof what, "weight_only_linear %s [%lld x %lld] x [%lld x %lld]^T%s",
             int4 ? "int4" : "int8", (long long)M, (long long)K, (long long)N, (long long)K,
             with_bias ? " + bias" : "");
    same_bits(what, y[0], y[1]);
    free(xv), free(wv), free(sc), free(zp), free(bv);
    CHECK_OK();
    ts_scope_end();
}

static void test_weight_only(void) {
    for (int bias = 0; bias < 2; bias++) {
        wo_case(1, 7, 5, false, 0, bias);
        wo_case(3, 64, 17, false, 0, bias);
        wo_case(4, 130, 6, false, 0, bias);
        wo_case(2, 256, 9, true, 32, bias);
        wo_case(1, 256, 33, true, 128, bias);
    }
    if (dev.type == TS_CUDA) { /* int8 dynamic activations: no CUDA kernel, a clear refusal */
        ts_scope_begin();
        ts_tensor *x = ts_to(ts_ones(TS_SHAPE(2, 32), cpu_opts(TS_F32)), dev);
        ts_tensor *wq = ts_quantize_per_tensor(x, 0.1, 0, TS_QINT8);
        CHECK(ts_int8_dynamic_activation_linear(x, wq, NULL) == NULL);
        CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "no CUDA kernel");
        ts_scope_end();
    }
}

int main(void) {
    /* the weight-only layer's CUDA kernel sums in the portable CPU loop's order (its AVX-512 loop
     * sums in another): the CPU side of this test runs below AVX-512 unless told otherwise */
    setenv("TS_CPU_ISA", "avx2", 0);
    /* shapes cuBLASLt's int8 GEMM should take must take it (an error otherwise), so that both the
     * cuBLASLt and the dp4a paths are known to have run */
    setenv("TS_CUDA_QLINEAR_LT", "require", 0);
    const char *env = getenv("TS_TEST_QUANT_DEVICE");
    if (env && *env) {
        if (!strncmp(env, "sim", 3) && ts_device_count(TS_SIM) < 1) ts_sim_configure(1, 0);
        if (ts_device_parse(env, &dev) != TS_OK || !ts_device_is_available(dev))
            return ts_test_skip("TS_TEST_QUANT_DEVICE=%s is not available", env);
    } else if (ts_cuda_is_available()) {
        dev = ts_cuda(0);
    } else {
        return ts_test_skip_no_cuda("test_cuda_quant: the quantization kernels are not run here");
    }
    printf("device under test: %s\n", ts_device_str(dev));
    test_quantize();
    test_fake();
    test_linear();
    test_weight_only();
    return ts_test_finish();
}
