/* bench_onnx.c — inference through an imported ONNX file, and the same model built with Tessera's
 * C API, timed the same way: best of 1 and 2 threads, median of the timed runs after warm-up, in
 * no-grad eval mode. bench/run_onnx.sh runs it beside ONNX Runtime and PyTorch eager
 * (bench/onnx_peers.py) on the files tools/onnx_real_models.py exports.
 * Usage: bench_onnx FILE.onnx KIND BATCH [RUNS]
 *   KIND: image (input [B, 3, 224, 224] float), tokens (input [B, 256] int64 in [0, 256))
 *   prints "onnx <ms>" and, where Tessera's API has the model (FILE named resnet18 / resnet50 /
 *   gpt_mini), "capi <ms>" (best of 1 and 2 threads), and "threads N: onnx <ms> capi <ms>" per
 *   thread count, with the medians of the process's CPU time a forward after "cpu" (on a loaded
 *   shared host the wall times swing with the other work; the CPU times less, though with two
 *   threads they include OpenMP's spinning at barriers). The two models' runs alternate, so a load
 *   that comes and goes on a shared machine falls on both alike. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera.h"

static double clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the time of one forward; *cpu gets the process's CPU time it took */
static double forward_ms(ts_module *m, ts_tensor *x, bool onnx, double *cpu) {
    double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    ts_scope_begin();
    ts_tensor *y = NULL;
    if (onnx)
        ts_onnx_run(m, 1, &x, 1, &y);
    else
        y = ts_forward(m, x);
    if (!y || ts_error()) {
        fprintf(stderr, "bench_onnx: %s\n", ts_error_message());
        exit(1);
    }
    ts_scope_end();
    *cpu = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
    return clock_ms(CLOCK_MONOTONIC) - t0;
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    return t[n / 2];
}

/* medians of one forward of each model over `runs` runs after 3 warm-up runs, alternating: wall
 * times in a, b and CPU times in ca, cb */
static void time_both(ts_module *onnx, ts_module *capi, ts_tensor *x, int runs, double *a,
                      double *b, double *ca, double *cb) {
    static double ta[256], tb[256], tca[256], tcb[256];
    if (runs > 256) runs = 256;
    if (runs < 1) runs = 1;
    for (int r = -3; r < runs; r++) {
        double cu = 0, cv = 0;
        double u = forward_ms(onnx, x, true, &cu), v = capi ? forward_ms(capi, x, false, &cv) : 0;
        if (r >= 0) ta[r] = u, tb[r] = v, tca[r] = cu, tcb[r] = cv;
    }
    *a = median(ta, runs);
    *b = median(tb, runs);
    *ca = median(tca, runs);
    *cb = median(tcb, runs);
}

static ts_module *capi_model(const char *path) {
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (!strncmp(base, "resnet18", 8)) return ts_resnet18_new((ts_resnet_config){0});
    if (!strncmp(base, "resnet50", 8)) return ts_resnet50_new((ts_resnet_config){0});
    if (!strncmp(base, "gpt_mini", 8))
        return ts_gpt_new((ts_gpt_config){
            .vocab_size = 256, .context = 256, .n_layer = 4, .n_head = 4, .n_embd = 256});
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench_onnx FILE.onnx image|tokens BATCH [RUNS]\n");
        return 2;
    }
    const char *path = argv[1];
    bool tokens = !strcmp(argv[2], "tokens");
    int64_t batch = atoll(argv[3]);
    int runs = argc > 4 ? atoi(argv[4]) : 10;
    ts_manual_seed(0);
    ts_module *onnx = ts_onnx_load(path, (ts_onnx_opts){.optimize = true});
    if (!onnx) {
        fprintf(stderr, "bench_onnx: %s\n", ts_error_message());
        return 1;
    }
    ts_module *capi = capi_model(path);
    if (capi) ts_module_eval(capi);
    ts_tensor *x = tokens ? ts_randint(0, 256, TS_SHAPE(batch, 256), (ts_opts){0})
                          : ts_randn(TS_SHAPE(batch, 3, 224, 224), (ts_opts){0});
    ts_no_grad_begin();
    double best_onnx = 1e30, best_capi = 1e30;
    for (int threads = 1; threads <= 2; threads++) {
        ts_set_num_threads(threads);
        double a, b, ca, cb;
        time_both(onnx, capi, x, runs, &a, &b, &ca, &cb);
        if (a < best_onnx) best_onnx = a;
        if (capi && b < best_capi) best_capi = b;
        if (capi)
            printf("threads %d: onnx %.3f capi %.3f (%.3f); cpu onnx %.3f capi %.3f (%.3f)\n",
                   threads, a, b, a / b, ca, cb, ca / cb);
        else
            printf("threads %d: onnx %.3f; cpu onnx %.3f\n", threads, a, ca);
    }
    ts_no_grad_end();
    printf("onnx %.3f\n", best_onnx);
    if (capi) printf("capi %.3f\n", best_capi);
    ts_release(x);
    ts_module_free(onnx);
    ts_module_free(capi);
    return 0;
}
