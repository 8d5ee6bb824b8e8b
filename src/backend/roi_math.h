/* roi_math.h — torchvision's roi_align / roi_pool / nms arithmetic, defined once for the CPU and
 * CUDA kernels (host and device), for float (suffix _f) and double (_d): each step in the dtype
 * and in torchvision's order (roi_align_kernel.cpp, roi_pool_kernel.cpp, nms_kernel.cpp), so the
 * results are torchvision's bits. */
#ifndef TS_BACKEND_ROI_MATH_H
#define TS_BACKEND_ROI_MATH_H

#include <float.h>

#include "backend/kernel_math.h"

/* std::max / std::min as torchvision's C++ calls them (the first operand kept unless the second
 * compares larger / smaller: NaN handling and equal values as there) */
#define TS_ROI_MAX(a, b) ((a) < (b) ? (b) : (a))
#define TS_ROI_MIN(a, b) ((b) < (a) ? (b) : (a))

/* v truncated to an integer as C's cast does, for |v| < 2^30; larger values, infinities and NaN
 * (rois the front end refuses, which reach a kernel only inside a captured step) give -2^30 or
 * 2^30 instead of undefined behaviour: no batch, empty windows */
static inline TS_HD int64_t ts_roi_int(double v) {
    return v > -1073741824.0 && v < 1073741824.0 ? (int64_t)v : v > 0 ? 1073741824 : -1073741824;
}

/* One roi's geometry for roi_align: its start, its bins' sizes, the samples per bin side and the
 * samples' count (the divisor: at least 1). */
