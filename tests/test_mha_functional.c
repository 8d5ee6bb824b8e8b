/* test_mha_functional.c — ts_multi_head_attention_forward (PyTorch's
 * F.multi_head_attention_forward) on every test device against a float64 reference written here
 * from PyTorch's equations: packed and separate (kdim / vdim) in-projections, biases, bias_k /
 * bias_v, add_zero_attn, static_k / static_v, float and bool attn_mask (2-D and 3-D),
 * key_padding_mask, is_causal, the weights per head and averaged, batched and unbatched, the SDPA
 * path (need_weights false); gradients by ts_gradcheck (central differences); the refusals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_values.h"
#include "ts_test.h"

#define E  4
#define H  2
#define HD (E / H)
#define L  3
#define S  4
#define NB 2
#define SM 8 /* the most keys: S + bias + zero, or a static length */

typedef struct mcase {
    bool batched, separate, bias, bias_kv, zero_attn, is_causal, need_weights, average;
    int kdim, vdim; /* separate only; else E */
    int am;         /* 0 none, 1 float 2-D, 2 bool 2-D, 3 bool 3-D, 4 causal bool 2-D */
    bool kpm;       /* bool [N, S] */
    int static_len; /* 0: none; else static_k / static_v [N H, static_len, HD] */
} mcase;

/* host values of one case (the model's parameters and inputs) */
typedef struct mvals {
    double q[L * NB * E], k[S * NB * 8], v[S * NB * 8];
    double wq[E * E], wk[E * 8], wv[E * 8], b[3 * E], wo[E * E], bo[E], bk[E], bv[E];
    double amf[NB * H * L * S];
    bool amb[NB * H * L * S], kpm[NB * SM];
    double sk[NB * H * SM * HD], sv[NB * H * SM * HD];
} mvals;

static void make_vals(const mcase *c, mvals *m, int seed) {
    ts_test_fill_uniform(m->q, L * NB * E, seed + 1);
    ts_test_fill_uniform(m->k, S * NB * 8, seed + 2);
    ts_test_fill_uniform(m->v, S * NB * 8, seed + 3);
    ts_test_fill_uniform(m->wq, E * E, seed + 4);
    ts_test_fill_uniform(m->wk, E * 8, seed + 5);
    ts_test_fill_uniform(m->wv, E * 8, seed + 6);
    ts_test_fill_uniform(m->b, 3 * E, seed + 7);
    ts_test_fill_uniform(m->wo, E * E, seed + 8);
    ts_test_fill_uniform(m->bo, E, seed + 9);
    ts_test_fill_uniform(m->bk, E, seed + 10);
    ts_test_fill_uniform(m->bv, E, seed + 11);
    ts_test_fill_uniform(m->amf, NB * H * L * S, seed + 12);
    ts_test_fill_uniform(m->sk, NB * H * SM * HD, seed + 13);
    ts_test_fill_uniform(m->sv, NB * H * SM * HD, seed + 14);
    for (int i = 0; i < NB * H * L * S; i++) m->amb[i] = (i * 7 + seed) % 5 == 0;
    for (int i = 0; i < NB * H * L; i++) m->amb[i * S] = false; /* a key left for every query */
    if (c->am == 4)
        for (int l = 0; l < L; l++)
            for (int s = 0; s < S; s++) m->amb[l * S + s] = s > l;
    const int kl = c->static_len ? c->static_len : S; /* the keys key_padding_mask covers */
    for (int n = 0; n < NB; n++)
        for (int s = 0; s < kl; s++) m->kpm[n * kl + s] = s == kl - 1 - n;
}

static int kd(const mcase *c) { return c->separate ? c->kdim : E; }
static int vd(const mcase *c) { return c->separate ? c->vdim : E; }

