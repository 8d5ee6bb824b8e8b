/* bench_peak_bf16.c — the host's peak arithmetic, measured: float32 FMAs (bench_peak.h), where
 * the CPU has AVX512-BF16 bf16 dot products (vdpbf16ps: 32 bf16 pairs multiplied and summed into
 * 16 float32 lanes, 64 FLOP an instruction) in independent chains, and where it has AMX-BF16 the
 * tiles' dot products (tdpbf16ps: a 16 x 32 bf16 tile times a 32 x 16 one into 16 x 16 float32,
 * 16384 FLOP an instruction, four independent accumulators), on 1 and 2 threads. The ceiling that
 * bf16 and float32 products (bench/bench_bf16.py) are measured against.
 * Usage: build/bench/bench_peak_bf16 */
#define _GNU_SOURCE /* syscall */
#include <stdio.h>

#include "bench_peak.h"

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

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

/* FLOP/s of `loop` (iters steps of flops_per_iter each) on `threads` threads at once: the best of 3
 */
static double loop_peak(double (*loop)(long), long iters, double flops_per_iter, int threads) {
    double best = 0;
    for (int r = 0; r < 3; r++) {
        volatile double sink = 0;
        const double t0 = bench_now_s();
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : sink)
#endif
        sink += loop(iters);
        const double f = (double)iters * flops_per_iter * threads / (bench_now_s() - t0);
        if (f > best) best = f;
    }
    return best;
}

/* 12 chains of vdpbf16ps, 64 FLOP each */
static double bf16_peak(int threads) { return loop_peak(dpbf16_loop, 10000000, 12 * 64, threads); }
#endif

#if defined(HAVE_BF16_LOOP) && defined(__linux__) && __GNUC__ >= 11
#define HAVE_AMX_LOOP 1
/* Linux hands out the tiles' 8 KiB of state only to a process that asks (arch_prctl
 * ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); oneDNN asks the same way. */
static int amx_permitted(void) {
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
}

typedef struct tile_config {
    unsigned char palette, start_row, reserved[14];
    unsigned short colsb[16];
    unsigned char rows[16];
} tile_config;

/* in static storage: GCC 12 treats ldtilecfg's operand as unread and may drop stores to a local */
static const tile_config tiles_16x64 = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

__attribute__((target("amx-tile,amx-bf16"))) static double amx_loop(long iters) {
    _tile_loadconfig(&tiles_16x64);
    static __thread unsigned short a[16 * 32] __attribute__((aligned(64)));
    static __thread float c[16 * 16] __attribute__((aligned(64)));
    for (int i = 0; i < 16 * 32; i++) a[i] = 0x3380; /* tiny: the sums stay finite */
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a, 64);
    _tile_loadd(6, a, 64);
    _tile_loadd(7, a, 64);
    for (long it = 0; it < iters; it++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c, 64);
    _tile_release();
    return (double)c[0];
}

/* 4 tdpbf16ps a step, 16384 FLOP each */
static double amx_peak(int threads) { return loop_peak(amx_loop, 2000000, 4 * 16384, threads); }
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
#ifdef HAVE_AMX_LOOP
        if (__builtin_cpu_supports("amx-bf16") && amx_permitted())
            printf(", AMX bf16 tile peak %.1f GFLOP/s", amx_peak(threads) / 1e9);
#endif
        printf("\n");
    }
    return 0;
}
