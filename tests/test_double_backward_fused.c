/* test_double_backward_fused.c — create_graph through the fused nodes issue 52 made twice
 * differentiable: linear_cross_entropy's chunked node (class indices with ignore_index, label
 * smoothing and class weights; probabilities; each reduction), cross_entropy's fused node
 * (CrossEntropyLossBackward0, which only CUDA has: here over host kernels written from backend.h's
 * formula and put into the sim backend's table), scaled_dot_product_attention with dropout (the
 * keep mask drawn again from the forward's Philox counters) and the recurrent layers' sequence
 * node (RnnSequenceBackward0: LSTM and GRU, forward and reverse, xw kept or made again from its
 * projection; nn.LSTM and nn.GRU modules, two layers, bidirectional). For each, with p every input
 * and v a direction: the gradients recorded under create_graph equal the first-order ones, and
 * H v by double backward equals (grad f(p + e v) - grad f(p - e v)) / 2e of first-order
 * gradients, in float64, on cpu and sim. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "host_values.h"
#include "hv_check.h"
#include "nn/rnn_cell_fused.h"
#include "nn/rnn_seq_fused.h"
#include "tessera/linalg.h"
#include "tessera/nn.h"
#include "ts_test.h"

#define MAXIN TS_HV_MAXIN

typedef ts_hv_case hv_case;
#define SH       TS_HV_SH
#define shape_of ts_hv_shape

static ts_tensor *targets(const int64_t *v, int64_t n, ts_tensor *like) {
    return ts_from_data(TS_SHAPE(n), TS_I64, v, (ts_opts){.device = ts_device_of(like)});
}

/* ---------------------------------------------------------------- linear_cross_entropy */
static const int64_t lce_t[5] = {2, 0, 1, 2, 1};
static const int64_t lce_t_ign[5] = {2, -1, 1, 0, -1}; /* ignore_index -1 */

static ts_tensor *lce(ts_tensor *const *in, ts_loss_opts o, const int64_t *t) {
    ts_tensor *x = ts_mul_scalar(in[0], 1.5); /* a non-leaf input */
    ts_tensor *y =
        ts_linear_cross_entropy(x, in[1], in[2], targets(t, 5, in[0]), o, 2 /* chunk rows */);
    return o.reduction == TS_REDUCTION_NONE ? ts_hv_head(y) : ts_mul(y, y);
}
static ts_tensor *f_lce_mean(ts_tensor *const *in) { return lce(in, (ts_loss_opts){0}, lce_t); }
static ts_tensor *f_lce_ignore_smooth_weight(ts_tensor *const *in) {
    const double cw[3] = {0.5, 1.5, 1.0};
    ts_loss_opts o = {.weight = ts_tensor_f64(TS_SHAPE(3), cw, ts_hv_f64_on(in[0])),
                      .has_ignore_index = true,
                      .ignore_index = -1,
                      .label_smoothing = 0.2};
    return lce(in, o, lce_t_ign);
}
static ts_tensor *f_lce_none(ts_tensor *const *in) {
    return lce(in, (ts_loss_opts){.reduction = TS_REDUCTION_NONE, .label_smoothing = 0.1}, lce_t);
}
static ts_tensor *f_lce_sum_nobias(ts_tensor *const *in) {
    ts_tensor *y = ts_linear_cross_entropy(in[0], in[1], NULL, targets(lce_t, 5, in[0]),
                                           (ts_loss_opts){.reduction = TS_REDUCTION_SUM}, 3);
    return ts_mul(y, y);
}
static ts_tensor *f_lce_probs(ts_tensor *const *in) {
    ts_tensor *p = ts_softmax(ts_hv_pattern(TS_SHAPE(5, 3), 41, in[0]), 1);
    ts_tensor *y =
        ts_linear_cross_entropy(in[0], in[1], in[2], p, (ts_loss_opts){.label_smoothing = 0.1}, 2);
    return ts_mul(y, y);
}
static ts_tensor *f_lce_unbatched(ts_tensor *const *in) {
    const int64_t t = 1;
    ts_tensor *tg = ts_from_data(TS_SHAPE(), TS_I64, &t, (ts_opts){.device = ts_device_of(in[0])});
    ts_tensor *y = ts_linear_cross_entropy(in[0], in[1], in[2], tg, (ts_loss_opts){0}, 1);
    return ts_mul(y, y);
}

