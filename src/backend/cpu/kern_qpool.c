/* kern_qpool.c — max, average and adaptive average pooling of quantized integers (backend.h's
 * qpool, quant_args.h's ts_qpool_args), on the integers themselves: the parameters pass through.
 * NCHW planes, or channels_last images (a->nhwc: [H][W][C] in, [OH][OW][C] out, the same windows,
 * each output pixel's C channels a contiguous row). */
#include <math.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/omp_if.h"

static inline int64_t load(const ts_qpool_args *a, int64_t i) {
    switch (a->qdtype) {
    case TS_QINT8:
        return ((const int8_t *)a->x)[i];
    case TS_QUINT8:
        return ((const uint8_t *)a->x)[i];
    default: /* TS_QINT32 */
        return ((const int32_t *)a->x)[i];
    }
}

static inline void put(const ts_qpool_args *a, int64_t i, int64_t v) {
    switch (a->qdtype) {
    case TS_QINT8:
        ((int8_t *)a->out)[i] = (int8_t)v;
        return;
    case TS_QUINT8:
        ((uint8_t *)a->out)[i] = (uint8_t)v;
        return;
    default:
        ((int32_t *)a->out)[i] = (int32_t)v;
        return;
    }
}

static void max_plane(const ts_qpool_args *a, int64_t p) {
    const int64_t H = a->h, W = a->w;
    for (int64_t oy = 0; oy < a->oh; oy++)
        for (int64_t ox = 0; ox < a->ow; ox++) {
            int64_t best = INT64_MIN;
            for (int64_t i = 0; i < a->kernel[0]; i++) {
                const int64_t y = oy * a->stride[0] - a->pad[0] + i * a->dil[0];
                if (y < 0 || y >= H) continue;
                for (int64_t j = 0; j < a->kernel[1]; j++) {
                    const int64_t x = ox * a->stride[1] - a->pad[1] + j * a->dil[1];
                    if (x < 0 || x >= W) continue;
                    const int64_t v = load(a, (p * H + y) * W + x);
                    best = v > best ? v : best;
                }
            }
            put(a, (p * a->oh + oy) * a->ow + ox, best);
        }
}

/* the same for bytes without dilation (every window then holds an in-bounds tap): each output
 * row the running maximum of whole row segments, one per tap, over the columns where that tap is
 * in bounds (a loop the compiler vectorizes); int8 compared as uint8 with the top bit flipped */
static void max_plane_bytes(const ts_qpool_args *a, int64_t p, uint8_t flip) {
    const int64_t H = a->h, W = a->w, OW = a->ow, sx = a->stride[1];
    const uint8_t *x = (const uint8_t *)a->x + p * H * W;
    for (int64_t oy = 0; oy < a->oh; oy++) {
        uint8_t *o = (uint8_t *)a->out + (p * a->oh + oy) * OW;
        memset(o, 0, (size_t)OW);
        for (int64_t i = 0; i < a->kernel[0]; i++) {
            const int64_t y = oy * a->stride[0] - a->pad[0] + i;
            if (y < 0 || y >= H) continue;
            const uint8_t *row = x + y * W;
            for (int64_t j = 0; j < a->kernel[1]; j++) {
                const int64_t off = j - a->pad[1]; /* column ox * sx + off */
                const int64_t lo = off < 0 ? (-off + sx - 1) / sx : 0;
                int64_t hi = W - 1 - off < 0 ? -1 : (W - 1 - off) / sx;
                hi = hi < OW - 1 ? hi : OW - 1;
                for (int64_t ox = lo; ox <= hi; ox++) {
                    const uint8_t v = (uint8_t)(row[ox * sx + off] ^ flip);
                    o[ox] = v > o[ox] ? v : o[ox];
                }
            }
        }
        if (flip)
            for (int64_t ox = 0; ox < OW; ox++) o[ox] ^= flip;
    }
}

