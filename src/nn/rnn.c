/* rnn.c — nn.RNN, nn.LSTM, nn.GRU and their cells, with PyTorch's parameter names, shapes, gate
 * orders (LSTM i, f, g, o; GRU r, z, n with n = tanh(W_in x + b_in + r * (W_hn h + b_hn))) and
 * init (uniform(-1/sqrt(hidden), 1/sqrt(hidden))), so a PyTorch state dict loads. Composed from
 * differentiable ops (autograd, every device and floating dtype for free): per layer and direction
 * the input projection of every time step is ONE product [T*B, I] x [I, G*H] (with b_ih), then
 * each step is one product [B, H] x [H, G*H] (with b_hh, which a fused LSTM adds in the input
 * projection instead) and the gates: for float32 and float64 the whole direction's steps as one
 * op (rnn_seq_fused.c: the steps' products and fused gates as backend calls, one autograd node, the
 * CPU's threads each taking their own batch rows through every step), or, with lengths or a
 * projection, one fused op a step (rnn_cell_fused.c: one kernel, one autograd node a step) and
 * w_hh's gradient as one product per sequence (the weight sink, run_direction); for the other
 * dtypes, under autocast and under an ONNX export's trace the elementwise ops. The math matches
 * src/onnx/ops_nn_rnn.c's (ONNX orders the gates differently: its importer keeps its own). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "amp/autocast.h"
#include "nn/module_internal.h"
#include "nn/rnn_cell_fused.h"
#include "nn/rnn_seq_fused.h"

typedef enum rkind { K_RNN = 0, K_LSTM, K_GRU } rkind;
static const int n_gates[] = {1, 4, 3};
static const char *const layer_names[] = {"RNN", "LSTM", "GRU"};
static const char *const cell_names[] = {"RNNCell", "LSTMCell", "GRUCell"};

typedef struct rnn_m {
    ts_module base;
    rkind kind;
    bool cell;
    int64_t input_size, hidden_size, num_layers, proj_size;
    bool relu, bias, batch_first, bidirectional;
    double dropout;
    int per_dir; /* parameters per (layer, direction): the slot of each is computed from it */
} rnn_m;

static ts_tensor *rnn_layer_forward(ts_module *self, ts_tensor *x) {
    return ts_rnn_forward(self, x, NULL, NULL, NULL, NULL, NULL);
}

static ts_tensor *rnn_cell_forward_fn(ts_module *self, ts_tensor *x) {
    return ts_rnn_cell_forward(self, x, NULL, NULL, NULL);
}

static const char *py_bool(bool b) { return b ? "True" : "False"; }

static void rnn_extra(ts_module *self, char *buf, size_t n) {
    rnn_m *m = (rnn_m *)self;
    int k = snprintf(buf, n, "%lld, %lld", (long long)m->input_size, (long long)m->hidden_size);
#define PUT(...)                                                                                   \
    do {                                                                                           \
        if (k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - (size_t)k, __VA_ARGS__);           \
    } while (0)
    if (m->cell) { /* RNNCellBase.extra_repr */
        if (!m->bias) PUT(", bias=False");
        if (m->relu) PUT(", nonlinearity=relu");
        return;
    }
    /* RNNBase.extra_repr */
    if (m->proj_size) PUT(", proj_size=%lld", (long long)m->proj_size);
    if (m->num_layers != 1) PUT(", num_layers=%lld", (long long)m->num_layers);
    if (!m->bias) PUT(", bias=False");
    if (m->batch_first) PUT(", batch_first=True");
    if (m->dropout != 0) {
        char d[40];
        tsi_py_float(m->dropout, d, sizeof d);
        PUT(", dropout=%s", d);
    }
    if (m->bidirectional) PUT(", bidirectional=%s", py_bool(true));
#undef PUT
}

