/* cuda_pool.cu — 2-D max (with PyTorch's argmax indices), average (with or without the padding in
 * the divisor) and adaptive average pooling on CUDA, and their backward passes. Written by hand
 * rather than with cuDNN: cuDNN's pooling returns no indices, and these loops are the CPU's
 * (kern_pool.c) window rules verbatim, one thread per output element.
 *
 * The backward passes gather instead of scatter: one thread per input element sums, in the
 * outputs' row-major order, the gradients of the windows that picked (max) or contain (avg) it. No
 * atomics, so results are deterministic; f32/f64 add in the CPU's order (the same bits), f16/bf16
 * add in float and round once. */
#include "backend/cuda/cuda_compute.h"

namespace {

struct PGeom {
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int kind;        /* ts_pool_kind */
    int64_t divisor; /* > 0: divisor_override */
};

static PGeom pgeom_of(const ts_kview *x, const ts_kview *y, const ts_pool2d_params *p) {
    PGeom g;
    g.planes = x->shape[0] * x->shape[1];
    g.h = x->shape[2];
    g.w = x->shape[3];
    g.oh = y->shape[2];
    g.ow = y->shape[3];
    g.kh = p->kernel[0];
    g.kw = p->kernel[1];
    g.sh = p->stride[0];
    g.sw = p->stride[1];
    g.ph = p->padding[0];
    g.pw = p->padding[1];
    g.dh = p->dilation[0] > 0 ? p->dilation[0] : 1;
    g.dw = p->dilation[1] > 0 ? p->dilation[1] : 1;
    g.kind = (int)p->kind;
    g.divisor = p->divisor;
    return g;
}

/* An average window: the clamped bounds [*y0, *y1) x [*x0, *x1) and the divisor; PyTorch counts
 * the padding that falls inside the window (but never beyond it) when count_include_pad. */
__device__ __forceinline__ void avg_window(const PGeom &g, int64_t oy, int64_t ox, int64_t *y0,
                                           int64_t *y1, int64_t *x0, int64_t *x1, int64_t *div) {
    int64_t a = oy * g.sh - g.ph, b = ox * g.sw - g.pw;
    int64_t ae = a + g.kh < g.h + g.ph ? a + g.kh : g.h + g.ph;
    int64_t be = b + g.kw < g.w + g.pw ? b + g.kw : g.w + g.pw;
    const int64_t pool_size = (ae - a) * (be - b);
    if (a < 0) a = 0;
    if (b < 0) b = 0;
    if (ae > g.h) ae = g.h;
    if (be > g.w) be = g.w;
    *y0 = a, *y1 = ae, *x0 = b, *x1 = be;
    *div = g.divisor > 0 ? g.divisor : g.kind == TS_POOL_AVG ? pool_size : (ae - a) * (be - b);
}

/* Adaptive windows: [floor(i*in/out), ceil((i+1)*in/out)). */
__device__ __forceinline__ int64_t ad_start(int64_t i, int64_t in, int64_t out) {
    return i * in / out;
}
__device__ __forceinline__ int64_t ad_end(int64_t i, int64_t in, int64_t out) {
    return ((i + 1) * in + out - 1) / out;
}

/* the window of an average output (either kind) */
__device__ __forceinline__ void any_avg_window(const PGeom &g, int64_t oy, int64_t ox, int64_t *y0,
                                               int64_t *y1, int64_t *x0, int64_t *x1,
                                               int64_t *div) {
    if (g.kind == TS_POOL_ADAPTIVE_AVG) {
        *y0 = ad_start(oy, g.h, g.oh), *y1 = ad_end(oy, g.h, g.oh);
        *x0 = ad_start(ox, g.w, g.ow), *x1 = ad_end(ox, g.w, g.ow);
        *div = (*y1 - *y0) * (*x1 - *x0);
    } else {
        avg_window(g, oy, ox, y0, y1, x0, x1, div);
    }
}

template <typename T> __global__ void pool_fwd_kernel(PGeom g, const T *x, T *y, int64_t *idx) {
    typedef typename tsc_acc<T>::type A;
    const int64_t total = g.planes * g.oh * g.ow;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ox = e % g.ow, oy = (e / g.ow) % g.oh, pl = e / (g.ow * g.oh);
        const T *xp = x + pl * g.h * g.w;
        if (g.kind == TS_POOL_MAX) {
            int64_t y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;
            const int64_t ye0 = y0 + (g.kh - 1) * g.dh + 1, xe0 = x0 + (g.kw - 1) * g.dw + 1;
            const int64_t y1 = ye0 < g.h ? ye0 : g.h, x1 = xe0 < g.w ? xe0 : g.w;
            if (y0 < 0) y0 += (-y0 + g.dh - 1) / g.dh * g.dh; /* first tap inside */
            if (x0 < 0) x0 += (-x0 + g.dw - 1) / g.dw * g.dw;
            int64_t best = y0 * g.w + x0;
            A m = -(A)INFINITY;
            for (int64_t iy = y0; iy < y1; iy += g.dh)
                for (int64_t ix = x0; ix < x1; ix += g.dw) {
                    const A v = tsc_load_acc(xp[iy * g.w + ix]);
                    if (v > m || v != v) m = v, best = iy * g.w + ix; /* NaN wins, as the CPU */
                }
            y[e] = tsc_from_acc<T>(m);
            if (idx) idx[e] = best;
            continue;
        }
        int64_t y0, y1, x0, x1, div;
        any_avg_window(g, oy, ox, &y0, &y1, &x0, &x1, &div);
        if (y0 >= y1 || x0 >= x1) {
            y[e] = tsc_from_acc<T>((A)0);
            continue;
        }
        A s = 0;
        for (int64_t iy = y0; iy < y1; iy++)
            for (int64_t ix = x0; ix < x1; ix++) s += tsc_load_acc(xp[iy * g.w + ix]);
        y[e] = tsc_from_acc<T>(s / (A)div);
    }
}

