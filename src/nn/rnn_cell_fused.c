/* rnn_cell_fused.c — one LSTM / GRU time step's gates as one op (nn.LSTM, nn.GRU and their cells,
 * rnn.c's step): one kernel pass forward and one backward over the step's [B, 4H] / [B, 3H]
 * gates, and one autograd node (PyTorch's names for its fused cells: ThnnFusedLstmCellBackward0,
 * ThnnFusedGruCellBackward0), where the composition runs a dozen elementwise ops and nodes per
 * step. The node keeps the activated gates (the LSTM's with tanh(c)) and the previous state; given
 * how xw and gh were made (a recipe: the cell modules' steps), also those tensors, and under
 * create_graph its backward makes the gates again from them by public ops (differentiable
 * again). */
#include "nn/rnn_cell_fused.h"
#include "autograd/autograd.h"
#include "autograd/trace.h"
#include "nn/rnn_step_back.h"

static const char *const OPL = "lstm_cell_fused", *const OPG = "gru_cell_fused";

bool tsi_rnn_cell_fused_takes(ts_tensor *xw, ts_tensor *gh, ts_tensor *state) {
    if (!xw || !state || tsi_trace_active) return false;
    const ts_dtype dt = xw->dtype;
    if ((dt != TS_F32 && dt != TS_F64) || state->dtype != dt || (gh && gh->dtype != dt))
        return false;
    ts_device dev = tsi_device(xw);
    if (!tsi_device_eq(tsi_device(state), dev) || (gh && !tsi_device_eq(tsi_device(gh), dev)))
        return false;
    const ts_backend *be = tsi_be(xw);
    return be->rnn_cell_forward && be->rnn_cell_backward;
}

/* The checks both ops share: G gates; gh may be NULL where gh_optional. *B, *H from state. */
static bool check(const char *op, ts_tensor *xw, ts_tensor *gh, bool gh_optional, ts_tensor *state,
                  const char *state_name, ts_tensor *z, int G, int64_t *B, int64_t *H) {
    if (!tsi_check_input(op, xw, "xw") || (!gh_optional && !tsi_check_input(op, gh, "gh")) ||
        !tsi_check_input(op, state, state_name))
        return false;
    ts_tensor *all[4] = {xw, state, gh ? gh : z, gh ? z : NULL};
    ts_device dev;
    if (!tsi_same_device(op, all, 2 + (gh != NULL) + (z != NULL), false, &dev)) return false;
    const ts_dtype dt = xw->dtype;
    if ((dt != TS_F32 && dt != TS_F64) || state->dtype != dt || (gh && gh->dtype != dt))
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected float32 or float64 tensors of one dtype, got xw %s, "
                             "%s %s%s%s",
                             op, ts_dtype_name(dt), state_name, ts_dtype_name(state->dtype),
                             gh ? ", gh " : "", gh ? ts_dtype_name(gh->dtype) : ""),
               false;
    if (state->shape.ndim != 2 || state->shape.dims[0] < 1 || state->shape.dims[1] < 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: %s must be a non-empty [batch, hidden] matrix, got %s", op,
                             state_name, tsi_shape_str(state->shape)),
               false;
    *B = state->shape.dims[0], *H = state->shape.dims[1];
    ts_tensor *gates[3] = {xw, gh, z};
    const char *names[3] = {"xw", "gh", "z"};
    for (int k = 0; k < 3; k++) {
        ts_tensor *t = gates[k];
        if (t && (t->shape.ndim != 2 || t->shape.dims[0] != *B || t->shape.dims[1] != G * *H))
            return tsi_error_set(TS_ERR_SHAPE, "%s: %s must be [%lld, %lld] (%s %s), got %s", op,
                                 names[k], (long long)*B, (long long)(G * *H), state_name,
                                 tsi_shape_str(state->shape), tsi_shape_str(t->shape)),
                   false;
    }
    const ts_backend *be = tsi_be(xw);
    if (!be->rnn_cell_forward || !be->rnn_cell_backward)
        return tsi_error_set(TS_ERR_UNSUPPORTED, "%s: no fused kernel on %s", op,
                             ts_device_str(dev)),
               false;
    return true;
}

/* a gradient of the outputs in the kernels' form: contiguous, of dtype dt (NULL stays NULL) */
static ts_tensor *grad_arg(const char *op, ts_tensor *g, ts_dtype dt, bool *ok) {
    if (!g || !*ok) return NULL;
    ts_tensor *c = tsi_cast(op, g, dt);
    ts_tensor *r = c ? tsi_contiguous(op, c) : NULL;
    ts_release(c);
    *ok = r != NULL;
    return r;
}

