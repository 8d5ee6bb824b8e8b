/* test_gpt2.c — Hugging Face GPT-2 with a key/value cache (tessera/gpt2.h, src/models/gpt2.c).
 *
 * References (tests/data/gen_gpt2_ref.py, PyTorch + transformers): a tiny random GPT-2
 * (tests/data/gpt2_tiny: 2 layers, 64 wide, 4 heads, 256 ids, 64 positions) with transformers'
 * float64 logits at every prompt position and its 32 greedy ids (equal to transformers' float32
 * generate(); every greedy step's top-1 / top-2 gap is above 1e-3, far above the bound below).
 *
 * Float bound: Tessera runs float32, the reference float64. Every value passes through at most
 * S = 2 n_layer + 1 products of length at most K = n_inner (float32 summation: K 2^-24 times the
 * sum of the magnitudes), each fed through a layer norm that renormalises (an error relative to
 * the row's scale stays relative). Each logit: within S K 2^-24 (1 + max |logit|); here 5 * 256 *
 * 2^-24 = 7.6e-5 relative to the logits' scale.
 *
 * Quantized: the int8 / int4 model against the float model whose block weights are the
 * dequantized ones (written to a temporary folder): the blocks compute the same values but for
 * float32 rounding (the bound above); the head reads wte quantized there and float here, so the
 * logit of id v may move by at most max_k |dequant(q(wte))[v,k] - wte[v,k]| * ||h||_1 with h the
 * final layer norm's output, ||h||_1 <= n_embd max|ln_f.weight| + ||ln_f.bias||_1 (the normalised
 * row has an L2 norm of sqrt(n_embd), so an L1 norm of at most n_embd).
 *
 * With TS_GPT2_124M_DIR set to the Hugging Face folder of GPT2LMHeadModel(GPT2Config()) after
 * torch.manual_seed(0), the 124M model too: 40 greedy ids against transformers' and the 32
 * largest first-step logits against float64 (tests/data/gpt2_124m_random_ref.json). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json_file_util.h"
#include "tessera.h"
#include "tessera/quant.h"
#include "ts_test.h"

#ifndef TS_SOURCE_DIR
#define TS_SOURCE_DIR "."
#endif
#define TINY TS_SOURCE_DIR "/tests/data/gpt2_tiny"

static int64_t json_ids(const cJSON *a, int64_t *out, int64_t cap) {
    int64_t n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, a) if (n < cap) out[n++] = (int64_t)e->valuedouble;
    return n;
}

static double absmax_json(const cJSON *rows) {
    double m = 0;
    const cJSON *r, *e;
    cJSON_ArrayForEach(r, rows) cJSON_ArrayForEach(e, r) m = fmax(m, fabs(e->valuedouble));
    return m;
}

static double float_tol(ts_gpt2_config c, double scale) {
    return (double)(2 * c.n_layer + 1) * (double)c.n_inner * ldexp(1.0, -24) * (1.0 + scale);
}

/* the tiny model: logits at every prompt position against float64, the greedy ids */
static void tiny_float(void) {
    cJSON *ref = read_json(TINY "/ref.json");
    CHECK(ref != NULL);
    if (!ref) return;
    ts_gpt2 *m = ts_gpt2_load(TINY);
    CHECK_OK();
    if (!m) return cJSON_Delete(ref);
    const ts_gpt2_config c = ts_gpt2_get_config(m);
    CHECK_EQ(c.n_layer, 2);
    CHECK_EQ(c.n_embd, 64);
    CHECK_EQ(c.n_inner, 256);
    CHECK_EQ(c.vocab, 256);
    CHECK_EQ(c.n_ctx, 64);
    int64_t prompt[16], want[64], got[64];
    const int64_t n = json_ids(cJSON_GetObjectItem(ref, "prompt"), prompt, 16);
    const int64_t nw = json_ids(cJSON_GetObjectItem(ref, "greedy"), want, 64);
    const cJSON *lg = cJSON_GetObjectItem(ref, "logits_f64");
    const double tol = float_tol(c, absmax_json(lg));
    float *logits = malloc((size_t)c.vocab * sizeof *logits);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t next = -1;
        CHECK_EQ(ts_gpt2_position(m), i);
        CHECK(ts_gpt2_step(m, prompt[i], logits, &next) == TS_OK);
        const cJSON *row = cJSON_GetArrayItem(lg, (int)i);
        int64_t best = 0;
        for (int64_t v = 0; v < c.vocab; v++) {
            const double r = cJSON_GetArrayItem(row, (int)v)->valuedouble;
            worst = fmax(worst, fabs(logits[v] - r));
            if (r > cJSON_GetArrayItem(row, (int)best)->valuedouble) best = v;
        }
        CHECK_EQ(next, best);
    }
    printf("tiny float32: worst logit error %.3g (bound %.3g)\n", worst, tol);
    CHECK(worst <= tol);
    double ps = -1, ds = -1;
    CHECK(ts_gpt2_generate_greedy(m, prompt, n, nw, got, &ps, &ds) == TS_OK);
    CHECK(ps >= 0 && ds >= 0);
    int same = 0;
    for (int64_t k = 0; k < nw && got[k] == want[k]; k++) same++;
    CHECK_EQ(same, nw);
    CHECK_EQ(ts_gpt2_position(m), n + nw - 1);
    free(logits);
    ts_gpt2_free(m);
    cJSON_Delete(ref);
}

