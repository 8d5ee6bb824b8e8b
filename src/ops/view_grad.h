/* view_grad.h — backward functions of views and copies (shared by views.c and transfer_ops.c). */
#ifndef TS_OPS_VIEW_GRAD_H
#define TS_OPS_VIEW_GRAD_H

#include "autograd/autograd.h"

/* grad reshaped to the input's shape (view, reshape, flatten, squeeze, unsqueeze, t) */
void tsi_reshape_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
void tsi_permute_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);   /* ip: dims */
void tsi_transpose_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi); /* ip: d0, d1 */
/* ip: dim, start (or index), step, is_select */
void tsi_slice_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
void tsi_expand_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
void tsi_identity_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
/* the gradient goes back to the input's device (and, through the engine, its dtype) */
void tsi_to_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
/* copy_(dst, src): nothing for dst's old value, the summed-to-shape gradient for src */
void tsi_copy_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);

#endif /* TS_OPS_VIEW_GRAD_H */
