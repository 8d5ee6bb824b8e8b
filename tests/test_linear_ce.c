/* test_linear_ce.c — ts_linear_cross_entropy (torch.nn.functional.linear_cross_entropy,
 * src/nn/loss_linear_ce.c) on every device in float32 and float64: the reference composition
 * (chunk_rows 0) and the chunked form (chunks of 1, 3 and more rows than the batch) against a
 * float64 hand loop (logits, log-softmax, class weights, ignore_index inside and outside
 * [0, C), label smoothing, probability targets, every reduction, an unbatched input,
 * K-dimensional weights); the chunked form's gradients (input, weight, bias) against the
 * reference's and by ts_gradcheck in float64; the refusals with PyTorch's messages. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_values.h"
#include "tessera.h"
#include "ts_test.h"

static ts_device devs[TS_TEST_MAX_DEVICES];
static int ndev;

#define MAXV 4096
static double hx[MAXV], hw[MAXV], hb[MAXV], hcw[MAXV], hp[MAXV], href[MAXV], hgot[MAXV];
static double g1[MAXV], g2[MAXV];
static int64_t ht[MAXV];

#define fill       ts_test_fill_uniform /* tests/support/host_values.h */
#define mk         ts_test_tensor_f64   /* tests/support/host_values.h */
#define rd(t, out) ts_test_read_f64(t, out, MAXV)

typedef struct {
    int64_t N, F, C;
    bool bias, cw, prob;
    int64_t ignore; /* with has_ignore */
    bool has_ignore;
    double ls;
    ts_reduction r;
} lce_case;

/* the float64 loss of rows x [N, F] (rows = N), W [C, F], targets ht / hp: out[N] or out[0] */
static int64_t reference(const lce_case *c, double *out) {
    const int64_t N = c->N, F = c->F, C = c->C;
    const int64_t ign = c->has_ignore ? c->ignore : -100;
    double total = 0, denom = 0;
    for (int64_t i = 0; i < N; i++) {
        double z[64], mx = -INFINITY, se = 0;
        for (int64_t k = 0; k < C; k++) {
            double s = c->bias ? hb[k] : 0.0;
            for (int64_t f = 0; f < F; f++) s += hx[i * F + f] * hw[k * F + f];
            z[k] = s;
            mx = fmax(mx, s);
        }
        for (int64_t k = 0; k < C; k++) se += exp(z[k] - mx);
        const double lse = mx + log(se);
        double loss = 0;
        if (c->prob) {
            for (int64_t k = 0; k < C; k++) {
                const double y = hp[i * C + k] * (1 - c->ls) + c->ls / (double)C;
                loss -= (c->cw ? hcw[k] : 1.0) * y * (z[k] - lse);
            }
            denom += 1;
        } else if (ht[i] != ign) {
            const double wt = c->cw ? hcw[ht[i]] : 1.0;
            double smooth = 0;
            for (int64_t k = 0; k < C; k++) smooth -= (c->cw ? hcw[k] : 1.0) * (z[k] - lse);
            loss = (1 - c->ls) * wt * -(z[ht[i]] - lse) + c->ls / (double)C * smooth;
            denom += wt;
        }
        out[i] = loss;
        total += loss;
    }
    if (c->r == TS_REDUCTION_NONE) return N;
    out[0] = c->r == TS_REDUCTION_SUM ? total : total / denom;
    return 1;
}

static ts_tensor *run(const lce_case *c, ts_tensor *x, ts_tensor *w, ts_tensor *b, ts_tensor *t,
                      ts_tensor *cw, int64_t chunk) {
    ts_loss_opts o = {.reduction = c->r,
                      .weight = cw,
                      .has_ignore_index = c->has_ignore,
                      .ignore_index = c->ignore,
                      .label_smoothing = c->ls};
    return ts_linear_cross_entropy(x, w, b, t, o, chunk);
}

