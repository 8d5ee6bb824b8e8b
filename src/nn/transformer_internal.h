/* transformer_internal.h — what the encoder layer (transformer.c) and the decoder layer
 * (transformer_decoder.c) share: the options' checks and the feed-forward activation. */
#ifndef TS_NN_TRANSFORMER_INTERNAL_H
#define TS_NN_TRANSFORMER_INTERNAL_H

#include "nn/module_internal.h"

/* Checks d_model, nhead, the options; sets *p (dropout) and *ff (dim_feedforward) with PyTorch's
 * defaults applied. false with the error set, naming op. */
bool tsi_transformer_opts_check(const char *op, int64_t d_model, int64_t nhead,
                                ts_transformer_opts o, double *p, int64_t *ff);
/* The feed-forward activation a (relu, gelu, gelu_tanh) of x. */
ts_tensor *tsi_transformer_activate(ts_activation a, ts_tensor *x);

#endif /* TS_NN_TRANSFORMER_INTERNAL_H */
