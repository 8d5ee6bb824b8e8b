/* bench_bmm.c — batched small float32 products (ts_matmul on [B, m, k] x [B, k, n]) on 1 and 2
 * threads: attention's score products Q K^T (B transposed, a view) and context products P V, and
 * bench_surface.py's einsum cases, timed in C so that Python's overhead is not in the figure.
 * Each figure is the median of ROUNDS rounds of REPS calls: microseconds a call, GFLOP/s, and the
 * share of the host's measured FMA peak (bench_peak.h) on that many threads; the best round's
 * microseconds a call (on a shared host the one round no other process interrupted); the least CPU
 * time a call of all rounds (every thread's, so on a loaded host a 1-thread figure still measures
 * the kernel) and the FLOP per CPU second it gives.
 * `bench_bmm sweep` times cubes m = n = k (and Q K^T products with k = 64) over batch sizes with
 * oneDNN's batched call on and off (tsi_dnnl_matmul_batched_enable: off, the batch's products go
 * one by one), in turns: the measurement behind kern_matmul.c's batch_to_primitive (with
 * BENCH_BMM_ODD=1 set: decode-time attention's one-row products and other thin shapes instead).
 * Usage: bench_bmm [REPS]
 *        bench_bmm sweep */
#define BENCH_NAME "bench_bmm"
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/matmul_dnnl.h"
#include "bench_peak.h"
#include "bench_util.h"

enum { ROUNDS = 21 };

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct bmm_case {
    const char *name;
    int64_t bsz, m, n, k;
    int b_transposed; /* B given as a [bsz, n, k] tensor, multiplied as its transpose (Q K^T) */
} bmm_case;

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* wall microseconds a call; *cpu_us: the process's CPU time a call (all its threads) */
static double us_a_call(ts_tensor *a, ts_tensor *b, int reps, double *cpu_us) {
    const double t0 = now_s(), c0 = cpu_s();
    for (int r = 0; r < reps; r++) {
        ts_tensor *c = ts_matmul(a, b);
        die_on_error("matmul");
        ts_release(c);
    }
    *cpu_us = (cpu_s() - c0) * 1e6 / reps;
    return (now_s() - t0) * 1e6 / reps;
}

/* least CPU time (1 thread) and best wall time (2 threads) a call, batched call on and off;
 * layout 0: A B, 1: A B^T (B a transposed view), 2: A^T B (A a transposed view) */
static void sweep_one(int64_t bsz, int64_t m, int64_t n, int64_t k, int layout) {
    ts_tensor *at = layout == 2 ? ts_randn(TS_SHAPE(bsz, k, m), (ts_opts){0})
                                : ts_randn(TS_SHAPE(bsz, m, k), (ts_opts){0});
    ts_tensor *a = layout == 2 ? ts_transpose(at, -2, -1) : at;
    ts_tensor *bt = layout == 1 ? ts_randn(TS_SHAPE(bsz, n, k), (ts_opts){0})
                                : ts_randn(TS_SHAPE(bsz, k, n), (ts_opts){0});
    ts_tensor *b = layout == 1 ? ts_transpose(bt, -2, -1) : bt;
    die_on_error("inputs");
    const double macs = (double)(bsz * m * n * k);
    const int reps = macs > 2e6 ? 3 : (int)(6e6 / (macs + 2e5)) + 1;
    double cpu1[2] = {1e30, 1e30}, wall2[2] = {1e30, 1e30}, x;
    for (int threads = 1; threads <= 2; threads++) {
        ts_set_num_threads(threads);
        for (int on = 0; on < 2; on++) {
            tsi_dnnl_matmul_batched_enable(on);
            (void)us_a_call(a, b, 2, &x);
        }
        for (int r = 0; r < 15; r++)
            for (int on = 0; on < 2; on++) {
                tsi_dnnl_matmul_batched_enable(on);
                const double w = us_a_call(a, b, reps, &x);
                if (threads == 1 && x < cpu1[on]) cpu1[on] = x;
                if (threads == 2 && w < wall2[on]) wall2[on] = w;
            }
    }
    tsi_dnnl_matmul_batched_enable(true);
    printf("%5lld x %4lldx%4lldx%4lld%s %10.0f %9.2f %9.2f %6.2f %9.2f %9.2f %6.2f\n",
           (long long)bsz, (long long)m, (long long)n, (long long)k,
           layout == 1   ? " NT"
           : layout == 2 ? " TN"
                         : " NN",
           macs, cpu1[0], cpu1[1], cpu1[0] / cpu1[1], wall2[0], wall2[1], wall2[0] / wall2[1]);
    fflush(stdout);
    if (b != bt) ts_release(b);
    if (a != at) ts_release(a);
    ts_release(at), ts_release(bt);
}

