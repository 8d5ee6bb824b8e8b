/* test_matmul_integer_to_float.c — ts_matmul_integer_to_float (include/tessera/quant.h,
 * src/ops/matmul_integer_to_float.c, the fmul epilogue and strided weights of
 * src/backend/cpu/kern_qlinear.c): ONNX's MatMulInteger -> Cast -> Mul -> Add in one call.
 *
 * References: the exact sums in int64 here, wrapped to int32, then the unfused chain's own ops
 * (ts_to_dtype, ts_mul of the two scales then of the cast, ts_add of the bias): equal bit for bit
 * (each step is one float32 rounding; the fused epilogue must round the same way in the same
 * order). Shapes with K not a multiple of 4, M below and above the VNNI kernel's 8-row tile, N
 * past its 48-column blocks; uint8 and int8 a and b, zero points absent / scalar / per column,
 * per-tensor and per-column b_scale, with and without bias, a 1-D and a 3-D a, a transposed-view
 * b; each under the avx512 ISA (the VNNI kernel where the CPU has it), avx2 and generic (the
 * portable kernel), and on sim:0. A second call hits the packed-weight cache; an in-place write to
 * b must miss it. int32 wrap-around; the refusals. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "tessera/quant.h"
#include "ts_test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t next_u32(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng >> 33);
}

typedef struct mcase {
    int64_t m, k, n;
    bool a_u8, b_u8;
    int zp;       /* 0: no zero points, 1: scalar ones, 2: b per column */
    bool per_col; /* b_scale per column */
    bool bias;
    int a_rank;  /* 1, 2 or 3 (3: [2, m / 2, k]) */
    bool b_view; /* b as the transposed view of a contiguous [n, k] */
} mcase;

/* the unfused chain on host values: exact sums wrapped to int32, then Tessera's own ops */
static ts_tensor *reference(const mcase *c, const int32_t *av, const int32_t *bv, int32_t azp,
                            const int32_t *bzp, ts_tensor *as, ts_tensor *bs, ts_tensor *bias,
                            ts_shape out_shape) {
    int32_t *acc = malloc(sizeof *acc * (size_t)(c->m * c->n));
    for (int64_t i = 0; i < c->m; i++)
        for (int64_t j = 0; j < c->n; j++) {
            int64_t s = 0;
            for (int64_t q = 0; q < c->k; q++)
                s += (int64_t)(av[i * c->k + q] - azp) * (bv[q * c->n + j] - bzp[j]);
            acc[i * c->n + j] = (int32_t)(uint32_t)(uint64_t)s; /* MatMulInteger's int32 */
        }
    ts_tensor *t = ts_from_data(out_shape, TS_I32, acc, (ts_opts){0});
    free(acc);
    ts_tensor *y = ts_mul(ts_to_dtype(t, TS_F32), ts_mul(as, bs)); /* Cast, Mul(Mul(scales)) */
    return bias ? ts_add(y, bias) : y;
}

static bool same_bits(ts_tensor *a, ts_tensor *b, const char *what) {
    if (!a || !b || ts_numel(a) != ts_numel(b)) {
        ts_test_failf(__FILE__, __LINE__, "%s: missing or mis-sized result%s", what,
                      ts_test_error_str());
        return false;
    }
    const int64_t n = ts_numel(a);
    float *x = malloc(sizeof *x * (size_t)n), *y = malloc(sizeof *y * (size_t)n);
    ts_copy_to_host(ts_contiguous(ts_to(a, ts_cpu())), x, sizeof *x * (size_t)n);
    ts_copy_to_host(ts_contiguous(ts_to(b, ts_cpu())), y, sizeof *y * (size_t)n);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (memcmp(&x[i], &y[i], sizeof *x) != 0) bad = i;
    if (bad >= 0)
        ts_test_failf(__FILE__, __LINE__, "%s: element %lld is %.9g, the unfused chain %.9g", what,
                      (long long)bad, x[bad], y[bad]);
    free(x), free(y);
    return bad < 0;
}

