/* tessera/gpt2.h — Hugging Face GPT-2 inference with a key/value cache (src/models/gpt2.c,
 * docs/QUANTIZATION.md, bench/results/gpt2-decode.md; included by tessera.h).
 *
 * A GPT-2 (transformers' GPT2LMHeadModel) read from a Hugging Face folder: config.json (n_layer,
 * n_head, n_embd, n_positions, vocab_size, layer_norm_epsilon, n_inner, activation_function
 * gelu_new / gelu_pytorch_tanh) and model.safetensors (float32; names with or without
 * "transformer."; Conv1D weights [in, out]; the head tied to wte). Decoding runs one token at a
 * time over the cache (every matmul has M = 1), float32 (ts_linear) or weight-only quantized
 * (ts_weight_only_linear) linears. cpu only. Errors name the function and the argument. */
#ifndef TESSERA_GPT2_H
#define TESSERA_GPT2_H

typedef struct ts_gpt2 ts_gpt2;

typedef struct ts_gpt2_config {
    int64_t n_layer, n_head, n_embd, n_inner, n_ctx, vocab;
    double eps;
} ts_gpt2_config;

/* Loads DIR/config.json and DIR/model.safetensors (float32 weights, checked against the config:
 * TS_ERR_FORMAT naming the file and the tensor). NULL with the error set. */
TS_API ts_gpt2 *ts_gpt2_load(const char *dir);
TS_API void ts_gpt2_free(ts_gpt2 *m);
TS_API ts_gpt2_config ts_gpt2_get_config(const ts_gpt2 *m);
/* Weight-only quantization of the four linears of each block (attn.c_attn, attn.c_proj, mlp.c_fc,
 * mlp.c_proj) and of the tied head: o.bits 8 (ts_quantize_int8_weight_only, per row) or 4
 * (ts_quantize_int4_weight_only, o.group_size 32, 64, 128 or 256; 0: 32, q4_0's block). The float
 * copies of those weights are dropped (wte stays for the embedding lookup). on_layer as
 * ts_gpt_quantize_weight_only's. o.act_bits 8: the linears run ts_int8_dynamic_activation_linear
 * (torchao's 8da8w / 8da4w; int4 weights symmetric, ts_quantize_int4_symmetric_weight); 0:
 * weight-only (ts_weight_only_linear). Again on a quantized model: TS_ERR_STATE. */
TS_API ts_status ts_gpt2_quantize(ts_gpt2 *m, ts_gpt_quant_opts o);
/* Empties the key/value cache (the next token is at position 0). */
TS_API void ts_gpt2_reset(ts_gpt2 *m);
/* The next position of the cache (tokens fed since the last reset). */
TS_API int64_t ts_gpt2_position(const ts_gpt2 *m);
/* Feeds one token id at the next position (0 <= id < vocab; the position below n_ctx) and writes
 * its logits (vocab floats) to logits unless NULL; *next (unless NULL): the argmax (the first
 * largest). */
TS_API ts_status ts_gpt2_step(ts_gpt2 *m, int64_t id, float *logits, int64_t *next);
/* Greedy decoding: resets the cache, feeds the n >= 1 prompt ids, then writes new_tokens >= 0
 * argmax ids to out (each fed back but the last). n + new_tokens - 1 <= n_ctx. prompt_s /
 * decode_s (unless NULL): seconds of the prompt (its n steps, which give the first new token) and
 * of the decode (the new_tokens - 1 steps that follow, one token each). */
TS_API ts_status ts_gpt2_generate_greedy(ts_gpt2 *m, const int64_t *ids, int64_t n,
                                         int64_t new_tokens, int64_t *out, double *prompt_s,
                                         double *decode_s);

#endif