static void test_values(ts_device d, ts_dtype dt) {
    static const lce_case cases[] = {
        {8, 5, 4, false, false, false, 0, false, 0.0, TS_REDUCTION_MEAN},
        {8, 5, 4, true, true, false, 0, false, 0.1, TS_REDUCTION_MEAN},
        {8, 5, 4, true, false, false, 1, true, 0.0, TS_REDUCTION_SUM},  /* ignore in range */
        {8, 5, 4, false, true, false, 9, true, 0.1, TS_REDUCTION_NONE}, /* out of range */
        {7, 6, 5, true, true, false, -100, false, 0.2, TS_REDUCTION_MEAN},
        {8, 5, 4, false, false, true, 0, false, 0.0, TS_REDUCTION_MEAN}, /* probabilities */
        {8, 5, 4, true, true, true, 0, false, 0.1, TS_REDUCTION_SUM},
        {6, 3, 4, true, true, true, 0, false, 0.0, TS_REDUCTION_NONE},
    };
    const double tol = dt == TS_F64 ? 1e-12 : 2e-5;
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const lce_case *c = &cases[ci];
        const int64_t N = c->N, F = c->F, C = c->C;
        fill(hx, N * F, (int)ci);
        fill(hw, C * F, 10 + (int)ci);
        fill(hb, C, 20 + (int)ci);
        fill(hcw, C, 30 + (int)ci);
        for (int64_t k = 0; k < C; k++) hcw[k] = 1.25 + hcw[k]; /* positive class weights */
        fill(hp, N * C, 40 + (int)ci);
        for (int64_t i = 0; i < N; i++) {
            double s = 0;
            for (int64_t k = 0; k < C; k++) s += (hp[i * C + k] = fabs(hp[i * C + k]));
            for (int64_t k = 0; k < C; k++) hp[i * C + k] /= s;
            ht[i] = (i * 7 + (int64_t)ci) % C;
        }
        /* has_ignore false with ignore -100: targets at the default ignore_index, -100 */
        if (c->has_ignore || c->ignore == -100) ht[2] = c->ignore, ht[5] = c->ignore;
        const int64_t nref = reference(c, href);
        const int64_t chunks[4] = {0, 1, 3, N + 5}; /* 0: the reference composition */
        for (int ch = 0; ch < 4; ch++) {
            const int64_t chunk = chunks[ch];
            ts_scope_begin();
            ts_tensor *x = mk(TS_SHAPE(N, F), hx, dt, d), *w = mk(TS_SHAPE(C, F), hw, dt, d);
            ts_tensor *b = c->bias ? mk(TS_SHAPE(C), hb, dt, d) : NULL;
            ts_tensor *cw = c->cw ? mk(TS_SHAPE(C), hcw, dt, d) : NULL;
            ts_tensor *t = c->prob ? mk(TS_SHAPE(N, C), hp, dt, d)
                                   : ts_to(ts_tensor_i64(TS_SHAPE(N), ht, (ts_opts){0}), d);
            ts_tensor *y = run(c, x, w, b, t, cw, chunk);
            CHECK_OK();
            bool ok = y && ts_numel(y) == nref && ts_dtype_of(y) == dt && rd(y, hgot);
            double err = 0, scale = 1;
            for (int64_t i = 0; ok && i < nref; i++) {
                err = fmax(err, fabs(hgot[i] - href[i]));
                scale = fmax(scale, fabs(href[i]));
            }
            ok = ok && err <= tol * scale;
            CHECK(ok);
            if (!ok)
                printf("  (case %zu chunk %lld %s: err %.3g)\n", ci, (long long)chunk,
                       dt == TS_F64 ? "f64" : "f32", err);
            ts_scope_end();
        }
    }
}

