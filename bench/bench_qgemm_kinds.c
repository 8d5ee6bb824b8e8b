/* bench_qgemm_kinds.c — the int8 GEMM's kernels (src/backend/cpu/qgemm_vnni.h: portable, AVX2
 * vpmaddubsw, AVX-VNNI ymm, AVX512-VNNI) on one product through ts_matmul_integer_to_float (a
 * uint8 [M, K] by a constant int8 [K, N], its packed form cached; the float32 epilogue included),
 * each kernel forced in turn with tsi_qgemm_kind_cap, the kinds alternated in every round. Prints
 * one line per kind: best and median of the rounds in this thread's CPU time (a shared host's waits
 * not counted; run with OMP_NUM_THREADS=1 for one core) and GOPS = 2 M N K / best.
 * Then the decode kernels (ts_int8_dynamic_activation_linear, int8 weights, then int4 with group
 * 32 and float16 scales) on one token of K by 4 K, the same way.
 * Usage: bench_qgemm_kinds [M K N [rounds]] (default 128 768 768 7: BERT-base's projections at
 * sequence 128). */
#define _POSIX_C_SOURCE 199309L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/cpu/qgemm_vnni.h"
#include "tessera.h"
#include "tessera/quant.h"

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the decode kernel on one token against wq, each kind in turn every round; prints its lines */
static int decode(ts_tensor *xt, ts_tensor *wq, const char *what, const tsi_qgemm_kind *kinds,
                  int nk, int rounds, double (*t)[99]) {
    const int64_t K = ts_size(xt, 1), N = ts_size(wq, 0);
    for (int round = -1; round < rounds; round++)
        for (int i = 0; i < nk; i++) {
            atomic_store(&tsi_qgemm_kind_cap, (int)kinds[i]);
            const int reps = 20;
            const double t0 = cpu_s();
            for (int rep = 0; rep < reps; rep++) {
                ts_scope_begin();
                if (!ts_int8_dynamic_activation_linear(xt, wq, NULL)) {
                    fprintf(stderr, "error: %s\n", ts_error_message());
                    return 1;
                }
                ts_scope_end();
            }
            if (round >= 0) t[i][round] = (cpu_s() - t0) / reps;
        }
    printf("decode: int8 activations x %s weights, 1 x %lld by %lld x %lld\n", what, (long long)K,
           (long long)K, (long long)N);
    for (int i = 0; i < nk; i++) {
        qsort(t[i], (size_t)rounds, sizeof(double), cmp_d);
        printf("%-11s best %8.3f ms  median %8.3f ms  %7.1f GOPS\n", tsi_qgemm_kind_name(kinds[i]),
               1e3 * t[i][0], 1e3 * t[i][rounds / 2], 2.0 * (double)(N * K) / t[i][0] * 1e-9);
    }
    return 0;
}

int main(int argc, char **argv) {
    const int64_t M = argc > 3 ? atoll(argv[1]) : 128, K = argc > 3 ? atoll(argv[2]) : 768,
                  N = argc > 3 ? atoll(argv[3]) : 768;
    const int rounds = argc > 4 ? atoi(argv[4]) : 7;
    if (M < 1 || K < 1 || N < 1 || rounds < 1 || rounds > 99) {
        fprintf(stderr, "usage: bench_qgemm_kinds [M K N [rounds 1..99]]\n");
        return 2;
    }
    uint8_t *av = malloc((size_t)(M * K)), *bv = malloc((size_t)(K * N));
    uint32_t r = 12345;
    for (int64_t i = 0; i < M * K; i++) av[i] = (uint8_t)((r = r * 1664525u + 1013904223u) >> 24);
    for (int64_t i = 0; i < K * N; i++) bv[i] = (uint8_t)((r = r * 1664525u + 1013904223u) >> 24);
    const float as = 0.01f, bs = 0.02f;
    ts_tensor *a = ts_from_data(TS_SHAPE(M, K), TS_U8, av, (ts_opts){0});
    ts_tensor *b = ts_from_data(TS_SHAPE(K, N), TS_I8, bv, (ts_opts){0});
    ts_tensor *asc = ts_tensor_f32(TS_SHAPE(1), &as, (ts_opts){0});
    ts_tensor *bsc = ts_tensor_f32(TS_SHAPE(1), &bs, (ts_opts){0});
    tsi_qgemm_kind kinds[4];
    int nk = 0;
    for (int k = TSI_QGEMM_PORTABLE; k <= TSI_QGEMM_AVX512VNNI; k++) {
        atomic_store(&tsi_qgemm_kind_cap, k);
        if (tsi_qgemm_kind_get() == (tsi_qgemm_kind)k) kinds[nk++] = (tsi_qgemm_kind)k;
    }
    double t[4][99];
    for (int round = -1; round < rounds; round++) /* round -1: warm-up (packing, caches) */
        for (int i = 0; i < nk; i++) {
            atomic_store(&tsi_qgemm_kind_cap, (int)kinds[i]);
            /* calls enough for ~50 ms on the slowest kind's first estimate: one call per round
             * for portable, several for the vector kernels */
            const int reps = kinds[i] == TSI_QGEMM_PORTABLE ? 1 : 5;
            const double t0 = cpu_s();
            for (int rep = 0; rep < reps; rep++) {
                ts_scope_begin();
                ts_tensor *y = ts_matmul_integer_to_float(a, asc, NULL, b, bsc, NULL, NULL);
                if (!y) {
                    fprintf(stderr, "error: %s\n", ts_error_message());
                    return 1;
                }
                ts_scope_end();
            }
            if (round >= 0) t[i][round] = (cpu_s() - t0) / reps;
        }
    printf("M %lld K %lld N %lld, %d rounds, this thread's CPU time\n", (long long)M, (long long)K,
           (long long)N, rounds);
    for (int i = 0; i < nk; i++) {
        qsort(t[i], (size_t)rounds, sizeof(double), cmp_d);
        printf("%-11s best %8.3f ms  median %8.3f ms  %7.1f GOPS\n", tsi_qgemm_kind_name(kinds[i]),
               1e3 * t[i][0], 1e3 * t[i][rounds / 2], 2.0 * (double)(M * N * K) / t[i][0] * 1e-9);
    }
    /* the decode kernels (kern_qdynamic_act.c: int8 activations x int8, then int4 weights, one
     * token) on K by 4 K: the same alternation */
    const int64_t DN = 4 * K;
    float *wf = malloc((size_t)(DN * K) * sizeof *wf), *xf = malloc((size_t)K * sizeof *xf);
    for (int64_t i = 0; i < DN * K; i++)
        wf[i] = (float)((r = r * 1664525u + 1013904223u) >> 8) * 0x1p-24f - 0.5f;
    for (int64_t i = 0; i < K; i++)
        xf[i] = (float)((r = r * 1664525u + 1013904223u) >> 8) * 0x1p-24f - 0.5f;
    ts_tensor *wf_t = ts_tensor_f32(TS_SHAPE(DN, K), wf, (ts_opts){0});
    ts_tensor *xt = ts_tensor_f32(TS_SHAPE(1, K), xf, (ts_opts){0});
    ts_tensor *w8 = ts_quantize_int8_weight_only(wf_t),
              *w4 = K % 32 ? NULL : ts_quantize_int4_symmetric_weight(wf_t, 32);
    if (decode(xt, w8, "int8", kinds, nk, rounds, t) ||
        (w4 && decode(xt, w4, "int4 (group 32, float16 scales)", kinds, nk, rounds, t)))
        return 1;
    free(av), free(bv), free(wf), free(xf);
    return 0;
}
