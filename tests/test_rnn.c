/* test_rnn.c — nn.RNN / LSTM / GRU and their cells against a float64 reference written here
 * (PyTorch's equations, gate orders i f g o and r z n), on every test device: layers 1-2,
 * bidirectional, batch_first, unbatched, proj_size, initial states, lengths, dropout, no bias;
 * parameter names and shapes; gradients by ts_gradcheck; errors for bad shapes and dtypes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ts_test.h"

enum { RNN_TANH, RNN_RELU, LSTM, GRU };
static const char *const kind_str[] = {"RNN(tanh)", "RNN(relu)", "LSTM", "GRU"};

typedef struct cfg {
    int kind;
    int64_t I, H, L, P; /* P: proj_size */
    bool bidir, batch_first, bias, unbatched, with_h0, with_lens;
    int64_t T, B;
} cfg;

static ts_module *make(const cfg *c) {
    ts_rnn_opts o = {.num_layers = c->L,
                     .nonlinearity = c->kind == RNN_RELU ? TS_RNN_RELU : TS_RNN_TANH,
                     .no_bias = !c->bias,
                     .batch_first = c->batch_first,
                     .bidirectional = c->bidir,
                     .proj_size = c->P};
    return c->kind == LSTM  ? ts_lstm_new(c->I, c->H, o)
           : c->kind == GRU ? ts_gru_new(c->I, c->H, o)
                            : ts_rnn_new(c->I, c->H, o);
}

/* a tensor's values as f64 on the host (malloc'ed) */
static double *host(ts_tensor *t) {
    ts_scope_begin();
    ts_tensor *h = ts_contiguous(ts_to_dtype(ts_to(ts_detach(t), ts_cpu()), TS_F64));
    int64_t n = ts_numel(t);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (ts_copy_to_host(h, v, (size_t)n * sizeof *v) != TS_OK) v[0] = NAN;
    ts_scope_end();
    return v;
}

static double sigm(double x) { return 1 / (1 + exp(-x)); }

/* ------------------------------------------------------------------ the float64 reference */
typedef struct refw {
    double *wih, *whh, *bih, *bhh, *whr;
} refw;

/* one step of direction weights w: x [B, in], h [B, Hout], c [B, H] updated in place */
static void ref_step(const cfg *c, const refw *w, int64_t in, const double *x, double *h,
                     double *cc) {
    const int64_t H = c->H, Ho = c->P ? c->P : H, B = c->B;
    const int G = c->kind == LSTM ? 4 : c->kind == GRU ? 3 : 1;
    double *gi = calloc((size_t)(G * H), sizeof *gi), *gh = calloc((size_t)(G * H), sizeof *gh);
    double *hn = calloc((size_t)(B * Ho), sizeof *hn), *hc = calloc((size_t)H, sizeof *hc);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t r = 0; r < G * H; r++) {
            double si = w->bih ? w->bih[r] : 0, sh = w->bhh ? w->bhh[r] : 0;
            for (int64_t k = 0; k < in; k++) si += w->wih[r * in + k] * x[b * in + k];
            for (int64_t k = 0; k < Ho; k++) sh += w->whh[r * Ho + k] * h[b * Ho + k];
            gi[r] = si, gh[r] = sh;
        }
        if (c->kind == LSTM) {
            for (int64_t j = 0; j < H; j++) {
                double i = sigm(gi[j] + gh[j]), f = sigm(gi[H + j] + gh[H + j]),
                       g = tanh(gi[2 * H + j] + gh[2 * H + j]),
                       o = sigm(gi[3 * H + j] + gh[3 * H + j]);
                cc[b * H + j] = f * cc[b * H + j] + i * g;
                hc[j] = o * tanh(cc[b * H + j]);
            }
            if (c->P) {
                for (int64_t p = 0; p < Ho; p++) {
                    double s = 0;
                    for (int64_t j = 0; j < H; j++) s += w->whr[p * H + j] * hc[j];
                    hn[b * Ho + p] = s;
                }
            } else {
                for (int64_t j = 0; j < H; j++) hn[b * H + j] = hc[j];
            }
        } else if (c->kind == GRU) {
            for (int64_t j = 0; j < H; j++) {
                double r = sigm(gi[j] + gh[j]), z = sigm(gi[H + j] + gh[H + j]);
                double n = tanh(gi[2 * H + j] + r * gh[2 * H + j]);
                hn[b * H + j] = (1 - z) * n + z * h[b * H + j];
            }
        } else {
            for (int64_t j = 0; j < H; j++) {
                double a = gi[j] + gh[j];
                hn[b * H + j] = c->kind == RNN_RELU ? (a > 0 ? a : 0) : tanh(a);
            }
        }
    }
    for (int64_t k = 0; k < B * Ho; k++) h[k] = hn[k];
    free(gi), free(gh), free(hn), free(hc);
}

