/* philox.h — Philox-4x32-10 and its mapping to uniforms/normals, shared by CPU and CUDA kernels. */
#ifndef TS_PHILOX_H
#define TS_PHILOX_H

#include <math.h>
#include <stdint.h>

/* The stream layout; every backend must reproduce it bit for bit, so a seed gives the same tensor
 * on every device and under every thread split.
 *
 *   Philox-4x32-10 (Salmon et al. 2011): multipliers 0xD2511F53, 0xCD9E8D57; Weyl key increments
 *   0x9E3779B9, 0xBB67AE85; key = {(uint32)seed, (uint32)(seed >> 32)}.
 *
 *   Element i of an output (row-major order of the output's shape) has stream position
 *   j = offset + i. Its d-th 32-bit word (d = 0, 1, 2, ...) is lane (j % 4) of the Philox block
 * with counter {(uint32)(j / 4), (uint32)((j / 4) >> 32), d, 0}. Four neighbouring elements thus
 * share one Philox evaluation per word, and no element's numbers depend on any other element.
 *
 *   u24(w)      = (w & 0xFFFFFF) * 2^-24                       float in [0, 1)
 *   u53(w0, w1) = (((uint64)w1 << 32 | w0) >> 11) * 2^-53      double in [0, 1)
 *
 *   uniform     f64 output: u53(word 0, word 1); other dtypes: u24(word 0); value low +
 * (high-low)*u normal      Box-Muller, z = sqrt(-2 ln(1 - u1)) * cos(2 pi u2), value mean + std *
 * z, with f64 output: u1 = u53(word 0, word 1), u2 = u53(word 2, word 3); other dtypes: u1 =
 * u24(word 0), u2 = u24(word 1) bernoulli   u24(word 0) < p (as doubles) randint     low +
 * (((uint64)word 1 << 32 | word 0) % (high - low))
 *
 * Everything after the Philox words is evaluated in double precision. */

#ifndef TS_HD
#ifdef __CUDACC__
#define TS_HD __host__ __device__
#else
#define TS_HD
#endif
#endif

#define TS_PHILOX_M0 0xD2511F53u
#define TS_PHILOX_M1 0xCD9E8D57u
#define TS_PHILOX_W0 0x9E3779B9u
#define TS_PHILOX_W1 0xBB67AE85u

static inline TS_HD uint32_t ts_philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

/* One full Philox-4x32-10 evaluation: ctr and key in, four words out (may alias ctr). */
static inline TS_HD void ts_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                                          uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = ts_philox_mulhilo(TS_PHILOX_M0, c0, &hi0);
        uint32_t lo1 = ts_philox_mulhilo(TS_PHILOX_M1, c2, &hi1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
        k0 += TS_PHILOX_W0;
        k1 += TS_PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The four words `d` of block `blk` (stream positions 4*blk .. 4*blk+3). */
static inline TS_HD void ts_philox_block(uint64_t seed, uint64_t blk, uint32_t d, uint32_t out[4]) {
    uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), d, 0u};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    ts_philox4x32_10(ctr, key, out);
}

/* Word d of stream position j (computes a whole block; use ts_philox_block to share it). */
static inline TS_HD uint32_t ts_philox_word(uint64_t seed, uint64_t j, uint32_t d) {
    uint32_t w[4];
    ts_philox_block(seed, j >> 2, d, w);
    return w[j & 3u];
}

static inline TS_HD float ts_philox_u24(uint32_t w) {
    return (float)(w & 0xFFFFFFu) * 5.9604644775390625e-08f; /* 2^-24 */
}

static inline TS_HD double ts_philox_u53(uint32_t w0, uint32_t w1) {
    uint64_t x = ((uint64_t)w1 << 32) | (uint64_t)w0;
    return (double)(x >> 11) * 1.1102230246251565404e-16; /* 2^-53 */
}

/* u1, u2 in [0, 1); 1 - u1 lies in (0, 1] so the log never sees 0. */
static inline TS_HD double ts_philox_box_muller(double u1, double u2) {
    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586476925 * u2);
}

/* Per-element forms of the layout above (one element per call), for CUDA threads and tests. */
static inline TS_HD double ts_philox_uniform_at(uint64_t seed, uint64_t j, int f64) {
    if (f64) return ts_philox_u53(ts_philox_word(seed, j, 0), ts_philox_word(seed, j, 1));
    return (double)ts_philox_u24(ts_philox_word(seed, j, 0));
}

static inline TS_HD double ts_philox_normal_at(uint64_t seed, uint64_t j, int f64) {
    double u1, u2;
    if (f64) {
        u1 = ts_philox_u53(ts_philox_word(seed, j, 0), ts_philox_word(seed, j, 1));
        u2 = ts_philox_u53(ts_philox_word(seed, j, 2), ts_philox_word(seed, j, 3));
    } else {
        u1 = (double)ts_philox_u24(ts_philox_word(seed, j, 0));
        u2 = (double)ts_philox_u24(ts_philox_word(seed, j, 1));
    }
    return ts_philox_box_muller(u1, u2);
}

static inline TS_HD uint64_t ts_philox_u64_at(uint64_t seed, uint64_t j) {
    return ((uint64_t)ts_philox_word(seed, j, 1) << 32) | (uint64_t)ts_philox_word(seed, j, 0);
}

#endif /* TS_PHILOX_H */
