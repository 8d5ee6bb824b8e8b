/* rnn_seq_loop.h — the step loop of one direction of an LSTM / GRU layer (ts_rnn_seq_args,
 * backend.h) over the rows [r0, r1) of the batch, as calls of a backend's matmul, matmul_bias,
 * binary, copy and rnn_cell_* entries. The rows are independent sequences: the front end
 * (src/nn/rnn_seq_fused.c) runs it over every row on any backend; the CPU's rnn_seq entries
 * (kern_rnn_cell.c) give each thread its own rows, which then run through all the steps with no
 * synchronisation between threads. */
#ifndef TS_BACKEND_RNN_SEQ_LOOP_H
#define TS_BACKEND_RNN_SEQ_LOOP_H

#include "backend/backend.h"

/* [rows, cols] of v's dense elements from element off */
static inline ts_kview tsi_rs_mat(const ts_kview *v, int64_t off, int64_t rows, int64_t cols) {
    ts_kview m = {.data = v->data ? v->data + off * (int64_t)ts_dtype_size(v->dtype) : NULL,
                  .dtype = v->dtype,
                  .ndim = 2};
    for (int i = 0; i < TS_MAX_DIMS; i++) m.shape[i] = 1, m.strides[i] = 0;
    m.shape[0] = rows, m.shape[1] = cols, m.strides[0] = cols, m.strides[1] = 1;
    return m;
}

/* out [M, N] = a [M, K] @ w^T (w [N, K], wt) or a @ w (w [K, N]), + bias [N] when present: mm's
 * (linear's) kernel calls */
static inline void tsi_rs_product(const ts_backend *be, int index, ts_kview out, ts_kview a,
                                  ts_kview w, bool wt, const ts_kview *bias) {
    const int64_t m = a.shape[0], k = a.shape[1], n = out.shape[1];
    a.ndim = w.ndim = out.ndim = 3;
    a.shape[0] = w.shape[0] = out.shape[0] = 1;
    a.strides[0] = w.strides[0] = out.strides[0] = 0;
    a.shape[1] = m, a.shape[2] = k, a.strides[1] = k, a.strides[2] = 1;
    w.shape[1] = k, w.shape[2] = n, w.strides[1] = wt ? 1 : n, w.strides[2] = wt ? k : 1;
    out.shape[1] = m, out.shape[2] = n, out.strides[1] = n, out.strides[2] = 1;
    if (bias && bias->data)
        be->matmul_bias(be, index, &out, &a, &w, bias);
    else
        be->matmul(be, index, &out, &a, &w);
}

static inline void tsi_rnn_seq_fwd_rows(const ts_backend *be, int index, const ts_rnn_seq_args *a,
                                        int64_t r0, int64_t r1) {
    const int64_t T = a->steps, B = a->rows, H = a->hidden, m = r1 - r0;
    const int64_t GH = (a->lstm ? 4 : 3) * H, S = GH + H;
    const ts_kview kw = tsi_rs_mat(&a->w, 0, GH, H), kg = tsi_rs_mat(&a->gh, r0 * GH, m, GH);
    for (int64_t k = 0; k < T; k++) {
        const int64_t s = a->reverse ? T - 1 - k : k, sp = a->reverse ? s + 1 : s - 1;
        const ts_kview hprev =
            k ? tsi_rs_mat(&a->y, (sp * B + r0) * H, m, H) : tsi_rs_mat(&a->h0, r0 * H, m, H);
        tsi_rs_product(be, index, kg, hprev, kw, true, &a->bias);
        ts_rnn_cell_args c = {.xw = tsi_rs_mat(&a->xw, (s * B + r0) * GH, m, GH),
                              .gh = kg,
                              .state = !a->lstm ? hprev
                                       : k      ? tsi_rs_mat(&a->cells, (sp * B + r0) * H, m, H)
                                                : tsi_rs_mat(&a->c0, r0 * H, m, H),
                              .h = tsi_rs_mat(&a->y, (s * B + r0) * H, m, H),
                              .c = tsi_rs_mat(&a->cells, (s * B + r0) * H, m, H),
                              .saved = tsi_rs_mat(&a->saved, (s * B + r0) * S, m, S),
                              .rows = m,
                              .hidden = H,
                              .lstm = a->lstm};
        be->rnn_cell_forward(be, index, &c);
    }
}