/* x [T, B, I] time-major; h0 [L*D, B, Ho], c0 [L*D, B, H] or NULL; lens [B] or NULL; drop_all:
 * the layers after the first see zeros (dropout p = 1). out [T, B, D*Ho], hn, cn. */
static void ref_run(const cfg *c, refw *ws, const double *x, const double *h0, const double *c0,
                    const int64_t *lens, bool drop_all, double *out, double *hn, double *cn) {
    const int64_t T = c->T, B = c->B, H = c->H, Ho = c->P ? c->P : H;
    const int D = c->bidir ? 2 : 1;
    int64_t in = c->I;
    double *cur = malloc((size_t)(T * B * (in > D * Ho ? in : D * Ho)) * sizeof *cur);
    for (int64_t k = 0; k < T * B * in; k++) cur[k] = x[k];
    double *nxt = calloc((size_t)(T * B * D * Ho), sizeof *nxt);
    double *h = malloc((size_t)(B * Ho) * sizeof *h), *cc = malloc((size_t)(B * H) * sizeof *cc);
    double *hp = malloc((size_t)(B * Ho) * sizeof *hp), *cp = malloc((size_t)(B * H) * sizeof *cp);
    for (int64_t l = 0; l < c->L; l++) {
        if (l > 0 && drop_all)
            for (int64_t k = 0; k < T * B * in; k++) cur[k] = 0;
        for (int d = 0; d < D; d++) {
            const int64_t idx = l * D + d;
            for (int64_t k = 0; k < B * Ho; k++) h[k] = h0 ? h0[idx * B * Ho + k] : 0;
            for (int64_t k = 0; k < B * H; k++) cc[k] = c0 ? c0[idx * B * H + k] : 0;
            for (int64_t s = 0; s < T; s++) {
                int64_t t = d ? T - 1 - s : s;
                for (int64_t k = 0; k < B * Ho; k++) hp[k] = h[k];
                for (int64_t k = 0; k < B * H; k++) cp[k] = cc[k];
                ref_step(c, &ws[idx], in, cur + t * B * in, h, cc);
                for (int64_t b = 0; b < B; b++) {
                    bool live = !lens || t < lens[b];
                    for (int64_t j = 0; j < Ho; j++) {
                        nxt[(t * B + b) * D * Ho + d * Ho + j] = live ? h[b * Ho + j] : 0;
                        if (!live) h[b * Ho + j] = hp[b * Ho + j];
                    }
                    if (!live)
                        for (int64_t j = 0; j < H; j++) cc[b * H + j] = cp[b * H + j];
                }
            }
            for (int64_t k = 0; k < B * Ho; k++) hn[idx * B * Ho + k] = h[k];
            if (cn)
                for (int64_t k = 0; k < B * H; k++) cn[idx * B * H + k] = cc[k];
        }
        in = D * Ho;
        for (int64_t k = 0; k < T * B * in; k++) cur[k] = nxt[k];
    }
    for (int64_t k = 0; k < T * B * in; k++) out[k] = cur[k];
    free(cur), free(nxt), free(h), free(cc), free(hp), free(cp);
}

/* the module's weights as host arrays, by PyTorch's names */
static refw *ref_weights(ts_module *m, const cfg *c, bool cell) {
    const int D = c->bidir ? 2 : 1;
    refw *ws = calloc((size_t)(c->L * D), sizeof *ws);
    for (int64_t l = 0; l < c->L; l++)
        for (int d = 0; d < D; d++) {
            char name[64];
            const char *sfx = d ? "_reverse" : "";
            refw *w = &ws[l * D + d];
#define GET(field, base)                                                                           \
    do {                                                                                           \
        if (cell)                                                                                  \
            snprintf(name, sizeof name, "%s", base);                                               \
        else                                                                                       \
            snprintf(name, sizeof name, "%s_l%lld%s", base, (long long)l, sfx);                    \
        ts_tensor *t = ts_module_get(m, name); /* absent: an error we clear */                     \
        if (!t) ts_error_clear();                                                                  \
        w->field = t ? host(t) : NULL;                                                             \
    } while (0)
            GET(wih, "weight_ih");
            GET(whh, "weight_hh");
            GET(bih, "bias_ih");
            GET(bhh, "bias_hh");
            GET(whr, "weight_hr");
#undef GET
        }
    return ws;
}

static void free_weights(refw *ws, int n) {
    for (int i = 0; i < n; i++)
        free(ws[i].wih), free(ws[i].whh), free(ws[i].bih), free(ws[i].bhh), free(ws[i].whr);
    free(ws);
}

static double max_diff(const double *a, const double *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (!(d <= m)) m = d; /* NaN wins */
    }
    return m;
}

