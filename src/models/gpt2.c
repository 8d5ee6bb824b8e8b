/* gpt2.c — Hugging Face GPT-2 (transformers' GPT2LMHeadModel) for inference with a key/value
 * cache (tessera/gpt2.h): one token a step, so every linear is an M = 1 product (ts_linear, or
 * ts_weight_only_linear once quantized); the layer norms, GELU (tanh form) and the attention over
 * the cache (each head's positions contiguous) are short host loops over float32 buffers. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera.h"
#include "tessera/quant.h"

enum { L_QKV, L_PROJ, L_FC, L_FC2, L_COUNT };
static const char *const lin_names[L_COUNT] = {"attn.c_attn", "attn.c_proj", "mlp.c_fc",
                                               "mlp.c_proj"};

typedef struct gpt2_layer {
    ts_tensor *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    ts_tensor *w[L_COUNT]; /* float32 [out, in] (Conv1D's weight transposed); NULL once quantized */
    ts_tensor *q[L_COUNT]; /* weight-only quantized [out, in]; NULL in float */
    ts_tensor *b[L_COUNT];
} gpt2_layer;

struct ts_gpt2 {
    ts_gpt2_config c;
    ts_tensor *wte, *wpe, *lnf_w, *lnf_b, *qhead;
    bool act8; /* quantized linears with int8 dynamic activations */
    gpt2_layer *layers;
    float *kcache, *vcache; /* [n_layer][n_head][n_ctx][head_dim]: a head's positions contiguous */
    float *x, *att;         /* the residual [n_embd]; attention weights [n_ctx] */
    ts_tensor *in_c, *in_f; /* the linears' inputs [1, n_embd], [1, n_inner] */
    int64_t pos;
};

static float *fptr(ts_tensor *t) { return (float *)(void *)ts_data_ptr(t); }

/* ------------------------------------------------------------------ loading */
static ts_status cfg_int(const char *path, const cJSON *j, const char *key, bool need,
                         int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) {
        if (!need) return TS_OK;
        return ts_error_set(TS_ERR_FORMAT, "gpt2_load: %s: no \"%s\"", path, key);
    }
    if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 1e9 ||
        v->valuedouble != floor(v->valuedouble))
        return ts_error_set(TS_ERR_FORMAT, "gpt2_load: %s: \"%s\" must be a positive integer", path,
                            key);
    *out = (int64_t)v->valuedouble;
    return TS_OK;
}

static ts_status read_config(const char *dir, ts_gpt2_config *c) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return ts_error_set(TS_ERR_IO, "gpt2_load: cannot open %s", path);
    char *buf = NULL;
    long n = -1;
    if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && n < (1 << 24) && !fseek(f, 0, SEEK_SET))
        if ((buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) != (size_t)n)
            free(buf), buf = NULL;
    fclose(f);
    if (!buf) return ts_error_set(TS_ERR_IO, "gpt2_load: cannot read %s", path);
    buf[n] = 0;
    cJSON *j = cJSON_Parse(buf);
    free(buf);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return ts_error_set(TS_ERR_FORMAT, "gpt2_load: %s is not a JSON object", path);
    }
    *c = (ts_gpt2_config){.eps = 1e-5};
    ts_status st = TS_OK;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "model_type");
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(j, "activation_function");
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(j, "layer_norm_epsilon");
    if (!cJSON_IsString(mt) || strcmp(mt->valuestring, "gpt2"))
        st = ts_error_set(TS_ERR_UNSUPPORTED, "gpt2_load: %s: model_type must be \"gpt2\"", path);
    else if (act && (!cJSON_IsString(act) || (strcmp(act->valuestring, "gelu_new") &&
                                              strcmp(act->valuestring, "gelu_pytorch_tanh"))))
        st = ts_error_set(TS_ERR_UNSUPPORTED,
                          "gpt2_load: %s: activation_function must be gelu_new or "
                          "gelu_pytorch_tanh (the tanh GELU)",
                          path);
    else if (eps && (!cJSON_IsNumber(eps) || !(eps->valuedouble > 0)))
        st = ts_error_set(TS_ERR_FORMAT, "gpt2_load: %s: layer_norm_epsilon must be > 0", path);
    else if (cfg_int(path, j, "n_layer", true, &c->n_layer) ||
             cfg_int(path, j, "n_head", true, &c->n_head) ||
             cfg_int(path, j, "n_embd", true, &c->n_embd) ||
             cfg_int(path, j, "n_positions", true, &c->n_ctx) ||
             cfg_int(path, j, "vocab_size", true, &c->vocab) ||
             cfg_int(path, j, "n_inner", false, &c->n_inner))
        st = ts_error();
    else if (c->n_embd % c->n_head)
        st = ts_error_set(TS_ERR_FORMAT,
                          "gpt2_load: %s: n_embd %lld is not a multiple of n_head "
                          "%lld",
                          path, (long long)c->n_embd, (long long)c->n_head);
    if (!st && (double)c->n_layer * (double)c->n_ctx * (double)c->n_embd > 0x1p36)
        st = ts_error_set(TS_ERR_FORMAT,
                          "gpt2_load: %s: n_layer * n_positions * n_embd is too large for a "
                          "key/value cache",
                          path);
    if (!st && eps) c->eps = eps->valuedouble;
    if (!st && !c->n_inner) c->n_inner = 4 * c->n_embd;
    cJSON_Delete(j);
    return st;
}

