/* fft_plan.c — FFT plans (fft_plan.h): the factors of n, the twiddle factors of each pass and the
 * Bluestein and real-even parts, every angle an exact fraction of pi reduced to [0, pi / 4] in
 * integers before one sin or cos in double (so a twiddle is within an ulp or two of the true value
 * whatever n), and a small cache of plans shared by every thread. */
#include "backend/cpu/fft_plan.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/fft_engine.h"

#define FFT_PI    3.14159265358979323846264338327950288
#define FFT_CACHE 16 /* plans kept */
/* longer plans (over ~1.5 MB of twiddles, Bluestein's ~6) are built for each call */
#define FFT_CACHE_MAXN (1 << 16)

/* cos and sin of pi * y / N for 0 <= y < 2N, by symmetry from an angle in [0, pi / 4] */
static tsi_cf64 pi_frac(int64_t y, int64_t N) {
    bool neg_s = false, neg_c = false;
    if (y > N) y = 2 * N - y, neg_s = true; /* 2 pi - t */
    if (2 * y > N) y = N - y, neg_c = true; /* pi - t */
    double c, s;
    if (4 * y > N) { /* pi / 2 - phi, phi = pi (N - 2y) / 2N */
        const double phi = FFT_PI * (double)(N - 2 * y) / (double)(2 * N);
        c = sin(phi), s = cos(phi);
    } else {
        const double t = FFT_PI * (double)y / (double)N;
        c = cos(t), s = sin(t);
    }
    return (tsi_cf64){neg_c ? -c : c, neg_s ? -s : s};
}

/* e^(2 pi i x / n), 0 <= x < n */
static tsi_cf64 root_of(int64_t x, int64_t n) { return pi_frac(2 * x, n); }

static void plan_free(tsi_fft_plan *p) {
    if (!p) return;
    plan_free(p->inner);
    free(p->tw64), free(p->tw32), free(p->chirp64), free(p->chirp32), free(p->kern64),
        free(p->kern32);
    free(p);
}

static void to_f32(tsi_cf32 *d, const tsi_cf64 *s, size_t n) {
    for (size_t k = 0; k < n; k++) d[k] = (tsi_cf32){(float)s[k].r, (float)s[k].i};
}

/* n's factors in pass order (FFTPACK's: 4s, one 2 moved first, then odd primes ascending);
 * false when one exceeds TSI_FFT_MAX_RADIX */
static bool factorize(tsi_fft_plan *p) {
    int64_t len = p->n;
    int nf = 0;
    while (len % 4 == 0) p->fct[nf++].p = 4, len /= 4;
    if (len % 2 == 0) {
        len /= 2;
        p->fct[nf++].p = 2;
        const int64_t t = p->fct[0].p;
        p->fct[0].p = 2, p->fct[nf - 1].p = t;
    }
    for (int64_t d = 3; d * d <= len; d += 2)
        while (len % d == 0) {
            if (d > TSI_FFT_MAX_RADIX) return false;
            p->fct[nf++].p = d, len /= d;
        }
    if (len > 1) {
        if (len > TSI_FFT_MAX_RADIX) return false;
        p->fct[nf++].p = len;
    }
    p->nfct = nf;
    return true;
}

static bool build_factors(tsi_fft_plan *p) {
    const int64_t n = p->n;
    size_t total = 0;
    int64_t l1 = 1;
    for (int k = 0; k < p->nfct; k++) {
        const int64_t ip = p->fct[k].p, ido = n / (l1 * ip);
        p->fct[k].tw = total;
        total += (size_t)((ip - 1) * (ido - 1));
        l1 *= ip;
    }
    for (int k = 0; k < p->nfct; k++)
        if (p->fct[k].p > 5) {
            p->fct[k].rt = total;
            total += (size_t)p->fct[k].p;
        }
    p->work = (size_t)n;
    if (total == 0) return true;
    p->tw64 = malloc(sizeof(tsi_cf64) * total);
    p->tw32 = malloc(sizeof(tsi_cf32) * total);
    if (!p->tw64 || !p->tw32) return false;
    l1 = 1;
    for (int k = 0; k < p->nfct; k++) {
        const int64_t ip = p->fct[k].p, ido = n / (l1 * ip);
        tsi_cf64 *w = p->tw64 + p->fct[k].tw;
        for (int64_t j = 1; j < ip; j++)
            for (int64_t i = 1; i < ido; i++)
                w[(j - 1) * (ido - 1) + i - 1] = root_of(j * l1 * i, n);
        if (ip > 5)
            for (int64_t r = 0; r < ip; r++) p->tw64[p->fct[k].rt + (size_t)r] = root_of(r, ip);
        l1 *= ip;
    }
    to_f32(p->tw32, p->tw64, total);
    return true;
}

static tsi_fft_plan *plan_build(int64_t n, bool real_even);

/* the least 2^a 3^b 5^c >= n (Bluestein's convolution length: its passes are the fast ones) */
static int64_t good_size(int64_t n) {
    int64_t best = 1;
    while (best < n) best *= 2;
    for (int64_t f5 = 1; f5 < best; f5 *= 5)
        for (int64_t f35 = f5; f35 < best; f35 *= 3) {
            int64_t x = f35;
            while (x < n) x *= 2;
            if (x < best) best = x;
        }
    return best;
}

