/* ops_nn_rnn.c — ONNX's recurrent layers (RNN, GRU, LSTM): forward, reverse or bidirectional,
 * each time step composed from matmul and the activations, so the unrolled graph is
 * differentiable; sequence_lens masks the steps past each sequence's end (state kept, output 0). */
#include <stdlib.h>
#include <string.h>

#include "onnx/ops_nn.h"

typedef enum rnn_kind { K_RNN, K_GRU, K_LSTM } rnn_kind;

static const int n_gates[] = {1, 3, 4};
static const int n_acts[] = {1, 2, 3}; /* activations per direction */

typedef enum act_kind {
    A_RELU,
    A_TANH,
    A_SIGMOID,
    A_AFFINE,
    A_LEAKY_RELU,
    A_THRESHOLDED_RELU,
    A_SCALED_TANH,
    A_HARD_SIGMOID,
    A_ELU,
    A_SOFTSIGN,
    A_SOFTPLUS,
    A_BAD
} act_kind;

static const char *const act_names[] = {
    "Relu",       "Tanh",        "Sigmoid", "Affine",   "LeakyRelu", "ThresholdedRelu",
    "ScaledTanh", "HardSigmoid", "Elu",     "Softsign", "Softplus"};

typedef struct act {
    act_kind kind;
    double alpha, beta;
} act;

/* the activation's alpha and beta defaults (those of the ONNX operators of the same name); the
 * count it takes from activation_alpha / activation_beta */
static int act_params(act_kind k, double *alpha, double *beta) {
    switch (k) {
    case A_AFFINE:
        *alpha = 1, *beta = 0;
        return 2;
    case A_LEAKY_RELU:
        *alpha = 0.01;
        return 1;
    case A_THRESHOLDED_RELU:
        *alpha = 1;
        return 1;
    case A_SCALED_TANH:
        *alpha = 1, *beta = 1;
        return 2;
    case A_HARD_SIGMOID:
        *alpha = 0.2, *beta = 0.5;
        return 2;
    case A_ELU:
        *alpha = 1;
        return 1;
    default:
        return 0;
    }
}

typedef struct rnn_cfg {
    rnn_kind kind;
    int dirs;     /* 1 or 2 */
    bool reverse; /* one direction, run backwards */
    int64_t hidden;
    bool layout1; /* batch first */
    bool linear_before_reset;
    bool has_clip;
    double clip;
    act acts[2][3];
} rnn_cfg;

static rnn_kind kind_of(const tso_node *n) {
    return !strcmp(n->op_type, "GRU") ? K_GRU : !strcmp(n->op_type, "LSTM") ? K_LSTM : K_RNN;
}

/* the activations: named ones (alpha and beta consumed in order by those that take them, as
 * onnxruntime reads the lists), else the defaults */
static bool read_acts(const tso_node *n, rnn_cfg *r) {
    static const act_kind defaults[3][3] = {
        {A_TANH}, {A_SIGMOID, A_TANH}, {A_SIGMOID, A_TANH, A_TANH}};
    const Onnx__AttributeProto *a = tso_attr(n, "activations");
    int per = n_acts[r->kind], want = per * r->dirs;
    if (a && (int)a->n_strings != want)
        return tso_fail(n, TS_ERR_FORMAT, "activations has %zu names, expected %d", a->n_strings,
                        want);
    const float *al, *be;
    int n_al = tso_attr_floats(n, "activation_alpha", &al),
        n_be = tso_attr_floats(n, "activation_beta", &be);
    int ia = 0, ib = 0;
    for (int i = 0; i < want; i++) {
        act *x = &r->acts[i / per][i % per];
        if (!a) {
            x->kind = defaults[r->kind][i % per];
            continue;
        }
        char name[32];
        size_t len = a->strings[i].len < sizeof name - 1 ? a->strings[i].len : sizeof name - 1;
        memcpy(name, a->strings[i].data, len);
        name[len] = '\0';
        int k = 0;
        while (k < A_BAD && strcmp(name, act_names[k])) k++;
        if (k == A_BAD)
            return tso_fail(n, TS_ERR_UNSUPPORTED, "activation '%s' is not supported", name);
        x->kind = (act_kind)k;
        int takes = act_params(x->kind, &x->alpha, &x->beta);
        if (takes >= 1 && ia < n_al) x->alpha = al[ia++];
        if (takes >= 2 && ib < n_be) x->beta = be[ib++];
    }
    return true;
}

