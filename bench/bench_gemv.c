/* bench_gemv.c — linear layers on one row (ts_linear, float32, batch 1) with gemv.c's kernel and
 * without it (tsi_gemv_enable: the products then go to the BLAS library, oneDNN's sgemm), in turns,
 * on 1 and 2 threads: MobileNetV3-Small's classifier (576 -> 1024, 1024 -> 1000) and GPT-2's
 * layers at one token (768 -> 3072, 3072 -> 768). Each figure is the median of ROUNDS rounds of
 * REPS calls, microseconds a call, and the weights' bytes over it (GB/s).
 * Usage: bench_gemv [REPS] */
#define BENCH_NAME "bench_gemv"
#include <stdlib.h>

#include "backend/cpu/gemv.h"
#include "bench_util.h"

enum { ROUNDS = 15 };

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double us_a_call(ts_tensor *x, ts_tensor *w, ts_tensor *b, int reps) {
    const double t0 = now_s();
    for (int r = 0; r < reps; r++) {
        ts_tensor *y = ts_linear(x, w, b);
        die_on_error("linear");
        ts_release(y);
    }
    return (now_s() - t0) * 1e6 / reps;
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 200;
    const int64_t shapes[][2] = {{576, 1024}, {1024, 1000}, {768, 3072}, {3072, 768}};
    ts_no_grad_begin();
    printf("%-12s %7s %10s %10s %8s %8s\n", "in -> out", "threads", "gemv us", "blas us",
           "gemv GB/s", "blas GB/s");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t k = shapes[s][0], n = shapes[s][1];
        ts_tensor *x = ts_randn(TS_SHAPE(1, k), (ts_opts){0});
        ts_tensor *w = ts_randn(TS_SHAPE(n, k), (ts_opts){0});
        ts_tensor *b = ts_randn(TS_SHAPE(n), (ts_opts){0});
        die_on_error("inputs");
        for (int threads = 1; threads <= 2; threads++) {
            ts_set_num_threads(threads);
            double on[ROUNDS], off[ROUNDS];
            for (int r = 0; r < ROUNDS; r++) {
                tsi_gemv_enable(true);
                on[r] = us_a_call(x, w, b, reps);
                tsi_gemv_enable(false);
                off[r] = us_a_call(x, w, b, reps);
            }
            tsi_gemv_enable(true);
            qsort(on, ROUNDS, sizeof on[0], cmp_double);
            qsort(off, ROUNDS, sizeof off[0], cmp_double);
            const double mb = (double)(n * k) * 4e-3, a = on[ROUNDS / 2], o = off[ROUNDS / 2];
            printf("%5lld->%-5lld %7d %10.2f %10.2f %8.1f %8.1f\n", (long long)k, (long long)n,
                   threads, a, o, mb / a, mb / o);
        }
        ts_release(x), ts_release(w), ts_release(b);
    }
    ts_no_grad_end();
    return 0;
}
