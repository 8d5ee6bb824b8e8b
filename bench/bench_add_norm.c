/* bench_add_norm.c — the fused residual add + norm (ts_add_layer_norm / ts_add_rms_norm, decision
 * 0031) against ts_add followed by ts_layer_norm / ts_rms_norm, float32, on one thread by default:
 * forward alone (grad mode off) and forward + backward (x, residual and the weight requiring
 * grad, y's gradient given). Timed in the process's CPU time (CLOCK_PROCESS_CPUTIME_ID), not wall
 * time: on a shared host under load the wall clock mostly measures the wait for a core. Rounds
 * are interleaved (each round times every case once) and each case keeps its best round; a case
 * is the mean of REPS calls; then ts_add, layer_norm and rms_norm alone (forward). On sim:0 by
 * default: the cpu backend declines the fused kernel (decision 0031), sim runs it with the cpu's
 * kernels; "cpu" as DEVICE times the cpu's choice (both columns then the composition).
 * Usage: bench_add_norm [ROWS COLS [ROUNDS [THREADS [DEVICE]]]] (defaults 8192 768 9 1 sim:0) */
#define BENCH_NAME "bench_add_norm"
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"

enum { REPS = 5, NCASES = 11 };

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct env {
    ts_tensor *x, *r, *w, *b, *g;
    int64_t cols;
} env;

/* one call of case k: bit 0 rms, bit 1 fused, bit 2 forward + backward; 8, 9, 10: ts_add, the
 * layer norm, the RMSNorm alone (forward) */
static void once(const env *e, int k) {
    if (k >= 8) {
        ts_scope_begin();
        ts_no_grad_begin();
        const ts_shape ns = TS_SHAPE(e->cols);
        if (k == 8) ts_add(e->x, e->r);
        if (k == 9) ts_layer_norm(e->x, ns, e->w, e->b, 0);
        if (k == 10) ts_rms_norm(e->x, ns, e->w, 0);
        ts_no_grad_end();
        ts_scope_end();
        die_on_error("case");
        return;
    }
    const bool rms = k & 1, fused = k & 2, train = k & 4;
    ts_scope_begin();
    if (!train) ts_no_grad_begin();
    ts_tensor *h = NULL, *y;
    const ts_shape ns = TS_SHAPE(e->cols);
    if (fused)
        y = rms ? ts_add_rms_norm(e->x, e->r, ns, e->w, 0, &h)
                : ts_add_layer_norm(e->x, e->r, ns, e->w, e->b, 0, &h);
    else {
        h = ts_add(e->x, e->r);
        y = rms ? ts_rms_norm(h, ns, e->w, 0) : ts_layer_norm(h, ns, e->w, e->b, 0);
    }
    if (train) {
        ts_backward_with(y, e->g);
        ts_tensor *leaves[4] = {e->x, e->r, e->w, e->b};
        for (int i = 0; i < 4; i++) ts_set_grad(leaves[i], NULL);
    }
    if (!train) ts_no_grad_end();
    ts_scope_end();
    die_on_error("case");
}

int main(int argc, char **argv) {
    const int64_t rows = argc > 2 ? atoll(argv[1]) : 8192, cols = argc > 2 ? atoll(argv[2]) : 768;
    const int rounds = argc > 3 ? atoi(argv[3]) : 9, threads = argc > 4 ? atoi(argv[4]) : 1;
    ts_set_num_threads(threads);
    ts_device dev = ts_sim(0);
    if (argc > 5) ts_device_parse(argv[5], &dev);
    /* sim:0 there unless TS_SIM_DEVICES made it */
    if (dev.type == TS_SIM && !ts_device_is_available(dev)) ts_sim_configure(dev.index + 1, 0);
    die_on_error("device");
    ts_manual_seed(1);
    const ts_opts o = {.requires_grad = true, .device = dev};
    env e = {ts_randn(TS_SHAPE(rows, cols), o),
             ts_randn(TS_SHAPE(rows, cols), o),
             ts_randn(TS_SHAPE(cols), o),
             ts_randn(TS_SHAPE(cols), o),
             ts_randn(TS_SHAPE(rows, cols), (ts_opts){.device = dev}),
             cols};
    die_on_error("inputs");
    double best[NCASES];
    for (int k = 0; k < NCASES; k++) best[k] = 1e30, once(&e, k); /* warm the allocator */
    for (int round = 0; round < rounds; round++)
        for (int k = 0; k < NCASES; k++) {
            const double t0 = cpu_s();
            for (int i = 0; i < REPS; i++) once(&e, k);
            const double t = (cpu_s() - t0) / REPS;
            if (t < best[k]) best[k] = t;
        }
    printf("[%lld, %lld] float32 on %s, %d thread(s), best of %d rounds of %d calls, ms of CPU "
           "time\n",
           (long long)rows, (long long)cols, ts_device_str(dev), threads, rounds, REPS);
    printf("| case | ts_add + norm | fused | unfused / fused |\n|---|---|---|---|\n");
    static const char *names[4] = {"layer_norm forward", "rms_norm forward",
                                   "layer_norm forward + backward", "rms_norm forward + backward"};
    for (int c = 0; c < 4; c++) {
        const int k = (c & 1) | (c & 2 ? 4 : 0);
        printf("| %s | %.3f | %.3f | %.2f |\n", names[c], 1e3 * best[k], 1e3 * best[k | 2],
               best[k] / best[k | 2]);
    }
    printf("alone, forward: ts_add %.3f, layer_norm %.3f, rms_norm %.3f\n", 1e3 * best[8],
           1e3 * best[9], 1e3 * best[10]);
    return 0;
}