/* host copy of a float32 tensor */
static float *host(ts_tensor *t) {
    const int64_t n = ts_numel(t);
    float *h = malloc((size_t)n * sizeof *h);
    ts_scope_begin();
    if (ts_copy_to_host(ts_contiguous(t), h, (size_t)n * sizeof *h)) memset(h, 0xff, (size_t)n * 4);
    ts_scope_end();
    return h;
}

static ts_tensor *requant(ts_tensor *w, int bits, int64_t gs) {
    return bits == 8 ? ts_quantize_int8_weight_only(w) : ts_quantize_int4_weight_only(w, gs);
}

/* dir/model.safetensors with each block linear's weight dequantize(quantize(w)); false on error */
static bool write_dequantized(const char *dir, int bits, int64_t gs) {
    ts_tensor_list l = {0}, o = {0};
    if (ts_safetensors_load(TINY "/model.safetensors", ts_cpu(), &l)) return false;
    bool ok = true;
    ts_scope_begin();
    for (int i = 0; ok && i < l.n; i++) {
        ts_tensor *t = l.tensors[i];
        const char *nm = l.names[i];
        if (strstr(nm, ".h.") && strstr(nm, ".weight") && !strstr(nm, "ln_")) /* Conv1D [in, out] */
            t = ts_t(ts_dequantize(requant(ts_contiguous(ts_t(t)), bits, gs)));
        ok = t && ts_tensor_list_add(&o, nm, ts_contiguous(t)) == TS_OK;
    }
    char path[512], cfg[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ok = ok && ts_safetensors_save(path, &o, NULL, 0) == TS_OK;
    ts_scope_end();
    ts_tensor_list_free(&l), ts_tensor_list_free(&o);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    FILE *in = fopen(TINY "/config.json", "rb"), *out = fopen(cfg, "wb");
    char buf[4096];
    size_t k;
    while (in && out && (k = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, k, out);
    if (in) fclose(in);
    if (out) fclose(out);
    return ok && in && out;
}

static int layers_seen;
static void on_layer(void *ctx, const char *name, int64_t fb, int64_t qb) {
    (void)ctx, (void)name;
    layers_seen += qb > 0 && qb < fb;
}

static void quantized(int bits, int64_t gs) {
    char dir[] = "/tmp/ts_gpt2_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK(write_dequantized(dir, bits, gs));
    ts_gpt2 *f = ts_gpt2_load(dir), *q = ts_gpt2_load(TINY);
    CHECK_OK();
    if (!f || !q) return ts_gpt2_free(f), ts_gpt2_free(q);
    layers_seen = 0;
    CHECK(ts_gpt2_quantize(q, (ts_gpt_quant_opts){
                                  .bits = bits, .group_size = gs, .on_layer = on_layer}) == TS_OK);
    const ts_gpt2_config c = ts_gpt2_get_config(q);
    CHECK_EQ(layers_seen, 4 * c.n_layer + 1);
    /* the head's bound: wte's quantization error a row times ||h||_1's bound */
    ts_tensor_list l = {0};
    CHECK(ts_safetensors_load(TINY "/model.safetensors", ts_cpu(), &l) == TS_OK);
    ts_scope_begin();
    ts_tensor *wte = ts_tensor_list_get(&l, "transformer.wte.weight");
    float *w = host(wte), *d = host(ts_dequantize(requant(wte, bits, gs)));
    float *lw = host(ts_tensor_list_get(&l, "transformer.ln_f.weight"));
    float *lb = host(ts_tensor_list_get(&l, "transformer.ln_f.bias"));
    ts_scope_end();
    double h1 = 0, lwm = 0;
    for (int64_t k = 0; k < c.n_embd; k++) lwm = fmax(lwm, fabs(lw[k])), h1 += fabs(lb[k]);
    h1 += (double)c.n_embd * lwm;
    double *rowb = malloc((size_t)c.vocab * sizeof *rowb);
    for (int64_t v = 0; v < c.vocab; v++) {
        double e = 0;
        for (int64_t k = 0; k < c.n_embd; k++)
            e = fmax(e, fabs((double)d[v * c.n_embd + k] - w[v * c.n_embd + k]));
        rowb[v] = e * h1;
    }
    float *lf = malloc((size_t)c.vocab * sizeof *lf), *lq = malloc((size_t)c.vocab * sizeof *lq);
    const int64_t ids[] = {3, 141, 59, 26, 5, 200, 17, 99};
    double worst = 0, moved = 0;
    for (int i = 0; i < 8; i++) {
        CHECK(ts_gpt2_step(f, ids[i], lf, NULL) == TS_OK);
        CHECK(ts_gpt2_step(q, ids[i], lq, NULL) == TS_OK);
        double scale = 0;
        for (int64_t v = 0; v < c.vocab; v++) scale = fmax(scale, fabs(lf[v]));
        for (int64_t v = 0; v < c.vocab; v++) {
            const double e = fabs((double)lq[v] - lf[v]);
            worst = fmax(worst, e / (rowb[v] + float_tol(c, scale)));
            moved = fmax(moved, e);
        }
    }
    printf("int%d (group %lld): worst logit change %.3g, %.3g of its bound\n", bits, (long long)gs,
           moved, worst);
    CHECK(worst <= 1.0);
    /* the head did read quantized weights: the change passes float32's bound */
    CHECK(moved > float_tol(c, 1.0));
    free(rowb), free(lf), free(lq), free(w), free(d), free(lw), free(lb);
    ts_tensor_list_free(&l);
    ts_gpt2_free(f), ts_gpt2_free(q);
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors", dir), unlink(p);
    snprintf(p, sizeof p, "%s/config.json", dir), unlink(p);
    rmdir(dir);
}

/* a folder with config.json = cfg and the tiny model's weights (a link); 0 when made */
static int bad_dir(char *dir, const char *cfg) {
    char p[600];
    if (!mkdtemp(dir)) return -1;
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "wb");
    if (!f) return -1;
    fputs(cfg, f);
    fclose(f);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    return symlink(TINY "/model.safetensors", p);
}

static void rm_bad_dir(const char *dir) {
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir), unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", dir), unlink(p);
    rmdir(dir);
}