/* the tensor "transformer.NAME" (or "NAME"), float32 of shape [d0] or [d0, d1] (d1 > 0); retained
 */
static ts_tensor *get_w(const char *file, const ts_tensor_list *l, const char *name, int64_t d0,
                        int64_t d1) {
    char full[256];
    snprintf(full, sizeof full, "transformer.%s", name);
    ts_tensor *t = ts_tensor_list_get(l, full);
    if (!t) t = ts_tensor_list_get(l, name);
    if (!t) return ts_error_set(TS_ERR_FORMAT, "gpt2_load: %s: no tensor %s", file, full), NULL;
    const int nd = d1 ? 2 : 1;
    if (ts_dtype_of(t) != TS_F32 || ts_ndim(t) != nd || ts_size(t, 0) != d0 ||
        (d1 && ts_size(t, 1) != d1))
        return ts_error_set(TS_ERR_FORMAT,
                            "gpt2_load: %s: %s must be float32 [%lld%s%lld] (config.json), got %s "
                            "with %d dims",
                            file, full, (long long)d0, d1 ? ", " : "", (long long)d1,
                            ts_dtype_name(ts_dtype_of(t)), ts_ndim(t)),
               NULL;
    return ts_retain(t);
}

void ts_gpt2_free(ts_gpt2 *m) {
    if (!m) return;
    for (int64_t i = 0; m->layers && i < m->c.n_layer; i++) {
        gpt2_layer *L = &m->layers[i];
        ts_release(L->ln1_w), ts_release(L->ln1_b), ts_release(L->ln2_w), ts_release(L->ln2_b);
        for (int j = 0; j < L_COUNT; j++)
            ts_release(L->w[j]), ts_release(L->q[j]), ts_release(L->b[j]);
    }
    free(m->layers);
    ts_release(m->wte), ts_release(m->wpe), ts_release(m->lnf_w), ts_release(m->lnf_b);
    ts_release(m->qhead), ts_release(m->in_c), ts_release(m->in_f);
    free(m->kcache), free(m->vcache), free(m->x), free(m->att);
    free(m);
}

