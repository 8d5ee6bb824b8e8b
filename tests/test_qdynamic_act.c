/* test_qdynamic_act.c — linear layers with int8 dynamic activations (ts_int8_dynamic_activation_
 * linear, torchao's int8_dynamic_activation_int8_weight / int8_dynamic_activation_int4_weight) and
 * the symmetric int4 recipe (ts_quantize_int4_symmetric_weight); include/tessera/quant.h.
 *
 * References: the activations quantized here by torchao's rule (sx = max(max|x| / 127, 1e-5),
 * xq = clamp(round_half_even(x * (1 / sx)), -127, 127) in float32), the exact sums in int64 and
 * the output in float64. Exact cases: x = integers / 8 with max |x| = 127 / 8 (sx = 1 / 8), weights
 * small integers times powers of two, so that every float32 step of either kernel is exact and y
 * must equal the float64 value bit for bit (a wrong integer anywhere shows). Random cases: int8
 * within 4 roundings of |acc sx s| + |b|; int4 within (units + 8) 2^-24 (S + |b|), S = sx sum_g
 * s_g sum_k |xq| (|q| + zp_g), units = ceil(K / 128) (the lanes' fma chains are units long, then
 * the tree of 4, sx and the bias: depth units + 6). int4 scales either all float16 values (the
 * kernels read the float16 copy: kinds 4, 5) or not (float32: kinds 3, 6; exact cases 2^-26 /
 * 2^-27, below float16's range). Each case on the portable kernel and on each vector kernel the
 * host has (AVX2, AVX-VNNI, AVX512-VNNI): each against the reference, and all bit for bit equal
 * (the contract: include/tessera/quant.h). */
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/qgemm_vnni.h"
#include "backend/kernel_math.h"
#include "tessera/autograd.h"
#include "tessera/quant.h"
#include "ts_test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)((rng >> 20) % n);
}
static float urand(void) { return (float)rnd(1u << 24) / 8388608.0f - 1.0f; } /* [-1, 1) */

static float *host(ts_tensor *t) {
    ts_scope_begin();
    const int64_t n = t ? ts_numel(t) : 0;
    if (!t) fprintf(stderr, "no tensor: %s\n", ts_error_message());
    float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    if (!t || ts_copy_to_host(ts_contiguous(t), h, (size_t)n * sizeof *h) != TS_OK)
        memset(h, 0xff, (size_t)(n ? n : 1) * sizeof *h);
    ts_scope_end();
    return h;
}

static const double U = 1.0 / 16777216.0;

/* torchao's per-token activation quantization (the rule under test, written out) */
static float act_quant(const float *x, int64_t K, int32_t *q) {
    float amax = 0;
    for (int64_t k = 0; k < K; k++) amax = fmaxf(amax, fabsf(x[k]));
    float s = amax / 127.0f;
    s = s < 1e-5f ? 1e-5f : s;
    const float inv = 1.0f / s;
    for (int64_t k = 0; k < K; k++) {
        const float r = nearbyintf(x[k] * inv);
        q[k] = (int32_t)(r < -127 ? -127 : r > 127 ? 127 : r);
    }
    return s;
}

/* a weight: kind 0 int8 per channel zp 0, 1 int8 per channel with zero points, 2 int8 per tensor,
 * int4 per group: 3 zero points 0..15 and 4 every zero point 8 (the symmetric recipe's), each
 * with float16 scales, 5 / 6 the same with scales no float16 holds; ints q (int8: the value; int4:
 * 0..15), scales / zps per row or group. exact: scales powers of two. The float weight (q - zp) s
 * quantizes back to q exactly. */
typedef struct wcase {
    int kind;
    int64_t N, K, gs, G;
    int32_t *q, *zp;
    double *s;
    ts_tensor *w;
} wcase;

