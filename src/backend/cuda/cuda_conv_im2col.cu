/* cuda_conv_im2col.cu — 2-D convolution on CUDA as im2col + cuBLAS GEMMs: the path when cuDNN is
 * not built in or declines a configuration. Images go in chunks whose column buffer fits in
 * TSC_COL_BYTES of scratch.
 *
 * forward          y[img] = W @ col(x[img])  (+ bias: y starts as the bias and the GEMM adds)
 * backward data    gx = col2im(W^T @ gy[img]), the columns in f32 (f64) and summed per input
 *                  element by one thread (no atomics: deterministic)
 * backward weight  gW = gy' @ col(x)^T with the chunk's images side by side along the GEMM's inner
 *                  dim, accumulated over chunks in f32 for f16/bf16 (in place otherwise)
 * Groups are the GEMMs' batch. */
#include "backend/cuda/cuda_compute_blas.h"
#include "backend/cuda/cuda_compute_conv.h"

namespace {

#define TSC_COL_BYTES ((int64_t)256 << 20)

/* col[img * s_img + r * s_row + q] for row r = (c, i, j) and output position q: the input tap of
 * output q (0 in the padding) */
template <typename T>
__global__ void im2col_kernel(tsc_cgeom g, const T *x, int64_t nb, T *col, int64_t s_img,
                              int64_t s_row) {
    const int64_t rows = g.c * g.kh * g.kw, total = nb * rows * g.p;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t q = e % g.p, r = (e / g.p) % rows, img = e / (g.p * rows);
        const int64_t j = r % g.kw, i = (r / g.kw) % g.kh, c = r / (g.kw * g.kh);
        const int64_t iy = (q / g.ow) * g.sh - g.ph + i * g.dh;
        const int64_t ix = (q % g.ow) * g.sw - g.pw + j * g.dw;
        T v = T();
        if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
            v = x[((img * g.c + c) * g.h + iy) * g.w + ix];
        col[img * s_img + r * s_row + q] = v;
    }
}

/* gx[img, c, iy, ix] = the sum of the columns that read it (col laid out [img][rows][p]) */
template <typename T, typename CT>
__global__ void col2im_kernel(tsc_cgeom g, const CT *col, int64_t nb, T *gx) {
    typedef typename tsc_acc<T>::type A;
    const int64_t rows = g.c * g.kh * g.kw, total = nb * g.c * g.h * g.w;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ix = e % g.w, iy = (e / g.w) % g.h, c = (e / (g.w * g.h)) % g.c;
        const int64_t img = e / (g.w * g.h * g.c);
        const CT *cp = col + img * rows * g.p;
        A acc = 0;
        for (int64_t i = 0; i < g.kh; i++) {
            const int64_t ty = iy + g.ph - i * g.dh; /* = oy * sh */
            if (ty < 0) break;                       /* only decreases with i */
            if (ty % g.sh) continue;
            const int64_t oy = ty / g.sh;
            if (oy >= g.oh) continue;
            for (int64_t j = 0; j < g.kw; j++) {
                const int64_t tx = ix + g.pw - j * g.dw;
                if (tx < 0) break;
                if (tx % g.sw) continue;
                const int64_t ox = tx / g.sw;
                if (ox >= g.ow) continue;
                acc += (A)cp[((c * g.kh + i) * g.kw + j) * g.p + oy * g.ow + ox];
            }
        }
        gx[e] = tsc_from_acc<T>(acc);
    }
}

/* y[img, o, q] = bias[o] for nb images */
template <typename T>
__global__ void bias_fill_kernel(T *y, const T *bias, int64_t nb, int64_t o, int64_t p) {
    const int64_t total = nb * o * p;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x)
        y[e] = bias[(e / p) % o];
}

/* dst[o, img * p + q] = gy[img, o, q]: the chunk's images side by side */
template <typename T>
__global__ void gy_side_by_side_kernel(const T *gy, T *dst, int64_t nb, int64_t o, int64_t p) {
    const int64_t total = nb * o * p;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t q = e % p, oc = (e / p) % o, img = e / (p * o);
        dst[oc * nb * p + img * p + q] = gy[e];
    }
}

template <typename T> __global__ void from_f32_kernel(const float *src, T *dst, int64_t n) {
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x)
        dst[e] = tsc_from_acc<T>(src[e]);
}

/* images per chunk: as many as keep bytes_per_image * count within the column budget */
static int64_t chunk_images(int64_t n, int64_t bytes_per_image) {
    int64_t nb = bytes_per_image > 0 ? TSC_COL_BYTES / bytes_per_image : n;
    if (nb < 1) nb = 1;
    return nb < n ? nb : n;
}

static bool zero_bytes(int index, void *p, size_t n, const char *what) {
    return n == 0 || tsc_check(cudaMemsetAsync(p, 0, n, tsc_stream(index)), what, index);
}

