/* rnn_seq_fused.c — one direction of one nn.LSTM / nn.GRU layer over the whole sequence as one op
 * (rnn.c's run_direction, where the gates are fused and no lengths or projection are given): the
 * steps' products and fused gates are backend calls on slices of a few sequence-long buffers, the
 * way PyTorch's CPU and cuDNN layers run, instead of a dozen tensors, views and autograd nodes a
 * step. The states go straight into the output [T, B, H] (no stack of the steps' outputs); the
 * backward, one node, walks the steps back to front writing every step's gate gradient into one
 * [T, B, G*H] buffer (the input projection's gradient, with no concatenation of per-step slices),
 * adds the output's gradient to the recurrent one in place of the engine's accumulation, and makes
 * w_hh's gradient ONE product over the T * B rows (b_hh's one sum), as the weight sink of
 * rnn_cell_fused.c does for the step-by-step path. The arithmetic is that path's: the same kernels
 * (mm's and linear's products, the fused gates, the add), in the same order. Under create_graph
 * the backward is rnn_seq_composite.c's public ops instead. */
#include "nn/rnn_seq_fused.h"
#include "autograd/autograd.h"
#include "backend/rnn_seq_loop.h"
#include "nn/rnn_cell_fused.h"

static const char *const OP = "rnn_sequence_fused";

/* a contiguous [rows, cols] view of t's elements from element off */
static ts_kview mat(const ts_tensor *t, int64_t off, int64_t rows, int64_t cols) {
    const ts_kview v = tsi_kview(t);
    return tsi_rs_mat(&v, off, rows, cols);
}

static ts_kview view_or_absent(ts_tensor *t, ts_dtype dt) {
    return t ? tsi_kview(t) : (ts_kview){.dtype = dt};
}

bool tsi_rnn_seq_fused_takes(ts_tensor *xw, ts_tensor *w_hh, ts_tensor *b_hh, ts_tensor *h0,
                             ts_tensor *c0) {
    if (!xw || !w_hh || !h0 || !tsi_rnn_cell_fused_takes(xw, NULL, c0 ? c0 : h0)) return false;
    ts_tensor *more[3] = {w_hh, b_hh, h0};
    const ts_device dev = tsi_device(xw);
    for (int i = 0; i < 3; i++)
        if (more[i] && (more[i]->dtype != xw->dtype || !tsi_device_eq(tsi_device(more[i]), dev)))
            return false;
    const ts_backend *be = tsi_be(xw);
    return be->matmul && be->binary && be->copy && (!b_hh || be->matmul_bias);
}

/* ------------------------------------------------------------------ backward */
/* the gradient of an output in the kernels' form (contiguous, dtype dt); NULL stays NULL */
static ts_tensor *grad_arg(ts_tensor *g, ts_dtype dt, bool *ok) {
    if (!g || !*ok) return NULL;
    ts_tensor *c = tsi_cast(OP, g, dt);
    ts_tensor *r = c ? tsi_contiguous(OP, c) : NULL;
    ts_release(c);
    *ok = r != NULL;
    return r;
}

enum { S_SAVED = TSI_RS_SAVED, S_CELLS = TSI_RS_CELLS, S_H0 = TSI_RS_H0, S_C0 = TSI_RS_C0 };
enum { S_W = TSI_RS_W, S_OUT = TSI_RS_OUT, N_SAVED = TSI_RS_N };
enum { I_XW = TSI_RS_I_XW, I_W = TSI_RS_I_W, I_B = TSI_RS_I_B, I_H0 = TSI_RS_I_H0 };
enum { I_C0 = TSI_RS_I_C0, N_IN = TSI_RS_N_IN };

