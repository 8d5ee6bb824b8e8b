/* bench_onnx_cputime.c — the CPU time of one forward on one thread, an imported ResNet (FILE
 * named resnet18 / resnet50) against the same model built with Tessera's C API, the two
 * alternating, median over RUNS after 3 warm-ups, in no-grad eval mode. On a shared host whose
 * load makes wall times swing (bench_onnx's), one thread's CPU time is the steadier figure
 * (bench/results/onnx-blocked.md, "Channels_last by default").
 * Usage: bench_onnx_cputime FILE.onnx BATCH [RUNS]   (input [BATCH, 3, 224, 224] float) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera.h"

enum { MAX_RUNS = 256 };

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* one OpenMP thread: this one does the work */
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the CPU time of one forward; false on an error (printed) */
static bool forward_ms(ts_module *m, ts_tensor *x, bool onnx, double *ms) {
    const double t0 = cpu_ms();
    ts_scope_begin();
    ts_tensor *y = NULL;
    if (onnx)
        ts_onnx_run(m, 1, &x, 1, &y);
    else
        y = ts_forward(m, x);
    const bool ok = y && !ts_error();
    if (!ok) fprintf(stderr, "bench_onnx_cputime: %s\n", ts_error_message());
    ts_scope_end();
    *ms = cpu_ms() - t0;
    return ok;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_onnx_cputime FILE.onnx BATCH [RUNS]\n");
        return 2;
    }
    const char *path = argv[1], *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const int64_t batch = atoll(argv[2]);
    int runs = argc > 3 ? atoi(argv[3]) : 10;
    runs = runs < 1 ? 1 : runs > MAX_RUNS ? MAX_RUNS : runs;
    ts_module *capi = !strncmp(base, "resnet18", 8)   ? ts_resnet18_new((ts_resnet_config){0})
                      : !strncmp(base, "resnet50", 8) ? ts_resnet50_new((ts_resnet_config){0})
                                                      : NULL;
    ts_module *onnx = ts_onnx_load(path, (ts_onnx_opts){.optimize = true});
    if (!onnx || !capi || batch < 1) {
        fprintf(stderr, "bench_onnx_cputime: %s\n",
                !onnx ? ts_error_message() : "FILE must be resnet18* or resnet50*, BATCH >= 1");
        ts_module_free(onnx);
        ts_module_free(capi);
        return 1;
    }
    ts_set_num_threads(1);
    ts_module_eval(capi);
    ts_no_grad_begin();
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(batch, 3, 224, 224), (ts_opts){0});
    static double ta[MAX_RUNS], tb[MAX_RUNS];
    bool ok = x != NULL;
    for (int r = -3; ok && r < runs; r++) {
        double u = 0, v = 0;
        ok = forward_ms(onnx, x, true, &u) && forward_ms(capi, x, false, &v);
        if (r >= 0) ta[r] = u, tb[r] = v;
    }
    ts_scope_end();
    ts_no_grad_end();
    ts_module_free(onnx);
    ts_module_free(capi);
    if (!ok) return 1;
    qsort(ta, (size_t)runs, sizeof *ta, cmp_d);
    qsort(tb, (size_t)runs, sizeof *tb, cmp_d);
    printf("batch %lld, 1 thread, CPU ms a forward: onnx %.1f capi %.1f (%.3f)\n", (long long)batch,
           ta[runs / 2], tb[runs / 2], ta[runs / 2] / tb[runs / 2]);
    return 0;
}
