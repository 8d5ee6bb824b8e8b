/* rnn_step_back.h — one LSTM / GRU step's gradients as public ops (rnn_step_back.c; internal),
 * for the composite backwards of the fused cells and sequence under create_graph. */
#ifndef TS_NN_RNN_STEP_BACK_H
#define TS_NN_RNN_STEP_BACK_H

#include "core/internal.h"

/* LSTM: a [B, 4H] the step's pre-activations (gates i, f, g, o), c [B, H] its input cell state,
 * dh, dc the gradients of its outputs h' = o tanh(c'), c' = f c + i g. Returns da [B, 4H] (the
 * gradient of a), *dc_prev that of c. Scope-owned; NULL with the error set. */
ts_tensor *tsi_lstm_step_back(ts_tensor *a, ts_tensor *c, ts_tensor *dh, ts_tensor *dc,
                              ts_tensor **dc_prev);

/* GRU: xw, gh [B, 3H] the step's two projections (gates r, z, n), h [B, H] its input state, dh
 * the gradient of h' = n + z (h - n). *dxw, *dgh the gradients of xw and gh; returns the part of
 * h's gradient that does not go through gh (dh z). Scope-owned; NULL with the error set. */
ts_tensor *tsi_gru_step_back(ts_tensor *xw, ts_tensor *gh, ts_tensor *h, ts_tensor *dh,
                             ts_tensor **dxw, ts_tensor **dgh);

#endif /* TS_NN_RNN_STEP_BACK_H */