/* ---------------------------------------------------------------- fused cross_entropy */
/* backend.h's formula on host memory (sim's), float64: per row, lse and the loss
 * (1 - e) (lse - x_t) + e (lse - mean(x)), 0 where ignored; dx = g (softmax - (1 - e) onehot(t)
 * - e / C), 0 in an ignored row */
static void host_ce_forward(const ts_backend *be, int index, const ts_cross_entropy_args *a) {
    (void)be, (void)index;
    const double *x = (const double *)a->logits.data;
    const int64_t *t = (const int64_t *)a->target.data;
    double *loss = (double *)a->loss.data, *lse = (double *)a->lse.data;
    const int64_t C = a->classes;
    const double e = a->label_smoothing;
    for (int64_t r = 0; r < a->rows; r++) {
        const double *row = x + r * C;
        double m = -INFINITY, s = 0, sum = 0;
        for (int64_t c = 0; c < C; c++) m = row[c] > m ? row[c] : m;
        for (int64_t c = 0; c < C; c++) s += exp(row[c] - m), sum += row[c];
        lse[r] = m + log(s);
        loss[r] = t[r] == a->ignore_index
                      ? 0
                      : (1 - e) * (lse[r] - row[t[r]]) + e * (lse[r] - sum / (double)C);
    }
}
static void host_ce_backward(const ts_backend *be, int index, const ts_cross_entropy_args *a) {
    (void)be, (void)index;
    const double *x = (const double *)a->logits.data, *lse = (const double *)a->lse.data;
    const double *g = (const double *)a->dloss.data;
    const int64_t *t = (const int64_t *)a->target.data;
    double *dx = (double *)a->dlogits.data;
    const int64_t C = a->classes;
    const double e = a->label_smoothing;
    for (int64_t r = 0; r < a->rows; r++)
        for (int64_t c = 0; c < C; c++)
            dx[r * C + c] =
                t[r] == a->ignore_index
                    ? 0
                    : g[r] * (exp(x[r * C + c] - lse[r]) - (c == t[r] ? 1 - e : 0) - e / C);
}

static const int64_t ce_t[4] = {3, -100, 0, 2};
static ts_tensor *f_ce_fused(ts_tensor *const *in) {
    ts_tensor *x = ts_transpose(in[0], 0, 1); /* [4, 5] read through a copy */
    ts_tensor *y =
        ts_cross_entropy_ex(x, targets(ce_t, 4, in[0]), (ts_loss_opts){.label_smoothing = 0.15});
    return ts_mul(y, y);
}
static ts_tensor *f_ce_fused_none(ts_tensor *const *in) {
    return ts_hv_head(ts_cross_entropy_ex(in[0], targets(ce_t, 4, in[0]),
                                          (ts_loss_opts){.reduction = TS_REDUCTION_NONE}));
}

/* ---------------------------------------------------------------- attention with dropout */
/* the same seed before each call: every evaluation drops the same weights */
static ts_tensor *f_sdpa_dropout(ts_tensor *const *in) {
    ts_manual_seed(1234);
    return ts_hv_head(ts_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.3, false, 0));
}
static ts_tensor *f_sdpa_dropout_causal(ts_tensor *const *in) {
    ts_manual_seed(99);
    return ts_hv_head(ts_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.5, true, 0.6));
}

/* ---------------------------------------------------------------- recurrent sequence node */
/* in: x [T*B, I], w_ih [G*H, I], b_ih [G*H], w_hh [G*H, H], b_hh [G*H] (GRU), h0, c0 [B, H];
 * T 3, B 2, I 2, H 2 */