/* unbatched inputs and K-dimensional weights (the reference path; unbatched also chunked) */
static void test_shapes(ts_device d) {
    ts_scope_begin();
    const int64_t F = 4, C = 3;
    fill(hx, F, 1);
    fill(hw, C * F, 2);
    fill(hb, C, 3);
    ts_tensor *x = mk(TS_SHAPE(F), hx, TS_F64, d), *w = mk(TS_SHAPE(C, F), hw, TS_F64, d);
    ts_tensor *b = mk(TS_SHAPE(C), hb, TS_F64, d);
    ht[0] = 2;
    lce_case c = {1, F, C, true, false, false, 0, false, 0.0, TS_REDUCTION_NONE};
    reference(&c, href);
    for (int64_t chunk = 0; chunk <= 1; chunk++) {
        ts_tensor *y =
            run(&c, x, w, b, ts_to(ts_scalar(2, (ts_opts){.dtype = TS_I64}), d), NULL, chunk);
        CHECK(y && ts_shape_of(y).ndim == 0 && rd(y, hgot) && fabs(hgot[0] - href[0]) < 1e-12);
    }
    /* K-dimensional: weight [C, 2, 3, F], bias [C, 2, 3], target [N, 2, 3] */
    const int64_t N = 2, D = 6;
    fill(hx, N * F, 4);
    fill(hw, C * D * F, 5);
    fill(hb, C * D, 6);
    ts_tensor *xk = mk(TS_SHAPE(N, F), hx, TS_F64, d);
    ts_tensor *wk = mk(TS_SHAPE(C, 2, 3, F), hw, TS_F64, d),
              *bk = mk(TS_SHAPE(C, 2, 3), hb, TS_F64, d);
    for (int64_t i = 0; i < N * D; i++) ht[i] = (i * 5) % C;
    ts_tensor *tk = ts_to(ts_tensor_i64(TS_SHAPE(N, 2, 3), ht, (ts_opts){0}), d);
    ts_tensor *y =
        ts_linear_cross_entropy(xk, wk, bk, tk, (ts_loss_opts){.reduction = TS_REDUCTION_NONE}, 2);
    /* hand: logit[n, c, p] = x[n] . w[c, p] + b[c, p] */
    bool ok = y && ts_numel(y) == N * D && rd(y, hgot);
    for (int64_t n = 0; ok && n < N; n++)
        for (int64_t p = 0; p < D; p++) {
            double z[8], mx = -INFINITY, se = 0;
            for (int64_t k = 0; k < C; k++) {
                double s = hb[k * D + p];
                for (int64_t f = 0; f < F; f++) s += hx[n * F + f] * hw[(k * D + p) * F + f];
                z[k] = s, mx = fmax(mx, s);
            }
            for (int64_t k = 0; k < C; k++) se += exp(z[k] - mx);
            const double want = mx + log(se) - z[ht[n * D + p]];
            ok = fabs(hgot[n * D + p] - want) < 1e-12;
        }
    CHECK(ok);
    CHECK_OK();
    ts_scope_end();
}

/* the chunked form's gradients equal the reference composition's */
static void test_grad_match(ts_device d, ts_dtype dt) {
    static const lce_case cases[] = {
        {8, 5, 4, true, true, false, 1, true, 0.1, TS_REDUCTION_MEAN},
        {8, 5, 4, true, false, false, 9, true, 0.0, TS_REDUCTION_NONE},
        {7, 5, 4, true, true, true, 0, false, 0.1, TS_REDUCTION_SUM},
        {7, 5, 4, false, false, true, 0, false, 0.0, TS_REDUCTION_MEAN},
        {8, 5, 4, true, true, false, -100, false, 0.1, TS_REDUCTION_MEAN}, /* default ignore */
    };
    const double tol = dt == TS_F64 ? 1e-12 : 2e-5;
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const lce_case *c = &cases[ci];
        const int64_t N = c->N, F = c->F, C = c->C;
        fill(hx, N * F, 50 + (int)ci);
        fill(hw, C * F, 60 + (int)ci);
        fill(hb, C, 70 + (int)ci);
        fill(hcw, C, 80 + (int)ci);
        for (int64_t k = 0; k < C; k++) hcw[k] = 1.5 + hcw[k];
        fill(hp, N * C, 90 + (int)ci);
        for (int64_t i = 0; i < N * C; i++) hp[i] = fabs(hp[i]);
        for (int64_t i = 0; i < N; i++) ht[i] = (i * 3 + 1) % C;
        if (c->has_ignore || c->ignore == -100) ht[3] = c->ignore;
        double *res[2] = {g1, g2};
        for (int pass = 0; pass < 2; pass++) {
            ts_scope_begin();
            ts_tensor *x = mk(TS_SHAPE(N, F), hx, dt, d), *w = mk(TS_SHAPE(C, F), hw, dt, d);
            ts_tensor *b = c->bias ? mk(TS_SHAPE(C), hb, dt, d) : NULL;
            ts_tensor *cw = c->cw ? mk(TS_SHAPE(C), hcw, dt, d) : NULL;
            ts_tensor *t = c->prob ? mk(TS_SHAPE(N, C), hp, dt, d)
                                   : ts_to(ts_tensor_i64(TS_SHAPE(N), ht, (ts_opts){0}), d);
            ts_set_requires_grad(x, true);
            ts_set_requires_grad(w, true);
            if (b) ts_set_requires_grad(b, true);
            ts_tensor *y = run(c, x, w, b, t, cw, pass ? 3 : 0);
            /* a non-uniform upstream gradient */
            fill(hgot, ts_numel(y), 99);
            ts_tensor *loss = ts_sum(ts_mul(y, mk(ts_shape_of(y), hgot, dt, d)));
            ts_backward(loss);
            CHECK_OK();
            double *o = res[pass];
            CHECK(rd(ts_grad(x), o) && rd(ts_grad(w), o + N * F) &&
                  (!b || rd(ts_grad(b), o + N * F + C * F)));
            if (pass)
                CHECK(ts_grad_fn_name(y) &&
                      strcmp(ts_grad_fn_name(y), "LinearCrossEntropyBackward0") == 0);
            ts_scope_end();
        }
        const int64_t ng = N * F + C * F + (c->bias ? C : 0);
        double err = 0;
        for (int64_t i = 0; i < ng; i++) err = fmax(err, fabs(g1[i] - g2[i]));
        CHECK(err <= tol);
        if (err > tol)
            printf("  (grad case %zu %s: err %.3g)\n", ci, dt == TS_F64 ? "f64" : "f32", err);
    }
}

