/* transformer.c — nn.TransformerEncoderLayer (post-norm or pre-norm) with PyTorch's child names,
 * built from MultiheadAttention, Linear, LayerNorm and Dropout modules. */
#include <stdlib.h>

#include "nn/layers_internal.h"
#include "nn/transformer_internal.h"

typedef struct enc_m {
    ts_module base;
    ts_module *self_attn, *linear1, *dropout, *linear2, *norm1, *norm2, *dropout1, *dropout2;
    ts_activation act;
    bool norm_first;
    bool ckpt_sublayers; /* ts_transformer_encoder_layer_checkpoint_sublayers */
} enc_m;

static ts_tensor *enc_run(ts_module *layer, ts_tensor *src, ts_tensor *mask, bool is_causal,
                          ts_tensor *key_padding_mask);

/* ts_forward runs the layer's forward hooks around this; ts_transformer_encoder_layer runs them
 * itself */
static ts_tensor *enc_forward(ts_module *self, ts_tensor *src) {
    return enc_run(self, src, NULL, false, NULL);
}

ts_tensor *tsi_transformer_activate(ts_activation a, ts_tensor *x) {
    switch (a) {
    case TS_ACT_GELU:
        return ts_gelu(x);
    case TS_ACT_GELU_TANH:
        return ts_gelu_tanh(x);
    default:
        return ts_relu(x);
    }
}

bool tsi_transformer_opts_check(const char *op, int64_t d_model, int64_t nhead,
                                ts_transformer_opts o, double *p, int64_t *ff) {
    *p = o.has_dropout ? o.dropout : 0.1;
    *ff = o.dim_feedforward ? o.dim_feedforward : 2048;
    if (d_model <= 0 || nhead <= 0 || *ff < 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: d_model and nhead must be positive and dim_feedforward >= 0, got "
                             "%lld, %lld and %lld",
                             op, (long long)d_model, (long long)nhead, (long long)*ff),
               false;
    if (!(*p >= 0 && *p <= 1))
        return tsi_error_set(TS_ERR_ARG, "%s: dropout must be in [0, 1], got %g", op, *p), false;
    if ((unsigned)o.activation > TS_ACT_GELU_TANH)
        return tsi_error_set(TS_ERR_ARG, "%s: activation should be relu/gelu, not %d", op,
                             (int)o.activation),
               false;
    if (!(o.layer_norm_eps >= 0))
        return tsi_error_set(TS_ERR_ARG, "%s: layer_norm_eps must be >= 0, got %g", op,
                             o.layer_norm_eps),
               false;
    return true;
}

ts_module *ts_transformer_encoder_layer_new(int64_t d_model, int64_t nhead, ts_transformer_opts o) {
    tsi_init();
    const char *op = "TransformerEncoderLayer";
    double p;
    int64_t ff;
    if (!tsi_transformer_opts_check(op, d_model, nhead, o, &p, &ff)) return NULL;
    enc_m *m = ts_module_alloc(sizeof *m, op, enc_forward);
    if (!m) return NULL;
    m->act = o.activation;
    m->norm_first = o.norm_first;
    ts_module *b = &m->base;
    ts_linear_opts lo = {.no_bias = o.no_bias};
    ts_norm_opts no = {.eps = o.layer_norm_eps, .no_bias = o.no_bias};
    m->self_attn = ts_module_add(
        b, "self_attn",
        ts_multihead_attention_new(
            d_model, nhead,
            (ts_mha_opts){.dropout = p, .no_bias = o.no_bias, .batch_first = o.batch_first}));
    m->linear1 = ts_module_add(b, "linear1", ts_linear_new_ex(d_model, ff, lo));
    m->dropout = ts_module_add(b, "dropout", ts_dropout_new(p));
    m->linear2 = ts_module_add(b, "linear2", ts_linear_new_ex(ff, d_model, lo));
    m->norm1 = ts_module_add(b, "norm1", ts_layer_norm_new(TS_SHAPE(d_model), no));
    m->norm2 = ts_module_add(b, "norm2", ts_layer_norm_new(TS_SHAPE(d_model), no));
    m->dropout1 = ts_module_add(b, "dropout1", ts_dropout_new(p));
    m->dropout2 = ts_module_add(b, "dropout2", ts_dropout_new(p));
    if (!m->self_attn || !m->linear1 || !m->dropout || !m->linear2 || !m->norm1 || !m->norm2 ||
        !m->dropout1 || !m->dropout2) {
        ts_module_free(b);
        return NULL;
    }
    return b;
}

