/* shape_grad.h — backward functions of matmul, the index ops and the joining ops (shape_grad.c;
 * internal). */
#ifndef TS_OPS_SHAPE_GRAD_H
#define TS_OPS_SHAPE_GRAD_H

#include "autograd/autograd.h"

/* mm, bmm, matmul: inputs (a, b); saved[0] = a, saved[1] = b (each only when the other operand
 * needs a gradient) */
void tsi_matmul_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
/* ip[0] = the (wrapped) dim; saved[0] = the index as i64 */
void tsi_index_select_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
void tsi_gather_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
/* inputs (self, src) */
void tsi_scatter_add_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
/* ip[0] = dim; one input per joined tensor */
void tsi_cat_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
void tsi_stack_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
/* one output per piece; ip[0] = dim, ip[1] = the pieces' length (the last may be shorter) */
void tsi_split_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);

#endif /* TS_OPS_SHAPE_GRAD_H */
