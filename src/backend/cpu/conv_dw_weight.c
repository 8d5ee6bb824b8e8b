/* conv_dw_weight.c — the float32 weight gradient of depthwise convolutions (conv_dw_weight.h).
 *
 * One work item a channel. For a block of up to TAP_BLOCK taps, each image's planes of x and gy
 * are read while they are in cache, and each tap's sum over the output plane is one dot product
 * (seg_dot): segments of SEG products, each summed in 8 float lanes and a fixed tree, the segments
 * added in float64. No float sum ever holds more than 8 products a lane, so the float32 error does
 * not grow with the batch or the image; float64 takes the long part of the reduction.
 *
 * The dot's operands: with unit strides, x copied into a zero-padded plane of row stride
 * ws = W + 2 PW and gy into rows of the same stride (zeros past OW), so that tap (i, j) is one
 * contiguous dot over OH x ws from offset i DH ws + j DW (the products past OW are exact zeros).
 * That pairs zeros of gy with inputs the tap never meets, so a plane of x holding an infinity or
 * a NaN (and any strided convolution) takes the other form: per tap, the inputs the tap meets
 * gathered into an OH x OW plane (zeros where it meets padding) and dotted with gy as it lies. */
/* multiply-adds fused where the ISA has FMA: one rounding in place of two, within the bound */
#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

#include "backend/cpu/conv_dw_weight.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/conv_select.h"
#include "backend/cpu/cpu_isa.h"

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TS_DWW_X86 1
#endif

typedef float dw_v8f __attribute__((vector_size(32)));

enum { LANES = 8, SEG = 64, TAP_BLOCK = 32 };

bool tsi_conv_dw_weight_takes(const ts_cgeom *g) {
    return g->cg == 1 && g->og == 1 && !g->nhwc && g->c == g->g && g->o == g->g;
}

/* vectors only in locals: passing 32-byte vectors by value changes the ABI without AVX */
#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v))

