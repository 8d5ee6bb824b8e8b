/* kern_pool.c — 2-D max, average and adaptive average pooling and their backward passes on the CPU,
 * one [H, W] plane per OpenMP iteration; window rules follow PyTorch's CPU kernels. Channels_last
 * views go to kern_pool_nhwc.c. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/kern_pool_geom.h"
#include "backend/kernel_math.h"
#include "backend/omp_if.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#define LOAD_F(v)   (v)
#define STORE_F(v)  (v)
#define LOAD_H(v)   ts_f16_to_f32(v)
#define STORE_H(v)  ts_f32_to_f16(v)
#define LOAD_BF(v)  ts_bf16_to_f32(v)
#define STORE_BF(v) ts_f32_to_bf16(v)
#define STORE_D(v)  (v)

/* One plane forward and backward for storage type T computed in ACC. */
#define DEFINE_POOL(S, T, ACC, LOAD, STORE)                                                        \
    static void fwd_plane_##S(const pgeom *g, const T *x, T *y, int64_t *idx) {                    \
        for (int64_t oy = 0; oy < g->oh; oy++)                                                     \
            for (int64_t ox = 0; ox < g->ow; ox++) {                                               \
                const int64_t q = oy * g->ow + ox;                                                 \
                if (g->kind == TS_POOL_MAX) {                                                      \
                    int64_t y0, y1, x0, x1;                                                        \
                    max_window(g, oy, ox, &y0, &y1, &x0, &x1);                                     \
                    int64_t best = y0 * g->w + x0;                                                 \
                    ACC m = -(ACC)INFINITY;                                                        \
                    for (int64_t iy = y0; iy < y1; iy += g->dh)                                    \
                        for (int64_t ix = x0; ix < x1; ix += g->dw) {                              \
                            const ACC v = LOAD(x[iy * g->w + ix]);                                 \
                            if (v > m || v != v) m = v, best = iy * g->w + ix;                     \
                        }                                                                          \
                    y[q] = STORE(m);                                                               \
                    if (idx) idx[q] = best;                                                        \
                    continue;                                                                      \
                }                                                                                  \
                int64_t y0, y1, x0, x1, div;                                                       \
                sum_window(g, oy, ox, &y0, &y1, &x0, &x1, &div);                                   \
                if (y0 >= y1 || x0 >= x1) {                                                        \
                    y[q] = STORE((ACC)0);                                                          \
                    continue;                                                                      \
                }                                                                                  \
                ACC s = 0;                                                                         \
                for (int64_t iy = y0; iy < y1; iy++)                                               \
                    for (int64_t ix = x0; ix < x1; ix++) s += LOAD(x[iy * g->w + ix]);             \
                y[q] = STORE(s / (ACC)div);                                                        \
            }                                                                                      \
    }                                                                                              \
    static void bwd_plane_##S(const pgeom *g, const T *gy, const int64_t *idx, T *gx) {            \
        memset(gx, 0, (size_t)(g->h * g->w) * sizeof(T));                                          \
        for (int64_t oy = 0; oy < g->oh; oy++)                                                     \
            for (int64_t ox = 0; ox < g->ow; ox++) {                                               \
                const int64_t q = oy * g->ow + ox;                                                 \
                if (g->kind == TS_POOL_MAX) {                                                      \
                    const int64_t t = idx[q];                                                      \
                    if (t >= 0 && t < g->h * g->w) gx[t] = STORE(LOAD(gx[t]) + LOAD(gy[q]));       \
                    continue;                                                                      \
                }                                                                                  \
                int64_t y0, y1, x0, x1, div;                                                       \
                sum_window(g, oy, ox, &y0, &y1, &x0, &x1, &div);                                   \
                if (y0 >= y1 || x0 >= x1) continue;                                                \
                const ACC v = LOAD(gy[q]) / (ACC)div;                                              \
                for (int64_t iy = y0; iy < y1; iy++)                                               \
                    for (int64_t ix = x0; ix < x1; ix++)                                           \
                        gx[iy * g->w + ix] = STORE(LOAD(gx[iy * g->w + ix]) + v);                  \
            }                                                                                      \
    }