static bool load_layer(const char *file, const ts_tensor_list *l, const ts_gpt2_config *c,
                       int64_t i, gpt2_layer *L) {
    const int64_t C = c->n_embd, F = c->n_inner;
    const int64_t in[L_COUNT] = {C, C, C, F}, out[L_COUNT] = {3 * C, C, F, C};
    char name[128];
    ts_tensor **ln[4] = {&L->ln1_w, &L->ln1_b, &L->ln2_w, &L->ln2_b};
    const char *const ln_names[4] = {"ln_1.weight", "ln_1.bias", "ln_2.weight", "ln_2.bias"};
    for (int j = 0; j < 4; j++) {
        snprintf(name, sizeof name, "h.%lld.%s", (long long)i, ln_names[j]);
        if (!(*ln[j] = get_w(file, l, name, C, 0))) return false;
    }
    for (int j = 0; j < L_COUNT; j++) {
        snprintf(name, sizeof name, "h.%lld.%s.bias", (long long)i, lin_names[j]);
        if (!(L->b[j] = get_w(file, l, name, out[j], 0))) return false;
        snprintf(name, sizeof name, "h.%lld.%s.weight", (long long)i, lin_names[j]);
        ts_tensor *w = get_w(file, l, name, in[j], out[j]); /* Conv1D: [in, out] */
        if (!w) return false;
        ts_scope_begin();
        L->w[j] = ts_retain(ts_contiguous(ts_t(w)));
        ts_scope_end();
        ts_release(w);
        if (!L->w[j]) return false;
    }
    return true;
}

ts_gpt2 *ts_gpt2_load(const char *dir) {
    if (!dir) return ts_error_set(TS_ERR_ARG, "gpt2_load: dir is NULL"), NULL;
    ts_gpt2_config c;
    if (read_config(dir, &c)) return NULL;
    char file[4096];
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    ts_tensor_list l = {0};
    if (ts_safetensors_load(file, ts_cpu(), &l)) return NULL;
    ts_gpt2 *m = calloc(1, sizeof *m);
    const size_t cache = (size_t)(c.n_layer * c.n_ctx * c.n_embd);
    if (!m || !(m->layers = calloc((size_t)c.n_layer, sizeof *m->layers)) ||
        !(m->kcache = malloc(cache * sizeof(float))) ||
        !(m->vcache = malloc(cache * sizeof(float))) ||
        !(m->x = malloc((size_t)c.n_embd * sizeof(float))) ||
        !(m->att = malloc((size_t)c.n_ctx * sizeof(float)))) {
        ts_tensor_list_free(&l);
        if (m) m->c = c;
        ts_gpt2_free(m);
        return ts_error_set(TS_ERR_OOM, "gpt2_load: out of host memory (cache of %zu floats)",
                            2 * cache),
               NULL;
    }
    m->c = c;
    bool ok = (m->wte = get_w(file, &l, "wte.weight", c.vocab, c.n_embd)) &&
              (m->wpe = get_w(file, &l, "wpe.weight", c.n_ctx, c.n_embd)) &&
              (m->lnf_w = get_w(file, &l, "ln_f.weight", c.n_embd, 0)) &&
              (m->lnf_b = get_w(file, &l, "ln_f.bias", c.n_embd, 0));
    for (int64_t i = 0; ok && i < c.n_layer; i++) ok = load_layer(file, &l, &c, i, &m->layers[i]);
    ts_tensor_list_free(&l);
    if (ok) {
        m->in_c = ts_zeros(TS_SHAPE(1, c.n_embd), (ts_opts){0});
        m->in_f = ts_zeros(TS_SHAPE(1, c.n_inner), (ts_opts){0});
        ok = m->in_c && m->in_f;
    }
    if (!ok) {
        ts_gpt2_free(m);
        return NULL;
    }
    return m;
}

ts_gpt2_config ts_gpt2_get_config(const ts_gpt2 *m) {
    if (!m) return ts_error_set(TS_ERR_ARG, "gpt2_get_config: model is NULL"), (ts_gpt2_config){0};
    return m->c;
}

/* ------------------------------------------------------------------ quantization */
/* the bytes a product reads: float32 weights, or the integers plus a float32 scale and an int32
 * zero point a row (int8) or a group (int4); act8's int4 (the symmetric recipe): a float16 scale a
 * group, the zero points (all 8) not read */
static int64_t wbytes(ts_tensor *w, int64_t group_size, bool act8) {
    const int64_t n = ts_numel(w);
    if (ts_dtype_of(w) == TS_QINT8) return n + 8 * ts_size(w, 0);
    if (ts_dtype_of(w) == TS_QUINT4X2) return n / 2 + (act8 ? 2 : 8) * (n / group_size);
    return 4 * n;
}

