/* kern_roi.c — CPU roi_align and roi_pool (torchvision.ops, issue 75): roi_math.h's arithmetic in
 * torchvision's order. Forward: rois in parallel (each writes its own output rows). Backward:
 * channels in parallel, each walking every roi, bin and sample in torchvision's serial order, so
 * each plane of the input's gradient receives the same additions in the same order as there (no
 * atomics, the same bits whatever the threads). */
#include <stdint.h>

#ifdef TS_HAVE_OPENMP
#include <omp.h>
#endif

#include "backend/cpu/cpu_kernels.h"
#include "backend/omp_if.h"
#include "backend/roi_math.h"

/* output elements (or gradient elements) below which the loops run on one thread */
#define ROI_PAR_MIN (1 << 14)

static bool roi_par(int64_t work, int64_t items) {
    return work >= ROI_PAR_MIN && items > 1
#ifdef TS_HAVE_OPENMP
           && !omp_in_parallel()
#endif
        ;
}

#define ROI_ALIGN_KERNELS(T, S)                                                                    \
    static void align_fwd_##S(const ts_roi_args *a) {                                              \
        const int64_t N = a->input.shape[0], C = a->input.shape[1], H = a->input.shape[2],         \
                      W = a->input.shape[3];                                                       \
        const int64_t K = a->output.shape[0], PH = a->output.shape[2], PW = a->output.shape[3];    \
        const T *in = (const T *)a->input.data, *rois = (const T *)a->rois.data;                   \
        T *out = (T *)a->output.data;                                                              \
        const T scale = (T)a->spatial_scale;                                                       \
        TS_PARALLEL_FOR_IF(                                                                        \
            roi_par(K *C *PH *PW, K), for (int64_t k = 0; k < K; k++) {                            \
                const ts_roi_align_geom_##S g = ts_roi_align_geom_make_##S(                        \
                    rois + k * 5, scale, a->aligned, PH, PW, a->sampling_ratio);                   \
                T *o = out + k * C * PH * PW;                                                      \
                for (int64_t c = 0; c < C; c++) {                                                  \
                    const T *p = in + (g.batch * C + c) * H * W;                                   \
                    for (int64_t ph = 0; ph < PH; ph++)                                            \
                        for (int64_t pw = 0; pw < PW; pw++)                                        \
                            o[(c * PH + ph) * PW + pw] =                                           \
                                g.batch >= 0 && g.batch < N                                        \
                                    ? ts_roi_align_bin_##S(&g, p, H, W, ph, pw)                    \
                                    : (T)0;                                                        \
                }                                                                                  \
            });                                                                                    \
    }                                                                                              \
    static void align_bwd_##S(const ts_roi_args *a) {                                              \
        const int64_t N = a->input.shape[0], C = a->input.shape[1], H = a->input.shape[2],         \
                      W = a->input.shape[3];                                                       \
        const int64_t K = a->output.shape[0], PH = a->output.shape[2], PW = a->output.shape[3];    \
        const T *go = (const T *)a->output.data, *rois = (const T *)a->rois.data;                  \
        T *gi = (T *)a->input.data;                                                                \
        const T scale = (T)a->spatial_scale;                                                       \
        TS_PARALLEL_FOR_IF(                                                                        \
            roi_par(K *C *PH *PW, C), for (int64_t c = 0; c < C; c++) {                            \
                for (int64_t k = 0; k < K; k++) {                                                  \
                    const ts_roi_align_geom_##S g = ts_roi_align_geom_make_##S(                    \
                        rois + k * 5, scale, a->aligned, PH, PW, a->sampling_ratio);               \
                    if (g.batch < 0 || g.batch >= N) continue;                                     \
                    T *p = gi + (g.batch * C + c) * H * W;                                         \
                    const T cnt = (T)(g.grid_h * g.grid_w);                                        \
                    for (int64_t ph = 0; ph < PH; ph++)                                            \
                        for (int64_t pw = 0; pw < PW; pw++) {                                      \
                            const T gb = go[((k * C + c) * PH + ph) * PW + pw];                    \
                            for (int iy = 0; iy < g.grid_h; iy++) {                                \
                                const T y = ts_roi_align_y_##S(&g, ph, iy);                        \
                                for (int ix = 0; ix < g.grid_w; ix++) {                            \
                                    const T x = ts_roi_align_x_##S(&g, pw, ix);                    \
                                    T w[4];                                                        \
                                    int64_t pos[4];                                                \
                                    if (!ts_roi_bilinear_##S(H, W, y, x, w, pos)) continue;        \
                                    for (int q = 0; q < 4; q++) p[pos[q]] += gb * w[q] / cnt;      \
                                }                                                                  \
                            }                                                                      \
                        }                                                                          \
                }                                                                                  \
            });                                                                                    \
    }

