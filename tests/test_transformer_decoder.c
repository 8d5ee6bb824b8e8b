/* test_transformer_decoder.c — ts_transformer_decoder_layer (src/nn/transformer_decoder.c):
 * PyTorch's parameter names and shapes; the forward in f64, post-norm and norm_first, with a
 * causal float tgt_mask, a bool memory_mask and both key padding masks, against a double
 * reference written here from PyTorch's equations; gradients of tgt and memory by ts_gradcheck;
 * the forward hooks; the refusals. On every test device.
 *
 * Tolerance: f64 throughout, the reference sums the same <= 6 terms per dot product in another
 * order (differences ~1e-16 relative, amplified by the layer norms' 1/sigma ~ 3): 1e-12. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tessera.h"
#include "tessera/transformer.h"
#include "ts_test.h"

enum { E = 4, H = 2, HD = E / H, FF = 6, L = 3, S = 4, NB = 2, MAXP = 32, MAXV = 64 };

/* PyTorch 2.15's torch.nn.TransformerDecoderLayer(4, 2, 6).state_dict() keys */
static const char *const torch_names[] = {"self_attn.in_proj_weight",
                                          "self_attn.in_proj_bias",
                                          "self_attn.out_proj.weight",
                                          "self_attn.out_proj.bias",
                                          "multihead_attn.in_proj_weight",
                                          "multihead_attn.in_proj_bias",
                                          "multihead_attn.out_proj.weight",
                                          "multihead_attn.out_proj.bias",
                                          "linear1.weight",
                                          "linear1.bias",
                                          "linear2.weight",
                                          "linear2.bias",
                                          "norm1.weight",
                                          "norm1.bias",
                                          "norm2.weight",
                                          "norm2.bias",
                                          "norm3.weight",
                                          "norm3.bias"};
enum { NPARAM = sizeof torch_names / sizeof *torch_names };

static double pv[NPARAM][MAXV]; /* the parameters' values, in torch_names' order */

static const double *P(const char *name) {
    for (int i = 0; i < NPARAM; i++)
        if (!strcmp(torch_names[i], name)) return pv[i];
    return NULL;
}

static uint64_t rng_state = 12345;
static double urand(void) { /* in [-1, 1) */
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(rng_state >> 11) / (double)(1ULL << 53) * 2 - 1;
}

/* ---------------------------------------------------------------- the double reference */
/* y[r][o] = sum_i x[r][i] w[o][i] + b[o], rows r < n */
static void lin(const double *x, int n, int in, const double *w, const double *b, int out,
                double *y) {
    for (int r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            double s = b ? b[o] : 0;
            for (int i = 0; i < in; i++) s += x[r * in + i] * w[o * in + i];
            y[r * out + o] = s;
        }
}

static void lnorm(double *x, int n, const char *name) {
    char wn[32], bn[32];
    snprintf(wn, sizeof wn, "%s.weight", name);
    snprintf(bn, sizeof bn, "%s.bias", name);
    const double *w = P(wn), *b = P(bn);
    for (int r = 0; r < n; r++) {
        double mu = 0, var = 0;
        for (int i = 0; i < E; i++) mu += x[r * E + i] / E;
        for (int i = 0; i < E; i++) var += (x[r * E + i] - mu) * (x[r * E + i] - mu) / E;
        for (int i = 0; i < E; i++)
            x[r * E + i] = (x[r * E + i] - mu) / sqrt(var + 1e-5) * w[i] + b[i];
    }
}

/* seq-first q [lq][NB][E], kv [lk][NB][E]; mask [lq][lk] additive (may hold -inf) or NULL;
 * kpm [NB][lk] (true = padded) or NULL -> out [lq][NB][E] */
