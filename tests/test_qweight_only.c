/* test_qweight_only.c — weight-only quantized linear layers (ts_weight_only_linear, torchao's
 * int8_weight_only / int4_weight_only; include/tessera/quant.h).
 *
 * Reference: y = x @ dequant(w)^T + bias in float64 over the dequantized weights (ts_dequantize),
 * on the portable kernel and on AVX-512 (the ISA switched inside the run). The kernels sum
 * x * (q - zp) in float32 per group and scale by the float32 scale, so each output may differ from
 * the float64 value by (K + groups + 8) * 2^-24 * (sum_k |x_k w_nk| + |bias_n|): the float32
 * summation bound plus the scale's and the dequantized weight's roundings. The gradient of x is
 * g @ dequant(w) through ts_matmul, bounded the same way with N terms. */
#if defined(__unix__)
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <sys/mman.h>
#include <unistd.h>
#endif
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "tessera/quant.h"
#include "tessera/reductions.h"
#include "ts_test.h"

static uint64_t rng = 88172645463325252ull;
static float urand(void) { /* [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *randv(int64_t n, float scale, float shift) {
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = urand() * scale + shift;
    return v;
}

static float *host(ts_tensor *t) {
    ts_scope_begin();
    const int64_t n = ts_numel(t);
    float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    if (ts_copy_to_host(ts_contiguous(ts_to(t, ts_cpu())), h, (size_t)n * sizeof *h) != TS_OK)
        memset(h, 0xff, (size_t)n * sizeof *h); /* NaN: fails every comparison */
    ts_scope_end();
    return h;
}

static const double U = 1.0 / 16777216.0; /* 2^-24 */

/* y [M, N] against float64 over wd [N, K] (the dequantized weight); false on the first miss */
static bool check_y(const float *y, const float *x, const float *wd, const float *b, int64_t M,
                    int64_t N, int64_t K, int64_t groups, const char *what) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double r = b ? b[n] : 0, s = b ? fabs(b[n]) : 0;
            for (int64_t k = 0; k < K; k++) {
                r += (double)x[m * K + k] * wd[n * K + k];
                s += fabs((double)x[m * K + k] * wd[n * K + k]);
            }
            const double tol = (double)(K + groups + 8) * U * s + 1e-30;
            if (!(fabs(y[m * N + n] - r) <= tol)) {
                fprintf(stderr, "%s: y[%lld][%lld] = %.9g, float64 %.9g (tol %.3g)\n", what,
                        (long long)m, (long long)n, y[m * N + n], r, tol);
                return false;
            }
        }
    return true;
}

enum kind { K_INT8, K_INT8_ZP, K_INT8_TENSOR, K_INT4 };

/* a weight of the kind: the recipes, or (zp) per channel with nonzero zero points, or per tensor */
static ts_tensor *make_w(enum kind kd, ts_tensor *wf, int64_t N, int64_t gs) {
    if (kd == K_INT8) return ts_quantize_int8_weight_only(wf);
    if (kd == K_INT4) return ts_quantize_int4_weight_only(wf, gs);
    if (kd == K_INT8_TENSOR) return ts_quantize_per_tensor(wf, 0.0123, -3, TS_QINT8);
    double *s = malloc((size_t)N * sizeof *s);
    int64_t *z = malloc((size_t)N * sizeof *z);
    for (int64_t n = 0; n < N; n++) s[n] = 0.01 + 0.001 * (double)(n % 7), z[n] = n % 9 - 4;
    ts_tensor *q =
        ts_quantize_per_channel(wf, ts_tensor_f64(TS_SHAPE(N), s, (ts_opts){0}),
                                ts_tensor_i64(TS_SHAPE(N), z, (ts_opts){0}), 0, TS_QINT8);
    free(s), free(z);
    return q;
}

