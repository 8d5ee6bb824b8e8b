/* gpt.c — a GPT (decoder-only transformer) built over the public modules only, as an example of a
 * whole model: embeddings, pre-norm TransformerEncoderLayers run causally, a tied head. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/gpt_internal.h"
#include "tessera.h"

typedef struct gpt {
    ts_module base;
    ts_gpt_config c; /* defaults resolved */
    ts_module *tok_emb, *pos_emb, *drop, *blocks, *ln_f;
    tsi_gpt_wo *wo; /* weight-only quantized linears (gpt_weight_only.c); NULL: float */
} gpt;

static ts_tensor *gpt_forward(ts_module *self, ts_tensor *idx);

static gpt *as_gpt(ts_module *m, const char *op) {
    if (m && m->forward == gpt_forward) return (gpt *)m;
    if (!ts_error())
        ts_error_set(TS_ERR_ARG, "%s: expected a GPT module, got %s", op,
                     m ? m->type_name : "NULL");
    return NULL;
}

/* a block, causal (the body of a checkpointed block) */
static ts_status block_forward(void *ctx, ts_tensor *const *in, int n_in, ts_tensor **out,
                               int n_out) {
    (void)n_in, (void)n_out;
    out[0] = ts_transformer_encoder_layer(ctx, in[0], NULL, true, NULL);
    return out[0] ? TS_OK : ts_error();
}

static ts_tensor *gpt_forward(ts_module *self, ts_tensor *idx) {
    gpt *g = (gpt *)self;
    if (ts_ndim(idx) != 2 || (ts_dtype_of(idx) != TS_I64 && ts_dtype_of(idx) != TS_I32))
        return ts_error_set(TS_ERR_SHAPE,
                            "GPT: expected token indices of dtype int64 [B, T], got %s with %d "
                            "dims",
                            ts_dtype_name(ts_dtype_of(idx)), ts_ndim(idx)),
               NULL;
    if (g->wo && self->training)
        return ts_error_set(TS_ERR_STATE, "GPT: a weight-only quantized GPT runs in eval mode "
                                          "only (ts_module_eval)"),
               NULL;
    const int64_t T = ts_size(idx, 1);
    if (T < 1 || T > g->c.context)
        return ts_error_set(TS_ERR_SHAPE,
                            "GPT: cannot forward a sequence of length %lld, the context is %lld "
                            "(1 <= T <= context)",
                            (long long)T, (long long)g->c.context),
               NULL;
    ts_tensor *pos =
        ts_arange(0, (double)T, 1, (ts_opts){.dtype = TS_I64, .device = ts_device_of(idx)});
    ts_tensor *x = ts_add(ts_forward(g->tok_emb, idx), ts_forward(g->pos_emb, pos));
    x = ts_forward(g->drop, x);
    for (int64_t i = 0; i < g->c.n_layer; i++) {
        char name[32];
        snprintf(name, sizeof name, "%lld", (long long)i);
        ts_module *blk = ts_module_child(g->blocks, name);
        if (g->wo) {
            x = tsi_gpt_wo_block(g->wo, i, blk, x, g->c.n_head);
        } else if (ts_module_checkpointed(blk) && ts_grad_enabled()) {
            ts_tensor *y = NULL;
            x = ts_checkpoint(block_forward, blk, NULL, &x, 1, &y, 1) == TS_OK ? y : NULL;
        } else {
            x = ts_transformer_encoder_layer(blk, x, NULL, true, NULL);
        }
    }
    x = ts_forward(g->ln_f, x);
    /* the head shares the token embedding: logits = x @ tok_emb.weight^T */
    if (g->wo) return tsi_gpt_wo_head(g->wo, x);
    return ts_linear(x, ts_module_get(g->tok_emb, "weight"), NULL);
}

static void gpt_destroy(ts_module *self) { tsi_gpt_wo_free(((gpt *)self)->wo); }