static inline void tsi_rnn_seq_bwd_rows(const ts_backend *be, int index, const ts_rnn_seq_args *a,
                                        int64_t r0, int64_t r1) {
    const int64_t T = a->steps, B = a->rows, H = a->hidden, m = r1 - r0;
    const bool lstm = a->lstm;
    const int64_t GH = (lstm ? 4 : 3) * H, S = GH + H;
    const bool want_h0 = a->dh0.data != NULL, want_c0 = lstm && a->dc0.data != NULL;
    const ts_kview kw = tsi_rs_mat(&a->w, 0, GH, H), none = {.dtype = a->saved.dtype};
    /* scratch rows: a step's whole dh, the product's, the GRU's through z and the sum, the
     * LSTM's running dc (two, in turns) */
    ts_kview wk[6];
    for (int i = 0; i < 6; i++) wk[i] = tsi_rs_mat(&a->work, (i * B + r0) * H, m, H);
    const ts_kview *dht = &wk[0], *dhm = &wk[1], *dhp = &wk[2], *dhs = &wk[3];
    ts_kview dh_run = tsi_rs_mat(&a->dhn, r0 * H, m, H), dc_run = tsi_rs_mat(&a->dcn, r0 * H, m, H);
    int dc_slot = 4;
    for (int64_t k = T - 1; k >= 0; k--) {
        const int64_t t = a->reverse ? T - 1 - k : k, tp = a->reverse ? t + 1 : t - 1;
        ts_kview dh = dh_run;
        if (a->dy.data) { /* the output's gradient + the later steps' (the engine's sum) */
            const ts_kview dyt = tsi_rs_mat(&a->dy, (t * B + r0) * H, m, H);
            if (dh_run.data)
                be->binary(be, index, TS_B_ADD, dht, &dyt, &dh_run), dh = *dht;
            else
                dh = dyt;
        }
        const bool more = k > 0 || want_h0 || want_c0; /* the previous state's gradient */
        const ts_kview dgate = tsi_rs_mat(lstm ? &a->dxw : &a->dgh, (t * B + r0) * GH, m, GH);
        ts_rnn_cell_args c = {.saved = tsi_rs_mat(&a->saved, (t * B + r0) * S, m, S),
                              .state =
                                  k ? tsi_rs_mat(lstm ? &a->cells : &a->y, (tp * B + r0) * H, m, H)
                                    : tsi_rs_mat(lstm ? &a->c0 : &a->h0, r0 * H, m, H),
                              .dh = dh,
                              .dc = lstm ? dc_run : none,
                              .dxw = tsi_rs_mat(&a->dxw, (t * B + r0) * GH, m, GH),
                              .dgh = lstm ? none : dgate,
                              .dstate = !more  ? none
                                        : lstm ? wk[dc_slot]
                                               : *dhp,
                              .rows = m,
                              .hidden = H,
                              .lstm = lstm};
        be->rnn_cell_backward(be, index, &c);
        if (lstm && more) dc_run = wk[dc_slot], dc_slot = 9 - dc_slot;
        if (k == 0 && !want_h0) break;
        tsi_rs_product(be, index, *dhm, dgate, kw, false, NULL);
        if (lstm) {
            dh_run = *dhm;
        } else { /* h's gradient through the product and through z */
            be->binary(be, index, TS_B_ADD, dhs, dhm, dhp);
            dh_run = *dhs;
        }
    }
    if (want_h0) {
        const ts_kview d = tsi_rs_mat(&a->dh0, r0 * H, m, H);
        be->copy(be, index, &d, &dh_run);
    }
    if (want_c0) {
        const ts_kview d = tsi_rs_mat(&a->dc0, r0 * H, m, H);
        be->copy(be, index, &d, &dc_run);
    }
}

#endif /* TS_BACKEND_RNN_SEQ_LOOP_H */