#define TS_ROI_ALIGN_GEOM(T, S)                                                                    \
    typedef struct ts_roi_align_geom_##S {                                                         \
        int64_t batch;                                                                             \
        T start_h, start_w, bin_h, bin_w;                                                          \
        int grid_h, grid_w;                                                                        \
        T count;                                                                                   \
    } ts_roi_align_geom_##S;                                                                       \
    static inline TS_HD ts_roi_align_geom_##S ts_roi_align_geom_make_##S(                          \
        const T *roi, T scale, bool aligned, int64_t PH, int64_t PW, int sampling_ratio) {         \
        ts_roi_align_geom_##S g;                                                                   \
        g.batch = ts_roi_int((double)roi[0]);                                                      \
        const T offset = aligned ? (T)0.5 : (T)0.0;                                                \
        g.start_w = roi[1] * scale - offset;                                                       \
        g.start_h = roi[2] * scale - offset;                                                       \
        const T end_w = roi[3] * scale - offset, end_h = roi[4] * scale - offset;                  \
        T roi_w = end_w - g.start_w, roi_h = end_h - g.start_h;                                    \
        if (!aligned) { /* force malformed rois to be 1x1 */                                       \
            roi_w = TS_ROI_MAX(roi_w, (T)1);                                                       \
            roi_h = TS_ROI_MAX(roi_h, (T)1);                                                       \
        }                                                                                          \
        g.bin_h = roi_h / (T)PH;                                                                   \
        g.bin_w = roi_w / (T)PW;                                                                   \
        g.grid_h = sampling_ratio > 0 ? sampling_ratio : (int)ts_roi_int(ceil(roi_h / (T)PH));     \
        g.grid_w = sampling_ratio > 0 ? sampling_ratio : (int)ts_roi_int(ceil(roi_w / (T)PW));     \
        const int cnt = g.grid_h * g.grid_w;                                                       \
        g.count = (T)(cnt > 1 ? cnt : 1);                                                          \
        return g;                                                                                  \
    }                                                                                              \
    /* the sample (iy, ix) of bin (ph, pw) */                                                      \
    static inline TS_HD T ts_roi_align_y_##S(const ts_roi_align_geom_##S *g, int64_t ph, int iy) { \
        return g->start_h + (T)ph * g->bin_h + (T)((float)iy + .5f) * g->bin_h / (T)g->grid_h;     \
    }                                                                                              \
    static inline TS_HD T ts_roi_align_x_##S(const ts_roi_align_geom_##S *g, int64_t pw, int ix) { \
        return g->start_w + (T)pw * g->bin_w + (T)((float)ix + .5f) * g->bin_w / (T)g->grid_w;     \
    }                                                                                              \
    /* bilinear weights and corners at (y, x) in an H x W plane; false (nothing to read or add)    \
     * outside [-1, H] x [-1, W] */                                                                \
    static inline TS_HD bool ts_roi_bilinear_##S(int64_t H, int64_t W, T y, T x, T w[4],           \
                                                 int64_t pos[4]) {                                 \
        if (!(y >= (T)-1.0 && y <= (T)H && x >= (T)-1.0 && x <= (T)W)) return false; /* NaN too */ \
        if (y <= 0) y = 0;                                                                         \
        if (x <= 0) x = 0;                                                                         \
        int64_t y_low = (int64_t)y, x_low = (int64_t)x, y_high, x_high;                            \
        if (y_low >= H - 1) {                                                                      \
            y_high = y_low = H - 1;                                                                \
            y = (T)y_low;                                                                          \
        } else {                                                                                   \
            y_high = y_low + 1;                                                                    \
        }                                                                                          \
        if (x_low >= W - 1) {                                                                      \
            x_high = x_low = W - 1;                                                                \
            x = (T)x_low;                                                                          \
        } else {                                                                                   \
            x_high = x_low + 1;                                                                    \
        }                                                                                          \
        const T ly = y - (T)y_low, lx = x - (T)x_low;                                              \
        const T hy = (T)(1. - (double)ly), hx = (T)(1. - (double)lx);                              \
        w[0] = hy * hx, w[1] = hy * lx, w[2] = ly * hx, w[3] = ly * lx;                            \
        pos[0] = y_low * W + x_low, pos[1] = y_low * W + x_high;                                   \
        pos[2] = y_high * W + x_low, pos[3] = y_high * W + x_high;                                 \
        return true;                                                                               \
    }                                                                                              \
    /* one output bin of roi_align over the plane p (H x W) */                                     \
    static inline TS_HD T ts_roi_align_bin_##S(const ts_roi_align_geom_##S *g, const T *p,         \
                                               int64_t H, int64_t W, int64_t ph, int64_t pw) {     \
        T acc = 0;                                                                                 \
        for (int iy = 0; iy < g->grid_h; iy++) {                                                   \
            const T y = ts_roi_align_y_##S(g, ph, iy);                                             \
            for (int ix = 0; ix < g->grid_w; ix++) {                                               \
                const T x = ts_roi_align_x_##S(g, pw, ix);                                         \
                T w[4];                                                                            \
                int64_t pos[4];                                                                    \
                if (!ts_roi_bilinear_##S(H, W, y, x, w, pos)) continue;                            \
                acc += w[0] * p[pos[0]] + w[1] * p[pos[1]] + w[2] * p[pos[2]] + w[3] * p[pos[3]];  \
            }                                                                                      \
        }                                                                                          \
        return acc / g->count;                                                                     \
    }

/* One roi_pool bin's window [hs, he) x [ws, we) in an H x W plane (roi_pool_kernel.cpp) */
#define TS_ROI_POOL_GEOM(T, S)                                                                     \
    typedef struct ts_roi_pool_geom_##S {                                                          \
        int64_t batch, start_h, start_w;                                                           \
        T bin_h, bin_w;                                                                            \
    } ts_roi_pool_geom_##S;                                                                        \
    static inline TS_HD ts_roi_pool_geom_##S ts_roi_pool_geom_make_##S(const T *roi, T scale,      \
                                                                       int64_t PH, int64_t PW) {   \
        ts_roi_pool_geom_##S g;                                                                    \
        g.batch = ts_roi_int((double)roi[0]);                                                      \
        g.start_w = ts_roi_int(round(roi[1] * scale));                                             \
        g.start_h = ts_roi_int(round(roi[2] * scale));                                             \
        const int64_t end_w = ts_roi_int(round(roi[3] * scale));                                   \
        const int64_t end_h = ts_roi_int(round(roi[4] * scale));                                   \
        const int64_t rw = end_w - g.start_w + 1 > 1 ? end_w - g.start_w + 1 : 1;                  \
        const int64_t rh = end_h - g.start_h + 1 > 1 ? end_h - g.start_h + 1 : 1;                  \
        g.bin_h = (T)rh / (T)PH;                                                                   \
        g.bin_w = (T)rw / (T)PW;                                                                   \
        return g;                                                                                  \
    }                                                                                              \
    static inline TS_HD int64_t ts_roi_pool_clip_##S(int64_t v, int64_t hi) {                      \
        return v < 0 ? 0 : v > hi ? hi : v;                                                        \
    }                                                                                              \
    static inline TS_HD void ts_roi_pool_window_##S(const ts_roi_pool_geom_##S *g, int64_t H,      \
                                                    int64_t W, int64_t ph, int64_t pw,             \
                                                    int64_t win[4]) {                              \
        const int64_t hs = ts_roi_int(floor((T)ph * g->bin_h));                                    \
        const int64_t ws = ts_roi_int(floor((T)pw * g->bin_w));                                    \
        const int64_t he = ts_roi_int(ceil((T)(ph + 1) * g->bin_h));                               \
        const int64_t we = ts_roi_int(ceil((T)(pw + 1) * g->bin_w));                               \
        win[0] = ts_roi_pool_clip_##S(hs + g->start_h, H);                                         \
        win[1] = ts_roi_pool_clip_##S(he + g->start_h, H);                                         \
        win[2] = ts_roi_pool_clip_##S(ws + g->start_w, W);                                         \
        win[3] = ts_roi_pool_clip_##S(we + g->start_w, W);                                         \
    }                                                                                              \
    /* the bin's max (0 when empty, NaN never taken: torchvision's > against -FLT_MAX) and where   \
     * it lies in the plane (-1 when empty) */                                                     \
    static inline TS_HD T ts_roi_pool_bin_##S(const T *p, int64_t W, const int64_t win[4],         \
                                              int64_t *arg) {                                      \
        const bool empty = win[1] <= win[0] || win[3] <= win[2];                                   \
        T m = empty ? (T)0 : (T)-FLT_MAX;                                                          \
        int64_t a = -1;                                                                            \
        for (int64_t h = win[0]; h < win[1]; h++)                                                  \
            for (int64_t w = win[2]; w < win[3]; w++)                                              \
                if (p[h * W + w] > m) m = p[h * W + w], a = h * W + w;                             \
        *arg = a;                                                                                  \
        return m;                                                                                  \
    }