/* no rows, chunked or not: cross_entropy's answer on empty logits (mean nan, sum 0, none [0]) */
static void test_empty_rows(ts_device d) {
    ts_scope_begin();
    const ts_opts o = {.dtype = TS_F64, .device = d};
    ts_tensor *x = ts_zeros(TS_SHAPE(0, 3), o), *w = ts_ones(TS_SHAPE(4, 3), o);
    ts_tensor *t = ts_zeros(TS_SHAPE(0), (ts_opts){.dtype = TS_I64, .device = d});
    for (int64_t chunk = 0; chunk <= 2; chunk += 2) {
        ts_tensor *mean = ts_linear_cross_entropy(
            x, w, NULL, t, (ts_loss_opts){.reduction = TS_REDUCTION_MEAN}, chunk);
        ts_tensor *sum = ts_linear_cross_entropy(
            x, w, NULL, t, (ts_loss_opts){.reduction = TS_REDUCTION_SUM}, chunk);
        ts_tensor *none = ts_linear_cross_entropy(
            x, w, NULL, t, (ts_loss_opts){.reduction = TS_REDUCTION_NONE}, chunk);
        CHECK_OK();
        CHECK(mean && ts_numel(mean) == 1 && isnan(ts_item(mean)));
        CHECK(sum && ts_numel(sum) == 1 && ts_item(sum) == 0);
        CHECK(none && ts_ndim(none) == 1 && ts_numel(none) == 0);
    }
    ts_scope_end();
}

/* probability targets of another dtype than the input (float64 for a float32 layer): the
 * reference composition's type promotion, not the chunked node, whatever chunk_rows says; the
 * same loss and gradients either way */
static void test_prob_target_dtype(void) {
    const int64_t N = 5, F = 3, C = 4;
    fill(hx, N * F, 7);
    fill(hw, C * F, 8);
    fill(hp, N * C, 9);
    for (int64_t i = 0; i < N; i++) {
        double s = 0;
        for (int64_t k = 0; k < C; k++) s += (hp[i * C + k] = fabs(hp[i * C + k]));
        for (int64_t k = 0; k < C; k++) hp[i * C + k] /= s;
    }
    double loss[2];
    double *res[2] = {g1, g2};
    for (int pass = 0; pass < 2; pass++) {
        ts_scope_begin();
        ts_tensor *x = mk(TS_SHAPE(N, F), hx, TS_F32, ts_cpu());
        ts_tensor *w = mk(TS_SHAPE(C, F), hw, TS_F32, ts_cpu());
        ts_tensor *p = mk(TS_SHAPE(N, C), hp, TS_F64, ts_cpu());
        ts_set_requires_grad(x, true);
        ts_set_requires_grad(w, true);
        ts_tensor *y = ts_linear_cross_entropy(x, w, NULL, p, (ts_loss_opts){0}, pass ? 2 : 0);
        CHECK(y && ts_dtype_of(y) == TS_F64);
        CHECK(y && !(ts_grad_fn_name(y) &&
                     strcmp(ts_grad_fn_name(y), "LinearCrossEntropyBackward0") == 0));
        loss[pass] = y ? ts_item(y) : NAN;
        if (y) ts_backward(y);
        CHECK_OK();
        CHECK(rd(ts_grad(x), res[pass]) && rd(ts_grad(w), res[pass] + N * F));
        ts_scope_end();
    }
    CHECK(loss[0] == loss[1]);
    for (int64_t i = 0; i < N * F + C * F; i++) CHECK(g1[i] == g2[i]);
}