DEFINE_POOL(f32, float, float, LOAD_F, STORE_F)
DEFINE_POOL(f64, double, double, LOAD_F, STORE_D)
DEFINE_POOL(f16, uint16_t, float, LOAD_H, STORE_H)
DEFINE_POOL(bf16, uint16_t, float, LOAD_BF, STORE_BF)

/* Fast path for the common max pool (no padding, no dilation, stride = kernel = 2): the generic
 * loop's result (NaN wins, ties keep the first) computed with selects instead of branches, which
 * random data would mispredict half the time. */
#define MAX2_STEP(v, off)                                                                          \
    do {                                                                                           \
        const uint32_t t = 0u - (uint32_t)(((v) > m) | ((v) != (v)));                              \
        m = sel_f32(t, (v), m);                                                                    \
        k = (int64_t)(((uint64_t)k & ~(uint64_t)(int32_t)t) |                                      \
                      ((uint64_t)(off) & (uint64_t)(int32_t)t));                                   \
    } while (0)

/* t all ones: a, else b; bitwise, because compilers turn a ternary here into a branch */
static inline float sel_f32(uint32_t t, float a, float b) {
    uint32_t ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    ua = (ua & t) | (ub & ~t);
    memcpy(&a, &ua, sizeof a);
    return a;
}

static void max2x2_plane_f32(const pgeom *g, const float *x, float *y, int64_t *idx) {
    const int64_t w = g->w, ow = g->ow;
    for (int64_t oy = 0; oy < g->oh; oy++) {
        const float *r0 = x + 2 * oy * w, *r1 = r0 + w;
        float *yr = y + oy * ow;
        if (!idx) {
            for (int64_t ox = 0; ox < ow; ox++) {
                float m = r0[2 * ox], a = r0[2 * ox + 1], b = r1[2 * ox], c = r1[2 * ox + 1];
                m = sel_f32(0u - (uint32_t)((a > m) | (a != a)), a, m);
                m = sel_f32(0u - (uint32_t)((b > m) | (b != b)), b, m);
                m = sel_f32(0u - (uint32_t)((c > m) | (c != c)), c, m);
                yr[ox] = m;
            }
            continue;
        }
        int64_t *ir = idx + oy * ow;
        const int64_t base = 2 * oy * w;
        for (int64_t ox = 0; ox < ow; ox++) {
            float m = r0[2 * ox];
            const float a = r0[2 * ox + 1], b = r1[2 * ox], c = r1[2 * ox + 1];
            int64_t k = 0;
            MAX2_STEP(a, 1);
            MAX2_STEP(b, w);
            MAX2_STEP(c, w + 1);
            yr[ox] = m;
            ir[ox] = base + 2 * ox + k;
        }
    }
}

/* Max over windows of one row (kernel height 1: max_pool1d's [N, C, 1, L] view), every window
 * inside the row, no padding, no dilation: the generic loop's result (NaN wins, ties keep the
 * first) with selects, as max2x2_plane_f32; the generic loop's branches mispredicted on random
 * data (12x PyTorch's max_pool1d time, bench/results/SURFACE.md). */
static bool is_max_row(const pgeom *g) {
    return g->kind == TS_POOL_MAX && g->kh == 1 && g->ph == 0 && g->pw == 0 && g->dw == 1 &&
           g->kw >= 1 && (g->ow - 1) * g->sw + g->kw <= g->w && (g->oh - 1) * g->sh < g->h;
}

