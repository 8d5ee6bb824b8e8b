/* rnn_step_back.c — one LSTM / GRU step's gradients as public ops (rnn_step_back.h), the
 * derivatives of backend/rnn_cell_math.h's formulas, so that under create_graph they record the
 * gradient's own graph.
 *
 * LSTM (gates i, f, g, o of a): c' = f c + i g, h' = o tanh(c'); with dh, dc the incoming
 * gradients of h', c': dc~ = dc + dh o (1 - tanh(c')^2), da = [dc~ g i (1 - i),
 * dc~ c f (1 - f), dc~ i (1 - g^2), dh tanh(c') o (1 - o)], dc_prev = dc~ f.
 * GRU (r, z = sigmoid(xw + gh) over the first 2H; n = tanh(xw_n + r gh_n); h' = n + z (h - n)):
 * dn = dh (1 - z) (1 - n^2), dr = dn gh_n r (1 - r), dz = dh (h - n) z (1 - z);
 * dxw = [dr, dz, dn], dgh = [dr, dz, dn r], and h's direct part dh z. */
#include "nn/rnn_step_back.h"

/* s (1 - s): the sigmoid's derivative from its value */
static ts_tensor *dsigmoid(ts_tensor *s) { return ts_mul(s, ts_rsub_scalar(s, 1)); }
/* 1 - t^2: tanh's derivative from its value */
static ts_tensor *dtanh(ts_tensor *t) { return ts_rsub_scalar(ts_mul(t, t), 1); }

/* One LSTM step back: a [B, 4H] its pre-activations, c its input cell state; dh, dc the
 * gradients of its outputs. Returns da; *dc_prev. */
ts_tensor *tsi_lstm_step_back(ts_tensor *a, ts_tensor *c, ts_tensor *dh, ts_tensor *dc,
                              ts_tensor **dc_prev) {
    ts_tensor *q[4] = {NULL, NULL, NULL, NULL};
    if (ts_chunk(a, 4, 1, q, 4) != 4) return NULL;
    ts_tensor *i = ts_sigmoid(q[0]), *f = ts_sigmoid(q[1]), *g = ts_tanh(q[2]),
              *o = ts_sigmoid(q[3]);
    ts_tensor *tc = ts_tanh(ts_add(ts_mul(f, c), ts_mul(i, g)));
    ts_tensor *dct = ts_add(dc, ts_mul(ts_mul(dh, o), dtanh(tc)));
    ts_tensor *da[4] = {ts_mul(ts_mul(dct, g), dsigmoid(i)), ts_mul(ts_mul(dct, c), dsigmoid(f)),
                        ts_mul(ts_mul(dct, i), dtanh(g)), ts_mul(ts_mul(dh, tc), dsigmoid(o))};
    *dc_prev = ts_mul(dct, f);
    return ts_cat(da, 4, 1);
}

/* One GRU step back: xw, gh [B, 3H] its two projections, h its input state, dh the gradient of
 * its output. *dxw, *dgh; returns dh's direct part dh z. */
ts_tensor *tsi_gru_step_back(ts_tensor *xw, ts_tensor *gh, ts_tensor *h, ts_tensor *dh,
                             ts_tensor **dxw, ts_tensor **dgh) {
    ts_tensor *xs[3] = {NULL, NULL, NULL}, *hs[3] = {NULL, NULL, NULL};
    if (ts_chunk(xw, 3, 1, xs, 3) != 3 || ts_chunk(gh, 3, 1, hs, 3) != 3) return NULL;
    ts_tensor *r = ts_sigmoid(ts_add(xs[0], hs[0])), *z = ts_sigmoid(ts_add(xs[1], hs[1]));
    ts_tensor *nn = ts_tanh(ts_add(xs[2], ts_mul(r, hs[2])));
    ts_tensor *dn = ts_mul(ts_mul(dh, ts_rsub_scalar(z, 1)), dtanh(nn));
    ts_tensor *dr = ts_mul(ts_mul(dn, hs[2]), dsigmoid(r));
    ts_tensor *dz = ts_mul(ts_mul(dh, ts_sub(h, nn)), dsigmoid(z));
    ts_tensor *px[3] = {dr, dz, dn}, *ph[3] = {dr, dz, ts_mul(dn, r)};
    *dxw = ts_cat(px, 3, 1);
    *dgh = ts_cat(ph, 3, 1);
    return ts_mul(dh, z);
}