static void bad_configs(void) {
    const char *ok = "\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_head\": 4, "
                     "\"n_positions\": 64, \"vocab_size\": 256";
    char cfg[512];
    struct {
        const char *extra;
        ts_status code;
        const char *frag;
    } cases[] = {
        {"\"n_embd\": 32", TS_ERR_FORMAT, "must be float32 [256, 32]"}, /* weights of 64 */
        {"\"n_embd\": 64, \"activation_function\": \"relu\"", TS_ERR_UNSUPPORTED, "gelu_new"},
        {"\"n_embd\": 64, \"n_inner\": 128", TS_ERR_FORMAT, "mlp.c_fc.bias"},
        {"\"n_embd\": 66", TS_ERR_FORMAT, "not a multiple of n_head"},
        {"\"n_embd\": -64", TS_ERR_FORMAT, "\"n_embd\" must be a positive integer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[] = "/tmp/ts_gpt2_bad_XXXXXX";
        snprintf(cfg, sizeof cfg, "{%s, %s}", ok, cases[i].extra);
        CHECK(bad_dir(dir, cfg) == 0);
        CHECK(ts_gpt2_load(dir) == NULL);
        CHECK_ERR_HAS(cases[i].code, cases[i].frag);
        rm_bad_dir(dir);
    }
    char dir[] = "/tmp/ts_gpt2_bad_XXXXXX";
    CHECK(bad_dir(dir, "{\"model_type\": \"bert\"}") == 0);
    CHECK(ts_gpt2_load(dir) == NULL);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "model_type must be \"gpt2\"");
    rm_bad_dir(dir);
}