static void max_row_plane_f32(const pgeom *g, const float *x, float *y, int64_t *idx) {
    const int64_t w = g->w, ow = g->ow, kw = g->kw, sw = g->sw;
    for (int64_t oy = 0; oy < g->oh; oy++) {
        const int64_t base = oy * g->sh * w;
        const float *r = x + base;
        float *yr = y + oy * ow;
        int64_t *ir = idx ? idx + oy * ow : NULL;
        if (!ir && kw == 2 && sw == 2) { /* the common max_pool1d(x, 2): pairs, vectorises */
            for (int64_t ox = 0; ox < ow; ox++) {
                const float m = r[2 * ox], a = r[2 * ox + 1];
                yr[ox] = sel_f32(0u - (uint32_t)((a > m) | (a != a)), a, m);
            }
            continue;
        }
        if (!ir) { /* no index to carry along */
            for (int64_t ox = 0; ox < ow; ox++) {
                const float *win = r + ox * sw;
                float m = win[0];
                for (int64_t j = 1; j < kw; j++)
                    m = sel_f32(0u - (uint32_t)((win[j] > m) | (win[j] != win[j])), win[j], m);
                yr[ox] = m;
            }
            continue;
        }
        for (int64_t ox = 0; ox < ow; ox++) {
            const float *win = r + ox * sw;
            float m = win[0];
            int64_t k = 0;
            for (int64_t j = 1; j < kw; j++) {
                const float v = win[j];
                MAX2_STEP(v, j);
            }
            yr[ox] = m;
            if (ir) ir[ox] = base + ox * sw + k;
        }
    }
}

/* The same for f16/bf16 without converting the output: a max is one of its inputs, so the
 * winner's bits are selected along with it (only the comparisons widen to f32). Through the
 * generic loop this was the largest cost of a LeNet-5 step under bf16 autocast. */
#define MAX2_STEP_HALF(hv, v, off)                                                                 \
    do {                                                                                           \
        const uint32_t t = 0u - (uint32_t)(((v) > m) | ((v) != (v)));                              \
        m = sel_f32(t, (v), m);                                                                    \
        mb = (mb & ~t) | ((hv)&t);                                                                 \
        k = (int64_t)(((uint64_t)k & ~(uint64_t)(int32_t)t) |                                      \
                      ((uint64_t)(off) & (uint64_t)(int32_t)t));                                   \
    } while (0)

/* idx NULL (no indices wanted) and not NULL are separate loops, as for f32: each vectorizes. */
#define MAX2X2_HALF_WINDOW(LOAD)                                                                   \
    const uint32_t h0 = r0[2 * ox], h1 = r0[2 * ox + 1], h2 = r1[2 * ox], h3 = r1[2 * ox + 1];     \
    float m = LOAD(h0);                                                                            \
    const float a = LOAD(h1), b = LOAD(h2), c = LOAD(h3);                                          \
    uint32_t mb = h0; /* as wide as the mask, so that the loop vectorizes */                       \
    int64_t k = 0;                                                                                 \
    MAX2_STEP_HALF(h1, a, 1);                                                                      \
    MAX2_STEP_HALF(h2, b, w);                                                                      \
    MAX2_STEP_HALF(h3, c, w + 1);                                                                  \
    yr[ox] = (uint16_t)mb

#define DEFINE_MAX2X2_HALF(S, LOAD)                                                                \
    static void max2x2_plane_##S(const pgeom *g, const uint16_t *x, uint16_t *y, int64_t *idx) {   \
        const int64_t w = g->w, ow = g->ow;                                                        \
        for (int64_t oy = 0; oy < g->oh; oy++) {                                                   \
            const uint16_t *r0 = x + 2 * oy * w, *r1 = r0 + w;                                     \
            uint16_t *yr = y + oy * ow;                                                            \
            if (!idx) {                                                                            \
                for (int64_t ox = 0; ox < ow; ox++) {                                              \
                    MAX2X2_HALF_WINDOW(LOAD);                                                      \
                    (void)k;                                                                       \
                }                                                                                  \
                continue;                                                                          \
            }                                                                                      \
            int64_t *ir = idx + oy * ow;                                                           \
            const int64_t base = 2 * oy * w;                                                       \
            for (int64_t ox = 0; ox < ow; ox++) {                                                  \
                MAX2X2_HALF_WINDOW(LOAD);                                                          \
                ir[ox] = base + 2 * ox + k;                                                        \
            }                                                                                      \
        }                                                                                          \
    }
