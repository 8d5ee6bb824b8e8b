/* test_quantize_linear.c — ts_quantize_linear (src/ops/quantize_linear.c), ONNX's QuantizeLinear
 * of float32 to uint8 / int8 on the cpu, byte for byte against (1) the scalar definition in
 * float64 (x / scale one float32 division, round half to even, + zero point, saturate, NaN -> 0)
 * and (2) the ONNX importer's composed route (ts_div, ts_round, float64 add, ts_clamp, the cast),
 * for every vector form this cpu has (AVX-512, AVX2, portable): ties, NaN, infinities,
 * saturation, every tail length, per-axis parameters, strided inputs, the parallel split; and the
 * refusals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "tessera.h"
#include "tessera/quant.h"
#include "ts_test.h"

/* the definition, in float64 after the float32 division */
static int ref_one(float x, float s, int zp, bool sg) {
    const float q = x / s;
    if (q != q) return 0;
    double v = rint((double)q) + zp;
    const double lo = sg ? -128 : 0, hi = sg ? 127 : 255;
    v = v < lo ? lo : v > hi ? hi : v;
    return (int)v;
}

/* the importer's composed route (src/onnx/ops_quantize.c's quantize) */
static ts_tensor *composed(ts_tensor *x, ts_tensor *scale, ts_tensor *zp) {
    ts_tensor *q = ts_to_dtype(ts_round(ts_div(x, scale)), TS_F64);
    if (zp) q = ts_add(q, ts_to_dtype(zp, TS_F64));
    const bool sg = zp && ts_dtype_of(zp) == TS_I8;
    return ts_to_dtype(ts_clamp(q, sg ? -128 : 0, sg ? 127 : 255), zp ? ts_dtype_of(zp) : TS_U8);
}

static int byte_at(const uint8_t *b, int64_t i, bool sg) {
    return sg ? (int)(int8_t)b[i] : (int)b[i];
}

/* values with ties, NaN, infinities, saturation and ordinary magnitudes for scale s */
static void fill(float *x, int64_t n, float s, unsigned seed) {
    static const float special[] = {NAN,   INFINITY, -INFINITY, 1e30f, -1e30f, 0.0f,
                                    -0.0f, 1e-40f,   -1e-40f,   3e38f, -3e38f};
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        const unsigned r = seed >> 8;
        switch (r % 5) {
        case 0: /* a tie when s is a power of two: k + 0.5 */
            x[i] = ((float)((int)(r % 601) - 300) + 0.5f) * s;
            break;
        case 1:
            x[i] = special[(r / 5) % (sizeof special / sizeof special[0])];
            break;
        default: /* [-400, 400) quanta: saturates on both sides */
            x[i] = ((float)(r % 800000) / 1000.0f - 400.0f) * s;
            break;
        }
    }
}

static void expect_bytes(ts_tensor *y, const float *x, int64_t n, const float *s, const int *zp,
                         int64_t channels, int64_t inner, bool sg, ts_tensor *y_comp,
                         const char *what) {
    uint8_t *got = malloc((size_t)(n ? n : 1)), *comp = malloc((size_t)(n ? n : 1));
    bool ok = y && ts_copy_to_host(y, got, (size_t)n) == TS_OK;
    ok = ok && y_comp && ts_copy_to_host(y_comp, comp, (size_t)n) == TS_OK;
    CHECK(ok);
    int bad = 0;
    for (int64_t i = 0; ok && i < n; i++) {
        const int64_t c = channels > 1 ? (i / inner) % channels : 0;
        const int want = ref_one(x[i], s[c], zp[c], sg);
        if ((byte_at(got, i, sg) != want || got[i] != comp[i]) && bad++ < 3)
            fprintf(stderr,
                    "  %s [%lld]: x %.9g scale %.9g zp %d: got %d, definition %d, "
                    "composed %d\n",
                    what, (long long)i, x[i], s[c], zp[c], byte_at(got, i, sg), want,
                    byte_at(comp, i, sg));
    }
    CHECK(bad == 0);
    free(got), free(comp);
}

/* per tensor, every length 0..140 and a few large ones, uint8 / int8 / no zero point */
static void test_per_tensor(void) {
    static const int64_t lens[] = {1000, 4097, 70001};
    static const float scales[] = {0.5f, 0.0078125f, 0.1f, 0.0137f, 3.0f};
    float *x = malloc(sizeof(float) * 70001);
    for (int li = 0; li < 141 + 3; li++) {
        const int64_t n = li < 141 ? li : lens[li - 141];
        for (int k = 0; k < 3; k++) { /* 0: uint8 zp, 1: int8 zp, 2: none */
            const float s = scales[(li + k) % 5];
            const bool sg = k == 1;
            const int zp = k == 2 ? 0 : sg ? -3 - li % 100 : 128 + li % 100;
            fill(x, n, s, (unsigned)(li * 3 + k));
            ts_scope_begin();
            ts_opts o = {.device = ts_cpu()};
            ts_tensor *xt = ts_tensor_f32(TS_SHAPE(n), x, o);
            ts_tensor *st = ts_tensor_f32(TS_SHAPE(), &s, o);
            const int8_t z8 = (int8_t)zp;
            const uint8_t zu = (uint8_t)zp;
            ts_tensor *zt = k == 2 ? NULL
                                   : ts_from_data(TS_SHAPE(1), sg ? TS_I8 : TS_U8,
                                                  sg ? (const void *)&z8 : (const void *)&zu, o);
            ts_tensor *y = ts_quantize_linear(xt, st, zt, 1);
            CHECK(y && ts_dtype_of(y) == (sg ? TS_I8 : TS_U8));
            char what[64];
            snprintf(what, sizeof what, "per tensor n=%lld k=%d", (long long)n, k);
            expect_bytes(y, x, n, &s, &zp, 1, n, sg, composed(xt, st, zt), what);
            ts_scope_end();
            CHECK_OK();
        }
    }
    free(x);
}