static ts_kview view_or_absent(ts_tensor *t) {
    return t ? tsi_kview(t) : (ts_kview){.dtype = TS_F32};
}

/* ------------------------------------------------------------------ the recipe */
/* the node's slots past the kernels' two: the recipe, then the previous state itself */
enum { S_X = 2, S_WIH, S_BIH, S_H, S_WHH, S_BHH, S_STATE, S_N };

static void save_recipe(ts_node *n, const tsi_rnn_cell_recipe *r, ts_tensor *state) {
    ts_tensor *t[S_N - S_X] = {r->x, r->w_ih, r->b_ih, r->h, r->w_hh, r->b_hh, state};
    for (int i = 0; i < S_N - S_X; i++) tsi_node_save(n, S_X + i, t[i]);
    n->flags |= TSI_NODE_TWICE; /* the composite backward under create_graph */
}

/* recorded with a recipe (more slots than the kernels' two) */
static bool with_recipe(const ts_node *n) { return n->n_saved == S_N; }

static ts_tensor *saved_or_null(ts_node *n, int slot, bool *ok) {
    if (!tsi_node_has_saved(n, slot)) return NULL;
    ts_tensor *t = tsi_node_saved(n, slot);
    *ok = *ok && t;
    return t;
}

/* xw and gh made again from the recipe (gh NULL where there was none) and the previous state:
 * false with the error set */
static bool remake(ts_node *n, ts_tensor **xw, ts_tensor **gh, ts_tensor **state) {
    bool ok = true;
    ts_tensor *x = saved_or_null(n, S_X, &ok), *wi = saved_or_null(n, S_WIH, &ok),
              *bi = saved_or_null(n, S_BIH, &ok), *h = saved_or_null(n, S_H, &ok),
              *wh = saved_or_null(n, S_WHH, &ok), *bh = saved_or_null(n, S_BHH, &ok);
    *state = saved_or_null(n, S_STATE, &ok);
    if (!ok || !x || !wi || !*state) return false;
    *xw = ts_linear(x, wi, bi);
    *gh = !wh ? NULL : bh ? ts_linear(h, wh, bh) : ts_mm(h, ts_t(wh));
    return *xw && (!wh || *gh);
}

/* the gradient of an absent output: zeros like the state */
static ts_tensor *or_zeros(ts_tensor *g, ts_tensor *state) { return g ? g : ts_zeros_like(state); }

/* ------------------------------------------------------------------ LSTM */
/* The backward as public ops over the gates made again (create_graph): a = xw + gh, then
 * rnn_step_back.h's step; xw's, gh's (and z's) gradient da, c_prev's the cell's. */
static void lstm_backward_composite(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *xw = NULL, *gh = NULL, *cp = NULL, *dcp = NULL;
    if ((!go[0] && !go[1]) || !remake(n, &xw, &gh, &cp)) return;
    ts_tensor *da = tsi_lstm_step_back(gh ? ts_add(xw, gh) : xw, cp, or_zeros(go[0], cp),
                                       or_zeros(go[1], cp), &dcp);
    if (!da || !dcp) return;
    if (tsi_node_needs(n, 0)) gi[0] = da;
    if (tsi_node_needs(n, 1)) gi[1] = da;
    if (tsi_node_needs(n, 2)) gi[2] = dcp;
    if (tsi_node_needs(n, 3)) gi[3] = da;
}

static void lstm_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (tsi_create_graph_active() && with_recipe(n)) {
        lstm_backward_composite(n, go, gi);
        return;
    }
    ts_tensor *sv = tsi_node_saved(n, 0), *cp = tsi_node_saved(n, 1);
    if (!sv || !cp || (!go[0] && !go[1])) return;
    const ts_dtype dt = sv->dtype;
    const int64_t B = cp->shape.dims[0], H = cp->shape.dims[1];
    const ts_device dev = tsi_device(sv);
    bool ok = true;
    ts_tensor *dh = grad_arg(OPL, go[0], dt, &ok), *dc = grad_arg(OPL, go[1], dt, &ok);
    const bool want_x = tsi_node_needs(n, 0) || tsi_node_needs(n, 1) || tsi_node_needs(n, 3);
    ts_tensor *dx = ok && want_x ? tsi_new(OPL, TS_SHAPE(B, 4 * H), dt, dev) : NULL;
    ts_tensor *ds = ok && tsi_node_needs(n, 2) ? tsi_new(OPL, TS_SHAPE(B, H), dt, dev) : NULL;
    if (ok && (!want_x || dx) && (!tsi_node_needs(n, 2) || ds)) {
        ts_rnn_cell_args a = {.saved = tsi_kview(sv),
                              .state = tsi_kview(cp),
                              .dh = view_or_absent(dh),
                              .dc = view_or_absent(dc),
                              .dxw = view_or_absent(dx),
                              .dstate = view_or_absent(ds),
                              .rows = B,
                              .hidden = H,
                              .lstm = true};
        const ts_backend *be = tsi_be(sv);
        be->rnn_cell_backward(be, tsi_dev_index(sv), &a);
        dx = tsi_own(dx); /* one tensor, the gradient of xw, of gh and of z */
        if (tsi_node_needs(n, 0)) gi[0] = dx;
        if (tsi_node_needs(n, 1)) gi[1] = dx;
        if (tsi_node_needs(n, 3)) gi[3] = dx;
        gi[2] = tsi_own(ds);
    } else {
        ts_release(dx), ts_release(ds);
    }
    ts_release(dh), ts_release(dc);
}