static inline tsc_mat mat(const void *data, int64_t sb, int64_t sr, int64_t sc) {
    tsc_mat m;
    m.data = (char *)data;
    m.s.sb = sb;
    m.s.sr = sr;
    m.s.sc = sc;
    return m;
}

template <typename T>
static bool fwd_typed(int index, const tsc_cgeom &g, ts_dtype dt, const T *x, const T *w,
                      const T *bias, T *y) {
    const char *what = "conv2d";
    cudaStream_t st = tsc_stream(index);
    if (g.c == 0) { /* no input channels: the output is the bias, or zero */
        if (!bias) return zero_bytes(index, y, (size_t)(g.n * g.o * g.p) * sizeof(T), what);
        bias_fill_kernel<T><<<tsc_grid(g.n * g.o * g.p, TSC_THREADS), TSC_THREADS, 0, st>>>(
            y, bias, g.n, g.o, g.p);
        return tsc_launch_check(what, index);
    }
    const int64_t rows = g.c * g.kh * g.kw;
    const int64_t nb = chunk_images(g.n, rows * g.p * (int64_t)sizeof(T));
    T *col = (T *)tsc_scratch_alloc(index, (size_t)(nb * rows * g.p) * sizeof(T));
    if (!col) return false;
    bool ok = true;
    for (int64_t n0 = 0; ok && n0 < g.n; n0 += nb) {
        const int64_t cnt = g.n - n0 < nb ? g.n - n0 : nb;
        const T *x0 = x + n0 * g.c * g.h * g.w;
        T *y0 = y + n0 * g.o * g.p;
        im2col_kernel<T><<<tsc_grid(cnt * rows * g.p, TSC_THREADS), TSC_THREADS, 0, st>>>(
            g, x0, cnt, col, rows * g.p, g.p);
        ok = tsc_launch_check(what, index);
        if (ok && bias) {
            bias_fill_kernel<T><<<tsc_grid(cnt * g.o * g.p, TSC_THREADS), TSC_THREADS, 0, st>>>(
                y0, bias, cnt, g.o, g.p);
            ok = tsc_launch_check(what, index);
        }
        const double beta = bias ? 1.0 : 0.0;
        if (ok && g.g == 1) {
            ok = tsc_gemm(index, what, dt, dt, cnt, g.o, g.p, g.k, mat(w, 0, g.k, 1),
                          mat(col, rows * g.p, g.p, 1), mat(y0, g.o * g.p, g.p, 1), beta);
        } else {
            for (int64_t i = 0; ok && i < cnt; i++)
                ok = tsc_gemm(index, what, dt, dt, g.g, g.og, g.p, g.k, mat(w, g.og * g.k, g.k, 1),
                              mat(col + i * rows * g.p, g.k * g.p, g.p, 1),
                              mat(y0 + i * g.o * g.p, g.og * g.p, g.p, 1), beta);
        }
    }
    tsc_scratch_free(index, col);
    return ok;
}

/* CT: the column type (float for f32/f16/bf16, double for f64) */
template <typename T>
static bool bwd_data_typed(int index, const tsc_cgeom &g, ts_dtype dt, const T *gy, const T *w,
                           T *gx) {
    typedef typename tsc_acc<T>::type CT;
    const char *what = "conv2d_backward_data";
    const ts_dtype ct = dt == TS_F64 ? TS_F64 : TS_F32;
    if (g.p == 0 || g.o == 0)
        return zero_bytes(index, gx, (size_t)(g.n * g.c * g.h * g.w) * sizeof(T), what);
    const int64_t rows = g.c * g.kh * g.kw;
    const int64_t nb = chunk_images(g.n, rows * g.p * (int64_t)sizeof(CT));
    CT *col = (CT *)tsc_scratch_alloc(index, (size_t)(nb * rows * g.p) * sizeof(CT));
    if (!col) return false;
    cudaStream_t st = tsc_stream(index);
    bool ok = true;
    for (int64_t n0 = 0; ok && n0 < g.n; n0 += nb) {
        const int64_t cnt = g.n - n0 < nb ? g.n - n0 : nb;
        const T *gy0 = gy + n0 * g.o * g.p;
        /* W_g^T is W_g [og, k] read column-major: rows stride 1, columns stride k */
        if (g.g == 1) {
            ok = tsc_gemm(index, what, dt, ct, cnt, g.k, g.p, g.og, mat(w, 0, 1, g.k),
                          mat(gy0, g.o * g.p, g.p, 1), mat(col, rows * g.p, g.p, 1), 0.0);
        } else {
            for (int64_t i = 0; ok && i < cnt; i++)
                ok = tsc_gemm(index, what, dt, ct, g.g, g.k, g.p, g.og, mat(w, g.og * g.k, 1, g.k),
                              mat(gy0 + i * g.o * g.p, g.og * g.p, g.p, 1),
                              mat(col + i * rows * g.p, g.k * g.p, g.p, 1), 0.0);
        }
        if (ok) {
            col2im_kernel<T, CT>
                <<<tsc_grid(cnt * g.c * g.h * g.w, TSC_THREADS), TSC_THREADS, 0, st>>>(
                    g, col, cnt, gx + n0 * g.c * g.h * g.w);
            ok = tsc_launch_check(what, index);
        }
    }
    tsc_scratch_free(index, col);
    return ok;
}