/* deterministic values in about [-1, 1] */
static void fill(double *v, int64_t n, double a, double b) {
    for (int64_t i = 0; i < n; i++) v[i] = sin(a * (double)i + b);
}

static ts_tensor *dev_tensor(ts_shape s, const double *v, ts_dtype dt, ts_device dev) {
    return ts_to(ts_to_dtype(ts_tensor_f64(s, v, (ts_opts){0}), dt), dev);
}

/* ------------------------------------------------------------------ forward vs reference */
static void check_forward(const cfg *c, ts_device dev, ts_dtype dt) {
    ts_scope_begin();
    ts_manual_seed(7);
    ts_module *m = make(c);
    CHECK(m != NULL);
    if (!m) {
        ts_scope_end();
        return;
    }
    ts_module_to_dtype(m, dt);
    ts_module_to(m, dev);
    const int D = c->bidir ? 2 : 1;
    const int64_t T = c->T, B = c->B, I = c->I, H = c->H, Ho = c->P ? c->P : H, LD = c->L * D;
    double *x = malloc((size_t)(T * B * I) * sizeof *x), *h0 = malloc((size_t)(LD * B * Ho) * 8),
           *c0 = malloc((size_t)(LD * B * H) * 8);
    fill(x, T * B * I, 0.37, 0.1);
    fill(h0, LD * B * Ho, 0.53, 0.7);
    fill(c0, LD * B * H, 0.29, 1.3);
    int64_t lens[8] = {T, T - 1, 1, T, 2, T - 2, 3, 1};
    for (int b = 0; b < 8; b++)
        if (lens[b] < 1) lens[b] = 1;
    /* the input in the module's layout */
    double *xl = malloc((size_t)(T * B * I) * sizeof *xl);
    for (int64_t t = 0; t < T; t++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < I; i++)
                xl[(c->batch_first ? b * T + t : t * B + b) * I + i] = x[(t * B + b) * I + i];
    ts_tensor *xt = c->unbatched     ? dev_tensor(TS_SHAPE(T, I), xl, dt, dev)
                    : c->batch_first ? dev_tensor(TS_SHAPE(B, T, I), xl, dt, dev)
                                     : dev_tensor(TS_SHAPE(T, B, I), xl, dt, dev);
    ts_tensor *h0t = NULL, *c0t = NULL;
    if (c->with_h0) {
        h0t = c->unbatched ? dev_tensor(TS_SHAPE(LD, Ho), h0, dt, dev)
                           : dev_tensor(TS_SHAPE(LD, B, Ho), h0, dt, dev);
        if (c->kind == LSTM)
            c0t = c->unbatched ? dev_tensor(TS_SHAPE(LD, H), c0, dt, dev)
                               : dev_tensor(TS_SHAPE(LD, B, H), c0, dt, dev);
    }
    ts_tensor *lt = c->with_lens ? ts_tensor_i64(TS_SHAPE(B), lens, (ts_opts){0}) : NULL;
    ts_tensor *hn = NULL, *cn = NULL;
    ts_tensor *y = ts_rnn_forward(m, xt, h0t, c0t, lt, &hn, c->kind == LSTM ? &cn : NULL);
    CHECK_OK();
    CHECK(y && hn && (c->kind != LSTM || cn));
    if (y && hn) {
        /* shapes */
        ts_shape ys = ts_shape_of(y);
        CHECK_EQ(ys.ndim, c->unbatched ? 2 : 3);
        CHECK_EQ(ys.dims[ys.ndim - 1], D * Ho);
        if (!c->unbatched) CHECK_EQ(ys.dims[c->batch_first ? 0 : 1], B);
        CHECK_EQ(ts_ndim(hn), c->unbatched ? 2 : 3);
        CHECK_EQ(ts_size(hn, 0), LD);
        CHECK_EQ(ts_size(hn, -1), Ho);
        CHECK(ts_dtype_of(y) == dt);
        refw *ws = ref_weights(m, c, false);
        double *ro = malloc((size_t)(T * B * D * Ho) * 8), *rh = malloc((size_t)(LD * B * Ho) * 8),
               *rc = malloc((size_t)(LD * B * H) * 8);
        ref_run(c, ws, x, c->with_h0 ? h0 : NULL, c->with_h0 && c->kind == LSTM ? c0 : NULL,
                c->with_lens ? lens : NULL, false, ro, rh, rc);
        /* f64: rounding of sums of a few dozen terms; f32: 2^-24 relative per op, ~T*L steps */
        const double tol = dt == TS_F64 ? 1e-12 : 2e-5;
        double *yo = host(y), *yh = host(hn);
        /* y back to time-major */
        double *yt = malloc((size_t)(T * B * D * Ho) * 8);
        for (int64_t t = 0; t < T; t++)
            for (int64_t b = 0; b < B; b++)
                for (int64_t j = 0; j < D * Ho; j++)
                    yt[(t * B + b) * D * Ho + j] =
                        yo[(c->batch_first && !c->unbatched ? b * T + t : t * B + b) * D * Ho + j];
        double e1 = max_diff(yt, ro, T * B * D * Ho), e2 = max_diff(yh, rh, LD * B * Ho);
        double e3 = 0;
        if (cn) {
            double *yc = host(cn);
            e3 = max_diff(yc, rc, LD * B * H);
            free(yc);
        }
        if (!(e1 <= tol && e2 <= tol && e3 <= tol))
            printf("%s L%lld P%lld bidir %d bf %d unb %d h0 %d lens %d on %s %s: output %.3g h_n "
                   "%.3g c_n %.3g\n",
                   kind_str[c->kind], (long long)c->L, (long long)c->P, c->bidir, c->batch_first,
                   c->unbatched, c->with_h0, c->with_lens, ts_device_str(dev), ts_dtype_name(dt),
                   e1, e2, e3);
        CHECK(e1 <= tol);
        CHECK(e2 <= tol);
        CHECK(e3 <= tol);
        free(yo), free(yh), free(yt), free(ro), free(rh), free(rc);
        free_weights(ws, (int)LD);
    }
    free(x), free(h0), free(c0), free(xl);
    ts_module_free(m);
    ts_scope_end();
}

