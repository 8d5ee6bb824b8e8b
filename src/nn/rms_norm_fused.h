/* rms_norm_fused.h — rms_norm through the backend's fused layer-norm kernels with their rms flag
 * (rms_norm_fused.c; backend.h's ts_layer_norm_args). */
#ifndef TS_NN_RMS_NORM_FUSED_H
#define TS_NN_RMS_NORM_FUSED_H

#include <stdbool.h>

#include "nn/functional_internal.h"

/* Whether the kernels take an rms_norm over x (already checked; nnorm = normalized_shape's dims)
 * in dtype dt: the backend has the four layer-norm entries and its layer_norm_supports says yes
 * to the rms variant of this shape. */
bool tsi_rms_norm_fused_takes(ts_tensor *x, int nnorm, ts_dtype dt);

/* The op through them: x and w (NULL: absent) of one dtype the kernels take, eps already
 * resolved (no default here). One RmsNormBackward0 node saving x, w and each row's rstd; under
 * create_graph its backward is the composition of public ops (differentiable again). */
ts_tensor *tsi_rms_norm_fused(ts_tensor *x, int nnorm, ts_tensor *w, double eps);

/* rms_norm's eps for eps 0 (None, PyTorch's default): the machine epsilon of the type it computes
 * in (rms_norm.c) */
double tsi_rms_norm_default_eps(ts_dtype d);
/* the eps rms_norm adds for a given eps: +0.0 means None (the default above), -0.0 an eps of
 * exactly zero (F.rms_norm(eps=0.0)); any other value as it is */
double tsi_rms_norm_eps(double eps, ts_dtype d);

#endif /* TS_NN_RMS_NORM_FUSED_H */