bool tsi_lstm_cell_fused(ts_tensor *xw0, ts_tensor *gh0, ts_tensor *c0, ts_tensor *z,
                         ts_tensor **h_out, ts_tensor **c_out) {
    return tsi_lstm_cell_fused_ex(xw0, gh0, c0, z, NULL, h_out, c_out);
}

bool tsi_lstm_cell_fused_ex(ts_tensor *xw0, ts_tensor *gh0, ts_tensor *c0, ts_tensor *z,
                            const tsi_rnn_cell_recipe *recipe, ts_tensor **h_out,
                            ts_tensor **c_out) {
    tsi_init();
    if (h_out) *h_out = NULL;
    if (c_out) *c_out = NULL;
    if (!h_out || !c_out)
        return tsi_error_set(TS_ERR_ARG, "%s: h and c outputs must not be NULL", OPL), false;
    if (recipe && z)
        return tsi_error_set(TS_ERR_ARG, "%s: a recipe of xw and gh goes without z", OPL), false;
    int64_t B = 0, H = 0;
    if (!check(OPL, xw0, gh0, true, c0, "c_prev", z, 4, &B, &H)) return false;
    const ts_device dev = tsi_device(xw0);
    const ts_dtype dt = xw0->dtype;
    tsi_log_op(OPL, dev);
    ts_tensor *xw = tsi_contiguous(OPL, xw0);
    ts_tensor *gh = xw && gh0 ? tsi_contiguous(OPL, gh0) : NULL;
    ts_tensor *cp = xw && (!gh0 || gh) ? tsi_contiguous(OPL, c0) : NULL;
    ts_tensor *h = cp ? tsi_new(OPL, TS_SHAPE(B, H), dt, dev) : NULL;
    ts_tensor *c = h ? tsi_new(OPL, TS_SHAPE(B, H), dt, dev) : NULL;
    ts_tensor *sv = c ? tsi_new(OPL, TS_SHAPE(B, 5 * H), dt, dev) : NULL;
    bool ok = sv != NULL;
    if (ok) {
        ts_rnn_cell_args a = {.xw = tsi_kview(xw),
                              .gh = view_or_absent(gh),
                              .state = tsi_kview(cp),
                              .h = tsi_kview(h),
                              .c = tsi_kview(c),
                              .saved = tsi_kview(sv),
                              .rows = B,
                              .hidden = H,
                              .lstm = true};
        const ts_backend *be = tsi_be(xw);
        be->rnn_cell_forward(be, tsi_dev_index(xw), &a);
        ts_tensor *ins[4] = {xw0, gh0, c0, z};
        if (tsi_needs_graph(ins, 4)) {
            ts_node *n = tsi_node_new("ThnnFusedLstmCellBackward0", OPL, lstm_backward, ins, 4, 2,
                                      recipe ? S_N : 2);
            if (n) {
                tsi_node_save(n, 0, sv);
                tsi_node_save(n, 1, cp);
                if (recipe) save_recipe(n, recipe, c0);
                tsi_node_set_output(n, h, 0);
                tsi_node_set_output(n, c, 1);
                tsi_node_release(n);
            }
            ok = n != NULL;
        }
    }
    ts_release(xw), ts_release(gh), ts_release(cp), ts_release(sv);
    if (!ok) {
        ts_release(h), ts_release(c);
        return false;
    }
    *h_out = tsi_own(h);
    *c_out = tsi_own(c);
    return true;
}

