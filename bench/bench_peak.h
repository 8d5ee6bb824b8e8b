/* bench_peak.h — the host's peak float32 FLOP/s, measured: every thread runs independent chains of
 * fused multiply-adds on the widest vectors the CPU has (AVX-512, else AVX2 + FMA; AVX2 when
 * TS_CPU_ISA=avx2 caps the library, as BENCH_ISA=avx2 does), enough chains to hide the FMA
 * latency. Benchmarks print each case's share of it. */
#ifndef TS_BENCH_PEAK_H
#define TS_BENCH_PEAK_H

#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
typedef float bench_v16f __attribute__((vector_size(64)));
typedef float bench_v8f __attribute__((vector_size(32)));

#define BENCH_FMA_LOOP(NAME, ATTR, VT)                                                             \
    ATTR __attribute__((optimize("fp-contract=fast"))) static double NAME(long iters) {            \
        VT a[12], b = (VT){0} + 0.999999f, c = (VT){0} + 1e-7f;                                    \
        for (int i = 0; i < 12; i++) a[i] = (VT){0} + (float)i;                                    \
        for (long it = 0; it < iters; it++)                                                        \
            for (int i = 0; i < 12; i++) a[i] = a[i] * b + c;                                      \
        float s = 0;                                                                               \
        for (int i = 0; i < 12; i++) s += a[i][0];                                                 \
        return (double)s;                                                                          \
    }
BENCH_FMA_LOOP(bench_fma_avx512, __attribute__((target("avx512f,fma"))), bench_v16f)
BENCH_FMA_LOOP(bench_fma_avx2, __attribute__((target("avx2,fma"))), bench_v8f)
#endif

static double bench_now_s(void) {
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Peak f32 FLOP/s of `threads` threads (best of 3), and the vector ISA it used in *isa. */
static double bench_peak_flops(int threads, const char **isa) {
    double best = 0;
    *isa = "scalar";
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    const char *cap = getenv("TS_CPU_ISA");
    const int capped = cap && !strcmp(cap, "avx2");
    const int w512 = __builtin_cpu_supports("avx512f") && !capped;
    const int w256 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (!w512 && !w256) return 0;
    *isa = w512 ? "avx512" : "avx2";
    const long iters = 20000000;
    const double flops_per_thread = (double)iters * 12 * (w512 ? 16 : 8) * 2;
    for (int r = 0; r < 3; r++) {
        volatile double sink = 0;
        double t0 = bench_now_s();
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : sink)
#endif
        sink += w512 ? bench_fma_avx512(iters) : bench_fma_avx2(iters);
        double dt = bench_now_s() - t0;
        double f = flops_per_thread * threads / dt;
        if (f > best) best = f;
    }
#endif
    return best;
}

#endif /* TS_BENCH_PEAK_H */
