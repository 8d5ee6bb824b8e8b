/* attention.c — scaled_dot_product_attention with PyTorch's semantics: the fused kernels of the
 * device's backend (sdpa_forward / sdpa_backward: flash attention, no L x S matrix in memory)
 * where they take the dtype and shapes, else the reference composition (matmul, mask, softmax,
 * dropout, matmul), which the tests compare the fused kernels with. */
#include <math.h>

#include "amp/autocast.h"
#include "autograd/trace.h"
#include "nn/functional_internal.h"

static const char *OP = "scaled_dot_product_attention";

static bool sdpa_check(ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *mask, double p,
                       bool is_causal, double scale) {
    if (!tsi_check_input(OP, q, "query") || !tsi_check_input(OP, k, "key") ||
        !tsi_check_input(OP, v, "value"))
        return false;
    ts_tensor *all[4] = {q, k, v, mask};
    ts_device dev;
    if (!tsi_same_device(OP, all, mask ? 4 : 3, false, &dev)) return false;
    if (q->shape.ndim < 2 || k->shape.ndim < 2 || v->shape.ndim < 2)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: query, key and value must have at least 2 dims [..., L, E], got "
                             "%s, %s and %s",
                             OP, tsi_shape_str(q->shape), tsi_shape_str(k->shape),
                             tsi_shape_str(v->shape)),
               false;
    if (!tsi_is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: Expected query, key, and value to have the same floating dtype, "
                             "but got query.dtype: %s, key.dtype: %s and value.dtype: %s",
                             OP, ts_dtype_name(q->dtype), ts_dtype_name(k->dtype),
                             ts_dtype_name(v->dtype)),
               false;
    const int nq = q->shape.ndim, nk = k->shape.ndim, nv = v->shape.ndim;
    if (q->shape.dims[nq - 1] != k->shape.dims[nk - 1] ||
        k->shape.dims[nk - 2] != v->shape.dims[nv - 2])
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s: query %s, key %s and value %s do not fit (expected query "
                             "[..., L, E], key [..., S, E], value [..., S, Ev])",
                             OP, tsi_shape_str(q->shape), tsi_shape_str(k->shape),
                             tsi_shape_str(v->shape)),
               false;
    if (mask && is_causal)
        return tsi_error_set(TS_ERR_ARG,
                             "%s: Explicit attn_mask should not be set when is_causal=True", OP),
               false;
    if (mask && mask->dtype != TS_BOOL && mask->dtype != q->dtype)
        return tsi_error_set(TS_ERR_DTYPE,
                             "%s: Expected attn_mask dtype to be bool or to match query dtype, "
                             "but got attn_mask.dtype: %s and query.dtype: %s",
                             OP, ts_dtype_name(mask->dtype), ts_dtype_name(q->dtype)),
               false;
    if (!(p >= 0 && p <= 1))
        return tsi_error_set(TS_ERR_ARG, "%s: dropout_p must be in [0, 1], got %g", OP, p), false;
    if (!(scale >= 0) || isinf(scale))
        return tsi_error_set(TS_ERR_ARG, "%s: scale must be finite and > 0 (0: 1/sqrt(E)), got %g",
                             OP, scale),
               false;
    return true;
}

/* The causal mask: query i sees keys j <= i (top-left aligned, PyTorch's tril). */
static ts_tensor *causal_mask(int64_t L, int64_t S, ts_device dev) {
    ts_tensor *i = ts_view(ts_arange(0, (double)L, 1, (ts_opts){.dtype = TS_I64, .device = dev}),
                           TS_SHAPE(L, 1));
    ts_tensor *j = ts_arange(0, (double)S, 1, (ts_opts){.dtype = TS_I64, .device = dev});
    return ts_le(j, i);
}