static void make_w(wcase *c, bool exact) {
    const int64_t N = c->N, K = c->K;
    c->G = c->kind >= 3 ? K / c->gs : 1;
    const int64_t P = N * c->G;
    c->q = malloc((size_t)(N * K) * sizeof *c->q);
    c->zp = malloc((size_t)P * sizeof *c->zp), c->s = malloc((size_t)P * sizeof *c->s);
    float *wf = malloc((size_t)(N * K) * sizeof *wf);
    const bool f32s = c->kind >= 5; /* int4 scales float16 cannot hold */
    for (int64_t i = 0; i < P; i++) {
        const double r = 0.001 + 0.0001 * (double)rnd(50), e = rnd(2) ? 1.0 / 64 : 1.0 / 128;
        c->s[i] = exact                          ? (f32s ? e * 0x1p-20 : e)
                  : c->kind == 3 || c->kind == 4 ? (double)ts_f16_to_f32(ts_f32_to_f16((float)r))
                                                 : r;
        c->zp[i] = c->kind == 0                   ? 0
                   : c->kind == 4 || c->kind == 6 ? 8
                   : c->kind >= 3                 ? (int32_t)rnd(16)
                                                  : (int32_t)rnd(21) - 10;
    }
    if (c->kind == 2)
        for (int64_t i = 0; i < P; i++) c->s[i] = c->s[0], c->zp[i] = c->zp[0];
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            const int64_t p = n * c->G + k / (K / c->G);
            const int32_t q = c->kind >= 3 ? (int32_t)rnd(16) : (int32_t)rnd(256) - 128;
            c->q[n * K + k] = q;
            wf[n * K + k] = (float)((double)(q - c->zp[p]) * c->s[p]);
        }
    ts_tensor *t = ts_tensor_f32(TS_SHAPE(N, K), wf, (ts_opts){0});
    int64_t *z64 = malloc((size_t)P * sizeof *z64);
    for (int64_t i = 0; i < P; i++) z64[i] = c->zp[i];
    if (c->kind == 2)
        c->w = ts_quantize_per_tensor(t, c->s[0], c->zp[0], TS_QINT8);
    else if (c->kind >= 3)
        c->w = ts_quantize_per_group(t, ts_tensor_f64(TS_SHAPE(N, c->G), c->s, (ts_opts){0}),
                                     ts_tensor_i64(TS_SHAPE(N, c->G), z64, (ts_opts){0}), c->gs,
                                     TS_QUINT4X2);
    else
        c->w = ts_quantize_per_channel(t, ts_tensor_f64(TS_SHAPE(N), c->s, (ts_opts){0}),
                                       ts_tensor_i64(TS_SHAPE(N), z64, (ts_opts){0}), 0, TS_QINT8);
    free(wf), free(z64);
}

static void free_w(wcase *c) { free(c->q), free(c->zp), free(c->s); }

/* y [M, N] of the layer against the float64 reference; exact: bit for bit */
static bool check(const wcase *c, const float *x, const float *b, int64_t M, const float *y,
                  bool exact, const char *what) {
    const int64_t N = c->N, K = c->K, G = c->G, gl = K / G;
    int32_t *xq = malloc((size_t)K * sizeof *xq);
    bool ok = true;
    for (int64_t m = 0; m < M && ok; m++) {
        const double sx = act_quant(x + m * K, K, xq);
        for (int64_t n = 0; n < N && ok; n++) {
            double r = 0, S = 0;
            for (int64_t g = 0; g < G; g++) {
                const int64_t p = n * G + g;
                int64_t acc = 0, mag = 0;
                for (int64_t k = g * gl; k < (g + 1) * gl; k++) {
                    acc += (int64_t)xq[k] * (c->q[n * K + k] - c->zp[p]);
                    mag +=
                        llabs((int64_t)xq[k]) * (llabs((int64_t)c->q[n * K + k]) + llabs(c->zp[p]));
                }
                r += (double)acc * c->s[p];
                S += (double)mag * c->s[p];
            }
            r = r * sx + (b ? b[n] : 0);
            S = S * sx + (b ? fabs(b[n]) : 0);
            const double units = (double)((K + 127) / 128);
            const double tol = exact ? 0 : c->kind >= 3 ? (units + 8) * U * S : 4 * U * S;
            if (!(fabs(y[m * N + n] - r) <= tol)) {
                fprintf(stderr, "%s: y[%lld][%lld] = %.9g, float64 %.9g (tol %.3g)\n", what,
                        (long long)m, (long long)n, y[m * N + n], r, tol);
                ok = false;
            }
        }
    }
    free(xq);
    return ok;
}

/* the kernels run: 0 portable, then each int8 GEMM kind the host has above it (AVX2, AVX-VNNI,
 * AVX512-VNNI: tsi_qgemm_kind_cap forces each) */
static int n_isa = 1;
static tsi_qgemm_kind isa_kind[4] = {TSI_QGEMM_PORTABLE};
static void set_isa(int i) {
    atomic_store(&tsi_cpu_isa_chosen, i == 0 ? TS_ISA_GENERIC : (int)tsi_cpu_isa_host());
    atomic_store(&tsi_qgemm_kind_cap, (int)isa_kind[i]);
}
static void reset_isa(void) {
    atomic_store(&tsi_cpu_isa_chosen, -1);
    atomic_store(&tsi_qgemm_kind_cap, (int)TSI_QGEMM_AVX512VNNI);
}