static ts_tensor *quantize_one(ts_tensor *w, ts_gpt_quant_opts o, const char *name) {
    ts_scope_begin();
    ts_tensor *q = ts_retain(o.bits == 8       ? ts_quantize_int8_weight_only(w)
                             : o.act_bits == 8 ? ts_quantize_int4_symmetric_weight(w, o.group_size)
                                               : ts_quantize_int4_weight_only(w, o.group_size));
    ts_scope_end();
    if (q && o.on_layer)
        o.on_layer(o.ctx, name, wbytes(w, 0, false), wbytes(q, o.group_size, o.act_bits == 8));
    return q;
}

ts_status ts_gpt2_quantize(ts_gpt2 *m, ts_gpt_quant_opts o) {
    const char *op = "gpt2_quantize";
    if (!m) return ts_error_set(TS_ERR_ARG, "%s: model is NULL", op);
    if (m->qhead) return ts_error_set(TS_ERR_STATE, "%s: the model is quantized already", op);
    if (o.bits != 8 && o.bits != 4)
        return ts_error_set(TS_ERR_ARG, "%s: bits must be 8 or 4 (got %d)", op, o.bits);
    if (o.act_bits != 0 && o.act_bits != 8)
        return ts_error_set(TS_ERR_ARG,
                            "%s: act_bits must be 0 (weight-only) or 8 (int8 dynamic activations) "
                            "(got %d)",
                            op, o.act_bits);
    if (o.bits == 4 && !o.group_size) o.group_size = 32;
    if (o.bits == 4 && o.group_size != 32 && o.group_size != 64 && o.group_size != 128 &&
        o.group_size != 256)
        return ts_error_set(TS_ERR_ARG, "%s: group_size must be 32, 64, 128 or 256 (got %lld)", op,
                            (long long)o.group_size);
    if (o.bits == 4 && (m->c.n_embd % o.group_size || m->c.n_inner % o.group_size))
        return ts_error_set(
            TS_ERR_ARG, "%s: group_size %lld must divide n_embd %lld and n_inner %lld", op,
            (long long)o.group_size, (long long)m->c.n_embd, (long long)m->c.n_inner);
    /* every copy first, then the float weights dropped: a failure leaves the model as it was */
    const int64_t nq = m->c.n_layer * L_COUNT;
    ts_tensor **q = calloc((size_t)nq + 1, sizeof *q);
    if (!q) return ts_error_set(TS_ERR_OOM, "%s: out of host memory", op);
    bool ok = true;
    char name[96];
    for (int64_t i = 0; ok && i < m->c.n_layer; i++)
        for (int j = 0; ok && j < L_COUNT; j++) {
            snprintf(name, sizeof name, "h.%lld.%s", (long long)i, lin_names[j]);
            ok = (q[i * L_COUNT + j] = quantize_one(m->layers[i].w[j], o, name)) != NULL;
        }
    if (ok) ok = (q[nq] = quantize_one(m->wte, o, "lm_head (tied to wte)")) != NULL;
    if (!ok) {
        for (int64_t i = 0; i <= nq; i++) ts_release(q[i]);
        free(q);
        return ts_error();
    }
    for (int64_t i = 0; i < m->c.n_layer; i++)
        for (int j = 0; j < L_COUNT; j++) {
            gpt2_layer *L = &m->layers[i];
            L->q[j] = q[i * L_COUNT + j];
            ts_release(L->w[j]);
            L->w[j] = NULL;
        }
    m->qhead = q[nq];
    m->act8 = o.act_bits == 8;
    free(q);
    return TS_OK;
}

/* ------------------------------------------------------------------ one step */
void ts_gpt2_reset(ts_gpt2 *m) {
    if (m) m->pos = 0;
}

int64_t ts_gpt2_position(const ts_gpt2 *m) { return m ? m->pos : -1; }

static void layer_norm(const float *x, int64_t n, const float *w, const float *b, double eps,
                       float *y) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    const double mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) s2 += (x[i] - mean) * (x[i] - mean);
    const float r = (float)(1.0 / sqrt(s2 / (double)n + eps)), mu = (float)mean;
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mu) * r * w[i] + b[i];
}

