/* mha.c — nn.MultiheadAttention with PyTorch's parameter names and forward semantics (packed
 * in-projection, bool/float masks, key padding, head-averaged weights), over
 * ts_scaled_dot_product_attention when the weights are not needed. */
#include <math.h>

#include "nn/module_internal.h"

static const char *OP = "multi_head_attention_forward";

typedef struct mha_m {
    ts_module base;
    int64_t embed_dim, num_heads;
    double dropout;
    bool batch_first;
    int w, b; /* in_proj_weight, in_proj_bias slots */
    ts_module *out_proj;
} mha_m;

static ts_tensor *mha_forward(ts_module *self, ts_tensor *x) {
    return ts_multihead_attention(self, x, x, x, NULL, NULL, false, false, NULL);
}

ts_module *ts_multihead_attention_new(int64_t embed_dim, int64_t num_heads, ts_mha_opts o) {
    tsi_init();
    const char *op = "MultiheadAttention";
    if (embed_dim <= 0 || num_heads <= 0)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: embed_dim and num_heads must be positive, got %lld and %lld", op,
                             (long long)embed_dim, (long long)num_heads),
               NULL;
    if (embed_dim % num_heads)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: embed_dim must be divisible by num_heads, got %lld "
                             "and %lld",
                             op, (long long)embed_dim, (long long)num_heads),
               NULL;
    if (!(o.dropout >= 0 && o.dropout <= 1))
        return tsi_error_set(TS_ERR_ARG, "%s: dropout must be in [0, 1], got %g", op, o.dropout),
               NULL;
    mha_m *m = ts_module_alloc(sizeof *m, op, mha_forward);
    if (!m) return NULL;
    m->embed_dim = embed_dim;
    m->num_heads = num_heads;
    m->dropout = o.dropout;
    m->batch_first = o.batch_first;
    m->w = m->b = -1;
    if (!tsi_scope_open()) {
        ts_module_free(&m->base);
        return NULL;
    }
    /* PyTorch's order: in_proj_weight, in_proj_bias, then out_proj; _reset_parameters draws
     * xavier_uniform_ for in_proj_weight after out_proj's Linear init */
    ts_tensor *w = ts_empty(TS_SHAPE(3 * embed_dim, embed_dim), (ts_opts){0});
    m->w = tsi_register_slot(&m->base, "in_proj_weight", w, true);
    bool ok = m->w >= 0;
    if (ok && !o.no_bias) {
        m->b = tsi_register_slot(&m->base, "in_proj_bias",
                                 ts_zeros(TS_SHAPE(3 * embed_dim), (ts_opts){0}), true);
        ok = m->b >= 0;
    }
    if (ok) {
        m->out_proj = ts_module_add(
            &m->base, "out_proj",
            ts_linear_new_ex(embed_dim, embed_dim, (ts_linear_opts){.no_bias = o.no_bias}));
        ok = m->out_proj && ts_init_xavier_uniform_(w, 1.0);
        ts_tensor *ob = ok && !o.no_bias ? ts_module_get(m->out_proj, "bias") : NULL;
        if (ob) ok = ts_init_zeros_(ob) != NULL;
    }
    ts_scope_end();
    if (!ok) {
        ts_module_free(&m->base);
        return NULL;
    }
    return &m->base;
}

/* A user mask as an additive float mask of dtype dt: bool true -> -inf (not allowed). */
static ts_tensor *float_mask(ts_tensor *mask, ts_dtype dt) {
    if (mask->dtype == TS_BOOL)
        return ts_masked_fill(
            ts_zeros(mask->shape, (ts_opts){.dtype = dt, .device = ts_device_of(mask)}), mask,
            -INFINITY);
    return mask->dtype == dt ? mask : ts_to_dtype(mask, dt);
}

static bool mask_dtype_ok(ts_tensor *mask, const char *what) {
    if (!mask || mask->dtype == TS_BOOL || tsi_is_float(mask->dtype)) return true;
    tsi_error_set(TS_ERR_DTYPE, "%s: only bool and floating types of %s are supported, got %s", OP,
                  what, tsi_desc(mask));
    return false;
}

