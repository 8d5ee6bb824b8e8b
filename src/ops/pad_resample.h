/* pad_resample.h — the padding helper that pad_resample.c (F.pad) shares with the ONNX importer
 * (Pad, padded pools and convolutions). */
#ifndef TS_OPS_PAD_RESAMPLE_H
#define TS_OPS_PAD_RESAMPLE_H

#include "tessera.h"

/* x with `before` entries of value added in front of dim and `after` behind; a negative amount
 * crops instead (a crop past the other end leaves the dim empty). Differentiable; NULL on error. */
ts_tensor *tsi_pad_constant_dim(ts_tensor *x, int dim, int64_t before, int64_t after, double value);

#endif /* TS_OPS_PAD_RESAMPLE_H */