static bool read_cfg(const tso_node *n, rnn_cfg *r) {
    memset(r, 0, sizeof *r);
    r->kind = kind_of(n);
    char buf[32];
    const char *dir = tso_attr_string(n, "direction", "forward", buf, sizeof buf);
    if (strcmp(dir, "forward") && strcmp(dir, "reverse") && strcmp(dir, "bidirectional"))
        return tso_fail(n, TS_ERR_UNSUPPORTED, "direction '%s' is not supported", dir);
    r->dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
    r->reverse = !strcmp(dir, "reverse");
    r->hidden = tso_attr_int(n, "hidden_size", 0);
    r->layout1 = tso_attr_int(n, "layout", 0) == 1;
    r->linear_before_reset = tso_attr_int(n, "linear_before_reset", 0) != 0;
    r->has_clip = tso_attr(n, "clip") != NULL;
    r->clip = tso_attr_float(n, "clip", 0);
    if (r->hidden < 1) return tso_fail(n, TS_ERR_FORMAT, "needs a positive hidden_size");
    if (tso_attr_int(n, "layout", 0) > 1)
        return tso_fail(n, TS_ERR_FORMAT, "layout must be 0 or 1");
    if (r->kind == K_LSTM && tso_attr_int(n, "input_forget", 0))
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "input_forget=1 (coupled input and forget gates) is not supported");
    if (r->kind == K_LSTM && r->has_clip)
        return tso_fail(n, TS_ERR_UNSUPPORTED,
                        "clip is not supported for LSTM (where it applies to the cell state's "
                        "activation is unspecified)");
    return read_acts(n, r);
}

TSO_NN_CHECK(tso_nn_check_rnn) {
    rnn_cfg r;
    return read_cfg(n, &r);
}

static ts_tensor *activate(const rnn_cfg *r, const act *a, ts_tensor *x) {
    if (r->has_clip) x = ts_clamp(x, -r->clip, r->clip);
    switch (a->kind) {
    case A_RELU:
        return ts_relu(x);
    case A_TANH:
        return ts_tanh(x);
    case A_SIGMOID:
        return ts_sigmoid(x);
    case A_AFFINE:
        return ts_add_scalar(ts_mul_scalar(x, a->alpha), a->beta);
    case A_LEAKY_RELU:
        return ts_where(ts_ge_scalar(x, 0), x, ts_mul_scalar(x, a->alpha));
    case A_THRESHOLDED_RELU:
        return ts_where(ts_gt_scalar(x, a->alpha), x, ts_zeros_like(x));
    case A_SCALED_TANH:
        return ts_mul_scalar(ts_tanh(ts_mul_scalar(x, a->beta)), a->alpha);
    case A_HARD_SIGMOID:
        return ts_clamp(ts_add_scalar(ts_mul_scalar(x, a->alpha), a->beta), 0, 1);
    case A_ELU:
        return ts_where(ts_gt_scalar(x, 0), x,
                        ts_mul_scalar(ts_sub_scalar(ts_exp(x), 1), a->alpha));
    case A_SOFTSIGN:
        return ts_div(x, ts_add_scalar(ts_abs(x), 1));
    default:
        return ts_log1p(ts_exp(x));
    }
}

/* ------------------------------------------------------------------ one direction */
/* One direction's weights (gate blocks of `hidden` rows) and state. */
typedef struct dir_state {
    ts_tensor *w, *r;   /* [G*H, I], [G*H, H] */
    ts_tensor *wb, *rb; /* [G*H] or NULL */
    ts_tensor *p;       /* LSTM peepholes [3H] or NULL */
    ts_tensor *h, *cell;
    const act *acts;
} dir_state;

/* gate block g of a [..., G*H] tensor */
static ts_tensor *gate(ts_tensor *t, int g, int64_t hidden) {
    return t ? ts_narrow(t, ts_ndim(t) - 1, g * hidden, hidden) : NULL;
}

/* h @ R^T for gate blocks g0 .. g0 + count - 1 */
static ts_tensor *recur(const dir_state *s, int g0, int count, int64_t hidden) {
    return ts_matmul(s->h, ts_t(ts_narrow(s->r, 0, g0 * hidden, count * hidden)));
}

/* one step: xw is x_t @ W^T + Wb (+ Rb, but for GRU) [B, G*H]; sets s->h (and s->cell) to the
 * new state */
