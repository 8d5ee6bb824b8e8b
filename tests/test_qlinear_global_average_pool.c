/* test_qlinear_global_average_pool.c — ts_qlinear_global_average_pool
 * (src/ops/qlinear_global_average_pool.c), ORT's QLinearGlobalAveragePool, against the MLAS
 * formula computed here (int64 channel sums wrapped to int32, float32 requantization, ties to
 * even, saturation) on every test device (the cpu sums the bytes where they lie: NCHW,
 * channels_last, other strides; other devices compose tensor ops), uint8 and int8; and the
 * refusals. ONNX Runtime's own values (ties, int32 wrap-around): test_onnx_quant_ms.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"
#include "tessera/quant.h"
#include "ts_test.h"

enum { N = 3, C = 19, H = 5, W = 7, IMG = H * W };

static int sat(double v, bool s8) {
    const double lo = s8 ? -128 : 0, hi = s8 ? 127 : 255;
    return (int)(v < lo ? lo : v > hi ? hi : v);
}

/* the formula, x NCHW bytes */
static void reference(const int *x, bool s8, float xs, int xz, float ys, int yz, double *want) {
    const float scale = xs / (ys * (float)IMG);
    for (int nc = 0; nc < N * C; nc++) {
        int64_t sum = 0;
        for (int p = 0; p < IMG; p++) sum += x[nc * IMG + p];
        const int32_t acc = (int32_t)(uint32_t)(uint64_t)(sum - (int64_t)xz * IMG);
        want[nc] = sat(rint((double)((float)acc * scale)) + yz, s8);
    }
}

static void check_y(ts_tensor *y, bool s8, const double *want, const char *what) {
    int got[N * C];
    int8_t b[N * C];
    bool ok = y && ts_ndim(y) == 4 && ts_size(y, 0) == N && ts_size(y, 1) == C &&
              ts_size(y, 2) == 1 && ts_size(y, 3) == 1 && ts_dtype_of(y) == (s8 ? TS_I8 : TS_U8) &&
              ts_copy_to_host(y, b, sizeof b) == TS_OK;
    CHECK(ok);
    int bad = 0;
    for (int i = 0; ok && i < N * C; i++) {
        got[i] = s8 ? b[i] : (uint8_t)b[i];
        if (got[i] != (int)want[i] && bad++ < 3)
            fprintf(stderr, "  %s [%d]: got %d, want %d\n", what, i, got[i], (int)want[i]);
    }
    CHECK(bad == 0);
}

static void test_layouts(ts_device dev, bool s8) {
    int x[N * C * IMG];
    int8_t bytes[N * C * IMG];
    for (int i = 0; i < N * C * IMG; i++) {
        x[i] = s8 ? (int)((i * 7919u) % 256) - 128 : (int)((i * 7919u) % 256);
        if (i / IMG % 5 == 0) x[i] = s8 ? 127 : 255; /* channels that saturate */
        bytes[i] = (int8_t)x[i];
    }
    /* ratio x_scale / (y_scale * 35) = 0.1: the all-255 channels saturate */
    const float xs = 0.07f, ys = 0.02f;
    const int xz = s8 ? -5 : 131, yz = s8 ? 3 : 100;
    double want[N * C];
    reference(x, s8, xs, xz, ys, yz, want);
    const ts_dtype dt = s8 ? TS_I8 : TS_U8;
    ts_scope_begin();
    ts_tensor *t = ts_from_data(TS_SHAPE(N, C, H, W), dt, bytes, (ts_opts){.device = dev});
    check_y(ts_qlinear_global_average_pool(t, xs, xz, ys, yz), s8, want, "NCHW");
    check_y(
        ts_qlinear_global_average_pool(ts_contiguous_format(t, TS_CHANNELS_LAST), xs, xz, ys, yz),
        s8, want, "channels_last");
    /* [N, C, W, H] bytes transposed back: a strided view that is neither */
    int8_t tb[N * C * IMG];
    for (int nc = 0; nc < N * C; nc++)
        for (int h = 0; h < H; h++)
            for (int w = 0; w < W; w++) tb[(nc * W + w) * H + h] = bytes[(nc * H + h) * W + w];
    ts_tensor *tt =
        ts_transpose(ts_from_data(TS_SHAPE(N, C, W, H), dt, tb, (ts_opts){.device = dev}), 2, 3);
    check_y(ts_qlinear_global_average_pool(tt, xs, xz, ys, yz), s8, want, "strided");
    ts_scope_end();
    CHECK_OK();
}

static void test_refusals(ts_device dev) {
    ts_scope_begin();
    ts_tensor *x = ts_zeros(TS_SHAPE(1, 2, 3, 3), (ts_opts){.dtype = TS_U8, .device = dev});
    CHECK(!ts_qlinear_global_average_pool(ts_to_dtype(x, TS_F32), 1, 0, 1, 0));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "uint8 or int8");
    CHECK(!ts_qlinear_global_average_pool(ts_reshape(x, TS_SHAPE(2, 9)), 1, 0, 1, 0));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "spatial");
    CHECK(!ts_qlinear_global_average_pool(x, 1, 300, 1, 0));
    CHECK_ERR_HAS(TS_ERR_ARG, "x_zp");
    CHECK(!ts_qlinear_global_average_pool(x, 1000, 0, 0.1f, 0)); /* ratio 1111 */
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "2^-32");
    CHECK(!ts_qlinear_global_average_pool(NULL, 1, 0, 1, 0));
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    ts_scope_end();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int d = 0; d < nd; d++) {
        printf("  device %s\n", ts_device_str(devs[d]));
        test_layouts(devs[d], false);
        test_layouts(devs[d], true);
        test_refusals(devs[d]);
    }
    CHECK_OK();
    return ts_test_finish();
}
