/* kern_conv_naive.c — allocation-free convolution loops for any float dtype: the fallback when the
 * im2col or direct kernels cannot get scratch memory (slow but correct). */
#include "backend/cpu/kern_conv.h"
#include "backend/kernel_math.h"

static double load_el(ts_dtype dt, const char *p, int64_t i) {
    switch (dt) {
    case TS_F64:
        return ((const double *)p)[i];
    case TS_F16:
        return ts_f16_to_f32(((const uint16_t *)p)[i]);
    case TS_BF16:
        return ts_bf16_to_f32(((const uint16_t *)p)[i]);
    default:
        return ((const float *)p)[i];
    }
}

static void store_el(ts_dtype dt, char *p, int64_t i, double v) {
    switch (dt) {
    case TS_F64:
        ((double *)p)[i] = v;
        break;
    case TS_F16:
        ((uint16_t *)p)[i] = ts_f32_to_f16((float)v);
        break;
    case TS_BF16:
        ((uint16_t *)p)[i] = ts_f32_to_bf16((float)v);
        break;
    default:
        ((float *)p)[i] = (float)v;
        break;
    }
}

/* Calls BODY(xi, wi, yi) for every (input, weight, output) element triple that meets. */
#define FOR_EACH_TAP(g, BODY)                                                                      \
    for (int64_t n = 0; n < (g)->n; n++)                                                           \
        for (int64_t o = 0; o < (g)->o; o++)                                                       \
            for (int64_t oy = 0; oy < (g)->oh; oy++)                                               \
                for (int64_t ox = 0; ox < (g)->ow; ox++) {                                         \
                    const int64_t yi = ((n * (g)->o + o) * (g)->oh + oy) * (g)->ow + ox;           \
                    const int64_t gi = o / (g)->og;                                                \
                    for (int64_t c = 0; c < (g)->cg; c++)                                          \
                        for (int64_t i = 0; i < (g)->kh; i++) {                                    \
                            const int64_t iy = oy * (g)->sh - (g)->ph + i * (g)->dh;               \
                            if (iy < 0 || iy >= (g)->h) continue;                                  \
                            for (int64_t j = 0; j < (g)->kw; j++) {                                \
                                const int64_t ix = ox * (g)->sw - (g)->pw + j * (g)->dw;           \
                                if (ix < 0 || ix >= (g)->w) continue;                              \
                                const int64_t xi =                                                 \
                                    ((n * (g)->c + gi * (g)->cg + c) * (g)->h + iy) * (g)->w + ix; \
                                const int64_t wi =                                                 \
                                    ((o * (g)->cg + c) * (g)->kh + i) * (g)->kw + j;               \
                                BODY;                                                              \
                            }                                                                      \
                        }                                                                          \
                }

static void naive_fill0(ts_dtype dt, char *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) store_el(dt, p, i, 0.0);
}

void ts_conv_naive_forward(const ts_cgeom *g, ts_dtype dt, const char *x, const char *w,
                           const char *b, char *y) {
    for (int64_t yi = 0; yi < g->n * g->o * g->p; yi++)
        store_el(dt, y, yi, b ? load_el(dt, b, (yi / g->p) % g->o) : 0.0);
    FOR_EACH_TAP(g,
                 store_el(dt, y, yi, load_el(dt, y, yi) + load_el(dt, x, xi) * load_el(dt, w, wi)))
}

void ts_conv_naive_backward_data(const ts_cgeom *g, ts_dtype dt, const char *gy, const char *w,
                                 char *gx) {
    naive_fill0(dt, gx, g->n * g->c * g->h * g->w);
    FOR_EACH_TAP(
        g, store_el(dt, gx, xi, load_el(dt, gx, xi) + load_el(dt, gy, yi) * load_el(dt, w, wi)))
}

void ts_conv_naive_backward_weight(const ts_cgeom *g, ts_dtype dt, const char *gy, const char *x,
                                   char *gw) {
    naive_fill0(dt, gw, g->o * g->k);
    FOR_EACH_TAP(
        g, store_el(dt, gw, wi, load_el(dt, gw, wi) + load_el(dt, gy, yi) * load_el(dt, x, xi)))
}