ts_status ts_gpt_quantize_weight_only(ts_module *m, ts_gpt_quant_opts o) {
    const char *op = "gpt_quantize_weight_only";
    gpt *g = as_gpt(m, op);
    if (!g) return ts_error();
    if (g->wo) return ts_error_set(TS_ERR_STATE, "%s: the GPT is quantized already", op);
    if (o.bits != 8 && o.bits != 4)
        return ts_error_set(TS_ERR_ARG, "%s: bits must be 8 or 4, got %d", op, o.bits);
    if (o.act_bits)
        return ts_error_set(TS_ERR_UNSUPPORTED,
                            "%s: act_bits %d: int8 dynamic activations are ts_gpt2_quantize's "
                            "only (weight-only here: act_bits 0)",
                            op, o.act_bits);
    if (!o.group_size) o.group_size = 128;
    ts_no_grad_begin();
    g->wo = tsi_gpt_wo_make(g->blocks, ts_module_get(g->tok_emb, "weight"), g->c.n_layer, &o);
    ts_no_grad_end();
    return g->wo ? TS_OK : ts_error();
}

static ts_tensor *module_list_forward(ts_module *self, ts_tensor *x) {
    (void)x;
    return ts_error_set(TS_ERR_ARG, "forward: %s has no forward (call its children)",
                        self->type_name),
           NULL;
}

/* nanoGPT's _init_weights: normal(0, 0.02) for matrices, zero biases, the residual projections
 * (out_proj, linear2) 0.02 / sqrt(2 n_layer); layer norms keep ones and zeros. */
static bool init_weights(gpt *g) {
    ts_tensor_list ps = ts_module_named_parameters(&g->base);
    bool ok = ps.n > 0;
    const double res_std = 0.02 / sqrt(2.0 * (double)g->c.n_layer);
    for (int i = 0; ok && i < ps.n; i++) {
        const char *n = ps.names[i];
        ts_tensor *t = ps.tensors[i];
        if (strstr(n, "norm") || !strncmp(n, "ln_f.", 5)) continue;
        if (ts_ndim(t) == 1)
            ok = ts_init_zeros_(t) != NULL;
        else if (strstr(n, "out_proj.weight") || strstr(n, "linear2.weight"))
            ok = ts_init_normal_(t, 0.0, res_std) != NULL;
        else
            ok = ts_init_normal_(t, 0.0, 0.02) != NULL;
    }
    ts_tensor_list_free(&ps);
    return ok;
}

ts_module *ts_gpt_new(ts_gpt_config c) {
    ts_gpt_config r = {
        .vocab_size = c.vocab_size ? c.vocab_size : 256,
        .context = c.context ? c.context : 256,
        .n_layer = c.n_layer ? c.n_layer : 4,
        .n_head = c.n_head ? c.n_head : 4,
        .n_embd = c.n_embd ? c.n_embd : 256,
        .dropout = c.dropout,
    };
    if (r.vocab_size < 1 || r.context < 1 || r.n_layer < 1 || r.n_head < 1 || r.n_embd < 1 ||
        r.n_embd % r.n_head || !(r.dropout >= 0 && r.dropout <= 1))
        return ts_error_set(TS_ERR_ARG,
                            "GPT: vocab_size, context, n_layer, n_head and n_embd must be positive "
                            "(0: default), n_embd divisible by n_head and dropout in [0, 1]; got "
                            "%lld, %lld, %lld, %lld, %lld and %g",
                            (long long)r.vocab_size, (long long)r.context, (long long)r.n_layer,
                            (long long)r.n_head, (long long)r.n_embd, r.dropout),
               NULL;
    gpt *g = ts_module_alloc(sizeof *g, "GPT", gpt_forward);
    if (!g) return NULL;
    g->c = r;
    ts_module *b = &g->base;
    b->destroy = gpt_destroy;
    g->tok_emb = ts_module_add(b, "tok_emb", ts_embedding_new(r.vocab_size, r.n_embd));
    g->pos_emb = ts_module_add(b, "pos_emb", ts_embedding_new(r.context, r.n_embd));
    g->drop = ts_module_add(b, "drop", ts_dropout_new(r.dropout));
    g->blocks = ts_module_add(
        b, "blocks", ts_module_alloc(sizeof(ts_module), "ModuleList", module_list_forward));
    bool ok = g->tok_emb && g->pos_emb && g->drop && g->blocks;
    ts_transformer_opts lo = {.dim_feedforward = 4 * r.n_embd,
                              .has_dropout = true,
                              .dropout = r.dropout,
                              .activation = TS_ACT_GELU,
                              .batch_first = true,
                              .norm_first = true};
    for (int64_t i = 0; ok && i < r.n_layer; i++) {
        char name[32];
        snprintf(name, sizeof name, "%lld", (long long)i);
        ok = ts_module_add(g->blocks, name,
                           ts_transformer_encoder_layer_new(r.n_embd, r.n_head, lo)) != NULL;
    }
    if (ok) {
        g->ln_f =
            ts_module_add(b, "ln_f", ts_layer_norm_new(TS_SHAPE(r.n_embd), (ts_norm_opts){0}));
        ok = g->ln_f && init_weights(g);
    }
    if (!ok) {
        ts_module_free(b);
        return NULL;
    }
    return b;
}