static ts_tensor *seq(ts_tensor *const *in, bool lstm, bool reverse, bool proj) {
    ts_tensor *xw = ts_linear(in[0], in[1], in[2]);
    xw = ts_view(xw, TS_SHAPE(3, 2, ts_size(xw, 1)));
    ts_tensor *h0 = ts_mul_scalar(in[lstm ? 4 : 5], 0.8), *c0 = lstm ? in[5] : NULL;
    const tsi_rnn_proj pr = {in[0], in[1], in[2]};
    ts_tensor *y = NULL, *hn = NULL, *cn = NULL;
    CHECK(tsi_rnn_seq_fused(lstm, xw, in[3], lstm ? NULL : in[4], h0, c0, reverse,
                            proj ? &pr : NULL, &y, &hn, &cn));
    ts_tensor *s = ts_add(ts_hv_head(y), ts_hv_head(ts_mul_scalar(hn, 2)));
    return lstm ? ts_add(s, ts_hv_head(cn)) : s;
}
static ts_tensor *f_seq_lstm(ts_tensor *const *in) { return seq(in, true, false, true); }
static ts_tensor *f_seq_lstm_rev_xw(ts_tensor *const *in) { return seq(in, true, true, false); }
static ts_tensor *f_seq_gru(ts_tensor *const *in) { return seq(in, false, false, true); }
static ts_tensor *f_seq_gru_rev_xw(ts_tensor *const *in) { return seq(in, false, true, false); }

/* modules: the weights fixed (a pattern), the input and the states the case's inputs */
static ts_tensor *module_of(ts_tensor *const *in, bool lstm) {
    ts_manual_seed(7); /* the same weights at every evaluation */
    ts_module *m = (lstm ? ts_lstm_new
                         : ts_gru_new)(2, 2, (ts_rnn_opts){.num_layers = 2, .bidirectional = true});
    m = ts_module_to(ts_module_to_dtype(m, TS_F64), ts_device_of(in[0]));
    ts_tensor *h0 = ts_mul_scalar(in[1], 0.5), *c0 = lstm ? in[2] : NULL, *hn = NULL, *cn = NULL;
    ts_tensor *y = ts_rnn_forward(m, ts_tanh(in[0]), h0, c0, NULL, &hn, lstm ? &cn : NULL);
    ts_tensor *s = ts_add(ts_hv_head(y), ts_hv_head(hn));
    if (lstm) s = ts_add(s, ts_hv_head(cn));
    ts_module_free(m); /* the graph keeps the weights it needs */
    return s;
}
static ts_tensor *f_lstm_module(ts_tensor *const *in) { return module_of(in, true); }
static ts_tensor *f_gru_module(ts_tensor *const *in) { return module_of(in, false); }

/* ---------------------------------------------------------------- fused cells */
/* in: x [B, I], w_ih [G*H, I], b_ih [G*H], h [B, H], w_hh [G*H, H], b_hh [G*H], c [B, H] (LSTM);
 * B 3, I 2, H 2; the step's products made here and given as its recipe */
static ts_tensor *cell(ts_tensor *const *in, bool lstm) {
    ts_tensor *h = ts_mul_scalar(in[3], 0.7);
    const tsi_rnn_cell_recipe r = {in[0], in[1], in[2], h, in[4], in[5]};
    ts_tensor *xw = ts_linear(in[0], in[1], in[2]), *gh = ts_linear(h, in[4], in[5]);
    if (!lstm) return ts_hv_head(tsi_gru_cell_fused_ex(xw, gh, h, NULL, &r));
    ts_tensor *hn = NULL, *cn = NULL;
    CHECK(tsi_lstm_cell_fused_ex(xw, gh, in[6], NULL, &r, &hn, &cn));
    return ts_add(ts_hv_head(hn), ts_hv_head(ts_mul_scalar(cn, 1.5)));
}
static ts_tensor *f_lstm_cell(ts_tensor *const *in) { return cell(in, true); }
static ts_tensor *f_gru_cell(ts_tensor *const *in) { return cell(in, false); }

/* LSTMCell / GRUCell modules, two steps (the state's gradient through the first): the weights
 * fixed, the input and the states the case's inputs */
static ts_tensor *cell_module(ts_tensor *const *in, bool lstm) {
    ts_manual_seed(5);
    ts_module *m = (lstm ? ts_lstm_cell_new : ts_gru_cell_new)(2, 2, (ts_rnn_opts){0});
    m = ts_module_to(ts_module_to_dtype(m, TS_F64), ts_device_of(in[0]));
    ts_tensor *c1 = NULL, *c2 = NULL;
    ts_tensor *h1 = ts_rnn_cell_forward(m, in[0], in[1], lstm ? in[2] : NULL, lstm ? &c1 : NULL);
    ts_tensor *h2 = ts_rnn_cell_forward(m, ts_mul_scalar(in[0], 0.5), h1, c1, lstm ? &c2 : NULL);
    ts_tensor *s = ts_add(ts_hv_head(h1), ts_hv_head(h2));
    if (lstm) s = ts_add(s, ts_hv_head(c2));
    ts_module_free(m);
    return s;
}
static ts_tensor *f_lstm_cell_module(ts_tensor *const *in) { return cell_module(in, true); }
static ts_tensor *f_gru_cell_module(ts_tensor *const *in) { return cell_module(in, false); }

