/* test_rnn_fused.c — the fused LSTM / GRU step (src/nn/rnn_cell_fused.c, the backend's
 * rnn_cell_forward / rnn_cell_backward: src/backend/cpu/kern_rnn_cell.c) on every test device:
 * h and c against float64 formulas written here (float32 from the rounded inputs, float64), the
 * gradients by ts_gradcheck (float64; the LSTM with and without gh, every input or some of them
 * requiring grad), the backward's gradients against formulas written here, the refusals (shapes,
 * dtypes, devices, NULLs), and nn.LSTM / nn.GRU (which step through it) against the composed
 * formula built here of tensor ops: the same outputs and the same parameter gradients; a captured
 * training step (ts_graph) replayed against eager steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "host_read_util.h"
#include "nn/rnn_cell_fused.h"
#include "ts_test.h"

static double sigm(double x) { return 1 / (1 + exp(-x)); }

static void fill(double *v, int64_t n, double a, double b) {
    for (int64_t i = 0; i < n; i++) v[i] = 1.7 * sin(a * (double)(i + 1) + b);
}

/* values rounded to dt, then as doubles (the reference's inputs) */
static ts_tensor *mk(ts_shape s, const double *v, ts_dtype dt, ts_device dev, double *rounded) {
    ts_tensor *t = ts_to(ts_to_dtype(ts_tensor_f64(s, v, (ts_opts){.dtype = TS_F64}), dt), dev);
    if (rounded) {
        ts_tensor *h = ts_to_dtype(ts_to(t, ts_cpu()), TS_F64);
        if (!h || ts_copy_to_host(h, rounded, (size_t)ts_numel(t) * sizeof(double)) != TS_OK)
            rounded[0] = NAN;
    }
    return t;
}

static double max_diff(const double *a, const double *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs(a[i] - b[i]);
        m = d > m || d != d ? d : m;
    }
    return m;
}

enum { B = 3, H = 5, MAXG = 4 * B * H };

/* ------------------------------------------------------------------ forward and backward */
/* LSTM: pre = x + y; the gradients of pre and c_prev from dh, dc */
static void ref_lstm(const double *x, const double *y, const double *cp, const double *dh,
                     const double *dc, double *h, double *c, double *dpre, double *dcp) {
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < H; j++) {
            double p[4];
            for (int k = 0; k < 4; k++)
                p[k] = x[b * 4 * H + k * H + j] + (y ? y[b * 4 * H + k * H + j] : 0);
            const double i = sigm(p[0]), f = sigm(p[1]), g = tanh(p[2]), o = sigm(p[3]);
            const double cc = f * cp[b * H + j] + i * g, tc = tanh(cc);
            c[b * H + j] = cc, h[b * H + j] = o * tc;
            const double dct = dc[b * H + j] + dh[b * H + j] * o * (1 - tc * tc);
            double *d = dpre + b * 4 * H + j;
            d[0] = dct * g * i * (1 - i);
            d[H] = dct * cp[b * H + j] * f * (1 - f);
            d[2 * H] = dct * i * (1 - g * g);
            d[3 * H] = dh[b * H + j] * tc * o * (1 - o);
            dcp[b * H + j] = dct * f;
        }
    }
}

/* GRU: the gradients of xw, gh and h_prev (through z) from dh */
static void ref_gru(const double *x, const double *y, const double *hp, const double *dh, double *h,
                    double *dx, double *dy, double *dhp) {
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < H; j++) {
            const int64_t g0 = b * 3 * H + j;
            const double r = sigm(x[g0] + y[g0]), z = sigm(x[g0 + H] + y[g0 + H]);
            const double hn = y[g0 + 2 * H], n = tanh(x[g0 + 2 * H] + r * hn), p = hp[b * H + j];
            h[b * H + j] = (1 - z) * n + z * p;
            const double g = dh[b * H + j], dn = g * (1 - z) * (1 - n * n);
            const double dr = dn * hn * r * (1 - r), dz = g * (p - n) * z * (1 - z);
            dx[g0] = dy[g0] = dr;
            dx[g0 + H] = dy[g0 + H] = dz;
            dx[g0 + 2 * H] = dn, dy[g0 + 2 * H] = dn * r;
            dhp[b * H + j] = g * z;
        }
    }
}

