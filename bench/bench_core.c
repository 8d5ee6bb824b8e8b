/* bench_core.c — per-op cost of ts_add on tiny tensors and f32 matmul GFLOP/s (square, and a
 * linear layer's two products on a small batch), for run.sh. */
/* Prints "name value" lines that bench/run.sh sets beside PyTorch's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera.h"

#define BENCH_NAME "bench_core"
#include "bench_util.h"

/* ns per ts_add: batches of 1000 ops, each batch inside its own scope so the results are freed
 * the way a training step frees them; best of `repeats` timings of `batches` batches. */
static double bench_add(int64_t n, int batches, int repeats) {
    ts_tensor *a = ts_full(TS_SHAPE(n), 1.5, (ts_opts){0});
    ts_tensor *b = ts_full(TS_SHAPE(n), 2.5, (ts_opts){0});
    die_on_error("add setup");
    double best = 1e30;
    for (int r = 0; r < repeats + 1; r++) { /* the first round warms the caches and allocator */
        double t0 = now_s();
        for (int i = 0; i < batches; i++) {
            ts_scope_begin();
            for (int j = 0; j < 1000; j++) ts_add(a, b);
            ts_scope_end();
        }
        double dt = (now_s() - t0) / ((double)batches * 1000.0);
        if (r > 0 && dt < best) best = dt;
    }
    die_on_error("add");
    ts_release(a);
    ts_release(b);
    return best * 1e9;
}

/* GFLOP/s of the f32 product of [m, k] and [k, n], best of `repeats` timings of `iters` products.
 * ta / tb: that operand is the transpose (a view) of a row-major [k, m] / [n, k] matrix, as a
 * linear layer's products have them: y = x @ W^T (tb), dW = dy^T @ x (ta). */
static double bench_mm(int64_t m, int64_t n, int64_t k, bool ta, bool tb, int iters, int repeats) {
    ts_manual_seed(1);
    ts_tensor *a = ts_randn(ta ? TS_SHAPE(k, m) : TS_SHAPE(m, k), (ts_opts){0});
    ts_tensor *b = ts_randn(tb ? TS_SHAPE(n, k) : TS_SHAPE(k, n), (ts_opts){0});
    die_on_error("mm setup");
    double best = 1e30;
    for (int r = 0; r < repeats + 1; r++) {
        double t0 = now_s();
        for (int i = 0; i < iters; i++) {
            ts_scope_begin();
            ts_mm(ta ? ts_t(a) : a, tb ? ts_t(b) : b);
            ts_scope_end();
        }
        double dt = (now_s() - t0) / iters;
        if (r > 0 && dt < best) best = dt;
    }
    die_on_error("mm");
    ts_release(a);
    ts_release(b);
    return 2.0 * (double)m * (double)n * (double)k / best * 1e-9;
}

int main(int argc, char **argv) {
    /* "quick" makes a smoke run (fewer iterations, same output format) */
    int q = argc > 1 && strcmp(argv[1], "quick") == 0 ? 10 : 1;
    printf("add_1 %.1f\n", bench_add(1, 200 / q, 7));
    printf("add_1000 %.1f\n", bench_add(1000, 200 / q, 7));
    printf("matmul_256 %.2f\n", bench_mm(256, 256, 256, false, false, 50 / q, 5));
    printf("matmul_1024 %.2f\n",
           bench_mm(1024, 1024, 1024, false, false, 10 / q > 0 ? 10 / q : 1, 5));
    printf("matmul_2048 %.2f\n", bench_mm(2048, 2048, 2048, false, false, 2, q > 1 ? 1 : 5));
    /* a linear layer 784 -> 128 on a batch of 64: forward and weight gradient */
    printf("linear_fwd %.2f\n", bench_mm(64, 128, 784, false, true, 500 / q, 5));
    printf("linear_wgrad %.2f\n", bench_mm(128, 784, 64, true, false, 500 / q, 5));
    return 0;
}