static void refusals(void) {
    CHECK(ts_gpt2_load("/nonexistent/gpt2") == NULL);
    CHECK_ERR_HAS(TS_ERR_IO, "config.json");
    CHECK(ts_gpt2_load(TS_SOURCE_DIR "/tests/data") == NULL); /* no config.json there */
    CHECK_ERR(TS_ERR_IO);
    ts_gpt2 *m = ts_gpt2_load(TINY);
    CHECK_OK();
    if (!m) return;
    CHECK(ts_gpt2_step(m, 256, NULL, NULL) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "token id 256");
    CHECK(ts_gpt2_step(m, -1, NULL, NULL) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "outside the vocabulary");
    int64_t ids[2] = {1, 2}, out[70];
    CHECK(ts_gpt2_generate_greedy(m, ids, 2, 64, out, NULL, NULL) != TS_OK); /* 2 + 64 - 1 > 64 */
    CHECK_ERR_HAS(TS_ERR_ARG, "context of 64");
    CHECK(ts_gpt2_generate_greedy(m, ids, 2, 63, out, NULL, NULL) == TS_OK); /* fills the cache */
    CHECK_EQ(ts_gpt2_position(m), 64);
    CHECK(ts_gpt2_step(m, 1, NULL, NULL) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "cache is full");
    CHECK(ts_gpt2_quantize(m, (ts_gpt_quant_opts){.bits = 5}) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "bits must be 8 or 4");
    CHECK(ts_gpt2_quantize(m, (ts_gpt_quant_opts){.bits = 4, .group_size = 48}) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "group_size");
    CHECK(ts_gpt2_quantize(m, (ts_gpt_quant_opts){.bits = 8, .act_bits = 4}) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_ARG, "act_bits must be 0 (weight-only) or 8");
    CHECK(ts_gpt2_quantize(m, (ts_gpt_quant_opts){.bits = 8}) == TS_OK);
    CHECK(ts_gpt2_quantize(m, (ts_gpt_quant_opts){.bits = 8}) != TS_OK);
    CHECK_ERR(TS_ERR_STATE);
    ts_gpt2_free(m);
}

/* int8 dynamic activations (act_bits 8): the linears run ts_int8_dynamic_activation_linear (its
 * arithmetic is tests/test_qdynamic_act.c's): every step's logits are those of the same weights
 * with float activations (the weight-only model, int8: the same recipe) but for the activations'
 * rounding, so they differ from them (the path is taken) and stay finite. No bound is derived
 * here for the whole model; the agreement with the float model is measured in
 * bench/results/gpt2-decode.md. */
