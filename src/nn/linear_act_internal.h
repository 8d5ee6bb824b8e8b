/* linear_act_internal.h — what the MLP node (mlp_fused.c) shares with Linear + activation's
 * (linear_act_fused.c): the slot's forward call and the activation's gradient. Not public. */
#ifndef TS_NN_LINEAR_ACT_INTERNAL_H
#define TS_NN_LINEAR_ACT_INTERNAL_H

#include "tessera.h"

/* Whether matmul_bias_act may take act(x @ w^T + b) (relu or gelu_tanh, one float dtype and
 * device, x of >= 2 dims, nothing empty; x, w, b already of the lower dtype under autocast). */
bool tsi_linear_act_takes(ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_activation act);
/* The slot's call for x2 [rows, in], with no node: act(x2 @ w^T + b), and with want_aux *aux the
 * activation's saved state (ts_epi_aux): gelu_tanh's pre-activation [rows, out] (a view, rows ld
 * elements apart), relu's bit mask [rows, ld / 8] of TS_U8. NULL with *declined set where the
 * backend declines (nothing written, the op's profile ended), NULL alone out of memory (recorded).
 */
ts_tensor *tsi_linear_act_slot(ts_tensor *x2, ts_tensor *w, ts_tensor *b, ts_activation act,
                               bool want_aux, ts_tensor **aux, bool *declined);
/* g times the activation's derivative at s (relu: its output; gelu_tanh: its input), as the
 * composition's nodes compute it (a backward: grad mode off). */
ts_tensor *tsi_linear_act_grad(ts_activation act, ts_tensor *s, ts_tensor *g);
/* linear_fused.c: AddmmBackward0's gradients of x @ w^T + b for g (2-D), those asked for (a NULL
 * pointer: not wanted): *gx = g w, *gw = g^T x, *gb = g summed to bshape; *gw and *gb from the
 * backend's matmul_bgrad where both are wanted and no graph is recorded. */
void tsi_linear_grads(ts_tensor *g, ts_tensor *x, ts_tensor *w, ts_shape bshape, ts_tensor **gx,
                      ts_tensor **gw, ts_tensor **gb);
/* Under create_graph: g times the derivative of act at x @ w^T + b, recomputed with public ops (a
 * graph reaching x, w, b and g). */
ts_tensor *tsi_linear_act_grad_graph(ts_activation act, ts_tensor *x, ts_tensor *w, ts_tensor *b,
                                     ts_tensor *g);

#endif /* TS_NN_LINEAR_ACT_INTERNAL_H */
