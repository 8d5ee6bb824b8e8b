/* bench_gpu.c — the CUDA issue's GPU measurements on cuda:0, for bench/run_gpu.sh to set beside
 * PyTorch's (bench_gpu_torch.py): training-step ms of SimpleNN 784-128-10 b64, SimpleCNN b64 and
 * MLP 784-1024-1024-10 b256 in float32 and under f16 autocast + grad scaler (AMP); 8192^3 GEMM
 * TFLOP/s in f32, f32 with TF32, f16 and bf16; host-to-device GB/s of 256 MiB from pinned and from
 * pageable memory. Prints "name value unit" lines ("#" lines are comments); without a GPU prints
 * "bench_gpu: SKIP: <reason>" and exits 0. Usage: bench_gpu [quick] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_models.h"
#include "tessera.h"

#define BENCH_NAME "bench_gpu"
#include "bench_util.h"

#define MAX_RUNS 16

/* cuda:0, or BENCH_GPU_DEVICE (e.g. sim:0) to check this program's logic on a machine without a
 * GPU; the numbers are then meaningless. */
static ts_device bench_device;

static void synchronize(void) {
    if (bench_device.type == TS_CUDA) ts_cuda_synchronize(bench_device.index);
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median is what both sides report: a GPU's clocks and a shared host's noise make the best
 * run optimistic and the mean hostage to one stall. */
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A timed round of work, repeated: one warm-up round (kernels load, cuBLAS picks its algorithms,
 * the caching allocator fills), then `runs` rounds of `iters` calls, each round between two
 * device synchronisations so it measures the GPU's work and not only the queueing of it.
 * Returns the median seconds per call. */
typedef void (*work_fn)(void *ctx);
static double time_work(work_fn fn, void *ctx, int iters, int runs) {
    double per_call[MAX_RUNS];
    for (int r = 0; r <= runs; r++) {
        synchronize();
        double t0 = now_s();
        for (int i = 0; i < iters; i++) {
            ts_scope_begin();
            fn(ctx);
            ts_scope_end();
        }
        synchronize();
        if (r > 0) per_call[r - 1] = (now_s() - t0) / iters;
    }
    return median(per_call, runs);
}

/* ------------------------------------------------------------------ training steps */
typedef struct {
    ts_module *model;
    ts_optim *opt;
    ts_grad_scaler *scaler; /* NULL: a float32 step */
    ts_tensor *x, *y;
} train_ctx;

static void train_step(void *p) {
    train_ctx *c = p;
    ts_optim_zero_grad(c->opt);
    if (!c->scaler) {
        ts_backward(ts_cross_entropy(ts_forward(c->model, c->x), c->y));
        ts_optim_step(c->opt);
        return;
    }
    /* PyTorch's AMP recipe: forward and loss under autocast, backward outside it on the scaled
     * loss, then the scaler's step (skipped on Inf/NaN gradients) and update. */
    ts_autocast_begin(bench_device.type, TS_F16);
    ts_tensor *loss = ts_cross_entropy(ts_forward(c->model, c->x), c->y);
    ts_autocast_end();
    ts_backward(ts_grad_scaler_scale(c->scaler, loss));
    ts_grad_scaler_step(c->scaler, c->opt, NULL);
    ts_grad_scaler_update(c->scaler);
}

/* Prints "<name>_f32 ms ms" and "<name>_amp ms ms": each from a fresh model with the same seed. */
static void bench_model(const char *name, ts_module *(*make)(const void *), const void *arg,
                        ts_tensor *x, ts_tensor *y, double lr, double momentum, int steps,
                        int runs) {
    for (int amp = 0; amp <= 1; amp++) {
        ts_manual_seed(0);
        train_ctx c = {.x = x, .y = y};
        c.model = ts_module_to(make(arg), bench_device);
        c.opt = ts_sgd(c.model, (ts_sgd_opts){.lr = lr, .momentum = momentum});
        if (amp) c.scaler = ts_grad_scaler_new((ts_grad_scaler_opts){0});
        char label[64];
        snprintf(label, sizeof label, "%s_%s", name, amp ? "amp" : "f32");
        die_on_error(label);
        double ms = time_work(train_step, &c, steps, runs) * 1e3;
        die_on_error(label);
        printf("%s %.4f ms\n", label, ms);
        fflush(stdout);
        ts_grad_scaler_free(c.scaler);
        ts_optim_free(c.opt);
        ts_module_free(c.model);
    }
}

static ts_module *make_mlp(const void *sizes) {
    const int64_t *s = sizes;
    int n = 0;
    while (s[n] > 0) n++;
    return mlp_new(s, n);
}
static ts_module *make_cnn(const void *unused) {
    (void)unused;
    return simple_cnn_new();
}

/* ------------------------------------------------------------------ GEMM */
typedef struct {
    ts_tensor *a, *b;
} mm_ctx;
static void mm_call(void *p) {
    mm_ctx *c = p;
    ts_mm(c->a, c->b);
}

static void bench_gemm(const char *label, int64_t n, ts_dtype dt, bool tf32, int iters, int runs) {
    ts_cuda_set_allow_tf32(tf32);
    ts_manual_seed(1);
    /* f32 normals cast to dt: the operands' values do not matter to the timing, and the cast
     * needs no half-precision random kernel */
    ts_opts o = {.device = bench_device};
    ts_scope_begin();
    mm_ctx c = {ts_keep(ts_to_dtype(ts_randn(TS_SHAPE(n, n), o), dt)),
                ts_keep(ts_to_dtype(ts_randn(TS_SHAPE(n, n), o), dt))};
    ts_scope_end();
    die_on_error(label);
    double s = time_work(mm_call, &c, iters, runs);
    die_on_error(label);
    printf("%s %.2f TFLOP/s\n", label, 2.0 * (double)n * (double)n * (double)n / s * 1e-12);
    fflush(stdout);
    ts_release(c.a);
    ts_release(c.b);
    ts_cuda_set_allow_tf32(false);
}

/* ------------------------------------------------------------------ host to device */
typedef struct {
    ts_tensor *src;
    bool async;
} copy_ctx;
static void copy_call(void *p) {
    copy_ctx *c = p;
    if (c->async)
        ts_to_async(c->src, bench_device);
    else
        ts_to(c->src, bench_device);
}

/* GB/s (1e9 bytes) of `bytes` copied from a cpu tensor, pinned with ts_to_async or pageable with
 * the blocking ts_to; each copy lands in a fresh device tensor, as torch's .to() does. */
static void bench_h2d(const char *label, size_t bytes, bool pinned, int iters, int runs) {
    ts_tensor *host = ts_ones(TS_SHAPE((int64_t)(bytes / sizeof(float))), (ts_opts){0});
    copy_ctx c = {host, pinned};
    if (pinned) {
        c.src = ts_pin_memory(host);
        ts_release(host);
    }
    die_on_error(label);
    double s = time_work(copy_call, &c, iters, runs);
    die_on_error(label);
    printf("%s %.2f GB/s\n", label, (double)bytes / s * 1e-9);
    fflush(stdout);
    ts_release(c.src);
}

int main(int argc, char **argv) {
    int quick = argc > 1 && !strcmp(argv[1], "quick");
    const char *override = getenv("BENCH_GPU_DEVICE");
    bool check = override && *override;
    bench_device = ts_cuda(0);
    if (check) {
        if (ts_device_parse(override, &bench_device) != TS_OK) die_on_error("BENCH_GPU_DEVICE");
        printf("# BENCH_GPU_DEVICE=%s: a logic check, not a measurement of cuda:0\n", override);
    } else if (ts_cuda_device_count() < 1) {
        /* ask the runtime why, so the line says "built without CUDA" or the driver's reason */
        ts_cuda_set_device(0);
        printf("bench_gpu: SKIP: %s\n",
               ts_error() != TS_OK ? ts_error_message() : "no CUDA device found");
        return 0;
    }
    ts_cuda_props p;
    if (bench_device.type == TS_CUDA && ts_cuda_get_properties(0, &p) == TS_OK)
        printf("# tessera on cuda:0: %s, %d SMs, %.1f GiB\n", p.name, p.multiprocessor_count,
               (double)p.total_memory / (1 << 30));
    int steps = quick ? 50 : 200, runs = quick ? 3 : 7;
    int64_t n = 8192;
    size_t bytes = (size_t)256 << 20;
    if (check) { /* the same code paths, at sizes a host-simulated device gets through */
        steps = 2, runs = 1, n = 256, bytes = (size_t)1 << 20;
    }

    ts_manual_seed(0);
    ts_tensor *x = ts_randn(TS_SHAPE(64, 784), (ts_opts){.device = bench_device});
    ts_tensor *y = ts_randint(0, 10, TS_SHAPE(64), (ts_opts){.device = bench_device});
    ts_tensor *img = ts_randn(TS_SHAPE(64, 3, 32, 32), (ts_opts){.device = bench_device});
    ts_tensor *xb = ts_randn(TS_SHAPE(256, 784), (ts_opts){.device = bench_device});
    ts_tensor *yb = ts_randint(0, 10, TS_SHAPE(256), (ts_opts){.device = bench_device});
    die_on_error("inputs");
    static const int64_t simplenn[] = {784, 128, 10, 0}, mlp[] = {784, 1024, 1024, 10, 0};
    bench_model("simplenn", make_mlp, simplenn, x, y, 0.01, 0, steps, runs);
    bench_model("simplecnn", make_cnn, NULL, img, y, 0.001, 0.9, steps, runs);
    bench_model("mlp", make_mlp, mlp, xb, yb, 0.01, 0, steps, runs);
    ts_release(x);
    ts_release(y);
    ts_release(img);
    ts_release(xb);
    ts_release(yb);

    bench_gemm("gemm_f32", n, TS_F32, false, quick ? 2 : 5, runs);
    bench_gemm("gemm_tf32", n, TS_F32, true, quick ? 5 : 20, runs);
    bench_gemm("gemm_f16", n, TS_F16, false, quick ? 10 : 50, runs);
    bench_gemm("gemm_bf16", n, TS_BF16, false, quick ? 10 : 50, runs);

    bench_h2d("h2d_pinned", bytes, true, quick ? 5 : 20, runs);
    bench_h2d("h2d_pageable", bytes, false, quick ? 5 : 20, runs);
    return 0;
}
