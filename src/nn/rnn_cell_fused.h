/* rnn_cell_fused.h — one LSTM / GRU time step's gates as one op with one autograd node
 * (rnn_cell_fused.c), through the backend's rnn_cell_forward / rnn_cell_backward (internal). */
#ifndef TS_NN_RNN_CELL_FUSED_H
#define TS_NN_RNN_CELL_FUSED_H

#include "core/internal.h"

/* Whether the fused step takes these tensors (gh may be NULL for the LSTM): float32 or float64,
 * one dtype, one device whose backend has the kernels, and no ONNX trace recording (export sees
 * the composed ops). Sets no error; false: compose the gates of tensor ops. */
bool tsi_rnn_cell_fused_takes(ts_tensor *xw, ts_tensor *gh, ts_tensor *state);

/* How a step's xw and gh were made: xw = linear(x, w_ih, b_ih), gh = h w_hh^T (+ b_hh), b_ih and
 * b_hh may be NULL, w_hh NULL for an LSTM step without gh. Under create_graph the step's node
 * makes them again from these (which the products' own nodes keep) and differentiates the gates
 * as public ops (rnn_step_back.h), so its gradients are differentiable again. Without one (the
 * layers' steps, whose products take a detached w_hh whose gradient the weight sink gives) the
 * node's gradients carry a DelayedError under create_graph. */
typedef struct tsi_rnn_cell_recipe {
    ts_tensor *x, *w_ih, *b_ih, *h, *w_hh, *b_hh;
} tsi_rnn_cell_recipe;

/* One LSTM step's gates: xw, gh [B, 4H] (the pre-activations are xw + gh, gates i, f, g, o as
 * PyTorch's; gh may be NULL), c_prev [B, H], z [B, 4H] or NULL (a value never read whose
 * gradient is gh's: tsi_rnn_weight_sink) -> *h = o tanh(c), *c = f c_prev + i g, both [B, H],
 * scope-owned, differentiable (one node, ThnnFusedLstmCellBackward0). false with the error set
 * (TS_ERR_ARG, TS_ERR_SHAPE, TS_ERR_DTYPE for a dtype other than float32 / float64 or mixed
 * dtypes, TS_ERR_DEVICE, TS_ERR_UNSUPPORTED on a device without the kernels, TS_ERR_OOM) and both
 * NULL otherwise. */
bool tsi_lstm_cell_fused(ts_tensor *xw, ts_tensor *gh, ts_tensor *c_prev, ts_tensor *z,
                         ts_tensor **h, ts_tensor **c);
/* the same with the recipe of xw and gh (NULL: as tsi_lstm_cell_fused); z must be NULL with one */
bool tsi_lstm_cell_fused_ex(ts_tensor *xw, ts_tensor *gh, ts_tensor *c_prev, ts_tensor *z,
                            const tsi_rnn_cell_recipe *recipe, ts_tensor **h, ts_tensor **c);

/* One GRU step: xw [B, 3H] (the input projection with b_ih), gh [B, 3H] (h_prev W_hh^T + b_hh),
 * h_prev [B, H], z [B, 3H] or NULL (as the LSTM's) -> h = n + z (h_prev - n) with r = sigmoid(x_r +
 * h_r), z = sigmoid(x_z + h_z), n = tanh(x_n + r h_n); scope-owned, differentiable
 * (ThnnFusedGruCellBackward0). NULL with the errors above. */
ts_tensor *tsi_gru_cell_fused(ts_tensor *xw, ts_tensor *gh, ts_tensor *h_prev, ts_tensor *z);
ts_tensor *tsi_gru_cell_fused_ex(ts_tensor *xw, ts_tensor *gh, ts_tensor *h_prev, ts_tensor *z,
                                 const tsi_rnn_cell_recipe *recipe);

/* The recurrent weight's gradient over a whole sequence as one product (rnn.c). The sink is a
 * [T, B, G*H] tensor (G*H = w_hh's rows): with `through` NULL one whose values are never read,
 * whose slice z_t, given to step t's fused op, receives that step's gh gradient; with `through`
 * [T, B, G*H] (the LSTM's input projection, whose gradient is every step's gh gradient) an alias
 * of it that passes its gradient on. The sink's backward turns those gradients into w_hh's (and
 * b_hh's, b_hh NULL: none) with the steps' input states given by tsi_rnn_weight_sink_states
 * (h_in[t]: the state step t multiplied, [B, Hin]) once the steps ran; the steps then multiply by
 * a detached w_hh (and add a detached b_hh). *sink NULL when neither needs a gradient; false with
 * the error set when it cannot be made. */
bool tsi_rnn_weight_sink(ts_tensor *w_hh, ts_tensor *b_hh, ts_tensor *through, int64_t T, int64_t B,
                         ts_tensor **sink);
bool tsi_rnn_weight_sink_states(ts_tensor *sink, ts_tensor *const *h_in, int64_t T);

#endif /* TS_NN_RNN_CELL_FUSED_H */
