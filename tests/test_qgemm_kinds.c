/* test_qgemm_kinds.c — every int8 GEMM kernel the host has (qgemm_vnni.h: portable, AVX2
 * vpmaddubsw, AVX-VNNI ymm, AVX512-VNNI; tsi_qgemm_kind_cap forces each in turn, within the
 * TS_CPU_ISA cap) against the exact int64 sum, bit for bit: ts_quantized_linear_acc's int32
 * accumulators (x quint8 / qint8, weight [N, K] per channel) and ts_matmul_integer_to_float's
 * float32 outputs (b [K, N] read strided, the fmul epilogue), equal to the portable kernel's bits.
 * Shapes with k, row and panel tails and threaded ones; values random and at the ends (255 x 127,
 * 255 x -128, signed 127 x -128 and -128 x -128: the unsigned operand 255 or 0 after the + 128
 * flip), where a pair of unsigned-by-signed products leaves int16 (vpmaddubsw saturates). */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/qgemm_vnni.h"
#include "host_values.h"
#include "tessera/quant.h"
#include "ts_test.h"

static uint64_t rng = 88172645463325252ull;
static int64_t rnd(int64_t lo, int64_t hi) { /* xorshift in [lo, hi] */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (int64_t)(rng % (uint64_t)(hi - lo + 1));
}

/* value modes: random, then the ends (x, w) */
enum { MODE_RANDOM, MODE_U255_P127, MODE_U255_M128, MODE_S127_M128, MODE_SM128_M128, MODES };
static const char *const mode_names[] = {"random", "x 255, w 127", "x 255, w -128",
                                         "x 127, w -128 (signed)", "x -128, w -128 (signed)"};

static int kinds_n;
static tsi_qgemm_kind kinds[4];

static int one_case(int64_t M, int64_t N, int64_t K, int mode) {
    const bool xu = mode != MODE_S127_M128 && mode != MODE_SM128_M128 && (mode || rnd(0, 1));
    const int64_t xlo = xu ? 0 : -128, xhi = xu ? 255 : 127;
    const int64_t xfix = mode == MODE_SM128_M128 ? -128 : xhi,
                  wfix = mode == MODE_U255_P127 ? 127 : -128;
    int64_t *xv = malloc((size_t)(M * K) * sizeof *xv), *wv = malloc((size_t)(N * K) * sizeof *wv);
    for (int64_t i = 0; i < M * K; i++) xv[i] = mode ? xfix : rnd(xlo, xhi);
    for (int64_t i = 0; i < N * K; i++) wv[i] = mode ? wfix : rnd(-128, 127);
    const int64_t xzp = mode ? 0 : rnd(xlo, xhi);
    int64_t *wz = malloc((size_t)N * sizeof *wz);
    double *ws = malloc((size_t)N * sizeof *ws);
    float *wf = malloc((size_t)(N * K) * sizeof *wf);
    for (int64_t n = 0; n < N; n++) {
        ws[n] = 0.0625, wz[n] = mode ? 0 : rnd(-3, 3);
        for (int64_t k = 0; k < K; k++)
            wf[n * K + k] = (float)((double)(wv[n * K + k] - wz[n]) / 16);
    }
    /* MatMulIntegerToFloat's operands: a bytes [M, K], b bytes [K, N] (int8), scales 2^-k */
    uint8_t *ab = malloc((size_t)(M * K)), *bb = malloc((size_t)(K * N));
    for (int64_t i = 0; i < M * K; i++) ab[i] = (uint8_t)xv[i];
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) bb[k * N + n] = (uint8_t)wv[n * K + k];
    float *bs = malloc((size_t)N * sizeof *bs);
    for (int64_t n = 0; n < N; n++) bs[n] = ldexpf(1, -(int)rnd(0, 4));
    const float as = 0.125f;
    int32_t *acc = malloc((size_t)(M * N) * 4);
    float *yf = malloc((size_t)(M * N) * 4), *yf0 = malloc((size_t)(M * N) * 4);
    int fails = 0;
    ts_scope_begin();
    ts_tensor *x = ts_test_quantized(TS_SHAPE(M, K), xu ? TS_QUINT8 : TS_QINT8, xv, 0.25, xzp);
    ts_tensor *w =
        ts_quantize_per_channel(ts_tensor_f32(TS_SHAPE(N, K), wf, (ts_opts){0}),
                                ts_tensor_f64(TS_SHAPE(N), ws, (ts_opts){0}),
                                ts_tensor_i64(TS_SHAPE(N), wz, (ts_opts){0}), 0, TS_QINT8);
    ts_tensor *a = ts_from_data(TS_SHAPE(M, K), xu ? TS_U8 : TS_I8, ab, (ts_opts){0});
    ts_tensor *b = ts_from_data(TS_SHAPE(K, N), TS_I8, bb, (ts_opts){0});
    ts_tensor *asc = ts_tensor_f32(TS_SHAPE(1), &as, (ts_opts){0});
    ts_tensor *bsc = ts_tensor_f32(TS_SHAPE(N), bs, (ts_opts){0});
    for (int i = 0; i < kinds_n; i++) {
        atomic_store(&tsi_qgemm_kind_cap, (int)kinds[i]);
        if (tsi_qgemm_kind_get() != kinds[i]) {
            printf("  kind %s not taken\n", tsi_qgemm_kind_name(kinds[i]));
            fails++;
            continue;
        }
        ts_tensor *r = ts_quantized_linear_acc(x, w, NULL);
        ts_tensor *y = ts_matmul_integer_to_float(a, asc, NULL, b, bsc, NULL, NULL);
        if (!r || !y || ts_copy_to_host(r, acc, (size_t)(M * N) * 4) != TS_OK ||
            ts_copy_to_host(y, i ? yf : yf0, (size_t)(M * N) * 4) != TS_OK) {
            printf("  kind %s: error %s\n", tsi_qgemm_kind_name(kinds[i]), ts_error_message());
            ts_error_clear();
            fails++;
            continue;
        }
        int bad_acc = 0, bad_f = 0;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                int64_t s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += (xv[m * K + k] - xzp) * (wv[n * K + k] - wz[n]);
                bad_acc += acc[m * N + n] != (int32_t)s;
            }
        if (i) bad_f = memcmp(yf, yf0, (size_t)(M * N) * 4) != 0;
        if (i == 0) { /* the portable floats against the formula: (float)acc * (as * bs[n]) */
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++) {
                    int64_t s = 0;
                    for (int64_t k = 0; k < K; k++) s += xv[m * K + k] * wv[n * K + k];
                    const float want = (float)(int32_t)s * (as * bs[n]);
                    bad_f += memcmp(&want, yf0 + m * N + n, 4) != 0;
                }
        }
        if (bad_acc || bad_f) {
            printf("  kind %-10s M %lld N %lld K %lld %s (%s): %d accumulators wrong, floats %s\n",
                   tsi_qgemm_kind_name(kinds[i]), (long long)M, (long long)N, (long long)K,
                   xu ? "u8" : "s8", mode_names[mode], bad_acc, bad_f ? "differ" : "same");
            fails++;
        }
    }
    atomic_store(&tsi_qgemm_kind_cap, (int)TSI_QGEMM_AVX512VNNI);
    ts_scope_end();
    free(xv), free(wv), free(wz), free(ws), free(wf), free(ab), free(bb), free(bs), free(acc);
    free(yf), free(yf0);
    return fails;
}

