"""The transformers architectures of test_transformers_arches.py (issue 75): each a small random
configuration of the library's own *Config (2 layers, width 32, vocabulary 96, images 16x16),
weights set by a formula (sin(0.37 k + 1.3 i) * 0.2 for the i-th parameter in name order, 1-d
`*weight`s + 1: the same in every framework, no files, no hub), in eval mode; the forward with
the model's own loss (labels), loss.backward(), and for the decoders greedy and beam (2) generate
of 6 tokens for both prompts (the second left-padded by 2).

    python -m tessera.compat hf_arches.py float32 [ARCH...]    # Tessera: prints RESULT {json}
    /opt/torch2/bin/torch-python hf_arches.py --reference ../data/hf_arches_reference.json
        # PyTorch + transformers: the float64 and float32 runs the test judges against
"""
import json
import sys

import torch
import transformers as T
from transformers.utils import logging

logging.set_verbosity_error()

V = 96
TXT = dict(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
           intermediate_size=64, max_position_embeddings=32)
DEC = dict(TXT, num_key_value_heads=2, pad_token_id=0, bos_token_id=1, eos_token_id=2)
IMG = dict(image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
           num_attention_heads=4, intermediate_size=64, num_labels=5)
S2S = dict(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2,
           encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
           decoder_ffn_dim=64, max_position_embeddings=32, pad_token_id=0, bos_token_id=1,
           eos_token_id=2, decoder_start_token_id=1, forced_eos_token_id=None)

def eager_experts(m):
    """PyTorch's grouped_mm has no float64: the experts as a loop of matmuls in both runs"""
    m.config._experts_implementation = "eager"
    return m


# eager attention gives NaN on a fully masked (left-padded) query row: these run unpadded
UNPADDED = ("gemma2", "bloom", "mpt")