/* ---------------------------------------------------------------- linear algebra */
/* A + 3 I: well away from singular for entries in [-1, 1) */
static ts_tensor *shifted(ts_tensor *A) {
    const int64_t n = ts_size(A, -1);
    return ts_add(A, ts_mul_scalar(ts_eye(n, 0, ts_hv_f64_on(A)), 3));
}
static ts_tensor *f_inv(ts_tensor *const *in) { return ts_hv_head(ts_linalg_inv(shifted(in[0]))); }
static ts_tensor *f_solve(ts_tensor *const *in) {
    return ts_hv_head(ts_linalg_solve(shifted(in[0]), in[1], true));
}
static ts_tensor *f_det(ts_tensor *const *in) { return ts_hv_head(ts_linalg_det(shifted(in[0]))); }
static ts_tensor *f_slogdet(ts_tensor *const *in) {
    ts_tensor *l = NULL;
    ts_linalg_slogdet(ts_mul_scalar(in[0], 2), &l); /* a negative determinant too */
    return ts_hv_head(l);
}
static ts_tensor *f_cholesky(ts_tensor *const *in) {
    ts_tensor *M = shifted(ts_matmul(in[0], ts_transpose(in[0], -2, -1)));
    return ts_hv_head(ts_linalg_cholesky(M, false));
}
static ts_tensor *f_trisolve(ts_tensor *const *in) {
    return ts_hv_head(
        ts_linalg_solve_triangular(ts_tril(shifted(in[0]), 0), in[1], false, true, false));
}
static ts_tensor *f_qr(ts_tensor *const *in) {
    ts_tensor *R = NULL, *Q = ts_linalg_qr(in[0], "reduced", &R);
    return ts_add(ts_hv_head(Q), ts_hv_head(R));
}
/* squares of the singular / eigen vectors: invariant under their signs */
static ts_tensor *f_svd(ts_tensor *const *in) {
    ts_tensor *S = NULL, *Vh = NULL, *U = ts_linalg_svd(in[0], false, &S, &Vh);
    return ts_add(ts_add(ts_hv_head(S), ts_hv_head(ts_mul(U, U))), ts_hv_head(ts_mul(Vh, Vh)));
}
static ts_tensor *f_eigh(ts_tensor *const *in) {
    ts_tensor *V = NULL, *L = ts_linalg_eigh(ts_add(in[0], ts_transpose(in[0], -2, -1)), "L", &V);
    return ts_add(ts_hv_head(L), ts_hv_head(ts_mul(V, V)));
}
static ts_tensor *f_pinv(ts_tensor *const *in) {
    return ts_hv_head(ts_linalg_pinv(in[0], 0, 0, false));
}
static ts_tensor *f_lu(ts_tensor *const *in) {
    ts_tensor *L = NULL, *U = NULL;
    ts_linalg_lu(shifted(in[0]), &L, &U);
    return ts_add(ts_hv_head(L), ts_hv_head(U));
}