static void seq_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (tsi_create_graph_active()) {
        tsi_rnn_seq_backward_composite(n, go, gi);
        return;
    }
    const int64_t T = n->ip[0], B = n->ip[1], H = n->ip[2];
    const bool lstm = n->ip[3] != 0, reverse = n->ip[4] != 0;
    const int64_t GH = (lstm ? 4 : 3) * H, BH = B * H;
    ts_tensor *sv = tsi_node_saved(n, S_SAVED), *cs = lstm ? tsi_node_saved(n, S_CELLS) : NULL;
    ts_tensor *h0 = tsi_node_saved(n, S_H0), *c0 = lstm ? tsi_node_saved(n, S_C0) : NULL;
    ts_tensor *w = tsi_node_saved(n, S_W), *y = tsi_node_saved(n, S_OUT);
    if (!sv || !h0 || !w || !y || (lstm && (!cs || !c0))) return;
    const ts_dtype dt = sv->dtype;
    const ts_device dev = tsi_device(sv);
    bool ok = true;
    ts_tensor *dy = grad_arg(go[0], dt, &ok), *dhn = grad_arg(go[1], dt, &ok),
              *dcn = lstm ? grad_arg(go[2], dt, &ok) : NULL;
    const bool want_h0 = tsi_node_needs(n, I_H0), want_c0 = lstm && tsi_node_needs(n, I_C0);
    ts_tensor *dx = ok ? tsi_new(OP, TS_SHAPE(T, B, GH), dt, dev) : NULL;
    ts_tensor *dg = dx && !lstm ? tsi_new(OP, TS_SHAPE(T, B, GH), dt, dev) : NULL;
    ts_tensor *work = dx && (lstm || dg) ? tsi_new(OP, TS_SHAPE(6, B, H), dt, dev) : NULL;
    ts_tensor *dh0 = work && want_h0 ? tsi_new(OP, TS_SHAPE(B, H), dt, dev) : NULL;
    ts_tensor *dc0 = work && want_c0 ? tsi_new(OP, TS_SHAPE(B, H), dt, dev) : NULL;
    ok = work && (!want_h0 || dh0) && (!want_c0 || dc0);
    if (ok) {
        const ts_backend *be = tsi_be(sv);
        const int index = tsi_dev_index(sv);
        const ts_rnn_seq_args a = {.w = tsi_kview(w),
                                   .h0 = tsi_kview(h0),
                                   .c0 = view_or_absent(c0, dt),
                                   .y = tsi_kview(y),
                                   .cells = view_or_absent(cs, dt),
                                   .saved = tsi_kview(sv),
                                   .dy = view_or_absent(dy, dt),
                                   .dhn = view_or_absent(dhn, dt),
                                   .dcn = view_or_absent(dcn, dt),
                                   .dxw = tsi_kview(dx),
                                   .dgh = view_or_absent(dg, dt),
                                   .dh0 = view_or_absent(dh0, dt),
                                   .dc0 = view_or_absent(dc0, dt),
                                   .work = tsi_kview(work),
                                   .steps = T,
                                   .rows = B,
                                   .hidden = H,
                                   .lstm = lstm,
                                   .reverse = reverse};
        if (be->rnn_seq_backward)
            be->rnn_seq_backward(be, index, &a);
        else
            tsi_rnn_seq_bwd_rows(be, index, &a, 0, B);
        ts_tensor *dgr = ts_reshape(lstm ? dx : dg, TS_SHAPE(T * B, GH));
        if (tsi_node_needs(n, I_W) && dgr) {
            /* the steps' input states in step order: h0 then the outputs before the last step */
            ts_tensor *hs = tsi_new(OP, TS_SHAPE(T, B, H), dt, dev);
            if (hs) {
                const int64_t first = reverse ? T - 1 : 0, from = reverse ? 1 : 0,
                              to = reverse ? 0 : 1;
                const ts_kview d0 = mat(hs, first * BH, B, H), s0 = mat(h0, 0, B, H);
                be->copy(be, index, &d0, &s0);
                if (T > 1) {
                    const ts_kview d1 = mat(hs, to * BH, (T - 1) * B, H),
                                   s1 = mat(y, from * BH, (T - 1) * B, H);
                    be->copy(be, index, &d1, &s1);
                }
                gi[I_W] = ts_mm(ts_t(dgr), ts_reshape(tsi_own(hs), TS_SHAPE(T * B, H)));
            }
        }
        if (tsi_node_needs(n, I_B) && dgr) gi[I_B] = ts_sum_dim(dgr, 0, false);
        if (want_h0) gi[I_H0] = tsi_own(ts_retain(dh0));
        if (want_c0) gi[I_C0] = tsi_own(ts_retain(dc0));
        if (tsi_node_needs(n, I_XW)) gi[I_XW] = tsi_own(ts_retain(dx));
    }
    ts_release(dx), ts_release(dg), ts_release(work), ts_release(dh0), ts_release(dc0);
    ts_release(dy), ts_release(dhn), ts_release(dcn);
}