static bool mha_check(mha_m *m, ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *kpm,
                      ts_tensor *am) {
    if (!tsi_check_input(OP, q, "query") || !tsi_check_input(OP, k, "key") ||
        !tsi_check_input(OP, v, "value"))
        return false;
    ts_tensor *all[5] = {q, k, v, kpm, am};
    ts_device dev;
    if (!tsi_same_device(OP, all, 5, false, &dev)) return false;
    const int nd = q->shape.ndim;
    if ((nd != 2 && nd != 3) || k->shape.ndim != nd || v->shape.ndim != nd)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: query, key and value must all be 3-D (batched) or 2-D "
                             "(unbatched), got query %s, key %s and value %s",
                             OP, tsi_shape_str(q->shape), tsi_shape_str(k->shape),
                             tsi_shape_str(v->shape)),
               false;
    const int64_t E = m->embed_dim;
    if (q->shape.dims[nd - 1] != E || k->shape.dims[nd - 1] != E || v->shape.dims[nd - 1] != E)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: was expecting embedding dimension of %lld for query, key and "
                             "value, but got %s, %s and %s",
                             OP, (long long)E, tsi_shape_str(q->shape), tsi_shape_str(k->shape),
                             tsi_shape_str(v->shape)),
               false;
    if (!tsi_shape_equal(k->shape, v->shape))
        return tsi_error_set(TS_ERR_SHAPE, "%s: key shape %s does not match value shape %s", OP,
                             tsi_shape_str(k->shape), tsi_shape_str(v->shape)),
               false;
    /* batch dim: 0 batch_first, else 1 */
    const int bd = m->batch_first ? 0 : 1;
    if (nd == 3 && q->shape.dims[bd] != k->shape.dims[bd])
        return tsi_error_set(TS_ERR_SHAPE, "%s: query %s and key %s have different batch sizes%s",
                             OP, tsi_shape_str(q->shape), tsi_shape_str(k->shape),
                             m->batch_first ? " (batch_first)" : " (inputs are [L, N, E])"),
               false;
    if (!tsi_is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected query, key and value of one floating dtype, got %s, %s "
                             "and %s",
                             OP, tsi_desc(q), tsi_desc(k), tsi_desc(v)),
               false;
    if (!mask_dtype_ok(kpm, "key_padding_mask") || !mask_dtype_ok(am, "attn_mask")) return false;
    const int64_t N = nd == 3 ? q->shape.dims[bd] : 1;
    const int64_t L = q->shape.dims[nd == 3 && !m->batch_first ? 0 : nd - 2];
    const int64_t S = k->shape.dims[nd == 3 && !m->batch_first ? 0 : nd - 2];
    if (kpm) {
        ts_shape want = nd == 3 ? TS_SHAPE(N, S) : TS_SHAPE(S);
        if (!tsi_shape_equal(kpm->shape, want))
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: expected shape of key_padding_mask to be %s, "
                                 "but got %s",
                                 OP, tsi_shape_str(want), tsi_shape_str(kpm->shape)),
                   false;
    }
    if (am) {
        ts_shape want2 = TS_SHAPE(L, S), want3 = TS_SHAPE(N * m->num_heads, L, S);
        if (am->shape.ndim == 2 && !tsi_shape_equal(am->shape, want2))
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: The shape of the 2D attn_mask is %s, but should be %s.", OP,
                                 tsi_shape_str(am->shape), tsi_shape_str(want2)),
                   false;
        if (am->shape.ndim == 3 && !tsi_shape_equal(am->shape, want3))
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: The shape of the 3D attn_mask is %s, but should be %s.", OP,
                                 tsi_shape_str(am->shape), tsi_shape_str(want3)),
                   false;
        if (am->shape.ndim != 2 && am->shape.ndim != 3)
            return tsi_error_set(TS_ERR_SHAPE, "%s: attn_mask's dimension %d is not supported", OP,
                                 am->shape.ndim),
                   false;
    }
    return true;
}

/* [N, T, E] -> [N, H, T, hd] */
static ts_tensor *heads(ts_tensor *x, int64_t H) {
    if (!x) return NULL; /* the projection failed (error set) */
    const int64_t N = x->shape.dims[0], T = x->shape.dims[1], E = x->shape.dims[2];
    return ts_permute(ts_reshape(x, TS_SHAPE(N, T, H, E / H)), (ts_dims){4, {0, 2, 1, 3}});
}