/* one shape and kind, with and without bias, on the ISA in use */
static void case_one(enum kind kd, int64_t M, int64_t N, int64_t K, int64_t gs, const char *isa) {
    ts_scope_begin();
    float *xv = randv(M * K, 1.0f, 0.0f), *wv = randv(N * K, 0.05f, kd == K_INT4 ? 0.01f : 0.0f),
          *bv = randv(N, 0.5f, 0.0f);
    ts_tensor *x = ts_tensor_f32(TS_SHAPE(M, K), xv, (ts_opts){0});
    ts_tensor *wf = ts_tensor_f32(TS_SHAPE(N, K), wv, (ts_opts){0});
    ts_tensor *b = ts_tensor_f32(TS_SHAPE(N), bv, (ts_opts){0});
    ts_tensor *w = make_w(kd, wf, N, gs);
    CHECK_OK();
    float *wd = host(ts_dequantize(w));
    const int64_t groups = kd == K_INT4 ? K / gs : 1;
    char what[128];
    for (int wb = 0; wb < 2; wb++) {
        snprintf(what, sizeof what, "%s kind %d M %lld N %lld K %lld gs %lld bias %d", isa, (int)kd,
                 (long long)M, (long long)N, (long long)K, (long long)gs, wb);
        ts_tensor *y = ts_weight_only_linear(x, w, wb ? b : NULL);
        CHECK_OK();
        CHECK(y && ts_ndim(y) == 2 && ts_size(y, 0) == M && ts_size(y, 1) == N);
        float *yv = host(y);
        CHECK(check_y(yv, xv, wd, wb ? bv : NULL, M, N, K, groups, what));
        free(yv);
    }
    free(xv), free(wv), free(bv), free(wd);
    ts_scope_end();
}

static void each_isa(void (*fn)(const char *isa)) {
    for (int isa = 0; isa < 2; isa++) { /* portable, then the best the host has */
        atomic_store(&tsi_cpu_isa_chosen, isa == 0 ? TS_ISA_GENERIC : (int)tsi_cpu_isa_host());
        fn(isa == 0 ? "generic" : tsi_cpu_isa_name(tsi_cpu_isa_host()));
    }
    atomic_store(&tsi_cpu_isa_chosen, -1);
}

static void shapes(const char *isa) {
    /* int8: M = 1 (decoding), small M, odd K and N (vector tails), one big enough for threads */
    const int64_t i8[][3] = {{1, 37, 77},   {1, 5, 16}, {3, 7, 33},  {5, 17, 1},
                             {1, 200, 512}, {9, 4, 15}, {2, 3, 100}, {5, 40, 512}};
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < sizeof i8 / sizeof i8[0]; i++)
            case_one((enum kind)k, i8[i][0], i8[i][1], i8[i][2], 0, isa);
    /* int4: every group size; K a multiple of it (one group, several) */
    const int64_t gss[] = {32, 64, 128, 256};
    for (int g = 0; g < 4; g++) {
        const int64_t gs = gss[g];
        case_one(K_INT4, 1, 37, gs, gs, isa);
        case_one(K_INT4, 1, 9, 3 * gs, gs, isa);
        case_one(K_INT4, 4, 6, 2 * gs, gs, isa);
        case_one(K_INT4, 1, 130, 4 * gs, gs, isa);
        case_one(K_INT4, 3, 50, 512, gs, isa); /* M > 1 over threads */
    }
}