static bool step(const rnn_cfg *r, dir_state *s, ts_tensor *xw) {
    int64_t H = r->hidden;
    const act *f = &s->acts[0], *g = &s->acts[1];
    if (r->kind == K_RNN) {
        s->h = activate(r, f, ts_add(xw, recur(s, 0, 1, H)));
        return s->h != NULL;
    }
    if (r->kind == K_GRU) {
        /* gates z, r, h; the h gate's Rb is added to h's recurrence (linear_before_reset: inside
         * the reset gate's product) */
        ts_tensor *hr = recur(s, 0, 2, H);
        if (hr && s->rb) hr = ts_add(hr, ts_narrow(s->rb, 0, 0, 2 * H));
        ts_tensor *z = activate(r, f, ts_add(gate(xw, 0, H), gate(hr, 0, H)));
        ts_tensor *rg = activate(r, f, ts_add(gate(xw, 1, H), gate(hr, 1, H)));
        ts_tensor *rh = ts_narrow(s->r, 0, 2 * H, H), *rbh = gate(s->rb, 2, H);
        ts_tensor *inner;
        if (r->linear_before_reset) {
            inner = ts_matmul(s->h, ts_t(rh));
            if (rbh) inner = ts_add(inner, rbh);
            inner = ts_mul(rg, inner);
        } else {
            inner = ts_matmul(ts_mul(rg, s->h), ts_t(rh));
            if (rbh) inner = ts_add(inner, rbh);
        }
        ts_tensor *cand = activate(r, g, ts_add(gate(xw, 2, H), inner));
        /* (1 - z) * cand + z * h */
        s->h = ts_add(ts_mul(ts_rsub_scalar(z, 1), cand), ts_mul(z, s->h));
        return s->h != NULL;
    }
    /* LSTM: gates i, o, f, c; peepholes i, o, f */
    const act *h_act = &s->acts[2];
    ts_tensor *pre = ts_add(xw, recur(s, 0, 4, H));
    ts_tensor *pi = gate(pre, 0, H), *po = gate(pre, 1, H), *pf = gate(pre, 2, H),
              *pc = gate(pre, 3, H);
    if (s->p) {
        pi = ts_add(pi, ts_mul(gate(s->p, 0, H), s->cell));
        pf = ts_add(pf, ts_mul(gate(s->p, 2, H), s->cell));
    }
    ts_tensor *i = activate(r, f, pi), *fg = activate(r, f, pf), *cc = activate(r, g, pc);
    s->cell = ts_add(ts_mul(fg, s->cell), ts_mul(i, cc));
    if (s->p) po = ts_add(po, ts_mul(gate(s->p, 1, H), s->cell));
    s->h = ts_mul(activate(r, f, po), activate(r, h_act, s->cell));
    return s->h != NULL && s->cell != NULL;
}

/* runs one direction over x [T, B, I]; writes each step's output into ys[t] */
static bool run_direction(const rnn_cfg *r, dir_state *s, ts_tensor *x, ts_tensor *lens,
                          bool backwards, ts_tensor **ys) {
    int64_t T = ts_size(x, 0);
    /* x @ W^T for every step at once, with Wb, and Rb but for GRU (whose step adds it) */
    ts_tensor *xw = ts_matmul(x, ts_t(s->w));
    if (xw && s->wb) xw = ts_add(xw, s->wb);
    if (xw && s->rb && r->kind != K_GRU) xw = ts_add(xw, s->rb);
    if (!xw) return false;
    for (int64_t k = 0; k < T; k++) {
        int64_t t = backwards ? T - 1 - k : k;
        ts_tensor *h0 = s->h, *c0 = s->cell;
        if (!step(r, s, ts_select(xw, 0, t))) return false;
        if (!lens) {
            ys[t] = s->h;
            continue;
        }
        /* past a sequence's end: the state stays, the output is zero */
        ts_tensor *live = ts_reshape(ts_gt_scalar(lens, (double)t), TS_SHAPE(-1, 1));
        ys[t] = ts_where(live, s->h, ts_zeros_like(s->h));
        s->h = ts_where(live, s->h, h0);
        if (r->kind == K_LSTM) s->cell = ts_where(live, s->cell, c0);
        if (!ys[t] || !s->h || (r->kind == K_LSTM && !s->cell)) return false;
    }
    return true;
}

/* ------------------------------------------------------------------ the operators */
/* input i's slice for direction d ([D, ...] -> [...]), NULL when absent */
static ts_tensor *per_dir(const tso_node *n, ts_tensor *const *in, int i, int d) {
    ts_tensor *t = tso_nn_opt(n, in, i);
    return t ? ts_select(t, 0, d) : NULL;
}