static void act_quantized(void) {
    ts_gpt2 *a = ts_gpt2_load(TINY), *w = ts_gpt2_load(TINY);
    CHECK_OK();
    if (!a || !w) return ts_gpt2_free(a), ts_gpt2_free(w);
    CHECK(ts_gpt2_quantize(a, (ts_gpt_quant_opts){.bits = 8, .act_bits = 8}) == TS_OK);
    CHECK(ts_gpt2_quantize(w, (ts_gpt_quant_opts){.bits = 8}) == TS_OK);
    const int64_t V = ts_gpt2_get_config(a).vocab;
    float *la = malloc((size_t)V * sizeof *la), *lw = malloc((size_t)V * sizeof *lw);
    double moved = 0;
    bool finite = true;
    for (int i = 0; i < 4; i++) {
        CHECK(ts_gpt2_step(a, 7 + i, la, NULL) == TS_OK);
        CHECK(ts_gpt2_step(w, 7 + i, lw, NULL) == TS_OK);
        for (int64_t v = 0; v < V; v++)
            moved = fmax(moved, fabs((double)la[v] - lw[v])), finite = finite && isfinite(la[v]);
    }
    CHECK(finite && moved > 0);
    free(la), free(lw);
    ts_gpt2_free(a), ts_gpt2_free(w);
    /* the nanoGPT path is weight-only */
    ts_module *g = ts_gpt_new(
        (ts_gpt_config){.vocab_size = 16, .context = 8, .n_layer = 1, .n_head = 2, .n_embd = 32});
    CHECK(g &&
          ts_gpt_quantize_weight_only(g, (ts_gpt_quant_opts){.bits = 8, .act_bits = 8}) != TS_OK);
    CHECK_ERR_HAS(TS_ERR_UNSUPPORTED, "act_bits 8");
    ts_module_free(g);
}

/* the 124M model when TS_GPT2_124M_DIR names it */
static void big(void) {
    const char *dir = getenv("TS_GPT2_124M_DIR");
    if (!dir || !*dir) {
        printf("skipped the GPT-2 124M check: set TS_GPT2_124M_DIR to the folder of "
               "GPT2LMHeadModel(GPT2Config()) after torch.manual_seed(0) (gen_gpt2_ref.py)\n");
        return;
    }
    cJSON *ref = read_json(TS_SOURCE_DIR "/tests/data/gpt2_124m_random_ref.json");
    ts_gpt2 *m = ts_gpt2_load(dir);
    CHECK_OK();
    CHECK(ref != NULL);
    if (!m || !ref) return ts_gpt2_free(m), cJSON_Delete(ref);
    const ts_gpt2_config c = ts_gpt2_get_config(m);
    int64_t prompt[16], want[64], got[64], top[32];
    const int64_t n = json_ids(cJSON_GetObjectItem(ref, "prompt"), prompt, 16);
    const int64_t nw = json_ids(cJSON_GetObjectItem(ref, "greedy_f32_generate"), want, 64);
    json_ids(cJSON_GetObjectItem(ref, "first_logits_f64_top_ids"), top, 32);
    const cJSON *topv = cJSON_GetObjectItem(ref, "first_logits_f64_top");
    const double tol =
        float_tol(c, cJSON_GetObjectItem(ref, "first_logits_f64_absmax")->valuedouble);
    float *lg = malloc((size_t)c.vocab * sizeof *lg);
    for (int64_t i = 0; i < n; i++) CHECK(ts_gpt2_step(m, prompt[i], lg, NULL) == TS_OK);
    double worst = 0;
    for (int k = 0; k < 32; k++)
        worst = fmax(worst, fabs(lg[top[k]] - cJSON_GetArrayItem(topv, k)->valuedouble));
    printf("124M float32: worst of the 32 largest first-step logits %.3g (bound %.3g)\n", worst,
           tol);
    CHECK(worst <= tol);
    CHECK(ts_gpt2_generate_greedy(m, prompt, n, nw, got, NULL, NULL) == TS_OK);
    int same = 0;
    for (int64_t k = 0; k < nw && got[k] == want[k]; k++) same++;
    CHECK_EQ(same, nw);
    free(lg);
    ts_gpt2_free(m);
    cJSON_Delete(ref);
}

int main(void) {
    tiny_float();
    quantized(8, 0);
    act_quantized();
    quantized(4, 32);
    quantized(4, 64);
    refusals();
    bad_configs();
    big();
    return ts_test_finish();
}
