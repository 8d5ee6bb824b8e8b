/* gpt_internal.h — what gpt.c and gpt_weight_only.c share: a GPT's weight-only quantized
 * linears (ts_gpt_quantize_weight_only). */
#ifndef TS_MODELS_GPT_INTERNAL_H
#define TS_MODELS_GPT_INTERNAL_H

#include "tessera.h"

typedef struct tsi_gpt_wo tsi_gpt_wo;

/* The quantized copies of every block's linears (the attention's in_proj / out_proj, linear1,
 * linear2) and of the tied head (tok_w); NULL with the error set */
tsi_gpt_wo *tsi_gpt_wo_make(ts_module *blocks, ts_tensor *tok_w, int64_t n_layer,
                            const ts_gpt_quant_opts *o);
void tsi_gpt_wo_free(tsi_gpt_wo *wo); /* NULL-safe */
/* Block i (an eval-mode, causal, pre-norm TransformerEncoderLayer blk) with its linears through
 * ts_weight_only_linear: x + SA(norm1(x)), then h + FF(norm2(h)); dropout is not applied */
ts_tensor *tsi_gpt_wo_block(tsi_gpt_wo *wo, int64_t i, ts_module *blk, ts_tensor *x,
                            int64_t n_head);
ts_tensor *tsi_gpt_wo_head(tsi_gpt_wo *wo, ts_tensor *x);

#endif /* TS_MODELS_GPT_INTERNAL_H */
