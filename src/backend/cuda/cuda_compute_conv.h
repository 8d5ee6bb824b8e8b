/* cuda_compute_conv.h — what the CUDA convolution files share: the geometry of a call and the
 * im2col + cuBLAS path (cuda_conv_im2col.cu) that cuda_conv.cu uses when cuDNN is absent or
 * declines a configuration. */
#ifndef TS_CUDA_COMPUTE_CONV_H
#define TS_CUDA_COMPUTE_CONV_H

#include "backend/cuda/cuda_compute.h"

/* x [n, c, h, w], w [o, c/g, kh, kw], y [n, o, oh, ow]; cg/og: channels per group; k = cg*kh*kw
 * (one output's taps), p = oh*ow. */
typedef struct tsc_cgeom {
    int64_t n, c, h, w, o, oh, ow, kh, kw;
    int64_t sh, sw, ph, pw, dh, dw, g;
    int64_t cg, og, k, p;
} tsc_cgeom;

static inline tsc_cgeom tsc_cgeom_of(const ts_kview *x, const ts_kview *w, const ts_kview *y,
                                     const ts_conv2d_params *p) {
    tsc_cgeom g;
    g.n = x->shape[0];
    g.c = x->shape[1];
    g.h = x->shape[2];
    g.w = x->shape[3];
    g.o = w->shape[0];
    g.oh = y->shape[2];
    g.ow = y->shape[3];
    g.kh = w->shape[2];
    g.kw = w->shape[3];
    g.sh = p->stride[0];
    g.sw = p->stride[1];
    g.ph = p->padding[0];
    g.pw = p->padding[1];
    g.dh = p->dilation[0];
    g.dw = p->dilation[1];
    g.g = p->groups > 0 ? p->groups : 1;
    g.cg = g.c / g.g;
    g.og = g.o / g.g;
    g.k = g.cg * g.kh * g.kw;
    g.p = g.oh * g.ow;
    return g;
}

/* im2col + cuBLAS, contiguous views of float dtype dt; false with the error recorded. y, gx and gw
 * are overwritten. bias may be NULL. */
bool tsc_conv_im2col_forward(int index, const tsc_cgeom *g, ts_dtype dt, const char *x,
                             const char *w, const char *bias, char *y);
bool tsc_conv_im2col_backward_data(int index, const tsc_cgeom *g, ts_dtype dt, const char *gy,
                                   const char *w, char *gx);
bool tsc_conv_im2col_backward_weight(int index, const tsc_cgeom *g, ts_dtype dt, const char *gy,
                                     const char *x, char *gw);

/* The NCHW path of one pass on contiguous NCHW buffers (cuda_conv.cu): cuDNN where it runs, else
 * im2col; no activation. false with the error recorded. */
bool tsc_conv_nchw_forward(int index, const tsc_cgeom *g, ts_dtype dt, const char *x, const char *w,
                           const char *bias, char *y);
bool tsc_conv_nchw_backward_data(int index, const tsc_cgeom *g, ts_dtype dt, const char *gy,
                                 const char *w, char *gx);
bool tsc_conv_nchw_backward_weight(int index, const tsc_cgeom *g, ts_dtype dt, const char *gy,
                                   const char *x, char *gw);

/* One cuDNN pass (cuda_conv.cu, builds with TS_HAVE_CUDNN): a, b = x, w (forward), gy, w
 * (backward data), gy, x (backward weight); out = y, gx or gw; bias (forward) may be NULL. layout:
 * which buffers are NHWC (TSC_CONV_ACT_NHWC: x and y, or gx and gy) and whether the filter is KRSC
 * ([o][kh][kw][c/g], TSC_CONV_W_KRSC) instead of OIHW; part of the cached algorithm choice.
 * TSC_CONV_FALLBACK: cuDNN declines (nothing the caller relies on written); TSC_CONV_FAILED: the
 * error is recorded. */
#define TSC_CONV_ACT_NHWC 1u
#define TSC_CONV_W_KRSC   2u
typedef enum { TSC_CONV_FWD, TSC_CONV_BWD_DATA, TSC_CONV_BWD_FILTER } tsc_conv_dir;
typedef enum { TSC_CONV_DONE, TSC_CONV_FALLBACK, TSC_CONV_FAILED } tsc_conv_result;
tsc_conv_result tsc_conv_cudnn(int index, tsc_conv_dir dir, const tsc_cgeom *g, ts_dtype dt,
                               unsigned layout, const void *a, const void *b, const void *bias,
                               void *out);

/* channels_last (cuda_conv_nhwc.cu): whether a [n, c, h, w] view is NHWC-dense and not also
 * NCHW-dense (those two are the same memory: C = 1, or H = W = 1); the passes when x or out (gx or
 * gout) is such a view. */
bool tsc_conv_view_nhwc(const ts_kview *v);
void tsc_conv2d_nhwc(int index, const tsc_cgeom *g, const ts_kview *out, const ts_kview *x,
                     const ts_kview *w, const ts_kview *bias, const ts_conv2d_params *p);
void tsc_conv2d_backward_data_nhwc(int index, const tsc_cgeom *g, const ts_kview *gx,
                                   const ts_kview *gout, const ts_kview *w);
void tsc_conv2d_backward_weight_nhwc(int index, const tsc_cgeom *g, const ts_kview *gw,
                                     const ts_kview *gout, const ts_kview *x);

#endif /* TS_CUDA_COMPUTE_CONV_H */