/* h, c and the gradients of one fused step against the reference; tol for values of order 1 */
static void check_step(ts_device dev, ts_dtype dt, bool lstm, bool with_gh) {
    const int G = lstm ? 4 : 3;
    double x[MAXG], y[MAXG], s[B * H], dhv[B * H], dcv[B * H];
    double xr[MAXG], yr[MAXG], sr[B * H], dhr[B * H], dcr[B * H];
    fill(x, B * G * H, 0.37, 0.1), fill(y, B * G * H, 0.53, 0.7), fill(s, B * H, 0.29, 1.3);
    fill(dhv, B * H, 0.71, 0.2), fill(dcv, B * H, 0.43, 2.1);
    ts_scope_begin();
    ts_tensor *tx = mk(TS_SHAPE(B, G * H), x, dt, dev, xr);
    ts_tensor *ty = with_gh ? mk(TS_SHAPE(B, G * H), y, dt, dev, yr) : NULL;
    ts_tensor *ts = mk(TS_SHAPE(B, H), s, dt, dev, sr);
    ts_tensor *tdh = mk(TS_SHAPE(B, H), dhv, dt, dev, dhr);
    ts_tensor *tdc = mk(TS_SHAPE(B, H), dcv, dt, dev, dcr);
    ts_set_requires_grad(tx, true);
    if (ty) ts_set_requires_grad(ty, true);
    ts_set_requires_grad(ts, true);
    double h[B * H], c[B * H], dx[MAXG], dy[MAXG], ds[B * H];
    double got_h[B * H], got_c[B * H], got_dx[MAXG], got_dy[MAXG], got_ds[B * H];
    ts_tensor *th = NULL, *tc = NULL;
    bool ok;
    if (lstm) {
        ref_lstm(xr, with_gh ? yr : NULL, sr, dhr, dcr, h, c, dx, ds);
        for (int i = 0; i < B * G * H; i++) dy[i] = dx[i];
        ok = tsi_lstm_cell_fused(tx, ty, ts, NULL, &th, &tc);
        /* sum(h * dh + c * dc): its gradient reaches h as dh and c as dc */
        ok = ok && rd(th, got_h, B * H) && rd(tc, got_c, B * H);
        if (ok) ts_backward(ts_add(ts_sum(ts_mul(th, tdh)), ts_sum(ts_mul(tc, tdc))));
    } else {
        ref_gru(xr, yr, sr, dhr, h, dx, dy, ds);
        th = tsi_gru_cell_fused(tx, ty, ts, NULL);
        ok = rd(th, got_h, B * H);
        if (ok) ts_backward(ts_sum(ts_mul(th, tdh)));
    }
    CHECK_OK();
    ok = ok && rd(ts_grad(tx), got_dx, B * G * H) && rd(ts_grad(ts), got_ds, B * H) &&
         (!ty || rd(ts_grad(ty), got_dy, B * G * H));
    CHECK(ok);
    /* float32: each result a few roundings and the vectorised activations' few ulps away from
     * the rounded inputs' exact values (all of order 1); float64 alike at its precision */
    const double tol = dt == TS_F32 ? 4e-6 : 1e-13;
    if (ok) {
        const double e[5] = {max_diff(got_h, h, B * H), lstm ? max_diff(got_c, c, B * H) : 0,
                             max_diff(got_dx, dx, B * G * H), max_diff(got_ds, ds, B * H),
                             ty ? max_diff(got_dy, dy, B * G * H) : 0};
        printf("%s %s%s on %s: h %.2e c %.2e dxw %.2e dstate %.2e dgh %.2e\n",
               lstm ? "LSTM" : "GRU", ts_dtype_name(dt), with_gh ? "" : " (no gh)",
               ts_device_str(dev), e[0], e[1], e[2], e[3], e[4]);
        for (int i = 0; i < 5; i++) CHECK(e[i] <= tol);
    }
    ts_scope_end();
}

