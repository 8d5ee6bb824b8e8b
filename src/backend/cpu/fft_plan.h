/* fft_plan.h — the CPU FFT engine (decision 0022): a plan for one transform length n, built once
 * with its twiddle factors in double (a float copy for the float32 transforms), and the
 * transforms it runs in float and in double (fft_engine.c).
 *
 * A plan of kind FFT_PLAN_FACTORS runs mixed-radix passes (FFTPACK's self-sorting layout: each pass
 * reads one buffer and writes the other) over the factors of n: 4s, then one 2 (moved to the
 * front), 3, 5 and every other prime p <= TSI_FFT_MAX_RADIX with a generic odd pass. A length with
 * a larger prime factor is a FFT_PLAN_BLUESTEIN plan: the chirp-z transform as a cyclic
 * convolution of length m >= 2n - 1, the least 2^a 3^b 5^c (an inner FACTORS plan), so every n
 * costs O(n log n). FFT_PLAN_REAL_EVEN is the plan of a real transform of even length n: the
 * complex plan of n / 2 (inner) and the n / 2 twiddles that split and join its halves. The
 * transforms themselves: fft_engine.h. */
#ifndef TS_FFT_PLAN_H
#define TS_FFT_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TSI_FFT_MAX_RADIX   64 /* larger prime factors go through Bluestein */
#define TSI_FFT_MAX_FACTORS 64

typedef struct tsi_cf32 {
    float r, i;
} tsi_cf32;
typedef struct tsi_cf64 {
    double r, i;
} tsi_cf64;

typedef enum { FFT_PLAN_FACTORS, FFT_PLAN_BLUESTEIN, FFT_PLAN_REAL_EVEN } tsi_fft_plan_kind;

typedef struct tsi_fft_factor {
    int64_t p; /* the radix */
    size_t tw; /* its (p - 1) * (ido - 1) pass twiddles start here in tw64 / tw32 */
    size_t rt; /* generic radix: its p roots e^(2 pi i r / p) start here */
} tsi_fft_factor;

typedef struct tsi_fft_plan {
    tsi_fft_plan_kind kind;
    int64_t n;
    size_t work; /* complex scratch elements run() needs besides the data */
    /* FACTORS: the factors in pass order; twiddles e^(+2 pi i x / n) (the forward passes take
     * their conjugates), then the roots of the generic radices */
    int nfct;
    tsi_fft_factor fct[TSI_FFT_MAX_FACTORS];
    tsi_cf64 *tw64;
    tsi_cf32 *tw32;
    /* BLUESTEIN: chirp[j] = e^(-i pi j^2 / n), j < n; kern[k] = DFT_m(conj chirp, wrapped) / m;
     * REAL_EVEN: chirp[k] = e^(-2 pi i k / n), k < n / 2 */
    struct tsi_fft_plan *inner;
    int64_t m;
    tsi_cf64 *chirp64, *kern64;
    tsi_cf32 *chirp32, *kern32;
    /* cache bookkeeping (fft_plan.c) */
    int refs;
    bool cached;
} tsi_fft_plan;

/* The plan of a complex transform of length n >= 1 (real_even: of a real transform of even length
 * n >= 2), shared from a small thread-safe cache; NULL when memory ran out. Give it back with
 * tsi_fft_plan_put. */
tsi_fft_plan *tsi_fft_plan_get(int64_t n, bool real_even);
void tsi_fft_plan_put(tsi_fft_plan *p);

#endif /* TS_FFT_PLAN_H */
