/* conv_internal.h — what the conv2d front end (conv.c) shares with the fused conv + activation
 * (conv_fused.c): one forward call with an activation, behind ts_conv2d's checks. Not public. */
#ifndef TS_NN_CONV_INTERNAL_H
#define TS_NN_CONV_INTERNAL_H

#include "backend/backend.h"

/* act(conv2d(x, w, b, o)) in one backend call (act: TS_CONV_ACT_*, lo / hi: CLIP's bounds, NAN =
 * none), with ts_conv2d's checks and error messages (op "conv2d"); no autograd node, no trace, no
 * autocast: the caller has seen that none applies. The result is in the current scope, or NULL
 * with the error recorded. */
ts_tensor *tsi_conv2d_forward_act(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_conv2d_opts o,
                                  ts_conv_act act, double lo, double hi);

/* p's weight identity (weight_uid, _version, _offset) for the backend's caches when the call reads
 * w's own storage (wc: the contiguous tensor it reads) and that can't change under it: not being
 * trained, Tessera's own memory, not shared; left 0 otherwise (conv.c). */
void tsi_conv_weight_identity(const ts_tensor *w, const ts_tensor *wc, ts_conv2d_params *p);

/* The checks and node parameters every convolution front end shares (conv.c): a floating input
 * with weight and bias of its dtype (TS_ERR_DTYPE with PyTorch's messages); a node's ip[0..6] as
 * stride, padding, dilation (2 each) and groups. */
bool tsi_conv_check_dtypes(const char *op, ts_tensor *x, ts_tensor *w, ts_tensor *b);
/* weight [out, in / groups, ...] against an input of cin channels (TS_ERR_SHAPE) */
bool tsi_conv_check_groups(const char *op, ts_shape xs, ts_shape ws, int64_t groups, int64_t cin);
void tsi_conv_params_store(ts_node *n, const ts_conv2d_params *p);
ts_conv2d_params tsi_conv_params_load(const ts_node *n);

/* conv2d's weight gradient as public ops (conv.c; create_graph): for input x [N, C, H, W] and
 * output gradient g [N, O, OH, OW] under p, the gradient of a weight of shape ws, recording its
 * graph when grad mode is on. conv_transpose.c uses it with the roles of x and g swapped. */
ts_tensor *tsi_conv_weight_grad_composite(ts_tensor *x, ts_tensor *g, const ts_conv2d_params *p,
                                          ts_shape ws);

#endif /* TS_NN_CONV_INTERNAL_H */