ts_tensor *ts_multihead_attention(ts_module *mod, ts_tensor *query, ts_tensor *key,
                                  ts_tensor *value, ts_tensor *key_padding_mask,
                                  ts_tensor *attn_mask, bool is_causal, bool need_weights,
                                  ts_tensor **attn_weights_out) {
    tsi_init();
    if (attn_weights_out) *attn_weights_out = NULL;
    if (!mod || mod->forward != mha_forward) {
        if (!ts_error())
            tsi_error_set(TS_ERR_ARG, "%s: expected a MultiheadAttention module, got %s", OP,
                          mod ? mod->type_name : "NULL");
        return NULL;
    }
    mha_m *m = (mha_m *)mod;
    if (!mha_check(m, query, key, value, key_padding_mask, attn_mask)) return NULL;
    const bool batched = query->shape.ndim == 3;
    const bool self_attn = query == key && key == value;
    const int64_t E = m->embed_dim, H = m->num_heads;
    ts_tensor *W = tsi_param_at(mod, m->w), *B = tsi_param_at(mod, m->b);
    const ts_dtype dt = query->dtype;

    ts_scope_begin();
    /* everything below is batch-first [N, T, E] */
    ts_tensor *q = query, *k = key, *v = value, *kpm = key_padding_mask, *am = attn_mask;
    if (!batched) {
        q = ts_unsqueeze(q, 0), k = ts_unsqueeze(k, 0), v = ts_unsqueeze(v, 0);
        if (kpm) kpm = ts_unsqueeze(kpm, 0);
    } else if (!m->batch_first) {
        q = ts_transpose(q, 0, 1), k = self_attn ? q : ts_transpose(k, 0, 1);
        v = self_attn ? q : ts_transpose(v, 0, 1);
    }
    if (!q || !k || !v) { /* a view failed (error set) */
        ts_scope_end();
        return NULL;
    }
    const int64_t N = q->shape.dims[0], L = q->shape.dims[1], S = k->shape.dims[1];
    if (self_attn) { /* one GEMM for the packed projection */
        /* q, k and v are views of it, [N, H, L, hd] with strides (3 L E, hd, 3 E, 1), split off
         * by one node (SplitBackward0) whose backward writes their three gradients into one
         * [N, L, 3 E] buffer in a single pass; three selects each zero-filled a buffer of that
         * size in backward, and the three were added up and then copied (bench/results/
         * transformer.md) */
        ts_tensor *qkv = ts_linear(q, W, B), *part[3] = {NULL, NULL, NULL};
        ts_chunk(ts_reshape(qkv, TS_SHAPE(N, L, 3, H, E / H)), 3, 2, part, 3);
        q = ts_permute(ts_squeeze_dim(part[0], 2), (ts_dims){4, {0, 2, 1, 3}});
        k = ts_permute(ts_squeeze_dim(part[1], 2), (ts_dims){4, {0, 2, 1, 3}});
        v = ts_permute(ts_squeeze_dim(part[2], 2), (ts_dims){4, {0, 2, 1, 3}});
    } else {
        ts_tensor *w3[3] = {NULL, NULL, NULL}, *b3[3] = {NULL, NULL, NULL};
        ts_chunk(W, 3, 0, w3, 3);
        if (B) ts_chunk(B, 3, 0, b3, 3);
        q = heads(ts_linear(q, w3[0], b3[0]), H);
        k = heads(ts_linear(k, w3[1], b3[1]), H);
        v = heads(ts_linear(v, w3[2], b3[2]), H);
    }

    /* masks, merged into one additive float mask as PyTorch's _canonical_mask */
    bool sdpa_causal = false;
    ts_tensor *mask = NULL;
    if (is_causal && !kpm && !need_weights) {
        sdpa_causal = true; /* PyTorch hands the hint to SDPA and drops attn_mask */
    } else {
        if (am) {
            mask = float_mask(am, dt);
            if (am->shape.ndim == 3) mask = ts_view(mask, TS_SHAPE(N, H, L, S));
        } else if (is_causal) {
            ts_device dev = ts_device_of(query);
            ts_tensor *i =
                ts_view(ts_arange(0, (double)L, 1, (ts_opts){.dtype = TS_I64, .device = dev}),
                        TS_SHAPE(L, 1));
            ts_tensor *j = ts_arange(0, (double)S, 1, (ts_opts){.dtype = TS_I64, .device = dev});
            mask = float_mask(ts_gt(j, i), dt);
        }
        if (kpm) {
            ts_tensor *km = ts_view(float_mask(kpm, dt), TS_SHAPE(N, 1, 1, S));
            mask = mask ? ts_add(mask, km) : km;
        }
    }
    const double p = mod->training ? m->dropout : 0.0;
    ts_tensor *o, *weights = NULL;
    if (!need_weights) {
        o = ts_scaled_dot_product_attention(q, k, v, mask, p, sdpa_causal, 0);
    } else {
        ts_tensor *scores =
            ts_matmul(ts_mul_scalar(q, 1.0 / sqrt((double)(E / H))), ts_transpose(k, -2, -1));
        if (mask) scores = ts_add(scores, mask);
        ts_tensor *attn = ts_softmax(scores, -1);
        if (p > 0) attn = ts_dropout(attn, p, true);
        o = ts_matmul(attn, v);
        weights = ts_mean_dim(attn, 1, false); /* [N, L, S] */
        if (!batched) weights = ts_squeeze_dim(weights, 0);
    }
    o = ts_reshape(ts_permute(o, (ts_dims){4, {0, 2, 1, 3}}), TS_SHAPE(N, L, E));
    o = ts_forward(m->out_proj, o);
    if (!batched)
        o = ts_squeeze_dim(o, 0);
    else if (!m->batch_first)
        o = ts_transpose(o, 0, 1);
    if (!o) weights = NULL;
    o = ts_keep(o);
    if (attn_weights_out && weights) *attn_weights_out = ts_keep(weights);
    ts_scope_end();
    return o;
}