/* ------------------------------------------------------------------ construction */
static ts_module *rnn_build(rkind kind, bool cell, int64_t input_size, int64_t hidden_size,
                            ts_rnn_opts o) {
    tsi_init();
    const char *op = cell ? cell_names[kind] : layer_names[kind];
    const int64_t layers = cell || o.num_layers == 0 ? 1 : o.num_layers;
    if (input_size < 0 || hidden_size <= 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: hidden_size must be greater than zero and input_size at least "
                             "zero, got hidden_size %lld and input_size %lld",
                             op, (long long)hidden_size, (long long)input_size),
               NULL;
    if (layers < 1)
        return tsi_error_set(TS_ERR_ARG, "%s: num_layers must be greater than zero, got %lld", op,
                             (long long)o.num_layers),
               NULL;
    if (!(o.dropout >= 0 && o.dropout <= 1))
        return tsi_error_set(TS_ERR_ARG,
                             "%s: dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed, got %g",
                             op, o.dropout),
               NULL;
    if (o.proj_size < 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: proj_size should be a positive integer or zero to disable "
                             "projections, got %lld",
                             op, (long long)o.proj_size),
               NULL;
    if (o.proj_size && (kind != K_LSTM || cell))
        return tsi_error_set(TS_ERR_ARG, "%s: proj_size argument is only supported for LSTM", op),
               NULL;
    if (o.proj_size >= hidden_size)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: proj_size has to be smaller than hidden_size, got %lld and %lld",
                             op, (long long)o.proj_size, (long long)hidden_size),
               NULL;
    if (o.nonlinearity != TS_RNN_TANH && o.nonlinearity != TS_RNN_RELU)
        return tsi_error_set(TS_ERR_ARG, "%s: unknown nonlinearity %d", op, (int)o.nonlinearity),
               NULL;
    if (o.nonlinearity == TS_RNN_RELU && kind != K_RNN)
        return tsi_error_set(TS_ERR_ARG, "%s: nonlinearity is only supported for RNN and RNNCell",
                             op),
               NULL;
    rnn_m *m = ts_module_alloc(sizeof *m, op, cell ? rnn_cell_forward_fn : rnn_layer_forward);
    if (!m) return NULL;
    m->base.extra_repr = rnn_extra;
    m->kind = kind;
    m->cell = cell;
    m->input_size = input_size;
    m->hidden_size = hidden_size;
    m->num_layers = layers;
    m->proj_size = cell ? 0 : o.proj_size;
    m->relu = o.nonlinearity == TS_RNN_RELU;
    m->bias = !o.no_bias;
    m->batch_first = !cell && o.batch_first;
    m->bidirectional = !cell && o.bidirectional;
    m->dropout = cell ? 0 : o.dropout;
    m->per_dir = 2 + (m->bias ? 2 : 0) + (m->proj_size ? 1 : 0);
    if (!tsi_scope_open()) {
        ts_module_free(&m->base);
        return NULL;
    }
    const int64_t G = n_gates[kind] * hidden_size,
                  h_out = m->proj_size ? m->proj_size : hidden_size;
    const int dirs = m->bidirectional ? 2 : 1;
    const double k = 1.0 / sqrt((double)hidden_size);
    bool ok = true;
    /* PyTorch's order: per layer, per direction: w_ih, w_hh, b_ih, b_hh, w_hr */
    for (int64_t l = 0; ok && l < layers; l++) {
        for (int d = 0; ok && d < dirs; d++) {
            const int64_t in = l == 0 ? input_size : h_out * dirs;
            const char *sfx = d ? "_reverse" : "";
            char name[5][64];
            ts_shape shape[5];
            int np = 0;
#define ADD(fmt, sh)                                                                               \
    do {                                                                                           \
        if (cell)                                                                                  \
            snprintf(name[np], sizeof name[np], "%s", fmt);                                        \
        else                                                                                       \
            snprintf(name[np], sizeof name[np], fmt "_l%lld%s", (long long)l, sfx);                \
        shape[np++] = sh;                                                                          \
    } while (0)
            ADD("weight_ih", TS_SHAPE(G, in));
            ADD("weight_hh", TS_SHAPE(G, h_out));
            if (m->bias) {
                ADD("bias_ih", TS_SHAPE(G));
                ADD("bias_hh", TS_SHAPE(G));
            }
            if (m->proj_size) ADD("weight_hr", TS_SHAPE(m->proj_size, hidden_size));
#undef ADD
            for (int i = 0; ok && i < np; i++) {
                ts_tensor *t = ts_empty(shape[i], (ts_opts){0});
                ok = t && ts_init_uniform_(t, -k, k) && ts_module_param(&m->base, name[i], t);
            }
        }
    }
    ts_scope_end();
    if (!ok) {
        ts_module_free(&m->base);
        return NULL;
    }
    return &m->base;
}