static void test_forward(ts_device dev) {
    for (int kind = 0; kind < 4; kind++)
        for (int L = 1; L <= 2; L++)
            for (int bi = 0; bi < 2; bi++)
                for (int bf = 0; bf < 2; bf++) {
                    cfg c = {.kind = kind,
                             .I = 3,
                             .H = 4,
                             .L = L,
                             .bidir = bi,
                             .batch_first = bf,
                             .bias = true,
                             .with_h0 = (L + bi + bf + kind) % 2,
                             .T = 5,
                             .B = 3};
                    check_forward(&c, dev, TS_F64);
                }
    /* proj_size, no bias, unbatched, lengths, float32 */
    cfg p = {.kind = LSTM,
             .I = 3,
             .H = 5,
             .L = 2,
             .P = 2,
             .bidir = true,
             .bias = true,
             .with_h0 = true,
             .T = 4,
             .B = 2};
    check_forward(&p, dev, TS_F64);
    p.bidir = false, p.with_h0 = false;
    check_forward(&p, dev, TS_F64);
    for (int kind = 0; kind < 4; kind++) {
        cfg c = {.kind = kind,
                 .I = 3,
                 .H = 4,
                 .L = 2,
                 .bidir = true,
                 .bias = false,
                 .with_h0 = true,
                 .T = 4,
                 .B = 2};
        check_forward(&c, dev, TS_F64);
        c.bias = true, c.unbatched = true, c.B = 1;
        check_forward(&c, dev, TS_F64);
        c.unbatched = false, c.B = 4, c.with_lens = true, c.T = 5;
        check_forward(&c, dev, TS_F64);
        c.batch_first = true, c.with_lens = false, c.T = 6;
        check_forward(&c, dev, TS_F32);
    }
}

/* dropout between layers: eval is the reference; training with p = 1 feeds zeros to layer 2 */
static void test_dropout(ts_device dev) {
    ts_scope_begin();
    cfg c = {.kind = GRU, .I = 3, .H = 4, .L = 2, .bias = true, .T = 4, .B = 2};
    ts_manual_seed(5);
    ts_module *m = ts_gru_new(3, 4, (ts_rnn_opts){.num_layers = 2, .dropout = 1.0});
    ts_module_to(ts_module_to_dtype(m, TS_F64), dev);
    double x[4 * 2 * 3];
    fill(x, 24, 0.41, 0.2);
    ts_tensor *xt = dev_tensor(TS_SHAPE(4, 2, 3), x, TS_F64, dev);
    refw *ws = ref_weights(m, &c, false);
    double ro[4 * 2 * 4], rh[2 * 2 * 4], ro0[4 * 2 * 4], rh0[2 * 2 * 4];
    ref_run(&c, ws, x, NULL, NULL, NULL, true, ro, rh, NULL);
    ref_run(&c, ws, x, NULL, NULL, NULL, false, ro0, rh0, NULL);
    ts_tensor *hn = NULL;
    ts_tensor *y = ts_rnn_forward(m, xt, NULL, NULL, NULL, &hn, NULL); /* training */
    CHECK_OK();
    double *yo = y ? host(y) : NULL;
    CHECK(yo && max_diff(yo, ro, 32) <= 1e-12);
    free(yo);
    ts_module_eval(m);
    y = ts_forward(m, xt);
    yo = y ? host(y) : NULL;
    CHECK(yo && max_diff(yo, ro0, 32) <= 1e-12);
    free(yo);
    free_weights(ws, 2);
    ts_module_free(m);
    ts_scope_end();
}