/* IoU of boxes a and b (x1, y1, x2, y2) in the dtype, > thr compared in double (nms) */
#define TS_NMS_IOU(T, S)                                                                           \
    static inline TS_HD bool ts_nms_overlaps_##S(const T *a, const T *b, double thr) {             \
        const T area_a = (a[2] - a[0]) * (a[3] - a[1]);                                            \
        const T area_b = (b[2] - b[0]) * (b[3] - b[1]);                                            \
        const T xx1 = TS_ROI_MAX(a[0], b[0]), yy1 = TS_ROI_MAX(a[1], b[1]);                        \
        const T xx2 = TS_ROI_MIN(a[2], b[2]), yy2 = TS_ROI_MIN(a[3], b[3]);                        \
        const T w = TS_ROI_MAX((T)0, xx2 - xx1), h = TS_ROI_MAX((T)0, yy2 - yy1);                  \
        const T inter = w * h;                                                                     \
        const T ovr = inter / (area_a + area_b - inter);                                           \
        return (double)ovr > thr;                                                                  \
    }

TS_ROI_ALIGN_GEOM(float, f)
TS_ROI_ALIGN_GEOM(double, d)
TS_ROI_POOL_GEOM(float, f)
TS_ROI_POOL_GEOM(double, d)
TS_NMS_IOU(float, f)
TS_NMS_IOU(double, d)

#endif
