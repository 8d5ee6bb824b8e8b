/* bench_norm_select.c — the rows of src/backend/cpu/norm_select.c's table that a benchmark can
 * check: (1) each vector variant of the fused layer norm and batch norm kernels (portable, AVX2,
 * AVX-512: the ones this CPU has) on one thread, forward + backward with dweight and dbias; (2)
 * one against two threads at and around the thread cut-off (parallel_min_elems), with the
 * variant TS_CPU_ISA picks. Calls the kernels directly (cpu_kernels.h's forced-variant entries),
 * so nothing but the kernels is timed. Rounds are interleaved (each round times every case once)
 * and each case keeps its best round, so a busy spell of a shared machine hits them alike; a case
 * is the mean of enough calls to take about 2 ms. Usage: bench_norm_select [ROUNDS] (default 9) */
#define BENCH_NAME "bench_norm_select"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/norm_select.h"
#include "bench_util.h"

typedef struct {
    bool batch; /* batch norm (n, c, hw) or layer norm (rows n, cols c) */
    bool nhwc;
    int64_t n, c, hw;
    ts_layer_norm_args ln;
    ts_batch_norm_args bn;
    void *mem, *ws;
    int reps;
} norm_case;

static float *filled(int64_t count, float base) {
    float *p = malloc(sizeof(float) * (size_t)(count ? count : 1));
    for (int64_t i = 0; i < count; i++) p[i] = base + (float)((i * 7919) % 2000) / 1000.0f - 1.0f;
    return p;
}

static ts_kview fv(float *p) { return (ts_kview){.data = (char *)p, .dtype = TS_F32}; }

static norm_case make(bool batch, bool nhwc, int64_t n, int64_t c, int64_t hw) {
    norm_case k = {.batch = batch, .nhwc = nhwc, .n = n, .c = c, .hw = hw};
    const int64_t tot = n * c * hw;
    if (batch) {
        ts_batch_norm_args *a = &k.bn;
        *a = (ts_batch_norm_args){.n = n, .c = c, .hw = hw, .eps = 1e-5, .channels_last = nhwc};
        a->x = fv(filled(tot, 0)), a->dy = fv(filled(tot, 0.5f));
        a->y = fv(filled(tot, 0)), a->dx = fv(filled(tot, 0));
        ts_kview *p[] = {&a->weight, &a->bias,    &a->mean, &a->invstd,
                         &a->var,    &a->dweight, &a->dbias};
        for (int i = 0; i < 7; i++) *p[i] = fv(filled(c, 1.5f));
    } else {
        ts_layer_norm_args *a = &k.ln;
        *a = (ts_layer_norm_args){.rows = n, .cols = c, .eps = 1e-5};
        a->x = fv(filled(tot, 0)), a->dy = fv(filled(tot, 0.5f));
        a->y = fv(filled(tot, 0)), a->dx = fv(filled(tot, 0));
        a->weight = fv(filled(c, 1.5f)), a->bias = fv(filled(c, 0));
        a->mean = fv(filled(n, 0)), a->rstd = fv(filled(n, 0));
        a->dweight = fv(filled(c, 0)), a->dbias = fv(filled(c, 0));
        const ts_backend *be = tsi_backend_for(TS_CPU);
        k.ws = malloc(be->layer_norm_workspace(be, 0, a) + 64);
    }
    return k;
}

static void run_once(norm_case *k, int isa) {
    if (k->batch) {
        tsi_cpu_batch_norm_isa((ts_cpu_isa)isa, &k->bn, false);
        tsi_cpu_batch_norm_isa((ts_cpu_isa)isa, &k->bn, true);
    } else {
        tsi_cpu_layer_norm_isa((ts_cpu_isa)isa, &k->ln, false, NULL);
        tsi_cpu_layer_norm_isa((ts_cpu_isa)isa, &k->ln, true, k->ws);
    }
}