ts_tensor *tsi_sdpa_probs(ts_tensor *q, ts_tensor *k, ts_tensor *mask, bool is_causal,
                          double scale) {
    const int64_t L = q->shape.dims[q->shape.ndim - 2], E = q->shape.dims[q->shape.ndim - 1];
    const int64_t S = k->shape.dims[k->shape.ndim - 2];
    const double s = scale > 0 ? scale : 1.0 / sqrt((double)E);
    ts_tensor *scores = ts_mul_scalar(ts_matmul(q, ts_transpose(k, -2, -1)), s);
    if (is_causal) mask = causal_mask(L, S, tsi_device(q));
    ts_tensor *attn;
    if (mask) {
        if (mask->dtype == TS_BOOL)
            scores = ts_masked_fill(scores, ts_logical_not(mask), -INFINITY);
        else
            scores = ts_add(scores, mask);
        /* PyTorch's _safe_softmax: a row whose every score is masked attends to nothing (0, and
         * no gradient), instead of NaN; its scores are zeroed first so backward stays finite */
        ts_tensor *dead = ts_eq_scalar(ts_amax_dim(scores, -1, true), -INFINITY);
        attn = ts_masked_fill(ts_softmax(ts_masked_fill(scores, dead, 0), -1), dead, 0);
    } else {
        attn = ts_softmax(scores, -1);
    }
    return attn;
}

ts_tensor *tsi_sdpa_reference(ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *mask,
                              double dropout_p, bool is_causal, double scale) {
    ts_scope_begin();
    ts_tensor *attn = tsi_sdpa_probs(q, k, mask, is_causal, scale);
    if (dropout_p > 0) attn = ts_dropout(attn, dropout_p, true);
    ts_tensor *out = ts_matmul(attn, v);
    out = ts_keep(out);
    ts_scope_end();
    return out;
}

static ts_tensor *sdpa_op(ts_tensor *q, ts_tensor *k, ts_tensor *v, ts_tensor *mask,
                          double dropout_p, bool is_causal, double scale) {
    tsi_init();
    if (!sdpa_check(q, k, v, mask, dropout_p, is_causal, scale)) return NULL;
    if (tsi_sdpa_fused_applies(q, k, v, mask, dropout_p))
        return tsi_sdpa_fused(q, k, v, mask, dropout_p, is_causal, scale);
    return tsi_sdpa_reference(q, k, v, mask, dropout_p, is_causal, scale);
}

ts_tensor *ts_scaled_dot_product_attention(ts_tensor *q, ts_tensor *k, ts_tensor *v,
                                           ts_tensor *attn_mask, double dropout_p, bool is_causal,
                                           double scale) {
    ts_tensor *const ins[4] = {q, k, v, attn_mask};
    tsi_ac_frame ac; /* autocast: lower precision, as PyTorch's policy for SDPA */
    TSI_AUTOCAST_ENTER(&ac, OP, &q, &k, &v, &attn_mask);
    ts_tensor *y = tsi_autocast_exit(&ac, sdpa_op(q, k, v, attn_mask, dropout_p, is_causal, scale));
    return tsi_trace(OP, ins, 4, y, (int64_t[]){is_causal}, 1, (double[]){scale, dropout_p}, 2);
}

/* enable_gqa: key and value with fewer heads (dim -3) than the query, each head repeated
 * (repeat_interleave) for its group of query heads, as PyTorch's math path */
ts_tensor *ts_scaled_dot_product_attention_ex(ts_tensor *q, ts_tensor *k, ts_tensor *v,
                                              ts_tensor *attn_mask, double dropout_p,
                                              bool is_causal, double scale, bool enable_gqa) {
    tsi_init();
    if (!enable_gqa || !q || !k || !v || q->shape.ndim < 3 || k->shape.ndim < 3 ||
        v->shape.ndim < 3)
        return ts_scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale);
    const int64_t hq = q->shape.dims[q->shape.ndim - 3], hk = k->shape.dims[k->shape.ndim - 3],
                  hv = v->shape.dims[v->shape.ndim - 3];
    if (hk == hq && hv == hq)
        return ts_scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale);
    if (hk == 0 || hv == 0 || hq % hk || hq % hv)
        return tsi_error_set(TS_ERR_SHAPE,
                             "%s(enable_gqa=True): the query's heads (%lld) must be a multiple of "
                             "the key's (%lld) and value's (%lld)",
                             OP, (long long)hq, (long long)hk, (long long)hv),
               NULL;
    ts_scope_begin();
    ts_tensor *k2 = hk == hq ? k : ts_repeat_interleave(k, hq / hk, true, -3);
    ts_tensor *v2 = hv == hq ? v : ts_repeat_interleave(v, hq / hv, true, -3);
    ts_tensor *y =
        ts_scaled_dot_product_attention(q, k2, v2, attn_mask, dropout_p, is_causal, scale);
    y = ts_error() == TS_OK && y ? ts_keep(y) : NULL;
    ts_scope_end();
    return y;
}