static void avg_plane(const ts_qpool_args *a, int64_t p) {
    const int64_t H = a->h, W = a->w;
    for (int64_t oy = 0; oy < a->oh; oy++) {
        const int64_t y0 = oy * H / a->oh, y1 = ((oy + 1) * H + a->oh - 1) / a->oh;
        for (int64_t ox = 0; ox < a->ow; ox++) {
            const int64_t x0 = ox * W / a->ow, x1 = ((ox + 1) * W + a->ow - 1) / a->ow;
            int64_t sum = 0;
            for (int64_t y = y0; y < y1; y++)
                for (int64_t x = x0; x < x1; x++) sum += load(a, (p * H + y) * W + x);
            const float r = (float)(1.0 / (double)((y1 - y0) * (x1 - x0)));
            put(a, (p * a->oh + oy) * a->ow + ox, (int64_t)nearbyintf((float)sum * r));
        }
    }
}

/* the avg window of output (oy, ox): rows [*y0, *y1), columns [*x0, *x1) inside the input, and
 * the float32 multiplier 1 / divisor (quant_args.h) */
static float avg_window(const ts_qpool_args *a, int64_t oy, int64_t ox, int64_t *y0, int64_t *y1,
                        int64_t *x0, int64_t *x1) {
    const int64_t ys = oy * a->stride[0] - a->pad[0], xs = ox * a->stride[1] - a->pad[1];
    const int64_t ye = ys + a->kernel[0] < a->h + a->pad[0] ? ys + a->kernel[0] : a->h + a->pad[0];
    const int64_t xe = xs + a->kernel[1] < a->w + a->pad[1] ? xs + a->kernel[1] : a->w + a->pad[1];
    const int64_t pool_size = (ye - ys) * (xe - xs);
    *y0 = ys > 0 ? ys : 0, *x0 = xs > 0 ? xs : 0;
    *y1 = ye < a->h ? ye : a->h, *x1 = xe < a->w ? xe : a->w;
    const int64_t size = (*y1 - *y0) * (*x1 - *x0);
    const int64_t d = a->divisor > 0 ? a->divisor : a->count_include_pad ? pool_size : size;
    return 1.0f / (float)d;
}

/* zp + nearbyint(acc * m) within the dtype's range */
static int64_t avg_out(const ts_qpool_args *a, int64_t acc, float m) {
    const int64_t lo = a->qdtype == TS_QINT8 ? -128 : a->qdtype == TS_QUINT8 ? 0 : INT32_MIN;
    const int64_t hi = a->qdtype == TS_QINT8 ? 127 : a->qdtype == TS_QUINT8 ? 255 : INT32_MAX;
    const int64_t v = a->zp + (int64_t)nearbyintf((float)acc * m);
    return v < lo ? lo : v > hi ? hi : v;
}

/* avg pooling of plane p (NCHW) or of image p's C channels (channels_last: in [H][W][C]) */
static void avg_pool_part(const ts_qpool_args *a, int64_t p) {
    const int64_t C = a->nhwc ? a->c : 1, H = a->h, W = a->w;
    for (int64_t oy = 0; oy < a->oh; oy++)
        for (int64_t ox = 0; ox < a->ow; ox++) {
            int64_t y0, y1, x0, x1;
            const float m = avg_window(a, oy, ox, &y0, &y1, &x0, &x1);
            const int64_t size = (y1 - y0) * (x1 - x0);
            for (int64_t c = 0; c < C; c++) {
                int64_t acc = -a->zp * (size > 0 ? size : 0);
                for (int64_t y = y0; y < y1; y++)
                    for (int64_t x = x0; x < x1; x++) acc += load(a, ((p * H + y) * W + x) * C + c);
                put(a, ((p * a->oh + oy) * a->ow + ox) * C + c, avg_out(a, acc, m));
            }
        }
}

/* image i of a channels_last input: every output pixel's row of C channels the maximum of its
 * taps' rows (bytes: as uint8 with int8's top bit flipped, a loop the compiler vectorizes) */
