/* bench_conv_fused.c — ResNet-18's twenty convolutions (224x224 input, biases as after folding
 * batch norm, ReLU where the network has one right after the convolution) in no-grad inference:
 * the time of one pass over all of them, as ts_conv2d + ts_relu ("composed") with oneDNN's cache
 * of reordered weights off (every call reorders its weight, as before the cache) and on, and as
 * one tsi_conv2d_act call each ("fused", cache on). Median wall and CPU time (all threads) of the
 * timed runs after warm-up, and the best CPU time: on a shared machine the CPU times of a
 * one-thread run are the steadier. Usage: bench_conv_fused [BATCH [RUNS]]   (float32 on the cpu) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/cpu/conv_dnnl.h"
#include "nn/conv_fused.h"
#include "tessera.h"

typedef struct layer {
    int64_t c, o, hw, k, stride, pad;
    bool relu;
} layer;

/* conv1; per stage: block 1 (conv a + relu, conv b, downsample from stage 2 on), block 2 (a, b) */
static const layer LAYERS[] = {
    {3, 64, 224, 7, 2, 3, true},    {64, 64, 56, 3, 1, 1, true},   {64, 64, 56, 3, 1, 1, false},
    {64, 64, 56, 3, 1, 1, true},    {64, 64, 56, 3, 1, 1, false},  {64, 128, 56, 3, 2, 1, true},
    {128, 128, 28, 3, 1, 1, false}, {64, 128, 56, 1, 2, 0, false}, {128, 128, 28, 3, 1, 1, true},
    {128, 128, 28, 3, 1, 1, false}, {128, 256, 28, 3, 2, 1, true}, {256, 256, 14, 3, 1, 1, false},
    {128, 256, 28, 1, 2, 0, false}, {256, 256, 14, 3, 1, 1, true}, {256, 256, 14, 3, 1, 1, false},
    {256, 512, 14, 3, 2, 1, true},  {512, 512, 7, 3, 1, 1, false}, {256, 512, 14, 1, 2, 0, false},
    {512, 512, 7, 3, 1, 1, true},   {512, 512, 7, 3, 1, 1, false},
};
#define NL ((int)(sizeof LAYERS / sizeof LAYERS[0]))

static double now_ms(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static ts_tensor *xs[NL], *ws[NL], *bs[NL];

static void one_pass(bool fused) {
    for (int i = 0; i < NL; i++) {
        const layer *l = &LAYERS[i];
        ts_scope_begin();
        const ts_conv2d_opts o = {.stride = {(int)l->stride, (int)l->stride},
                                  .padding = {(int)l->pad, (int)l->pad}};
        ts_tensor *y;
        if (fused)
            y = tsi_conv2d_act(xs[i], ws[i], bs[i], o,
                               l->relu ? TSI_CONV_ACT_RELU : TSI_CONV_ACT_NONE, 0, 0);
        else {
            y = ts_conv2d(xs[i], ws[i], bs[i], o);
            if (l->relu) y = ts_relu(y);
        }
        if (!y || ts_error()) {
            fprintf(stderr, "bench_conv_fused: %s\n", ts_error_message());
            exit(1);
        }
        ts_scope_end();
    }
}

typedef struct timing {
    double wall, cpu, best_cpu;
} timing;

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    return t[n / 2];
}

static timing time_pass(bool fused, int runs) {
    double wall[256], cpu[256];
    if (runs > 256) runs = 256;
    for (int r = -3; r < runs; r++) {
        const double w0 = now_ms(CLOCK_MONOTONIC), c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
        one_pass(fused);
        if (r < 0) continue;
        wall[r] = now_ms(CLOCK_MONOTONIC) - w0;
        cpu[r] = now_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
    }
    const double w = median(wall, runs), c = median(cpu, runs); /* sorts cpu: best first */
    return (timing){w, c, cpu[0]};
}

int main(int argc, char **argv) {
    const int64_t batch = argc > 1 ? atoll(argv[1]) : 1;
    const int runs = argc > 2 ? atoi(argv[2]) : 20;
    ts_manual_seed(0);
    for (int i = 0; i < NL; i++) {
        const layer *l = &LAYERS[i];
        xs[i] = ts_randn(TS_SHAPE(batch, l->c, l->hw, l->hw), (ts_opts){0});
        ws[i] = ts_mul_scalar(ts_randn(TS_SHAPE(l->o, l->c, l->k, l->k), (ts_opts){0}), 0.05);
        bs[i] = ts_randn(TS_SHAPE(l->o), (ts_opts){0});
    }
    ts_no_grad_begin();
    const size_t limit = tsi_dnnl_conv_wcache_limit(0);
    const timing plain = time_pass(false, runs);
    tsi_dnnl_conv_wcache_limit(limit);
    const timing cached = time_pass(false, runs), fused = time_pass(true, runs);
    printf(
        "ResNet-18's convolutions, batch %lld, %d runs, ms: median wall / median cpu / best cpu\n"
        "  composed, no weight cache  %8.2f / %8.2f / %8.2f\n"
        "  composed, weight cache     %8.2f / %8.2f / %8.2f\n"
        "  fused, weight cache        %8.2f / %8.2f / %8.2f\n",
        (long long)batch, runs, plain.wall, plain.cpu, plain.best_cpu, cached.wall, cached.cpu,
        cached.best_cpu, fused.wall, fused.cpu, fused.best_cpu);
    ts_no_grad_end();
    return 0;
}