/* the reference: out [L, NB, E], weights [NB, H, L, keys] (keys returned) */
static int reference(const mcase *c, const mvals *m, double *out, double *wts) {
    const int nb = c->batched ? NB : 1;
    const int keys = (c->static_len ? c->static_len : S + c->bias_kv) + c->zero_attn;
    for (int n = 0; n < nb; n++) {
        double Q[L][E], K[SM][E], V[SM][E], O[L][E];
        for (int l = 0; l < L; l++)
            for (int e = 0; e < E; e++) {
                double a = c->bias ? m->b[e] : 0;
                for (int j = 0; j < E; j++) a += m->wq[e * E + j] * m->q[(l * nb + n) * E + j];
                Q[l][e] = a;
            }
        for (int s = 0; s < S; s++)
            for (int e = 0; e < E; e++) {
                double a = c->bias ? m->b[E + e] : 0, b = c->bias ? m->b[2 * E + e] : 0;
                for (int j = 0; j < kd(c); j++)
                    a += m->wk[e * kd(c) + j] * m->k[(s * nb + n) * kd(c) + j];
                for (int j = 0; j < vd(c); j++)
                    b += m->wv[e * vd(c) + j] * m->v[(s * nb + n) * vd(c) + j];
                K[s][e] = a, V[s][e] = b;
            }
        if (c->bias_kv)
            for (int e = 0; e < E; e++) K[S][e] = m->bk[e], V[S][e] = m->bv[e];
        for (int h = 0; h < H; h++) {
            double Kh[SM][HD], Vh[SM][HD];
            for (int s = 0; s < keys; s++)
                for (int d = 0; d < HD; d++) {
                    if (c->zero_attn && s == keys - 1)
                        Kh[s][d] = Vh[s][d] = 0;
                    else if (c->static_len)
                        Kh[s][d] = m->sk[((n * H + h) * c->static_len + s) * HD + d],
                        Vh[s][d] = m->sv[((n * H + h) * c->static_len + s) * HD + d];
                    else
                        Kh[s][d] = K[s][h * HD + d], Vh[s][d] = V[s][h * HD + d];
                }
            for (int l = 0; l < L; l++) {
                double sc[SM], mx = -INFINITY, sum = 0;
                for (int s = 0; s < keys; s++) {
                    double a = 0;
                    for (int d = 0; d < HD; d++) a += Q[l][h * HD + d] * Kh[s][d];
                    a /= sqrt((double)HD);
                    if (s < S) { /* the user's keys; bias / zero columns are allowed */
                        const int i2 = l * S + s, i3 = ((n * H + h) * L + l) * S + s;
                        if (c->am == 1) a += m->amf[i2];
                        if ((c->am == 2 || c->am == 4) && m->amb[i2]) a = -INFINITY;
                        if (c->am == 3 && m->amb[i3]) a = -INFINITY;
                    }
                    const int kl = c->static_len ? c->static_len : S;
                    if (s < kl && c->kpm && m->kpm[n * kl + s]) a = -INFINITY;
                    sc[s] = a, mx = fmax(mx, a);
                }
                for (int s = 0; s < keys; s++) sc[s] = exp(sc[s] - mx), sum += sc[s];
                for (int d = 0; d < HD; d++) O[l][h * HD + d] = 0;
                for (int s = 0; s < keys; s++) {
                    const double p = sc[s] / sum;
                    wts[((n * H + h) * L + l) * keys + s] = p;
                    for (int d = 0; d < HD; d++) O[l][h * HD + d] += p * Vh[s][d];
                }
            }
        }
        for (int l = 0; l < L; l++)
            for (int e = 0; e < E; e++) {
                double a = c->bias ? m->bo[e] : 0;
                for (int j = 0; j < E; j++) a += m->wo[e * E + j] * O[l][j];
                out[(l * nb + n) * E + e] = a;
            }
    }
    return keys;
}

/* the case's tensors: in[0..2] query, key, value; the rest in the args */
typedef struct mtensors {
    ts_tensor *q, *k, *v;
    ts_mha_forward_args a;
} mtensors;