static void mha(const double *q, int lq, const double *kv, int lk, const char *pre,
                const double *mask, const bool *kpm, double *out) {
    char n1[48], n2[48], n3[48], n4[48];
    snprintf(n1, sizeof n1, "%s.in_proj_weight", pre);
    snprintf(n2, sizeof n2, "%s.in_proj_bias", pre);
    snprintf(n3, sizeof n3, "%s.out_proj.weight", pre);
    snprintf(n4, sizeof n4, "%s.out_proj.bias", pre);
    const double *w = P(n1), *b = P(n2);
    double Q[L * NB * E], K[S * NB * E], V[S * NB * E], O[L * NB * E];
    lin(q, lq * NB, E, w, b, E, Q);
    lin(kv, lk * NB, E, w + E * E, b + E, E, K);
    lin(kv, lk * NB, E, w + 2 * E * E, b + 2 * E, E, V);
    for (int n = 0; n < NB; n++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < lq; i++) {
                double sc[S], mx = -INFINITY, den = 0;
                for (int j = 0; j < lk; j++) {
                    double s = 0;
                    for (int d = 0; d < HD; d++)
                        s += Q[(i * NB + n) * E + h * HD + d] * K[(j * NB + n) * E + h * HD + d];
                    s /= sqrt((double)HD);
                    if (mask) s += mask[i * lk + j];
                    if (kpm && kpm[n * lk + j]) s = -INFINITY;
                    sc[j] = s;
                    if (s > mx) mx = s;
                }
                for (int j = 0; j < lk; j++) den += (sc[j] = exp(sc[j] - mx));
                for (int d = 0; d < HD; d++) {
                    double o = 0;
                    for (int j = 0; j < lk; j++)
                        o += sc[j] / den * V[(j * NB + n) * E + h * HD + d];
                    O[(i * NB + n) * E + h * HD + d] = o;
                }
            }
    lin(O, lq * NB, E, P(n3), P(n4), E, out);
}

static void ff(const double *x, double *y) {
    double h[L * NB * FF];
    lin(x, L * NB, E, P("linear1.weight"), P("linear1.bias"), FF, h);
    for (int i = 0; i < L * NB * FF; i++) h[i] = h[i] > 0 ? h[i] : 0;
    lin(h, L * NB, FF, P("linear2.weight"), P("linear2.bias"), E, y);
}

typedef struct masks_ref {
    double tgt_mask[L * L], mem_mask[L * S];
    bool tkpm[NB * L], mkpm[NB * S];
} masks_ref;

static void ref_layer(const double *tgt, const double *mem, const masks_ref *k, bool norm_first,
                      double *x) {
    enum { NX = L * NB * E };
    double t[NX], a[NX];
    memcpy(x, tgt, sizeof(double) * NX);
    if (norm_first) {
        memcpy(t, x, sizeof t), lnorm(t, L * NB, "norm1");
        mha(t, L, t, L, "self_attn", k->tgt_mask, k->tkpm, a);
        for (int i = 0; i < NX; i++) x[i] += a[i];
        memcpy(t, x, sizeof t), lnorm(t, L * NB, "norm2");
        mha(t, L, mem, S, "multihead_attn", k->mem_mask, k->mkpm, a);
        for (int i = 0; i < NX; i++) x[i] += a[i];
        memcpy(t, x, sizeof t), lnorm(t, L * NB, "norm3");
        ff(t, a);
        for (int i = 0; i < NX; i++) x[i] += a[i];
    } else {
        mha(x, L, x, L, "self_attn", k->tgt_mask, k->tkpm, a);
        for (int i = 0; i < NX; i++) x[i] += a[i];
        lnorm(x, L * NB, "norm1");
        mha(x, L, mem, S, "multihead_attn", k->mem_mask, k->mkpm, a);
        for (int i = 0; i < NX; i++) x[i] += a[i];
        lnorm(x, L * NB, "norm2");
        ff(x, a);
        for (int i = 0; i < NX; i++) x[i] += a[i];
        lnorm(x, L * NB, "norm3");
    }
}