/* ------------------------------------------------------------------ gradcheck */
typedef struct gctx {
    bool lstm, with_gh;
} gctx;

static ts_tensor *f_cell(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    const gctx *g = ctx;
    if (!g->lstm) return tsi_gru_cell_fused(in[0], in[1], in[2], NULL);
    ts_tensor *h = NULL, *c = NULL;
    if (!tsi_lstm_cell_fused(in[0], g->with_gh ? in[1] : NULL, in[2], NULL, &h, &c)) return NULL;
    return ts_cat((ts_tensor *[]){h, c}, 2, 1);
}

static ts_tensor *leaf(ts_shape s, double a, double b, ts_device dev, bool grad) {
    double v[MAXG];
    int64_t n = 1;
    for (int i = 0; i < s.ndim; i++) n *= s.dims[i];
    fill(v, n, a, b);
    ts_tensor *t = mk(s, v, TS_F64, dev, NULL);
    ts_set_requires_grad(t, grad);
    return t;
}

static void gradcheck_cell(ts_device dev, bool lstm, bool with_gh, unsigned need) {
    ts_scope_begin();
    const int G = lstm ? 4 : 3;
    ts_tensor *in[3] = {leaf(TS_SHAPE(B, G * H), 0.37, 0.1, dev, need & 1),
                        leaf(TS_SHAPE(B, G * H), 0.53, 0.7, dev, (need & 2) != 0),
                        leaf(TS_SHAPE(B, H), 0.29, 1.3, dev, (need & 4) != 0)};
    gctx g = {lstm, with_gh};
    const bool ok = ts_gradcheck(f_cell, &g, in, 3, (ts_gradcheck_opts){0});
    printf("gradcheck %s%s (inputs needing grad %u) on %s: %s\n", lstm ? "LSTM" : "GRU",
           with_gh ? "" : " no gh", need, ts_device_str(dev), ok ? "ok" : "FAILED");
    CHECK(ok);
    CHECK_OK();
    ts_scope_end();
}

