#!/usr/bin/env python3
"""gen_golden_gpt.py — writes tests/golden/transformer.safetensors and tests/golden/gpt.safetensors
with PyTorch: MultiheadAttention (bool/float masks, key padding, need_weights, batch_first both
ways), TransformerEncoderLayer (post-/pre-norm, relu/gelu, masks), rms_norm and gelu(tanh) values,
a 2-layer GPT-mini with Tessera's names (logits, loss, every gradient, 10 AdamW steps), and
tests/golden/sdpa.safetensors: scaled_dot_product_attention forward and backward in float32 and
float64 (causal, bool and additive masks, L != S, a custom scale, a row with every key masked). The
C tests tests/test_golden_gpt.c and tests/test_golden_sdpa.c compare Tessera against them. Bool
masks are stored as int64 0/1.

Run: /opt/torch2/bin/torch-python tools/gen_golden_gpt.py   (the files are committed)"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import OUT, save_safetensors  # noqa: E402


class GPT(nn.Module):
    """Tessera's ts_gpt_new, in PyTorch with the same names: tied head, no head.weight key."""

    def __init__(self, vocab=32, context=16, d=32, heads=2, layers=2, dropout=0.0):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d)
        self.pos_emb = nn.Embedding(context, d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([
            nn.TransformerEncoderLayer(d, heads, 4 * d, dropout, activation="gelu",
                                       batch_first=True, norm_first=True)
            for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        for n, p in self.named_parameters():  # nanoGPT's init, as ts_gpt_new
            if "norm" in n or n.startswith("ln_f."):
                continue
            if p.dim() == 1:
                nn.init.zeros_(p)
            elif n.endswith("out_proj.weight") or n.endswith("linear2.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(T)))
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        for b in self.blocks:
            x = b(x, src_mask=mask, is_causal=True)
        return F.linear(self.ln_f(x), self.tok_emb.weight)


def params(prefix, m, t):
    for k, v in m.state_dict().items():
        t[f"{prefix}.p.{k}"] = v.clone()


def grads(prefix, m, t):
    for k, v in m.named_parameters():
        t[f"{prefix}.grad.{k}"] = v.grad


def mha_case(t, name, g, batch_first, cross, attn_mask, kpm, need_weights, is_causal=False):
    E, H, N, L, S = 8, 2, 2, 4, (5 if cross else 4)
    torch.manual_seed(len(name))
    m = nn.MultiheadAttention(E, H, batch_first=batch_first)
    params(name, m, t)
    shp = lambda n, s: (n, s, E) if batch_first else (s, n, E)  # noqa: E731
    q = torch.randn(*shp(N, L), generator=g, requires_grad=True)
    k = torch.randn(*shp(N, S), generator=g, requires_grad=True) if cross else q
    v = torch.randn(*shp(N, S), generator=g, requires_grad=True) if cross else q
    out, w = m(q, k, v, key_padding_mask=kpm, attn_mask=attn_mask, need_weights=need_weights,
               is_causal=is_causal)
    r = torch.randn(out.shape, generator=g)
    (out * r).sum().backward()
    t[f"{name}.q"] = q.detach()
    if cross:
        t[f"{name}.k"], t[f"{name}.v"] = k.detach(), v.detach()
        t[f"{name}.grad.k"], t[f"{name}.grad.v"] = k.grad, v.grad
    t[f"{name}.r"], t[f"{name}.out"], t[f"{name}.grad.q"] = r, out, q.grad
    if w is not None:
        t[f"{name}.weights"] = w
    for mname, mask in (("attn_mask", attn_mask), ("kpm", kpm)):
        if mask is not None:
            t[f"{name}.{mname}"] = mask.long() if mask.dtype == torch.bool else mask
    grads(name, m, t)


def enc_case(t, name, g, norm_first, activation, kpm=None, causal=False):
    d, H, ff, N, T = 8, 2, 16, 2, 5
    torch.manual_seed(len(name))
    m = nn.TransformerEncoderLayer(d, H, ff, 0.0, activation=activation, batch_first=True,
                                   norm_first=norm_first)
    params(name, m, t)
    x = torch.randn(N, T, d, generator=g, requires_grad=True)
    mask = nn.Transformer.generate_square_subsequent_mask(T) if causal else None
    out = m(x, src_mask=mask, src_key_padding_mask=kpm, is_causal=causal)
    r = torch.randn(out.shape, generator=g)
    (out * r).sum().backward()
    t[f"{name}.x"], t[f"{name}.r"], t[f"{name}.out"], t[f"{name}.grad.x"] = x.detach(), r, out, x.grad
    if kpm is not None:
        t[f"{name}.kpm"] = kpm.long()
    grads(name, m, t)


def transformer_file():
    g = torch.Generator().manual_seed(0)
    t = {}
    causal_bool = torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)
    kpm = torch.tensor([[False, False, False, False], [False, False, True, True]])
    mha_case(t, "mha_self_bool", g, False, False, causal_bool, kpm, True)
    float_mask = torch.randn(2 * 2, 4, 5, generator=g)
    mha_case(t, "mha_cross_float", g, True, True, float_mask, None, False)
    kpm5 = torch.tensor([[0.0, 0.0, 0.0, 0.0, -1.5], [0.0, -2.0, 0.0, 0.0, 0.0]])
    mha_case(t, "mha_cross_kpm", g, True, True, None, kpm5, True)
    kpm_enc = torch.tensor([[False] * 5, [False, False, False, True, True]])
    enc_case(t, "enc_post_relu", g, False, "relu", kpm=kpm_enc)
    enc_case(t, "enc_pre_gelu", g, True, "gelu", causal=True)
    enc_case(t, "enc_post_gelu", g, False, "gelu", causal=True)
    enc_case(t, "enc_pre_relu", g, True, "relu", kpm=kpm_enc)
    x = torch.randn(3, 6, generator=g)
    w = torch.randn(6, generator=g)
    t["rms.x"], t["rms.w"] = x, w
    t["rms.y"] = F.rms_norm(x, (6,), w)
    t["rms.y_eps"] = F.rms_norm(x, (6,), w, eps=0.5)
    t["gelu_tanh.x"] = torch.linspace(-6, 6, 49)
    t["gelu_tanh.y"] = F.gelu(t["gelu_tanh.x"], approximate="tanh")
    save_safetensors(os.path.join(OUT, "transformer.safetensors"), t,
                     {"torch": torch.__version__})
    print("transformer:", len(t), "tensors")


def sdpa_case(t, name, g, shape_q, S, Ev, mask=None, causal=False, scale=None):
    """F.scaled_dot_product_attention forward and backward in float32 and float64 from the same
    values: "<name>.<f32|f64>.{q,k,v,r,out,grad.q,grad.k,grad.v}", the mask (bool as int64 0/1)
    and "<name>.causal" / "<name>.scale" (0: the default 1/sqrt(E))."""
    *batch, L, E = shape_q
    q64 = torch.randn(*batch, L, E, generator=g, dtype=torch.float64)
    k64 = torch.randn(*batch, S, E, generator=g, dtype=torch.float64)
    v64 = torch.randn(*batch, S, Ev, generator=g, dtype=torch.float64)
    r64 = torch.randn(*batch, L, Ev, generator=g, dtype=torch.float64)
    for dt, tag in ((torch.float32, "f32"), (torch.float64, "f64")):
        q, k, v = (x.to(dt).requires_grad_() for x in (q64, k64, v64))
        m = mask if mask is None or mask.dtype == torch.bool else mask.to(dt)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal, scale=scale)
        out.backward(r64.to(dt))
        pre = f"{name}.{tag}"
        t[f"{pre}.q"], t[f"{pre}.k"], t[f"{pre}.v"] = q.detach(), k.detach(), v.detach()
        t[f"{pre}.r"], t[f"{pre}.out"] = r64.to(dt), out.detach()
        t[f"{pre}.grad.q"], t[f"{pre}.grad.k"], t[f"{pre}.grad.v"] = q.grad, k.grad, v.grad
    if mask is not None:
        t[f"{name}.mask"] = mask.long() if mask.dtype == torch.bool else mask.double()
    t[f"{name}.causal"] = torch.tensor(int(causal))
    t[f"{name}.scale"] = torch.tensor(float(scale or 0.0), dtype=torch.float64)


def sdpa_file():
    g = torch.Generator().manual_seed(3)
    t = {}
    sdpa_case(t, "plain", g, (2, 3, 5, 4), 5, 4)
    sdpa_case(t, "cross", g, (1, 2, 7, 8), 9, 6, scale=0.25)
    sdpa_case(t, "causal", g, (1, 2, 70, 8), 70, 8, causal=True)
    sdpa_case(t, "causal_wide", g, (2, 5, 8), 11, 3, causal=True)
    bool_mask = torch.rand(2, 1, 6, 9, generator=g) > 0.4
    bool_mask[1, 0, 2, :] = False  # a query row that sees no key: output 0, no gradient
    sdpa_case(t, "bool", g, (2, 2, 6, 4), 9, 5, mask=bool_mask)
    add_mask = torch.randn(40, 66, generator=g)
    add_mask[:, 60:] = float("-inf")
    sdpa_case(t, "additive", g, (2, 3, 40, 16), 66, 16, mask=add_mask)
    save_safetensors(os.path.join(OUT, "sdpa.safetensors"), t, {"torch": torch.__version__})
    print("sdpa:", len(t), "tensors")


def gpt_file():
    g = torch.Generator().manual_seed(1)
    torch.manual_seed(2)
    model = GPT()
    init = {k: v.clone() for k, v in model.state_dict().items()}
    idx = torch.randint(0, 32, (2, 16), generator=g)
    y = torch.randint(0, 32, (2, 16), generator=g)
    logits = model(idx)
    loss = F.cross_entropy(logits.view(-1, 32), y.view(-1))
    loss.backward()
    t = {"input": idx, "target": y, "logits": logits, "loss": loss.reshape(())}
    for k, v in init.items():
        t["model." + k] = v
    for k, v in model.named_parameters():
        t["grad." + k] = v.grad
    m2 = GPT()
    m2.load_state_dict(init)
    opt = torch.optim.AdamW(m2.parameters(), weight_decay=0.1)
    losses = []
    for _ in range(10):
        opt.zero_grad()
        l2 = F.cross_entropy(m2(idx).view(-1, 32), y.view(-1))
        l2.backward()
        opt.step()
        losses.append(l2.item())
    t["traj.adamw"] = torch.tensor(losses, dtype=torch.float64)
    for k, v in m2.state_dict().items():
        t["after." + k] = v
    save_safetensors(os.path.join(OUT, "gpt.safetensors"), t,
                     {"torch": torch.__version__, "adamw": "lr=1e-3 weight_decay=0.1"})
    print(f"gpt: loss {loss.item():.6f}, adamw {losses[0]:.6f} -> {losses[-1]:.6f}")


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    transformer_file()
    sdpa_file()
    gpt_file()
    return 0


if __name__ == "__main__":
    sys.exit(main())
