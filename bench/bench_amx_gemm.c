/* bench_amx_gemm.c — bf16 products on Tessera's AMX kernel (gemm_amx.c) against oneDNN's bf16
 * matmul primitive on the same preallocated operands (no allocation, no page faults in the timing),
 * over the layouts a training step sends: A B, A B^T (linear's forward, W stored [n x k]), A^T B
 * (a weight gradient), each on 1 and 2 threads; best of 7 calls. Needs an AMX host: elsewhere the
 * kernel declines and the program says so.
 * Usage: TS_AMX_GEMM=all build/bench/bench_amx_gemm [M N K ...]   (default: a list of shapes) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cpu/gemm_amx.h"
#include "backend/cpu/matmul_dnnl.h"
#include "tessera.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct layout {
    const char *name;
    bool ta, tb;
} layout;

static double best_of(bool amx, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                      const int64_t sa[3], const uint16_t *b, const int64_t sb[3], uint16_t *c,
                      const int64_t sc[3]) {
    double best = 1e30;
    for (int r = 0; r < 7; r++) {
        const double t = now();
        const bool ok = amx ? tsi_amx_gemm_bf16(1, m, n, k, a, sa, b, sb, c, sc, NULL)
                            : tsi_dnnl_matmul_strided(TS_BF16, 1, m, n, k, a, sa, b, sb, c, sc);
        if (!ok) return -1;
        const double dt = now() - t;
        if (dt < best) best = dt;
    }
    return best;
}

int main(int argc, char **argv) {
    static const int64_t shapes[][3] = {{1024, 1024, 1024}, {4096, 4096, 1024}, {2048, 2048, 1024},
                                        {4096, 4096, 256},  {256, 1024, 1024},  {4096, 256, 1024},
                                        {1024, 256, 4096},  {256, 784, 1024},   {512, 512, 512}};
    const int nshapes = argc > 3 ? (argc - 1) / 3 : (int)(sizeof shapes / sizeof shapes[0]);
    static const layout layouts[] = {
        {"A B", false, false}, {"A B^T", false, true}, {"A^T B", true, false}};
    ts_release(ts_zeros(TS_SHAPE(1), (ts_opts){0})); /* the library's cpu backend (the scratch) */
    if (!tsi_amx_gemm_ready()) {
        puts("bench_amx_gemm: the AMX kernel cannot run here (no AMX-BF16, TS_CPU_ISA or "
             "ONEDNN_MAX_CPU_ISA below it, or TS_AMX_GEMM=off)");
        return 0;
    }
    printf("%-16s %-6s %3s %10s %10s %8s %8s %7s\n", "MxNxK", "layout", "thr", "amx ms", "dnnl ms",
           "amx TF/s", "dnnl TF/s", "ratio");
    for (int s = 0; s < nshapes; s++) {
        const int64_t m = argc > 3 ? atoll(argv[1 + 3 * s]) : shapes[s][0];
        const int64_t n = argc > 3 ? atoll(argv[2 + 3 * s]) : shapes[s][1];
        const int64_t k = argc > 3 ? atoll(argv[3 + 3 * s]) : shapes[s][2];
        uint16_t *a = malloc((size_t)(m * k) * 2), *b = malloc((size_t)(k * n) * 2);
        uint16_t *c = malloc((size_t)(m * n) * 2);
        if (!a || !b || !c) return 1;
        for (int64_t i = 0; i < m * k; i++) a[i] = (uint16_t)(0x3f80 + i % 7);
        for (int64_t i = 0; i < k * n; i++) b[i] = (uint16_t)(0x3f80 + i % 5);
        memset(c, 0, (size_t)(m * n) * 2);
        for (int l = 0; l < 3; l++) {
            const int64_t sa[3] = {0, layouts[l].ta ? 1 : k, layouts[l].ta ? m : 1};
            const int64_t sb[3] = {0, layouts[l].tb ? 1 : n, layouts[l].tb ? k : 1};
            const int64_t sc[3] = {0, n, 1};
            for (int th = 1; th <= 2; th++) {
                ts_set_num_threads(th);
                const double ta = best_of(true, m, n, k, a, sa, b, sb, c, sc);
                const double td = best_of(false, m, n, k, a, sa, b, sb, c, sc);
                const double fl = 2.0 * (double)m * (double)n * (double)k;
                char shape[48];
                snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)m, (long long)n,
                         (long long)k);
                printf("%-16s %-6s %3d %10.3f %10.3f %8.2f %8.2f %6.2fx\n", shape, layouts[l].name,
                       th, ta * 1e3, td * 1e3, fl / ta / 1e12, fl / td / 1e12, td / ta);
                fflush(stdout);
            }
        }
        free(a), free(b), free(c);
    }
    return 0;
}