template <typename T>
static bool bwd_weight_typed(int index, const tsc_cgeom &g, ts_dtype dt, const T *gy, const T *x,
                             T *gw) {
    const char *what = "conv2d_backward_weight";
    const size_t gw_bytes = (size_t)(g.o * g.k) * sizeof(T);
    if (g.n == 0 || g.p == 0) return zero_bytes(index, gw, gw_bytes, what);
    const bool half = dt == TS_F16 || dt == TS_BF16;
    const int64_t rows = g.c * g.kh * g.kw;
    const int64_t nb = chunk_images(g.n, (rows + g.o) * g.p * (int64_t)sizeof(T));
    T *col = (T *)tsc_scratch_alloc(index, (size_t)(nb * rows * g.p) * sizeof(T));
    T *gyt = col ? (T *)tsc_scratch_alloc(index, (size_t)(nb * g.o * g.p) * sizeof(T)) : NULL;
    float *acc = gyt && half ? (float *)tsc_scratch_alloc(index, (size_t)(g.o * g.k) * 4) : NULL;
    bool ok = col && gyt && (!half || acc);
    cudaStream_t st = tsc_stream(index);
    for (int64_t n0 = 0; ok && n0 < g.n; n0 += nb) {
        const int64_t cnt = g.n - n0 < nb ? g.n - n0 : nb, q = cnt * g.p;
        /* col [rows][cnt * p] and gy' [o][cnt * p]: the images side by side */
        im2col_kernel<T><<<tsc_grid(cnt * rows * g.p, TSC_THREADS), TSC_THREADS, 0, st>>>(
            g, x + n0 * g.c * g.h * g.w, cnt, col, g.p, q);
        gy_side_by_side_kernel<T><<<tsc_grid(cnt * g.o * g.p, TSC_THREADS), TSC_THREADS, 0, st>>>(
            gy + n0 * g.o * g.p, gyt, cnt, g.o, g.p);
        ok = tsc_launch_check(what, index);
        /* gW_g [og, k] (+)= gy'_g [og, q] @ col_g^T [q, k]; col_g^T is col_g read column-major */
        if (ok)
            ok = tsc_gemm(index, what, dt, half ? TS_F32 : dt, g.g, g.og, g.k, q,
                          mat(gyt, g.og * q, q, 1), mat(col, g.k * q, 1, q),
                          half ? mat(acc, g.og * g.k, g.k, 1) : mat(gw, g.og * g.k, g.k, 1),
                          n0 == 0 ? 0.0 : 1.0);
    }
    if (ok && half) {
        from_f32_kernel<T>
            <<<tsc_grid(g.o * g.k, TSC_THREADS), TSC_THREADS, 0, st>>>(acc, gw, g.o * g.k);
        ok = tsc_launch_check(what, index);
    }
    if (acc) tsc_scratch_free(index, acc);
    if (gyt) tsc_scratch_free(index, gyt);
    if (col) tsc_scratch_free(index, col);
    return ok;
}

} /* namespace */

bool tsc_conv_im2col_forward(int index, const tsc_cgeom *g, ts_dtype dt, const char *x,
                             const char *w, const char *bias, char *y) {
    if (g->n * g->o * g->p == 0) return true;
    bool ok = false;
    TSC_FLOAT_SWITCH(
        dt, T,
        ok = fwd_typed<T>(index, *g, dt, (const T *)x, (const T *)w, (const T *)bias, (T *)y))
    return ok;
}

bool tsc_conv_im2col_backward_data(int index, const tsc_cgeom *g, ts_dtype dt, const char *gy,
                                   const char *w, char *gx) {
    if (g->n * g->c * g->h * g->w == 0) return true;
    bool ok = false;
    TSC_FLOAT_SWITCH(dt, T,
                     ok = bwd_data_typed<T>(index, *g, dt, (const T *)gy, (const T *)w, (T *)gx))
    return ok;
}

bool tsc_conv_im2col_backward_weight(int index, const tsc_cgeom *g, ts_dtype dt, const char *gy,
                                     const char *x, char *gw) {
    if (g->o * g->k == 0) return true;
    bool ok = false;
    TSC_FLOAT_SWITCH(dt, T,
                     ok = bwd_weight_typed<T>(index, *g, dt, (const T *)gy, (const T *)x, (T *)gw))
    return ok;
}