ts_tensor *ts_transformer_encoder_layer(ts_module *layer, ts_tensor *src, ts_tensor *mask,
                                        bool is_causal, ts_tensor *key_padding_mask) {
    tsi_init();
    if (!layer || layer->forward != enc_forward) {
        if (!ts_error())
            tsi_error_set(TS_ERR_ARG,
                          "transformer_encoder_layer: expected a TransformerEncoderLayer module, "
                          "got %s",
                          layer ? layer->type_name : "NULL");
        return NULL;
    }
    if (!tsi_check_input("transformer_encoder_layer", src, "src")) return NULL;
    if (!layer->impl->hooks) return enc_run(layer, src, mask, is_causal, key_padding_mask);
    if (!tsi_module_pre_hooks(layer, src)) return NULL;
    ts_scope_begin();
    ts_tensor *y = enc_run(layer, src, mask, is_causal, key_padding_mask);
    if (y) y = tsi_module_post_hooks(layer, src, y);
    y = ts_keep(y);
    ts_scope_end();
    return y;
}

/* The attention sublayer's output SA(in) and the feed-forward sublayer's FF(in), before the
 * residual add */
static ts_tensor *sa_out(enc_m *m, ts_tensor *in, ts_tensor *mask, bool is_causal,
                         ts_tensor *key_padding_mask) {
    return ts_forward(m->dropout1,
                      ts_multihead_attention(m->self_attn, in, in, in, key_padding_mask, mask,
                                             is_causal, false, NULL));
}

static ts_tensor *ff_out(enc_m *m, ts_tensor *in) {
    /* mlp_fused.c: one node where the middle dropout is the identity */
    return ts_forward(m->dropout2, tsi_forward_mlp(m->linear1, m->act, m->dropout, m->linear2, in));
}

/* The attention sublayer, with its residual and norm: x + SA(norm1(x)) pre-norm, norm1(x + SA(x))
 * post-norm. */
static ts_tensor *sa_block(enc_m *m, ts_tensor *x, ts_tensor *mask, bool is_causal,
                           ts_tensor *key_padding_mask) {
    if (!m->norm_first)
        return ts_forward(m->norm1, ts_add(x, sa_out(m, x, mask, is_causal, key_padding_mask)));
    ts_tensor *h = ts_forward(m->norm1, x); /* once: SA names its input three times */
    return ts_add(x, sa_out(m, h, mask, is_causal, key_padding_mask));
}

/* The feed-forward sublayer, likewise: x + FF(norm2(x)) or norm2(x + FF(x)). */
static ts_tensor *ff_block(enc_m *m, ts_tensor *x) {
    if (!m->norm_first) return ts_forward(m->norm2, ts_add(x, ff_out(m, x)));
    return ts_add(x, ff_out(m, ts_forward(m->norm2, x)));
}

/* Pre-norm, both sublayers in one go: the attention sublayer's residual add h = x + SA(norm1(x))
 * and norm2(h) in one pass (ts_add_layer_norm, decision 0031) when norm2 is a plain built-in
 * LayerNorm, then h + FF(norm2(h)): ff_block(sa_block(x))'s ops, values and graph (the same
 * add, the same norm node), one pass over h fewer. */