static mtensors make_tensors(const mcase *c, const mvals *m, ts_dtype dt, ts_device dev) {
    const int nb = c->batched ? NB : 1;
    mtensors t = {0};
#define TT(shape, vals) ts_test_tensor_f64(shape, vals, dt, dev)
    t.q = TT(c->batched ? TS_SHAPE(L, NB, E) : TS_SHAPE(L, E), m->q);
    t.k = TT(c->batched ? TS_SHAPE(S, NB, kd(c)) : TS_SHAPE(S, kd(c)), m->k);
    t.v = TT(c->batched ? TS_SHAPE(S, NB, vd(c)) : TS_SHAPE(S, vd(c)), m->v);
    ts_mha_forward_args *a = &t.a;
    a->embed_dim_to_check = E, a->num_heads = H;
    if (c->separate) {
        a->use_separate_proj_weight = true;
        a->q_proj_weight = TT(TS_SHAPE(E, E), m->wq);
        a->k_proj_weight = TT(TS_SHAPE(E, kd(c)), m->wk);
        a->v_proj_weight = TT(TS_SHAPE(E, vd(c)), m->wv);
    } else {
        double w[3 * E * E];
        memcpy(w, m->wq, sizeof(double) * E * E), memcpy(w + E * E, m->wk, sizeof(double) * E * E);
        memcpy(w + 2 * E * E, m->wv, sizeof(double) * E * E);
        a->in_proj_weight = TT(TS_SHAPE(3 * E, E), w);
    }
    if (c->bias)
        a->in_proj_bias = TT(TS_SHAPE(3 * E), m->b), a->out_proj_bias = TT(TS_SHAPE(E), m->bo);
    a->out_proj_weight = TT(TS_SHAPE(E, E), m->wo);
    if (c->bias_kv && c->zero_attn) /* PyTorch's repeat(1, bsz, 1) also takes them 1-D */
        a->bias_k = TT(TS_SHAPE(E), m->bk), a->bias_v = TT(TS_SHAPE(E), m->bv);
    else if (c->bias_kv)
        a->bias_k = TT(TS_SHAPE(1, 1, E), m->bk), a->bias_v = TT(TS_SHAPE(1, 1, E), m->bv);
    a->add_zero_attn = c->zero_attn;
    a->training = true, a->need_weights = c->need_weights, a->average_attn_weights = c->average;
    a->is_causal = c->is_causal;
    if (c->am) {
        double f[NB * H * L * S];
        for (int i = 0; i < NB * H * L * S; i++) f[i] = c->am == 1 ? m->amf[i] : m->amb[i];
        ts_tensor *x = c->am == 3 ? TT(TS_SHAPE(nb * H, L, S), f) : TT(TS_SHAPE(L, S), f);
        a->attn_mask = c->am == 1 ? x : ts_ne_scalar(x, 0.0);
    }
    if (c->kpm) {
        const int kl = c->static_len ? c->static_len : S;
        double f[NB * SM];
        for (int i = 0; i < NB * kl; i++) f[i] = m->kpm[i];
        a->key_padding_mask =
            ts_ne_scalar(TT(c->batched ? TS_SHAPE(NB, kl) : TS_SHAPE(kl), f), 0.0);
    }
    if (c->static_len) {
        a->static_k = TT(TS_SHAPE(nb * H, c->static_len, HD), m->sk);
        a->static_v = TT(TS_SHAPE(nb * H, c->static_len, HD), m->sv);
    }
#undef TT
    return t;
}

/* clang-format off */
static const mcase cases[] = {
    /* batched sep   bias   bkv    zero   causal need   avg   kdim vdim am kpm static */
    {true,  false, true,  false, false, false, true,  true,  0, 0, 1, true,  0},
    {true,  false, true,  false, false, false, false, false, 0, 0, 1, true,  0},
    {true,  true,  true,  true,  true,  false, true,  false, 3, 5, 3, false, 0},
    {true,  true,  false, true,  false, false, false, false, 6, 2, 2, true,  0},
    {false, false, true,  false, true,  false, true,  true,  0, 0, 2, true,  0},
    {true,  false, true,  false, false, false, true,  false, 0, 0, 0, true,  5},
    {false, false, false, false, true,  false, false, false, 0, 0, 0, false, 3},
    {true,  false, true,  false, false, true,  false, false, 0, 0, 4, false, 0},
    {true,  false, true,  false, false, true,  true,  true,  0, 0, 4, true,  0},
};
/* clang-format on */
#define N_CASES ((int)(sizeof cases / sizeof *cases))