DEFINE_MAX2X2_HALF(f16, LOAD_H)
DEFINE_MAX2X2_HALF(bf16, LOAD_BF)

static bool is_max2x2(const pgeom *g) { /* every window inside the plane (not so in ceil mode) */
    return g->kind == TS_POOL_MAX && g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 &&
           g->ph == 0 && g->pw == 0 && g->dh == 1 && g->dw == 1 && 2 * g->oh <= g->h &&
           2 * g->ow <= g->w;
}

/* Average pooling whose windows all lie inside the plane (no padding): rows of kernel width 1
 * with stride 1 (the depth pass of avg_pool3d, pool_nd.c) as whole-row additions, and 2x2 windows
 * of stride 2, both vectorisable. The sums start from 0 and add the window's elements in the
 * generic loop's order (row by row, left to right), so the results are its bits. */
static bool is_avg_full(const pgeom *g) {
    return (g->kind == TS_POOL_AVG || g->kind == TS_POOL_AVG_EXCLUDE_PAD) && g->ph == 0 &&
           g->pw == 0 && (g->oh - 1) * g->sh + g->kh <= g->h &&
           (g->ow - 1) * g->sw + g->kw <= g->w &&
           ((g->kw == 1 && g->sw == 1) || (g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2));
}

static void avg_full_plane_f32(const pgeom *g, const float *x, float *y) {
    const int64_t w = g->w, ow = g->ow;
    const float div = (float)(g->divisor > 0 ? g->divisor : g->kh * g->kw);
    for (int64_t oy = 0; oy < g->oh; oy++) {
        const float *r0 = x + oy * g->sh * w;
        float *yr = y + oy * ow;
        if (g->kw == 1) {
            for (int64_t ox = 0; ox < ow; ox++) yr[ox] = 0.0f + r0[ox];
            for (int64_t j = 1; j < g->kh; j++) {
                const float *rj = r0 + j * w;
                for (int64_t ox = 0; ox < ow; ox++) yr[ox] += rj[ox];
            }
            for (int64_t ox = 0; ox < ow; ox++) yr[ox] /= div;
            continue;
        }
        const float *r1 = r0 + w;
        for (int64_t ox = 0; ox < ow; ox++)
            yr[ox] = ((((0.0f + r0[2 * ox]) + r0[2 * ox + 1]) + r1[2 * ox]) + r1[2 * ox + 1]) / div;
    }
}

static bool pool_parallel(const pgeom *g) {
#ifdef TS_HAVE_OPENMP
    return g->planes > 1 && (double)g->planes * (double)(g->h * g->w + g->oh * g->ow) > 32768 &&
           omp_get_max_threads() > 1 && !omp_in_parallel();
#else
    (void)g;
    return false;
#endif
}

/* The mean of a whole float32 plane (global average pooling: adaptive to 1x1) in 16 partial sums
 * added in a fixed order at the end: fwd_plane's one chain of dependent additions took 5% of a
 * MobileNetV3-Small inference (its squeeze-excitation blocks). */
static float plane_mean_f32(const float *x, int64_t n) {
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) acc[j] += x[i + j];
    for (int j = 0; i < n; i++, j++) acc[j] += x[i];
    for (int w = 8; w > 0; w /= 2)
        for (int j = 0; j < w; j++) acc[j] += acc[j + w];
    return acc[0] / (float)n;
}