ts_module *ts_rnn_new(int64_t input_size, int64_t hidden_size, ts_rnn_opts o) {
    return rnn_build(K_RNN, false, input_size, hidden_size, o);
}
ts_module *ts_lstm_new(int64_t input_size, int64_t hidden_size, ts_rnn_opts o) {
    return rnn_build(K_LSTM, false, input_size, hidden_size, o);
}
ts_module *ts_gru_new(int64_t input_size, int64_t hidden_size, ts_rnn_opts o) {
    return rnn_build(K_GRU, false, input_size, hidden_size, o);
}
ts_module *ts_rnn_cell_new(int64_t input_size, int64_t hidden_size, ts_rnn_opts o) {
    return rnn_build(K_RNN, true, input_size, hidden_size, o);
}
ts_module *ts_lstm_cell_new(int64_t input_size, int64_t hidden_size, ts_rnn_opts o) {
    return rnn_build(K_LSTM, true, input_size, hidden_size, o);
}
ts_module *ts_gru_cell_new(int64_t input_size, int64_t hidden_size, ts_rnn_opts o) {
    return rnn_build(K_GRU, true, input_size, hidden_size, o);
}

/* ------------------------------------------------------------------ the math */
typedef struct dir_w {
    ts_tensor *w_ih, *w_hh, *b_ih, *b_hh, *w_hr;
} dir_w;

static dir_w weights_of(rnn_m *m, int64_t layer, int d) {
    const int dirs = m->bidirectional ? 2 : 1;
    const int s = (int)(layer * dirs + d) * m->per_dir;
    dir_w w = {tsi_param_at(&m->base, s), tsi_param_at(&m->base, s + 1), NULL, NULL, NULL};
    int next = s + 2;
    if (m->bias) {
        w.b_ih = tsi_param_at(&m->base, next++);
        w.b_hh = tsi_param_at(&m->base, next++);
    }
    if (m->proj_size) w.w_hr = tsi_param_at(&m->base, next);
    return w;
}

/* x [R, I] @ w_ih^T + b_ih -> [R, G*H] */
static ts_tensor *input_proj(const dir_w *w, ts_tensor *x) {
    return ts_linear(x, w->w_ih, w->b_ih);
}

/* [B, G*H] = h @ w_hh^T + b_hh, fresh (the sums go into it in place): one node whose backward
 * hands w_hh its gradient in w_hh's own layout, added in place into w_hh's .grad (a transpose made
 * once for every step would collect each step's [G*H, Hin] gradient in a new buffer) */
static ts_tensor *hidden_proj(const dir_w *w, ts_tensor *h) {
    return w->b_hh ? ts_linear(h, w->w_hh, w->b_hh) : ts_mm(h, ts_t(w->w_hh));
}

/* one step from xw [B, G*H] (the input's projection) and the state *h (*c): the new state. The
 * product takes wp's w_hh and b_hh (w's own, or detached ones whose gradients come from the weight
 * sink, rnn_cell_fused.h); z: the sink's slice for the fused gates, or NULL; wfall: the weights
 * for a step whose gates are not fused after all (its own graph to w_hh), or NULL; x: the input
 * xw = input_proj(w, x) was made from where the step's products keep their graph (a cell module's
 * step: the fused gates' node is then differentiable again), or NULL */