static void max_image_nhwc(const ts_qpool_args *a, int64_t img) {
    const int64_t H = a->h, W = a->w, C = a->c;
    const bool bytes = a->qdtype != TS_QINT32;
    const uint8_t flip = a->qdtype == TS_QINT8 ? 0x80 : 0;
    for (int64_t oy = 0; oy < a->oh; oy++)
        for (int64_t ox = 0; ox < a->ow; ox++) {
            const int64_t o = ((img * a->oh + oy) * a->ow + ox) * C;
            uint8_t *ob = (uint8_t *)a->out + o;
            int32_t *oi = (int32_t *)a->out + o;
            if (bytes)
                memset(ob, 0, (size_t)C);
            else
                for (int64_t c = 0; c < C; c++) oi[c] = INT32_MIN;
            for (int64_t i = 0; i < a->kernel[0]; i++) {
                const int64_t y = oy * a->stride[0] - a->pad[0] + i * a->dil[0];
                if (y < 0 || y >= H) continue;
                for (int64_t j = 0; j < a->kernel[1]; j++) {
                    const int64_t x = ox * a->stride[1] - a->pad[1] + j * a->dil[1];
                    if (x < 0 || x >= W) continue;
                    const int64_t t = ((img * H + y) * W + x) * C;
                    if (bytes) {
                        const uint8_t *r = (const uint8_t *)a->x + t;
                        for (int64_t c = 0; c < C; c++) {
                            const uint8_t v = (uint8_t)(r[c] ^ flip);
                            ob[c] = v > ob[c] ? v : ob[c];
                        }
                    } else {
                        const int32_t *r = (const int32_t *)a->x + t;
                        for (int64_t c = 0; c < C; c++) oi[c] = r[c] > oi[c] ? r[c] : oi[c];
                    }
                }
            }
            if (bytes && flip)
                for (int64_t c = 0; c < C; c++) ob[c] ^= flip;
        }
}

/* avg_plane's windows and arithmetic on image img of a channels_last input */
static void avg_image_nhwc(const ts_qpool_args *a, int64_t img) {
    const int64_t H = a->h, W = a->w, C = a->c;
    for (int64_t oy = 0; oy < a->oh; oy++) {
        const int64_t y0 = oy * H / a->oh, y1 = ((oy + 1) * H + a->oh - 1) / a->oh;
        for (int64_t ox = 0; ox < a->ow; ox++) {
            const int64_t x0 = ox * W / a->ow, x1 = ((ox + 1) * W + a->ow - 1) / a->ow;
            const float r = (float)(1.0 / (double)((y1 - y0) * (x1 - x0)));
            for (int64_t c = 0; c < C; c++) {
                int64_t sum = 0;
                for (int64_t y = y0; y < y1; y++)
                    for (int64_t x = x0; x < x1; x++)
                        sum += load(a, ((img * H + y) * W + x) * C + c);
                put(a, ((img * a->oh + oy) * a->ow + ox) * C + c,
                    (int64_t)nearbyintf((float)sum * r));
            }
        }
    }
}

void tsi_cpu_qpool(const ts_backend *be, int index, const ts_qpool_args *a) {
    (void)be, (void)index;
    if (a->nhwc) {
        const int64_t images = a->c > 0 ? a->planes / a->c : 0;
        TS_PARALLEL_FOR_IF(
            images > 1 && a->planes * a->h * a->w >= ((int64_t)1 << 16),
            for (int64_t i = 0; i < images; i++) {
                if (a->avg)
                    avg_pool_part(a, i);
                else if (a->adaptive_avg)
                    avg_image_nhwc(a, i);
                else
                    max_image_nhwc(a, i);
            });
        return;
    }
    TS_PARALLEL_FOR_IF(
        a->planes > 1 && a->planes * a->h * a->w >= ((int64_t)1 << 16),
        for (int64_t p = 0; p < a->planes; p++) {
            if (a->avg)
                avg_pool_part(a, p);
            else if (a->adaptive_avg)
                avg_plane(a, p);
            else if (a->qdtype != TS_QINT32 && a->dil[0] == 1 && a->dil[1] == 1)
                max_plane_bytes(a, p, a->qdtype == TS_QINT8 ? 0x80 : 0);
            else
                max_plane(a, p);
        });
}
