/* bench_peak_bf16.c — the host's peak arithmetic, measured: float32 FMAs (bench_peak.h) and, where
 * the CPU has AVX512-BF16, bf16 dot products (vdpbf16ps: 32 bf16 pairs multiplied and summed into
 * 16 float32 lanes, 64 FLOP an instruction) in independent chains, on 1 and 2 threads. The ceiling
 * that bf16 and float32 products (bench/bench_bf16.py) are measured against.
 * Usage: build/bench/bench_peak_bf16 */
#include <stdio.h>

#include "bench_peak.h"

#if defined(__GNUC__) && defined(__x86_64__) && (__GNUC__ >= 10 || defined(__clang__))
#include <immintrin.h>
#define HAVE_BF16_LOOP 1
__attribute__((target("avx512f,avx512bf16"))) static double dpbf16_loop(long iters) {
    __m512 acc[12];
    for (int i = 0; i < 12; i++) acc[i] = _mm512_set1_ps((float)i);
    const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3380);
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < 12; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    float s = 0;
    for (int i = 0; i < 12; i++) s += _mm512_reduce_add_ps(acc[i]);
    return (double)s;
}

static double bf16_peak(int threads) {
    const long iters = 10000000;
    double best = 0;
    for (int r = 0; r < 3; r++) {
        volatile double sink = 0;
        const double t0 = bench_now_s();
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : sink)
#endif
        sink += dpbf16_loop(iters);
        const double f = (double)iters * 12 * 64 * threads / (bench_now_s() - t0);
        if (f > best) best = f;
    }
    return best;
}
#endif

int main(void) {
    for (int threads = 1; threads <= 2; threads++) {
        const char *isa;
        const double f32 = bench_peak_flops(threads, &isa);
        printf("%d thread%s: float32 FMA peak %.1f GFLOP/s (%s)", threads, threads > 1 ? "s" : "",
               f32 / 1e9, isa);
#ifdef HAVE_BF16_LOOP
        if (__builtin_cpu_supports("avx512bf16"))
            printf(", bf16 dot-product peak %.1f GFLOP/s (avx512_bf16)", bf16_peak(threads) / 1e9);
        else
            printf(", no AVX512-BF16");
#endif
        printf("\n");
    }
    return 0;
}