ROI_ALIGN_KERNELS(float, f)
ROI_ALIGN_KERNELS(double, d)

#define ROI_POOL_KERNELS(T, S)                                                                     \
    static void pool_fwd_##S(const ts_roi_args *a) {                                               \
        const int64_t N = a->input.shape[0], C = a->input.shape[1], H = a->input.shape[2],         \
                      W = a->input.shape[3];                                                       \
        const int64_t K = a->output.shape[0], PH = a->output.shape[2], PW = a->output.shape[3];    \
        const T *in = (const T *)a->input.data, *rois = (const T *)a->rois.data;                   \
        T *out = (T *)a->output.data;                                                              \
        int64_t *am = (int64_t *)a->argmax.data;                                                   \
        const T scale = (T)a->spatial_scale;                                                       \
        TS_PARALLEL_FOR_IF(                                                                        \
            roi_par(K *C *PH *PW, K), for (int64_t k = 0; k < K; k++) {                            \
                const ts_roi_pool_geom_##S g =                                                     \
                    ts_roi_pool_geom_make_##S(rois + k * 5, scale, PH, PW);                        \
                const bool ok = g.batch >= 0 && g.batch < N;                                       \
                for (int64_t ph = 0; ph < PH; ph++)                                                \
                    for (int64_t pw = 0; pw < PW; pw++) {                                          \
                        int64_t win[4];                                                            \
                        ts_roi_pool_window_##S(&g, H, W, ph, pw, win);                             \
                        if (!ok) win[1] = win[0];                                                  \
                        for (int64_t c = 0; c < C; c++) {                                          \
                            const int64_t o = ((k * C + c) * PH + ph) * PW + pw;                   \
                            const T *p = in + ((ok ? g.batch : 0) * C + c) * H * W;                \
                            out[o] = ts_roi_pool_bin_##S(p, W, win, &am[o]);                       \
                        }                                                                          \
                    }                                                                              \
            });                                                                                    \
    }                                                                                              \
    static void pool_bwd_##S(const ts_roi_args *a) {                                               \
        const int64_t N = a->input.shape[0], C = a->input.shape[1], H = a->input.shape[2],         \
                      W = a->input.shape[3];                                                       \
        const int64_t K = a->output.shape[0], PH = a->output.shape[2], PW = a->output.shape[3];    \
        const T *go = (const T *)a->output.data, *rois = (const T *)a->rois.data;                  \
        const int64_t *am = (const int64_t *)a->argmax.data;                                       \
        T *gi = (T *)a->input.data;                                                                \
        TS_PARALLEL_FOR_IF(                                                                        \
            roi_par(K *C *PH *PW, C), for (int64_t c = 0; c < C; c++) {                            \
                for (int64_t k = 0; k < K; k++) {                                                  \
                    const int64_t b = ts_roi_int((double)rois[k * 5]);                             \
                    if (b < 0 || b >= N) continue;                                                 \
                    T *p = gi + (b * C + c) * H * W;                                               \
                    for (int64_t e = 0; e < PH * PW; e++) {                                        \
                        const int64_t o = (k * C + c) * PH * PW + e;                               \
                        if (am[o] >= 0) p[am[o]] += go[o];                                         \
                    }                                                                              \
                }                                                                                  \
            });                                                                                    \
    }

ROI_POOL_KERNELS(float, f)
ROI_POOL_KERNELS(double, d)

void tsi_cpu_roi_align(const ts_backend *be, int index, const ts_roi_args *a, bool backward) {
    (void)be, (void)index;
    const bool f = a->input.dtype == TS_F32;
    if (backward)
        f ? align_bwd_f(a) : align_bwd_d(a);
    else
        f ? align_fwd_f(a) : align_fwd_d(a);
}

void tsi_cpu_roi_pool(const ts_backend *be, int index, const ts_roi_args *a, bool backward) {
    (void)be, (void)index;
    const bool f = a->input.dtype == TS_F32;
    if (backward)
        f ? pool_bwd_f(a) : pool_bwd_d(a);
    else
        f ? pool_fwd_f(a) : pool_fwd_d(a);
}
