/* kern_conv_naive.c — allocation-free convolution loops for any float dtype, on NCHW or NHWC
 * activations (g->nhwc): the fallback when the im2col or direct kernels (or the NHWC path's
 * copies) cannot get scratch memory (slow but correct). */
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

/* Each result is one sum accumulated in double and rounded once to dt, so that a half-precision
 * fallback is as accurate as the widened kernels it replaces (rounding every partial sum to bf16
 * would put it tens of times past their bound). The loops gather: the outer ones walk the result,
 * the inner ones the taps that meet it. */

/* input row / column of output row or column o through tap k, or -1 outside the input */
static int64_t in_at(int64_t o, int64_t k, int64_t s, int64_t p, int64_t d, int64_t size) {
    const int64_t v = o * s - p + k * d;
    return v >= 0 && v < size ? v : -1;
}

/* element (n, c, y, x) of an activation of nc channels and hh x ww pixels, NCHW or NHWC */
static int64_t act_at(const ts_cgeom *g, int64_t n, int64_t c, int64_t nc, int64_t y, int64_t x,
                      int64_t hh, int64_t ww) {
    return g->nhwc ? ((n * hh + y) * ww + x) * nc + c : ((n * nc + c) * hh + y) * ww + x;
}

/* output row or column whose tap k reads input v, or -1 when none does */
static int64_t out_at(int64_t v, int64_t k, int64_t s, int64_t p, int64_t d, int64_t size) {
    const int64_t t = v + p - k * d;
    if (t < 0 || t % s) return -1;
    return t / s < size ? t / s : -1;
}

void tsi_conv_naive_forward(const ts_cgeom *g, ts_dtype dt, const char *x, const char *w,
                            const char *b, char *y) {
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t o = 0; o < g->o; o++) {
            const int64_t c0 = o / g->og * g->cg;
            for (int64_t oy = 0; oy < g->oh; oy++)
                for (int64_t ox = 0; ox < g->ow; ox++) {
                    double acc = b ? load_el(dt, b, o) : 0.0;
                    for (int64_t c = 0; c < g->cg; c++)
                        for (int64_t i = 0; i < g->kh; i++) {
                            const int64_t iy = in_at(oy, i, g->sh, g->ph, g->dh, g->h);
                            for (int64_t j = 0; iy >= 0 && j < g->kw; j++) {
                                const int64_t ix = in_at(ox, j, g->sw, g->pw, g->dw, g->w);
                                if (ix < 0) continue;
                                acc +=
                                    load_el(dt, x, act_at(g, n, c0 + c, g->c, iy, ix, g->h, g->w)) *
                                    load_el(dt, w, ((o * g->cg + c) * g->kh + i) * g->kw + j);
                            }
                        }
                    store_el(dt, y, act_at(g, n, o, g->o, oy, ox, g->oh, g->ow), acc);
                }
        }
}

void tsi_conv_naive_backward_data(const ts_cgeom *g, ts_dtype dt, const char *gy, const char *w,
                                  char *gx) {
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t ci = 0; ci < g->c; ci++) {
            const int64_t grp = ci / g->cg, c = ci % g->cg;
            for (int64_t iy = 0; iy < g->h; iy++)
                for (int64_t ix = 0; ix < g->w; ix++) {
                    double acc = 0.0;
                    for (int64_t o = grp * g->og; o < (grp + 1) * g->og; o++)
                        for (int64_t i = 0; i < g->kh; i++) {
                            const int64_t oy = out_at(iy, i, g->sh, g->ph, g->dh, g->oh);
                            for (int64_t j = 0; oy >= 0 && j < g->kw; j++) {
                                const int64_t ox = out_at(ix, j, g->sw, g->pw, g->dw, g->ow);
                                if (ox < 0) continue;
                                acc +=
                                    load_el(dt, gy, act_at(g, n, o, g->o, oy, ox, g->oh, g->ow)) *
                                    load_el(dt, w, ((o * g->cg + c) * g->kh + i) * g->kw + j);
                            }
                        }
                    store_el(dt, gx, act_at(g, n, ci, g->c, iy, ix, g->h, g->w), acc);
                }
        }
}

void tsi_conv_naive_backward_weight(const ts_cgeom *g, ts_dtype dt, const char *gy, const char *x,
                                    char *gw) {
    int64_t wi = 0;
    for (int64_t o = 0; o < g->o; o++) {
        const int64_t c0 = o / g->og * g->cg;
        for (int64_t c = 0; c < g->cg; c++)
            for (int64_t i = 0; i < g->kh; i++)
                for (int64_t j = 0; j < g->kw; j++, wi++) {
                    double acc = 0.0;
                    for (int64_t n = 0; n < g->n; n++)
                        for (int64_t oy = 0; oy < g->oh; oy++) {
                            const int64_t iy = in_at(oy, i, g->sh, g->ph, g->dh, g->h);
                            for (int64_t ox = 0; iy >= 0 && ox < g->ow; ox++) {
                                const int64_t ix = in_at(ox, j, g->sw, g->pw, g->dw, g->w);
                                if (ix < 0) continue;
                                acc +=
                                    load_el(dt, gy, act_at(g, n, o, g->o, oy, ox, g->oh, g->ow)) *
                                    load_el(dt, x, act_at(g, n, c0 + c, g->c, iy, ix, g->h, g->w));
                            }
                        }
                    store_el(dt, gw, wi, acc);
                }
    }
}