static void run_case(int ci, ts_device dev, ts_dtype dt) {
    const mcase *c = &cases[ci];
    mvals *m = calloc(1, sizeof *m);
    make_vals(c, m, 3 * ci);
    ts_scope_begin();
    mtensors t = make_tensors(c, m, dt, dev);
    ts_tensor *w = NULL;
    ts_tensor *out = ts_multi_head_attention_forward(t.q, t.k, t.v, &t.a, &w);
    CHECK_OK();
    double want[L * NB * E], wts[NB * H * L * SM], got[L * NB * E], gw[NB * H * L * SM];
    const int keys = reference(c, m, want, wts);
    const int nb = c->batched ? NB : 1;
    bool ok = out && ts_numel(out) == L * nb * E && ts_test_read_f64(out, got, L * nb * E);
    /* values in [-1, 1): each output a few chains of dot products of <= 8 terms and a softmax;
     * float32's inputs and steps round at 6e-8 relative: well under 2e-5 absolute; float64 the
     * same count of 1.1e-16 steps under 1e-13 */
    const double tol = dt == TS_F64 ? 1e-13 : 2e-5;
    double worst = 0;
    for (int i = 0; ok && i < L * nb * E; i++) worst = fmax(worst, fabs(got[i] - want[i]));
    ok = ok && worst <= tol;
    CHECK(ok);
    if (!ok)
        printf("  case %d on %s (%s): output worst %g\n", ci, ts_device_str(dev), ts_dtype_name(dt),
               worst);
    if (c->need_weights) {
        const int64_t nw = (int64_t)nb * (c->average ? 1 : H) * L * keys;
        ok = w && ts_numel(w) == nw && ts_test_read_f64(w, gw, nw);
        CHECK_EQ(w ? ts_ndim(w) : 0, (c->batched ? 1 : 0) + (c->average ? 2 : 3));
        worst = 0;
        for (int n = 0; ok && n < nb; n++)
            for (int l = 0; l < L; l++)
                for (int s = 0; s < keys; s++) {
                    if (c->average) {
                        double a = 0;
                        for (int h = 0; h < H; h++) a += wts[((n * H + h) * L + l) * keys + s];
                        worst = fmax(worst, fabs(gw[(n * L + l) * keys + s] - a / H));
                    } else {
                        for (int h = 0; h < H; h++) {
                            const int i = ((n * H + h) * L + l) * keys + s;
                            worst = fmax(worst, fabs(gw[i] - wts[i]));
                        }
                    }
                }
        ok = ok && worst <= tol;
        CHECK(ok);
        if (!ok)
            printf("  case %d on %s (%s): weights worst %g\n", ci, ts_device_str(dev),
                   ts_dtype_name(dt), worst);
    } else {
        CHECK(w == NULL);
    }
    ts_scope_end();
    free(m);
}

/* gradients of the output (and of the weights when asked) in query, key, the projections and
 * bias_k / bias_v */
typedef struct gctx {
    const mcase *c;
    mtensors t;
    bool weights;
} gctx;

static ts_tensor *grad_fn(ts_tensor *const *in, int n, void *ctx) {
    gctx *g = ctx;
    ts_mha_forward_args a = g->t.a;
    (void)n;
    if (g->c->separate)
        a.q_proj_weight = in[2], a.k_proj_weight = in[3];
    else
        a.in_proj_weight = in[2];
    a.out_proj_weight = in[4];
    if (g->c->bias_kv) a.bias_k = in[5];
    ts_tensor *w = NULL, *o = ts_multi_head_attention_forward(in[0], in[1], g->t.v, &a,
                                                              g->weights ? &w : NULL);
    return g->weights ? w : o;
}

static void run_gradcheck(int ci, ts_device dev, bool weights) {
    const mcase *c = &cases[ci];
    mvals *m = calloc(1, sizeof *m);
    make_vals(c, m, 3 * ci);
    ts_scope_begin();
    gctx g = {.c = c, .t = make_tensors(c, m, TS_F64, dev), .weights = weights};
    ts_tensor *in[6] = {g.t.q,
                        g.t.k,
                        c->separate ? g.t.a.q_proj_weight : g.t.a.in_proj_weight,
                        c->separate ? g.t.a.k_proj_weight : g.t.a.in_proj_weight,
                        g.t.a.out_proj_weight,
                        c->bias_kv ? g.t.a.bias_k : NULL};
    const int n = c->bias_kv ? 6 : 5;
    if (!c->separate) in[3] = ts_zeros(TS_SHAPE(1), (ts_opts){.dtype = TS_F64, .device = dev});
    for (int i = 0; i < n; i++) ts_set_requires_grad(in[i], true);
    const bool ok = ts_gradcheck(grad_fn, &g, in, n, (ts_gradcheck_opts){0});
    CHECK(ok);
    if (!ok)
        printf("  gradcheck failed: case %d on %s%s\n", ci, ts_device_str(dev),
               weights ? " (weights)" : "");
    CHECK_OK();
    ts_scope_end();
    free(m);
}