static int sweep(void) {
    printf("%-25s %10s %9s %9s %6s %9s %9s %6s\n", "bsz x m x n x k", "macs", "1t off", "1t on",
           "ratio", "2t off", "2t on", "ratio");
    /* attention at decode time: one query row a batch (m = 1), its context product (n = 1 is the
     * mirror), a long reduction into a small C, and A^T B products (layout 2) */
    const int64_t odd[][5] = {{1024, 1, 64, 64, 1}, {256, 1, 256, 64, 1},  {64, 1, 1024, 64, 1},
                              {256, 1, 64, 256, 0}, {256, 64, 1, 64, 0},   {4, 16, 16, 4096, 0},
                              {64, 8, 8, 512, 0},   {2, 512, 512, 512, 0}, {16, 7, 33, 65, 1},
                              {1024, 4, 4, 4, 0},   {32, 128, 128, 64, 2}, {32, 64, 64, 64, 2},
                              {32, 32, 64, 128, 2}, {16, 256, 256, 128, 2}};
    if (getenv("BENCH_BMM_ODD")) {
        for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
            sweep_one(odd[i][0], odd[i][1], odd[i][2], odd[i][3], (int)odd[i][4]);
        return 0;
    }
    const int64_t sizes[] = {4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256};
    const int64_t batches[] = {2, 8, 32};
    ts_no_grad_begin();
    for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++)
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            const int64_t s = sizes[si];
            sweep_one(batches[bi], s, s, s, 0);
            if (s >= 16 && s != 64) sweep_one(batches[bi], s, s, 64, 1);
        }
    ts_no_grad_end();
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "sweep")) return sweep();
    const int reps = argc > 1 ? atoi(argv[1]) : 50;
    const bmm_case cases[] = {
        {"einsum_attn q k^T", 32, 128, 128, 64, 1}, /* bench_surface.py einsum_attn */
        {"attn p v", 32, 128, 64, 128, 0},
        {"einsum_bmm", 32, 64, 64, 64, 0},       /* bench_surface.py einsum_bmm */
        {"gpt-mini q k^T", 64, 256, 256, 64, 1}, /* batch 16, 4 heads, context 256 */
        {"gpt-mini p v", 64, 256, 64, 256, 0},
    };
    const char *isa;
    double peak[3] = {0};
    for (int t = 1; t <= 2; t++) peak[t] = bench_peak_flops(t, &isa);
    printf("peak (%s FMA chains): %.0f GFLOP/s on 1 thread, %.0f on 2 (wall time)\n", isa,
           peak[1] * 1e-9, peak[2] * 1e-9);
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    if (__builtin_cpu_supports("avx512f")) { /* one core's FMA rate in CPU time: load-proof */
        double best = 0;
        for (int r = 0; r < 5; r++) {
            const double c0 = cpu_s();
            volatile double sink = bench_fma_avx512(20000000);
            (void)sink;
            const double f = 20000000.0 * 12 * 16 * 2 / (cpu_s() - c0);
            best = f > best ? f : best;
        }
        printf("peak of one core in CPU time: %.0f GFLOP/s\n", best * 1e-9);
    }
#endif
    printf("%-20s %7s %10s %8s %6s %10s %10s %8s\n", "case", "threads", "us", "GFLOP/s", "peak",
           "best us", "cpu us", "GFLOP/cs");
    ts_no_grad_begin();
    for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
        const bmm_case *c = &cases[s];
        ts_tensor *a = ts_randn(TS_SHAPE(c->bsz, c->m, c->k), (ts_opts){0});
        ts_tensor *bt = c->b_transposed ? ts_randn(TS_SHAPE(c->bsz, c->n, c->k), (ts_opts){0})
                                        : ts_randn(TS_SHAPE(c->bsz, c->k, c->n), (ts_opts){0});
        ts_tensor *b = c->b_transposed ? ts_transpose(bt, -2, -1) : bt;
        die_on_error("inputs");
        const double flop = 2.0 * (double)(c->bsz * c->m * c->n * c->k);
        for (int threads = 1; threads <= 2; threads++) {
            ts_set_num_threads(threads);
            double t[ROUNDS], cpu[ROUNDS];
            (void)us_a_call(a, b, 3, &cpu[0]); /* primitives built, scratch allocated */
            for (int r = 0; r < ROUNDS; r++) t[r] = us_a_call(a, b, reps, &cpu[r]);
            qsort(t, ROUNDS, sizeof t[0], cmp_double);
            qsort(cpu, ROUNDS, sizeof cpu[0], cmp_double);
            const double us = t[ROUNDS / 2], rate = flop / us * 1e-3;
            printf("%-20s %7d %10.1f %8.1f %5.0f%% %10.1f %10.1f %8.1f\n", c->name, threads, us,
                   rate, peak[threads] > 0 ? 100.0 * rate * 1e9 / peak[threads] : 0.0, t[0], cpu[0],
                   flop / cpu[0] * 1e-3);
            fflush(stdout);
        }
        if (b != bt) ts_release(b);
        ts_release(a), ts_release(bt);
    }
    ts_no_grad_end();
    return 0;
}