static void run_case(const mcase *c, ts_device dev, const char *tag) {
    char what[200];
    snprintf(what, sizeof what,
             "%s m %lld k %lld n %lld a %s b %s zp %d per_col %d bias %d rank %d view %d", tag,
             (long long)c->m, (long long)c->k, (long long)c->n, c->a_u8 ? "u8" : "s8",
             c->b_u8 ? "u8" : "s8", c->zp, c->per_col, c->bias, c->a_rank, c->b_view);
    ts_scope_begin();
    const int64_t m = c->m, k = c->k, n = c->n;
    int32_t *av = malloc(sizeof *av * (size_t)(m * k)), *bv = malloc(sizeof *bv * (size_t)(k * n));
    int32_t *bzp = calloc((size_t)n, sizeof *bzp);
    uint8_t *ab = malloc((size_t)(m * k)), *bb = malloc((size_t)(k * n)),
            *bnk = malloc((size_t)(k * n));
    float *bsv = malloc(sizeof *bsv * (size_t)n), *biasv = malloc(sizeof *biasv * (size_t)n);
    for (int64_t i = 0; i < m * k; i++) {
        av[i] = c->a_u8 ? (int32_t)(next_u32() % 256) : (int32_t)(next_u32() % 256) - 128;
        ab[i] = (uint8_t)av[i];
    }
    for (int64_t i = 0; i < k * n; i++) {
        bv[i] = c->b_u8 ? (int32_t)(next_u32() % 256) : (int32_t)(next_u32() % 256) - 128;
        bb[i] = (uint8_t)bv[i];
    }
    for (int64_t q = 0; q < k; q++)
        for (int64_t j = 0; j < n; j++) bnk[j * k + q] = bb[q * n + j];
    const int32_t azp = c->zp ? (c->a_u8 ? 131 : -7) : 0;
    for (int64_t j = 0; j < n; j++) {
        bzp[j] = c->zp == 2 ? (c->b_u8 ? 100 + (int32_t)j % 50 : (int32_t)j % 21 - 10)
                 : c->zp    ? (c->b_u8 ? 128 : 3)
                            : 0;
        bsv[j] = (float)(1e-3 * (1 + next_u32() % 1000) / 7);
        biasv[j] = (float)((int)(next_u32() % 2001) - 1000) / 333.0f;
    }
    const ts_dtype adt = c->a_u8 ? TS_U8 : TS_I8, bdt = c->b_u8 ? TS_U8 : TS_I8;
    ts_shape ashape = c->a_rank == 1   ? TS_SHAPE(k)
                      : c->a_rank == 2 ? TS_SHAPE(m, k)
                                       : TS_SHAPE(2, m / 2, k);
    ts_shape oshape = ashape;
    oshape.dims[oshape.ndim - 1] = n;
    ts_opts o = {.device = dev};
    ts_tensor *a = ts_from_data(ashape, adt, ab, o);
    ts_tensor *b = c->b_view ? ts_transpose(ts_from_data(TS_SHAPE(n, k), bdt, bnk, o), 0, 1)
                             : ts_from_data(TS_SHAPE(k, n), bdt, bb, o);
    const float asv = 0.0123f;
    ts_tensor *as = ts_from_data(TS_SHAPE(), TS_F32, &asv, o);
    ts_tensor *bs = c->per_col ? ts_from_data(TS_SHAPE(n), TS_F32, bsv, o)
                               : ts_from_data(TS_SHAPE(), TS_F32, bsv, o);
    int8_t azp8 = (int8_t)azp, bzp8[4096];
    for (int64_t j = 0; j < n; j++) bzp8[j] = (int8_t)bzp[j];
    ts_tensor *tazp = c->zp ? ts_from_data(TS_SHAPE(), adt, &azp8, o) : NULL;
    ts_tensor *tbzp = c->zp == 2 ? ts_from_data(TS_SHAPE(n), bdt, bzp8, o)
                      : c->zp    ? ts_from_data(TS_SHAPE(1), bdt, bzp8, o)
                                 : NULL;
    ts_tensor *bias = c->bias ? ts_from_data(TS_SHAPE(n), TS_F32, biasv, o) : NULL;
    if (!c->per_col)
        for (int64_t j = 0; j < n; j++) bsv[j] = bsv[0];
    ts_tensor *want = reference(c, av, bv, azp, bzp, ts_to(as, ts_cpu()), ts_to(bs, ts_cpu()),
                                bias ? ts_to(bias, ts_cpu()) : NULL, oshape);
    ts_tensor *got = ts_matmul_integer_to_float(a, as, tazp, b, bs, tbzp, bias);
    CHECK(got && ts_dtype_of(got) == TS_F32 && ts_ndim(got) == oshape.ndim);
    CHECK(same_bits(got, want, what));
    /* again: the packed weight from the cache (a weight is kept from its second call on) */
    got = ts_matmul_integer_to_float(a, as, tazp, b, bs, tbzp, bias);
    CHECK(same_bits(got, want, what));
    got = ts_matmul_integer_to_float(a, as, tazp, b, bs, tbzp, bias);
    CHECK(same_bits(got, want, what));
    CHECK_OK();
    ts_scope_end();
    free(av), free(bv), free(bzp), free(ab), free(bb), free(bnk), free(bsv), free(biasv);
}