/* ------------------------------------------------------------------ cells */
static void test_cells(ts_device dev) {
    for (int kind = 0; kind < 4; kind++)
        for (int unb = 0; unb < 2; unb++) {
            ts_scope_begin();
            ts_manual_seed(11);
            ts_rnn_opts o = {.nonlinearity = kind == RNN_RELU ? TS_RNN_RELU : TS_RNN_TANH,
                             .no_bias = unb};
            ts_module *m = kind == LSTM  ? ts_lstm_cell_new(3, 4, o)
                           : kind == GRU ? ts_gru_cell_new(3, 4, o)
                                         : ts_rnn_cell_new(3, 4, o);
            ts_module_to(ts_module_to_dtype(m, TS_F64), dev);
            const int64_t B = unb ? 1 : 2;
            cfg c = {.kind = kind, .I = 3, .H = 4, .L = 1, .bias = !unb, .T = 1, .B = B};
            double x[6], h[8], cc[8];
            fill(x, 6, 0.7, 0.3), fill(h, 8, 0.9, 0.1), fill(cc, 8, 0.6, 0.5);
            ts_tensor *xt = unb ? dev_tensor(TS_SHAPE(3), x, TS_F64, dev)
                                : dev_tensor(TS_SHAPE(2, 3), x, TS_F64, dev);
            ts_tensor *ht = unb ? dev_tensor(TS_SHAPE(4), h, TS_F64, dev)
                                : dev_tensor(TS_SHAPE(2, 4), h, TS_F64, dev);
            ts_tensor *ct = kind != LSTM ? NULL
                            : unb        ? dev_tensor(TS_SHAPE(4), cc, TS_F64, dev)
                                         : dev_tensor(TS_SHAPE(2, 4), cc, TS_F64, dev);
            ts_tensor *c1 = NULL;
            ts_tensor *h1 = ts_rnn_cell_forward(m, xt, ht, ct, &c1);
            CHECK_OK();
            CHECK_EQ(ts_ndim(h1), unb ? 1 : 2);
            refw *ws = ref_weights(m, &c, true);
            ref_step(&c, ws, 3, x, h, cc);
            double *yh = host(h1);
            CHECK(max_diff(yh, h, B * 4) <= 1e-13);
            free(yh);
            if (kind == LSTM) {
                double *yc = c1 ? host(c1) : NULL;
                CHECK(yc && max_diff(yc, cc, B * 4) <= 1e-13);
                free(yc);
            } else {
                CHECK(c1 == NULL);
            }
            /* ts_forward: zero states */
            double z[8] = {0}, zc[8] = {0};
            ref_step(&c, ws, 3, x, z, zc);
            ts_tensor *h2 = ts_forward(m, xt);
            yh = h2 ? host(h2) : NULL;
            CHECK(yh && max_diff(yh, z, B * 4) <= 1e-13);
            free(yh);
            free_weights(ws, 1);
            ts_module_free(m);
            ts_scope_end();
        }
}