/* x of more dims, and the gradients of x and bias: g @ dequant(w) and g summed */
static void grads(const char *isa) {
    ts_scope_begin();
    const int64_t B = 2, T = 3, N = 11, K = 64;
    float *xv = randv(B * T * K, 1, 0), *wv = randv(N * K, 0.1f, 0), *bv = randv(N, 1, 0),
          *gv = randv(B * T * N, 1, 0);
    for (int kd = 0; kd < 2; kd++) {
        ts_tensor *x = ts_tensor_f32(TS_SHAPE(B, T, K), xv, (ts_opts){0});
        ts_tensor *b = ts_tensor_f32(TS_SHAPE(N), bv, (ts_opts){0});
        ts_set_requires_grad(x, true);
        ts_set_requires_grad(b, true);
        ts_tensor *wf = ts_tensor_f32(TS_SHAPE(N, K), wv, (ts_opts){0});
        ts_tensor *w = kd ? ts_quantize_int4_weight_only(wf, 32) : ts_quantize_int8_weight_only(wf);
        ts_tensor *y = ts_weight_only_linear(x, w, b);
        CHECK(y && ts_ndim(y) == 3 && ts_size(y, 2) == N);
        ts_tensor *g = ts_tensor_f32(TS_SHAPE(B, T, N), gv, (ts_opts){0});
        CHECK_EQ(ts_backward(ts_sum(ts_mul(y, g))), TS_OK);
        float *wd = host(ts_dequantize(w)), *gx = host(ts_grad(x)), *gb = host(ts_grad(b));
        bool ok = true;
        for (int64_t m = 0; m < B * T && ok; m++)
            for (int64_t k = 0; k < K && ok; k++) {
                double r = 0, s = 0;
                for (int64_t n = 0; n < N; n++)
                    r += (double)gv[m * N + n] * wd[n * K + k],
                        s += fabs((double)gv[m * N + n] * wd[n * K + k]);
                ok = fabs(gx[m * K + k] - r) <= (double)(N + 4) * U * s;
                if (!ok)
                    fprintf(stderr, "%s grad x[%lld][%lld] %.9g vs %.9g\n", isa, (long long)m,
                            (long long)k, gx[m * K + k], r);
            }
        CHECK(ok);
        for (int64_t n = 0; n < N; n++) {
            double r = 0, s = 0;
            for (int64_t m = 0; m < B * T; m++) r += gv[m * N + n], s += fabs(gv[m * N + n]);
            CHECK(fabs(gb[n] - r) <= (double)(B * T + 2) * U * s);
        }
        /* the weight takes no gradient: it cannot even ask for one */
        free(wd), free(gx), free(gb);
    }
    free(xv), free(wv), free(bv), free(gv);
    CHECK_OK();
    ts_scope_end();
}

/* the recipes at hand-worked values */
static void recipes(void) {
    ts_scope_begin();
    /* int8: scale = max |w| / 127.5 per row, zero point 0; -max -> -128, +max -> 127 */
    const float w8[] = {0.5f, -1.0f, 0.25f, 0.0f, 2.55f, -0.6f, 1.2f, 0.0f};
    ts_tensor *q = ts_quantize_int8_weight_only(ts_tensor_f32(TS_SHAPE(2, 4), w8, (ts_opts){0}));
    CHECK(q && ts_dtype_of(q) == TS_QINT8 && ts_qscheme_of(q) == TS_PER_CHANNEL_AFFINE);
    double s[2];
    int64_t z[2];
    CHECK_EQ(ts_copy_to_host(ts_q_per_channel_scales(q), s, sizeof s), TS_OK);
    CHECK_EQ(ts_copy_to_host(ts_q_per_channel_zero_points(q), z, sizeof z), TS_OK);
    CHECK_EQ(s[0], (double)(1.0f / 127.5f));
    CHECK_EQ(s[1], (double)(2.55f / 127.5f));
    CHECK(z[0] == 0 && z[1] == 0);
    ts_scope_begin();
    ts_tensor *r = ts_int_repr(q);
    int8_t iv[8];
    CHECK_EQ(ts_copy_to_host(r, iv, sizeof iv), TS_OK);
    /* PyTorch's rounding: nearbyint(w * (1.0f / (float)scale)), clamped */
    for (int i = 0; i < 8; i++) {
        const float t = nearbyintf(w8[i] * (1.0f / (float)s[i / 4]));
        CHECK_EQ(iv[i], (int8_t)(t < -128 ? -128 : t > 127 ? 127 : t));
    }
    CHECK_EQ(iv[4], 127); /* the row's max: 127.5 or so, clamped */
    ts_scope_end();
    /* int4: a group from -1 to 2 -> scale 3 / 15, zero point 5; an all-positive group widened
     * to 0 -> zero point 0; an all-zero group -> scale 1e-6, zero point 0 */
    float w4[96];
    for (int i = 0; i < 32; i++)
        w4[i] = -1.0f + 3.0f * (float)i / 31.0f, w4[32 + i] = 0.5f + (float)i / 62.0f,
        w4[64 + i] = 0;
    ts_tensor *q4 =
        ts_quantize_int4_weight_only(ts_tensor_f32(TS_SHAPE(1, 96), w4, (ts_opts){0}), 32);
    CHECK(q4 && ts_dtype_of(q4) == TS_QUINT4X2 && ts_q_group_size(q4) == 32);
    double s4[3];
    int64_t z4[3];
    CHECK_EQ(ts_copy_to_host(ts_q_per_channel_scales(q4), s4, sizeof s4), TS_OK);
    CHECK_EQ(ts_copy_to_host(ts_q_per_channel_zero_points(q4), z4, sizeof z4), TS_OK);
    CHECK_EQ(s4[0], (double)(3.0f / 15.0f));
    CHECK_EQ(z4[0], 5);
    CHECK_EQ(s4[1], (double)(1.0f / 15.0f));
    CHECK_EQ(z4[1], 0);
    CHECK_EQ(s4[2], (double)1e-6f);
    CHECK_EQ(z4[2], 0);
    /* every value within half a step of its dequantized value */
    float *d = host(ts_dequantize(q4));
    for (int i = 0; i < 96; i++) CHECK(fabs(d[i] - w4[i]) <= 0.5 * s4[i / 32] * (1 + 1e-6));
    free(d);
    CHECK_OK();
    ts_scope_end();
}