/* class weights of another dtype than the input (float64 for a float32 layer): refused as
 * PyTorch's cross_entropy does, whatever chunk_rows says */
static void test_class_weight_dtype(void) {
    const int64_t N = 5, F = 3, C = 4;
    fill(hx, N * F, 17);
    fill(hw, C * F, 18);
    for (int64_t k = 0; k < C; k++) hcw[k] = 1.0 + (double)k;
    for (int64_t i = 0; i < N; i++) ht[i] = (i * 3 + 1) % C;
    for (int64_t chunk = 0; chunk <= 2; chunk += 2) {
        ts_scope_begin();
        ts_tensor *x = mk(TS_SHAPE(N, F), hx, TS_F32, ts_cpu());
        ts_tensor *w = mk(TS_SHAPE(C, F), hw, TS_F32, ts_cpu());
        ts_tensor *cw = mk(TS_SHAPE(C), hcw, TS_F64, ts_cpu());
        ts_tensor *t = ts_tensor_i64(TS_SHAPE(N), ht, (ts_opts){0});
        ts_set_requires_grad(w, true);
        CHECK(!ts_linear_cross_entropy(x, w, NULL, t, (ts_loss_opts){.weight = cw}, chunk));
        CHECK_ERR_HAS(TS_ERR_DTYPE, "cross_entropy: expected scalar type Float but found Double");
        ts_scope_end();
    }
}

/* only the bias requires grad (not the input, not the weight): the chunked node still gives it
 * its gradient, the reference composition's */
static void test_bias_only_grad(void) {
    const int64_t N = 7, F = 3, C = 4;
    fill(hx, N * F, 27);
    fill(hw, C * F, 28);
    fill(hb, C, 29);
    for (int64_t i = 0; i < N; i++) ht[i] = (i * 5 + 2) % C;
    double *res[2] = {g1, g2};
    for (int pass = 0; pass < 2; pass++) {
        ts_scope_begin();
        ts_tensor *x = mk(TS_SHAPE(N, F), hx, TS_F64, ts_cpu());
        ts_tensor *w = mk(TS_SHAPE(C, F), hw, TS_F64, ts_cpu());
        ts_tensor *b = mk(TS_SHAPE(C), hb, TS_F64, ts_cpu());
        ts_tensor *t = ts_tensor_i64(TS_SHAPE(N), ht, (ts_opts){0});
        ts_set_requires_grad(b, true);
        ts_tensor *y = ts_linear_cross_entropy(x, w, b, t, (ts_loss_opts){0}, pass ? 3 : 0);
        if (pass)
            CHECK(y && ts_grad_fn_name(y) &&
                  strcmp(ts_grad_fn_name(y), "LinearCrossEntropyBackward0") == 0);
        if (y) ts_backward(y);
        CHECK_OK();
        CHECK(ts_grad(x) == NULL && ts_grad(w) == NULL && rd(ts_grad(b), res[pass]));
        ts_scope_end();
    }
    for (int64_t k = 0; k < C; k++) CHECK_NEAR(g1[k], g2[k], 1e-12);
}

typedef struct {
    lce_case c;
    ts_tensor *t, *cw;
} gctx;

static ts_tensor *chunked_f(ts_tensor *const *in, int n, void *vctx) {
    const gctx *g = vctx;
    (void)n;
    return run(&g->c, in[0], in[1], in[2], g->t, g->cw, 2);
}