/* ------------------------------------------------------------------ GRU */
/* The backward as public ops over the gates made again (create_graph), rnn_step_back.h's step:
 * xw's gradient, gh's (and z's), h_prev's direct part */
static void gru_backward_composite(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    ts_tensor *xw = NULL, *gh = NULL, *hp = NULL, *dxw = NULL, *dgh = NULL;
    if (!go[0] || !remake(n, &xw, &gh, &hp) || !gh) return;
    ts_tensor *dh = tsi_gru_step_back(xw, gh, hp, go[0], &dxw, &dgh);
    if (!dh || !dxw || !dgh) return;
    if (tsi_node_needs(n, 0)) gi[0] = dxw;
    if (tsi_node_needs(n, 1)) gi[1] = dgh;
    if (tsi_node_needs(n, 2)) gi[2] = dh;
    if (tsi_node_needs(n, 3)) gi[3] = dgh;
}

static void gru_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (tsi_create_graph_active() && with_recipe(n)) {
        gru_backward_composite(n, go, gi);
        return;
    }
    ts_tensor *sv = tsi_node_saved(n, 0), *hp = tsi_node_saved(n, 1);
    if (!sv || !hp || !go[0]) return;
    const ts_dtype dt = sv->dtype;
    const int64_t B = hp->shape.dims[0], H = hp->shape.dims[1];
    const ts_device dev = tsi_device(sv);
    bool ok = true;
    ts_tensor *dh = grad_arg(OPG, go[0], dt, &ok);
    ts_tensor *g[3] = {NULL, NULL, NULL};
    for (int i = 0; ok && i < 3; i++)
        if (tsi_node_needs(n, i) || (i == 1 && tsi_node_needs(n, 3)))
            ok = (g[i] = tsi_new(OPG, TS_SHAPE(B, i < 2 ? 3 * H : H), dt, dev)) != NULL;
    if (ok) {
        ts_rnn_cell_args a = {.saved = tsi_kview(sv),
                              .state = tsi_kview(hp),
                              .dh = tsi_kview(dh),
                              .dxw = view_or_absent(g[0]),
                              .dgh = view_or_absent(g[1]),
                              .dstate = view_or_absent(g[2]),
                              .rows = B,
                              .hidden = H,
                              .lstm = false};
        const ts_backend *be = tsi_be(sv);
        be->rnn_cell_backward(be, tsi_dev_index(sv), &a);
    }
    for (int i = 0; i < 3; i++) {
        if (ok)
            g[i] = tsi_own(g[i]);
        else
            ts_release(g[i]);
    }
    if (ok) { /* z's gradient is gh's */
        gi[0] = g[0], gi[2] = g[2];
        if (tsi_node_needs(n, 1)) gi[1] = g[1];
        if (tsi_node_needs(n, 3)) gi[3] = g[1];
    }
    ts_release(dh);
}

ts_tensor *tsi_gru_cell_fused(ts_tensor *xw0, ts_tensor *gh0, ts_tensor *h0, ts_tensor *z) {
    return tsi_gru_cell_fused_ex(xw0, gh0, h0, z, NULL);
}

ts_tensor *tsi_gru_cell_fused_ex(ts_tensor *xw0, ts_tensor *gh0, ts_tensor *h0, ts_tensor *z,
                                 const tsi_rnn_cell_recipe *recipe) {
    tsi_init();
    if (recipe && (z || !recipe->w_hh))
        return tsi_error_set(TS_ERR_ARG, "%s: a recipe of xw and gh needs w_hh and goes without z",
                             OPG),
               NULL;
    int64_t B = 0, H = 0;
    if (!check(OPG, xw0, gh0, false, h0, "h_prev", z, 3, &B, &H)) return NULL;
    const ts_device dev = tsi_device(xw0);
    const ts_dtype dt = xw0->dtype;
    tsi_log_op(OPG, dev);
    ts_tensor *xw = tsi_contiguous(OPG, xw0);
    ts_tensor *gh = xw ? tsi_contiguous(OPG, gh0) : NULL;
    ts_tensor *hp = gh ? tsi_contiguous(OPG, h0) : NULL;
    ts_tensor *h = hp ? tsi_new(OPG, TS_SHAPE(B, H), dt, dev) : NULL;
    ts_tensor *sv = h ? tsi_new(OPG, TS_SHAPE(B, 4 * H), dt, dev) : NULL;
    bool ok = sv != NULL;
    if (ok) {
        ts_rnn_cell_args a = {.xw = tsi_kview(xw),
                              .gh = tsi_kview(gh),
                              .state = tsi_kview(hp),
                              .h = tsi_kview(h),
                              .saved = tsi_kview(sv),
                              .rows = B,
                              .hidden = H,
                              .lstm = false};
        const ts_backend *be = tsi_be(xw);
        be->rnn_cell_forward(be, tsi_dev_index(xw), &a);
        ts_tensor *ins[4] = {xw0, gh0, h0, z};
        ts_tensor *saves[S_N] = {sv, hp}; /* the recipe's slots filled by save_recipe */
        if (tsi_needs_graph(ins, 4)) {
            ts_node *n = tsi_record("ThnnFusedGruCellBackward0", OPG, gru_backward, ins, 4, h,
                                    saves, recipe ? S_N : 2);
            if (n && recipe) save_recipe(n, recipe, h0);
            ok = n != NULL;
        }
    }
    ts_release(xw), ts_release(gh), ts_release(hp), ts_release(sv);
    if (!ok) {
        ts_release(h);
        return NULL;
    }
    return tsi_own(h);
}

