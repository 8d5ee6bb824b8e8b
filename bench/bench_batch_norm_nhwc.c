/* bench_batch_norm_nhwc.c — batch norm's fused training kernels, forward + backward, on ResNet-18's
 * activation shapes: the NCHW kernels against the channels_last (NHWC) ones on the same data, f32
 * and bf16 (float32 parameters), 1 and 2 threads. Calls the kernels directly (the best vector ISA
 * of this CPU), so nothing but the kernels is timed: the median of the runs, in ms, and the
 * effective bandwidth (forward reads x twice and writes y, backward reads x and dy twice and
 * writes dx: 7 passes over the tensor). */
#define BENCH_NAME "bench_batch_norm_nhwc"
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"
#include "bench_util.h"

enum { RUNS = 15 };

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median ms of forward + backward */
static double time_once(ts_batch_norm_args *a) {
    double t[RUNS];
    for (int r = 0; r < RUNS + 2; r++) {
        const double t0 = now_s();
        tsi_cpu_batch_norm_isa(ts_cpu_isa_get(), a, false);
        tsi_cpu_batch_norm_isa(ts_cpu_isa_get(), a, true);
        if (r >= 2) t[r - 2] = (now_s() - t0) * 1e3; /* two warm-up runs */
    }
    qsort(t, RUNS, sizeof t[0], cmp_double);
    return t[RUNS / 2];
}

static void bench(int64_t n, int64_t c, int64_t hw, ts_dtype dt) {
    const int64_t tot = n * c * hw;
    const size_t es = dt == TS_F32 ? 4 : 2;
    char *big = malloc((size_t)tot * es * 4);
    float *small = malloc(sizeof(float) * (size_t)c * 7);
    for (int64_t i = 0; i < tot * 2; i++) { /* x and dy: values of [-1, 1) */
        const float v = (float)((i * 7919) % 2000) / 1000.0f - 1.0f;
        if (es == 4)
            memcpy(big + i * 4, &v, 4);
        else {
            uint32_t u;
            memcpy(&u, &v, 4);
            const uint16_t h = (uint16_t)(u >> 16);
            memcpy(big + i * 2, &h, 2);
        }
    }
    for (int64_t i = 0; i < c * 7; i++) small[i] = 1.0f + (float)(i % 5) * 0.1f;
    ts_batch_norm_args a = {.n = n, .c = c, .hw = hw, .eps = 1e-5};
    a.x = (ts_kview){.data = big, .dtype = dt};
    a.dy = (ts_kview){.data = big + tot * es, .dtype = dt};
    a.y = (ts_kview){.data = big + 2 * tot * es, .dtype = dt};
    a.dx = (ts_kview){.data = big + 3 * tot * es, .dtype = dt};
    ts_kview *p[] = {&a.weight, &a.bias, &a.mean, &a.invstd, &a.var, &a.dweight, &a.dbias};
    for (int i = 0; i < 7; i++)
        *p[i] = (ts_kview){.data = (char *)(small + i * c), .dtype = TS_F32};
    for (int th = 1; th <= 2; th++) {
        ts_set_num_threads(th);
        double ms[2];
        for (int f = 0; f < 2; f++) {
            a.channels_last = f;
            ms[f] = time_once(&a);
        }
        const double gb = 7.0 * (double)tot * (double)es / 1e9;
        printf("[%3lld, %3lld, %4lld] %-4s %d thread%s  NCHW %7.3f ms (%5.1f GB/s)  NHWC %7.3f ms "
               "(%5.1f GB/s)  NHWC/NCHW %.2f\n",
               (long long)n, (long long)c, (long long)hw, ts_dtype_name(dt), th, th > 1 ? "s" : " ",
               ms[0], gb / ms[0] * 1e3, ms[1], gb / ms[1] * 1e3, ms[1] / ms[0]);
    }
    free(big), free(small);
}

int main(void) {
    ts_release(ts_zeros(TS_SHAPE(1), (ts_opts){0})); /* the library's set-up (the host scratch) */
    printf("batch norm forward + backward, kernels only (isa %s)\n",
           tsi_cpu_isa_name(ts_cpu_isa_get()));
    static const int64_t shapes[][3] = {
        {64, 64, 1024}, {64, 128, 256}, {64, 256, 64}, {64, 512, 16}};
    for (int s = 0; s < 4; s++)
        for (int d = 0; d < 2; d++)
            bench(shapes[s][0], shapes[s][1], shapes[s][2], d ? TS_BF16 : TS_F32);
    die_on_error("bench");
    return 0;
}