/* per axis (dim 1 of [2, 3, 5, 7], dim -1, dim 0), and a transposed (strided) input */
static void test_per_axis(void) {
    enum { N = 2 * 3 * 5 * 7 };
    float x[N];
    fill(x, N, 0.25f, 99);
    for (int k = 0; k < 3; k++) {
        const int axis = k == 0 ? 1 : k == 1 ? -1 : 0;
        const int64_t channels = k == 0   ? 3
                                 : k == 1 ? 7
                                          : 2,
                      inner = k == 0   ? 35
                              : k == 1 ? 1
                                       : 105;
        float s[7];
        int zp[7];
        int8_t z8[7];
        for (int c = 0; c < channels; c++)
            s[c] = c % 2 ? 0.25f : 0.0371f * (float)(c + 1), zp[c] = c * 9 - 20,
            z8[c] = (int8_t)zp[c];
        ts_scope_begin();
        ts_opts o = {.device = ts_cpu()};
        ts_tensor *xt = ts_tensor_f32(TS_SHAPE(2, 3, 5, 7), x, o);
        ts_tensor *st = ts_tensor_f32(TS_SHAPE(channels), s, o);
        ts_tensor *zt = ts_from_data(TS_SHAPE(channels), TS_I8, z8, o);
        ts_shape bs = {.ndim = 4, .dims = {1, 1, 1, 1}};
        bs.dims[axis < 0 ? axis + 4 : axis] = channels;
        ts_tensor *y = ts_quantize_linear(xt, st, zt, axis);
        expect_bytes(y, x, N, s, zp, channels, inner, true,
                     composed(xt, ts_reshape(st, bs), ts_reshape(zt, bs)), "per axis");
        ts_scope_end();
        CHECK_OK();
    }
    /* a [7, 30] transposed view of a [30, 7]: read as its logical (row-major [7, 30]) values */
    float xv[N], xl[N];
    fill(xv, N, 0.5f, 7);
    for (int r = 0; r < 7; r++)
        for (int c = 0; c < 30; c++) xl[r * 30 + c] = xv[c * 7 + r];
    ts_scope_begin();
    ts_opts o = {.device = ts_cpu()};
    ts_tensor *xt = ts_t(ts_tensor_f32(TS_SHAPE(30, 7), xv, o));
    const float s = 0.5f;
    const int zp = 100;
    const uint8_t zu = 100;
    ts_tensor *st = ts_tensor_f32(TS_SHAPE(1), &s, o);
    ts_tensor *zt = ts_from_data(TS_SHAPE(), TS_U8, &zu, o);
    expect_bytes(ts_quantize_linear(xt, st, zt, 1), xl, N, &s, &zp, 1, N, false,
                 composed(xt, st, zt), "strided");
    ts_scope_end();
    CHECK_OK();
}

static void test_refusals(void) {
    ts_scope_begin();
    ts_opts o = {.device = ts_cpu()};
    const float one = 1.0f, three[3] = {1, 2, 3};
    ts_tensor *x = ts_zeros(TS_SHAPE(2, 3), (ts_opts){.dtype = TS_F32});
    ts_tensor *s = ts_tensor_f32(TS_SHAPE(), &one, o);
    CHECK(!ts_quantize_linear(ts_to_dtype(x, TS_F64), s, NULL, 1));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "float32");
    CHECK(!ts_quantize_linear(x, s, ts_zeros(TS_SHAPE(), (ts_opts){.dtype = TS_U16}), 1));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "zero_point");
    CHECK(!ts_quantize_linear(x, ts_tensor_f32(TS_SHAPE(3), three, o), NULL, 0));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "scale");
    CHECK(!ts_quantize_linear(x, ts_tensor_f32(TS_SHAPE(3), three, o), NULL, 5));
    CHECK_ERR_HAS(TS_ERR_ARG, "axis");
    CHECK(ts_quantize_linear(x, s, NULL, 7) != NULL); /* one value: the axis is not read */
    /* off the cpu, the message names which operand (sim:0 runs the composed route instead) */
    if (ts_device_count(TS_SIM) < 1) ts_sim_configure(1, 0);
    ts_tensor *zs = ts_zeros(TS_SHAPE(), (ts_opts){.dtype = TS_U8, .device = ts_sim(0)});
    CHECK(!ts_quantize_linear(x, s, zs, 1));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "only on the cpu (zero_point is on sim:0)");
    CHECK(!ts_quantize_linear(x, ts_to(s, ts_sim(0)), NULL, 1));
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "only on the cpu (scale is on sim:0)");
    CHECK(!ts_quantize_linear(NULL, s, NULL, 1));
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    const ts_cpu_isa host = tsi_cpu_isa_host();
    for (int isa = TS_ISA_GENERIC; isa <= (int)host; isa++) {
        atomic_store(&tsi_cpu_isa_chosen, isa);
        printf("  isa %s\n", tsi_cpu_isa_name((ts_cpu_isa)isa));
        test_per_tensor();
        test_per_axis();
    }
    atomic_store(&tsi_cpu_isa_chosen, -1);
    test_refusals();
    CHECK_OK();
    return ts_test_finish();
}