static bool step(rnn_m *m, const dir_w *w, const dir_w *wp, const dir_w *wfall, ts_tensor *z,
                 ts_tensor *x, ts_tensor *xw, ts_tensor **h, ts_tensor **c) {
    const int64_t H = m->hidden_size;
    const tsi_rnn_cell_recipe recipe = {x, w->w_ih, w->b_ih, *h, wp->w_hh, wp->b_hh};
    ts_tensor *gh = hidden_proj(wp, *h);
    if (!gh || !xw) return false;
    const bool fused =
        m->kind != K_RNN && tsi_rnn_cell_fused_takes(xw, gh, m->kind == K_LSTM ? *c : *h);
    if (wfall && !fused) {
        gh = hidden_proj(wfall, *h);
        z = NULL;
        if (!gh) return false;
    }
    if (m->kind == K_RNN) {
        ts_tensor *a = ts_add_(gh, xw);
        *h = m->relu ? ts_relu(a) : ts_tanh(a);
        return *h != NULL;
    }
    if (m->kind == K_LSTM && fused) {
        /* the gates in one op (rnn_cell_fused.c): one kernel and one node for the step */
        ts_tensor *hn = NULL, *cn = NULL;
        if (!tsi_lstm_cell_fused_ex(xw, gh, *c, z, x ? &recipe : NULL, &hn, &cn)) return false;
        if (w->w_hr) hn = ts_mm(hn, ts_t(w->w_hr));
        *h = hn, *c = cn;
        return *h != NULL;
    }
    if (m->kind == K_LSTM) {
        /* one split node for the four gates: its backward writes their gradients into one
         * buffer in one pass (a narrow each would zero-fill and add a [B, 4H] buffer) */
        ts_tensor *q[4] = {NULL, NULL, NULL, NULL};
        if (ts_chunk(ts_add_(gh, xw), 4, 1, q, 4) != 4) return false;
        ts_tensor *i = ts_sigmoid(q[0]), *f = ts_sigmoid(q[1]), *gg = ts_tanh(q[2]),
                  *o = ts_sigmoid(q[3]);
        *c = ts_add(ts_mul(f, *c), ts_mul(i, gg));
        ts_tensor *hn = ts_mul(o, ts_tanh(*c));
        if (w->w_hr) hn = ts_mm(hn, ts_t(w->w_hr));
        *h = hn;
        return *h != NULL && *c != NULL;
    }
    /* GRU: r, z from the summed projections; n = tanh(x_n + r * (h W_hn^T + b_hn)) */
    if (fused) {
        *h = tsi_gru_cell_fused_ex(xw, gh, *h, z, x ? &recipe : NULL);
        return *h != NULL;
    }
    ts_tensor *xs[2] = {NULL, NULL}, *hs[2] = {NULL, NULL}, *rz2[2] = {NULL, NULL};
    if (ts_split(xw, 2 * H, 1, xs, 2) != 2 || ts_split(gh, 2 * H, 1, hs, 2) != 2 ||
        ts_chunk(ts_sigmoid(ts_add(xs[0], hs[0])), 2, 1, rz2, 2) != 2)
        return false;
    ts_tensor *r = rz2[0], *zg = rz2[1];
    ts_tensor *n = ts_tanh(ts_add(xs[1], ts_mul(r, hs[1])));
    /* (1 - z) * n + z * h = n + z * (h - n) */
    *h = ts_add(n, ts_mul(zg, ts_sub(*h, n)));
    return *h != NULL;
}

static const char *OPF = "rnn_forward";

static ts_tensor *zeros_state(int64_t B, int64_t H, ts_tensor *like) {
    return ts_zeros(TS_SHAPE(B, H), (ts_opts){.dtype = like->dtype, .device = ts_device_of(like)});
}

static bool shape_is(ts_tensor *t, ts_shape s) {
    if (t->shape.ndim != s.ndim) return false;
    for (int i = 0; i < s.ndim; i++)
        if (t->shape.dims[i] != s.dims[i]) return false;
    return true;
}

/* a state's checks: dtype and device of the input, shape `want` */
static bool check_state(const char *op, ts_tensor *t, const char *what, ts_tensor *x,
                        ts_shape want) {
    if (!t) return true;
    if (t->dtype != x->dtype)
        return tsi_error_set(TS_ERR_DTYPE, "%s: %s must have the input's dtype %s, got %s", op,
                             what, ts_dtype_name(x->dtype), tsi_desc(t)),
               false;
    if (!shape_is(t, want))
        return tsi_error_set(TS_ERR_SHAPE, "%s: Expected %s size %s, got %s", op, what,
                             tsi_shape_str(want), tsi_shape_str(t->shape)),
               false;
    return true;
}

