/* bench_qconv_route.c — the int8 convolution (ts_qlinear_conv2d) per shape of ResNet-18, ResNet-50
 * and MobileNetV2 at 224x224, for the route table of src/backend/cpu/kern_qconv.c: run it once
 * under TS_QCONV=own and once under TS_QCONV=dnnl and compare the columns (process CPU time, the
 * best of the repetitions: the host is shared).
 *
 *   TS_NUM_THREADS=1 TS_QCONV=own  build/bench/bench_qconv_route [batch [reps [cl]]]
 *   TS_NUM_THREADS=1 TS_QCONV=dnnl build/bench/bench_qconv_route [batch [reps [cl]]]
 *
 * cl: the input channels_last (a view, as the ONNX importer passes a chain's activations, decision
 * 0053) with x_zp 0 (a ReLU's output): oneDNN's route reads it in place and writes a channels_last
 * output; the own kernels (TS_QCONV=own) run on NCHW copies of it.
 *
 * Prints one line a shape: model, C, H, CO, K, stride, groups, ms a call. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/quant_internal.h" /* tsi_quantized_view: a channels_last quantized input */
#include "tessera.h"
#include "tessera/quant.h"

typedef struct shape {
    const char *model;
    int64_t c, h, co, k, s, g;
} shape;

static const shape shapes[] = {
    {"r18", 3, 224, 64, 7, 2, 1},     {"r18", 64, 56, 64, 3, 1, 1},
    {"r18", 64, 56, 128, 3, 2, 1},    {"r18", 128, 28, 128, 3, 1, 1},
    {"r18", 64, 56, 128, 1, 2, 1},    {"r18", 128, 28, 256, 3, 2, 1},
    {"r18", 256, 14, 256, 3, 1, 1},   {"r18", 128, 28, 256, 1, 2, 1},
    {"r18", 256, 14, 512, 3, 2, 1},   {"r18", 512, 7, 512, 3, 1, 1},
    {"r18", 256, 14, 512, 1, 2, 1},   {"r50", 64, 56, 64, 1, 1, 1},
    {"r50", 64, 56, 256, 1, 1, 1},    {"r50", 256, 56, 64, 1, 1, 1},
    {"r50", 256, 56, 128, 1, 1, 1},   {"r50", 128, 56, 128, 3, 2, 1},
    {"r50", 128, 28, 512, 1, 1, 1},   {"r50", 256, 56, 512, 1, 2, 1},
    {"r50", 512, 28, 128, 1, 1, 1},   {"r50", 512, 28, 256, 1, 1, 1},
    {"r50", 256, 28, 256, 3, 2, 1},   {"r50", 256, 14, 1024, 1, 1, 1},
    {"r50", 512, 28, 1024, 1, 2, 1},  {"r50", 1024, 14, 256, 1, 1, 1},
    {"r50", 1024, 14, 512, 1, 1, 1},  {"r50", 512, 14, 512, 3, 2, 1},
    {"r50", 512, 7, 2048, 1, 1, 1},   {"r50", 1024, 14, 2048, 1, 2, 1},
    {"r50", 2048, 7, 512, 1, 1, 1},   {"mv2", 3, 224, 32, 3, 2, 1},
    {"mv2", 32, 112, 32, 3, 1, 32},   {"mv2", 32, 112, 16, 1, 1, 1},
    {"mv2", 16, 112, 96, 1, 1, 1},    {"mv2", 96, 112, 96, 3, 2, 96},
    {"mv2", 96, 56, 24, 1, 1, 1},     {"mv2", 24, 56, 144, 1, 1, 1},
    {"mv2", 144, 56, 144, 3, 1, 144}, {"mv2", 144, 56, 24, 1, 1, 1},
    {"mv2", 144, 56, 144, 3, 2, 144}, {"mv2", 144, 28, 32, 1, 1, 1},
    {"mv2", 32, 28, 192, 1, 1, 1},    {"mv2", 192, 28, 192, 3, 1, 192},
    {"mv2", 192, 28, 32, 1, 1, 1},    {"mv2", 192, 28, 192, 3, 2, 192},
    {"mv2", 192, 14, 64, 1, 1, 1},    {"mv2", 64, 14, 384, 1, 1, 1},
    {"mv2", 384, 14, 384, 3, 1, 384}, {"mv2", 384, 14, 64, 1, 1, 1},
    {"mv2", 384, 14, 96, 1, 1, 1},    {"mv2", 96, 14, 576, 1, 1, 1},
    {"mv2", 576, 14, 576, 3, 1, 576}, {"mv2", 576, 14, 96, 1, 1, 1},
    {"mv2", 576, 14, 576, 3, 2, 576}, {"mv2", 576, 7, 160, 1, 1, 1},
    {"mv2", 160, 7, 960, 1, 1, 1},    {"mv2", 960, 7, 960, 3, 1, 960},
    {"mv2", 960, 7, 160, 1, 1, 1},    {"mv2", 320, 7, 1280, 1, 1, 1},
};

