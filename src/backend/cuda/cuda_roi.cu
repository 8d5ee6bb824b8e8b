/* cuda_roi.cu — roi_align and roi_pool on CUDA (torchvision.ops, issue 75): roi_math.h's
 * arithmetic, shared with the cpu. Forward: one thread per output element. Backward: one thread
 * per output element adding its share into the input's gradient with atomicAdd (torchvision's
 * kernels; the order of the additions, and so the last bits, may vary from run to run). */
#include "backend/cuda/cuda_compute.h"
#include "backend/roi_math.h"

namespace {

struct RoiPlan {
    const char *rois;
    char *in, *out;
    int64_t *argmax;
    int64_t N, C, H, W, K, PH, PW;
    double scale;
    int sampling_ratio;
    bool aligned;
};

RoiPlan roi_plan(const ts_roi_args *a) {
    RoiPlan p;
    p.rois = a->rois.data, p.in = a->input.data, p.out = a->output.data;
    p.argmax = (int64_t *)a->argmax.data;
    p.N = a->input.shape[0], p.C = a->input.shape[1], p.H = a->input.shape[2];
    p.W = a->input.shape[3], p.K = a->output.shape[0], p.PH = a->output.shape[2];
    p.PW = a->output.shape[3], p.scale = a->spatial_scale;
    p.sampling_ratio = a->sampling_ratio, p.aligned = a->aligned;
    return p;
}

/* the output element e's roi, channel and bin */
__device__ void roi_split(const RoiPlan &p, int64_t e, int64_t *k, int64_t *c, int64_t *ph,
                          int64_t *pw) {
    *pw = e % p.PW;
    *ph = (e / p.PW) % p.PH;
    *c = (e / (p.PW * p.PH)) % p.C;
    *k = e / (p.PW * p.PH * p.C);
}

#define ROI_CUDA_KERNELS(T, S)                                                                     \
    __global__ void align_fwd_##S(RoiPlan p) {                                                     \
        const int64_t n = p.K * p.C * p.PH * p.PW;                                                 \
        for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;                    \
             e += (int64_t)gridDim.x * blockDim.x) {                                               \
            int64_t k, c, ph, pw;                                                                  \
            roi_split(p, e, &k, &c, &ph, &pw);                                                     \
            const ts_roi_align_geom_##S g = ts_roi_align_geom_make_##S(                            \
                (const T *)p.rois + k * 5, (T)p.scale, p.aligned, p.PH, p.PW, p.sampling_ratio);   \
            const T *plane = (const T *)p.in + (g.batch * p.C + c) * p.H * p.W;                    \
            ((T *)p.out)[e] = g.batch >= 0 && g.batch < p.N                                        \
                                  ? ts_roi_align_bin_##S(&g, plane, p.H, p.W, ph, pw)              \
                                  : (T)0;                                                          \
        }                                                                                          \
    }                                                                                              \
    __global__ void align_bwd_##S(RoiPlan p) {                                                     \
        const int64_t n = p.K * p.C * p.PH * p.PW;                                                 \
        for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;                    \
             e += (int64_t)gridDim.x * blockDim.x) {                                               \
            int64_t k, c, ph, pw;                                                                  \
            roi_split(p, e, &k, &c, &ph, &pw);                                                     \
            const ts_roi_align_geom_##S g = ts_roi_align_geom_make_##S(                            \
                (const T *)p.rois + k * 5, (T)p.scale, p.aligned, p.PH, p.PW, p.sampling_ratio);   \
            if (g.batch < 0 || g.batch >= p.N) continue;                                           \
            T *plane = (T *)p.in + (g.batch * p.C + c) * p.H * p.W;                                \
            const T gb = ((const T *)p.out)[e];                                                    \
            const T cnt = (T)(g.grid_h * g.grid_w);                                                \
            for (int iy = 0; iy < g.grid_h; iy++) {                                                \
                const T y = ts_roi_align_y_##S(&g, ph, iy);                                        \
                for (int ix = 0; ix < g.grid_w; ix++) {                                            \
                    const T x = ts_roi_align_x_##S(&g, pw, ix);                                    \
                    T w[4];                                                                        \
                    int64_t pos[4];                                                                \
                    if (!ts_roi_bilinear_##S(p.H, p.W, y, x, w, pos)) continue;                    \
                    for (int q = 0; q < 4; q++) atomicAdd(plane + pos[q], gb * w[q] / cnt);        \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    __global__ void pool_fwd_##S(RoiPlan p) {                                                      \
        const int64_t n = p.K * p.C * p.PH * p.PW;                                                 \
        for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;                    \
             e += (int64_t)gridDim.x * blockDim.x) {                                               \
            int64_t k, c, ph, pw;                                                                  \
            roi_split(p, e, &k, &c, &ph, &pw);                                                     \
            const ts_roi_pool_geom_##S g =                                                         \
                ts_roi_pool_geom_make_##S((const T *)p.rois + k * 5, (T)p.scale, p.PH, p.PW);      \
            const bool ok = g.batch >= 0 && g.batch < p.N;                                         \
            int64_t win[4];                                                                        \
            ts_roi_pool_window_##S(&g, p.H, p.W, ph, pw, win);                                     \
            if (!ok) win[1] = win[0];                                                              \
            const T *plane = (const T *)p.in + ((ok ? g.batch : 0) * p.C + c) * p.H * p.W;         \
            ((T *)p.out)[e] = ts_roi_pool_bin_##S(plane, p.W, win, &p.argmax[e]);                  \
        }                                                                                          \
    }                                                                                              \
    __global__ void pool_bwd_##S(RoiPlan p) {                                                      \
        const int64_t n = p.K * p.C * p.PH * p.PW;                                                 \
        for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;                    \
             e += (int64_t)gridDim.x * blockDim.x) {                                               \
            int64_t k, c, ph, pw;                                                                  \
            roi_split(p, e, &k, &c, &ph, &pw);                                                     \
            const int64_t b = ts_roi_int((double)((const T *)p.rois)[k * 5]);                      \
            const int64_t am = p.argmax[e];                                                        \
            if (b < 0 || b >= p.N || am < 0) continue;                                             \
            atomicAdd((T *)p.in + (b * p.C + c) * p.H * p.W + am, ((const T *)p.out)[e]);          \
        }                                                                                          \
    }

