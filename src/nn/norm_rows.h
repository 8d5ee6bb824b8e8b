/* norm_rows.h — how the fused norm front ends (layer_norm_fused.c, rms_norm_fused.c) hand a
 * contiguous tensor to the backend's layer-norm kernels: as rows x cols, in 1-d or 2-d views. */
#ifndef TS_NN_NORM_ROWS_H
#define TS_NN_NORM_ROWS_H

#include "nn/functional_internal.h"

/* rows = the product of the leading dims, cols = that of the last `nnorm` */
void tsi_norm_rows_cols(const ts_tensor *x, int nnorm, int64_t *rows, int64_t *cols);
/* The kernels' view of a contiguous tensor as [d0, d1] (d0 = 0: one dim of d1); t NULL: absent. */
void tsi_norm_view2(ts_kview *v, const ts_tensor *t, int64_t d0, int64_t d1);
/* Whether the backend has the four layer-norm entries and they take a norm over x's last nnorm
 * dims in dtype dt, as layer norm or (rms) as RMSNorm. */
bool tsi_norm_rows_take(ts_tensor *x, int nnorm, ts_dtype dt, bool rms);
/* The per-row statistics' dtype: float64 for float64, else float32 (the kernels'). */
ts_dtype tsi_norm_stat_dtype(ts_dtype dt);
/* A fused node's backward through the kernels: a (x, weight, bias and the saved statistics
 * already set) gets the gradients' views, the workspace the backend asks for, and the call;
 * gi as tsi_norm_grads_end leaves it. */
void tsi_norm_rows_backward(const char *op, ts_node *n, ts_tensor *x, ts_tensor *g,
                            ts_layer_norm_args *a, ts_tensor **gi);
/* The fused ops' nodes for y computed by the kernels (when grad mode and some input need one):
 * ins = {input, weight, bias} as the caller got them (rms: bias NULL), x and w their contiguous
 * forms the kernels read, mean / rstd the per-row statistics (rms: rstd only).
 * NativeLayerNormBackward0 / RmsNormBackward0, as tsi_layer_norm_fused / tsi_rms_norm_fused
 * record them (add_norm_fused.c records them over h). */
void tsi_layer_norm_fused_record(ts_tensor *const *ins, ts_tensor *x, ts_tensor *w, ts_tensor *mean,
                                 ts_tensor *rstd, ts_tensor *y, int nnorm, double eps);
void tsi_rms_norm_fused_record(ts_tensor *const *ins, ts_tensor *x, ts_tensor *w, ts_tensor *rstd,
                               ts_tensor *y, int nnorm, double eps);

#endif /* TS_NN_NORM_ROWS_H */
