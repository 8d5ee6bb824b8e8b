"""Greedy generation with a small randomly initialised GPT-2 from Hugging Face transformers: plain
PyTorch code. On Tessera, unedited: python -m tessera.compat examples/python/gpt2_generate.py"""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_positions=64,
                    bos_token_id=0, eos_token_id=0)
model = GPT2LMHeadModel(config)
model.eval()
prompt = torch.tensor([[11, 42, 7, 99]])
out = model.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0)
print("tokens:", out[0].tolist())