#define LCE "LinearCrossEntropyBackward0"
static const hv_case cases[] = {
    {"lstm cell",
     f_lstm_cell,
     7,
     {SH(2, 3, 2), SH(2, 8, 2), SH(1, 8), SH(2, 3, 2), SH(2, 8, 2), SH(1, 8), SH(2, 3, 2)},
     "ThnnFusedLstmCellBackward0"},
    {"gru cell",
     f_gru_cell,
     6,
     {SH(2, 3, 2), SH(2, 6, 2), SH(1, 6), SH(2, 3, 2), SH(2, 6, 2), SH(1, 6)},
     "ThnnFusedGruCellBackward0"},
    {"nn.LSTMCell two steps",
     f_lstm_cell_module,
     3,
     {SH(2, 3, 2), SH(2, 3, 2), SH(2, 3, 2)},
     "ThnnFusedLstmCellBackward0"},
    {"nn.GRUCell two steps",
     f_gru_cell_module,
     2,
     {SH(2, 3, 2), SH(2, 3, 2)},
     "ThnnFusedGruCellBackward0"},
    {"linalg.inv", f_inv, 1, {SH(3, 2, 3, 3)}, "LinalgInvExBackward0"},
    {"linalg.solve", f_solve, 2, {SH(2, 3, 3), SH(2, 3, 2)}, "LinalgSolveExBackward0"},
    {"linalg.det", f_det, 1, {SH(3, 2, 3, 3)}, "LinalgDetBackward0"},
    {"linalg.slogdet", f_slogdet, 1, {SH(2, 3, 3)}, "LinalgSlogdetBackward0"},
    {"linalg.cholesky", f_cholesky, 1, {SH(2, 3, 3)}, "LinalgCholeskyExBackward0"},
    {"linalg.solve_triangular",
     f_trisolve,
     2,
     {SH(2, 3, 3), SH(2, 3, 2)},
     "LinalgSolveTriangularBackward0"},
    {"linalg.qr", f_qr, 1, {SH(2, 4, 3)}, "LinalgQrBackward0"},
    {"linalg.qr wide", f_qr, 1, {SH(2, 2, 4)}, "LinalgQrBackward0"},
    {"linalg.svd", f_svd, 1, {SH(2, 4, 3)}, "LinalgSvdBackward0"},
    {"linalg.svd wide", f_svd, 1, {SH(2, 2, 3)}, "LinalgSvdBackward0"},
    {"linalg.eigh", f_eigh, 1, {SH(2, 3, 3)}, "LinalgEighBackward0"},
    {"linalg.pinv", f_pinv, 1, {SH(2, 3, 4)}, "LinalgPinvBackward0"},
    {"linalg.lu", f_lu, 1, {SH(2, 3, 3)}, "LinalgLuBackward0"},
    {"linear_cross_entropy mean", f_lce_mean, 3, {SH(2, 5, 4), SH(2, 3, 4), SH(1, 3)}, LCE},
    {"linear_cross_entropy ignore smoothing weight",
     f_lce_ignore_smooth_weight,
     3,
     {SH(2, 5, 4), SH(2, 3, 4), SH(1, 3)},
     LCE},
    {"linear_cross_entropy none", f_lce_none, 3, {SH(2, 5, 4), SH(2, 3, 4), SH(1, 3)}, LCE},
    {"linear_cross_entropy sum no bias", f_lce_sum_nobias, 2, {SH(2, 5, 4), SH(2, 3, 4)}, LCE},
    {"linear_cross_entropy probabilities",
     f_lce_probs,
     3,
     {SH(2, 5, 4), SH(2, 3, 4), SH(1, 3)},
     LCE},
    {"linear_cross_entropy unbatched", f_lce_unbatched, 3, {SH(1, 4), SH(2, 3, 4), SH(1, 3)}, LCE},
    {"cross_entropy fused", f_ce_fused, 1, {SH(2, 5, 4)}, "CrossEntropyLossBackward0"},
    {"cross_entropy fused none", f_ce_fused_none, 1, {SH(2, 4, 5)}, "CrossEntropyLossBackward0"},
    {"sdpa dropout",
     f_sdpa_dropout,
     3,
     {SH(4, 2, 2, 3, 4), SH(4, 2, 2, 5, 4), SH(4, 2, 2, 5, 3)},
     "ScaledDotProductFlashAttentionBackward0"},
    {"sdpa dropout causal",
     f_sdpa_dropout_causal,
     3,
     {SH(3, 2, 4, 3), SH(3, 2, 4, 3), SH(3, 2, 4, 2)},
     "ScaledDotProductFlashAttentionBackward0"},
    {"lstm sequence",
     f_seq_lstm,
     6,
     {SH(2, 6, 2), SH(2, 8, 2), SH(1, 8), SH(2, 8, 2), SH(2, 2, 2), SH(2, 2, 2)},
     "RnnSequenceBackward0"},
    {"lstm sequence reverse, xw kept",
     f_seq_lstm_rev_xw,
     6,
     {SH(2, 6, 2), SH(2, 8, 2), SH(1, 8), SH(2, 8, 2), SH(2, 2, 2), SH(2, 2, 2)},
     "RnnSequenceBackward0"},
    {"gru sequence",
     f_seq_gru,
     6,
     {SH(2, 6, 2), SH(2, 6, 2), SH(1, 6), SH(2, 6, 2), SH(1, 6), SH(2, 2, 2)},
     "RnnSequenceBackward0"},
    {"gru sequence reverse, xw kept",
     f_seq_gru_rev_xw,
     6,
     {SH(2, 6, 2), SH(2, 6, 2), SH(1, 6), SH(2, 6, 2), SH(1, 6), SH(2, 2, 2)},
     "RnnSequenceBackward0"},
    {"nn.LSTM 2 layers bidirectional",
     f_lstm_module,
     3,
     {SH(3, 3, 2, 2), SH(3, 4, 2, 2), SH(3, 4, 2, 2)},
     "RnnSequenceBackward0"},
    {"nn.GRU 2 layers bidirectional",
     f_gru_module,
     2,
     {SH(3, 3, 2, 2), SH(3, 4, 2, 2)},
     "RnnSequenceBackward0"},
};