static rnn_m *as_rnn(ts_module *mod, bool cell, const char *op) {
    if (mod && mod->forward == (cell ? rnn_cell_forward_fn : rnn_layer_forward))
        return (rnn_m *)mod;
    if (!ts_error())
        tsi_error_set(TS_ERR_ARG, "%s: expected %s module, got %s", op,
                      cell ? "an RNNCell, LSTMCell or GRUCell" : "an RNN, LSTM or GRU",
                      mod ? mod->type_name : "NULL");
    return NULL;
}

/* the input's dtype and device against the weights' */
static bool check_input_vs_weights(const char *op, rnn_m *m, ts_tensor *x, ts_tensor *const *more,
                                   int n_more) {
    ts_tensor *w = tsi_param_at(&m->base, 0);
    ts_tensor *all[5] = {x, w, NULL, NULL, NULL};
    for (int i = 0; i < n_more && i < 3; i++) all[2 + i] = more[i];
    ts_device dev;
    if (!tsi_same_device(op, all, 2 + n_more, false, &dev)) return false;
    if (!tsi_is_float(x->dtype) || x->dtype != w->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: input must have the parameters' floating dtype %s, got %s", op,
                             ts_dtype_name(w->dtype), tsi_desc(x)),
               false;
    return true;
}

/* host arrays of T entries for one direction's steps: outputs, inputs, weight sink slices and
 * input states */
typedef struct seq_bufs {
    int64_t T;
    ts_tensor **ys, **xs, **zs, **hin;
} seq_bufs;

/* One direction of one layer over the sequence: x2 [T * B, I] the layer's input, *h (*c) the
 * initial state on entry and the final one on return; live_all [T, B, 1] or NULL. Returns the
 * outputs [T, B, Hout] (NULL + error). */
