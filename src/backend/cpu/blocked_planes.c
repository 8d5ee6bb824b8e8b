/* blocked_planes.c — the squeeze-excitation's two per-plane ops on channel-blocked activations
 * ([N, ceil(C/B), H, W, B] float32, backend.h's global_avg_pool_blocked and mul_channels_blocked):
 * global average pooling and the product of x with one vector of B channel scales per plane.
 *
 * Each plane of B channels is one vector (16 lanes with AVX-512, 8 with AVX2), in code compiled
 * for that ISA (the library is built for baseline x86-64, where these loops were 128-bit), and the
 * planes are shared among OpenMP's threads once a call's elements pay for their start: in
 * MobileNetV3-Small they ran on one thread while the second waited (bench/results/onnx-models.md).
 * The pooling sums as kern_pool.c's plane_mean_f32 does (16 partial sums, element i into sum i %
 * 16, the tail likewise, then halved pairwise 8, 4, 2, 1, and divided by hw), lane by lane: the
 * same bits as the plain layout's global average pooling, on any ISA and thread count. */
#include <string.h>

#include "backend/cpu/cpu_isa.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/omp_if.h"

/* elements of x from which a call's planes are shared among threads */
enum { PARALLEL_MIN_ELEMS = 1 << 14, MAX_BLK = 16 };

/* POOL_PLANE(V, B): out[0..B) = the means of plane xp's B lanes, acc[16] of type V (B floats) */
#define POOL_PLANE(V, B)                                                                           \
    do {                                                                                           \
        V acc[16], v;                                                                              \
        memset(acc, 0, sizeof acc);                                                                \
        int64_t i = 0;                                                                             \
        for (; i + 16 <= hw; i += 16)                                                              \
            for (int j = 0; j < 16; j++) {                                                         \
                memcpy(&v, xp + (i + j) * (B), sizeof v);                                          \
                acc[j] += v;                                                                       \
            }                                                                                      \
        for (int j = 0; i < hw; i++, j++) {                                                        \
            memcpy(&v, xp + i * (B), sizeof v);                                                    \
            acc[j] += v;                                                                           \
        }                                                                                          \
        for (int w = 8; w > 0; w /= 2)                                                             \
            for (int j = 0; j < w; j++) acc[j] += acc[j + w];                                      \
        v = acc[0] / (float)hw;                                                                    \
        memcpy(op, &v, sizeof v);                                                                  \
    } while (0)

/* MUL_PLANE(V, B): op = xp * sp over the plane's hw pixels of B lanes */
#define MUL_PLANE(V, B)                                                                            \
    do {                                                                                           \
        V sv, v;                                                                                   \
        memcpy(&sv, sp, sizeof sv);                                                                \
        for (int64_t i = 0; i < hw; i++) {                                                         \
            memcpy(&v, xp + i * (B), sizeof v);                                                    \
            v *= sv;                                                                               \
            memcpy(op + i * (B), &v, sizeof v);                                                    \
        }                                                                                          \
    } while (0)

/* one plane p of each op for lanes of type V (B floats), under ATTR */
#define DEFINE_PLANES(SFX, ATTR, V, B)                                                             \
    ATTR static void pool_##SFX(float *out, const float *x, int64_t hw, int64_t p) {               \
        const float *xp = x + p * hw * (B);                                                        \
        float *op = out + p * (B);                                                                 \
        POOL_PLANE(V, B);                                                                          \
    }                                                                                              \
    ATTR static void mul_##SFX(float *out, const float *x, const float *s, int64_t hw,             \
                               int64_t p) {                                                        \
        const float *xp = x + p * hw * (B), *sp = s + p * (B);                                     \
        float *op = out + p * hw * (B);                                                            \
        MUL_PLANE(V, B);                                                                           \
    }

typedef float ts_planes8f __attribute__((vector_size(32)));
typedef float ts_planes16f __attribute__((vector_size(64)));
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TS_PLANES_X86 1
DEFINE_PLANES(avx512, __attribute__((target(TS_ISA_TARGET_AVX512))), ts_planes16f, 16)
DEFINE_PLANES(avx2, __attribute__((target(TS_ISA_TARGET_AVX2))), ts_planes8f, 8)
#endif

/* any other block (or ISA): one lane at a time, the same sums in the same order */
static void pool_lanes(float *out, const float *x, int64_t hw, int blk, int64_t p) {
    for (int l = 0; l < blk; l++) {
        const float *xp = x + p * hw * blk + l;
        float *op = out + p * blk + l;
        float acc[16] = {0};
        int64_t i = 0;
        for (; i + 16 <= hw; i += 16)
            for (int j = 0; j < 16; j++) acc[j] += xp[(i + j) * blk];
        for (int j = 0; i < hw; i++, j++) acc[j] += xp[i * blk];
        for (int w = 8; w > 0; w /= 2)
            for (int j = 0; j < w; j++) acc[j] += acc[j + w];
        *op = acc[0] / (float)hw;
    }
}

static void mul_lanes(float *out, const float *x, const float *s, int64_t hw, int blk, int64_t p) {
    const float *xp = x + p * hw * blk, *sp = s + p * blk;
    float *op = out + p * hw * blk;
    for (int64_t i = 0; i < hw; i++)
        for (int l = 0; l < blk; l++) op[i * blk + l] = xp[i * blk + l] * sp[l];
}

/* which variant a block of blk lanes takes: 16 AVX-512, 8 AVX2, 0 the lane loop */
static int variant(int blk) {
#ifdef TS_PLANES_X86
    const ts_cpu_isa isa = ts_cpu_isa_get();
    if (blk == 16 && isa == TS_ISA_AVX512) return 16;
    if (blk == 8 && isa >= TS_ISA_AVX2) return 8;
#endif
    (void)blk;
    return 0;
}

void tsi_cpu_global_avg_pool_blocked(const ts_backend *be, int index, float *out, const float *x,
                                     int64_t n_cb, int64_t hw, int blk) {
    (void)be, (void)index;
    if (blk < 1 || blk > MAX_BLK) return;
    const int v = variant(blk);
    (void)v; /* the lane loop alone off x86 */
    TS_PARALLEL_FOR_IF(
        n_cb > 1 && n_cb * hw * blk >= PARALLEL_MIN_ELEMS, for (int64_t p = 0; p < n_cb; p++) {
#ifdef TS_PLANES_X86
            if (v == 16)
                pool_avx512(out, x, hw, p);
            else if (v == 8)
                pool_avx2(out, x, hw, p);
            else
#endif
                pool_lanes(out, x, hw, blk, p);
        });
}

void tsi_cpu_mul_channels_blocked(const ts_backend *be, int index, float *out, const float *x,
                                  const float *s, int64_t n_cb, int64_t hw, int blk) {
    (void)be, (void)index;
    const int v = variant(blk);
    (void)v; /* the lane loop alone off x86 */
    TS_PARALLEL_FOR_IF(
        n_cb > 1 && n_cb * hw * blk >= PARALLEL_MIN_ELEMS, for (int64_t p = 0; p < n_cb; p++) {
#ifdef TS_PLANES_X86
            if (v == 16)
                mul_avx512(out, x, s, hw, p);
            else if (v == 8)
                mul_avx2(out, x, s, hw, p);
            else
#endif
                mul_lanes(out, x, s, hw, blk, p);
        });
}