static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int main(int argc, char **argv) {
    const int64_t batch = argc > 1 ? atoll(argv[1]) : 1;
    const int reps = argc > 2 ? atoi(argv[2]) : 5;
    const bool cl = argc > 3 && !strcmp(argv[3], "cl");
    uint64_t r = 88172645463325252ull;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        const int64_t cg = s->c / s->g, nx = batch * s->c * s->h * s->h,
                      nw = s->co * cg * s->k * s->k;
        uint8_t *xb = malloc((size_t)nx);
        int8_t *wb = malloc((size_t)nw);
        float *fm = malloc((size_t)s->co * sizeof *fm);
        for (int64_t j = 0; j < nx; j++)
            r ^= r << 13, r ^= r >> 7, r ^= r << 17, xb[j] = (uint8_t)(r >> 40) & 63;
        for (int64_t j = 0; j < nw; j++)
            r ^= r << 13, r ^= r >> 7, r ^= r << 17, wb[j] = (int8_t)((int64_t)(r >> 40) % 31 - 15);
        for (int64_t j = 0; j < s->co; j++) fm[j] = 0.0005f;
        ts_scope_begin();
        ts_tensor *xr = ts_from_data(TS_SHAPE(batch, s->c, s->h, s->h), TS_U8, xb, (ts_opts){0});
        ts_tensor *x =
            cl ? tsi_quantized_view("bench", ts_contiguous_format(xr, TS_CHANNELS_LAST), 0.02, 0)
               : ts_make_per_tensor_quantized_tensor(xr, 0.02, 3);
        ts_tensor *w = ts_make_per_tensor_quantized_tensor(
            ts_from_data(TS_SHAPE(s->co, cg, s->k, s->k), TS_I8, wb, (ts_opts){0}), 0.01, 0);
        ts_tensor *m = ts_tensor_f32(TS_SHAPE(s->co), fm, (ts_opts){0});
        const int64_t st[2] = {s->s, s->s}, pd[2] = {s->k / 2, s->k / 2}, dl[2] = {1, 1};
        double best = 1e30;
        for (int rep = 0; rep < reps + 2; rep++) { /* two warm-ups: the weight cache fills */
            ts_scope_begin();
            const double t0 = cpu_ms();
            ts_tensor *y = ts_qlinear_conv2d(x, w, NULL, st, pd, dl, s->g, m, 0, TS_U8, true);
            const double t = cpu_ms() - t0;
            if (!y) {
                printf("error: %s\n", ts_error_message());
                return 1;
            }
            ts_scope_end();
            if (rep >= 2 && t < best) best = t;
        }
        printf("%s c %4lld h %3lld co %4lld k %lld s %lld g %4lld  %9.3f ms\n", s->model,
               (long long)s->c, (long long)s->h, (long long)s->co, (long long)s->k, (long long)s->s,
               (long long)s->g, best);
        ts_scope_end();
        free(xb), free(wb), free(fm);
    }
    return 0;
}
