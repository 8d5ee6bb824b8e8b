/* conv3d_dnnl.h — the float32 3-d convolution's forward through oneDNN's 3-d primitive (when the
 * build found oneDNN), for conv3d's inference calls on the CPU (nn/conv_nd.c); everything else
 * (gradients, float64, other devices) composes conv2d over depth slices. */
#ifndef TS_CONV3D_DNNL_H
#define TS_CONV3D_DNNL_H

#include <stdbool.h>
#include <stdint.h>

/* The geometry: x [n, c, in[0..2]] (NCDHW), w [o, c / groups, k[0..2]], y [n, o, out[0..2]];
 * stride s, padding p (both sides), dilation d (PyTorch's: 1 is none), all per spatial dim. */
typedef struct tsi_conv3d_geom {
    int64_t n, c, o, groups;
    int64_t in[3], out[3], k[3], s[3], p[3], d[3];
} tsi_conv3d_geom;

/* y = conv3d(x, w) + b (b [o] or NULL) on contiguous NCDHW / OIDHW float32 arrays. Returns false,
 * having written nothing the caller relies on, when oneDNN is absent, declines the shape or memory
 * runs out: the caller then composes the convolution itself. */
bool tsi_dnnl_conv3d_forward(const tsi_conv3d_geom *g, const float *x, const float *w,
                             const float *b, float *y);

/* 3-d forwards oneDNN has run so far (tests check that it, not the composition, ran) */
uint64_t tsi_dnnl_conv3d_count(void);

#endif /* TS_CONV3D_DNNL_H */