/* Outputs along one axis whose (pre-clamp) window of k taps spaced d, starting at o*s - p, can
 * reach input coordinate i: [*lo, *hi). */
__device__ __forceinline__ void reach(int64_t i, int64_t k, int64_t s, int64_t p, int64_t d,
                                      int64_t out, int64_t *lo, int64_t *hi) {
    const int64_t span = (k - 1) * d; /* o*s - p <= i <= o*s - p + span */
    const int64_t num = i + p - span;
    int64_t l = num <= 0 ? 0 : (num + s - 1) / s;
    int64_t h = (i + p) / s + 1;
    if (h > out) h = out;
    *lo = l;
    *hi = h > l ? h : l;
}

template <typename T>
__global__ void pool_bwd_kernel(PGeom g, const T *gy, const int64_t *idx, T *gx) {
    typedef typename tsc_acc<T>::type A;
    const int64_t total = g.planes * g.h * g.w;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ix = e % g.w, iy = (e / g.w) % g.h, pl = e / (g.w * g.h);
        const T *gp = gy + pl * g.oh * g.ow;
        int64_t oy0, oy1, ox0, ox1;
        if (g.kind == TS_POOL_ADAPTIVE_AVG) {
            oy0 = iy * g.oh / g.h, oy1 = ((iy + 1) * g.oh + g.h - 1) / g.h;
            ox0 = ix * g.ow / g.w, ox1 = ((ix + 1) * g.ow + g.w - 1) / g.w;
            if (oy1 > g.oh) oy1 = g.oh;
            if (ox1 > g.ow) ox1 = g.ow;
        } else {
            const int64_t dh = g.kind == TS_POOL_MAX ? g.dh : 1;
            const int64_t dw = g.kind == TS_POOL_MAX ? g.dw : 1;
            reach(iy, g.kh, g.sh, g.ph, dh, g.oh, &oy0, &oy1);
            reach(ix, g.kw, g.sw, g.pw, dw, g.ow, &ox0, &ox1);
        }
        A acc = 0;
        if (g.kind == TS_POOL_MAX) {
            const int64_t *ip = idx + pl * g.oh * g.ow, me = iy * g.w + ix;
            for (int64_t oy = oy0; oy < oy1; oy++)
                for (int64_t ox = ox0; ox < ox1; ox++) {
                    const int64_t q = oy * g.ow + ox;
                    if (ip[q] == me) acc += tsc_load_acc(gp[q]);
                }
        } else {
            for (int64_t oy = oy0; oy < oy1; oy++)
                for (int64_t ox = ox0; ox < ox1; ox++) {
                    int64_t y0, y1, x0, x1, div;
                    any_avg_window(g, oy, ox, &y0, &y1, &x0, &x1, &div);
                    if (iy < y0 || iy >= y1 || ix < x0 || ix >= x1) continue;
                    acc += tsc_load_acc(gp[oy * g.ow + ox]) / (A)div;
                }
        }
        gx[e] = tsc_from_acc<T>(acc);
    }
}

} /* namespace */

void tsc_pool2d(const ts_backend *be, int index, const ts_kview *out, const ts_kview *x,
                const ts_kview *indices, const ts_pool2d_params *p) {
    (void)be;
    const PGeom g = pgeom_of(x, out, p);
    const int64_t total = g.planes * g.oh * g.ow;
    if (total == 0 || !tsc_begin(index)) return;
    int64_t *idx = indices && g.kind == TS_POOL_MAX ? (int64_t *)indices->data : NULL;
    const unsigned grid = tsc_grid(total, TSC_THREADS);
    cudaStream_t st = tsc_stream(index);
    TSC_FLOAT_SWITCH(x->dtype, T,
                     pool_fwd_kernel<T>
                     <<<grid, TSC_THREADS, 0, st>>>(g, (const T *)x->data, (T *)out->data, idx))
    tsc_launch_check("pool2d", index);
}

void tsc_pool2d_backward(const ts_backend *be, int index, const ts_kview *gx, const ts_kview *gout,
                         const ts_kview *indices, const ts_pool2d_params *p) {
    (void)be;
    const PGeom g = pgeom_of(gx, gout, p);
    const int64_t total = g.planes * g.h * g.w;
    if (total == 0 || !tsc_begin(index)) return;
    const int64_t *idx = g.kind == TS_POOL_MAX ? (const int64_t *)indices->data : NULL;
    const unsigned grid = tsc_grid(total, TSC_THREADS);
    cudaStream_t st = tsc_stream(index);
    TSC_FLOAT_SWITCH(gx->dtype, T,
                     pool_bwd_kernel<T>
                     <<<grid, TSC_THREADS, 0, st>>>(g, (const T *)gout->data, idx, (T *)gx->data))
    tsc_launch_check("pool2d_backward", index);
}