/* mean us a forward + backward over k->reps calls */
static double time_case(norm_case *k, int isa) {
    if (!k->reps) { /* calibrate: about 2 ms a sample */
        const double t0 = now_s();
        run_once(k, isa);
        const double one = now_s() - t0;
        k->reps = one > 2e-3 ? 1 : (int)(2e-3 / (one > 1e-7 ? one : 1e-7));
    }
    const double t0 = now_s();
    for (int r = 0; r < k->reps; r++) run_once(k, isa);
    return (now_s() - t0) / k->reps * 1e6;
}

static void name(const norm_case *k, char *buf, size_t n) {
    if (k->batch)
        snprintf(buf, n, "batch_norm %s [%lld, %lld, %lld]", k->nhwc ? "NHWC" : "NCHW",
                 (long long)k->n, (long long)k->c, (long long)k->hw);
    else
        snprintf(buf, n, "layer_norm [%lld, %lld]", (long long)k->n, (long long)k->c);
}

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? atoi(argv[1]) : 9;
    ts_release(ts_zeros(TS_SHAPE(1), (ts_opts){0})); /* the library's set-up */
    const int host = (int)tsi_cpu_isa_host(), now = tsi_norm_variant();
    printf("float32 forward + backward (dweight, dbias), best of %d interleaved rounds, us\n",
           rounds);

    /* (1) the variants, one thread */
    norm_case v[] = {make(false, false, 256, 1024, 1), make(false, false, 64, 4096, 1),
                     make(true, false, 32, 64, 256), make(true, true, 32, 64, 256)};
    enum { NV = sizeof v / sizeof v[0] };
    double best[NV][3];
    for (int i = 0; i < NV; i++)
        for (int isa = 0; isa < 3; isa++) best[i][isa] = 1e30;
    ts_set_num_threads(1);
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < NV; i++)
            for (int isa = 0; isa <= host && isa < 3; isa++) {
                const double t = time_case(&v[i], isa);
                if (t < best[i][isa]) best[i][isa] = t;
            }
    printf("(1) variants on one thread: portable / AVX2 / AVX-512 (host has up to %s)\n",
           tsi_cpu_isa_name((ts_cpu_isa)host));
    for (int i = 0; i < NV; i++) {
        char nm[96];
        name(&v[i], nm, sizeof nm);
        printf("  %-34s", nm);
        for (int isa = 0; isa <= host && isa < 3; isa++) printf(" %9.1f", best[i][isa]);
        printf("   portable/AVX2 %.2f", best[i][0] / best[i][1]);
        if (host >= 2) printf("  AVX2/AVX-512 %.2f", best[i][1] / best[i][2]);
        printf("\n");
    }

    /* (2) one against two threads at and around the cut-off (elements = n * c * hw) */
    const int64_t min = tsi_norm_limits_get()->parallel_min_elems;
    norm_case t[] = {make(false, false, 32, min / 32, 1),  make(false, false, 64, min / 32, 1),
                     make(false, false, 128, min / 32, 1), make(true, false, 8, 16, min / 128),
                     make(true, false, 8, 16, min / 64),   make(true, false, 8, 16, min / 32),
                     make(true, true, 8, 16, min / 128),   make(true, true, 8, 16, min / 64),
                     make(true, true, 8, 16, min / 32)};
    enum { NT = sizeof t / sizeof t[0] };
    double tb[NT][2];
    for (int i = 0; i < NT; i++) tb[i][0] = tb[i][1] = 1e30;
    for (int r = 0; r < rounds; r++)
        for (int th = 1; th <= 2; th++) {
            ts_set_num_threads(th);
            for (int i = 0; i < NT; i++) {
                const double x = time_case(&t[i], now);
                if (x < tb[i][th - 1]) tb[i][th - 1] = x;
            }
        }
    printf("(2) threads (variant %s): 1 thread / 2 threads, cut-off %lld elements\n",
           tsi_cpu_isa_name((ts_cpu_isa)now), (long long)min);
    for (int i = 0; i < NT; i++) {
        char nm[96];
        name(&t[i], nm, sizeof nm);
        printf("  %-34s %6.2fx the cut-off  %9.1f %9.1f   1/2 %.2f\n", nm,
               (double)(t[i].n * t[i].c * t[i].hw) / (double)min, tb[i][0], tb[i][1],
               tb[i][0] / tb[i][1]);
    }
    die_on_error("bench");
    return 0;
}
