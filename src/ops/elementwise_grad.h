/* elementwise_grad.h — the elementwise ops' backward functions and what recording and backward
 * share: the layout of their nodes and which tensors each op saves. */
#ifndef TS_OPS_ELEMENTWISE_GRAD_H
#define TS_OPS_ELEMENTWISE_GRAD_H

#include "autograd/autograd.h"
#include "ops/elementwise.h"

/* Every elementwise node: ip[0] the op (ts_unary_op or ts_binary_op), ip[1] whether the output is
 * saved, p[0] and p[1] its numbers (clamp bounds, the scalar, add's alpha). Saved-tensor slots: */
enum { TSI_EW_SLOT_A, TSI_EW_SLOT_B, TSI_EW_SLOT_OUT, TSI_EW_SLOTS };
/* What a node saves: the first operand (a clone of it for in-place ops), the second operand (or the
 * condition / mask), the output. */
enum { TSI_EW_SAVE_A = 1, TSI_EW_SAVE_B = 2, TSI_EW_SAVE_OUT = 4 };

/* PyTorch's grad_fn name ("ExpBackward0"; NULL: not differentiable) and the saves of each op. The
 * backward functions fetch exactly these, so recording and backward cannot disagree. */
const char *tsi_ew_unary_name(const char *op, ts_unary_op u);
unsigned tsi_ew_unary_saves(ts_unary_op u);
const char *tsi_ew_binary_name(ts_binary_op bop);
unsigned tsi_ew_binary_saves(ts_binary_op bop, bool need_a, bool need_b);
const char *tsi_ew_scalar_name(ts_binary_op bop);
unsigned tsi_ew_scalar_saves(ts_binary_op bop, double s);

void tsi_ew_unary_backward(ts_node *n, ts_tensor *const *grad_out, ts_tensor **grad_in);
void tsi_ew_binary_backward(ts_node *n, ts_tensor *const *grad_out, ts_tensor **grad_in);
void tsi_ew_scalar_backward(ts_node *n, ts_tensor *const *grad_out, ts_tensor **grad_in);
void tsi_ew_where_backward(ts_node *n, ts_tensor *const *grad_out, ts_tensor **grad_in);
void tsi_ew_masked_fill_backward(ts_node *n, ts_tensor *const *grad_out, ts_tensor **grad_in);

/* issue 52's activations (elementwise_grad_act.c): whether u is one, its PyTorch name (in place:
 * the op name ends in '_'), and its input's gradient from g, the saved input x and the node's
 * numbers (NULL: not one of them) */
bool tsi_ew_act_is(ts_unary_op u);
const char *tsi_ew_act_name(const char *op, ts_unary_op u);
ts_tensor *tsi_ew_act_backward(ts_unary_op u, ts_tensor *g, ts_tensor *x, double p0, double p1);

/* g as the gradient of input i: summed over broadcast dims to its shape, cast to its dtype, moved
 * to its device (a 0-dim cpu operand of a sim op gets a cpu gradient). NULL passes through. */
ts_tensor *tsi_ew_grad_fit(const ts_node *n, int i, ts_tensor *g);
/* A 0-dim zero with like's dtype on like's device: the cheap "else" operand of a where. */
ts_tensor *tsi_ew_grad_zero(ts_tensor *like);

#endif /* TS_OPS_ELEMENTWISE_GRAD_H */
