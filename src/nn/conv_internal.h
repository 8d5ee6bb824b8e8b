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

/* ts_conv2d(x, w, NULL, o) under a bfloat16 autocast region followed by the float32 cast of its
 * result (what an autocast convolution feeding a float32 op such as batch_norm computes), in one
 * autograd node on float32 x and y with the weight's bf16 autocast cast: the backend rounds x and
 * the output's gradient to bf16 and widens y and x's gradient inside the kernels it runs anyway
 * (backend.h's conv2d_f32io), so no cast passes and no bf16 copies of the activations, with the
 * same bits. False (nothing done) where it does not apply: autocast off or not bf16 on x's
 * device, a trace or a capture running, x or w not float32, a backend without conv2d_f32io.
 * True with *y the result in the current scope, or NULL with the error recorded. */
bool tsi_conv2d_f32io(ts_tensor *x, ts_tensor *w, ts_conv2d_opts o, ts_tensor **y);

/* p's weight identity (weight_uid, _version, _offset) for the backend's caches when the call reads
 * w's own storage (wc: the contiguous tensor it reads) and that can't change under it: not being
 * trained, Tessera's own memory, not shared; left 0 otherwise (conv.c). */
void tsi_conv_weight_identity(const ts_tensor *w, const ts_tensor *wc, ts_conv2d_params *p);

#endif /* TS_NN_CONV_INTERNAL_H */