/* y = in @ w^T + b through the float or the quantized weight; the output belongs to the scope */
static const float *linear(const ts_gpt2 *m, ts_tensor *in, ts_tensor *w, ts_tensor *q,
                           ts_tensor *b) {
    ts_tensor *y = !q        ? ts_linear(in, w, b)
                   : m->act8 ? ts_int8_dynamic_activation_linear(in, q, b)
                             : ts_weight_only_linear(in, q, b);
    return y ? fptr(y) : NULL;
}

/* sum a[i] b[i] in 16 independent partial sums (a loop the compiler vectorizes: float sums are
 * not reordered otherwise) */
static float dot16(const float *restrict a, const float *restrict b, int64_t n) {
    float s[16] = {0}, r = 0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) s[j] += a[i + j] * b[i + j];
    for (; i < n; i++) r += a[i] * b[i];
    for (int j = 0; j < 16; j++) r += s[j];
    return r;
}

/* attention of the head's query q over positions 0..t of the layer's cache (kc, vc: the head's
 * [n_ctx][head_dim] rows), into out */
static void attend(const ts_gpt2 *m, const float *restrict q, const float *kc, const float *vc,
                   int64_t t, int64_t h, float *restrict out) {
    const int64_t C = m->c.n_embd, hd = C / m->c.n_head, off = h * hd;
    kc += h * m->c.n_ctx * hd, vc += h * m->c.n_ctx * hd;
    const float sc = 1.0f / sqrtf((float)hd);
    float *restrict att = m->att, mx = -INFINITY;
    for (int64_t s = 0; s <= t; s++) {
        att[s] = dot16(q + off, kc + s * hd, hd) * sc;
        mx = att[s] > mx ? att[s] : mx;
    }
    float sum = 0;
    for (int64_t s = 0; s <= t; s++) sum += (att[s] = expf(att[s] - mx));
    const float inv = 1.0f / sum;
    float *restrict o = out + off;
    for (int64_t i = 0; i < hd; i++) o[i] = 0;
    for (int64_t s = 0; s <= t; s++) {
        const float p = att[s] * inv;
        const float *restrict v = vc + s * hd;
        for (int64_t i = 0; i < hd; i++) o[i] += p * v[i];
    }
}

static bool step_layer(ts_gpt2 *m, int64_t li) {
    const int64_t C = m->c.n_embd, F = m->c.n_inner, t = m->pos;
    gpt2_layer *L = &m->layers[li];
    float *x = m->x, *ic = fptr(m->in_c), *iff = fptr(m->in_f);
    float *kc = m->kcache + li * m->c.n_ctx * C, *vc = m->vcache + li * m->c.n_ctx * C;
    layer_norm(x, C, fptr(L->ln1_w), fptr(L->ln1_b), m->c.eps, ic);
    const float *qkv = linear(m, m->in_c, L->w[L_QKV], L->q[L_QKV], L->b[L_QKV]);
    if (!qkv) return false;
    const int64_t hd = C / m->c.n_head, nc = m->c.n_ctx;
    for (int64_t h = 0; h < m->c.n_head; h++) {
        memcpy(kc + (h * nc + t) * hd, qkv + C + h * hd, (size_t)hd * sizeof(float));
        memcpy(vc + (h * nc + t) * hd, qkv + 2 * C + h * hd, (size_t)hd * sizeof(float));
    }
    for (int64_t h = 0; h < m->c.n_head; h++) attend(m, qkv, kc, vc, t, h, ic);
    const float *a = linear(m, m->in_c, L->w[L_PROJ], L->q[L_PROJ], L->b[L_PROJ]);
    if (!a) return false;
    for (int64_t i = 0; i < C; i++) x[i] += a[i];
    layer_norm(x, C, fptr(L->ln2_w), fptr(L->ln2_b), m->c.eps, ic);
    const float *f = linear(m, m->in_c, L->w[L_FC], L->q[L_FC], L->b[L_FC]);
    if (!f) return false;
    /* gelu_new, 0.5 v (1 + tanh(u)) with u = sqrt(2 / pi) (v + 0.044715 v^3), as the identical
     * v / (1 + exp(-2 u)): one expf (about 4x faster than tanhf here, and no cancellation in
     * 1 + tanh(u) for negative u); exp's overflow gives v / inf = -0, the limit */
    const float k0 = 0.7978845608028654f; /* sqrt(2 / pi) */
    for (int64_t i = 0; i < F; i++) {
        const float v = f[i];
        iff[i] = v / (1.0f + expf(-2.0f * (k0 * (v + 0.044715f * v * v * v))));
    }
    const float *y = linear(m, m->in_f, L->w[L_FC2], L->q[L_FC2], L->b[L_FC2]);
    if (!y) return false;
    for (int64_t i = 0; i < C; i++) x[i] += y[i];
    return true;
}

