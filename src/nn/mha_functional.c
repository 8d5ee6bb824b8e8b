/* mha_functional.c — ts_multi_head_attention_forward: PyTorch's F.multi_head_attention_forward
 * (sequence-first [L, N, E] or unbatched [L, E]) over differentiable ops: packed or separate
 * in-projection (kdim / vdim), bias_k / bias_v, add_zero_attn, static_k / static_v, bool or
 * float masks, key padding, is_causal, dropout, the attention weights (per head or averaged) or
 * ts_scaled_dot_product_attention when they are not needed. */
#include <math.h>

#include "core/internal.h"

static const char *OP = "multi_head_attention_forward";

/* PyTorch's _canonical_mask: bool true -> -inf (not allowed), a float mask kept (in dt) */
static ts_tensor *canonical_mask(ts_tensor *mask, ts_dtype dt) {
    if (!mask) return NULL;
    if (mask->dtype == TS_BOOL)
        return ts_masked_fill(
            ts_zeros(mask->shape, (ts_opts){.dtype = dt, .device = tsi_device(mask)}), mask,
            -INFINITY);
    return mask->dtype == dt ? mask : ts_to_dtype(mask, dt);
}

static bool shape_is(ts_tensor *t, ts_shape want, const char *name) {
    if (tsi_shape_equal(t->shape, want)) return true;
    tsi_error_set(TS_ERR_SHAPE, "%s: expected %s of shape %s, but got %s", OP, name,
                  tsi_shape_str(want), tsi_shape_str(t->shape));
    return false;
}

/* bias_k / bias_v: [E] with up to two leading 1s ([1, 1, E] as the module keeps it), as PyTorch's
 * bias.repeat(1, bsz, 1) reads them */
static bool bias_kv_ok(ts_tensor *t, int64_t E, const char *name) {
    bool ok = t->shape.ndim >= 1 && t->shape.ndim <= 3 && t->shape.dims[t->shape.ndim - 1] == E;
    for (int i = 0; ok && i < t->shape.ndim - 1; i++) ok = t->shape.dims[i] == 1;
    if (ok) return true;
    tsi_error_set(TS_ERR_SHAPE, "%s: expected %s of shape [1, 1, %lld] (or [%lld]), but got %s", OP,
                  name, (long long)E, (long long)E, tsi_shape_str(t->shape));
    return false;
}

static bool mask_dtype_ok(ts_tensor *mask, const char *name) {
    if (!mask || mask->dtype == TS_BOOL || tsi_is_float(mask->dtype)) return true;
    tsi_error_set(TS_ERR_DTYPE, "%s: only bool and floating types of %s are supported, got %s", OP,
                  name, tsi_desc(mask));
    return false;
}

/* PyTorch's _mha_shape_check and the argument checks of F.multi_head_attention_forward, all
 * before any computation; *batched set.
 * long: one check per argument, each with PyTorch's message */
