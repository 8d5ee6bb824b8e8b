/* kern_pool_geom.h — the window geometry of 2-D pooling on the CPU, shared by the NCHW plane
 * kernels (kern_pool.c) and the channels_last ones (kern_pool_nhwc.c): the same windows, divisors
 * and adaptive bounds, so both give the same values. */
#ifndef TS_KERN_POOL_GEOM_H
#define TS_KERN_POOL_GEOM_H

#include "backend/backend.h"

typedef struct pgeom {
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    ts_pool_kind kind;
    int64_t divisor; /* > 0: divisor_override */
} pgeom;

static inline pgeom pgeom_of(const ts_kview *x, const ts_kview *y, const ts_pool2d_params *p) {
    pgeom g = {.planes = x->shape[0] * x->shape[1],
               .h = x->shape[2],
               .w = x->shape[3],
               .oh = y->shape[2],
               .ow = y->shape[3],
               .kh = p->kernel[0],
               .kw = p->kernel[1],
               .sh = p->stride[0],
               .sw = p->stride[1],
               .ph = p->padding[0],
               .pw = p->padding[1],
               .dh = p->dilation[0] > 0 ? p->dilation[0] : 1,
               .dw = p->dilation[1] > 0 ? p->dilation[1] : 1,
               .kind = p->kind,
               .divisor = p->divisor};
    return g;
}

/* An average window: the clamped bounds [*y0, *y1) x [*x0, *x1) and the divisor; PyTorch counts the
 * padding that falls inside the window (but never beyond it) when count_include_pad. */
static inline void avg_window(const pgeom *g, int64_t oy, int64_t ox, int64_t *y0, int64_t *y1,
                              int64_t *x0, int64_t *x1, int64_t *div) {
    int64_t a = oy * g->sh - g->ph, b = ox * g->sw - g->pw;
    int64_t ae = a + g->kh < g->h + g->ph ? a + g->kh : g->h + g->ph;
    int64_t be = b + g->kw < g->w + g->pw ? b + g->kw : g->w + g->pw;
    const int64_t pool_size = (ae - a) * (be - b);
    if (a < 0) a = 0;
    if (b < 0) b = 0;
    if (ae > g->h) ae = g->h;
    if (be > g->w) be = g->w;
    *y0 = a, *y1 = ae, *x0 = b, *x1 = be;
    *div = g->divisor > 0 ? g->divisor : g->kind == TS_POOL_AVG ? pool_size : (ae - a) * (be - b);
}

/* Adaptive windows: [floor(i*in/out), ceil((i+1)*in/out)). */
static inline int64_t ad_start(int64_t i, int64_t in, int64_t out) { return i * in / out; }
static inline int64_t ad_end(int64_t i, int64_t in, int64_t out) {
    return ((i + 1) * in + out - 1) / out;
}

/* An average or adaptive window's bounds and divisor (either kind). */
static inline void sum_window(const pgeom *g, int64_t oy, int64_t ox, int64_t *y0, int64_t *y1,
                              int64_t *x0, int64_t *x1, int64_t *div) {
    if (g->kind != TS_POOL_ADAPTIVE_AVG) {
        avg_window(g, oy, ox, y0, y1, x0, x1, div);
        return;
    }
    *y0 = ad_start(oy, g->h, g->oh), *y1 = ad_end(oy, g->h, g->oh);
    *x0 = ad_start(ox, g->w, g->ow), *x1 = ad_end(ox, g->w, g->ow);
    *div = (*y1 - *y0) * (*x1 - *x0);
}

/* A max window's rows *y0, *y0 + dh, ... below *y1 and columns *x0, *x0 + dw, ... below *x1: the
 * dilated taps inside the input. */
static inline void max_window(const pgeom *g, int64_t oy, int64_t ox, int64_t *y0, int64_t *y1,
                              int64_t *x0, int64_t *x1) {
    int64_t a = oy * g->sh - g->ph, b = ox * g->sw - g->pw;
    const int64_t ae = a + (g->kh - 1) * g->dh + 1, be = b + (g->kw - 1) * g->dw + 1;
    *y1 = ae < g->h ? ae : g->h;
    *x1 = be < g->w ? be : g->w;
    while (a < 0) a += g->dh;
    while (b < 0) b += g->dw;
    *y0 = a, *x0 = b;
}

#endif /* TS_KERN_POOL_GEOM_H */