void tsi_cpu_pool2d(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                    const ts_kview *indices, const ts_pool2d_params *p) {
    (void)be, (void)index;
    const pgeom g = pgeom_of(x, out, p);
    if (g.planes == 0 || g.oh * g.ow == 0) return;
    if (tsi_pool_view_nhwc(x)) {
        tsi_pool2d_nhwc(out, x, indices, p);
        return;
    }
    const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow, planes = g.planes;
    const ts_dtype dt = out->dtype;
    const size_t es = dt == TS_F64 ? 8 : dt == TS_F32 ? 4 : 2;
    const bool fast = is_max2x2(&g), row = !fast && dt == TS_F32 && is_max_row(&g);
    const bool avg_full = dt == TS_F32 && is_avg_full(&g);
    int64_t *idx = indices && g.kind == TS_POOL_MAX ? (int64_t *)indices->data : NULL;
    const bool global = g.kind == TS_POOL_ADAPTIVE_AVG && g.oh == 1 && g.ow == 1 && dt == TS_F32;
    TS_PARALLEL_FOR_IF(
        pool_parallel(&g), for (int64_t i = 0; i < planes; i++) {
            const char *xp = x->data + (size_t)(i * in_plane) * es;
            char *yp = out->data + (size_t)(i * out_plane) * es;
            int64_t *ip = idx ? idx + i * out_plane : NULL;
            if (global)
                *(float *)yp = plane_mean_f32((const float *)xp, in_plane);
            else if (fast && dt == TS_F32)
                max2x2_plane_f32(&g, (const float *)xp, (float *)yp, ip);
            else if (row)
                max_row_plane_f32(&g, (const float *)xp, (float *)yp, ip);
            else if (avg_full)
                avg_full_plane_f32(&g, (const float *)xp, (float *)yp);
            else if (fast && dt == TS_F16)
                max2x2_plane_f16(&g, (const uint16_t *)xp, (uint16_t *)yp, ip);
            else if (fast && dt == TS_BF16)
                max2x2_plane_bf16(&g, (const uint16_t *)xp, (uint16_t *)yp, ip);
            else if (dt == TS_F32)
                fwd_plane_f32(&g, (const float *)xp, (float *)yp, ip);
            else if (dt == TS_F64)
                fwd_plane_f64(&g, (const double *)xp, (double *)yp, ip);
            else if (dt == TS_F16)
                fwd_plane_f16(&g, (const uint16_t *)xp, (uint16_t *)yp, ip);
            else
                fwd_plane_bf16(&g, (const uint16_t *)xp, (uint16_t *)yp, ip);
        });
}

void tsi_cpu_pool2d_backward(const ts_backend *be, int index, const ts_kview *gx,
                             const ts_kview *gout, const ts_kview *indices,
                             const ts_pool2d_params *p) {
    (void)be, (void)index;
    const pgeom g = pgeom_of(gx, gout, p);
    const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow, planes = g.planes;
    const ts_dtype dt = gx->dtype;
    const size_t es = dt == TS_F64 ? 8 : dt == TS_F32 ? 4 : 2;
    if (planes == 0 || in_plane == 0) return;
    if (tsi_pool_view_nhwc(gx)) {
        tsi_pool2d_backward_nhwc(gx, gout, indices, p);
        return;
    }
    const int64_t *idx = g.kind == TS_POOL_MAX ? (const int64_t *)indices->data : NULL;
    TS_PARALLEL_FOR_IF(
        pool_parallel(&g), for (int64_t i = 0; i < planes; i++) {
            const char *gyp = gout->data + (size_t)(i * out_plane) * es;
            char *gxp = gx->data + (size_t)(i * in_plane) * es;
            const int64_t *ip = idx ? idx + i * out_plane : NULL;
            if (dt == TS_F32)
                bwd_plane_f32(&g, (const float *)gyp, ip, (float *)gxp);
            else if (dt == TS_F64)
                bwd_plane_f64(&g, (const double *)gyp, ip, (double *)gxp);
            else if (dt == TS_F16)
                bwd_plane_f16(&g, (const uint16_t *)gyp, ip, (uint16_t *)gxp);
            else
                bwd_plane_bf16(&g, (const uint16_t *)gyp, ip, (uint16_t *)gxp);
        });
}