/* one weight kind and shape on both paths: each against the reference, and the two compared */
static void case_one(int kind, int64_t M, int64_t N, int64_t K, int64_t gs, bool exact) {
    ts_scope_begin();
    wcase c = {.kind = kind, .N = N, .K = K, .gs = gs};
    make_w(&c, exact);
    float *x = malloc((size_t)(M * K) * sizeof *x), *b = malloc((size_t)N * sizeof *b);
    for (int64_t m = 0; m < M; m++) {
        for (int64_t k = 0; k < K; k++)
            x[m * K + k] = exact ? (float)((int)rnd(255) - 127) / 8.0f : urand() * 3.0f;
        if (exact) x[m * K + rnd((uint32_t)K)] = rnd(2) ? 127.0f / 8 : -127.0f / 8;
    }
    const float bs = kind >= 5 ? 0x1p-20f : 1.0f; /* exact: the bias at the products' scale */
    for (int64_t n = 0; n < N; n++)
        b[n] = exact ? (float)((int)rnd(64) - 32) / 16.0f * bs : urand();
    ts_tensor *xt = ts_tensor_f32(TS_SHAPE(M, K), x, (ts_opts){0});
    ts_tensor *bt = ts_tensor_f32(TS_SHAPE(N), b, (ts_opts){0});
    CHECK_OK();
    float *ys[4] = {NULL, NULL, NULL, NULL};
    char what[160];
    for (int wb = 0; wb < 2; wb++)
        for (int i = 0; i < n_isa; i++) {
            set_isa(i);
            free(ys[i]);
            snprintf(what, sizeof what, "%s kind %d M %lld N %lld K %lld gs %lld bias %d %s",
                     tsi_qgemm_kind_name(isa_kind[i]), kind, (long long)M, (long long)N,
                     (long long)K, (long long)gs, wb, exact ? "exact" : "random");
            ts_tensor *y = ts_int8_dynamic_activation_linear(xt, c.w, wb ? bt : NULL);
            CHECK_OK();
            CHECK(y && ts_ndim(y) == 2 && ts_size(y, 0) == M && ts_size(y, 1) == N);
            ys[i] = host(y);
            CHECK(check(&c, x, wb ? b : NULL, M, ys[i], exact, what));
            if (i >= 1) /* the same integers and float32 steps: equal bits */
                CHECK(memcmp(ys[0], ys[i], (size_t)(M * N) * sizeof(float)) == 0);
        }
    for (int i = 0; i < 4; i++) free(ys[i]);
    reset_isa();
    free(x), free(b);
    free_w(&c);
    ts_scope_end();
}

static void shapes(void) {
    for (int e = 1; e >= 0; e--) {
        const bool ex = e == 1;
        for (int kind = 0; kind < 3; kind++) {
            case_one(kind, 1, 5, 64, 0, ex);
            case_one(kind, 1, 37, 200, 0, ex); /* K tails of 8 past 192 */
            case_one(kind, 3, 19, 130, 0, ex);
            case_one(kind, 2, 6, 1, 0, ex);
        }
        for (int kind = 3; kind <= 6; kind++) {
            case_one(kind, 1, 9, 32, 32, ex);  /* one unit of one group */
            case_one(kind, 1, 37, 96, 32, ex); /* a short unit of three groups */
            case_one(kind, 3, 18, 256, 32, ex);
            case_one(kind, 1, 7, 192, 64, ex); /* a unit, then 64 */
            case_one(kind, 2, 9, 256, 64, ex);
            case_one(kind, 2, 5, 256, 128, ex);
            case_one(kind, 1, 4, 512, 256, ex);
            case_one(kind, 2, 6, 416, 32, ex); /* three units, then 32 */
        }
    }
    case_one(0, 1, 70, 768, 0, false); /* over threads */
    case_one(3, 1, 70, 768, 32, false);
    case_one(4, 1, 70, 768, 32, false);
}

