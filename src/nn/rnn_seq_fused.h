/* rnn_seq_fused.h — one direction of one nn.LSTM / nn.GRU layer over the whole sequence as one op
 * with one autograd node (rnn_seq_fused.c; internal). */
#ifndef TS_NN_RNN_SEQ_FUSED_H
#define TS_NN_RNN_SEQ_FUSED_H

#include "core/internal.h"

/* Whether the sequence op takes these tensors: those of the fused step (tsi_rnn_cell_fused_takes:
 * float32 / float64, one device with the cell kernels, no ONNX trace), w_hh (and b_hh) of that
 * dtype and device, and a backend with matmul (and matmul_bias where b_hh is given). Sets no
 * error; false: run the steps one op at a time. */
bool tsi_rnn_seq_fused_takes(ts_tensor *xw, ts_tensor *w_hh, ts_tensor *b_hh, ts_tensor *h0,
                             ts_tensor *c0);

/* The steps of one direction: xw [T, B, G*H] (the input projection of every step with its bias;
 * the LSTM's also with b_hh, G = 4; the GRU's G = 3), w_hh [G*H, H], b_hh [G*H] or NULL (the GRU's
 * hidden bias, which its n gate needs apart), h0 [B, H], c0 [B, H] (LSTM; NULL for the GRU);
 * reverse: the steps from T - 1 down to 0. Each step is the product h w_hh^T (+ b_hh) and the
 * fused gates (the backend's rnn_cell_forward), writing its state straight into *y [T, B, H];
 * *hn (*cn) the last state. One node (RnnSequenceBackward0) gives the gradients of xw, w_hh, b_hh,
 * h0 and c0: the steps' gates backward to front, w_hh's (b_hh's) as one product (sum) over the
 * T * B rows. Outputs scope-owned; false with the error set. */
bool tsi_rnn_seq_fused(bool lstm, ts_tensor *xw, ts_tensor *w_hh, ts_tensor *b_hh, ts_tensor *h0,
                       ts_tensor *c0, bool reverse, ts_tensor **y, ts_tensor **hn, ts_tensor **cn);

#endif /* TS_NN_RNN_SEQ_FUSED_H */