/* chirp[j] = e^(-i pi j^2 / n) (j^2 mod 2n kept exactly), kern = DFT_m of the conjugate chirp
 * wrapped around m, divided by m, computed in double with the inner plan */
static bool build_bluestein(tsi_fft_plan *p) {
    const int64_t n = p->n, m = good_size(2 * n - 1);
    p->m = m;
    p->inner = plan_build(m, false);
    if (!p->inner) return false;
    p->work = (size_t)m + p->inner->work;
    p->chirp64 = malloc(sizeof(tsi_cf64) * (size_t)n);
    p->chirp32 = malloc(sizeof(tsi_cf32) * (size_t)n);
    p->kern64 = calloc((size_t)m, sizeof(tsi_cf64));
    p->kern32 = malloc(sizeof(tsi_cf32) * (size_t)m);
    tsi_cf64 *work = malloc(sizeof(tsi_cf64) * p->inner->work);
    const bool ok = p->chirp64 && p->chirp32 && p->kern64 && p->kern32 && work;
    if (ok) {
        int64_t sq = 0; /* j^2 mod 2n */
        for (int64_t j = 0; j < n; j++) {
            const tsi_cf64 e = pi_frac(sq, n);
            p->chirp64[j] = (tsi_cf64){e.r, -e.i};
            p->kern64[j] = e;
            if (j > 0) p->kern64[m - j] = e;
            sq += 2 * j + 1;
            while (sq >= 2 * n) sq -= 2 * n;
        }
        tsi_fft_run_f64(p->inner, p->kern64, work, true);
        const double inv = 1.0 / (double)m;
        for (int64_t k = 0; k < m; k++) p->kern64[k].r *= inv, p->kern64[k].i *= inv;
        to_f32(p->chirp32, p->chirp64, (size_t)n);
        to_f32(p->kern32, p->kern64, (size_t)m);
    }
    free(work);
    return ok;
}

/* the complex plan of n / 2 and chirp[k] = e^(-2 pi i k / n), k < n / 2 */
static bool build_real_even(tsi_fft_plan *p) {
    const int64_t h = p->n / 2;
    p->inner = plan_build(h, false);
    if (!p->inner) return false;
    p->work = p->inner->work;
    p->chirp64 = malloc(sizeof(tsi_cf64) * (size_t)h);
    p->chirp32 = malloc(sizeof(tsi_cf32) * (size_t)h);
    if (!p->chirp64 || !p->chirp32) return false;
    for (int64_t k = 0; k < h; k++) {
        const tsi_cf64 e = root_of(k, p->n);
        p->chirp64[k] = (tsi_cf64){e.r, -e.i};
    }
    to_f32(p->chirp32, p->chirp64, (size_t)h);
    return true;
}

static tsi_fft_plan *plan_build(int64_t n, bool real_even) {
    tsi_fft_plan *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n;
    bool ok;
    if (real_even) {
        p->kind = FFT_PLAN_REAL_EVEN;
        ok = build_real_even(p);
    } else if (factorize(p)) {
        p->kind = FFT_PLAN_FACTORS;
        ok = build_factors(p);
    } else {
        p->kind = FFT_PLAN_BLUESTEIN;
        ok = build_bluestein(p);
    }
    if (ok) return p;
    plan_free(p);
    return NULL;
}

/* ------------------------------------------------------------------ the cache */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static tsi_fft_plan *cache[FFT_CACHE]; /* most recently used first */

tsi_fft_plan *tsi_fft_plan_get(int64_t n, bool real_even) {
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < FFT_CACHE && cache[i]; i++) {
        tsi_fft_plan *p = cache[i];
        if (p->n == n && (p->kind == FFT_PLAN_REAL_EVEN) == real_even) {
            p->refs++;
            memmove(cache + 1, cache, sizeof(cache[0]) * (size_t)i);
            cache[0] = p;
            pthread_mutex_unlock(&cache_lock);
            return p;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    tsi_fft_plan *p = plan_build(n, real_even);
    if (!p) return NULL;
    p->refs = 1;
    if (n > FFT_CACHE_MAXN) return p;
    pthread_mutex_lock(&cache_lock);
    /* the least recently used plan no call holds makes room (another thread may have cached this
     * n meanwhile: then both stay, the older one ageing out) */
    int victim = -1;
    for (int i = FFT_CACHE - 1; i >= 0 && victim < 0; i--)
        if (!cache[i] || cache[i]->refs == 0) victim = i;
    if (victim >= 0) {
        tsi_fft_plan *old = cache[victim];
        memmove(cache + 1, cache, sizeof(cache[0]) * (size_t)victim);
        cache[0] = p;
        p->cached = true;
        plan_free(old);
    }
    pthread_mutex_unlock(&cache_lock);
    return p;
}

void tsi_fft_plan_put(tsi_fft_plan *p) {
    if (!p) return;
    pthread_mutex_lock(&cache_lock);
    const bool drop = --p->refs == 0 && !p->cached;
    pthread_mutex_unlock(&cache_lock);
    if (drop) plan_free(p);
}