static void test_errors(void) {
    mvals *m = calloc(1, sizeof *m);
    const mcase c0 = cases[0];
    make_vals(&c0, m, 1);
    ts_scope_begin();
    mtensors t = make_tensors(&c0, m, TS_F64, ts_cpu());
    ts_mha_forward_args a = t.a;
    a.is_causal = true, a.attn_mask = NULL;
    CHECK(!ts_multi_head_attention_forward(t.q, t.k, t.v, &a, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "Need attn_mask");
    a = t.a; /* a batched query with an unbatched key: PyTorch's message names the query's kind */
    if (ts_shape_of(t.q).ndim == 3) {
        CHECK(!ts_multi_head_attention_forward(t.q, ts_select(t.k, 1, 0), t.v, &a, NULL));
        CHECK_ERR_HAS(TS_ERR_SHAPE, "for batched (3-D) query, expected key and value to be 3-D "
                                    "but found 2-D and 3-D");
    }
    a = t.a, a.embed_dim_to_check = E + 1;
    CHECK(!ts_multi_head_attention_forward(t.q, t.k, t.v, &a, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "was expecting embedding dimension");
    a = t.a, a.num_heads = 3;
    CHECK(!ts_multi_head_attention_forward(t.q, t.k, t.v, &a, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "not divisible");
    a = t.a, a.bias_k = ts_zeros(TS_SHAPE(1, 1, E), (ts_opts){.dtype = TS_F64});
    CHECK(!ts_multi_head_attention_forward(t.q, t.k, t.v, &a, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "both set or both None");
    a = t.a, a.attn_mask = ts_zeros(TS_SHAPE(L, S + 1), (ts_opts){.dtype = TS_F64});
    CHECK(!ts_multi_head_attention_forward(t.q, t.k, t.v, &a, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "The shape of the 2D attn_mask");
    a = t.a, a.key_padding_mask = ts_zeros(TS_SHAPE(NB, S - 1), (ts_opts){.dtype = TS_BOOL});
    CHECK(!ts_multi_head_attention_forward(t.q, t.k, t.v, &a, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "key_padding_mask");
    a = t.a, a.attn_mask = ts_zeros(TS_SHAPE(L, S), (ts_opts){.dtype = TS_I64});
    CHECK(!ts_multi_head_attention_forward(t.q, t.k, t.v, &a, NULL));
    CHECK_ERR_HAS(TS_ERR_DTYPE, "only bool and floating types of attn_mask");
    a = t.a, a.use_separate_proj_weight = true;
    CHECK(!ts_multi_head_attention_forward(t.q, t.k, t.v, &a, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "q_proj_weight");
    a = t.a, a.out_proj_weight = NULL;
    CHECK(!ts_multi_head_attention_forward(t.q, t.k, t.v, &a, NULL));
    CHECK_ERR_HAS(TS_ERR_ARG, "out_proj_weight");
    a = t.a, a.static_k = ts_zeros(TS_SHAPE(NB * H, 3, HD + 1), (ts_opts){.dtype = TS_F64});
    CHECK(!ts_multi_head_attention_forward(t.q, t.k, t.v, &a, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "static_k");
    /* static keys fewer than the mask's columns (S - 1 against S) */
    const int64_t nh = (ts_shape_of(t.q).ndim == 3 ? NB : 1) * H;
    a = t.a, a.static_k = ts_zeros(TS_SHAPE(nh, S - 1, HD), (ts_opts){.dtype = TS_F64});
    a.static_v = ts_zeros(TS_SHAPE(nh, S - 1, HD), (ts_opts){.dtype = TS_F64});
    a.attn_mask = ts_zeros(TS_SHAPE(L, S), (ts_opts){.dtype = TS_F64});
    a.key_padding_mask = NULL, a.bias_k = a.bias_v = NULL, a.add_zero_attn = false;
    CHECK(!ts_multi_head_attention_forward(t.q, t.k, t.v, &a, NULL));
    CHECK_ERR_HAS(TS_ERR_SHAPE, "attn_mask covers 4 keys but static_k holds 3");
    CHECK(!ts_multi_head_attention_forward(t.q, t.k, t.v, NULL, NULL));
    CHECK_ERR(TS_ERR_ARG);
    ts_scope_end();
    free(m);
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int di = 0; di < nd; di++)
        for (int i = 0; i < N_CASES; i++) {
            run_case(i, devs[di], TS_F64);
            run_case(i, devs[di], TS_F32);
            if (di == 0 || i == 2) run_gradcheck(i, devs[di], false);
            if (di == 0 && cases[i].need_weights) run_gradcheck(i, devs[di], true);
        }
    test_errors();
    return ts_test_finish();
}