static const mcase cases[] = {
    {1, 5, 3, true, false, 0, false, false, 2, false},
    {1, 768, 96, true, false, 1, false, true, 2, false}, /* BERT's batch-1 row, 2 column blocks */
    {3, 13, 17, true, true, 1, true, true, 2, false},
    {7, 64, 50, false, false, 2, true, false, 2, false},
    {8, 130, 47, true, false, 2, false, true, 2, true},
    {9, 31, 49, false, true, 1, true, true, 2, false},
    {20, 68, 100, true, true, 2, true, true, 3, false},
    {33, 7, 5, false, false, 0, false, true, 2, true},
    {1, 9, 33, true, true, 2, true, true, 1, false},
    {16, 256, 64, true, false, 1, false, true, 3, true},
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

/* (255 - 0) * (-128 - 127) * 40000 = -2.6e9: MatMulInteger's int32 wraps, and so does this */
static void test_wrap(void) {
    ts_scope_begin();
    const int64_t k = 40000;
    uint8_t *a = malloc((size_t)k);
    int8_t *b = malloc((size_t)k * 2);
    memset(a, 255, (size_t)k);
    for (int64_t i = 0; i < 2 * k; i++) b[i] = i % 2 ? 1 : -128;
    const float one = 1.0f;
    const int8_t bz = 127;
    ts_tensor *y =
        ts_matmul_integer_to_float(ts_from_data(TS_SHAPE(1, k), TS_U8, a, (ts_opts){0}),
                                   ts_from_data(TS_SHAPE(), TS_F32, &one, (ts_opts){0}), NULL,
                                   ts_from_data(TS_SHAPE(k, 2), TS_I8, b, (ts_opts){0}),
                                   ts_from_data(TS_SHAPE(), TS_F32, &one, (ts_opts){0}),
                                   ts_from_data(TS_SHAPE(), TS_I8, &bz, (ts_opts){0}), NULL);
    float v[2] = {0};
    CHECK(y && ts_copy_to_host(y, v, sizeof v) == TS_OK);
    const int64_t e0 = 255 * (-128 - 127) * k, e1 = 255 * (1 - 127) * k;
    CHECK(v[0] == (float)(int32_t)(uint32_t)(uint64_t)e0);
    CHECK(v[1] == (float)(int32_t)(uint32_t)(uint64_t)e1);
    CHECK(v[0] > 0); /* wrapped past -2^31 */
    free(a), free(b);
    CHECK_OK();
    ts_scope_end();
}

/* an in-place write to b bumps its version: the cached panels must not be used */
static void test_cache_write(void) {
    ts_scope_begin();
    const mcase c = {8, 20, 16, true, false, 0, false, false, 2, false};
    uint8_t av[160];
    int8_t bv[320];
    for (int i = 0; i < 160; i++) av[i] = (uint8_t)(next_u32() % 256);
    for (int i = 0; i < 320; i++) bv[i] = (int8_t)(next_u32() % 256 - 128);
    const float s = 0.5f;
    ts_tensor *a = ts_from_data(TS_SHAPE(c.m, c.k), TS_U8, av, (ts_opts){0});
    ts_tensor *b = ts_from_data(TS_SHAPE(c.k, c.n), TS_I8, bv, (ts_opts){0});
    ts_tensor *sc = ts_from_data(TS_SHAPE(), TS_F32, &s, (ts_opts){0});
    for (int i = 0; i < 3; i++) ts_matmul_integer_to_float(a, sc, NULL, b, sc, NULL, NULL);
    CHECK(ts_fill_(b, 3) != NULL);
    ts_tensor *y = ts_matmul_integer_to_float(a, sc, NULL, b, sc, NULL, NULL);
    float v[128];
    CHECK(y && ts_copy_to_host(y, v, sizeof v) == TS_OK);
    bool ok = true;
    for (int i = 0; i < 8; i++) {
        int64_t sum = 0;
        for (int q = 0; q < 20; q++) sum += av[i * 20 + q] * 3;
        for (int j = 0; j < 16; j++) ok = ok && v[i * 16 + j] == (float)sum * (s * s);
    }
    CHECK(ok);
    /* one storage read as b and as its transpose: two packed layouts, each its own cache entry */
    int8_t sq[32 * 32];
    for (int i = 0; i < 32 * 32; i++) sq[i] = (int8_t)(next_u32() % 256 - 128);
    ts_tensor *bq = ts_from_data(TS_SHAPE(32, 32), TS_I8, sq, (ts_opts){0});
    ts_tensor *aq = ts_from_data(TS_SHAPE(1, 32), TS_U8, av, (ts_opts){0}); /* a's first 32 */
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < 3; r++) {
            ts_tensor *bt = t ? ts_transpose(bq, 0, 1) : bq;
            y = ts_matmul_integer_to_float(aq, sc, NULL, bt, sc, NULL, NULL);
            CHECK(y && ts_copy_to_host(y, v, 32 * sizeof *v) == TS_OK);
            bool good = true;
            for (int j = 0; j < 32; j++) {
                int64_t sum = 0;
                for (int q = 0; q < 32; q++) sum += av[q] * (t ? sq[j * 32 + q] : sq[q * 32 + j]);
                good = good && v[j] == (float)sum * (s * s);
            }
            CHECK(good);
        }
    CHECK_OK();
    ts_scope_end();
}

