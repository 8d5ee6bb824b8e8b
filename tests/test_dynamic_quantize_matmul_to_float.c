/* test_dynamic_quantize_matmul_to_float.c — ts_dynamic_quantize_matmul_to_float
 * (include/tessera/quant.h, src/ops/matmul_integer_to_float.c; the quantizing pass with row sums
 * of src/ops/dynamic_quantize_linear.c, the given sums of src/backend/cpu/kern_qlinear.c): ONNX's
 * DynamicQuantizeLinear read by several MatMulInteger -> Cast -> Mul [-> Add] chains, in one call.
 *
 * Reference, written out here on the host: DynamicQuantizeLinear's definition step by step in
 * float32 (the range with 0, the scale, the zero point, rint(x / scale) + zp clamped), the exact
 * sums in int64 wrapped to int32, then (float)acc * (scale * b_scale[n]) (+ bias[n]), each step one
 * float32 rounding (ISO C: no fma). Every output is compared bit for bit, and against the two
 * public ops run one after the other. Inputs: random, all positive (zero point 0), all negative
 * (255), all zero (scale 1), and a scale of exactly 1/16 with values on the half steps (ties to
 * even); K a multiple of 4 (the quantized rows read in place with their sums) or not, M below and
 * above the 8-row tile, three products of other widths, b uint8 and int8, zero points absent /
 * scalar / per column, bias or none, a 1-D and a 3-D x. Under the avx512, avx2 and generic ISAs
 * and on sim:0 (the two ops there); NaN and a transposed x take the two ops too; the refusals. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "tessera/quant.h"
#include "ts_test.h"

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static uint32_t next_u32(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng >> 33);
}

typedef enum { V_RANDOM, V_POSITIVE, V_NEGATIVE, V_ZERO, V_TIES } vkind;

typedef struct dcase {
    int64_t m, k;
    int rank; /* 1, 2 or 3 ([2, m / 2, k]) */
    vkind values;
} dcase;

#define NPROD 3
static const int64_t widths[NPROD] = {5, 48, 33};

/* DynamicQuantizeLinear written out (x finite) */
static void dql_reference(const float *x, int64_t n, uint8_t *y, float *scale, uint8_t *zp) {
    float lo = x[0], hi = x[0];
    for (int64_t i = 1; i < n; i++) lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
    hi = hi > 0.0f ? hi : 0.0f;
    lo = lo < 0.0f ? lo : 0.0f;
    const float s = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    float z = -lo / s;
    z = rintf(z < 0.0f ? 0.0f : z > 255.0f ? 255.0f : z);
    for (int64_t i = 0; i < n; i++) {
        float v = rintf(x[i] / s) + z;
        v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
        y[i] = (uint8_t)v;
    }
    *scale = s, *zp = (uint8_t)z;
}

static bool same_bits(ts_tensor *got, const float *want, int64_t n, const char *what) {
    if (!got || ts_numel(got) != n || ts_dtype_of(got) != TS_F32) {
        ts_test_failf(__FILE__, __LINE__, "%s: missing or mis-sized result%s", what,
                      ts_test_error_str());
        return false;
    }
    float *g = malloc(sizeof *g * (size_t)n);
    ts_copy_to_host(ts_contiguous(ts_to(got, ts_cpu())), g, sizeof *g * (size_t)n);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (memcmp(&g[i], &want[i], sizeof *g) != 0) bad = i;
    if (bad >= 0)
        ts_test_failf(__FILE__, __LINE__, "%s: element %lld is %.9g, the reference %.9g", what,
                      (long long)bad, g[bad], want[bad]);
    free(g);
    return bad < 0;
}