/* bfloat16 input: the float32 result rounded to bfloat16 once */
static void bf16(void) {
    ts_scope_begin();
    float *xv = randv(2 * 64, 1, 0), *wv = randv(8 * 64, 0.1f, 0);
    ts_tensor *x = ts_to_dtype(ts_tensor_f32(TS_SHAPE(2, 64), xv, (ts_opts){0}), TS_BF16);
    ts_tensor *w =
        ts_quantize_int4_weight_only(ts_tensor_f32(TS_SHAPE(8, 64), wv, (ts_opts){0}), 64);
    ts_tensor *y = ts_weight_only_linear(x, w, NULL);
    CHECK(y && ts_dtype_of(y) == TS_BF16);
    float *yb = host(ts_to_dtype(y, TS_F32)),
          *yf = host(ts_to_dtype(
              ts_to_dtype(ts_weight_only_linear(ts_to_dtype(x, TS_F32), w, NULL), TS_BF16),
              TS_F32));
    CHECK(memcmp(yb, yf, 16 * sizeof(float)) == 0);
    free(xv), free(wv), free(yb), free(yf);
    CHECK_OK();
    ts_scope_end();
}

/* sim runs the cpu kernels; the same numbers */
static void devices(void) {
    ts_sim_configure(1, 0);
    ts_scope_begin();
    float *xv = randv(3 * 64, 1, 0), *wv = randv(5 * 64, 0.1f, 0);
    ts_tensor *x = ts_tensor_f32(TS_SHAPE(3, 64), xv, (ts_opts){0});
    ts_tensor *wf = ts_tensor_f32(TS_SHAPE(5, 64), wv, (ts_opts){0});
    for (int kd = 0; kd < 2; kd++) {
        ts_tensor *wc =
            kd ? ts_quantize_int4_weight_only(wf, 32) : ts_quantize_int8_weight_only(wf);
        ts_tensor *ws = kd ? ts_quantize_int4_weight_only(ts_to(wf, ts_sim(0)), 32)
                           : ts_quantize_int8_weight_only(ts_to(wf, ts_sim(0)));
        CHECK(ws && ts_device_equal(ts_device_of(ws), ts_sim(0)));
        float *yc = host(ts_weight_only_linear(x, wc, NULL)),
              *ys = host(ts_weight_only_linear(ts_to(x, ts_sim(0)), ws, NULL));
        CHECK(memcmp(yc, ys, 15 * sizeof(float)) == 0);
        free(yc), free(ys);
        /* mixed devices */
        CHECK(!ts_weight_only_linear(x, ws, NULL));
        CHECK_ERR_HAS(TS_ERR_DEVICE, "weight_only_linear");
    }
    ts_tensor *xm = ts_empty(TS_SHAPE(3, 64), (ts_opts){.device = ts_meta()});
    CHECK(!ts_quantize_int8_weight_only(ts_empty(TS_SHAPE(5, 64), (ts_opts){.device = ts_meta()})));
    CHECK_ERR(TS_ERR_DEVICE);
    (void)xm;
    free(xv), free(wv);
    ts_scope_end();
}

