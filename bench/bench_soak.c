/* bench_soak.c — a long training run that samples memory: SimpleNN (784-128-10, bench_models.h)
 * trained by SGD with momentum on a synthetic data set through the loader (shuffled, so epochs roll
 * over), and every N steps one line "step rss_kb allocated reserved alloc_count live_tensors
 * cpu_live loss" (the device's ts_memory_stats and the process's resident set). bench/soak.sh runs
 * it on cpu and sim:0 and judges the drift after warm-up.
 * Usage: bench_soak DEVICE STEPS EVERY */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_models.h"
#include "tessera.h"

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) v = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return v;
}

static int fail(const char *what) {
    fprintf(stderr, "bench_soak: %s: %s\n", what, ts_error_message());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: bench_soak DEVICE STEPS EVERY\n");
        return 2;
    }
    ts_device dev;
    long steps = strtol(argv[2], NULL, 10), every = strtol(argv[3], NULL, 10);
    if (!strncmp(argv[1], "sim", 3)) ts_sim_configure(1, 0);
    if (ts_device_parse(argv[1], &dev) || steps <= 0 || every <= 0) return fail("arguments");
    ts_manual_seed(0);
    /* 3,200 samples: an epoch is 50 batches of 64, so a run crosses 2,000 epoch boundaries */
    ts_tensor *x = ts_randn(TS_SHAPE(3200, 784), (ts_opts){0});
    ts_tensor *y = ts_randint(0, 10, TS_SHAPE(3200), (ts_opts){0});
    ts_dataset *data = ts_tensor_dataset_new(x, y);
    ts_loader *loader = ts_loader_new(
        data, (ts_loader_opts){.batch_size = 64, .shuffle = true, .seed = 1, .device = dev});
    ts_module *net = ts_module_to(mlp_new((int64_t[]){784, 128, 10}, 3), dev);
    ts_optim *opt = ts_sgd_new(net, (ts_sgd_opts){.lr = 0.01, .momentum = 0.9});
    if (ts_error()) return fail("setup");
    printf("# step rss_kb allocated reserved alloc_count live_tensors cpu_live loss\n");
    long step = 0;
    double loss_v = 0;
    while (step < steps) {
        ts_batch b;
        if (!ts_loader_next(loader, &b)) {
            if (ts_error()) return fail("loader");
            continue; /* the next call starts the next epoch */
        }
        ts_scope_begin();
        ts_optim_zero_grad(opt);
        ts_tensor *loss = ts_cross_entropy(ts_forward(net, b.x), b.y);
        ts_backward(loss);
        ts_optim_step(opt);
        if (++step % every == 0) loss_v = ts_item(loss);
        ts_scope_end();
        if (ts_error()) return fail("step");
        if (step % every == 0) {
            ts_mem_stats s, c;
            ts_memory_stats(dev, &s);
            ts_memory_stats(ts_cpu(), &c);
            printf("%ld %ld %zu %zu %llu %lld %lld %.4f\n", step, rss_kb(), s.allocated, s.reserved,
                   (unsigned long long)s.alloc_count, (long long)s.live_tensors,
                   (long long)c.live_tensors, loss_v);
            fflush(stdout);
        }
    }
    ts_optim_free(opt);
    ts_module_free(net);
    ts_loader_free(loader);
    ts_dataset_free(data);
    ts_release(x);
    ts_release(y);
    return ts_error() ? fail("teardown") : 0;
}