static void test_refusals(void) {
    ts_scope_begin();
    uint8_t a8[12] = {0};
    float f[12] = {0}, one = 1.0f;
    ts_tensor *a = ts_from_data(TS_SHAPE(2, 6), TS_U8, a8, (ts_opts){0});
    ts_tensor *b = ts_from_data(TS_SHAPE(6, 2), TS_I8, a8, (ts_opts){0});
    ts_tensor *s = ts_from_data(TS_SHAPE(), TS_F32, &one, (ts_opts){0});
    ts_tensor *af = ts_from_data(TS_SHAPE(2, 6), TS_F32, f, (ts_opts){0});
    CHECK(!ts_matmul_integer_to_float(af, s, NULL, b, s, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "matmul_integer_to_float: a must be uint8 or int8");
    CHECK(!ts_matmul_integer_to_float(a, s, NULL, ts_reshape(b, TS_SHAPE(4, 3)), s, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "a [.., K] and b [K, N]");
    CHECK(!ts_matmul_integer_to_float(a, s, NULL, ts_reshape(b, TS_SHAPE(6, 1, 2)), s, NULL, NULL));
    CHECK_ERR(TS_ERR_SHAPE);
    CHECK(!ts_matmul_integer_to_float(
        a, s, NULL, b, ts_from_data(TS_SHAPE(3), TS_F32, f, (ts_opts){0}), NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "b_scale must hold one value or one per column");
    CHECK(!ts_matmul_integer_to_float(a, ts_from_data(TS_SHAPE(2), TS_F32, f, (ts_opts){0}), NULL,
                                      b, s, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "a_scale must hold one value");
    CHECK(!ts_matmul_integer_to_float(a, s, a, b, s, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "a_zero_point");
    CHECK(!ts_matmul_integer_to_float(a, s, NULL, b, s, s, NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "b_zero_point must be uint8 or int8");
    CHECK(!ts_matmul_integer_to_float(a, s, NULL, b, s, NULL, s));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "bias must be float32 of 2 values");
    CHECK(!ts_matmul_integer_to_float(a, NULL, NULL, b, s, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "a_scale is NULL");
    CHECK(!ts_matmul_integer_to_float(a, s, NULL, b, ts_to_dtype(s, TS_F64), NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "b_scale must be float32");
    ts_tensor *bias = ts_from_data(TS_SHAPE(2), TS_F32, f, (ts_opts){0});
    ts_set_requires_grad(bias, true);
    CHECK(!ts_matmul_integer_to_float(a, s, NULL, b, s, NULL, bias));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "no gradient");
    ts_no_grad_begin();
    CHECK(ts_matmul_integer_to_float(a, s, NULL, b, s, NULL, bias) != NULL);
    ts_no_grad_end();
    CHECK(!ts_matmul_integer_to_float(a, s, NULL, ts_to(b, ts_sim(0)), s, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_DEVICE, "same device");
    CHECK_OK();
    ts_scope_end();
}

int main(void) {
    ts_sim_configure(1, 0);
    test_isas();
    test_sim();
    test_wrap();
    test_cache_write();
    test_refusals();
    return ts_test_finish();
}
