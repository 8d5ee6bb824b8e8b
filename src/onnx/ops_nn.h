/* ops_nn.h — what the nn operator files (ops_nn*.c) share: their run and check functions, listed
 * in ops_nn.c's one table, and the small tensor helpers more than one of them uses. */
#ifndef TS_ONNX_OPS_NN_H
#define TS_ONNX_OPS_NN_H

#include "nn/conv_fused.h"
#include "onnx/onnx_internal.h"

#define TSO_NN_RUN(name)                                                                           \
    bool name(tso_ctx *c, const tso_node *n, ts_tensor *const *in, ts_tensor **out)
#define TSO_NN_CHECK(name) bool name(const tso_node *n)

/* an optional input: NULL when absent or an empty tensor (how exporters skip one before the end) */
static inline ts_tensor *tso_nn_opt(const tso_node *n, ts_tensor *const *in, int i) {
    return i < n->n_in && in[i] && ts_numel(in[i]) > 0 ? in[i] : NULL;
}
/* whether the node asks for output i */
static inline bool tso_nn_wants(const tso_node *n, int i) { return i < n->n_out && n->out[i] >= 0; }

/* the indices start, start + step, ... (count of them) as an i64 vector on dev */
ts_tensor *tso_nn_arange(int64_t start, int64_t count, int64_t step, ts_device dev);
/* x's shape with ones in every dim but dim, which holds len: a broadcastable "column" */
ts_shape tso_nn_along(int ndim, int dim, int64_t len);

/* ops_nn_conv.c: convolutions and pooling */
TSO_NN_CHECK(tso_nn_check_conv);
TSO_NN_RUN(tso_nn_run_conv);
/* A Conv node's input and weight made ready for conv2d (rewrite_conv.c's fused node): the node's
 * pads, auto_pad, strides, dilations and group read against x and w into *o; x padded first where
 * conv2d cannot pad it; a 1-D conv as 2-D with a unit dim (x and w unsqueezed at dim 2, *one_d set:
 * the caller squeezes the result's dim 2). More than two spatial dims is TS_ERR_UNSUPPORTED. false
 * with the error naming the node. */
bool tso_nn_conv2d_setup(const tso_node *n, ts_tensor **x, ts_tensor **w, ts_conv2d_opts *o,
                         bool *one_d);
/* rewrite_conv.c: whether n is the Conv + activation node of the convolution rewrites, and then
 * its activation (nn/conv_fused.h's tsi_conv_act as an int, CLIP's bounds, NAN = none) */
bool tso_fused_conv_act(const tso_node *n, tsi_conv_act *act, double *lo, double *hi);
TSO_NN_CHECK(tso_nn_check_conv_transpose);
TSO_NN_RUN(tso_nn_run_conv_transpose);
TSO_NN_CHECK(tso_nn_check_max_pool);
TSO_NN_RUN(tso_nn_run_max_pool);
TSO_NN_CHECK(tso_nn_check_avg_pool);
TSO_NN_RUN(tso_nn_run_avg_pool);
TSO_NN_CHECK(tso_nn_check_lp_pool);
TSO_NN_RUN(tso_nn_run_lp_pool);
TSO_NN_RUN(tso_nn_run_global_avg_pool);
TSO_NN_RUN(tso_nn_run_global_max_pool);
TSO_NN_RUN(tso_nn_run_global_lp_pool);

/* ops_nn_resize.c: Resize and Upsample */
TSO_NN_CHECK(tso_nn_check_resize);
TSO_NN_RUN(tso_nn_run_resize10);
TSO_NN_RUN(tso_nn_run_resize11);
TSO_NN_CHECK(tso_nn_check_upsample);
TSO_NN_RUN(tso_nn_run_upsample7);
TSO_NN_RUN(tso_nn_run_upsample9);

/* ops_nn_rnn.c: RNN, GRU, LSTM */
TSO_NN_CHECK(tso_nn_check_rnn);
TSO_NN_RUN(tso_nn_run_recurrent);

/* ops_nn_einsum.c */
TSO_NN_CHECK(tso_nn_check_einsum);
TSO_NN_RUN(tso_nn_run_einsum);

#endif /* TS_ONNX_OPS_NN_H */