static bool check_args(ts_tensor *q, ts_tensor *k, ts_tensor *v, const ts_mha_forward_args *a,
                       bool *batched) {
    if (!tsi_check_input(OP, q, "query") || !tsi_check_input(OP, k, "key") ||
        !tsi_check_input(OP, v, "value"))
        return false;
    ts_tensor *all[16] = {q,
                          k,
                          v,
                          a->in_proj_weight,
                          a->in_proj_bias,
                          a->bias_k,
                          a->bias_v,
                          a->out_proj_weight,
                          a->out_proj_bias,
                          a->key_padding_mask,
                          a->attn_mask,
                          a->q_proj_weight,
                          a->k_proj_weight,
                          a->v_proj_weight,
                          a->static_k,
                          a->static_v};
    ts_device dev;
    if (!tsi_same_device(OP, all, 16, false, &dev)) return false;
    const int nd = q->shape.ndim;
    ts_tensor *kpm = a->key_padding_mask, *am = a->attn_mask;
    if (nd != 2 && nd != 3)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: query should be unbatched 2D or batched 3D tensor but received "
                             "%d-D query tensor",
                             OP, nd),
               false;
    *batched = nd == 3;
    if (k->shape.ndim != nd || v->shape.ndim != nd)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: for %s query, expected key and value to be %d-D but found %d-D "
                             "and %d-D tensors respectively",
                             OP, nd == 3 ? "batched (3-D)" : "unbatched (2-D)", nd, k->shape.ndim,
                             v->shape.ndim),
               false;
    if (kpm && kpm->shape.ndim != nd - 1)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: for %s query, expected key_padding_mask to be NULL or %d-D but "
                             "found %d-D tensor instead",
                             OP, nd == 3 ? "batched (3-D)" : "unbatched (2-D)", nd - 1,
                             kpm->shape.ndim),
               false;
    if (am && am->shape.ndim != 2 && am->shape.ndim != 3)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: expected attn_mask to be NULL, 2-D or 3-D but found %d-D tensor "
                             "instead",
                             OP, am->shape.ndim),
               false;
    if (!tsi_is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: expected query, key and value of one floating dtype, got %s, %s "
                             "and %s",
                             OP, tsi_desc(q), tsi_desc(k), tsi_desc(v)),
               false;
    if (!mask_dtype_ok(kpm, "key_padding_mask") || !mask_dtype_ok(am, "attn_mask")) return false;
    const int64_t L = q->shape.dims[0], N = nd == 3 ? q->shape.dims[1] : 1,
                  E = q->shape.dims[nd - 1], S = k->shape.dims[0], H = a->num_heads;
    if (E != a->embed_dim_to_check)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: was expecting embedding dimension of %lld, but got %lld", OP,
                             (long long)a->embed_dim_to_check, (long long)E),
               false;
    if (H <= 0 || E % H)
        return tsi_error_set(TS_ERR_ARG, "%s: embed_dim %lld not divisible by num_heads %lld", OP,
                             (long long)E, (long long)H),
               false;
    const int64_t hd = E / H;
    if (nd == 3 && (k->shape.dims[1] != N || v->shape.dims[1] != N))
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: query %s, key %s and value %s must have one batch size (dim 1)",
                             OP, tsi_shape_str(q->shape), tsi_shape_str(k->shape),
                             tsi_shape_str(v->shape)),
               false;
    if (a->use_separate_proj_weight) {
        if (k->shape.dims[0] != v->shape.dims[0])
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: key's sequence and batch dims %s do not match value's %s", OP,
                                 tsi_shape_str(k->shape), tsi_shape_str(v->shape)),
                   false;
        if (!a->q_proj_weight || !a->k_proj_weight || !a->v_proj_weight)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: use_separate_proj_weight is True but q_proj_weight, "
                                 "k_proj_weight or v_proj_weight is None",
                                 OP),
                   false;
        if (!shape_is(a->q_proj_weight, TS_SHAPE(E, E), "q_proj_weight") ||
            !shape_is(a->k_proj_weight, TS_SHAPE(E, k->shape.dims[nd - 1]), "k_proj_weight") ||
            !shape_is(a->v_proj_weight, TS_SHAPE(E, v->shape.dims[nd - 1]), "v_proj_weight"))
            return false;
    } else {
        if (!tsi_shape_equal(k->shape, v->shape))
            return tsi_error_set(TS_ERR_SHAPE, "%s: key shape %s does not match value shape %s", OP,
                                 tsi_shape_str(k->shape), tsi_shape_str(v->shape)),
                   false;
        if (!a->in_proj_weight)
            return tsi_error_set(TS_ERR_ARG,
                                 "%s: use_separate_proj_weight is False but in_proj_weight is None",
                                 OP),
                   false;
        if (!shape_is(a->in_proj_weight, TS_SHAPE(3 * E, E), "in_proj_weight") ||
            !shape_is(k, nd == 3 ? TS_SHAPE(S, N, E) : TS_SHAPE(S, E), "key"))
            return false;
    }
    if (a->in_proj_bias && !shape_is(a->in_proj_bias, TS_SHAPE(3 * E), "in_proj_bias"))
        return false;
    if (!a->out_proj_weight)
        return tsi_error_set(TS_ERR_ARG, "%s: out_proj_weight is required", OP), false;
    if (!shape_is(a->out_proj_weight, TS_SHAPE(E, E), "out_proj_weight") ||
        (a->out_proj_bias && !shape_is(a->out_proj_bias, TS_SHAPE(E), "out_proj_bias")))
        return false;
    if (!a->bias_k != !a->bias_v)
        return tsi_error_set(TS_ERR_ARG, "%s: bias_k and bias_v must be both set or both None", OP),
               false;
    if (a->bias_k && (a->static_k || a->static_v))
        return tsi_error_set(TS_ERR_ARG, "%s: bias cannot be added to static key or value.", OP),
               false;
    if (a->bias_k && (!bias_kv_ok(a->bias_k, E, "bias_k") || !bias_kv_ok(a->bias_v, E, "bias_v")))
        return false;
    int64_t src = S + (a->bias_k ? 1 : 0);
    ts_tensor *st[2] = {a->static_k, a->static_v};
    for (int i = 0; i < 2; i++) {
        if (!st[i]) continue;
        if (st[i]->shape.ndim != 3 || st[i]->shape.dims[0] != N * H || st[i]->shape.dims[2] != hd)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: expecting %s of shape (%lld, *, %lld), but got %s", OP,
                                 i ? "static_v" : "static_k", (long long)(N * H), (long long)hd,
                                 tsi_shape_str(st[i]->shape)),
                   false;
        if (st[i]->dtype != q->dtype)
            return tsi_error_set(TS_ERR_DTYPE, "%s: %s %s does not have the query's dtype %s", OP,
                                 i ? "static_v" : "static_k", tsi_desc(st[i]),
                                 ts_dtype_name(q->dtype)),
                   false;
    }
    const int64_t klen = a->static_k ? a->static_k->shape.dims[1] : src;
    const int64_t vlen = a->static_v ? a->static_v->shape.dims[1] : src;
    if (klen != vlen)
        return tsi_error_set(TS_ERR_SHAPE, "%s: keys (%lld) and values (%lld) differ in length", OP,
                             (long long)klen, (long long)vlen),
               false;
    if (am) { /* against the key's length, as PyTorch; a static key of another length too */
        ts_shape want = am->shape.ndim == 2 ? TS_SHAPE(L, S) : TS_SHAPE(N * H, L, S);
        if (!tsi_shape_equal(am->shape, want))
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: The shape of the %dD attn_mask is %s, but should be %s.", OP,
                                 am->shape.ndim, tsi_shape_str(am->shape), tsi_shape_str(want)),
                   false;
        if (a->static_k && klen != src)
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: attn_mask covers %lld keys but static_k holds %lld", OP,
                                 (long long)S, (long long)klen),
                   false;
    }
    if (kpm) {
        /* before bias_k's column, as the user's keys */
        const int64_t kl = a->static_k ? klen : S;
        ts_shape want = nd == 3 ? TS_SHAPE(N, kl) : TS_SHAPE(kl);
        if (!tsi_shape_equal(kpm->shape, want))
            return tsi_error_set(TS_ERR_SHAPE,
                                 "%s: expecting key_padding_mask shape of %s, but got %s", OP,
                                 tsi_shape_str(want), tsi_shape_str(kpm->shape)),
                   false;
    }
    if (a->is_causal && !am)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Need attn_mask if specifying the is_causal hint. You may use "
                             "the Transformer module method `generate_square_subsequent_mask` to "
                             "create this mask.",
                             OP),
               false;
    if (!(a->dropout_p >= 0 && a->dropout_p <= 1))
        return tsi_error_set(TS_ERR_ARG, "%s: dropout_p must be in [0, 1], got %g", OP,
                             a->dropout_p),
               false;
    return true;
}

