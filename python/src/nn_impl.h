/* nn_impl.h — what nn.c and nn_cmodule.c (py-nn's files) share beyond tsp.h. */
#ifndef TSP_NN_IMPL_H
#define TSP_NN_IMPL_H

#include "tsp.h"

/* None -> *out NULL (0); a Tensor -> its handle (0); anything else: TypeError naming fn/arg, -1 */
int tspn_opt_tensor(PyObject *o, ts_tensor **out, const char *fn, const char *arg);
/* nn_cmodule.c: the _C.CModule type (a module built by the C library) and its factories */
int tsp_init_cmodule(PyObject *m);
/* nn_resample.c: _nn_pad, _nn_interpolate, _nn_pixel_shuffle */
int tsp_init_nn_resample(PyObject *m);
/* nn_loss_kinds.c: _nn_loss_kind (src/nn/loss_pointwise.c, loss_margin.c) */
int tsp_init_nn_loss_kinds(PyObject *m);
/* nn_activation.c: _nn_act_kind, _nn_glu, _nn_prelu, _nn_softmin (src/ops/activation.c) */
int tsp_init_nn_activation(PyObject *m);
/* nn_pool_norm.c: _nn_pool_nd, _nn_adaptive_pool, _nn_max_unpool and the group / instance /
 * local response norms (src/nn/pool_nd.c, src/nn/group_norm.c) */
int tsp_init_nn_pool_norm(PyObject *m);
/* nn_conv.c: _nn_convnd, _nn_im2col, _nn_col2im (include/tessera/conv.h) */
int tsp_init_nn_conv(PyObject *m);
/* nn_fusion.c: _nn_fuse_bn_weights (torch.nn.utils.fusion) */
int tsp_init_nn_fusion(PyObject *m);
/* nn_init.c: _nn_calculate_gain, _nn_init_more (torch.nn.init beyond _nn_init) */
int tsp_init_nn_init(PyObject *m);

/* optim.c: a C tensor list as {name: Tensor} (the list is freed; NULL with an exception, also when
 * a C error is pending), and a {name: Tensor} dict as a list (0; -1 with an exception) */
PyObject *tspo_dict_of_list(ts_tensor_list *l);
int tspo_list_of_dict(PyObject *d, ts_tensor_list *l, const char *fn);
/* optim.c: the C optimizer of a _C.COptimizer, or NULL with TypeError naming fn */
ts_optim *tspo_optim_of(PyObject *o, const char *fn);

#endif