/* ------------------------------------------------------------------ names, shapes, repr */
static void test_names(void) {
    ts_module *m =
        ts_lstm_new(10, 20, (ts_rnn_opts){.num_layers = 2, .bidirectional = true, .proj_size = 5});
    ts_tensor_list l = ts_module_named_parameters(m);
    static const char *const want[] = {
        "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",
        "bias_hh_l0",           "weight_hr_l0",         "weight_ih_l0_reverse",
        "weight_hh_l0_reverse", "bias_ih_l0_reverse",   "bias_hh_l0_reverse",
        "weight_hr_l0_reverse", "weight_ih_l1",         "weight_hh_l1",
        "bias_ih_l1",           "bias_hh_l1",           "weight_hr_l1",
        "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse",
        "bias_hh_l1_reverse",   "weight_hr_l1_reverse"};
    CHECK_EQ(l.n, 20);
    for (int i = 0; i < l.n && i < 20; i++) CHECK_STREQ(l.names[i], want[i]);
    ts_tensor_list_free(&l);
    ts_shape s = ts_shape_of(ts_module_get(m, "weight_ih_l1"));
    CHECK(s.ndim == 2 && s.dims[0] == 80 && s.dims[1] == 10); /* 4H x proj * 2 */
    s = ts_shape_of(ts_module_get(m, "weight_hh_l0"));
    CHECK(s.ndim == 2 && s.dims[0] == 80 && s.dims[1] == 5);
    s = ts_shape_of(ts_module_get(m, "weight_hr_l0_reverse"));
    CHECK(s.ndim == 2 && s.dims[0] == 5 && s.dims[1] == 20);
    /* init: uniform(-1/sqrt(20), 1/sqrt(20)) */
    ts_tensor *w = ts_module_get(m, "weight_ih_l0");
    double *v = host(w), lo = 1, hi = -1;
    for (int i = 0; i < 800; i++) lo = v[i] < lo ? v[i] : lo, hi = v[i] > hi ? v[i] : hi;
    free(v);
    const double k = 1 / sqrt(20.0);
    CHECK(lo >= -k && hi <= k && lo < -0.9 * k && hi > 0.9 * k);
    char *r = ts_module_repr(m);
    CHECK_STREQ(r, "LSTM(10, 20, proj_size=5, num_layers=2, bidirectional=True)");
    free(r);
    ts_module_free(m);

    m = ts_gru_new(4, 3, (ts_rnn_opts){.no_bias = true, .batch_first = true, .dropout = 0.5});
    l = ts_module_named_parameters(m);
    CHECK_EQ(l.n, 2);
    ts_tensor_list_free(&l);
    r = ts_module_repr(m);
    CHECK_STREQ(r, "GRU(4, 3, bias=False, batch_first=True, dropout=0.5)");
    free(r);
    ts_module_free(m);
    m = ts_rnn_cell_new(4, 3, (ts_rnn_opts){.nonlinearity = TS_RNN_RELU});
    l = ts_module_named_parameters(m);
    CHECK_EQ(l.n, 4);
    if (l.n == 4) {
        CHECK_STREQ(l.names[0], "weight_ih");
        CHECK_STREQ(l.names[3], "bias_hh");
    }
    ts_tensor_list_free(&l);
    r = ts_module_repr(m);
    CHECK_STREQ(r, "RNNCell(4, 3, nonlinearity=relu)");
    free(r);
    ts_module_free(m);
    CHECK_OK();
}

/* ------------------------------------------------------------------ gradients */
typedef struct gctx {
    ts_module *m;
    bool lstm, cell;
    ts_tensor *lens; /* the sequences' lengths, or NULL */
} gctx;

/* inputs: x, h0, (c0), then the module's parameters (perturbed in place by gradcheck) */
static ts_tensor *f_rnn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    gctx *g = ctx;
    ts_tensor *hn = NULL, *cn = NULL;
    if (g->cell) {
        ts_tensor *h = ts_rnn_cell_forward(g->m, in[0], in[1], g->lstm ? in[2] : NULL, &cn);
        return g->lstm ? ts_cat((ts_tensor *[]){h, cn}, 2, 1) : h;
    }
    ts_tensor *y = ts_rnn_forward(g->m, in[0], in[1], g->lstm ? in[2] : NULL, g->lens, &hn,
                                  g->lstm ? &cn : NULL);
    if (!y) return NULL;
    /* every output in one vector */
    ts_tensor *parts[3] = {ts_reshape(y, TS_SHAPE(-1)), ts_reshape(hn, TS_SHAPE(-1)),
                           g->lstm ? ts_reshape(cn, TS_SHAPE(-1)) : NULL};
    return ts_cat(parts, g->lstm ? 3 : 2, 0);
}

static ts_tensor *leaf(ts_shape s, double a, double b, ts_device dev) {
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    double *v = malloc((size_t)n * sizeof *v);
    fill(v, n, a, b);
    ts_tensor *t = dev_tensor(s, v, TS_F64, dev);
    free(v);
    ts_set_requires_grad(t, true);
    return t;
}

static void gradcheck_module_lens(const char *what, ts_module *m, bool lstm, bool cell, ts_shape xs,
                                  ts_shape hs, ts_shape cs, ts_tensor *lens, ts_device dev) {
    ts_scope_begin();
    ts_module_to(ts_module_to_dtype(m, TS_F64), dev);
    ts_tensor *in[40];
    int n = 0;
    in[n++] = leaf(xs, 0.37, 0.1, dev);
    in[n++] = leaf(hs, 0.53, 0.7, dev);
    if (lstm) in[n++] = leaf(cs, 0.29, 1.3, dev);
    ts_tensor_list l = ts_module_named_parameters(m);
    for (int i = 0; i < l.n && n < 40; i++) in[n++] = l.tensors[i];
    gctx g = {m, lstm, cell, lens};
    bool ok = ts_gradcheck(f_rnn, &g, in, n, (ts_gradcheck_opts){0});
    printf("gradcheck %-28s on %s: %s\n", what, ts_device_str(dev), ok ? "ok" : "FAILED");
    CHECK(ok);
    CHECK_OK();
    ts_tensor_list_free(&l);
    ts_module_free(m);
    ts_scope_end();
}

static void gradcheck_module(const char *what, ts_module *m, bool lstm, bool cell, ts_shape xs,
                             ts_shape hs, ts_shape cs, ts_device dev) {
    gradcheck_module_lens(what, m, lstm, cell, xs, hs, cs, NULL, dev);
}

