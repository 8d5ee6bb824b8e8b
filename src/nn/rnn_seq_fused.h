/* rnn_seq_fused.h — one direction of one nn.LSTM / nn.GRU layer over the whole sequence as one op
 * with one autograd node (rnn_seq_fused.c; internal). */
#ifndef TS_NN_RNN_SEQ_FUSED_H
#define TS_NN_RNN_SEQ_FUSED_H

#include "autograd/autograd.h"
#include "core/internal.h"

/* Whether the sequence op takes these tensors: those of the fused step (tsi_rnn_cell_fused_takes:
 * float32 / float64, one device with the cell kernels, no ONNX trace), w_hh (and b_hh) of that
 * dtype and device, and a backend with matmul (and matmul_bias where b_hh is given). Sets no
 * error; false: run the steps one op at a time. */
bool tsi_rnn_seq_fused_takes(ts_tensor *xw, ts_tensor *w_hh, ts_tensor *b_hh, ts_tensor *h0,
                             ts_tensor *c0);

/* How xw was made: linear(x, w_ih, b) [T * B, G*H] viewed as [T, B, G*H]. Under create_graph the
 * node's backward makes xw again from these (which the projection's own node keeps) rather than
 * keeping xw itself for a second derivative that most runs never take. */
typedef struct tsi_rnn_proj {
    ts_tensor *x, *w_ih, *b;
} tsi_rnn_proj;

/* The node's saved slots: the kernels' saved gates and cell states, their copies of h0, c0 and
 * w_hh, the output; then for the composite backward (create_graph): the inputs themselves where
 * the kernels read copies, b_hh, and xw or its projection (proj). */
enum {
    TSI_RS_SAVED,
    TSI_RS_CELLS,
    TSI_RS_H0,
    TSI_RS_C0,
    TSI_RS_W,
    TSI_RS_OUT,
    TSI_RS_H0_IN,
    TSI_RS_C0_IN,
    TSI_RS_W_IN,
    TSI_RS_B_IN,
    TSI_RS_XW_IN,
    TSI_RS_PX,
    TSI_RS_PW,
    TSI_RS_PB,
    TSI_RS_N
};
/* the node's inputs */
enum { TSI_RS_I_XW, TSI_RS_I_W, TSI_RS_I_B, TSI_RS_I_H0, TSI_RS_I_C0, TSI_RS_N_IN };

/* The node's backward as public ops (rnn_seq_composite.c), under create_graph: the steps again
 * from the saved inputs, then back to front each step's gate gradients by the formulas of the
 * cells, so the gradients' own graph is recorded and the node is differentiable again. */
void tsi_rnn_seq_backward_composite(ts_node *n, ts_tensor *const *go, ts_tensor **gi);

/* The steps of one direction: xw [T, B, G*H] (the input projection of every step with its bias;
 * the LSTM's also with b_hh, G = 4; the GRU's G = 3), w_hh [G*H, H], b_hh [G*H] or NULL (the GRU's
 * hidden bias, which its n gate needs apart), h0 [B, H], c0 [B, H] (LSTM; NULL for the GRU);
 * reverse: the steps from T - 1 down to 0. Each step is the product h w_hh^T (+ b_hh) and the
 * fused gates (the backend's rnn_cell_forward), writing its state straight into *y [T, B, H];
 * *hn (*cn) the last state. One node (RnnSequenceBackward0) gives the gradients of xw, w_hh, b_hh,
 * h0 and c0: the steps' gates backward to front, w_hh's (b_hh's) as one product (sum) over the
 * T * B rows (under create_graph tsi_rnn_seq_backward_composite). proj: how xw was made, or NULL
 * (the node then keeps xw). Outputs scope-owned; false with the error set. */
bool tsi_rnn_seq_fused(bool lstm, ts_tensor *xw, ts_tensor *w_hh, ts_tensor *b_hh, ts_tensor *h0,
                       ts_tensor *c0, bool reverse, const tsi_rnn_proj *proj, ts_tensor **y,
                       ts_tensor **hn, ts_tensor **cn);

#endif /* TS_NN_RNN_SEQ_FUSED_H */