static ts_tensor *run_direction(rnn_m *m, const dir_w *w, int d, ts_tensor *x2, ts_tensor *live_all,
                                int64_t B, seq_bufs *s, ts_tensor **h, ts_tensor **c) {
    const int64_t T = s->T;
    ts_tensor **ys = s->ys, **xs = s->xs, **zs = s->zs, **hin = s->hin;
    if (m->kind != K_RNN && !live_all && !w->w_hr && !tsi_autocast_any &&
        tsi_rnn_seq_fused_takes(x2, w->w_hh, m->kind == K_GRU ? w->b_hh : NULL, *h, *c)) {
        /* the whole sequence as one op (rnn_seq_fused.c); the LSTM's b_hh joins b_ih in the
         * input projection, the GRU's stays apart for its n gate */
        const bool lstm = m->kind == K_LSTM;
        const tsi_rnn_proj proj = {x2, w->w_ih,
                                   lstm && w->b_hh ? ts_add(w->b_ih, w->b_hh) : w->b_ih};
        ts_tensor *xw = ts_linear(x2, w->w_ih, proj.b);
        xw = xw ? ts_view(xw, TS_SHAPE(T, B, xw->shape.dims[1])) : NULL;
        ts_tensor *y = NULL, *hn = NULL, *cn = NULL;
        if (!xw || !tsi_rnn_seq_fused(lstm, xw, w->w_hh, lstm ? NULL : w->b_hh, *h, *c, d != 0,
                                      &proj, &y, &hn, &cn))
            return NULL;
        *h = hn;
        if (lstm) *c = cn;
        return y;
    }
    /* Where the gates are fused, w_hh's gradient is one product over the sequence (the weight
     * sink) and the steps multiply by a detached w_hh. The LSTM's gate gradients are those of
     * both projections: b_hh joins b_ih in the input projection (one bias gradient for both) and
     * the sink wraps that projection, whose gradient it passes on (every step's gradient of gh,
     * assembled once); the GRU's n gate keeps b_hn apart, so its steps hand the sink their gh
     * gradients through slices z_t. */
    const bool sinkable =
        m->kind != K_RNN && !tsi_autocast_any && tsi_rnn_cell_fused_takes(x2, NULL, *c ? *c : *h);
    const bool fold = sinkable && m->kind == K_LSTM;
    dir_w wp = *w, wd = *w; /* the steps' product: w's, then detached where a sink is */
    if (fold) wp.b_hh = wd.b_hh = NULL;
    ts_tensor *xw = ts_linear(x2, w->w_ih, fold && w->b_hh ? ts_add(w->b_ih, w->b_hh) : w->b_ih);
    xw = xw ? ts_view(xw, TS_SHAPE(T, B, xw->shape.dims[1])) : NULL;
    ts_tensor *sink = NULL;
    bool ok =
        xw && (!sinkable || tsi_rnn_weight_sink(w->w_hh, wp.b_hh, fold ? xw : NULL, T, B, &sink));
    if (ok && sink) {
        wd.w_hh = ts_detach(w->w_hh);
        wd.b_hh = wp.b_hh ? ts_detach(wp.b_hh) : NULL;
        ok = wd.w_hh && (!wp.b_hh || wd.b_hh) && (fold || ts_split(sink, 1, 0, zs, (int)T) == T);
        if (fold) xw = sink;
    }
    /* the steps' inputs as views made by ONE split node: its backward assembles the [T, B, G*H]
     * gradient in one pass (a select per step would zero-fill and add the whole buffer each
     * step: T^2 traffic) */
    ok = ok && ts_split(xw, 1, 0, xs, (int)T) == T;
    const bool zslices = sink && !fold;
    for (int64_t k = 0; ok && k < T; k++) {
        const int64_t t = d ? T - 1 - k : k;
        ts_tensor *hp = *h, *cp = *c;
        hin[t] = *h;
        ok = step(m, w, sink ? &wd : &wp, zslices ? &wp : NULL,
                  zslices ? ts_squeeze_dim(zs[t], 0) : NULL, NULL, ts_squeeze_dim(xs[t], 0), h, c);
        if (ok && live_all) {
            /* past a sequence's end the state stays, the output is zero */
            ts_tensor *live = ts_select(live_all, 0, t);
            ys[t] = ts_where(live, *h, ts_zeros_like(*h));
            *h = ts_where(live, *h, hp);
            if (cp) *c = ts_where(live, *c, cp);
            ok = ys[t] && *h && (!cp || *c);
        } else {
            ys[t] = *h;
        }
    }
    if (ok && sink && !tsi_rnn_weight_sink_states(sink, hin, T)) {
        if (!ts_error()) tsi_error_set(TS_ERR_OOM, "%s: out of memory", m->base.type_name);
        ok = false;
    }
    return ok ? ts_stack(ys, (int)T, 0) : NULL;
}