static ts_tensor *pre_norm_blocks(enc_m *m, ts_tensor *x, ts_tensor *mask, bool is_causal,
                                  ts_tensor *key_padding_mask) {
    tsi_layer_norm_parts p;
    if (!m->norm_first || !tsi_layer_norm_parts_of(m->norm2, &p))
        return ff_block(m, sa_block(m, x, mask, is_causal, key_padding_mask));
    ts_tensor *a = sa_out(m, ts_forward(m->norm1, x), mask, is_causal, key_padding_mask);
    if (!a) return NULL;
    /* ts_add would promote or broadcast (an autocast sublayer's lower dtype): unfused */
    bool same = a->dtype == x->dtype && a->shape.ndim == x->shape.ndim;
    for (int i = 0; same && i < x->shape.ndim; i++) same = a->shape.dims[i] == x->shape.dims[i];
    if (!same) return ff_block(m, ts_add(x, a));
    ts_tensor *h = NULL;
    ts_tensor *y = ts_add_layer_norm(x, a, p.shape, p.w, p.b, p.eps, &h);
    return y ? ts_add(h, ff_out(m, y)) : NULL;
}

/* The sublayers as ts_checkpoint's functions: in = {x, mask, key_padding_mask} and {x}. */
typedef struct sa_ctx {
    enc_m *m;
    bool is_causal;
} sa_ctx;

static ts_status sa_fn(void *ctx, ts_tensor *const *in, int n_in, ts_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    const sa_ctx *c = ctx;
    out[0] = sa_block(c->m, in[0], in[1], c->is_causal, in[2]);
    return out[0] ? TS_OK : ts_error() != TS_OK ? ts_error() : TS_ERR_STATE;
}

static ts_status ff_fn(void *ctx, ts_tensor *const *in, int n_in, ts_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    out[0] = ff_block(ctx, in[0]);
    return out[0] ? TS_OK : ts_error() != TS_OK ? ts_error() : TS_ERR_STATE;
}

/* Each sublayer under a checkpoint of its own: a backward recomputes one sublayer at a time. */
static ts_tensor *enc_run_checkpointed(enc_m *m, ts_tensor *x, ts_tensor *mask, bool is_causal,
                                       ts_tensor *key_padding_mask) {
    sa_ctx *c = malloc(sizeof *c);
    if (!c) return tsi_error_set(TS_ERR_OOM, "transformer_encoder_layer: out of host memory"), NULL;
    *c = (sa_ctx){m, is_causal};
    ts_tensor *in[3] = {x, mask, key_padding_mask}, *y = NULL;
    if (ts_checkpoint(sa_fn, c, free, in, 3, &y, 1) != TS_OK) return NULL;
    ts_tensor *z = NULL;
    return ts_checkpoint(ff_fn, m, NULL, &y, 1, &z, 1) == TS_OK ? z : NULL;
}

ts_status ts_transformer_encoder_layer_checkpoint_sublayers(ts_module *layer, bool on) {
    tsi_init();
    if (!layer || layer->forward != enc_forward)
        return tsi_error_set(TS_ERR_ARG,
                             "transformer_encoder_layer_checkpoint_sublayers: expected a "
                             "TransformerEncoderLayer module, got %s",
                             layer ? layer->type_name : "NULL");
    ((enc_m *)layer)->ckpt_sublayers = on;
    return TS_OK;
}

static ts_tensor *enc_run(ts_module *layer, ts_tensor *src, ts_tensor *mask, bool is_causal,
                          ts_tensor *key_padding_mask) {
    enc_m *m = (enc_m *)layer;
    ts_scope_begin();
    ts_tensor *x = m->ckpt_sublayers && ts_grad_enabled()
                       ? enc_run_checkpointed(m, src, mask, is_causal, key_padding_mask)
                       : pre_norm_blocks(m, src, mask, is_causal, key_padding_mask);
    x = ts_keep(x);
    ts_scope_end();
    return x;
}