static void fill(float *x, int64_t n, vkind v) {
    for (int64_t i = 0; i < n; i++) {
        const float u = (float)(next_u32() % 100000) / 100000.0f;
        x[i] = v == V_RANDOM     ? -3.0f + 5.0f * u
               : v == V_POSITIVE ? 0.5f + 4.0f * u
               : v == V_NEGATIVE ? -0.25f - 2.0f * u
               : v == V_ZERO     ? 0.0f
                                 : ((float)(int)(next_u32() % 255) - 128.0f + 0.5f) * 0.0625f;
    }
    if (v == V_TIES && n >= 2) /* the range -8 .. 7.9375: scale (255 / 16) / 255 = 1/16 exactly */
        x[0] = -8.0f, x[n - 1] = 7.9375f;
}

static void run_case(const dcase *c, ts_device dev, const char *tag) {
    char what[200];
    ts_scope_begin();
    const int64_t m = c->rank == 1 ? 1 : c->m, k = c->k;
    float *x = malloc(sizeof *x * (size_t)(m * k));
    uint8_t *q = malloc((size_t)(m * k));
    fill(x, m * k, c->values);
    float s;
    uint8_t z;
    dql_reference(x, m * k, q, &s, &z);
    const ts_shape xs = c->rank == 1   ? TS_SHAPE(k)
                        : c->rank == 2 ? TS_SHAPE(m, k)
                                       : TS_SHAPE(2, m / 2, k);
    const ts_opts o = {.device = dev};
    ts_tensor *tx = ts_from_data(xs, TS_F32, x, o);
    ts_tensor *b[NPROD], *bs[NPROD], *bz[NPROD], *bias[NPROD], *out[NPROD];
    float *want[NPROD];
    for (int p = 0; p < NPROD; p++) {
        const int64_t n = widths[p];
        const bool bu8 = p == 1;
        uint8_t *bb = malloc((size_t)(k * n));
        int32_t *zp = calloc((size_t)n, sizeof *zp);
        uint8_t zb[64];
        float sc[64], bi[64];
        for (int64_t i = 0; i < k * n; i++) bb[i] = (uint8_t)(next_u32() % 256);
        for (int64_t j = 0; j < n; j++) {
            zp[j] = p == 0 ? 0 : p == 1 ? 128 : (int32_t)j % 9 - 4; /* none, scalar, per column */
            zb[j] = (uint8_t)zp[j];
            sc[j] = (float)(1e-3 * (1 + next_u32() % 1000) / 7);
            bi[j] = (float)((int)(next_u32() % 2001) - 1000) / 333.0f;
        }
        if (p != 2) /* per tensor */
            for (int64_t j = 1; j < n; j++) sc[j] = sc[0];
        b[p] = ts_from_data(TS_SHAPE(k, n), bu8 ? TS_U8 : TS_I8, bb, o);
        bs[p] = p == 2 ? ts_from_data(TS_SHAPE(n), TS_F32, sc, o)
                       : ts_from_data(TS_SHAPE(), TS_F32, sc, o);
        bz[p] = p == 0   ? NULL
                : p == 1 ? ts_from_data(TS_SHAPE(), TS_U8, zb, o)
                         : ts_from_data(TS_SHAPE(n), TS_I8, zb, o);
        bias[p] = p == 1 ? NULL : ts_from_data(TS_SHAPE(n), TS_F32, bi, o);
        want[p] = malloc(sizeof *want[p] * (size_t)(m * n));
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                int64_t acc = 0;
                for (int64_t t = 0; t < k; t++) {
                    const int32_t bv = bu8 ? bb[t * n + j] : (int8_t)bb[t * n + j];
                    acc += (int64_t)(q[i * k + t] - z) * (bv - zp[j]);
                }
                const float mul = s * sc[j];
                float v = (float)(int32_t)(uint32_t)(uint64_t)acc * mul;
                if (p != 1) v = v + bi[j];
                want[p][i * n + j] = v;
            }
        free(bb), free(zp);
    }
    snprintf(what, sizeof what, "%s m %lld k %lld rank %d values %d", tag, (long long)m,
             (long long)k, c->rank, (int)c->values);
    for (int r = 0; r < 2; r++) { /* the second: the weights' panels from the cache */
        CHECK(ts_dynamic_quantize_matmul_to_float(tx, NPROD, b, bs, bz, bias, out) == TS_OK);
        for (int p = 0; p < NPROD; p++) {
            CHECK(same_bits(out[p], want[p], m * widths[p], what));
            CHECK(out[p] && ts_ndim(out[p]) == xs.ndim && ts_size(out[p], -1) == widths[p]);
        }
    }
    /* the two public ops one after the other: the same bits */
    ts_tensor *ts_ = NULL, *tz = NULL, *ty = ts_dynamic_quantize_linear(tx, &ts_, &tz);
    for (int p = 0; p < NPROD; p++)
        CHECK(same_bits(ts_matmul_integer_to_float(ty, ts_, tz, b[p], bs[p], bz[p], bias[p]),
                        want[p], m * widths[p], what));
    for (int p = 0; p < NPROD; p++) free(want[p]);
    free(x), free(q);
    CHECK_OK();
    ts_scope_end();
}

