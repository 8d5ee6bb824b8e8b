/* transformer_decoder.c — nn.TransformerDecoderLayer (post-norm or pre-norm) with PyTorch's child
 * names: self-attention, cross-attention over the memory (the C MultiheadAttention with separate
 * query and key/value), the feed-forward block, three LayerNorms and Dropouts. */
#include "tessera/transformer.h"

#include "nn/layers_internal.h"
#include "nn/transformer_internal.h"

static const char *OP = "TransformerDecoderLayer";

typedef struct dec_m {
    ts_module base;
    ts_module *self_attn, *multihead_attn, *linear1, *dropout, *linear2;
    ts_module *norm1, *norm2, *norm3, *dropout1, *dropout2, *dropout3;
    ts_activation act;
    bool norm_first;
} dec_m;

static ts_tensor *dec_forward(ts_module *self, ts_tensor *tgt) {
    (void)self;
    (void)tgt;
    return tsi_error_set(TS_ERR_ARG,
                         "%s: forward needs the memory; call ts_transformer_decoder_layer(layer, "
                         "tgt, memory, masks)",
                         OP),
           NULL;
}

ts_module *ts_transformer_decoder_layer_new(int64_t d_model, int64_t nhead, ts_transformer_opts o) {
    tsi_init();
    double p;
    int64_t ff;
    if (!tsi_transformer_opts_check(OP, d_model, nhead, o, &p, &ff)) return NULL;
    dec_m *m = ts_module_alloc(sizeof *m, OP, dec_forward);
    if (!m) return NULL;
    m->act = o.activation;
    m->norm_first = o.norm_first;
    ts_module *b = &m->base;
    ts_linear_opts lo = {.no_bias = o.no_bias};
    ts_norm_opts no = {.eps = o.layer_norm_eps, .no_bias = o.no_bias};
    ts_mha_opts ao = {.dropout = p, .no_bias = o.no_bias, .batch_first = o.batch_first};
    m->self_attn = ts_module_add(b, "self_attn", ts_multihead_attention_new(d_model, nhead, ao));
    m->multihead_attn =
        ts_module_add(b, "multihead_attn", ts_multihead_attention_new(d_model, nhead, ao));
    m->linear1 = ts_module_add(b, "linear1", ts_linear_new_ex(d_model, ff, lo));
    m->dropout = ts_module_add(b, "dropout", ts_dropout_new(p));
    m->linear2 = ts_module_add(b, "linear2", ts_linear_new_ex(ff, d_model, lo));
    m->norm1 = ts_module_add(b, "norm1", ts_layer_norm_new(TS_SHAPE(d_model), no));
    m->norm2 = ts_module_add(b, "norm2", ts_layer_norm_new(TS_SHAPE(d_model), no));
    m->norm3 = ts_module_add(b, "norm3", ts_layer_norm_new(TS_SHAPE(d_model), no));
    m->dropout1 = ts_module_add(b, "dropout1", ts_dropout_new(p));
    m->dropout2 = ts_module_add(b, "dropout2", ts_dropout_new(p));
    m->dropout3 = ts_module_add(b, "dropout3", ts_dropout_new(p));
    if (!m->self_attn || !m->multihead_attn || !m->linear1 || !m->dropout || !m->linear2 ||
        !m->norm1 || !m->norm2 || !m->norm3 || !m->dropout1 || !m->dropout2 || !m->dropout3) {
        ts_module_free(b);
        return NULL;
    }
    return b;
}

static ts_tensor *sa_block(dec_m *m, ts_tensor *x, const ts_decoder_masks *k) {
    return ts_forward(m->dropout1,
                      ts_multihead_attention(m->self_attn, x, x, x, k->tgt_key_padding_mask,
                                             k->tgt_mask, k->tgt_is_causal, false, NULL));
}

static ts_tensor *mha_block(dec_m *m, ts_tensor *x, ts_tensor *mem, const ts_decoder_masks *k) {
    return ts_forward(m->dropout2, ts_multihead_attention(
                                       m->multihead_attn, x, mem, mem, k->memory_key_padding_mask,
                                       k->memory_mask, k->memory_is_causal, false, NULL));
}

static ts_tensor *ff_block(dec_m *m, ts_tensor *x) {
    /* mlp_fused.c: one node where the middle dropout is the identity */
    return ts_forward(m->dropout3, tsi_forward_mlp(m->linear1, m->act, m->dropout, m->linear2, x));
}

static ts_tensor *dec_run(dec_m *m, ts_tensor *tgt, ts_tensor *mem, const ts_decoder_masks *k) {
    ts_scope_begin();
    ts_tensor *x = tgt;
    if (m->norm_first) {
        x = ts_add(x, sa_block(m, ts_forward(m->norm1, x), k));
        x = ts_add(x, mha_block(m, ts_forward(m->norm2, x), mem, k));
        x = ts_add(x, ff_block(m, ts_forward(m->norm3, x)));
    } else {
        x = ts_forward(m->norm1, ts_add(x, sa_block(m, x, k)));
        x = ts_forward(m->norm2, ts_add(x, mha_block(m, x, mem, k)));
        x = ts_forward(m->norm3, ts_add(x, ff_block(m, x)));
    }
    x = ts_keep(x);
    ts_scope_end();
    return x;
}

ts_tensor *ts_transformer_decoder_layer(ts_module *layer, ts_tensor *tgt, ts_tensor *memory,
                                        const ts_decoder_masks *masks) {
    tsi_init();
    if (!layer || layer->forward != dec_forward) {
        if (!ts_error())
            tsi_error_set(TS_ERR_ARG, "transformer_decoder_layer: expected a %s module, got %s", OP,
                          layer ? layer->type_name : "NULL");
        return NULL;
    }
    if (!tsi_check_input("transformer_decoder_layer", tgt, "tgt") ||
        !tsi_check_input("transformer_decoder_layer", memory, "memory"))
        return NULL;
    const ts_decoder_masks none = {0};
    const ts_decoder_masks *k = masks ? masks : &none;
    dec_m *m = (dec_m *)layer;
    if (!layer->impl->hooks) return dec_run(m, tgt, memory, k);
    if (!tsi_module_pre_hooks(layer, tgt)) return NULL;
    ts_scope_begin();
    ts_tensor *y = dec_run(m, tgt, memory, k);
    if (y) y = tsi_module_post_hooks(layer, tgt, y);
    y = ts_keep(y);
    ts_scope_end();
    return y;
}