/* an initial state [D, B, H] ([B, D, H] with layout 1) for direction d, zeros when absent */
static ts_tensor *initial(const tso_node *n, ts_tensor *const *in, int i, int d, bool layout1,
                          ts_tensor *x, int64_t hidden) {
    ts_tensor *t = tso_nn_opt(n, in, i);
    if (t) return ts_select(t, layout1 ? 1 : 0, d);
    return ts_zeros(TS_SHAPE(ts_size(x, 1), hidden),
                    (ts_opts){.dtype = ts_dtype_of(x), .device = ts_device_of(x)});
}

TSO_NN_RUN(tso_nn_run_recurrent) {
    (void)c;
    rnn_cfg r;
    if (!read_cfg(n, &r)) return false;
    ts_tensor *x = in[0];
    if (ts_ndim(x) != 3) return tso_fail(n, TS_ERR_SHAPE, "X must be 3-D, got %s", tsi_desc(x));
    if (r.layout1) x = ts_transpose(x, 0, 1); /* [B, T, I] -> [T, B, I] */
    int64_t T = ts_size(x, 0), H = r.hidden, G = n_gates[r.kind];
    ts_tensor *w = in[1], *rr = in[2], *b = tso_nn_opt(n, in, 3), *lens = tso_nn_opt(n, in, 4);
    if (ts_ndim(w) != 3 || ts_size(w, 0) != r.dirs || ts_size(w, 1) != G * H || ts_ndim(rr) != 3 ||
        ts_size(rr, 1) != G * H || ts_size(rr, 2) != H ||
        (b && ts_size(b, ts_ndim(b) - 1) != 2 * G * H))
        return tso_fail(n, TS_ERR_SHAPE,
                        "W %s, R %s or B does not fit %d direction(s) of hidden size %lld",
                        tsi_desc(w), tsi_desc(rr), r.dirs, (long long)H);
    if (lens && ts_dtype_is_floating(ts_dtype_of(lens)))
        return tso_fail(n, TS_ERR_DTYPE, "sequence_lens must be integers, got %s", tsi_desc(lens));
    if (!T) return tso_fail(n, TS_ERR_SHAPE, "X has no time steps");
    ts_tensor **ys = calloc((size_t)(T * r.dirs), sizeof *ys);
    if (!ys) return tsi_error_set(TS_ERR_OOM, "%s: out of host memory", n->op_type), false;
    ts_tensor *hs[2] = {0}, *cs[2] = {0};
    bool ok = true;
    for (int d = 0; ok && d < r.dirs; d++) {
        ts_tensor *bd = per_dir(n, in, 3, d);
        dir_state s = {.w = ts_select(w, 0, d),
                       .r = ts_select(rr, 0, d),
                       .wb = gate(bd, 0, G * H),
                       .rb = gate(bd, 1, G * H),
                       .p = r.kind == K_LSTM ? per_dir(n, in, 7, d) : NULL,
                       .h = initial(n, in, 5, d, r.layout1, x, H),
                       .cell = r.kind == K_LSTM ? initial(n, in, 6, d, r.layout1, x, H) : NULL,
                       .acts = r.acts[d]};
        ok = s.w && s.r && s.h && (r.kind != K_LSTM || s.cell) &&
             run_direction(&r, &s, x, lens, d == 1 || r.reverse, ys + d * T);
        hs[d] = s.h, cs[d] = s.cell;
    }
    /* Y [T, D, B, H] (layout 1: [B, T, D, H]); Y_h, Y_c [D, B, H] ([B, D, H]) */
    ts_tensor *y = NULL;
    if (ok && tso_nn_wants(n, 0)) {
        ts_tensor *per[2];
        for (int d = 0; d < r.dirs; d++) per[d] = ts_stack(ys + d * T, (int)T, 0);
        y = ts_stack(per, r.dirs, 1);
        if (y && r.layout1) y = ts_permute(y, TS_DIMS(2, 0, 1, 3));
        ok = (out[0] = y) != NULL;
    }
    free(ys);
    for (int o = 1; ok && o < (r.kind == K_LSTM ? 3 : 2); o++) {
        if (!tso_nn_wants(n, o)) continue;
        ts_tensor *st = ts_stack(o == 1 ? hs : cs, r.dirs, r.layout1 ? 1 : 0);
        ok = (out[o] = st) != NULL;
    }
    return ok || tso_fail_pending(n);
}
