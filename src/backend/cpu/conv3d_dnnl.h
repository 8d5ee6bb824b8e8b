/* conv3d_dnnl.h — the float32 3-d convolution's forward through oneDNN's 3-d primitive (when the
 * build found oneDNN), the cpu backend's conv3d_forward slot for conv3d's inference calls
 * (nn/conv_nd.c); everything else
 * (gradients, float64, other devices) composes conv2d over depth slices. */
#ifndef TS_CONV3D_DNNL_H
#define TS_CONV3D_DNNL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

/* the geometry: tsi_conv3d_geom (backend.h, the conv3d_forward slot's) */

/* y = conv3d(x, w) + b (b [o] or NULL) on contiguous NCDHW / OIDHW float32 arrays. Returns false,
 * having written nothing the caller relies on, when oneDNN is absent, declines the shape or memory
 * runs out: the caller then composes the convolution itself. */
bool tsi_dnnl_conv3d_forward(const tsi_conv3d_geom *g, const float *x, const float *w,
                             const float *b, float *y);

/* the cpu backend's conv3d_forward slot (backend.h) over tsi_dnnl_conv3d_forward */
bool tsi_cpu_conv3d_forward(const ts_backend *be, int index, const tsi_conv3d_geom *g,
                            const ts_kview *x, const ts_kview *w, const ts_kview *b,
                            const ts_kview *y);

/* 3-d forwards oneDNN has run so far (tests check that it, not the composition, ran) */
uint64_t tsi_dnnl_conv3d_count(void);

#endif /* TS_CONV3D_DNNL_H */