/* ------------------------------------------------------------------ refusals */
static void test_errors(ts_device dev, ts_device other) {
    ts_scope_begin();
    ts_opts o = {.device = dev};
    ts_tensor *h = NULL, *c = NULL;
    ts_tensor *x4 = ts_zeros(TS_SHAPE(2, 12), o), *s = ts_zeros(TS_SHAPE(2, 3), o);
    CHECK(!tsi_lstm_cell_fused(ts_zeros(TS_SHAPE(2, 9), o), NULL, s, NULL, &h, &c));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "lstm_cell_fused: xw must be [2, 12] (c_prev [2, 3]), got [2, 9]");
    CHECK(h == NULL && c == NULL);
    CHECK(!tsi_lstm_cell_fused(x4, ts_zeros(TS_SHAPE(3, 12), o), s, NULL, &h, &c));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "lstm_cell_fused: gh must be [2, 12]");
    CHECK(!tsi_lstm_cell_fused(x4, NULL, ts_zeros(TS_SHAPE(2, 3, 1), o), NULL, &h, &c));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "c_prev must be a non-empty [batch, hidden] matrix, got [2, 3, 1]");
    CHECK(!tsi_lstm_cell_fused(x4, NULL, ts_zeros(TS_SHAPE(0, 3), o), NULL, &h, &c));
    CHECK_ERR(TS_ERR_SHAPE);
    ts_tensor *s64 = ts_zeros(TS_SHAPE(2, 3), (ts_opts){.dtype = TS_F64, .device = dev});
    CHECK(!tsi_lstm_cell_fused(x4, NULL, s64, NULL, &h, &c));
    CHECK_ERR_HAS(TS_ERR_DTYPE,
                  "lstm_cell_fused: expected float32 or float64 tensors of one dtype, got xw "
                  "float32, c_prev float64");
    ts_opts bf = {.dtype = TS_BF16, .device = dev};
    CHECK(!tsi_gru_cell_fused(ts_zeros(TS_SHAPE(2, 9), bf), ts_zeros(TS_SHAPE(2, 9), bf),
                              ts_zeros(TS_SHAPE(2, 3), bf), NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "gru_cell_fused: expected float32 or float64 tensors");
    CHECK(!tsi_rnn_cell_fused_takes(ts_zeros(TS_SHAPE(2, 9), bf), NULL,
                                    ts_zeros(TS_SHAPE(2, 3), bf)));
    ts_opts i64 = {.dtype = TS_I64, .device = dev};
    CHECK(!tsi_gru_cell_fused(ts_zeros(TS_SHAPE(2, 9), i64), ts_zeros(TS_SHAPE(2, 9), i64),
                              ts_zeros(TS_SHAPE(2, 3), i64), NULL));
    CHECK_ERR(TS_ERR_DTYPE);
    CHECK(!tsi_gru_cell_fused(ts_zeros(TS_SHAPE(2, 9), o), NULL, s, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "gru_cell_fused: gh is NULL");
    CHECK(!tsi_gru_cell_fused(ts_zeros(TS_SHAPE(2, 9), o), ts_zeros(TS_SHAPE(2, 12), o), s, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "gru_cell_fused: gh must be [2, 9] (h_prev [2, 3]), got [2, 12]");
    CHECK(!tsi_lstm_cell_fused(NULL, NULL, s, NULL, &h, &c));
    CHECK_ERR_HAS(TS_ERR_ARG, "lstm_cell_fused: xw is NULL");
    CHECK(!tsi_lstm_cell_fused(x4, NULL, s, NULL, NULL, &c));
    CHECK_ERR_HAS(TS_ERR_ARG, "lstm_cell_fused: h and c outputs must not be NULL");
    if (!ts_device_equal(dev, other)) {
        ts_tensor *so = ts_zeros(TS_SHAPE(2, 3), (ts_opts){.device = other});
        CHECK(!tsi_lstm_cell_fused(x4, NULL, so, NULL, &h, &c));
        CHECK_ERR_HAS(TS_ERR_DEVICE,
                      "lstm_cell_fused: expected all tensors to be on the same device");
        CHECK(!tsi_rnn_cell_fused_takes(x4, NULL, so));
    }
    CHECK(tsi_rnn_cell_fused_takes(x4, NULL, s));
    ts_scope_end();
}

/* ------------------------------------------------------------------ the layers */
/* the module's forward (fused steps) against its equations written here in tensor ops (the
 * composition rnn.c used before): outputs and every parameter's gradient */
static void check_layer(ts_device dev, bool lstm, ts_dtype dt) {
    enum { T = 4, I = 4 };
    ts_scope_begin();
    ts_manual_seed(11);
    ts_module *m = lstm ? ts_lstm_new(I, H, (ts_rnn_opts){0}) : ts_gru_new(I, H, (ts_rnn_opts){0});
    ts_module_to(ts_module_to_dtype(m, dt), dev);
    double xv[T * B * I];
    fill(xv, T * B * I, 0.61, 0.4);
    ts_tensor *x = mk(TS_SHAPE(T, B, I), xv, dt, dev, NULL);
    ts_tensor_list l = ts_module_named_parameters(m); /* w_ih, w_hh, b_ih, b_hh */
    double y_mod[T * B * H], y_ref[T * B * H], g_mod[4][4 * H * H], g_ref[4][4 * H * H];
    int64_t gn[4];
    for (int i = 0; i < 4; i++) gn[i] = ts_numel(l.tensors[i]);
    bool ok = l.n == 4;
    for (int pass = 0; ok && pass < 2; pass++) {
        ts_scope_begin();
        for (int i = 0; i < 4; i++) ts_set_grad(l.tensors[i], NULL);
        ts_tensor *y;
        if (pass == 0) {
            y = ts_forward(m, x);
        } else {
            ts_tensor *wi = l.tensors[0], *wh = l.tensors[1], *bi = l.tensors[2],
                      *bh = l.tensors[3];
            ts_tensor *hs[T], *h = ts_zeros(TS_SHAPE(B, H), (ts_opts){.dtype = dt, .device = dev});
            ts_tensor *c = h;
            for (int t = 0; t < T; t++) {
                ts_tensor *xt = ts_select(x, 0, t);
                if (lstm) {
                    /* as nn.LSTM: both biases in the input projection */
                    ts_tensor *pre = ts_add(ts_mm(h, ts_t(wh)), ts_linear(xt, wi, ts_add(bi, bh)));
                    ts_tensor *q[4];
                    ok = ok && ts_chunk(pre, 4, 1, q, 4) == 4;
                    if (!ok) break;
                    c = ts_add(ts_mul(ts_sigmoid(q[1]), c),
                               ts_mul(ts_sigmoid(q[0]), ts_tanh(q[2])));
                    h = ts_mul(ts_sigmoid(q[3]), ts_tanh(c));
                } else {
                    ts_tensor *gx[3], *gh[3];
                    ok = ok && ts_chunk(ts_linear(xt, wi, bi), 3, 1, gx, 3) == 3 &&
                         ts_chunk(ts_linear(h, wh, bh), 3, 1, gh, 3) == 3;
                    if (!ok) break;
                    ts_tensor *r = ts_sigmoid(ts_add(gx[0], gh[0])),
                              *z = ts_sigmoid(ts_add(gx[1], gh[1]));
                    ts_tensor *n = ts_tanh(ts_add(gx[2], ts_mul(r, gh[2])));
                    h = ts_add(n, ts_mul(z, ts_sub(h, n)));
                }
                hs[t] = h;
            }
            y = ok ? ts_stack(hs, T, 0) : NULL;
        }
        ok = ok && rd(y, pass ? y_ref : y_mod, T * B * H);
        if (ok) ts_backward(ts_mean(ts_mul(y, y)));
        for (int i = 0; ok && i < 4; i++)
            ok = rd(ts_grad(l.tensors[i]), pass ? g_ref[i] : g_mod[i], gn[i]);
        ts_scope_end();
    }
    CHECK_OK();
    CHECK(ok);
    if (ok) {
        /* the same formula in the same dtype: the outputs agree to a few roundings (float32: the
         * same kernels, so bit for bit on the cpu), the gradients to their summation orders */
        const double e = max_diff(y_mod, y_ref, T * B * H);
        double eg = 0;
        for (int i = 0; i < 4; i++) {
            const double d = max_diff(g_mod[i], g_ref[i], gn[i]);
            eg = d > eg ? d : eg;
        }
        printf("%s %s on %s vs the composed ops: output %.2e, parameter gradients %.2e\n",
               lstm ? "nn.LSTM" : "nn.GRU", ts_dtype_name(dt), ts_device_str(dev), e, eg);
        CHECK(e <= (dt == TS_F32 ? 2e-6 : 1e-14));
        CHECK(eg <= (dt == TS_F32 ? 1e-6 : 1e-14));
    }
    ts_tensor_list_free(&l);
    ts_module_free(m);
    ts_scope_end();
}

/* ------------------------------------------------------------------ a layer's steps on threads */
/* nn.LSTM / nn.GRU run a layer direction's steps as one op (src/nn/rnn_seq_fused.c), whose CPU
 * entries give each thread its own batch rows through all the steps (kern_rnn_cell.c). A batch
 * big enough to be split (32 rows, hidden 40), both directions, h0 and c0 requiring grad and every
 * output in the loss: on 1 and 2 threads the outputs and every gradient (parameters, input, h0,
 * c0) agree to float32's roundings (on AVX-512 bit for bit), as float32 does with float64. */
enum { QT = 5, QB = 32, QI = 6, QH = 40, QD = 2 };
enum { QN_OUT = QT * QB * QD * QH + 2 * QD * QB * QH, QN_GRAD = 4 * QD * QH * (QI + QH + 2) };

/* outputs then gradients: y, h_n, c_n, then the gradients of x, h0, c0 and the parameters */
static bool run_layer(ts_device dev, bool lstm, ts_dtype dt, int threads, double *v, int64_t *n) {
    ts_set_num_threads(threads);
    ts_scope_begin();
    ts_manual_seed(17);
    ts_rnn_opts o = {.bidirectional = true};
    ts_module *m = lstm ? ts_lstm_new(QI, QH, o) : ts_gru_new(QI, QH, o);
    ts_module_to(ts_module_to_dtype(m, dt), dev);
    static double xv[QT * QB * QI], hv[QD * QB * QH], cv[QD * QB * QH];
    fill(xv, QT * QB * QI, 0.43, 0.2);
    fill(hv, QD * QB * QH, 0.31, 0.9);
    fill(cv, QD * QB * QH, 0.17, 1.9);
    ts_tensor *x = mk(TS_SHAPE(QT, QB, QI), xv, dt, dev, NULL),
              *h0 = mk(TS_SHAPE(QD, QB, QH), hv, dt, dev, NULL),
              *c0 = lstm ? mk(TS_SHAPE(QD, QB, QH), cv, dt, dev, NULL) : NULL;
    ts_tensor *leaves[3] = {x, h0, c0};
    for (int i = 0; i < 3; i++)
        if (leaves[i]) ts_set_requires_grad(leaves[i], true);
    ts_tensor *hn = NULL, *cn = NULL;
    ts_tensor *y = ts_rnn_forward(m, x, h0, c0, NULL, &hn, lstm ? &cn : NULL);
    ts_tensor *outs[3] = {y, hn, cn};
    bool ok = y && hn && (!lstm || cn);
    ts_tensor *loss = NULL;
    for (int i = 0; ok && i < 3; i++)
        if (outs[i]) {
            ts_tensor *l = ts_mean(ts_mul(outs[i], ts_sin(outs[i])));
            loss = loss ? ts_add(loss, l) : l;
        }
    if (ok) ts_backward(loss);
    ok = ok && ts_error() == TS_OK;
    *n = 0;
    for (int i = 0; ok && i < 3; i++)
        if (outs[i]) ok = rd(outs[i], v + *n, ts_numel(outs[i])), *n += ts_numel(outs[i]);
    for (int i = 0; ok && i < 3; i++)
        if (leaves[i])
            ok = rd(ts_grad(leaves[i]), v + *n, ts_numel(leaves[i])), *n += ts_numel(leaves[i]);
    ts_tensor_list l = ts_module_named_parameters(m);
    for (int i = 0; ok && i < l.n; i++)
        ok = rd(ts_grad(l.tensors[i]), v + *n, ts_numel(l.tensors[i])),
        *n += ts_numel(l.tensors[i]);
    ts_tensor_list_free(&l);
    ts_module_free(m);
    ts_scope_end();
    return ok;
}

static void check_threads(ts_device dev, bool lstm) {
    const int was = ts_get_num_threads();
    enum { N = QN_OUT + QT * QB * QI + 2 * QD * QB * QH + QN_GRAD };
    static double a[N], b[N], r[N];
    int64_t na = 0, nb = 0, nr = 0;
    bool ok = run_layer(dev, lstm, TS_F32, 1, a, &na) && run_layer(dev, lstm, TS_F32, 2, b, &nb) &&
              run_layer(dev, lstm, TS_F64, 2, r, &nr);
    ts_set_num_threads(was);
    CHECK_OK();
    CHECK(ok && na == nb && na == nr && na <= N);
    if (!ok || na != nb || na != nr) return;
    double scale = 0;
    for (int64_t i = 0; i < nr; i++) scale = fabs(r[i]) > scale ? fabs(r[i]) : scale;
    const double d12 = max_diff(a, b, na) / scale, e = max_diff(b, r, nb) / scale;
    printf("%s bidirectional, batch %d on %s: 1 vs 2 threads %.2e, float32 vs float64 %.2e "
           "(relative)\n",
           lstm ? "nn.LSTM" : "nn.GRU", QB, ts_device_str(dev), d12, e);
    /* the same bits with AVX-512 (each thread's products keep the kernels of the whole batch's);
     * other ISAs' products may round rows differently by their count */
    CHECK(d12 <= 2e-6);
    CHECK(e <= 2e-5); /* T = 5 steps of float32 roundings (2^-24 each), a few dozen per element */
}

/* ---------------------------------------------------------- lengths: the step-by-step path */
/* With lengths, nn.LSTM / nn.GRU take a fused op a step and the weight sink (rnn_cell_fused.c)
 * instead of the sequence op: every length T, they compute the same thing. Two layers, both
 * directions, no initial state (zeros, needing no gradient: the first step's gh then needs none
 * either, while the sink still does), float64: outputs, final states and every parameter
 * gradient agree to float64's roundings. */
enum { LT = 4, LB = 3, LI = 4, LH = 5 };

static bool run_lengths(ts_device dev, bool lstm, bool with_lengths, double *v, int64_t *n) {
    ts_scope_begin();
    ts_manual_seed(23);
    ts_rnn_opts o = {.num_layers = 2, .bidirectional = true};
    ts_module *m = lstm ? ts_lstm_new(LI, LH, o) : ts_gru_new(LI, LH, o);
    ts_module_to(ts_module_to_dtype(m, TS_F64), dev);
    double xv[LT * LB * LI];
    fill(xv, LT * LB * LI, 0.37, 0.5);
    ts_tensor *x = mk(TS_SHAPE(LT, LB, LI), xv, TS_F64, dev, NULL);
    ts_tensor *lens = with_lengths ? ts_tensor_f64(TS_SHAPE(LB), (double[]){LT, LT, LT},
                                                   (ts_opts){.dtype = TS_I64})
                                   : NULL;
    ts_tensor *hn = NULL, *cn = NULL;
    ts_tensor *y = ts_rnn_forward(m, x, NULL, NULL, lens, &hn, lstm ? &cn : NULL);
    ts_tensor *outs[3] = {y, hn, cn};
    bool ok = y && hn && (!lstm || cn);
    ts_tensor *loss = NULL;
    for (int i = 0; ok && i < 3; i++)
        if (outs[i]) {
            ts_tensor *l = ts_sum(ts_mul(outs[i], ts_cos(outs[i])));
            loss = loss ? ts_add(loss, l) : l;
        }
    if (ok) ts_backward(loss);
    ok = ok && ts_error() == TS_OK;
    *n = 0;
    for (int i = 0; ok && i < 3; i++)
        if (outs[i]) ok = rd(outs[i], v + *n, ts_numel(outs[i])), *n += ts_numel(outs[i]);
    ts_tensor_list l = ts_module_named_parameters(m);
    for (int i = 0; ok && i < l.n; i++)
        ok = rd(ts_grad(l.tensors[i]), v + *n, ts_numel(l.tensors[i])),
        *n += ts_numel(l.tensors[i]);
    ts_tensor_list_free(&l);
    ts_module_free(m);
    ts_scope_end();
    return ok;
}

static void check_full_lengths(ts_device dev, bool lstm) {
    enum { N = 20000 };
    static double a[N], b[N];
    int64_t na = 0, nb = 0;
    bool ok = run_lengths(dev, lstm, false, a, &na) && run_lengths(dev, lstm, true, b, &nb);
    CHECK_OK();
    CHECK(ok && na == nb && na <= N);
    if (!ok || na != nb) return;
    const double d = max_diff(a, b, na);
    printf("%s 2 layers bidirectional on %s, every length T vs no lengths: %.2e\n",
           lstm ? "nn.LSTM" : "nn.GRU", ts_device_str(dev), d);
    CHECK(d <= 1e-13);
}

/* ------------------------------------------------------------------ captured steps */
static ts_tensor *train_step(ts_module *m, ts_optim *o, ts_tensor *x) {
    ts_optim_zero_grad(o);
    ts_tensor *y = ts_forward(m, x);
    ts_backward(ts_mean(ts_mul(y, y)));
    ts_optim_step(o);
    return y;
}

/* a captured training step (ts_graph) records the fused steps' kernels and the weight sink's
 * product: replayed on new inputs it leaves the parameters of the eager steps, bit for bit */
static void check_capture(ts_device dev, bool lstm) {
    enum { T = 3, I = 4, STEPS = 3 };
    ts_scope_begin();
    ts_tensor *xs[STEPS];
    for (int k = 0; k < STEPS; k++) {
        double v[T * B * I];
        fill(v, T * B * I, 0.3 + 0.1 * k, 0.7 * k);
        xs[k] = mk(TS_SHAPE(T, B, I), v, TS_F32, dev, NULL);
    }
    ts_module *m[2];
    ts_optim *o[2];
    for (int i = 0; i < 2; i++) {
        ts_manual_seed(5);
        m[i] = lstm ? ts_lstm_new(I, H, (ts_rnn_opts){0}) : ts_gru_new(I, H, (ts_rnn_opts){0});
        ts_module_to(m[i], dev);
        o[i] = ts_sgd_new(m[i], (ts_sgd_opts){.lr = 0.5});
    }
    for (int k = 0; k < STEPS; k++) train_step(m[0], o[0], xs[k]);
    train_step(m[1], o[1], xs[0]); /* warm-up */
    ts_tensor *sx = ts_empty_like(xs[0]);
    ts_graph *g = ts_graph_capture_begin(dev, (ts_graph_opts){0});
    CHECK(g != NULL);
    train_step(m[1], o[1], sx);
    CHECK_EQ(ts_graph_capture_end(), TS_OK);
    for (int k = 1; k < STEPS; k++) {
        ts_copy_(sx, xs[k]);
        CHECK_EQ(ts_graph_replay(g), TS_OK);
    }
    ts_tensor_list pa = ts_module_named_parameters(m[0]), pb = ts_module_named_parameters(m[1]);
    double worst = 0;
    bool ok = pa.n == 4 && pb.n == 4;
    for (int i = 0; ok && i < pa.n; i++) {
        double a[4 * H * H], b[4 * H * H];
        const int64_t n = ts_numel(pa.tensors[i]);
        ok = rd(pa.tensors[i], a, n) && rd(pb.tensors[i], b, n);
        const double d = ok ? max_diff(a, b, n) : INFINITY;
        worst = d > worst ? d : worst;
    }
    printf("%s training step captured and replayed on %s: %lld kernels, parameters off by %.2e\n",
           lstm ? "nn.LSTM" : "nn.GRU", ts_device_str(dev), (long long)ts_graph_kernel_count(g),
           worst);
    CHECK(ok && worst == 0);
    ts_tensor_list_free(&pa);
    ts_tensor_list_free(&pb);
    ts_graph_free(g);
    for (int i = 0; i < 2; i++) ts_optim_free(o[i]), ts_module_free(m[i]);
    ts_scope_end();
    CHECK_OK();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int d = 0; d < nd; d++) {
        ts_mem_stats before, after;
        ts_memory_stats(devs[d], &before);
        for (int lstm = 0; lstm < 2; lstm++) {
            for (int k = 0; k < 2; k++) {
                const ts_dtype dt = k ? TS_F64 : TS_F32;
                check_step(devs[d], dt, lstm, true);
                if (lstm) check_step(devs[d], dt, true, false);
                check_layer(devs[d], lstm, dt);
            }
            gradcheck_cell(devs[d], lstm, true, 7);
            gradcheck_cell(devs[d], lstm, true, 1 | 4);
            gradcheck_cell(devs[d], lstm, true, 2);
        }
        gradcheck_cell(devs[d], true, false, 1 | 4);
        check_full_lengths(devs[d], true);
        check_full_lengths(devs[d], false);
        check_threads(devs[d], true);
        check_threads(devs[d], false);
        check_capture(devs[d], true);
        check_capture(devs[d], false);
        test_errors(devs[d], devs[(d + 1) % nd]);
        ts_memory_stats(devs[d], &after);
        CHECK_EQ(after.live_tensors, before.live_tensors); /* every temporary released */
    }
    return ts_test_finish();
}
