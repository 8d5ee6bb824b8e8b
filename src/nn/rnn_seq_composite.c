/* rnn_seq_composite.c — the backward of rnn_seq_fused.c's node as public ops, for create_graph
 * (double backward through nn.LSTM / nn.GRU): the steps again from the saved inputs (xw made
 * again from its projection's inputs), then back to front each step's gate gradients by the
 * cells' formulas (backend/rnn_cell_math.h's derivatives), the recurrent weight's gradient a sum
 * over the steps. Every op records under create_graph, so the gradients are differentiable again.
 * A step back is rnn_step_back.c's; the state's gradient then goes on through W: LSTM
 * dh_prev = da W (a = xw_t + h W^T), GRU dh_prev = dh z + dgh W (gh = h W^T + b). */
#include <stdlib.h>

#include "nn/rnn_seq_fused.h"
#include "nn/rnn_step_back.h"

/* the saved input itself, or the kernels' copy where the input was that copy */
static ts_tensor *input_of(ts_node *n, int in_slot, int copy_slot) {
    return tsi_node_has_saved(n, in_slot) ? tsi_node_saved(n, in_slot)
                                          : tsi_node_saved(n, copy_slot);
}

static ts_tensor *add_or(ts_tensor *acc, ts_tensor *t) { return acc ? ts_add(acc, t) : t; }

void tsi_rnn_seq_backward_composite(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    const int64_t T = n->ip[0], B = n->ip[1], H = n->ip[2];
    const bool lstm = n->ip[3] != 0, reverse = n->ip[4] != 0;
    ts_tensor *w = input_of(n, TSI_RS_W_IN, TSI_RS_W), *h = input_of(n, TSI_RS_H0_IN, TSI_RS_H0);
    ts_tensor *c = lstm ? input_of(n, TSI_RS_C0_IN, TSI_RS_C0) : NULL;
    ts_tensor *b = tsi_node_has_saved(n, TSI_RS_B_IN) ? tsi_node_saved(n, TSI_RS_B_IN) : NULL;
    ts_tensor *xw = NULL;
    if (tsi_node_has_saved(n, TSI_RS_PX)) {
        ts_tensor *px = tsi_node_saved(n, TSI_RS_PX), *pw = tsi_node_saved(n, TSI_RS_PW);
        ts_tensor *pb = tsi_node_has_saved(n, TSI_RS_PB) ? tsi_node_saved(n, TSI_RS_PB) : NULL;
        ts_tensor *p =
            px && pw && (pb || !tsi_node_has_saved(n, TSI_RS_PB)) ? ts_linear(px, pw, pb) : NULL;
        xw = p ? ts_view(p, TS_SHAPE(T, B, p->shape.dims[1])) : NULL;
    } else {
        xw = tsi_node_saved(n, TSI_RS_XW_IN);
    }
    if (!w || !h || (lstm && !c) || (tsi_node_has_saved(n, TSI_RS_B_IN) && !b) || !xw) return;
    /* per step t: its input state, (LSTM) cell state and pre-activations, (GRU) projections */
    ts_tensor **st = calloc((size_t)(4 * T), sizeof *st);
    if (!st) {
        tsi_error_set(TS_ERR_OOM, "rnn_sequence_fused: out of host memory");
        return;
    }
    ts_tensor **hin = st, **cin = st + T, **pre = st + 2 * T, **xt = st + 3 * T;
    bool ok = true;
    for (int64_t k = 0; ok && k < T; k++) {
        const int64_t t = reverse ? T - 1 - k : k;
        hin[t] = h, cin[t] = c;
        xt[t] = ts_select(xw, 0, t);
        if (lstm) {
            pre[t] = ts_add(xt[t], ts_mm(h, ts_t(w)));
            ts_tensor *q[4] = {NULL, NULL, NULL, NULL};
            ok = ts_chunk(pre[t], 4, 1, q, 4) == 4;
            if (!ok) break;
            c = ts_add(ts_mul(ts_sigmoid(q[1]), c), ts_mul(ts_sigmoid(q[0]), ts_tanh(q[2])));
            h = ts_mul(ts_sigmoid(q[3]), ts_tanh(c));
        } else {
            pre[t] = b ? ts_linear(h, w, b) : ts_mm(h, ts_t(w));
            ts_tensor *xs[3] = {NULL, NULL, NULL}, *hs[3] = {NULL, NULL, NULL};
            ok = ts_chunk(xt[t], 3, 1, xs, 3) == 3 && ts_chunk(pre[t], 3, 1, hs, 3) == 3;
            if (!ok) break;
            ts_tensor *r = ts_sigmoid(ts_add(xs[0], hs[0])), *z = ts_sigmoid(ts_add(xs[1], hs[1]));
            ts_tensor *nn = ts_tanh(ts_add(xs[2], ts_mul(r, hs[2])));
            h = ts_add(nn, ts_mul(z, ts_sub(h, nn)));
        }
        ok = h && (!lstm || c);
    }
    /* back to front: the incoming gradients of the last state (zeros where none came) */
    const ts_opts o = {.dtype = w->dtype, .device = ts_device_of(w)};
    ts_tensor *dh = go[1] ? go[1] : ts_zeros(TS_SHAPE(B, H), o);
    ts_tensor *dc = lstm ? (go[2] ? go[2] : ts_zeros(TS_SHAPE(B, H), o)) : NULL;
    ts_tensor **dxw = st + 2 * T; /* pre[t] is done with once step t is back */
    ts_tensor *dw = NULL, *db = NULL;
    for (int64_t k = T - 1; ok && k >= 0; k--) {
        const int64_t t = reverse ? T - 1 - k : k;
        ts_tensor *dht = go[0] ? ts_add(dh, ts_select(go[0], 0, t)) : dh, *dg = NULL;
        if (lstm) {
            ts_tensor *dc_prev = NULL;
            dg = tsi_lstm_step_back(pre[t], cin[t], dht, dc, &dc_prev);
            dxw[t] = dg;
            dh = dg ? ts_mm(dg, w) : NULL;
            dc = dc_prev;
        } else {
            ts_tensor *direct = tsi_gru_step_back(xt[t], pre[t], hin[t], dht, &dxw[t], &dg);
            dh = direct && dg ? ts_add(direct, ts_mm(dg, w)) : NULL;
            if (dg && tsi_node_needs(n, TSI_RS_I_B)) db = add_or(db, ts_sum_dim(dg, 0, false));
        }
        ok = dg && dxw[t] && dh && (!lstm || dc);
        if (ok && tsi_node_needs(n, TSI_RS_I_W)) dw = add_or(dw, ts_mm(ts_t(dg), hin[t]));
    }
    if (ok) {
        if (tsi_node_needs(n, TSI_RS_I_XW)) gi[TSI_RS_I_XW] = ts_stack(dxw, (int)T, 0);
        gi[TSI_RS_I_W] = dw;
        gi[TSI_RS_I_B] = db;
        if (tsi_node_needs(n, TSI_RS_I_H0)) gi[TSI_RS_I_H0] = dh;
        if (lstm && tsi_node_needs(n, TSI_RS_I_C0)) gi[TSI_RS_I_C0] = dc;
    }
    free(st);
}
