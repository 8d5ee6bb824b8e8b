/* reduce_grad.h — backward functions of the reductions and softmax (reduce_grad.c; internal). */
#ifndef TS_OPS_REDUCE_GRAD_H
#define TS_OPS_REDUCE_GRAD_H

#include "autograd/autograd.h"

/* Reductions: node->ip[0] = bit mask of the reduced input dims, ip[1] = keepdim; saved[0] is the
 * input and saved[1] the result where the backward needs them; p[0] = correction (var/std). */
void tsi_sum_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
void tsi_mean_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
void tsi_prod_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
void tsi_amax_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);    /* ties share evenly */
void tsi_max_dim_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi); /* saved[0] indices */
void tsi_var_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
void tsi_std_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
void tsi_logsumexp_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
/* softmax / log_softmax: saved[0] the result, ip[0] the dim */
void tsi_softmax_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);
/* The gradient of softmax / log_softmax along dim from the backend's fused kernel (softmax.c);
 * NULL, with no error set, where the backend has none or declines these views. */
ts_tensor *tsi_softmax_grad_fused(ts_tensor *g, ts_tensor *y, int dim, bool log);
void tsi_log_softmax_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi);

#endif /* TS_OPS_REDUCE_GRAD_H */