/* what stays once differentiable says so: a layer's steps with lengths multiply by a detached
 * w_hh (the weight sink gives its gradient), so a second backward through them fails clearly */
static void lstm_lengths_once(ts_device d) {
    ts_scope_begin();
    ts_manual_seed(3);
    ts_module *m = ts_lstm_new(2, 2, (ts_rnn_opts){0});
    m = ts_module_to(ts_module_to_dtype(m, TS_F64), d);
    ts_tensor *x =
        ts_hv_pattern(TS_SHAPE(3, 2, 2), 4, ts_zeros(TS_SHAPE(1), (ts_opts){.device = d}));
    CHECK_EQ(ts_set_requires_grad(x, true), TS_OK);
    const int64_t len[2] = {3, 2};
    ts_tensor *lengths = ts_from_data(TS_SHAPE(2), TS_I64, len, (ts_opts){0});
    ts_tensor *y = ts_hv_head(ts_rnn_forward(m, x, NULL, NULL, lengths, NULL, NULL)), *g = NULL,
              *h = NULL;
    CHECK_EQ(ts_autograd_grad(&y, NULL, 1, &x, 1, (ts_grad_opts){.create_graph = true}, &g), TS_OK);
    ts_tensor *s = ts_sum(ts_mul(g, g));
    CHECK_EQ(ts_autograd_grad(&s, NULL, 1, &x, 1, (ts_grad_opts){0}, &h), TS_ERR_UNSUPPORTED);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "double backward through");
    ts_module_free(m);
    ts_scope_end();
}

int main(void) {
    ts_mem_stats before, after;
    ts_memory_stats(ts_sim(0), &before);
    const ts_device devs[2] = {ts_cpu(), ts_sim(0)};
    /* the fused cross_entropy kernels (CUDA's) as host kernels in sim's table, for its cases */
    ts_tensor *probe = ts_zeros(TS_SHAPE(1), (ts_opts){.device = ts_sim(0)});
    ts_backend *sim = (ts_backend *)tsi_be(probe);
    ts_release(probe);
    CHECK(!sim->cross_entropy_forward && !sim->cross_entropy_backward);
    for (int di = 0; di < 2; di++)
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            const bool fused_ce = strncmp(cases[k].name, "cross_entropy fused", 19) == 0;
            if (fused_ce && di == 0) continue;
            if (fused_ce)
                sim->cross_entropy_forward = host_ce_forward,
                sim->cross_entropy_backward = host_ce_backward;
            ts_hv_check(&cases[k], devs[di]);
            sim->cross_entropy_forward = NULL, sim->cross_entropy_backward = NULL;
        }
    for (int di = 0; di < 2; di++) lstm_lengths_once(devs[di]);
    ts_memory_stats(ts_sim(0), &after);
    CHECK_EQ(after.live_tensors, before.live_tensors);
    CHECK_EQ(ts_memory_stats(ts_cpu(), &after), TS_OK);
    CHECK_EQ(after.live_tensors, 0);
    return ts_test_finish();
}
