/* norm_rows.h — how the fused norm front ends (layer_norm_fused.c, rms_norm_fused.c) hand a
 * contiguous tensor to the backend's layer-norm kernels: as rows x cols, in 1-d or 2-d views. */
#ifndef TS_NN_NORM_ROWS_H
#define TS_NN_NORM_ROWS_H

#include "nn/functional_internal.h"

/* rows = the product of the leading dims, cols = that of the last `nnorm` */
void tsi_norm_rows_cols(const ts_tensor *x, int nnorm, int64_t *rows, int64_t *cols);
/* The kernels' view of a contiguous tensor as [d0, d1] (d0 = 0: one dim of d1); t NULL: absent. */
void tsi_norm_view2(ts_kview *v, const ts_tensor *t, int64_t d0, int64_t d1);

#endif /* TS_NN_NORM_ROWS_H */