# name: (kind, builder)   kind: clm = causal LM (+ generate), mlm, s2s (+ generate), img, clip,
# whisper (+ generate), ctc, detr
ARCH = {
    "gpt2": ("clm", lambda: T.GPT2LMHeadModel(T.GPT2Config(n_layer=2, n_embd=32, n_head=4,
                                                           vocab_size=V, n_positions=32))),
    "bert": ("mlm", lambda: T.BertForMaskedLM(T.BertConfig(**TXT))),
    "roberta": ("mlm", lambda: T.RobertaForMaskedLM(T.RobertaConfig(**dict(
        TXT, max_position_embeddings=40)))),
    "distilbert": ("mlm", lambda: T.DistilBertForMaskedLM(T.DistilBertConfig(
        vocab_size=V, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=32))),
    "albert": ("mlm", lambda: T.AlbertForMaskedLM(T.AlbertConfig(**dict(TXT, embedding_size=16)))),
    "electra": ("mlm", lambda: T.ElectraForMaskedLM(T.ElectraConfig(**dict(TXT,
                                                                          embedding_size=16)))),
    "t5": ("s2s", lambda: T.T5ForConditionalGeneration(T.T5Config(
        vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
        relative_attention_num_buckets=8, pad_token_id=0, eos_token_id=2,
        decoder_start_token_id=0))),
    "bart": ("s2s", lambda: T.BartForConditionalGeneration(T.BartConfig(**S2S))),
    "llama": ("clm", lambda: T.LlamaForCausalLM(T.LlamaConfig(**DEC))),
    "mistral": ("clm", lambda: T.MistralForCausalLM(T.MistralConfig(**dict(DEC,
                                                                          sliding_window=4)))),
    "qwen2": ("clm", lambda: T.Qwen2ForCausalLM(T.Qwen2Config(**DEC))),
    "phi": ("clm", lambda: T.PhiForCausalLM(T.PhiConfig(**dict(DEC,
                                                               partial_rotary_factor=0.5)))),
    "gemma": ("clm", lambda: T.GemmaForCausalLM(T.GemmaConfig(**dict(DEC, head_dim=8,
                                                                     num_key_value_heads=1)))),
    "gpt_neox": ("clm", lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(**dict(
        TXT, rotary_pct=0.5, pad_token_id=0, bos_token_id=1, eos_token_id=2)))),
    "opt": ("clm", lambda: T.OPTForCausalLM(T.OPTConfig(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=4,
        max_position_embeddings=32, word_embed_proj_dim=32, pad_token_id=0, bos_token_id=1,
        eos_token_id=2))),
    "falcon": ("clm", lambda: T.FalconForCausalLM(T.FalconConfig(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        pad_token_id=0, bos_token_id=1, eos_token_id=2))),
    "vit": ("img", lambda: T.ViTForImageClassification(T.ViTConfig(**IMG))),
    "deit": ("img", lambda: T.DeiTForImageClassification(T.DeiTConfig(**IMG))),
    "swin": ("img", lambda: T.SwinForImageClassification(T.SwinConfig(
        image_size=16, patch_size=2, num_channels=3, embed_dim=16, depths=[1, 1],
        num_heads=[2, 2], window_size=4, num_labels=5))),
    "convnext": ("img", lambda: T.ConvNextForImageClassification(T.ConvNextConfig(
        num_channels=3, num_stages=2, hidden_sizes=[8, 16], depths=[1, 1], patch_size=4,
        image_size=16, num_labels=5))),
    "clip": ("clip", lambda: T.CLIPModel(T.CLIPConfig(
        text_config=dict(TXT, eos_token_id=2), projection_dim=16,
        vision_config=dict(image_size=16, patch_size=4, hidden_size=32, intermediate_size=64,
                           num_hidden_layers=2, num_attention_heads=4)))),
    "whisper": ("whisper", lambda: T.WhisperForConditionalGeneration(T.WhisperConfig(
        **dict(S2S, num_mel_bins=8, max_source_positions=16, max_target_positions=32,
               suppress_tokens=[], begin_suppress_tokens=[])))),
    "wav2vec2": ("ctc", lambda: T.Wav2Vec2ForCTC(T.Wav2Vec2Config(
        vocab_size=12, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
        num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=4, pad_token_id=0,
        mask_time_prob=0.0, ctc_loss_reduction="mean"))),
    "detr": ("detr", lambda: T.DetrForObjectDetection(T.DetrConfig(
        use_timm_backbone=False, use_pretrained_backbone=False,
        backbone_config=T.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16, 16, 16],
                                       depths=[1, 1, 1, 1], out_features=["stage4"]),
        d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=5,
        num_labels=4))),
    "mixtral": ("clm", lambda: eager_experts(T.MixtralForCausalLM(T.MixtralConfig(**dict(
        DEC, num_local_experts=4, num_experts_per_tok=2))))),
    "qwen3": ("clm", lambda: T.Qwen3ForCausalLM(T.Qwen3Config(**dict(DEC, head_dim=8)))),
    "gemma2": ("clm", lambda: T.Gemma2ForCausalLM(T.Gemma2Config(**dict(
        DEC, head_dim=8, sliding_window=4)))),
    "phi3": ("clm", lambda: T.Phi3ForCausalLM(T.Phi3Config(**DEC))),
    "bloom": ("clm", lambda: T.BloomForCausalLM(T.BloomConfig(
        vocab_size=V, hidden_size=32, n_layer=2, n_head=4, pad_token_id=0, bos_token_id=1,
        eos_token_id=2))),
    "gptj": ("clm", lambda: T.GPTJForCausalLM(T.GPTJConfig(
        vocab_size=V, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=32,
        pad_token_id=0, bos_token_id=1, eos_token_id=2))),
    "gpt_bigcode": ("clm", lambda: T.GPTBigCodeForCausalLM(T.GPTBigCodeConfig(
        vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=32, pad_token_id=0,
        bos_token_id=1, eos_token_id=2))),
    "stablelm": ("clm", lambda: T.StableLmForCausalLM(T.StableLmConfig(**DEC))),
    "starcoder2": ("clm", lambda: T.Starcoder2ForCausalLM(T.Starcoder2Config(**DEC))),
    "olmo": ("clm", lambda: T.OlmoForCausalLM(T.OlmoConfig(**DEC))),
    "codegen": ("clm", lambda: T.CodeGenForCausalLM(T.CodeGenConfig(
        vocab_size=V, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=32,
        n_ctx=32, pad_token_id=0, bos_token_id=1, eos_token_id=2))),
    "mpt": ("clm", lambda: T.MptForCausalLM(T.MptConfig(
        vocab_size=V, d_model=32, n_layers=2, n_heads=4, max_seq_len=32, pad_token_id=0,
        bos_token_id=1, eos_token_id=2))),
    "qwen2_moe": ("clm", lambda: eager_experts(T.Qwen2MoeForCausalLM(T.Qwen2MoeConfig(**dict(
        DEC, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
        shared_expert_intermediate_size=32))))),
    "deberta_v2": ("mlm", lambda: T.DebertaV2ForMaskedLM(T.DebertaV2Config(**dict(
        TXT, relative_attention=True, position_buckets=8, pos_att_type=["p2c", "c2p"])))),
    "mobilebert": ("mlm", lambda: T.MobileBertForMaskedLM(T.MobileBertConfig(**dict(
        TXT, embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16,
        num_feedforward_networks=2)))),
    "marian": ("s2s", lambda: T.MarianMTModel(T.MarianConfig(**S2S))),
    "pegasus": ("s2s", lambda: T.PegasusForConditionalGeneration(T.PegasusConfig(**S2S))),
    "mt5": ("s2s", lambda: T.MT5ForConditionalGeneration(T.MT5Config(
        vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
        relative_attention_num_buckets=8, pad_token_id=0, eos_token_id=2,
        decoder_start_token_id=0))),
    "resnet": ("img", lambda: T.ResNetForImageClassification(T.ResNetConfig(
        embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=5))),
    "dinov2": ("img", lambda: T.Dinov2ForImageClassification(T.Dinov2Config(**IMG))),
    "beit": ("img", lambda: T.BeitForImageClassification(T.BeitConfig(**dict(
        IMG, use_relative_position_bias=True)))),
    "segformer": ("img", lambda: T.SegformerForImageClassification(T.SegformerConfig(
        num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
        hidden_sizes=[8, 16], patch_sizes=[3, 3], strides=[2, 2], num_attention_heads=[1, 2],
        mlp_ratios=[2, 2], num_labels=5))),
}