/* torchao's activation rule read back through an identity weight: y[n] = xq[n] * sx */
static void act_rule(void) {
    ts_scope_begin();
    enum { K = 12 };
    float eye[K * K] = {0};
    for (int i = 0; i < K; i++) eye[i * K + i] = 1.0f;
    ts_tensor *w =
        ts_quantize_per_tensor(ts_tensor_f32(TS_SHAPE(K, K), eye, (ts_opts){0}), 1.0, 0, TS_QINT8);
    /* row 0: max 508 -> sx 4 (508 / 127, not / 127.5: 250 -> 62.5 -> 62, not 63); ties to even
     * row 1: max 127 -> sx 1
     * row 2: tiny -> sx = eps 1e-5
     * row 3: zeros -> 0; row 4: NaN -> all NaN; row 5: inf -> all NaN */
    const float x[6][K] = {
        {508, 250, 254, 2, 6, -6, 10, -10, -508, 0, 1.99f, 507},
        {127, 2.5f, 3.5f, -2.5f, -0.5f, 0.5f, 1.5f, 126.5f, -127, -126.5f, 0.49f, -3.5f},
        {3e-5f, -2e-5f, 4e-6f, 6e-6f, 0, 0, 0, 0, 0, 0, 0, -1e-5f},
        {0},
        {1, 2, NAN, 4},
        {1, 2, 3, INFINITY},
    };
    const float want[4][K] = {
        {127, 62, 64, 0, 2, -2, 2, -2, -127, 0, 0, 127},
        {127, 2, 4, -2, 0, 0, 2, 126, -127, -126, 0, -4},
        {3, -2, 0, 1, 0, 0, 0, 0, 0, 0, 0, -1},
        {0},
    };
    const float sx[4] = {4, 1, 1e-5f, 1e-5f};
    for (int i = 0; i < n_isa; i++) {
        set_isa(i);
        float *y = host(ts_int8_dynamic_activation_linear(
            ts_tensor_f32(TS_SHAPE(6, K), &x[0][0], (ts_opts){0}), w, NULL));
        CHECK_OK();
        for (int m = 0; m < 4; m++)
            for (int n = 0; n < K; n++) {
                CHECK(y[m * K + n] == want[m][n] * sx[m]);
                if (y[m * K + n] != want[m][n] * sx[m])
                    fprintf(stderr, "act rule row %d [%d]: %.9g, want %.9g\n", m, n, y[m * K + n],
                            want[m][n] * sx[m]);
            }
        for (int n = 0; n < 2 * K; n++) CHECK(isnan(y[4 * K + n]));
        free(y);
    }
    reset_isa();
    ts_scope_end();
}

/* the symmetric int4 recipe at hand-worked values: the scale rounded to float16 first, the weights
 * quantized with the rounded scale */
static void recipe(void) {
    ts_scope_begin();
    float w[128] = {7.5f, -8.0f, 2.5f, -3.5f, 1.0f, 0.4f};
    /* group 1 all zero: scale float32's eps 2^-23 (a float16 subnormal); group 2: max 3e-6, scale
     * 4e-7 -> the subnormal 7 * 2^-24; group 3: max 491000, scale 65466.67 -> 65472 (2046 * 32) */
    w[64] = 3e-6f, w[65] = -1e-6f, w[96] = -491000.0f, w[97] = 30000.0f;
    ts_tensor *q =
        ts_quantize_int4_symmetric_weight(ts_tensor_f32(TS_SHAPE(1, 128), w, (ts_opts){0}), 32);
    CHECK_OK();
    CHECK(q && ts_dtype_of(q) == TS_QUINT4X2 && ts_q_group_size(q) == 32);
    double s[4];
    int64_t z[4];
    CHECK_EQ(ts_copy_to_host(ts_q_per_channel_scales(q), s, sizeof s), TS_OK);
    CHECK_EQ(ts_copy_to_host(ts_q_per_channel_zero_points(q), z, sizeof z), TS_OK);
    /* 8 / 7.5 = 1.0666667 -> 1092 * 2^-10 = 1.06640625 (CHECK_EQ compares as integers) */
    CHECK(s[0] == 1.06640625);
    CHECK(s[1] == 0x1p-23);
    CHECK(s[2] == 7 * 0x1p-24);
    CHECK(s[3] == 65472.0);
    CHECK(z[0] == 8 && z[1] == 8 && z[2] == 8 && z[3] == 8);
    uint8_t r[128];
    CHECK_EQ(ts_copy_to_host(ts_int_repr(q), r, sizeof r), TS_OK);
    for (int i = 0; i < 128; i++) { /* q + 8 = clamp(round_half_even(w * (1 / s)), -8, 7) + 8 */
        const float t = nearbyintf(w[i] * (1.0f / (float)s[i / 32]));
        CHECK_EQ(r[i], (uint8_t)((t < -8 ? -8 : t > 7 ? 7 : t) + 8));
    }
    /* 7.5 / s = 7.03 -> 7; -8 / s = -7.5018 -> -8 (with the unrounded 1.0666667: -7.4999995 -> -7,
     * llama.cpp's way: quantize with the float32 scale, store it as float16) */
    CHECK(r[0] == 15 && r[1] == 0 && r[2] == 10 && r[5] == 8);
    CHECK(r[64] == 15 && r[65] == 6); /* 3e-6 / 4.17e-7 = 7.19 -> 7; -1e-6 -> -2.4 -> -2 */
    CHECK(r[96] == 1 && r[97] == 8);  /* -491000 / 65472 = -7.4994 -> -7; 0.458 -> 0 */
    /* dequantized: exactly (q - 8) * the stored scale */
    float dq[128];
    CHECK_EQ(ts_copy_to_host(ts_dequantize(q), dq, sizeof dq), TS_OK);
    for (int i = 0; i < 128; i++) CHECK(dq[i] == (float)(((int)r[i] - 8) * s[i / 32]));
    ts_scope_end();
}