static ts_tensor *pad_last(ts_tensor *t) { /* one zero column appended on the last dim */
    static const int64_t pad[2] = {0, 1};
    return t ? ts_pad(t, pad, 2, TS_PAD_CONSTANT, 0.0) : NULL;
}

ts_tensor *ts_multi_head_attention_forward(ts_tensor *query, ts_tensor *key, ts_tensor *value,
                                           const ts_mha_forward_args *a,
                                           ts_tensor **attn_weights_out) {
    tsi_init();
    if (attn_weights_out) *attn_weights_out = NULL;
    if (!a) return tsi_error_set(TS_ERR_ARG, "%s: args must not be NULL", OP), NULL;
    bool batched;
    if (!check_args(query, key, value, a, &batched)) return NULL;
    const ts_dtype dt = query->dtype;
    const int64_t H = a->num_heads, E = query->shape.dims[query->shape.ndim - 1], hd = E / H;
    ts_scope_begin();
    ts_tensor *q = query, *k = key, *v = value, *kpm = a->key_padding_mask, *am = a->attn_mask;
    if (!batched) {
        q = ts_unsqueeze(q, 1), k = ts_unsqueeze(k, 1), v = ts_unsqueeze(v, 1);
        if (kpm) kpm = ts_unsqueeze(kpm, 0);
    }
    const int64_t L = query->shape.dims[0], N = batched ? query->shape.dims[1] : 1, NH = N * H;
    kpm = canonical_mask(kpm, dt);
    bool causal = a->is_causal;
    if (causal && !kpm && !a->need_weights) {
        am = NULL; /* PyTorch hands the hint to SDPA and drops attn_mask */
    } else {
        am = canonical_mask(am, dt);
        if (kpm) causal = false;
    }
    /* the in-projection */
    ts_tensor *w3[3] = {NULL, NULL, NULL}, *b3[3] = {NULL, NULL, NULL};
    if (a->use_separate_proj_weight) {
        w3[0] = a->q_proj_weight, w3[1] = a->k_proj_weight, w3[2] = a->v_proj_weight;
    } else {
        ts_chunk(a->in_proj_weight, 3, 0, w3, 3);
    }
    bool ok = w3[2] != NULL;
    if (a->in_proj_bias) ok &= ts_chunk(a->in_proj_bias, 3, 0, b3, 3) == 3 && b3[2];
    q = ts_linear(q, w3[0], b3[0]), k = ts_linear(k, w3[1], b3[1]), v = ts_linear(v, w3[2], b3[2]);
    if (am && am->shape.ndim == 2) am = ts_unsqueeze(am, 0);
    if (a->bias_k) {
        const int64_t reps[3] = {1, N, 1};
        const ts_shape bkv = TS_SHAPE(1, 1, a->bias_k->shape.dims[a->bias_k->shape.ndim - 1]);
        ts_tensor *kk[2] = {k, ts_repeat(ts_reshape(a->bias_k, bkv), reps, 3)},
                  *vv[2] = {v, ts_repeat(ts_reshape(a->bias_v, bkv), reps, 3)};
        k = ts_cat(kk, 2, 0), v = ts_cat(vv, 2, 0);
        if (am) am = pad_last(am);
        if (kpm) kpm = pad_last(kpm);
    }
    /* [T, N, E] -> [N H, T, hd] */
    q = q ? ts_transpose(ts_reshape(q, TS_SHAPE(L, NH, hd)), 0, 1) : NULL;
    if (a->static_k)
        k = a->static_k;
    else
        k = k ? ts_transpose(ts_reshape(k, TS_SHAPE(k->shape.dims[0], NH, hd)), 0, 1) : NULL;
    if (a->static_v)
        v = a->static_v;
    else
        v = v ? ts_transpose(ts_reshape(v, TS_SHAPE(v->shape.dims[0], NH, hd)), 0, 1) : NULL;
    if (a->add_zero_attn && k && v) {
        ts_tensor *z =
            ts_zeros(TS_SHAPE(NH, 1, hd), (ts_opts){.dtype = dt, .device = tsi_device(query)});
        ts_tensor *kk[2] = {k, z}, *vv[2] = {v, z};
        k = ts_cat(kk, 2, 1), v = ts_cat(vv, 2, 1);
        if (am) am = pad_last(am);
        if (kpm) kpm = pad_last(kpm);
    }
    ts_tensor *out = NULL, *weights = NULL;
    /* a mask that was given and is gone: a step failed (error set), never a run without it */
    const bool need_am =
        a->attn_mask && !(a->is_causal && !a->key_padding_mask && !a->need_weights);
    ok &= (!need_am || am) && (!a->key_padding_mask || kpm);
    if (ok && q && k && v) {
        const int64_t S = k->shape.dims[1];
        if (kpm) {
            kpm = ts_reshape(ts_expand(ts_reshape(kpm, TS_SHAPE(N, 1, 1, S)), TS_SHAPE(N, H, 1, S)),
                             TS_SHAPE(NH, 1, S));
            am = am ? ts_add(am, kpm) : kpm;
        }
        if ((need_am || kpm) && !am) goto done; /* the merge failed (error set) */
        const double p = a->training ? a->dropout_p : 0.0;
        if (a->need_weights) {
            ts_tensor *scores =
                ts_bmm(ts_mul_scalar(q, sqrt(1.0 / (double)hd)), ts_transpose(k, -2, -1));
            if (am) scores = ts_add(am, scores);
            ts_tensor *w = ts_softmax(scores, -1);
            if (p > 0) w = ts_dropout(w, p, true);
            out = ts_reshape(ts_transpose(ts_bmm(w, v), 0, 1), TS_SHAPE(L * N, E));
            weights = ts_reshape(w, TS_SHAPE(N, H, L, S));
            if (a->average_attn_weights) weights = ts_mean_dim(weights, 1, false);
            if (!batched) weights = ts_squeeze_dim(weights, 0);
        } else {
            if (am)
                am = am->shape.dims[0] == 1 ? ts_unsqueeze(am, 0)
                                            : ts_reshape(am, TS_SHAPE(N, H, am->shape.dims[1], S));
            ts_tensor *o = ts_scaled_dot_product_attention(
                ts_reshape(q, TS_SHAPE(N, H, L, hd)), ts_reshape(k, TS_SHAPE(N, H, S, hd)),
                ts_reshape(v, TS_SHAPE(N, H, S, hd)), am, p, causal, 0);
            out = ts_reshape(ts_permute(o, (ts_dims){4, {2, 0, 1, 3}}), TS_SHAPE(L * N, E));
        }
        out = ts_reshape(ts_linear(out, a->out_proj_weight, a->out_proj_bias), TS_SHAPE(L, N, E));
        if (!batched) out = ts_squeeze_dim(out, 1);
    }
done:
    if (!out) weights = NULL;
    out = out ? ts_keep(out) : NULL;
    if (attn_weights_out && weights) *attn_weights_out = ts_keep(weights);
    ts_scope_end();
    return out;
}