static const dcase cases[] = {
    {1, 768, 2, V_RANDOM},  /* BERT's row: rows read in place with their sums */
    {3, 13, 2, V_POSITIVE}, /* K not a multiple of 4: the kernel pads, sums again */
    {8, 64, 2, V_NEGATIVE}, {9, 31, 2, V_TIES},    {20, 68, 3, V_RANDOM},   {16, 256, 2, V_TIES},
    {5, 40, 2, V_ZERO},     {1, 100, 1, V_RANDOM}, {33, 36, 2, V_POSITIVE}, {12, 17, 3, V_NEGATIVE},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

static void test_isas(void) {
    const ts_cpu_isa saved = ts_cpu_isa_get(), host = tsi_cpu_isa_host();
    const ts_cpu_isa isas[3] = {TS_ISA_AVX512, TS_ISA_AVX2, TS_ISA_GENERIC};
    for (int i = 0; i < 3; i++) {
        if (isas[i] > host) continue;
        atomic_store(&tsi_cpu_isa_chosen, (int)isas[i]);
        for (int c = 0; c < N_CASES; c++) run_case(&cases[c], ts_cpu(), tsi_cpu_isa_name(isas[i]));
    }
    atomic_store(&tsi_cpu_isa_chosen, (int)saved);
}

static void test_sim(void) {
    for (int c = 0; c < 4; c++) run_case(&cases[c], ts_sim(0), "sim:0");
}

/* the routes that run the two ops: a NaN in x, a transposed x; the same bits as those ops */
static void test_other_routes(void) {
    ts_scope_begin();
    float x[6 * 8];
    int8_t w[8 * 4];
    for (int i = 0; i < 48; i++) x[i] = (float)((int)(next_u32() % 200) - 100) / 37.0f;
    for (int i = 0; i < 32; i++) w[i] = (int8_t)(next_u32() % 256 - 128);
    const float one = 0.25f;
    ts_tensor *b = ts_from_data(TS_SHAPE(8, 4), TS_I8, w, (ts_opts){0});
    ts_tensor *s = ts_from_data(TS_SHAPE(), TS_F32, &one, (ts_opts){0});
    for (int t = 0; t < 2; t++) {
        float xv[48];
        memcpy(xv, x, sizeof xv);
        if (t == 0) xv[5] = NAN;
        ts_tensor *tx =
            t == 0 ? ts_from_data(TS_SHAPE(6, 8), TS_F32, xv, (ts_opts){0})
                   : ts_transpose(ts_from_data(TS_SHAPE(8, 6), TS_F32, xv, (ts_opts){0}), 0, 1);
        ts_tensor *out = NULL, *qs = NULL, *qz = NULL;
        CHECK(ts_dynamic_quantize_matmul_to_float(tx, 1, &b, &s, NULL, NULL, &out) == TS_OK);
        ts_tensor *y = ts_dynamic_quantize_linear(tx, &qs, &qz);
        ts_tensor *want = ts_matmul_integer_to_float(y, qs, qz, b, s, NULL, NULL);
        float g[24], e[24];
        CHECK(out && want && ts_copy_to_host(ts_contiguous(out), g, sizeof g) == TS_OK &&
              ts_copy_to_host(ts_contiguous(want), e, sizeof e) == TS_OK);
        CHECK(memcmp(g, e, sizeof g) == 0);
    }
    CHECK_OK();
    ts_scope_end();
}

static void test_refusals(void) {
    ts_scope_begin();
    uint8_t u[12] = {0};
    float f[12] = {0}, one = 1.0f;
    ts_tensor *x = ts_from_data(TS_SHAPE(2, 6), TS_F32, f, (ts_opts){0});
    ts_tensor *b = ts_from_data(TS_SHAPE(6, 2), TS_I8, u, (ts_opts){0});
    ts_tensor *s = ts_from_data(TS_SHAPE(), TS_F32, &one, (ts_opts){0});
    ts_tensor *out[2] = {x, x};
    ts_tensor *bb[2] = {b, b}, *ss[2] = {s, s};
    CHECK(ts_dynamic_quantize_matmul_to_float(ts_to_dtype(x, TS_U8), 1, bb, ss, NULL, NULL, out) ==
          TS_ERR_DTYPE);
    CHECK_ERR_HAS(TS_ERR_DTYPE, "dynamic_quantize_matmul_to_float: x must be float32");
    CHECK(out[0] == NULL); /* every output NULL on an error */
    CHECK(ts_dynamic_quantize_matmul_to_float(x, 0, bb, ss, NULL, NULL, out) == TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "count >= 1");
    ts_tensor *b4[2] = {b, ts_reshape(b, TS_SHAPE(4, 3))};
    CHECK(ts_dynamic_quantize_matmul_to_float(x, 2, b4, ss, NULL, NULL, out) == TS_ERR_SHAPE);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "a [.., K] and b [K, N]");
    CHECK(out[0] == NULL && out[1] == NULL);
    ts_tensor *bi[2] = {NULL, s};
    CHECK(ts_dynamic_quantize_matmul_to_float(x, 2, bb, ss, NULL, bi, out) == TS_ERR_SHAPE);
    CHECK_ERR_HAS(TS_ERR_SHAPE, "bias must be float32 of 2 values");
    ts_tensor *sn[2] = {s, NULL};
    CHECK(ts_dynamic_quantize_matmul_to_float(x, 2, bb, sn, NULL, NULL, out) == TS_ERR_ARG);
    CHECK_ERR_HAS(TS_ERR_ARG, "b_scale is NULL");
    ts_tensor *bias = ts_from_data(TS_SHAPE(2), TS_F32, f, (ts_opts){0}), *bg[2] = {bias, bias};
    ts_set_requires_grad(bias, true);
    CHECK(ts_dynamic_quantize_matmul_to_float(x, 2, bb, ss, NULL, bg, out) == TS_ERR_UNSUPPORTED);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "no gradient");
    /* x requiring grad is no error: its quantization has no gradient */
    ts_tensor *xg = ts_from_data(TS_SHAPE(2, 6), TS_F32, f, (ts_opts){0});
    ts_set_requires_grad(xg, true);
    CHECK(ts_dynamic_quantize_matmul_to_float(xg, 2, bb, ss, NULL, NULL, out) == TS_OK);
    CHECK(out[0] && out[1] && !ts_requires_grad(out[0]));
    ts_tensor *bsim[2] = {b, ts_to(b, ts_sim(0))};
    CHECK(ts_dynamic_quantize_matmul_to_float(x, 2, bsim, ss, NULL, NULL, out) == TS_ERR_DEVICE);
    CHECK_ERR_HAS(TS_ERR_DEVICE, "same device");
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    ts_sim_configure(1, 0);
    test_isas();
    test_sim();
    test_other_routes();
    test_refusals();
    return ts_test_finish();
}