/* ------------------------------------------------------------------ forward */
bool tsi_rnn_seq_fused(bool lstm, ts_tensor *xw, ts_tensor *w_hh, ts_tensor *b_hh, ts_tensor *h0,
                       ts_tensor *c0, bool reverse, const tsi_rnn_proj *proj, ts_tensor **y,
                       ts_tensor **hn, ts_tensor **cn) {
    tsi_init();
    *y = *hn = NULL;
    if (cn) *cn = NULL;
    if (!tsi_rnn_seq_fused_takes(xw, w_hh, b_hh, h0, lstm ? c0 : NULL) || (lstm && !c0))
        return tsi_error_set(TS_ERR_ARG, "%s: tensors the fused sequence does not take", OP), false;
    const int64_t G = lstm ? 4 : 3, H = w_hh->shape.ndim == 2 ? w_hh->shape.dims[1] : 0;
    const int64_t T = xw->shape.dims[0], B = xw->shape.ndim == 3 ? xw->shape.dims[1] : 0;
    const int64_t GH = G * H, S = (G + 1) * H, BH = B * H;
    ts_shape state = TS_SHAPE(B, H);
    if (xw->shape.ndim != 3 || T < 1 || B < 1 || H < 1 || xw->shape.dims[2] != GH ||
        w_hh->shape.dims[0] != GH || (b_hh && tsi_numel(b_hh->shape) != GH) ||
        h0->shape.ndim != 2 || h0->shape.dims[0] != B || h0->shape.dims[1] != H ||
        (lstm && (c0->shape.ndim != 2 || c0->shape.dims[0] != B || c0->shape.dims[1] != H)))
        return tsi_error_set(TS_ERR_SHAPE, "%s: xw %s, w_hh %s and h0 %s do not fit", OP,
                             tsi_shape_str(xw->shape), tsi_shape_str(w_hh->shape),
                             tsi_shape_str(h0->shape)),
               false;
    const ts_device dev = tsi_device(xw);
    const ts_dtype dt = xw->dtype;
    tsi_log_op(OP, dev);
    ts_tensor *t[10] = {NULL};
    ts_tensor *in[5] = {xw, w_hh, b_hh, h0, lstm ? c0 : NULL};
    bool ok = true;
    for (int i = 0; ok && i < 5; i++) ok = !in[i] || (t[i] = tsi_contiguous(OP, in[i])) != NULL;
    ts_tensor *x = t[0], *w = t[1], *b = t[2], *hp0 = t[3], *cp0 = t[4];
    ts_tensor **out = &t[5], **cs = &t[6], **sv = &t[7], **gh = &t[8], **cl = &t[9], *hl = NULL;
    ok = ok && (*out = tsi_new(OP, TS_SHAPE(T, B, H), dt, dev)) &&
         (!lstm || (*cs = tsi_new(OP, TS_SHAPE(T, B, H), dt, dev))) &&
         (*sv = tsi_new(OP, TS_SHAPE(T, B, S), dt, dev)) &&
         (*gh = tsi_new(OP, TS_SHAPE(B, GH), dt, dev)) && (hl = tsi_new(OP, state, dt, dev)) &&
         (!lstm || (*cl = tsi_new(OP, state, dt, dev)));
    if (ok) {
        const ts_backend *be = tsi_be(x);
        const int index = tsi_dev_index(x);
        const ts_rnn_seq_args a = {.xw = tsi_kview(x),
                                   .w = tsi_kview(w),
                                   .bias = view_or_absent(b, dt),
                                   .h0 = tsi_kview(hp0),
                                   .c0 = view_or_absent(cp0, dt),
                                   .y = tsi_kview(*out),
                                   .cells = view_or_absent(*cs, dt),
                                   .saved = tsi_kview(*sv),
                                   .gh = tsi_kview(*gh),
                                   .steps = T,
                                   .rows = B,
                                   .hidden = H,
                                   .lstm = lstm,
                                   .reverse = reverse};
        if (be->rnn_seq_forward)
            be->rnn_seq_forward(be, index, &a);
        else
            tsi_rnn_seq_fwd_rows(be, index, &a, 0, B);
        const int64_t last = reverse ? 0 : T - 1;
        const ts_kview dh = mat(hl, 0, B, H), sh = mat(*out, last * BH, B, H);
        be->copy(be, index, &dh, &sh);
        if (lstm) {
            const ts_kview dc = mat(*cl, 0, B, H), sc = mat(*cs, last * BH, B, H);
            be->copy(be, index, &dc, &sc);
        }
        if (tsi_needs_graph(in, N_IN)) {
            ts_node *n = tsi_node_new("RnnSequenceBackward0", OP, seq_backward, in, N_IN,
                                      lstm ? 3 : 2, N_SAVED);
            if (n) {
                n->ip[0] = T, n->ip[1] = B, n->ip[2] = H, n->ip[3] = lstm, n->ip[4] = reverse;
                tsi_node_save(n, S_SAVED, *sv);
                if (lstm) tsi_node_save(n, S_CELLS, *cs), tsi_node_save(n, S_C0, cp0);
                tsi_node_save(n, S_H0, hp0);
                tsi_node_save(n, S_W, w);
                tsi_node_set_output(n, *out, 0);
                tsi_node_set_output(n, hl, 1);
                if (lstm) tsi_node_set_output(n, *cl, 2);
                tsi_node_save_output(n, S_OUT, *out);
                /* for the composite backward: what the kernels read copies of, b_hh, and xw (or
                 * how it was made) */
                if (hp0 != h0) tsi_node_save(n, TSI_RS_H0_IN, h0);
                if (lstm && cp0 != c0) tsi_node_save(n, TSI_RS_C0_IN, c0);
                if (w != w_hh) tsi_node_save(n, TSI_RS_W_IN, w_hh);
                if (b_hh) tsi_node_save(n, TSI_RS_B_IN, b_hh);
                if (proj) {
                    tsi_node_save(n, TSI_RS_PX, proj->x);
                    tsi_node_save(n, TSI_RS_PW, proj->w_ih);
                    if (proj->b) tsi_node_save(n, TSI_RS_PB, proj->b);
                } else {
                    tsi_node_save(n, TSI_RS_XW_IN, xw);
                }
                n->flags |= TSI_NODE_TWICE; /* tsi_rnn_seq_backward_composite */
                tsi_node_release(n);
            }
            ok = n != NULL;
        }
    }
    if (ok) {
        *y = tsi_own(*out), *out = NULL;
        *hn = tsi_own(hl), hl = NULL;
        if (lstm && cn) *cn = tsi_own(*cl), *cl = NULL;
    }
    for (int i = 0; i < 10; i++) ts_release(t[i]);
    ts_release(hl);
    return ok;
}