static void test_gradcheck(ts_device dev) {
    ts_manual_seed(3);
    gradcheck_module(
        "RNN relu 2 layers bidir",
        ts_rnn_new(
            2, 3,
            (ts_rnn_opts){.num_layers = 2, .bidirectional = true, .nonlinearity = TS_RNN_RELU}),
        false, false, TS_SHAPE(3, 2, 2), TS_SHAPE(4, 2, 3), TS_SHAPE(0), dev);
    gradcheck_module(
        "LSTM 2 layers bidir proj",
        ts_lstm_new(2, 3, (ts_rnn_opts){.num_layers = 2, .bidirectional = true, .proj_size = 2}),
        true, false, TS_SHAPE(3, 2, 2), TS_SHAPE(4, 2, 2), TS_SHAPE(4, 2, 3), dev);
    /* without a projection: every layer direction's steps as one op (rnn_seq_fused.c) */
    gradcheck_module("LSTM 2 layers bidir",
                     ts_lstm_new(2, 3, (ts_rnn_opts){.num_layers = 2, .bidirectional = true}), true,
                     false, TS_SHAPE(3, 2, 2), TS_SHAPE(4, 2, 3), TS_SHAPE(4, 2, 3), dev);
    gradcheck_module("GRU bidir no bias",
                     ts_gru_new(2, 3, (ts_rnn_opts){.bidirectional = true, .no_bias = true}), false,
                     false, TS_SHAPE(3, 2, 2), TS_SHAPE(2, 2, 3), TS_SHAPE(0), dev);
    /* with lengths: a fused op a step and the weight sink (rnn_cell_fused.c); the GRU's steps
     * hand the sink their gh gradients, the LSTM's sink wraps the input projection */
    ts_tensor *lens = ts_tensor_f64(TS_SHAPE(2), (double[]){3, 2}, (ts_opts){.dtype = TS_I64});
    gradcheck_module_lens("GRU 2 layers lengths", ts_gru_new(2, 3, (ts_rnn_opts){.num_layers = 2}),
                          false, false, TS_SHAPE(3, 2, 2), TS_SHAPE(2, 2, 3), TS_SHAPE(0), lens,
                          dev);
    gradcheck_module_lens("LSTM bidir lengths",
                          ts_lstm_new(2, 3, (ts_rnn_opts){.bidirectional = true}), true, false,
                          TS_SHAPE(3, 2, 2), TS_SHAPE(2, 2, 3), TS_SHAPE(2, 2, 3), lens, dev);
    ts_release(lens);
    gradcheck_module("GRU 2 layers batch_first",
                     ts_gru_new(2, 3, (ts_rnn_opts){.num_layers = 2, .batch_first = true}), false,
                     false, TS_SHAPE(2, 3, 2), TS_SHAPE(2, 2, 3), TS_SHAPE(0), dev);
    gradcheck_module("LSTMCell", ts_lstm_cell_new(2, 3, (ts_rnn_opts){0}), true, true,
                     TS_SHAPE(2, 2), TS_SHAPE(2, 3), TS_SHAPE(2, 3), dev);
    gradcheck_module("GRUCell", ts_gru_cell_new(2, 3, (ts_rnn_opts){0}), false, true,
                     TS_SHAPE(2, 2), TS_SHAPE(2, 3), TS_SHAPE(0), dev);
}