/* ------------------------------------------------------------------ the recurrent weight's sink */
/* A layer's steps multiply their state by a detached w_hh (their backward computes no weight
 * gradient); the sink's backward receives every step's gradient of gh at once as dZ [T, B, G*H]:
 * from the slices z_t the fused ops hand it, or, where that gradient is the input projection's
 * (the LSTM's), as the gradient of the projection it wraps and passes on. With the steps' input
 * states Hs [T, B, Hin] (kept in ctx), w_hh's gradient is then ONE product dZ^T Hs over the T * B
 * rows (b_hh's: the sum of dZ's rows), where the per-step products [G*H, B] x [B, Hin] would each
 * make a [G*H, Hin] gradient for the engine to add up. */
static void sink_ctx_free(void *ctx) { ts_release(ctx); }

static void sink_backward(ts_node *n, ts_tensor *const *go, ts_tensor **gi) {
    if (!go[0]) return;
    ts_tensor *hs = n->ctx;
    if (!hs) {
        tsi_error_set(TS_ERR_STATE, "rnn: the steps' states of %s are missing", n->name);
        return;
    }
    const int64_t rows = hs->shape.dims[0], G = go[0]->shape.dims[2];
    ts_tensor *dz = ts_reshape(go[0], TS_SHAPE(rows, G));
    if (tsi_node_needs(n, 0)) gi[0] = dz ? ts_mm(ts_t(dz), hs) : NULL;
    if (tsi_node_needs(n, 1)) gi[1] = dz ? ts_sum_dim(dz, 0, false) : NULL;
    if (tsi_node_needs(n, 2)) gi[2] = go[0];
}

bool tsi_rnn_weight_sink(ts_tensor *w_hh, ts_tensor *b_hh, ts_tensor *through, int64_t T, int64_t B,
                         ts_tensor **sink) {
    *sink = NULL;
    ts_tensor *ins[3] = {w_hh, b_hh, through};
    if (!w_hh || !tsi_needs_graph(ins, 2)) return true;
    ts_no_grad_begin();
    ts_tensor *z = NULL;
    if (through) {
        z = ts_view(through, through->shape);
    } else {
        ts_tensor *zero = ts_zeros(TS_SHAPE(1, 1, 1),
                                   (ts_opts){.dtype = w_hh->dtype, .device = tsi_device(w_hh)});
        z = zero ? ts_expand(zero, TS_SHAPE(T, B, w_hh->shape.dims[0])) : NULL;
    }
    ts_no_grad_end();
    ts_node *n = z ? tsi_node_new("RnnWeightSinkBackward0", "rnn_forward", sink_backward, ins,
                                  through ? 3 : 2, 1, 0)
                   : NULL;
    if (!n) return false;
    n->ctx_free = sink_ctx_free;
    tsi_node_set_output(n, z, 0);
    tsi_node_release(n);
    *sink = z;
    return true;
}

bool tsi_rnn_weight_sink_states(ts_tensor *sink, ts_tensor *const *h_in, int64_t T) {
    ts_node *n = sink ? sink->grad_fn : NULL;
    if (!n || n->backward != sink_backward || n->ctx) return false;
    ts_scope_begin();
    ts_no_grad_begin();
    ts_tensor *hs = ts_stack(h_in, (int)T, 0);
    if (hs) hs = ts_reshape(ts_contiguous(hs), TS_SHAPE(-1, hs->shape.dims[2]));
    ts_no_grad_end();
    if (hs) n->ctx = ts_retain(ts_detach(hs));
    ts_scope_end();
    return n->ctx != NULL;
}