static void refusals(void) {
    ts_scope_begin();
    float v[8 * 64] = {0};
    ts_tensor *wf = ts_tensor_f32(TS_SHAPE(8, 64), v, (ts_opts){0});
    ts_tensor *w = ts_quantize_int8_weight_only(wf),
              *x = ts_tensor_f32(TS_SHAPE(2, 64), v, (ts_opts){0});
    CHECK_OK();
    CHECK(!ts_quantize_int4_symmetric_weight(wf, 48));
    CHECK_ERR_HAS(TS_ERR_ARG, "quantize_int4_symmetric_weight: group_size must be 32, 64");
    CHECK(!ts_quantize_int4_symmetric_weight(ts_tensor_f32(TS_SHAPE(2, 96), v, (ts_opts){0}), 64));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "does not divide in_features");
    v[64 + 40] = 491400.0f; /* row 1, group 1: 491400 / 7.5 = 65520 rounds to float16's inf */
    CHECK(!ts_quantize_int4_symmetric_weight(ts_tensor_f32(TS_SHAPE(8, 64), v, (ts_opts){0}), 32));
    CHECK_ERR_HAS(TS_ERR_ARG, "weight row 1, group 1: max |w| 491400 needs a scale over float16's");
    v[64 + 40] = 0;
    CHECK(!ts_int8_dynamic_activation_linear(ts_to_dtype(x, TS_F64), w, NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "int8_dynamic_activation_linear: input must be float32");
    CHECK(!ts_int8_dynamic_activation_linear(ts_to_dtype(x, TS_BF16), w, NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "input must be float32");
    CHECK(!ts_int8_dynamic_activation_linear(ts_tensor_f32(TS_SHAPE(2, 32), v, (ts_opts){0}), w,
                                             NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "weight must be [out_features, 32]");
    CHECK(!ts_int8_dynamic_activation_linear(x, wf, NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "weight must be qint8");
    CHECK(!ts_int8_dynamic_activation_linear(x, w, ts_tensor_f32(TS_SHAPE(7), v, (ts_opts){0})));
    CHECK_ERR_HAS(TS_ERR_ARG, "bias must be float32 [8]");
    CHECK(!ts_int8_dynamic_activation_linear(x, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "weight");
    ts_tensor *xg = ts_tensor_f32(TS_SHAPE(2, 64), v, (ts_opts){0});
    ts_set_requires_grad(xg, true);
    CHECK(!ts_int8_dynamic_activation_linear(xg, w, NULL));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "no gradient through the activations' rounding");
    ts_tensor *big = ts_zeros(TS_SHAPE(1, 65537), (ts_opts){0});
    CHECK(!ts_int8_dynamic_activation_linear(big, w, NULL));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "in_features 65537 is over 65536");
    ts_scope_end();
}

int main(void) {
    atomic_store(&tsi_cpu_isa_chosen, (int)tsi_cpu_isa_host());
    for (int k = TSI_QGEMM_AVX2; k <= TSI_QGEMM_AVX512VNNI; k++) {
        atomic_store(&tsi_qgemm_kind_cap, k);
        if (tsi_qgemm_kind_get() == (tsi_qgemm_kind)k) isa_kind[n_isa++] = (tsi_qgemm_kind)k;
    }
    reset_isa();
    fprintf(stderr, "test_qdynamic_act: kernels");
    for (int i = 0; i < n_isa; i++) fprintf(stderr, " %s", tsi_qgemm_kind_name(isa_kind[i]));
    fprintf(stderr, "\n");
    recipe();
    act_rule();
    shapes();
    refusals();
    return ts_test_finish();
}