/* ---------------------------------------------------------------- the tests */
static ts_module *make_layer(ts_device dev, bool norm_first) {
    ts_module *m = ts_transformer_decoder_layer_new(
        E, H,
        (ts_transformer_opts){
            .dim_feedforward = FF, .has_dropout = true, .dropout = 0.0, .norm_first = norm_first});
    if (!m) return NULL;
    ts_module_to_dtype(m, TS_F64);
    ts_module_to(m, dev);
    ts_tensor_list l = ts_module_named_parameters(m), sd = {0};
    CHECK_EQ(l.n, NPARAM);
    for (int i = 0; i < l.n && i < NPARAM; i++) {
        CHECK(!strcmp(l.names[i], torch_names[i]));
        ts_tensor *t = l.tensors[i];
        const int64_t numel = ts_numel(t);
        CHECK(numel <= MAXV);
        const bool norm_w = !strncmp(torch_names[i], "norm", 4) && strstr(torch_names[i], "weight");
        for (int64_t j = 0; j < numel && j < MAXV; j++)
            pv[i][j] = norm_w ? 1 + 0.2 * urand() : 0.6 * urand();
        ts_tensor_list_add(&sd, l.names[i], ts_tensor_f64(ts_shape_of(t), pv[i], (ts_opts){0}));
    }
    CHECK(ts_module_load_state_dict(m, &sd, true) == TS_OK);
    ts_tensor_list_free(&sd);
    ts_tensor_list_free(&l);
    return m;
}

static void fill_masks(masks_ref *k) {
    for (int i = 0; i < L; i++)
        for (int j = 0; j < L; j++) k->tgt_mask[i * L + j] = j > i ? -INFINITY : 0.0;
    for (int i = 0; i < L; i++)
        for (int j = 0; j < S; j++) k->mem_mask[i * S + j] = (i + j) % 3 == 2 ? -INFINITY : 0.0;
    for (int n = 0; n < NB; n++) {
        for (int j = 0; j < L; j++) k->tkpm[n * L + j] = n == 1 && j == L - 1;
        for (int j = 0; j < S; j++) k->mkpm[n * S + j] = n == 0 && j == S - 1;
    }
}

typedef struct gc_ctx {
    ts_module *m;
    ts_decoder_masks k;
} gc_ctx;

static ts_tensor *gc_fn(ts_tensor *const *in, int n, void *ctx) {
    (void)n;
    gc_ctx *c = ctx;
    return ts_transformer_decoder_layer(c->m, in[0], in[1], &c->k);
}

static void test_values_and_grads(ts_device dev, bool norm_first) {
    ts_scope_begin();
    ts_module *m = make_layer(dev, norm_first);
    CHECK(m != NULL);
    if (!m) {
        ts_scope_end();
        return;
    }
    double tgt[L * NB * E], mem[S * NB * E], want[L * NB * E], got[L * NB * E];
    for (int i = 0; i < L * NB * E; i++) tgt[i] = urand();
    for (int i = 0; i < S * NB * E; i++) mem[i] = urand();
    masks_ref k;
    fill_masks(&k);
    ref_layer(tgt, mem, &k, norm_first, want);
    /* the memory mask as bool (true = may not attend), the target mask as float */
    bool mm[L * S];
    for (int i = 0; i < L * S; i++) mm[i] = isinf(k.mem_mask[i]);
    const ts_opts o = {.device = dev};
    ts_decoder_masks km = {
        .tgt_mask = ts_tensor_f64(TS_SHAPE(L, L), k.tgt_mask, o),
        .memory_mask = ts_from_data(TS_SHAPE(L, S), TS_BOOL, mm, o),
        .tgt_key_padding_mask = ts_from_data(TS_SHAPE(NB, L), TS_BOOL, k.tkpm, o),
        .memory_key_padding_mask = ts_from_data(TS_SHAPE(NB, S), TS_BOOL, k.mkpm, o),
        .tgt_is_causal = true};
    ts_tensor *t = ts_tensor_f64(TS_SHAPE(L, NB, E), tgt, o);
    ts_tensor *mt = ts_tensor_f64(TS_SHAPE(S, NB, E), mem, o);
    ts_tensor *y = ts_transformer_decoder_layer(m, t, mt, &km);
    CHECK(y && ts_ndim(y) == 3 && ts_size(y, 0) == L && ts_size(y, 1) == NB);
    if (y && ts_copy_to_host(ts_contiguous(ts_to(y, ts_cpu())), got, sizeof got) == TS_OK) {
        double worst = 0;
        for (int i = 0; i < L * NB * E; i++) worst = fmax(worst, fabs(got[i] - want[i]));
        CHECK_NEAR(worst, 0.0, 1e-12);
    } else {
        CHECK(false);
    }
    /* gradients of tgt and memory by central differences */
    ts_set_requires_grad(t, true);
    ts_set_requires_grad(mt, true);
    gc_ctx c = {m, km};
    ts_tensor *ins[2] = {t, mt};
    CHECK(ts_gradcheck(gc_fn, &c, ins, 2,
                       (ts_gradcheck_opts){.eps = 1e-6, .atol = 1e-7, .rtol = 1e-6}));
    /* without masks (NULL) it runs too, and batch_first / unbatched shapes follow the MHA's */
    ts_tensor *y2 = ts_transformer_decoder_layer(m, ts_select(t, 1, 0), ts_select(mt, 1, 0), NULL);
    CHECK(y2 && ts_ndim(y2) == 2 && ts_size(y2, 0) == L && ts_size(y2, 1) == E);
    ts_module_free(m);
    ts_scope_end();
    CHECK(ts_error() == TS_OK);
    ts_error_clear();
}