ts_gpt_config ts_gpt_get_config(ts_module *m) {
    gpt *g = as_gpt(m, "gpt_get_config");
    return g ? g->c : (ts_gpt_config){0};
}

ts_tensor *ts_gpt_generate(ts_module *m, ts_tensor *idx, int64_t new_tokens, ts_sample_opts o) {
    const char *op = "gpt_generate";
    gpt *g = as_gpt(m, op);
    if (!g || !idx) {
        if (!ts_error()) ts_error_set(TS_ERR_ARG, "%s: idx is NULL", op);
        return NULL;
    }
    if (ts_ndim(idx) != 2 || ts_dtype_of(idx) != TS_I64 || ts_size(idx, 1) < 1)
        return ts_error_set(TS_ERR_SHAPE,
                            "%s: expected idx of dtype int64 [B, T0] with T0 >= 1, got %s with "
                            "%d dims",
                            op, ts_dtype_name(ts_dtype_of(idx)), ts_ndim(idx)),
               NULL;
    if (new_tokens < 0)
        return ts_error_set(TS_ERR_ARG, "%s: new_tokens must be >= 0, got %lld", op,
                            (long long)new_tokens),
               NULL;
    const bool was_training = m->training;
    ts_module_eval(m);
    ts_no_grad_begin();
    ts_scope_begin();
    ts_tensor *cur = idx;
    const int64_t B = ts_size(idx, 0), ctx = g->c.context;
    for (int64_t i = 0; cur && i < new_tokens; i++) {
        ts_scope_begin();
        const int64_t T = ts_size(cur, 1);
        ts_tensor *cond = T > ctx ? ts_narrow(cur, 1, T - ctx, ctx) : cur;
        ts_tensor *logits = ts_forward(m, cond);
        ts_tensor *next =
            ts_sample_logits(logits ? ts_select(logits, 1, ts_size(logits, 1) - 1) : NULL, o);
        ts_tensor *parts[2] = {cur, ts_view(next, TS_SHAPE(B, 1))};
        ts_tensor *joined = parts[1] ? ts_cat(parts, 2, 1) : NULL;
        joined = ts_keep(joined);
        ts_scope_end();
        cur = joined;
    }
    cur = ts_keep(cur);
    ts_scope_end();
    ts_no_grad_end();
    ts_module_train(m, was_training);
    return cur;
}

/* blocks i with every > 0 and i % every == 0 checkpointed whole (!sublayers) or by sublayer */
static ts_status checkpoint_blocks(ts_module *m, int every, bool sublayers, const char *op) {
    gpt *g = as_gpt(m, op);
    if (!g) return ts_error();
    if (every < 0) return ts_error_set(TS_ERR_ARG, "%s: every must be >= 0, got %d", op, every);
    for (int64_t i = 0; i < g->c.n_layer; i++) {
        char name[32];
        snprintf(name, sizeof name, "%lld", (long long)i);
        ts_module *blk = ts_module_child(g->blocks, name);
        const bool on = every > 0 && i % every == 0;
        ts_module_set_checkpoint(blk, on && !sublayers);
        ts_transformer_encoder_layer_checkpoint_sublayers(blk, on && sublayers);
    }
    return ts_error();
}

ts_status ts_gpt_checkpoint_blocks(ts_module *m, int every) {
    return checkpoint_blocks(m, every, false, "gpt_checkpoint_blocks");
}

ts_status ts_gpt_checkpoint_sublayers(ts_module *m, int every) {
    return checkpoint_blocks(m, every, true, "gpt_checkpoint_sublayers");
}