int main(void) {
    const int gate = ts_test_isa_gate(); /* a capped rerun on a host without the ISA skips */
    if (gate) return gate;
    /* the kinds this host has under the ISA cap, portable first */
    for (int k = TSI_QGEMM_PORTABLE; k <= TSI_QGEMM_AVX512VNNI; k++) {
        atomic_store(&tsi_qgemm_kind_cap, k);
        if (tsi_qgemm_kind_get() == (tsi_qgemm_kind)k) kinds[kinds_n++] = (tsi_qgemm_kind)k;
    }
    atomic_store(&tsi_qgemm_kind_cap, (int)TSI_QGEMM_AVX512VNNI);
    printf("vector ISA %s; int8 GEMM kernels:", tsi_cpu_isa_name(ts_cpu_isa_get()));
    for (int i = 0; i < kinds_n; i++) printf(" %s", tsi_qgemm_kind_name(kinds[i]));
    printf("\n");
    /* tails: k % 4, rows % 4 and % 6 and % 8, columns % 16 and % 48; the last two threaded */
    const int64_t shapes[][3] = {{1, 1, 1},    {3, 5, 7},     {4, 16, 4},     {5, 17, 9},
                                 {6, 16, 64},  {7, 31, 13},   {9, 33, 65},    {13, 48, 128},
                                 {2, 70, 301}, {25, 49, 130}, {40, 112, 200}, {64, 96, 258}};
    int fails = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int mode = 0; mode < MODES; mode++)
            fails += one_case(shapes[s][0], shapes[s][1], shapes[s][2], mode);
    printf("%s (%zu shapes x %d value modes x %d kernels)\n", fails ? "FAIL" : "ok",
           sizeof shapes / sizeof shapes[0], MODES, kinds_n);
    ts_test_record(fails == 0);
    return ts_test_finish();
}
