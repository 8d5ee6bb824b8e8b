/* tessera/transformer.h — nn.TransformerDecoderLayer (src/nn/transformer_decoder.c), next to the
 * encoder layer and MultiheadAttention of tessera/nn.h (docs/TRANSFORMER.md). */
#ifndef TESSERA_TRANSFORMER_H
#define TESSERA_TRANSFORMER_H

#include "tessera.h"

/* nn.TransformerDecoderLayer(d_model, nhead, ...) with the encoder layer's options (tessera/nn.h:
 * ts_transformer_opts; zero is PyTorch's default except dropout). Children in PyTorch's order and
 * names, so a PyTorch state dict loads: self_attn and multihead_attn (MultiheadAttention),
 * linear1, dropout, linear2, norm1, norm2, norm3, dropout1, dropout2, dropout3. NULL with
 * TS_ERR_ARG naming "TransformerDecoderLayer" for a bad size or option. */
TS_API ts_module *ts_transformer_decoder_layer_new(int64_t d_model, int64_t nhead,
                                                   ts_transformer_opts o);

/* The masks of TransformerDecoderLayer.forward, each NULL for none, as ts_multihead_attention's:
 * bool (true = may NOT attend) or float (added to the scores). tgt_mask [L, L] or
 * [N * nhead, L, L]; memory_mask [L, S] or [N * nhead, L, S]; the key padding masks [N, L] and
 * [N, S] ([L] / [S] unbatched). The is_causal flags are hints that the matching mask is causal
 * (PyTorch's tgt_is_causal / memory_is_causal): with a NULL mask they apply the causal mask. */
typedef struct ts_decoder_masks {
    ts_tensor *tgt_mask, *memory_mask;
    ts_tensor *tgt_key_padding_mask, *memory_key_padding_mask;
    bool tgt_is_causal, memory_is_causal;
} ts_decoder_masks;

/* TransformerDecoderLayer.forward(tgt, memory, masks): tgt [L, N, E] and memory [S, N, E]
 * ([N, L, E] / [N, S, E] batch_first; [L, E] / [S, E] unbatched) -> [L, N, E] like tgt.
 * Post-norm: x = norm1(x + sa(x)); x = norm2(x + mha(x, memory)); x = norm3(x + ff(x));
 * norm_first: x = x + sa(norm1(x)); x = x + mha(norm2(x), memory); x = x + ff(norm3(x)).
 * masks may be NULL (no masks). The layer's forward hooks run around it. ts_forward(layer, x)
 * fails (TS_ERR_ARG): the layer needs memory. */
TS_API ts_tensor *ts_transformer_decoder_layer(ts_module *layer, ts_tensor *tgt, ts_tensor *memory,
                                               const ts_decoder_masks *masks);

#endif /* TESSERA_TRANSFORMER_H */