static void test_gradcheck(void) {
    ts_scope_begin();
    const int64_t N = 5, F = 3, C = 4;
    fill(hx, N * F, 1);
    fill(hw, C * F, 2);
    fill(hb, C, 3);
    fill(hcw, C, 4);
    for (int64_t k = 0; k < C; k++) hcw[k] = 1.5 + hcw[k];
    for (int64_t i = 0; i < N; i++) ht[i] = (i * 3) % C;
    ht[1] = 2; /* the ignored class below */
    ts_tensor *in[3] = {mk(TS_SHAPE(N, F), hx, TS_F64, ts_cpu()),
                        mk(TS_SHAPE(C, F), hw, TS_F64, ts_cpu()),
                        mk(TS_SHAPE(C), hb, TS_F64, ts_cpu())};
    for (int i = 0; i < 3; i++) ts_set_requires_grad(in[i], true);
    static const ts_reduction rs[3] = {TS_REDUCTION_MEAN, TS_REDUCTION_SUM, TS_REDUCTION_NONE};
    for (int r = 0; r < 3; r++) {
        gctx g = {.c = {N, F, C, true, true, false, 2, true, 0.15, rs[r]},
                  .t = ts_tensor_i64(TS_SHAPE(N), ht, (ts_opts){0}),
                  .cw = ts_tensor_f64(TS_SHAPE(C), hcw, (ts_opts){.dtype = TS_F64})};
        bool ok = ts_gradcheck(chunked_f, &g, in, 3, (ts_gradcheck_opts){0});
        ts_test_record(ok);
        if (!ok)
            ts_test_failf(__FILE__, __LINE__, "gradcheck chunked r=%d%s", r, ts_test_error_str());
        ts_error_clear();
    }
    ts_scope_end();
}

static void test_errors(void) {
    ts_scope_begin();
    ts_tensor *x = ts_randn(TS_SHAPE(4, 3), (ts_opts){0}),
              *w = ts_randn(TS_SHAPE(5, 3), (ts_opts){0});
    ts_tensor *t = ts_zeros(TS_SHAPE(4), (ts_opts){.dtype = TS_I64});
    ts_loss_opts o = {0};
    CHECK(!ts_linear_cross_entropy(ts_randn(TS_SHAPE(2, 4, 3), (ts_opts){0}), w, NULL, t, o, 0));
    CHECK_ERR_HAS(TS_ERR_SHAPE,
                  "linear_cross_entropy: expected input with dimensionality 1 or 2, got 3");
    CHECK(!ts_linear_cross_entropy(x, ts_randn(TS_SHAPE(3), (ts_opts){0}), NULL, t, o, 0));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "expected linear_weight with dimensionality at least 2, got 1");
    CHECK(!ts_linear_cross_entropy(x, ts_randn(TS_SHAPE(5, 2), (ts_opts){0}), NULL, t, o, 0));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "got 3 and 2, respectively");
    CHECK(!ts_linear_cross_entropy(x, w, ts_randn(TS_SHAPE(4), (ts_opts){0}), t, o, 2));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "expected linear_bias shape [5], got [4]");
    CHECK(!ts_linear_cross_entropy(ts_randn(TS_SHAPE(3), (ts_opts){0}),
                                   ts_randn(TS_SHAPE(5, 2, 3), (ts_opts){0}), NULL, t, o, 0));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "requires batched input");
    o.has_ignore_index = true;
    CHECK(!ts_linear_cross_entropy(x, w, NULL, ts_rand(TS_SHAPE(4, 5), (ts_opts){0}), o, 2));
    CHECK_ERR_HAS(TS_ERR_ARG,
                  "ignore_index cannot be specified when target contains probabilities");
    o.has_ignore_index = false;
    CHECK(!ts_linear_cross_entropy(x, w, NULL, t, o, -1));
    CHECK_ERR_HAS(TS_ERR_ARG, "chunk_rows");
    /* a class index outside [0, C): cross_entropy's refusal, chunked or not */
    ts_tensor *bad = ts_full(TS_SHAPE(4), 7, (ts_opts){.dtype = TS_I64});
    CHECK(!ts_linear_cross_entropy(x, w, NULL, bad, o, 2));
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    if (ndev > 1) {
        CHECK(!ts_linear_cross_entropy(x, ts_to(w, devs[1]), NULL, t, o, 2));
        CHECK_ERR(TS_ERR_DEVICE);
    }
    ts_scope_end();
}

int main(void) {
    ndev = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int di = 0; di < ndev; di++) {
        for (int t = 0; t < 2; t++) {
            ts_scope_begin();
            test_values(devs[di], t ? TS_F32 : TS_F64);
            test_grad_match(devs[di], t ? TS_F32 : TS_F64);
            ts_scope_end();
            CHECK_OK();
        }
        ts_scope_begin();
        test_shapes(devs[di]);
        test_empty_rows(devs[di]);
        ts_scope_end();
    }
    ts_scope_begin();
    test_gradcheck();
    test_errors();
    test_prob_target_dtype();
    test_class_weight_dtype();
    test_bias_only_grad();
    ts_scope_end();
    CHECK_OK();
    CHECK_EQ(ts_scope_depth(), 0); /* every path closes the scopes it opened */
    return ts_test_finish();
}
