/* gpt_weight_only.c — a GPT whose linears run weight-only quantized (ts_gpt_quantize_weight_only,
 * torchao's int8_weight_only / int4_weight_only applied to nanoGPT): the quantized copies of each
 * block's four linears and of the tied head, and the block's eval-mode forward over them, the
 * same composition as the pre-norm, causal TransformerEncoderLayer (src/nn/transformer.c, mha.c)
 * with ts_weight_only_linear in place of ts_linear. */
#include <stdio.h>
#include <stdlib.h>

#include "models/gpt_internal.h"
#include "tessera/quant.h"

enum { L_QKV, L_OUT, L_FC1, L_FC2, L_COUNT };
static const char *const lin_w[L_COUNT] = {"self_attn.in_proj_weight", "self_attn.out_proj.weight",
                                           "linear1.weight", "linear2.weight"};
static const char *const lin_b[L_COUNT] = {"self_attn.in_proj_bias", "self_attn.out_proj.bias",
                                           "linear1.bias", "linear2.bias"};

struct tsi_gpt_wo {
    int64_t n_layer;
    ts_tensor **w; /* [n_layer * L_COUNT], held */
    ts_tensor *head;
};

void tsi_gpt_wo_free(tsi_gpt_wo *wo) {
    if (!wo) return;
    for (int64_t i = 0; wo->w && i < wo->n_layer * L_COUNT; i++) ts_release(wo->w[i]);
    free(wo->w);
    ts_release(wo->head);
    free(wo);
}

/* the quantized copy of w (held: outside any scope), reported as name */
static ts_tensor *quantize(ts_tensor *w, const char *name, const ts_gpt_quant_opts *o) {
    ts_scope_begin();
    ts_tensor *q = o->bits == 8 ? ts_quantize_int8_weight_only(ts_detach(w))
                                : ts_quantize_int4_weight_only(ts_detach(w), o->group_size);
    q = ts_retain(q);
    ts_scope_end();
    if (q && o->on_layer) {
        const int64_t n = ts_numel(w);
        o->on_layer(o->ctx, name, n * (int64_t)sizeof(float), o->bits == 8 ? n : n / 2);
    }
    return q;
}

tsi_gpt_wo *tsi_gpt_wo_make(ts_module *blocks, ts_tensor *tok_w, int64_t n_layer,
                            const ts_gpt_quant_opts *o) {
    tsi_gpt_wo *wo = calloc(1, sizeof *wo);
    if (wo) wo->w = calloc((size_t)(n_layer * L_COUNT), sizeof *wo->w);
    if (!wo || !wo->w) {
        tsi_gpt_wo_free(wo);
        return ts_error_set(TS_ERR_OOM, "gpt_quantize_weight_only: out of host memory"), NULL;
    }
    wo->n_layer = n_layer;
    for (int64_t i = 0; i < n_layer; i++) {
        char idx[32], name[96];
        snprintf(idx, sizeof idx, "%lld", (long long)i);
        ts_module *blk = ts_module_child(blocks, idx);
        for (int l = 0; l < L_COUNT; l++) {
            ts_tensor *w = blk ? ts_module_get(blk, lin_w[l]) : NULL;
            snprintf(name, sizeof name, "blocks.%lld.%s", (long long)i, lin_w[l]);
            if (!w) {
                if (!ts_error())
                    ts_error_set(TS_ERR_STATE, "gpt_quantize_weight_only: no %s", name);
                tsi_gpt_wo_free(wo);
                return NULL;
            }
            if (!(wo->w[i * L_COUNT + l] = quantize(w, name, o))) {
                tsi_gpt_wo_free(wo);
                return NULL;
            }
        }
    }
    if (!(wo->head = quantize(tok_w, "head (tied to tok_emb.weight)", o))) {
        tsi_gpt_wo_free(wo);
        return NULL;
    }
    return wo;
}

static ts_tensor *lin(tsi_gpt_wo *wo, int64_t i, int l, ts_module *blk, ts_tensor *x) {
    return ts_weight_only_linear(x, wo->w[i * L_COUNT + l], ts_module_get(blk, lin_b[l]));
}

ts_tensor *tsi_gpt_wo_block(tsi_gpt_wo *wo, int64_t i, ts_module *blk, ts_tensor *x,
                            int64_t n_head) {
    if (!x) return NULL;
    ts_scope_begin();
    const int64_t B = ts_size(x, 0), T = ts_size(x, 1), E = ts_size(x, 2), H = n_head;
    /* attention: one packed projection, q / k / v [B, H, T, E / H], causal SDPA, out_proj */
    ts_tensor *qkv = lin(wo, i, L_QKV, blk, ts_forward(ts_module_child(blk, "norm1"), x));
    ts_tensor *part[3] = {NULL, NULL, NULL};
    ts_chunk(ts_reshape(qkv, TS_SHAPE(B, T, 3, H, E / H)), 3, 2, part, 3);
    ts_tensor *hv[3];
    for (int j = 0; j < 3; j++)
        hv[j] = ts_permute(ts_squeeze_dim(part[j], 2), (ts_dims){4, {0, 2, 1, 3}});
    ts_tensor *a = ts_scaled_dot_product_attention(hv[0], hv[1], hv[2], NULL, 0, true, 0);
    a = ts_reshape(ts_permute(a, (ts_dims){4, {0, 2, 1, 3}}), TS_SHAPE(B, T, E));
    ts_tensor *h = ts_add(x, lin(wo, i, L_OUT, blk, a));
    /* feed-forward: linear2(gelu(linear1(norm2(h)))) */
    ts_tensor *f = ts_gelu(lin(wo, i, L_FC1, blk, ts_forward(ts_module_child(blk, "norm2"), h)));
    ts_tensor *y = ts_keep(ts_add(h, lin(wo, i, L_FC2, blk, f)));
    ts_scope_end();
    return y;
}

ts_tensor *tsi_gpt_wo_head(tsi_gpt_wo *wo, ts_tensor *x) {
    return ts_weight_only_linear(x, wo->head, NULL);
}
