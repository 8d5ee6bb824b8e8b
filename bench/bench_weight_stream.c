/* bench_weight_stream.c — weight streaming (ts_module_stream, issue 55 part 4) on a capped sim
 * device over a simulated 16 GB/s, 5 us host link: a model 8x the device's capacity (32 Linear
 * layers of 2048 x 2048, 512 MiB of float32 weights; sim:0 capped at 64 MiB) streamed forward with
 * grad mode off, against
 *   - the link-bound time: its weights' bytes / bandwidth + one latency per copy (what copying the
 *     weights once takes), and
 *   - the compute-only time: the same forward with the weights resident on the cpu (sim runs
 *     the cpu's kernels), timed in turn with the streamed runs;
 * at a small batch (link-bound) and a large one (compute-bound), for prefetch 0, 1 and 2 (units
 * ahead: a Linear and a ReLU are two units). Median of REPS runs after a warm-up.
 * Usage: bench_weight_stream [reps]. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera.h"
#include "tessera/sim_link.h"
#include "tessera/weight_stream.h"

#define LAYERS 32
#define WIDTH  2048
#define CAP    ((size_t)64 << 20)
#define BW     16e9
#define LAT    5e-6

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static ts_module *model_new(void) {
    ts_manual_seed(1);
    ts_module *m[2 * LAYERS];
    for (int i = 0; i < LAYERS; i++)
        m[2 * i] = ts_linear_new(WIDTH, WIDTH), m[2 * i + 1] = ts_relu_new();
    return ts_sequential_new(2 * LAYERS, m);
}

/* seconds of one forward (grad mode off), the link's queued copies included */
static double time_forward(ts_module *m, ts_tensor *x) {
    ts_scope_begin();
    ts_no_grad_begin();
    double t0 = now();
    ts_tensor *y = ts_forward(m, x);
    ts_sim_link_wait(0);
    double t1 = now();
    ts_no_grad_end();
    if (!y) {
        fprintf(stderr, "forward failed: %s\n", ts_error_message());
        exit(1);
    }
    ts_scope_end();
    return t1 - t0;
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof t[0], cmp);
    return t[n / 2];
}

static void cpu_name(char *out, size_t n) {
    snprintf(out, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) snprintf(out, n, "%s", c + 2);
            out[strcspn(out, "\n")] = 0;
            break;
        }
    if (f) fclose(f);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1 || reps > 32) reps = 5;
    if (ts_sim_configure(1, 0) != TS_OK) {
        fprintf(stderr, "sim: %s\n", ts_error_message());
        return 1;
    }
    char cpu[256], load[64] = "?";
    cpu_name(cpu, sizeof cpu);
    FILE *la = fopen("/proc/loadavg", "r");
    if (la && fgets(load, sizeof load, la)) load[strcspn(load, "\n")] = 0;
    if (la) fclose(la);
    const double bytes = (double)LAYERS * (WIDTH * WIDTH + WIDTH) * 4;
    const double link_s = bytes / BW + 2.0 * LAYERS * LAT;
    printf("CPU: %s; load average %s; %d threads\n", cpu, load, ts_get_num_threads());
    printf("model: %d x Linear(%d, %d) + ReLU, %.1f MiB of weights; sim:0 capped at %.0f MiB "
           "(the model is %.0fx the cap); link %.0f GB/s, %.0f us\n",
           LAYERS, WIDTH, WIDTH, bytes / (1 << 20), (double)CAP / (1 << 20), bytes / (double)CAP,
           BW / 1e9, LAT * 1e6);
    printf("link-bound time (weights once over the link, %d copies): %.2f ms\n", 2 * LAYERS,
           link_s * 1e3);
    { /* the simulated copy engine's bytes are copied by the host at once (memcpy): its cost */
        const size_t n = (size_t)WIDTH * WIDTH * 4;
        char *src = malloc(n), *dst = malloc(n);
        if (!src || !dst) return 1;
        memset(src, 1, n), memset(dst, 0, n);
        double t0 = now();
        for (int i = 0; i < LAYERS; i++) memcpy(dst, src, n), src[i] = dst[n - 1 - i];
        printf("host memcpy of the weights (what the simulated copies cost the host): %.2f ms\n\n",
               (now() - t0) * 1e3);
        free(src), free(dst);
    }
    printf("| batch | compute only (cpu, weights resident) | link-bound | prefetch | streamed | "
           "streamed / max(link, compute) | host waited for the link, per forward | units resident "
           "at most |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    if (ts_sim_configure(1, CAP) != TS_OK) {
        fprintf(stderr, "cap: %s\n", ts_error_message());
        return 1;
    }
    ts_sim_set_link(BW, LAT);
    const int batches[2] = {1, 32};
    for (int b = 0; b < 2; b++) {
        ts_manual_seed(2);
        ts_tensor *x = ts_randn(TS_SHAPE(batches[b], WIDTH), (ts_opts){0});
        /* compute only: the same kernels (sim runs the cpu's) with the weights resident on the
         * cpu; timed in turn with the streamed runs, so that the machine's load hits both */
        ts_module *plain = model_new(), *m[3];
        for (int k = 0; k < 3; k++) {
            m[k] = model_new();
            if (ts_module_stream(m[k], ts_sim(0), (ts_stream_opts){.prefetch = k}) != TS_OK) {
                fprintf(stderr, "stream: %s\n", ts_error_message());
                return 1;
            }
        }
        double tp[32], ts[3][32], wait[3] = {0};
        for (int r = -1; r < reps; r++) {
            double t = time_forward(plain, x);
            if (r >= 0) tp[r] = t;
            for (int k = 0; k < 3; k++) {
                ts_sim_link_stats ls0, ls1;
                ts_sim_link_stats_get(0, &ls0);
                t = time_forward(m[k], x);
                ts_sim_link_stats_get(0, &ls1);
                if (r >= 0) ts[k][r] = t, wait[k] += (double)(ls1.wait_ns - ls0.wait_ns) / reps;
            }
        }
        const double compute_s = median(tp, reps);
        const double bound = link_s > compute_s ? link_s : compute_s;
        for (int k = 0; k < 3; k++) {
            const double s = median(ts[k], reps);
            ts_stream_stats st;
            ts_module_stream_stats(m[k], &st);
            printf("| %d | %.2f ms | %.2f ms | %d | %.2f ms | %.2f | %.2f ms | %d |\n", batches[b],
                   compute_s * 1e3, link_s * 1e3, k, s * 1e3, s / bound, wait[k] / 1e6,
                   st.max_resident_units);
            ts_module_free(m[k]);
        }
        ts_module_free(plain);
        ts_release(x);
    }
    ts_sim_set_link(0, 0);
    return 0;
}