/* ------------------------------------------------------------------ errors */
static void test_errors(ts_device dev) {
    ts_scope_begin();
    ts_module *m = ts_lstm_new(3, 4, (ts_rnn_opts){.num_layers = 2});
    ts_module_to(m, dev);
    ts_opts o = {.device = dev};
    ts_tensor *hn = NULL;
    CHECK(!ts_rnn_forward(m, ts_zeros(TS_SHAPE(5, 2, 4), o), NULL, NULL, NULL, &hn, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "input.size(-1) must be equal to input_size. Expected 3, got 4");
    CHECK(hn == NULL);
    CHECK(!ts_forward(m, ts_zeros(TS_SHAPE(5, 2, 3, 1), o)));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "LSTM: Expected input to be 2D or 3D, got 4D input");
    CHECK(!ts_rnn_forward(m, ts_zeros(TS_SHAPE(5, 2, 3), o), ts_zeros(TS_SHAPE(1, 2, 4), o), NULL,
                          NULL, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "Expected hidden[0] size [2, 2, 4], got [1, 2, 4]");
    CHECK(!ts_rnn_forward(m, ts_zeros(TS_SHAPE(5, 2, 3), o), NULL, ts_zeros(TS_SHAPE(2, 3, 4), o),
                          NULL, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "Expected hidden[1] size [2, 2, 4], got [2, 3, 4]");
    CHECK(!ts_forward(m, ts_zeros(TS_SHAPE(5, 2, 3), (ts_opts){.dtype = TS_F64, .device = dev})));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "LSTM: input must have the parameters' floating dtype float32");
    CHECK(!ts_rnn_forward(m, ts_zeros(TS_SHAPE(5, 2, 3), o), NULL, NULL,
                          ts_zeros(TS_SHAPE(3), (ts_opts){.dtype = TS_I64}), NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "lengths must be an integer tensor [2]");
    CHECK(!ts_rnn_forward(m, NULL, NULL, NULL, NULL, NULL, NULL));
    CHECK_ERR(TS_ERR_ARG);
    ts_module *lin = ts_linear_new(3, 4);
    CHECK(!ts_rnn_forward(lin, ts_zeros(TS_SHAPE(5, 2, 3), o), NULL, NULL, NULL, NULL, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "expected an RNN, LSTM or GRU module, got Linear");
    ts_module_free(lin);
    ts_module_free(m);
    m = ts_gru_cell_new(3, 4, (ts_rnn_opts){0});
    ts_module_to(m, dev);
    CHECK(!ts_forward(m, ts_zeros(TS_SHAPE(2, 5), o)));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "GRUCell: input has inconsistent input_size: got 5 expected 3");
    CHECK(!ts_rnn_cell_forward(m, ts_zeros(TS_SHAPE(2, 3), o), ts_zeros(TS_SHAPE(3, 4), o), NULL,
                               NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "GRUCell: Expected hx size [2, 4], got [3, 4]");
    ts_module_free(m);
    /* constructors */
    CHECK(!ts_gru_new(3, 4, (ts_rnn_opts){.proj_size = 2}));
    CHECK_ERR_HAS(TS_ERR_ARG, "proj_size argument is only supported for LSTM");
    CHECK(!ts_lstm_new(3, 4, (ts_rnn_opts){.proj_size = 4}));
    CHECK_ERR_HAS(TS_ERR_ARG, "proj_size has to be smaller than hidden_size");
    CHECK(!ts_lstm_new(3, 0, (ts_rnn_opts){0}));
    CHECK_ERR_HAS(TS_ERR_ARG, "hidden_size must be greater than zero");
    CHECK(!ts_rnn_new(3, 4, (ts_rnn_opts){.dropout = 1.5}));
    CHECK_ERR_HAS(TS_ERR_ARG, "dropout should be a number in range [0, 1]");
    CHECK(!ts_lstm_new(3, 4, (ts_rnn_opts){.nonlinearity = TS_RNN_RELU}));
    CHECK_ERR_HAS(TS_ERR_ARG, "nonlinearity is only supported for RNN");
    ts_scope_end();
}

/* a training step lowers the loss (autograd through every step reaches every parameter) */
static void test_training(ts_device dev) {
    ts_scope_begin();
    ts_manual_seed(1);
    ts_module *m = ts_lstm_new(2, 8, (ts_rnn_opts){.batch_first = true});
    ts_module_to(m, dev);
    ts_tensor *x = ts_to(ts_randn(TS_SHAPE(4, 6, 2), (ts_opts){0}), dev);
    ts_tensor *target = ts_to(ts_randn(TS_SHAPE(4, 6, 8), (ts_opts){0}), dev);
    ts_tensor_list l = ts_module_named_parameters(m);
    double first = 0, last = 0;
    for (int it = 0; it < 30; it++) {
        ts_scope_begin();
        for (int i = 0; i < l.n; i++) ts_set_grad(l.tensors[i], NULL);
        ts_tensor *loss = ts_mse_loss(ts_mul_scalar(ts_forward(m, x), 3), target);
        ts_backward(loss);
        double v = ts_item(loss);
        if (it == 0) first = v;
        last = v;
        ts_no_grad_begin();
        for (int i = 0; i < l.n; i++)
            if (ts_grad(l.tensors[i]))
                ts_sub_(l.tensors[i], ts_mul_scalar(ts_grad(l.tensors[i]), 0.5));
        ts_no_grad_end();
        ts_scope_end();
    }
    CHECK_OK();
    CHECK(last < 0.9 * first);
    ts_tensor_list_free(&l);
    ts_module_free(m);
    ts_scope_end();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    test_names();
    for (int d = 0; d < nd; d++) {
        ts_mem_stats before, after;
        ts_memory_stats(devs[d], &before);
        test_forward(devs[d]);
        test_dropout(devs[d]);
        test_cells(devs[d]);
        test_gradcheck(devs[d]);
        test_errors(devs[d]);
        test_training(devs[d]);
        ts_memory_stats(devs[d], &after);
        CHECK_EQ(after.live_tensors, before.live_tensors); /* every temporary released */
    }
    return ts_test_finish();
}
