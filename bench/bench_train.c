/* bench_train.c — training-step time and training-time memory growth of the models on the
 * cpu: linear regression (seed), SimpleNN 784-128-10 b64, SimpleCNN b64, MLP 784-1024-1024-10 b256.
 * Prints "name ms_per_step peak_mb gflop_per_step" lines that bench/run_train.sh sets beside
 * PyTorch's (the GEMM FLOPs of the MLPs' steps, 0 where not counted); `bench_train peak` prints the
 * host's peak f32 GFLOP/s for 1 and 2 threads (bench_peak.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_models.h"
#include "bench_peak.h"
#include "tessera.h"

static void die_on_error(const char *what) {
    if (ts_error() == TS_OK) return;
    fprintf(stderr, "bench_train: %s: %s\n", what, ts_error_message());
    exit(1);
}

/* Resident-set growth while training: clear the kernel's peak, then read the high-water mark. */
static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n)) v = strtol(line + n + 1, NULL, 10);
    if (f) fclose(f);
    return v;
}
static long rss_reset(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
    return status_kb("VmRSS:");
}

/* ms per step: best of `repeats` means over `steps` steps, after warm-up */
static void bench_model(const char *name, ts_module *m, ts_tensor *x, ts_tensor *y, double lr,
                        double momentum, int steps, int repeats, double gflop) {
    ts_optim *opt = ts_sgd(m, (ts_sgd_opts){.lr = lr, .momentum = momentum});
    long rss0 = rss_reset();
    double best = 1e30;
    for (int r = 0; r <= repeats; r++) {
        double t0 = bench_now_s();
        for (int s = 0; s < steps; s++) {
            ts_scope_begin();
            ts_optim_zero_grad(opt);
            ts_tensor *loss = ts_cross_entropy(ts_forward(m, x), y);
            ts_backward(loss);
            ts_optim_step(opt);
            ts_scope_end();
        }
        double dt = (bench_now_s() - t0) / steps * 1e3;
        if (r > 0 && dt < best) best = dt; /* round 0 warms caches and the allocator */
    }
    long peak = status_kb("VmHWM:");
    die_on_error(name);
    printf("%s %.4f %.2f %.4f\n", name, best, (double)(peak - rss0) / 1024.0, gflop);
    fflush(stdout);
    ts_optim_free(opt);
    ts_module_free(m);
}

static void bench_linreg(int steps, int repeats) {
    ts_tensor *X = ts_rand(TS_SHAPE(100, 10), (ts_opts){0});
    ts_tensor *y = ts_rand(TS_SHAPE(100, 1), (ts_opts){0});
    ts_tensor *W = ts_rand(TS_SHAPE(10, 1), (ts_opts){.requires_grad = true});
    ts_optim *opt = ts_sgd_params(&W, 1, (ts_sgd_opts){.lr = 0.01});
    long rss0 = rss_reset();
    double best = 1e30;
    for (int r = 0; r <= repeats; r++) {
        double t0 = bench_now_s();
        for (int s = 0; s < steps; s++) {
            ts_scope_begin();
            ts_optim_zero_grad(opt);
            ts_tensor *error = ts_sub(ts_mm(X, W), y);
            ts_tensor *loss = ts_mean(ts_pow_scalar(error, 2));
            ts_backward(loss);
            ts_optim_step(opt);
            ts_scope_end();
        }
        double dt = (bench_now_s() - t0) / steps * 1e3;
        if (r > 0 && dt < best) best = dt;
    }
    long peak = status_kb("VmHWM:");
    die_on_error("linreg");
    printf("linreg %.4f %.2f 0\n", best, (double)(peak - rss0) / 1024.0);
    fflush(stdout);
    ts_optim_free(opt);
    ts_release(X);
    ts_release(y);
    ts_release(W);
}

/* GEMM GFLOP of one training step of an MLP over a batch: per layer the forward and the weight
 * gradient, and the input gradient of every layer but the first */
static double mlp_gflop(const int64_t *dims, int n, int64_t batch) {
    double f = 0;
    for (int l = 0; l + 1 < n; l++) f += (l ? 6.0 : 4.0) * (double)(batch * dims[l] * dims[l + 1]);
    return f / 1e9;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "peak")) {
        const char *isa;
        for (int t = 1; t <= 2; t++) printf("peak%d %.1f\n", t, bench_peak_flops(t, &isa) / 1e9);
        printf("peak_isa %s\n", isa);
        return 0;
    }
    int quick = argc > 1 && !strcmp(argv[1], "quick");
    int scale = quick ? 1 : 4;
    const char *only = argc > 2 ? argv[2] : NULL; /* one model, for profiling */
#define WANT(name) (!only || !strcmp(only, name))
    ts_manual_seed(0);
    if (WANT("linreg")) bench_linreg(500 * scale, 3);

    ts_tensor *x = ts_randn(TS_SHAPE(64, 784), (ts_opts){0});
    ts_tensor *y = ts_randint(0, 10, TS_SHAPE(64), (ts_opts){0});
    if (WANT("simplenn"))
        bench_model("simplenn", mlp_new((int64_t[]){784, 128, 10}, 3), x, y, 0.01, 0, 50 * scale, 3,
                    mlp_gflop((int64_t[]){784, 128, 10}, 3, 64));

    ts_tensor *img = ts_randn(TS_SHAPE(64, 3, 32, 32), (ts_opts){0});
    if (WANT("simplecnn"))
        bench_model("simplecnn", simple_cnn_new(), img, y, 0.001, 0.9, 10 * scale, 3, 0);

    ts_tensor *xb = ts_randn(TS_SHAPE(256, 784), (ts_opts){0});
    ts_tensor *yb = ts_randint(0, 10, TS_SHAPE(256), (ts_opts){0});
    if (WANT("mlp"))
        bench_model("mlp", mlp_new((int64_t[]){784, 1024, 1024, 10}, 4), xb, yb, 0.01, 0, 5 * scale,
                    3, mlp_gflop((int64_t[]){784, 1024, 1024, 10}, 4, 256));
    ts_release(x);
    ts_release(y);
    ts_release(img);
    ts_release(xb);
    ts_release(yb);
    return 0;
}
