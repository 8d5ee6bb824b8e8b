/* kern_conv.h — convolution geometry shared by the im2col kernels and the direct f32 kernels. */
#ifndef TS_KERN_CONV_H
#define TS_KERN_CONV_H

#include "backend/backend.h"

typedef struct ts_cgeom {
    int64_t n, c, h, w, o, oh, ow, kh, kw;
    int64_t sh, sw, ph, pw, dh, dw, g;
    int64_t cg, og; /* input channels and outputs per group */
    int64_t k, p;   /* rows of the column matrix (cg*kh*kw) and output pixels (oh*ow) */
    bool direct;    /* 1x1, stride 1, unpadded: the input already is its column matrix */
    /* forward: the activation on each output as it is written (backward passes: NONE); CLIP's
     * bounds, -inf / +inf for an unbounded side */
    ts_conv_act act;
    double lo, hi;
    /* x, y and their gradients channels_last ([n][h][w][c]): read by the allocation-free loops
     * (kern_conv_naive.c) and kern_conv_nhwc.c only; the other drivers take NCHW (false) */
    bool nhwc;
} ts_cgeom;

/* The geometry of a convolution of x [nchw] by a weight [o_ohw[0], c / groups, khw] into
 * [n, o_ohw[0], o_ohw[1], o_ohw[2]] (groups 0 counts as 1; CLIP's missing bounds made infinite).
 * Divisibility by the groups is the caller's to check. */
ts_cgeom tsi_cgeom_make(const int64_t nchw[4], const int64_t o_ohw[3], const int64_t khw[2],
                        const ts_conv2d_params *p);

/* g's activation on n contiguous outputs in place: kernel_math.h's ts_relu / ts_clamp, what the
 * composed ops compute, bit for bit. */
void tsi_conv_act_f32(const ts_cgeom *g, float *y, int64_t n);
void tsi_conv_act_f64(const ts_cgeom *g, double *y, int64_t n);

/* Direct convolution (no column matrix) for f32 with unit horizontal stride and few outputs per
 * group, where im2col's copies cost more than the arithmetic. Vectorised along output rows in the
 * ISA ts_cpu_isa_get() names (AVX-512, AVX2, portable 4-lane vectors). */
typedef struct ts_conv_direct ts_conv_direct;
/* The kernels for g's forward pass (or weight gradient), or NULL when im2col is the better path. */
const ts_conv_direct *tsi_conv_direct_for(const ts_cgeom *g, bool weight_grad);
/* Tests: force "avx512", "avx2", "generic" or "none" (im2col only); false when this CPU lacks it.
 * NULL restores the automatic choice. Not thread-safe: call while no convolution runs. */
bool tsi_conv_direct_force_isa(const char *name);
/* floats of per-thread scratch the image functions need */
int64_t tsi_conv_direct_scratch(const ts_conv_direct *d, const ts_cgeom *g);
/* Weights rearranged for the forward kernel: malloc'ed, NULL when out of memory. */
float *tsi_conv_direct_pack(const ts_conv_direct *d, const ts_cgeom *g, const float *w);
/* The same into p, of tsi_conv_direct_pack_floats floats; what decides that arrangement (the key
 * of a packed copy kept across calls: conv_dnnl_wcache.h). */
int64_t tsi_conv_direct_pack_floats(const ts_conv_direct *d, const ts_cgeom *g);
void tsi_conv_direct_pack_into(const ts_conv_direct *d, const ts_cgeom *g, const float *w,
                               float *p);
typedef struct ts_conv_direct_layout {
    int64_t ob, g, og, cg, kh, kw;
} ts_conv_direct_layout;
ts_conv_direct_layout tsi_conv_direct_layout_of(const ts_conv_direct *d, const ts_cgeom *g);
/* y [o, oh, ow] = act(conv(x [c, h, w]) + b) for one image (b may be NULL; act: g's). */
void tsi_conv_direct_forward(const ts_conv_direct *d, const ts_cgeom *g, const float *x,
                             const float *wpk, const float *b, float *y, float *scratch);
/* The same for groups [g0, g1) of that image alone (x, wpk, b, y: the whole image's), so that
 * threads can share one image's groups (a depthwise convolution at batch 1); scratch as above. */
void tsi_conv_direct_forward_groups(const ts_conv_direct *d, const ts_cgeom *g, int64_t g0,
                                    int64_t g1, const float *x, const float *wpk, const float *b,
                                    float *y, float *scratch);
/* gw [o, cg, kh, kw] = (gw +, when acc) gy [o, oh, ow] correlated with x [c, h, w], one image. */
void tsi_conv_direct_weight(const ts_conv_direct *d, const ts_cgeom *g, const float *gy,
                            const float *x, float *gw, float *scratch, bool acc);

/* float32 convolutions: "dnnl" (oneDNN, when built in), "builtin" (im2col or direct kernels), ""
 * (automatic) or NULL (back to TS_CONV=dnnl|builtin as read at start-up; automatic when unset).
 * Tests; not thread-safe. */
void tsi_conv_force_provider(const char *name);
/* The choice in force, for every convolution entry (kern_conv.c, conv_dnnl_blocked.c): -1
 * automatic, 0 builtin, 1 dnnl. */
int tsi_conv_provider(void);

/* kern_conv_naive.c: the fallback without scratch memory (dense views of dtype dt, NCHW, or NHWC
 * when g->nhwc) */
void tsi_conv_naive_forward(const ts_cgeom *g, ts_dtype dt, const char *x, const char *w,
                            const char *b, char *y);
void tsi_conv_naive_backward_data(const ts_cgeom *g, ts_dtype dt, const char *gy, const char *w,
                                  char *gx);
void tsi_conv_naive_backward_weight(const ts_cgeom *g, ts_dtype dt, const char *gy, const char *x,
                                    char *gw);

#endif /* TS_KERN_CONV_H */