static int post_calls;
static ts_tensor *post_hook(ts_module *m, ts_tensor *x, ts_tensor *y, void *ctx) {
    (void)m, (void)x, (void)ctx;
    post_calls++;
    return ts_mul_scalar(y, 0.0);
}

static void test_hooks_and_errors(void) {
    ts_scope_begin();
    ts_module *m =
        ts_transformer_decoder_layer_new(E, H, (ts_transformer_opts){.dim_feedforward = FF});
    ts_tensor *x = ts_randn(TS_SHAPE(L, NB, E), (ts_opts){0});
    ts_tensor *mem = ts_randn(TS_SHAPE(S, NB, E), (ts_opts){0});
    ts_module_register_forward_hook(m, post_hook, NULL);
    ts_tensor *y = ts_transformer_decoder_layer(m, x, mem, NULL);
    CHECK(post_calls == 1 && y && ts_item(ts_sum(ts_abs(y))) == 0.0);
    /* ts_forward has no memory */
    CHECK(ts_forward(m, x) == NULL && ts_error() == TS_ERR_ARG &&
          strstr(ts_error_message(), "needs the memory"));
    ts_error_clear();
    CHECK(ts_transformer_decoder_layer(m, x, NULL, NULL) == NULL && ts_error() == TS_ERR_ARG);
    ts_error_clear();
    /* memory of another width: the cross-attention refuses it */
    CHECK(ts_transformer_decoder_layer(m, x, ts_randn(TS_SHAPE(S, NB, E + 1), (ts_opts){0}),
                                       NULL) == NULL);
    CHECK(ts_error() != TS_OK);
    ts_error_clear();
    ts_module *enc =
        ts_transformer_encoder_layer_new(E, H, (ts_transformer_opts){.dim_feedforward = FF});
    CHECK(ts_transformer_decoder_layer(enc, x, mem, NULL) == NULL && ts_error() == TS_ERR_ARG &&
          strstr(ts_error_message(), "TransformerDecoderLayer"));
    ts_error_clear();
    CHECK(ts_transformer_decoder_layer_new(0, H, (ts_transformer_opts){0}) == NULL &&
          strstr(ts_error_message(), "TransformerDecoderLayer"));
    ts_error_clear();
    CHECK(ts_transformer_decoder_layer_new(
              E, H, (ts_transformer_opts){.has_dropout = true, .dropout = 1.5}) == NULL &&
          strstr(ts_error_message(), "dropout"));
    ts_error_clear();
    CHECK(ts_transformer_decoder_layer_new(5, 2, (ts_transformer_opts){0}) == NULL &&
          strstr(ts_error_message(), "divisible"));
    ts_error_clear();
    ts_module_free(enc);
    ts_module_free(m);
    ts_scope_end();
}

int main(void) {
    ts_device devs[TS_TEST_MAX_DEVICES];
    const int nd = ts_test_devices(devs, TS_TEST_MAX_DEVICES);
    for (int i = 0; i < nd; i++) {
        if (devs[i].type == TS_CUDA) continue; /* f64 attention: cpu and sim */
        test_values_and_grads(devs[i], false);
        test_values_and_grads(devs[i], true);
    }
    test_hooks_and_errors();
    return ts_test_finish();
}