ts_status ts_gpt2_step(ts_gpt2 *m, int64_t id, float *logits, int64_t *next) {
    const char *op = "gpt2_step";
    if (!m) return ts_error_set(TS_ERR_ARG, "%s: model is NULL", op);
    if (id < 0 || id >= m->c.vocab)
        return ts_error_set(TS_ERR_ARG, "%s: token id %lld is outside the vocabulary [0, %lld)", op,
                            (long long)id, (long long)m->c.vocab);
    if (m->pos >= m->c.n_ctx)
        return ts_error_set(TS_ERR_ARG,
                            "%s: the cache is full (%lld positions, n_positions); "
                            "ts_gpt2_reset starts again",
                            op, (long long)m->c.n_ctx);
    const int64_t C = m->c.n_embd, V = m->c.vocab;
    const float *te = fptr(m->wte) + id * C, *pe = fptr(m->wpe) + m->pos * C;
    for (int64_t i = 0; i < C; i++) m->x[i] = te[i] + pe[i];
    ts_no_grad_begin();
    bool ok = true;
    for (int64_t li = 0; ok && li < m->c.n_layer; li++) {
        ts_scope_begin();
        ok = step_layer(m, li);
        ts_scope_end();
    }
    if (ok) {
        ts_scope_begin();
        layer_norm(m->x, C, fptr(m->lnf_w), fptr(m->lnf_b), m->c.eps, fptr(m->in_c));
        const float *lg = linear(m, m->in_c, m->wte, m->qhead, NULL);
        if ((ok = lg != NULL)) {
            if (logits) memcpy(logits, lg, (size_t)V * sizeof(float));
            if (next) {
                int64_t best = 0;
                for (int64_t v = 1; v < V; v++)
                    if (lg[v] > lg[best]) best = v;
                *next = best;
            }
        }
        ts_scope_end();
    }
    ts_no_grad_end();
    if (!ok) return ts_error();
    m->pos++;
    return TS_OK;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ts_status ts_gpt2_generate_greedy(ts_gpt2 *m, const int64_t *ids, int64_t n, int64_t new_tokens,
                                  int64_t *out, double *prompt_s, double *decode_s) {
    const char *op = "gpt2_generate_greedy";
    if (!m || !ids || (new_tokens > 0 && !out))
        return ts_error_set(TS_ERR_ARG, "%s: %s is NULL", op, !m ? "model" : !ids ? "ids" : "out");
    if (n < 1 || new_tokens < 0)
        return ts_error_set(TS_ERR_ARG,
                            "%s: needs n >= 1 prompt ids and new_tokens >= 0 (got "
                            "%lld, %lld)",
                            op, (long long)n, (long long)new_tokens);
    if (n + new_tokens - 1 > m->c.n_ctx)
        return ts_error_set(TS_ERR_ARG,
                            "%s: %lld prompt ids + %lld new tokens pass the context of %lld "
                            "positions",
                            op, (long long)n, (long long)new_tokens, (long long)m->c.n_ctx);
    ts_gpt2_reset(m);
    int64_t next = 0;
    double t0 = now_s();
    for (int64_t i = 0; i < n; i++)
        if (ts_gpt2_step(m, ids[i], NULL, &next)) return ts_error();
    double t1 = now_s();
    for (int64_t k = 0; k < new_tokens; k++) {
        out[k] = next;
        if (k + 1 < new_tokens && ts_gpt2_step(m, next, NULL, &next)) return ts_error();
    }
    double t2 = now_s();
    if (prompt_s) *prompt_s = t1 - t0;
    if (decode_s) *decode_s = t2 - t1;
    return TS_OK;
}