def fill(m, dtype):
    m.to(dtype)
    with torch.no_grad():
        for i, (name, p) in enumerate(sorted(m.named_parameters())):
            w = torch.sin(torch.arange(p.numel(), dtype=torch.float64) * 0.37 + 1.3 * i) * 0.2
            if name.endswith("weight") and p.dim() == 1:
                w = w + 1.0
            p.copy_(w.reshape(p.shape).to(dtype))


def wave(shape, dtype, k=0.11):
    n = 1
    for s in shape:
        n *= s
    return torch.sin(torch.arange(n, dtype=torch.float64) * k + 0.5).reshape(shape).to(dtype)


def sample(t):
    f = t.detach().double().reshape(-1)
    n = f.numel()
    return {"vals": [f[(j * 7919) % n].item() for j in range(12)],
            "abs_sum": f.abs().sum().item()}


def run(arch, dtype):
    kind, build = ARCH[arch]
    m = build()
    fill(m, dtype)
    m.train(False)
    ids = torch.tensor([[(i * 37 + 11 * b) % V for i in range(10)] for b in range(2)])
    ids[:, -1] = 2 if kind == "clip" else ids[:, -1]
    mask = torch.ones(2, 10, dtype=torch.long)
    if arch not in UNPADDED:
        mask[1, :2] = 0
    gen_in = None
    if kind in ("clm", "mlm"):
        out = m(input_ids=ids, attention_mask=mask, labels=ids)
        if kind == "clm":
            gen_in = dict(input_ids=ids[:, :6], attention_mask=mask[:, :6])
    elif kind == "s2s":
        out = m(input_ids=ids, attention_mask=mask, labels=ids.flip(1)[:, :7].contiguous())
        gen_in = dict(input_ids=ids, attention_mask=mask)
    elif kind == "img":
        out = m(pixel_values=wave((2, 3, 16, 16), dtype), labels=torch.tensor([1, 3]))
    elif kind == "clip":
        out = m(input_ids=ids, attention_mask=mask, pixel_values=wave((2, 3, 16, 16), dtype),
                return_loss=True)
    elif kind == "whisper":
        feats = wave((2, 8, 32), dtype)
        out = m(input_features=feats, labels=ids[:, 1:8])
        gen_in = dict(input_features=feats)
    elif kind == "ctc":
        out = m(input_values=wave((2, 400), dtype, 0.23),
                labels=torch.tensor([[3, 5, 7, 5, 1], [2, 9, 9, 4, -100]]))
    else:  # detr: the matcher needs scipy; a fixed function of both heads stands for the loss
        out = m(pixel_values=wave((2, 3, 32, 32), dtype))
        out.loss = out.logits.pow(2).mean() + out.pred_boxes.sum()
    out.loss.backward()
    res = {"loss": out.loss.item(), "attn": getattr(m.config, "_attn_implementation", None),
           "outputs": {k: sample(getattr(out, k)) for k in
                       ("logits", "logits_per_image", "pred_boxes")
                       if getattr(out, k, None) is not None},
           "grad_sumsq": {n: p.grad.double().pow(2).sum().item()
                          for n, p in sorted(m.named_parameters()) if p.grad is not None}}
    if gen_in is not None:
        for beams in (1, 2):
            with torch.no_grad():
                g = m.generate(**gen_in, max_new_tokens=6, do_sample=False, num_beams=beams,
                               pad_token_id=0)
            res["generate_%d" % beams] = g.tolist()
    return res


def run_all(dtype, archs):
    out = {}
    for arch in archs:
        try:
            out[arch] = run(arch, dtype)
        except Exception as e:  # reported per model, so one failure does not hide the others
            import traceback
            traceback.print_exc()
            out[arch] = {"error": "%s: %s" % (type(e).__name__, e)}
    return out


def _rounded(x):
    if isinstance(x, float):
        return float("%.10g" % x)
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return x


if __name__ == "__main__":
    if sys.argv[1] == "--reference":
        ref = {"versions": {"torch": torch.__version__, "transformers": T.__version__},
               "float64": run_all(torch.float64, list(ARCH)),
               "float32": run_all(torch.float32, list(ARCH))}
        ref = _rounded(ref)
        with open(sys.argv[2], "w") as f:  # one line per run and architecture
            f.write('{"versions": %s,\n' % json.dumps(ref["versions"]))
            for i, dt in enumerate(("float64", "float32")):
                f.write(' "%s": {\n' % dt)
                f.write(",\n".join("  %s: %s" % (json.dumps(a), json.dumps(r, sort_keys=True))
                                   for a, r in ref[dt].items()))
                f.write("}%s\n" % (",", "}")[i])
    else:
        dt = {"float32": torch.float32, "float64": torch.float64}[sys.argv[1]]
        print("RESULT " + json.dumps(run_all(dt, sys.argv[2:] or list(ARCH))))
