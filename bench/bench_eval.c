/* bench_eval.c — eval-mode inference of the ResNets at batch 1 and 64 (bench/results/resnet.md,
 * "Eval speed"): the eval path with batch-norm folded into the convolutions ("fused"), the same
 * with the fusion turned off ("unfused", ts_set_eval_fusion(false): each Conv2d, BatchNorm2d and
 * ReLU in turn), both under ts_no_grad, and eval with gradients recorded ("grad": the autograd
 * graph built and dropped, what no-grad saves). Prints "model batch mode wall_ms cpu_ms" lines,
 * each the best of several runs after a warm-up (cpu_ms: the process's CPU time, all threads);
 * threads from TS_NUM_THREADS. bench/run_eval.sh runs it beside PyTorch (bench_eval_torch.py).
 * Usage: bench_eval [MODEL [BATCH]]   MODEL: resnet20 | resnet18 (CIFAR stem, 32x32) | resnet18_224
 * BENCH_AUTOCAST=1: every forward inside its own bf16 autocast region on the cpu (a fresh region
 * per forward, as an inference loop's `with torch.autocast(...)` per batch: the parameter casts
 * are made each time), the input float32 as before.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera.h"

#define BENCH_NAME "bench_eval"
#include "bench_util.h"

typedef enum mode { FUSED, UNFUSED, GRAD } mode;
static const char *const MODE_NAMES[] = {"fused", "unfused", "grad"};

/* the process's CPU time: on a host that other work keeps busy, a one-thread run's CPU time is
 * its own compute, where its wall time includes the waits for a core */
static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct times {
    double wall, cpu;
} times;

static bool autocast;

static times forward_s(ts_module *m, ts_tensor *x, mode md) {
    ts_set_eval_fusion(md != UNFUSED);
    if (md != GRAD) ts_no_grad_begin();
    ts_scope_begin();
    const double t0 = now_s(), c0 = cpu_s();
    if (autocast) ts_autocast_begin(TS_CPU, TS_BF16);
    ts_tensor *y = ts_forward(m, x);
    if (autocast) ts_autocast_end();
    ts_item(ts_sum(y)); /* waits for the result */
    const times t = {now_s() - t0, cpu_s() - c0};
    ts_scope_end();
    if (md != GRAD) ts_no_grad_end();
    die_on_error(MODE_NAMES[md]);
    return t;
}

/* best wall and CPU times (ms) of at least 3 runs and about 2 s, after 2 warm-ups (the fold and
 * oneDNN's caches fill) */
static times best_ms(ts_module *m, ts_tensor *x, mode md) {
    for (int i = 0; i < 2; i++) forward_s(m, x, md);
    times best = {1e30, 1e30};
    double spent = 0;
    for (int i = 0; i < 3 || (spent < 2.0 && i < 200); i++) {
        const times t = forward_s(m, x, md);
        spent += t.wall;
        if (t.wall < best.wall) best.wall = t.wall;
        if (t.cpu < best.cpu) best.cpu = t.cpu;
    }
    return (times){best.wall * 1e3, best.cpu * 1e3};
}

static void bench(const char *name, ts_module *m, int64_t batch, int64_t side) {
    die_on_error(name);
    ts_module_eval(m);
    ts_tensor *x = ts_randn(TS_SHAPE(batch, 3, side, side), (ts_opts){0});
    /* the modes interleaved twice, each keeping its best: a slow spell of a shared host hits
     * them all */
    times best[3] = {{1e30, 1e30}, {1e30, 1e30}, {1e30, 1e30}};
    for (int round = 0; round < 2; round++)
        for (int md = 0; md < 3; md++) {
            const times t = best_ms(m, x, (mode)md);
            if (t.wall < best[md].wall) best[md].wall = t.wall;
            if (t.cpu < best[md].cpu) best[md].cpu = t.cpu;
        }
    for (int md = 0; md < 3; md++)
        printf("%s %lld %s %.3f %.3f\n", name, (long long)batch, MODE_NAMES[md], best[md].wall,
               best[md].cpu);
    fflush(stdout);
    ts_release(x);
    ts_module_free(m);
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    const int64_t only_batch = argc > 2 ? atoll(argv[2]) : 0;
    const int64_t batches[2] = {1, 64};
    autocast = getenv("BENCH_AUTOCAST") && strcmp(getenv("BENCH_AUTOCAST"), "0");
    for (int b = 0; b < 2; b++) {
        const int64_t n = batches[b];
        if (only_batch && n != only_batch) continue;
        ts_manual_seed(0);
        if (!only || !strcmp(only, "resnet20"))
            bench("resnet20", ts_resnet20_new((ts_resnet_config){0}), n, 32);
        if (!only || !strcmp(only, "resnet18"))
            bench("resnet18",
                  ts_resnet18_new((ts_resnet_config){.num_classes = 10, .cifar_stem = true}), n,
                  32);
        if (!only || !strcmp(only, "resnet18_224"))
            bench("resnet18_224", ts_resnet18_new((ts_resnet_config){0}), n, 224);
    }
    return 0;
}