ts_tensor *ts_rnn_forward(ts_module *mod, ts_tensor *input, ts_tensor *h0, ts_tensor *c0,
                          ts_tensor *lengths, ts_tensor **h_n, ts_tensor **c_n) {
    tsi_init();
    if (h_n) *h_n = NULL;
    if (c_n) *c_n = NULL;
    rnn_m *m = as_rnn(mod, false, OPF);
    if (!m || !tsi_check_input(OPF, input, "input")) return NULL;
    const char *op = mod->type_name;
    if (c0 && m->kind != K_LSTM)
        return tsi_error_set(TS_ERR_ARG, "%s: c0 is only for LSTM", op), NULL;
    ts_tensor *more[3] = {h0, c0, NULL};
    if (!check_input_vs_weights(op, m, input, more, 2)) return NULL;
    const int nd = input->shape.ndim;
    if (nd != 2 && nd != 3)
        return tsi_error_set(TS_ERR_SHAPE, "%s: Expected input to be 2D or 3D, got %dD input", op,
                             nd),
               NULL;
    if (input->shape.dims[nd - 1] != m->input_size)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: input.size(-1) must be equal to input_size. Expected %lld, got "
                             "%lld",
                             op, (long long)m->input_size, (long long)input->shape.dims[nd - 1]),
               NULL;
    const bool batched = nd == 3;
    const int64_t T = input->shape.dims[batched && m->batch_first ? 1 : 0];
    const int64_t B = batched ? input->shape.dims[m->batch_first ? 0 : 1] : 1;
    const int dirs = m->bidirectional ? 2 : 1;
    const int64_t H = m->hidden_size, h_out = m->proj_size ? m->proj_size : H,
                  LD = m->num_layers * dirs;
    if (T < 1 || B < 1)
        return tsi_error_set(TS_ERR_SHAPE, "%s: input %s has no time steps or no batch", op,
                             tsi_shape_str(input->shape)),
               NULL;
    if (!check_state(op, h0, batched ? "hidden[0]" : "hidden[0] (unbatched)", input,
                     batched ? TS_SHAPE(LD, B, h_out) : TS_SHAPE(LD, h_out)) ||
        !check_state(op, c0, batched ? "hidden[1]" : "hidden[1] (unbatched)", input,
                     batched ? TS_SHAPE(LD, B, H) : TS_SHAPE(LD, H)))
        return NULL;
    if (lengths) {
        if (lengths->shape.ndim != 1 || lengths->shape.dims[0] != B || !tsi_is_int(lengths->dtype))
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: lengths must be an integer tensor [%lld], got %s", op,
                                 (long long)B, tsi_desc(lengths)),
                   NULL;
    }

    ts_scope_begin();
    ts_tensor *x = input;
    if (!batched) {
        x = ts_unsqueeze(x, 1);
        if (h0) h0 = ts_unsqueeze(h0, 1);
        if (c0) c0 = ts_unsqueeze(c0, 1);
    } else if (m->batch_first) {
        x = ts_transpose(x, 0, 1);
    }
    ts_tensor *live_all = NULL; /* [T, B, 1] bool: step t is inside sequence b */
    if (lengths) {
        ts_tensor *len = ts_to(ts_to_dtype(lengths, TS_I64), ts_device_of(input));
        ts_tensor *steps =
            ts_arange(0, (double)T, 1, (ts_opts){.dtype = TS_I64, .device = ts_device_of(input)});
        live_all = ts_unsqueeze(ts_gt(ts_unsqueeze(len, 0), ts_unsqueeze(steps, 1)), 2);
    }
    const size_t tn = (size_t)T;
    seq_bufs bufs = {T, calloc(tn, sizeof(ts_tensor *)), calloc(tn, sizeof(ts_tensor *)),
                     calloc(tn, sizeof(ts_tensor *)), calloc(tn, sizeof(ts_tensor *))};
    ts_tensor **hs = calloc((size_t)LD, sizeof *hs), **cs = calloc((size_t)LD, sizeof *cs);
    ts_tensor *outs[2] = {NULL, NULL};
    bool ok = bufs.ys && bufs.xs && bufs.zs && bufs.hin && hs && cs;
    if (!ok) tsi_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    for (int64_t l = 0; ok && l < m->num_layers; l++) {
        const int64_t in = x->shape.dims[2];
        ts_tensor *x2 = ts_reshape(x, TS_SHAPE(T * B, in));
        for (int d = 0; ok && d < dirs; d++) {
            dir_w w = weights_of(m, l, d);
            const int64_t idx = l * dirs + d;
            ts_tensor *h = h0 ? ts_select(h0, 0, idx) : zeros_state(B, h_out, input);
            ts_tensor *c = m->kind != K_LSTM ? NULL
                           : c0              ? ts_select(c0, 0, idx)
                                             : zeros_state(B, H, input);
            ok = x2 && h && (m->kind != K_LSTM || c);
            ok = ok && (outs[d] = run_direction(m, &w, d, x2, live_all, B, &bufs, &h, &c)) != NULL;
            hs[idx] = h, cs[idx] = c;
        }
        if (!ok) break;
        x = dirs == 2 ? ts_cat(outs, 2, 2) : outs[0];
        if (x && l + 1 < m->num_layers && m->dropout > 0 && mod->training)
            x = ts_dropout(x, m->dropout, true);
        ok = x != NULL;
    }
    ts_tensor *out = NULL, *hn = NULL, *cn = NULL;
    if (ok) {
        out = !batched ? ts_squeeze_dim(x, 1) : m->batch_first ? ts_transpose(x, 0, 1) : x;
        hn = ts_stack(hs, (int)LD, 0);
        if (m->kind == K_LSTM) cn = ts_stack(cs, (int)LD, 0);
        if (!batched) {
            hn = hn ? ts_squeeze_dim(hn, 1) : NULL;
            if (cn) cn = ts_squeeze_dim(cn, 1);
        }
        if (!out || !hn || (m->kind == K_LSTM && !cn)) out = NULL;
    }
    free(bufs.ys);
    free(bufs.xs);
    free(bufs.zs);
    free(bufs.hin);
    free(hs);
    free(cs);
    out = ts_keep(out);
    if (out && h_n) *h_n = ts_keep(hn);
    if (out && c_n && cn) *c_n = ts_keep(cn);
    ts_scope_end();
    if (out && ((h_n && !*h_n) || (c_n && cn && !*c_n))) { /* a keep ran out of memory */
        ts_release(out);
        if (h_n) ts_release(*h_n), *h_n = NULL;
        if (c_n) ts_release(*c_n), *c_n = NULL;
        return NULL;
    }
    return out;
}