static inline __attribute__((always_inline)) float hsum8(const dw_v8f *a) {
    float l[LANES];
    memcpy(l, a, sizeof l);
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/* sum over k < n of a[k] * b[k]: segments of SEG products in 8 lanes (8 products a lane) and a
 * fixed tree, the last segment's tail (< 8 products) summed apart and added to its tree's sum,
 * the segments' sums added in float64 */
static inline __attribute__((always_inline)) double seg_dot(const float *a, const float *b,
                                                            int64_t n) {
    double s = 0.0;
    int64_t k = 0;
    dw_v8f va, vb, acc;
    for (; k + SEG <= n; k += SEG) {
        acc = (dw_v8f){0};
        for (int q = 0; q < SEG; q += LANES) {
            LOAD8(va, a + k + q);
            LOAD8(vb, b + k + q);
            acc += va * vb;
        }
        s += (double)hsum8(&acc);
    }
    if (k < n) {
        acc = (dw_v8f){0};
        for (; k + LANES <= n; k += LANES) {
            LOAD8(va, a + k);
            LOAD8(vb, b + k);
            acc += va * vb;
        }
        float t = 0.0f;
        for (; k < n; k++) t += a[k] * b[k];
        s += (double)(hsum8(&acc) + t);
    }
    return s;
}

/* the outputs k in [*lo, *hi) of out whose input k * s - a lies in [0, len) */
static void valid_range(int64_t s, int64_t a, int64_t len, int64_t out, int64_t *lo, int64_t *hi) {
    const int64_t last = len - 1 + a;
    int64_t l = a <= 0 ? 0 : (a + s - 1) / s, h = last < 0 ? 0 : last / s + 1;
    if (h > out) h = out;
    if (l > h) l = h;
    *lo = l, *hi = h;
}

/* whether every value of p[0..n) is finite (x * 0 is 0 exactly for those, NaN otherwise) */
static inline __attribute__((always_inline)) bool all_finite(const float *p, int64_t n) {
    dw_v8f z = {0}, v;
    int64_t k = 0;
    for (; k + LANES <= n; k += LANES) {
        LOAD8(v, p + k);
        z += v * 0.0f;
    }
    float t = hsum8(&z);
    for (; k < n; k++) t += p[k] * 0.0f;
    return t == 0.0f;
}

typedef struct dw_plan {
    int64_t hp, ws, xpad_len, ypad_len, gather_len;
} dw_plan;

static dw_plan plan_of(const ts_cgeom *g) {
    dw_plan p = {.hp = g->h + 2 * g->ph, .ws = g->w + 2 * g->pw};
    /* the last row's dot reads (KW - 1) DW past the padded plane */
    p.xpad_len = p.hp * p.ws + (g->kw - 1) * g->dw;
    p.ypad_len = g->oh * p.ws;
    p.gather_len = g->oh * g->ow;
    return p;
}

/* x's plane into xpad (zero padding), gy's into rows of stride ws (zeros past OW) */
static void pad_planes(const ts_cgeom *g, const dw_plan *p, const float *xp, const float *yp,
                       float *xpad, float *ypad) {
    memset(xpad, 0, sizeof(float) * (size_t)p->xpad_len);
    for (int64_t r = 0; r < g->h; r++)
        memcpy(xpad + (r + g->ph) * p->ws + g->pw, xp + r * g->w, sizeof(float) * (size_t)g->w);
    for (int64_t r = 0; r < g->oh; r++) {
        memcpy(ypad + r * p->ws, yp + r * g->ow, sizeof(float) * (size_t)g->ow);
        memset(ypad + r * p->ws + g->ow, 0, sizeof(float) * (size_t)(p->ws - g->ow));
    }
}

/* tap (i, j)'s sum over one image by gathering the inputs it meets */
static inline __attribute__((always_inline)) double gathered_tap(const ts_cgeom *g, const float *xp,
                                                                 const float *yp, float *buf,
                                                                 int64_t i, int64_t j) {
    int64_t c0, c1, r0, r1;
    valid_range(g->sw, g->pw - j * g->dw, g->w, g->ow, &c0, &c1);
    valid_range(g->sh, g->ph - i * g->dh, g->h, g->oh, &r0, &r1);
    if (c0 >= c1 || r0 >= r1) return 0.0;
    const int64_t xoff = c0 * g->sw - g->pw + j * g->dw;
    for (int64_t oy = r0; oy < r1; oy++) {
        float *d = buf + oy * g->ow;
        const float *xr = xp + (oy * g->sh - g->ph + i * g->dh) * g->w + xoff;
        for (int64_t ox = 0; ox < c0; ox++) d[ox] = 0.0f;
        for (int64_t ox = c0; ox < c1; ox++) d[ox] = xr[(ox - c0) * g->sw];
        for (int64_t ox = c1; ox < g->ow; ox++) d[ox] = 0.0f;
    }
    return seg_dot(yp + r0 * g->ow, buf + r0 * g->ow, (r1 - r0) * g->ow);
}

static inline __attribute__((always_inline)) bool channel(const ts_cgeom *g, const dw_plan *p,
                                                          const float *gy, const float *x,
                                                          float *gw, int64_t c) {
    const bool unit = g->sh == 1 && g->sw == 1;
    float *xpad =
        malloc(sizeof(float) * (size_t)((unit ? p->xpad_len + p->ypad_len : 0) + p->gather_len));
    if (!xpad) return false;
    float *ypad = xpad + (unit ? p->xpad_len : 0), *buf = ypad + (unit ? p->ypad_len : 0);
    const int64_t taps = g->kh * g->kw, xplane = g->h * g->w, yplane = g->oh * g->ow;
    for (int64_t t0 = 0; t0 < taps; t0 += TAP_BLOCK) {
        const int64_t nt = taps - t0 < TAP_BLOCK ? taps - t0 : TAP_BLOCK;
        double acc[TAP_BLOCK] = {0};
        for (int64_t n = 0; n < g->n; n++) {
            const float *xp = x + (n * g->c + c) * xplane, *yp = gy + (n * g->o + c) * yplane;
            const bool flat = unit && all_finite(xp, xplane);
            if (flat) pad_planes(g, p, xp, yp, xpad, ypad);
            for (int64_t t = 0; t < nt; t++) {
                const int64_t i = (t0 + t) / g->kw, j = (t0 + t) % g->kw;
                acc[t] += flat ? seg_dot(ypad, xpad + i * g->dh * p->ws + j * g->dw, p->ypad_len)
                               : gathered_tap(g, xp, yp, buf, i, j);
            }
        }
        for (int64_t t = 0; t < nt; t++) gw[c * taps + t0 + t] = (float)acc[t];
    }
    free(xpad);
    return true;
}

/* the ISA variants: the same code, compiled for AVX2 + FMA where the CPU has it */
static bool channel_generic(const ts_cgeom *g, const dw_plan *p, const float *gy, const float *x,
                            float *gw, int64_t c) {
    return channel(g, p, gy, x, gw, c);
}
#ifdef TS_DWW_X86
__attribute__((target(TS_ISA_TARGET_AVX2))) static bool
channel_avx2(const ts_cgeom *g, const dw_plan *p, const float *gy, const float *x, float *gw,
             int64_t c) {
    return channel(g, p, gy, x, gw, c);
}
#endif

bool tsi_conv_dw_weight(const ts_cgeom *g, const float *gy, const float *x, float *gw) {
    if (!tsi_conv_dw_weight_takes(g)) return false;
    const dw_plan p = plan_of(g);
    int nt = 1;
#ifdef TS_HAVE_OPENMP
    /* conv_select.c's cut-off for one thread, shared with conv_dw_blocked.c */
    const double macs = (double)g->n * (double)g->c * (double)(g->oh * g->ow * g->kh * g->kw);
    if (macs >= tsi_conv_limits_get()->dw_blocked_parallel_min_macs && !omp_in_parallel())
        nt = omp_get_max_threads();
#endif
    bool (*run)(const ts_cgeom *, const dw_plan *, const float *, const float *, float *, int64_t) =
        channel_generic;
#ifdef TS_DWW_X86
    if (ts_cpu_isa_get() >= TS_ISA_AVX2) run = channel_avx2;
#endif
    int failed = 0;
#ifdef TS_HAVE_OPENMP
    if (nt > 1 && g->c > 1) {
#pragma omp parallel for schedule(static) reduction(| : failed)
        for (int64_t c = 0; c < g->c; c++) failed |= !run(g, &p, gy, x, gw, c);
        return !failed;
    }
#endif
    (void)nt;
    for (int64_t c = 0; c < g->c; c++) failed |= !run(g, &p, gy, x, gw, c);
    return !failed;
}
