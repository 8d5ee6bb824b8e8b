/* conv_dnnl.h — float32 convolutions through oneDNN's primitives (when the build found oneDNN). */
#ifndef TS_CONV_DNNL_H
#define TS_CONV_DNNL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/cpu/kern_conv.h"

/* Contiguous NCHW x / y, OIHW w (O x C/groups x KH x KW), bias [O] or NULL; the geometry of
 * kern_conv.h. Returns false, having written nothing the caller relies on, when oneDNN is absent or
 * declines the shape or memory runs out: the caller then runs the built-in kernels. */
bool tsi_dnnl_conv_forward(const ts_cgeom *g, const float *x, const float *w, const float *b,
                           float *y);
bool tsi_dnnl_conv_backward_data(const ts_cgeom *g, const float *gy, const float *w, float *gx);
bool tsi_dnnl_conv_backward_weight(const ts_cgeom *g, const float *gy, const float *x, float *gw);
/* Convolutions oneDNN has run so far (tests check that it, not a fallback, ran). */
uint64_t tsi_dnnl_conv_count(void);

#endif /* TS_CONV_DNNL_H */