static void refusals(void) {
    ts_scope_begin();
    float *xv = randv(2 * 64, 1, 0), *wv = randv(4 * 64, 0.1f, 0);
    ts_tensor *x = ts_tensor_f32(TS_SHAPE(2, 64), xv, (ts_opts){0});
    ts_tensor *wf = ts_tensor_f32(TS_SHAPE(4, 64), wv, (ts_opts){0});
    ts_tensor *w8 = ts_quantize_int8_weight_only(wf), *w4 = ts_quantize_int4_weight_only(wf, 32);
    /* a float weight, a per-group qint8 one, a quint4x2 with group 16 */
    CHECK(!ts_weight_only_linear(x, wf, NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "weight_only_linear: weight must be");
    double s16[16];
    int64_t z16[16] = {0};
    for (int i = 0; i < 16; i++) s16[i] = 0.01;
    ts_tensor *S = ts_tensor_f64(TS_SHAPE(4, 4), s16, (ts_opts){0}),
              *Z = ts_tensor_i64(TS_SHAPE(4, 4), z16, (ts_opts){0});
    CHECK(!ts_weight_only_linear(x, ts_quantize_per_group(wf, S, Z, 16, TS_QINT8), NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "per group");
    CHECK(!ts_weight_only_linear(x, ts_quantize_per_group(wf, S, Z, 16, TS_QUINT4X2), NULL));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "group size");
    /* per channel along the other axis */
    double s64[64];
    int64_t z64[64] = {0};
    for (int i = 0; i < 64; i++) s64[i] = 0.01;
    CHECK(!ts_weight_only_linear(
        x,
        ts_quantize_per_channel(wf, ts_tensor_f64(TS_SHAPE(64), s64, (ts_opts){0}),
                                ts_tensor_i64(TS_SHAPE(64), z64, (ts_opts){0}), 1, TS_QINT8),
        NULL));
    CHECK_ERR(TS_ERR_DTYPE);
    /* K mismatch, bias shape and dtype, input dtype and rank */
    ts_tensor *x63 = ts_zeros(TS_SHAPE(2, 63), (ts_opts){0});
    CHECK(!ts_weight_only_linear(x63, w8, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "input's last dim");
    CHECK(!ts_weight_only_linear(x, w4, ts_zeros(TS_SHAPE(5), (ts_opts){0})));
    CHECK_ERR_HAS(TS_ERR_ARG, "bias");
    CHECK(!ts_weight_only_linear(x, w4, ts_zeros(TS_SHAPE(4), (ts_opts){.dtype = TS_F64})));
    CHECK_ERR_HAS(TS_ERR_ARG, "bias");
    CHECK(!ts_weight_only_linear(ts_to_dtype(x, TS_F64), w8, NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "input must be float32");
    CHECK(!ts_weight_only_linear(NULL, w8, NULL));
    ts_error_clear();
    /* the recipes: group size, K not a multiple, NaN / inf, rank, dtype */
    CHECK(!ts_quantize_int4_weight_only(wf, 48));
    CHECK_ERR_HAS(TS_ERR_ARG, "group_size");
    CHECK(!ts_quantize_int4_weight_only(ts_zeros(TS_SHAPE(4, 96), (ts_opts){0}), 64));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "does not divide");
    float bad[4] = {1, NAN, 0, 2};
    CHECK(!ts_quantize_int8_weight_only(ts_tensor_f32(TS_SHAPE(2, 2), bad, (ts_opts){0})));
    CHECK_ERR_HAS(TS_ERR_ARG, "NaN");
    bad[1] = INFINITY;
    CHECK(!ts_quantize_int8_weight_only(ts_tensor_f32(TS_SHAPE(2, 2), bad, (ts_opts){0})));
    CHECK_ERR_HAS(TS_ERR_ARG, "inf");
    CHECK(!ts_quantize_int8_weight_only(ts_zeros(TS_SHAPE(2, 2, 2), (ts_opts){0})));
    CHECK_ERR_HAS(TS_ERR_ARG, "float32 [out_features, in_features]");
    CHECK(!ts_quantize_int8_weight_only(w8));
    CHECK_ERR(TS_ERR_DTYPE);
    /* the gate: other ops still refuse the weight */
    CHECK(!ts_add(ts_dequantize(w4), w4));
    CHECK_ERR(TS_ERR_DTYPE);
    free(xv), free(wv);
    ts_scope_end();
}

/* A GPT with its linears weight-only int4 (ts_gpt_quantize_weight_only) against the float GPT
 * whose linears hold the dequantized weights: the same function, so the logits agree up to float32
 * summation order (K <= 256 terms a product, two blocks with layer norms: 1e-4 of the largest
 * logit covers it; a wrong composition moves them by O(1)). The token embedding is tied to the
 * head, so its rows are made exactly representable: values (k - 8) / 16 with 0 and 15 in every
 * group of 32 quantize to scale 1/16, zero point 8, and dequantize to themselves. */
static void gpt_quantized(void) {
    ts_scope_begin();
    const ts_gpt_config c = {
        .vocab_size = 16, .context = 8, .n_layer = 2, .n_head = 2, .n_embd = 64};
    ts_manual_seed(3);
    ts_module *m1 = ts_gpt_new(c), *m2 = ts_gpt_new(c);
    CHECK(m1 && m2);
    float e[16 * 64];
    for (int i = 0; i < 16 * 64; i++) {
        const int k = i % 32 == 0 ? 0 : i % 32 == 1 ? 15 : (int)((urand() + 1) * 7.99f);
        e[i] = (float)(k - 8) / 16.0f;
    }
    ts_no_grad_begin();
    ts_copy_(ts_module_get(m1, "tok_emb.weight"), ts_tensor_f32(TS_SHAPE(16, 64), e, (ts_opts){0}));
    ts_tensor_list p1 = ts_module_named_parameters(m1), p2 = ts_module_named_parameters(m2);
    CHECK_EQ(p1.n, p2.n);
    for (int i = 0; i < p1.n && i < p2.n; i++) {
        const char *n = p1.names[i];
        const bool lin = strstr(n, "in_proj_weight") || strstr(n, "out_proj.weight") ||
                         strstr(n, "linear1.weight") || strstr(n, "linear2.weight");
        ts_copy_(p2.tensors[i], lin ? ts_dequantize(ts_quantize_int4_weight_only(p1.tensors[i], 32))
                                    : p1.tensors[i]);
    }
    ts_tensor_list_free(&p1);
    ts_tensor_list_free(&p2);
    ts_no_grad_end();
    ts_module_eval(m1);
    ts_module_eval(m2);
    CHECK_EQ(ts_gpt_quantize_weight_only(m1, (ts_gpt_quant_opts){.bits = 4, .group_size = 32}),
             TS_OK);
    CHECK_EQ(ts_gpt_quantize_weight_only(m1, (ts_gpt_quant_opts){.bits = 4, .group_size = 32}),
             TS_ERR_STATE);
    ts_error_clear();
    const int64_t ids[8] = {1, 5, 9, 3, 15, 0, 7, 2};
    ts_tensor *idx = ts_tensor_i64(TS_SHAPE(1, 8), ids, (ts_opts){0});
    float *l1 = host(ts_forward(m1, idx)), *l2 = host(ts_forward(m2, idx));
    double big = 0, diff = 0;
    for (int i = 0; i < 8 * 16; i++)
        big = fmax(big, fabs(l2[i])), diff = fmax(diff, fabs((double)l1[i] - l2[i]));
    CHECK(big > 0.1 && diff <= 1e-4 * big);
    if (!(diff <= 1e-4 * big))
        fprintf(stderr, "gpt int4: logits differ by %g (max %g)\n", diff, big);
    /* training mode is refused */
    ts_module_train(m1, true);
    CHECK(!ts_forward(m1, idx));
    CHECK_ERR_HAS(TS_ERR_STATE, "eval mode");
    free(l1), free(l2);
    ts_module_free(m1);
    ts_module_free(m2);
    ts_scope_end();
}

#if defined(__unix__)
/* `bytes` ending exactly where an unreadable page begins: a read past the end faults */
static void *guarded(size_t bytes, void **base, size_t *len) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (bytes + pg - 1) / pg * pg;
    *len = body + pg;
    char *p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    mprotect(p + body, pg, PROT_NONE);
    *base = p;
    return p + body - bytes;
}

/* the kernel called directly with N = 5 (a partial block of 1 after a full one of 4) and the
 * weights, scales and zero points each ending at a guard page: the last block reads its one row
 * only (a kernel that reads a full block's rows faults); the values small integers and powers of
 * two, so every sum is exact in float32 */
static void partial_block(const char *isa) {
    enum { N = 5, K = 32, M = 2 };
    for (int int4 = 0; int4 < 2; int4++) {
        const size_t wb = int4 ? (size_t)N * K / 2 : (size_t)N * K;
        void *b[3];
        size_t l[3];
        uint8_t *w = guarded(wb, &b[0], &l[0]);
        float *sc = guarded(N * sizeof(float), &b[1], &l[1]);
        int32_t *zp = guarded(N * sizeof(int32_t), &b[2], &l[2]);
        CHECK(w && sc && zp);
        if (!w || !sc || !zp) return;
        float x[M * K], y[M * N];
        int q[N][K];
        for (int i = 0; i < M * K; i++) x[i] = (float)(i % 7 - 3);
        for (int n = 0; n < N; n++) {
            sc[n] = ldexpf(1.0f, n - 2), zp[n] = int4 ? n + 3 : n - 2;
            for (int k = 0; k < K; k++)
                q[n][k] = int4 ? (n * 5 + k * 3) % 16 : (n * 37 + k * 11) % 256 - 128;
            for (int k = 0; k < K; k++) {
                if (!int4)
                    w[n * K + k] = (uint8_t)(int8_t)q[n][k];
                else if (k % 2 == 0)
                    w[n * K / 2 + k / 2] = (uint8_t)(q[n][k] | q[n][k + 1] << 4);
            }
        }
        const ts_wo_args a = {.m = M,
                              .n = N,
                              .k = K,
                              .int4 = int4,
                              .group_size = K,
                              .x = x,
                              .w = w,
                              .scales = sc,
                              .zero_points = zp,
                              .y = y};
        CHECK(tsi_cpu_wo_linear(NULL, 0, &a));
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double r = 0;
                for (int k = 0; k < K; k++) r += (double)x[m * K + k] * (q[n][k] - zp[n]);
                if (!(y[m * N + n] == (float)(r * sc[n])))
                    fprintf(stderr, "%s int4 %d y[%d][%d] %.9g vs %.9g\n", isa, int4, m, n,
                            (double)y[m * N + n], r * sc[n]);
                CHECK(y[m * N + n] == (float)(r * sc[n]));
            }
        for (int i = 0; i < 3; i++) munmap(b[i], l[i]);
    }
}
#endif

int main(void) {
    gpt_quantized();
#if defined(__unix__)
    each_isa(partial_block); /* after the first op: the kernel's scratch needs the library up */
#endif
    recipes();
    each_isa(shapes);
    each_isa(grads);
    bf16();
    devices();
    refusals();
    return ts_test_finish();
}