ts_tensor *ts_rnn_cell_forward(ts_module *mod, ts_tensor *input, ts_tensor *hx, ts_tensor *cx,
                               ts_tensor **c_out) {
    tsi_init();
    if (c_out) *c_out = NULL;
    rnn_m *m = as_rnn(mod, true, "rnn_cell_forward");
    if (!m || !tsi_check_input("rnn_cell_forward", input, "input")) return NULL;
    const char *op = mod->type_name;
    if (cx && m->kind != K_LSTM)
        return tsi_error_set(TS_ERR_ARG, "%s: cx is only for LSTMCell", op), NULL;
    ts_tensor *more[2] = {hx, cx};
    if (!check_input_vs_weights(op, m, input, more, 2)) return NULL;
    const int nd = input->shape.ndim;
    if (nd != 1 && nd != 2)
        return tsi_error_set(TS_ERR_SHAPE, "%s: Expected input to be 1D or 2D, got %dD input", op,
                             nd),
               NULL;
    if (input->shape.dims[nd - 1] != m->input_size)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: input has inconsistent input_size: got %lld expected %lld", op,
                             (long long)input->shape.dims[nd - 1], (long long)m->input_size),
               NULL;
    const bool batched = nd == 2;
    const int64_t B = batched ? input->shape.dims[0] : 1, H = m->hidden_size;
    ts_shape want = batched ? TS_SHAPE(B, H) : TS_SHAPE(H);
    if (!check_state(op, hx, "hx", input, want) || !check_state(op, cx, "cx", input, want))
        return NULL;
    ts_scope_begin();
    ts_tensor *x = batched ? input : ts_unsqueeze(input, 0);
    ts_tensor *h = hx ? (batched ? hx : ts_unsqueeze(hx, 0)) : zeros_state(B, H, input);
    ts_tensor *c = m->kind != K_LSTM ? NULL
                   : cx              ? (batched ? cx : ts_unsqueeze(cx, 0))
                                     : zeros_state(B, H, input);
    dir_w w = weights_of(m, 0, 0);
    ts_tensor *xw = input_proj(&w, x);
    ts_tensor *out = NULL;
    if (xw && h && (m->kind != K_LSTM || c) && step(m, &w, &w, NULL, NULL, x, xw, &h, &c)) {
        out = batched ? h : ts_squeeze_dim(h, 0);
        if (c && !batched) c = ts_squeeze_dim(c, 0);
        if (c_out && m->kind == K_LSTM && !c) out = NULL;
    }
    out = ts_keep(out);
    if (out && c_out && m->kind == K_LSTM) *c_out = ts_keep(c);
    ts_scope_end();
    if (out && c_out && m->kind == K_LSTM && !*c_out) {
        ts_release(out);
        return NULL;
    }
    return out;
}