ROI_CUDA_KERNELS(float, f)
ROI_CUDA_KERNELS(double, d)

} /* namespace */

/* One roi kernel of four (forward / backward, float / double) over every output element */
typedef void (*roi_kernel)(RoiPlan);
static void roi_launch(int index, const ts_roi_args *a, bool backward, const char *what,
                       roi_kernel fwd_f, roi_kernel fwd_d, roi_kernel bwd_f, roi_kernel bwd_d) {
    const RoiPlan p = roi_plan(a);
    const int64_t n = p.K * p.C * p.PH * p.PW;
    if (n <= 0 || !tsc_begin(index)) return;
    const bool f = a->input.dtype == TS_F32;
    const roi_kernel k = backward ? (f ? bwd_f : bwd_d) : (f ? fwd_f : fwd_d);
    k<<<tsc_grid(n, TSC_THREADS), TSC_THREADS, 0, tsc_stream(index)>>>(p);
    tsc_launch_check(what, index);
}

void tsc_roi_align(const ts_backend *be, int index, const ts_roi_args *a, bool backward) {
    (void)be;
    roi_launch(index, a, backward, backward ? "roi_align_backward" : "roi_align", align_fwd_f,
               align_fwd_d, align_bwd_f, align_bwd_d);
}

void tsc_roi_pool(const ts_backend *be, int index, const ts_roi_args *a, bool backward) {
    (void)be;
    roi_launch(index, a, backward, backward ? "roi_pool_backward" : "roi_pool", pool_fwd_f,
               pool_fwd_d, pool_bwd_f, pool_bwd_d);
}
