"""Reference values for tests/test_gpt2.c (Tessera's Hugging Face GPT-2 with a key/value cache).

Run with /opt/torch2/bin/torch-python (torch + transformers):
  tests/data/gen_gpt2_ref.py            # the tiny model: tests/data/gpt2_tiny/{config.json,
                                        #   model.safetensors, ref.json}
  tests/data/gen_gpt2_ref.py --big DIR  # also transformers' greedy ids and float64 first-step
                                        #   logits (top 32) of a GPT-2 124M folder DIR:
                                        #   tests/data/gpt2_124m_random_ref.json
The tiny model: GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256,
n_positions=64, initializer_range=0.1)) with torch.manual_seed(SEED) (a wider init than GPT-2's
0.02 so that greedy choices have margins far above float32 error; SEED is the first from 0 whose
32 greedy steps all have a top-1 / top-2 gap > 1e-3 in float64). Greedy ids come from the float64
model (and are checked equal to transformers' float32 generate()); logits: float64, the first
step (the last prompt position), every position of the prompt.
"""
import json, os, sys
import torch
from transformers import GPT2Config, GPT2LMHeadModel

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPT_TINY = [3, 141, 59, 26, 5]
PROMPT_BIG = [464, 2068, 7586, 21831, 18045, 625]  # any ids below 50257
NEW = 40


def greedy(model, prompt, n):
    """greedy ids with a full recompute each step (no cache) and the top-1/top-2 gaps"""
    ids = list(prompt)
    gaps = []
    with torch.no_grad():
        for _ in range(n):
            lg = model(torch.tensor([ids])).logits[0, -1]
            top = torch.topk(lg, 2).values
            gaps.append(float(top[0] - top[1]))
            ids.append(int(lg.argmax()))
    return ids[len(prompt):], gaps


def hf_generate(model, prompt, n):
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False,
                             min_new_tokens=n, pad_token_id=0)
    return out[0, len(prompt):].tolist()


def tiny():
    for seed in range(100):
        torch.manual_seed(seed)
        cfg = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=64,
                         initializer_range=0.1, bos_token_id=0, eos_token_id=0)
        m = GPT2LMHeadModel(cfg).eval()
        m64 = GPT2LMHeadModel(cfg).eval().double()
        m64.load_state_dict(m.state_dict())
        ids64, gaps = greedy(m64, PROMPT_TINY, 32)
        if min(gaps) > 1e-3:
            break
    ids32 = hf_generate(m, PROMPT_TINY, 32)
    assert ids32 == ids64, (ids32, ids64)
    out = os.path.join(HERE, "gpt2_tiny")
    m.save_pretrained(out, safe_serialization=True)
    with torch.no_grad():
        lg64 = m64(torch.tensor([PROMPT_TINY])).logits[0].tolist()
    ref = {"seed": seed, "prompt": PROMPT_TINY, "greedy": ids64, "min_gap": min(gaps),
           "logits_f64": lg64}
    with open(os.path.join(out, "ref.json"), "w") as f:
        json.dump(ref, f)
    for extra in ("generation_config.json",):
        p = os.path.join(out, extra)
        if os.path.exists(p):
            os.remove(p)
    print("tiny: seed", seed, "min gap", min(gaps), "ids", ids64[:8], "...")


def big(d):
    m = GPT2LMHeadModel.from_pretrained(d, torch_dtype=torch.float32).eval()
    ids32 = hf_generate(m, PROMPT_BIG, NEW)
    m64 = GPT2LMHeadModel.from_pretrained(d, torch_dtype=torch.float64).eval()
    ids64, gaps = greedy(m64, PROMPT_BIG, NEW)
    with torch.no_grad():
        lg = m64(torch.tensor([PROMPT_BIG])).logits[0, -1]
    top = torch.topk(lg, 32)
    ref = {"model": "GPT2LMHeadModel(GPT2Config()) after torch.manual_seed(0)",
           "prompt": PROMPT_BIG, "greedy_f32_generate": ids32, "greedy_f64": ids64,
           "gaps_f64": gaps, "first_logits_f64_top_ids": top.indices.tolist(),
           "first_logits_f64_top": top.values.tolist(), "first_logits_f64_absmax":
           float(lg.abs().max())}
    with open(os.path.join(HERE, "gpt2_124m_random_ref.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print("big: f32 == f64 greedy:", ids32 == ids64, "min gap", min(gaps))


if __name__ == "__main__":
    tiny()
    if len(sys.argv) == 3 and sys.argv[1] == "--big":
        big(sys.argv[2])
