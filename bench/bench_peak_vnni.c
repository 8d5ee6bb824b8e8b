/* bench_peak_vnni.c — one core's AVX512-VNNI int8 peak, measured: 12 independent chains of
 * vpdpbusd zmm (64 unsigned x signed byte multiply-adds each, 2 ops per multiply-add) on registers,
 * best of 5 runs in this thread's CPU time (a shared host's waits not counted). Prints one JSON
 * line {"gops": ..., "ghz_equiv": ...} where ghz_equiv is the rate in vpdpbusd zmm per ns (the
 * clock times the instructions a cycle). bench/bench_quant_models.py reads it for the fraction of
 * peak. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define DP(r) __asm__ volatile("vpdpbusd %1, %2, %0" : "+v"(r) : "v"(b), "v"(a))
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static int chains(long iters) {
    const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(-1);
    __m512i c0 = _mm512_set1_epi32(0), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0,
            c7 = c0, c8 = c0, c9 = c0, c10 = c0, c11 = c0;
    for (long it = 0; it < iters; it++) {
        DP(c0);
        DP(c1);
        DP(c2);
        DP(c3);
        DP(c4);
        DP(c5);
        DP(c6);
        DP(c7);
        DP(c8);
        DP(c9);
        DP(c10);
        DP(c11);
    }
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), c2), c3);
    s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(s, c4), c5), c6);
    s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(s, c7), c8), c9);
    return _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(s, c10), c11));
}
#endif

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); /* CPU time: the host is shared */
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (!__builtin_cpu_supports("avx512vnni")) {
        printf("{\"error\": \"no AVX512-VNNI on this CPU\"}\n");
        return 1;
    }
    const long iters = 20000000;
    double best = 1e30;
    volatile int sink = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = now_s();
        sink += chains(iters);
        double dt = now_s() - t0;
        if (dt < best) best = dt;
    }
    const double instr = (double)iters * 12;
    printf("{\"gops\": %.1f, \"ghz_equiv\": %.3f}\n", instr * 64 * 2 / best * 1e-9,
           instr / best * 1e-9);
    return 0;
#else
    printf("{\"error\": \"x86-64 only\"}\n");
    return 1;
#endif
}
