"""tessera.nn.functional.scaled_dot_product_attention (one C call, enable_gqa included) and
multi_head_attention_forward (ts_multi_head_attention_forward, src/nn/mha_functional.c), each
one C call.

MultiheadAttention runs the C module (src/nn/mha.c) when it can; this form serves what the C
module lacks (add_bias_kv, add_zero_attn, kdim/vdim, per-head weights) and the functional API."""
from .. import _C

Tensor = _C.Tensor


def _sdpa_c(q, k, v, attn_mask, dropout_p, is_causal, scale):
    return _C._nn_sdpa(q, k, v, attn_mask, float(dropout_p), bool(is_causal),
                       0.0 if scale is None else float(scale))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """F.scaled_dot_product_attention (ts_scaled_dot_product_attention_ex: enable_gqa's grouped
    key / value heads included)"""
    return _C._nn_sdpa(query, key, value, attn_mask, float(dropout_p), bool(is_causal),
                       0.0 if scale is None else float(scale), bool(enable_gqa))


def _canonical_mask(mask, name, target_type):
    """PyTorch's F._canonical_mask: a bool mask -> 0 / -inf in the query's dtype; a float mask
    is kept; other dtypes raise"""
    if mask is None:
        return None
    if mask.dtype == _C.bool:
        return _C.zeros_like(mask, dtype=target_type).masked_fill(mask, float("-inf"))
    if not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """PyTorch's F.multi_head_attention_forward: sequence-first [L, N, E] (or unbatched [L, E])
    inputs -> (attn_output, attn_weights or None), one C call (ts_multi_head_attention_forward)"""
    return _C._nn_mha_forward(query, key, value, int(embed_dim_to_check), int(num_heads),
                              in_proj_weight, in_proj_bias, bias_k, bias_v, bool(add_zero_attn),
                              float(dropout_p), out_proj_weight, out_proj_bias, bool(training),
                              key_padding_mask, bool(need_weights), attn_mask,
                              bool(use_separate_proj_weight), q_proj_weight, k_proj_weight,
                              v_proj_weight, static_k, static_v, bool(average_attn_weights),
                              bool(is_causal))
