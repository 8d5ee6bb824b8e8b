"""bench_gpu_models_torch.py — PyTorch's side of bench_gpu_models.c (issue 57) on cuda:0: the same
models, batches, optimizers and step counts, timed the same way (one warm-up round, then the median
of rounds between two torch.cuda.synchronize calls). ms per whole training step (zero_grad,
forward, loss, backward, optimizer step) of
  gpt2_124m_bf16  GPT-2 124M: tools/gen_golden_gpt.py's GPT (Tessera's ts_gpt_new: pre-norm
                  TransformerEncoderLayer blocks, erf GELU, tied head; attention through
                  F.scaled_dot_product_attention, causal) at vocab 50257, context 1024, 12 layers,
                  12 heads, 768 wide, no dropout; batch 8 of 1024 random tokens and targets;
                  AdamW(fused=True) lr 3e-4 weight decay 0.1; forward and loss under
                  torch.autocast("cuda", dtype=torch.bfloat16), no GradScaler (bf16 needs none).
                  BENCH_TORCH_GPT=nanogpt: a nanoGPT-style model of the same structure and
                  parameters instead (one qkv Linear, SDPA is_causal, no MultiheadAttention).
  resnet50_amp    torchvision.models.resnet50() (1000 classes), model and batch (128 random
                  3x224x224 images, random labels) channels_last; SGD lr 0.1 momentum 0.9 (fused
                  when this PyTorch has it); bf16 autocast (Tessera's side uses bf16 too; NVIDIA's
                  and torchvision's AMP recipes use f16 + GradScaler, which H100/H200 do not need).
  gpt2_124m_f32, resnet50_f32: the same in strict float32 (TF32 off for matmuls and cuDNN, as
                  Tessera's default).
Each eagerly, and with BENCH_TORCH_COMPILE=1 also as "<name>_compile" (BENCH_TORCH_COMPILE=goal:
only gpt2_124m_bf16 and resnet50_amp compiled, the goal lines): torch.compile over the
model with its loss (a module returning the loss, as nanoGPT's forward does; the optimizer step
eager, fused), compilation excluded (the first step, timed apart, printed as a "#" line);
BENCH_TORCH_COMPILE_MODE picks a mode (e.g. max-autotune-no-cudagraphs). cuDNN's autotuner stays
off (PyTorch's default, and Tessera has none); BENCH_TORCH_CUDNN_BENCHMARK=1 turns it on.
Prints "name ms-per-step ms" lines and "#" comments (tokens/s or images/s, the loss of the first
and last step); "<name>: <what> failed: <exception>" when a line fails (the others go on). Without
CUDA prints "bench_gpu_models_torch: SKIP: <reason>" and exits 0.
Usage: python3 bench_gpu_models_torch.py [quick] [--cpu-tiny]; BENCH_GPU_ONLY=<line> runs one
line (eager and compiled); --cpu-tiny or BENCH_GPU_DEVICE=cpu (or sim:N, bench_gpu_models' logic
check) runs small shapes on the CPU (GPT 2 layers 64 wide, vocab 512, context 64, batch 2;
ResNet-50 on 2x3x64x64, 10 classes) as a logic check: the numbers then mean nothing."""
import inspect
import math
import os
import statistics
import sys
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from gen_golden_gpt import GPT  # noqa: E402  (Tessera's ts_gpt_new in PyTorch)

NAME = "bench_gpu_models_torch"


class GPT2(GPT):
    """tools/gen_golden_gpt.py's GPT with its positions and causal mask made once, on the model's
    device (as bench_gpu_torch.py's GPTMini). TransformerEncoderLayer asks for a mask with
    is_causal; with need_weights off, MultiheadAttention drops it and runs SDPA causal."""

    def __init__(self, **kw):
        super().__init__(**kw)
        context = self.pos_emb.num_embeddings
        self.register_buffer("pos", torch.arange(context), persistent=False)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(context),
                             persistent=False)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.drop(self.tok_emb(idx) + self.pos_emb(self.pos[:T]))
        for b in self.blocks:
            x = b(x, src_mask=self.causal[:T, :T], is_causal=True)
        return F.linear(self.ln_f(x), self.tok_emb.weight)


class NanoBlock(nn.Module):
    """A pre-norm block with the parameters of TransformerEncoderLayer(norm_first=True, gelu)."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.out(F.gelu(self.fc(self.norm2(x))))


class NanoGPT(nn.Module):
    def __init__(self, vocab, context, d, heads, layers):
        super().__init__()
        self.tok_emb, self.pos_emb = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList([NanoBlock(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.register_buffer("pos", torch.arange(context), persistent=False)
        for n, p in self.named_parameters():  # nanoGPT's init, as ts_gpt_new
            if "norm" in n or n.startswith("ln_f."):
                continue
            if p.dim() == 1:
                nn.init.zeros_(p)
            elif n.endswith("proj.weight") or n.endswith("out.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        x = self.tok_emb(idx) + self.pos_emb(self.pos[:idx.shape[1]])
        for b in self.blocks:
            x = b(x)
        return F.linear(self.ln_f(x), self.tok_emb.weight)


class WithLoss(nn.Module):
    """The model and its loss as one module: what torch.compile takes (and eager runs as is)."""

    def __init__(self, model, lm):
        super().__init__()
        self.model, self.lm = model, lm

    def forward(self, x, y):
        out = self.model(x)
        if self.lm:
            return F.cross_entropy(out.view(-1, out.shape[-1]), y.view(-1))
        return F.cross_entropy(out, y)


def has_fused(cls):
    return "fused" in inspect.signature(cls).parameters


class Case:
    def __init__(self, name, make, x, y, lm, amp, per_step, unit):
        self.name, self.make, self.x, self.y = name, make, x, y
        self.lm, self.amp, self.per_step, self.unit = lm, amp, per_step, unit


def synchronize(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def time_steps(step, dev, warmup, steps, runs):
    """One warm-up round of `warmup` steps, then the median seconds per step over `runs` rounds of
    `steps`, each between two synchronisations; and the losses of the first and the last step."""
    per_step, first, last = [], None, None
    for r in range(runs + 1):
        n = warmup if r == 0 else steps
        synchronize(dev)
        t0 = time.perf_counter()
        for i in range(n):
            loss = step()
            if first is None:
                first = loss
            last = loss
        synchronize(dev)
        if r > 0:
            per_step.append((time.perf_counter() - t0) / n)
    return statistics.median(per_step), first.item(), last.item()


def bench_case(case, dev, compiled, warmup, steps, runs, mode):
    label = case.name + ("_compile" if compiled else "")
    torch.manual_seed(0)
    what = "setup"
    try:
        model = case.make().to(dev)
        if not case.lm:
            model = model.to(memory_format=torch.channels_last)
        fused = {"fused": True} if has_fused(torch.optim.SGD if not case.lm else
                                             torch.optim.AdamW) else {}
        if case.lm:
            opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, **fused)
        else:
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, **fused)
        fwd = WithLoss(model, case.lm)
        if compiled:
            fwd = torch.compile(fwd, mode=mode) if mode else torch.compile(fwd)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=case.amp):
                loss = fwd(case.x, case.y)
            loss.backward()
            opt.step()
            return loss.detach()

        compile_note, first0 = "", None
        if compiled:  # the first step compiles: timed apart, not in the line
            what = "compile"
            synchronize(dev)
            t0 = time.perf_counter()
            first0 = step()
            synchronize(dev)
            compile_note = f", compilation (first step) {time.perf_counter() - t0:.1f} s"
        what = "step"
        s, first, last = time_steps(step, dev, warmup, steps, runs)
        if first0 is not None:
            first = first0.item()
        print(f"{label} {s * 1e3:.4f} ms", flush=True)
        print(f"# {label}: {case.per_step} {case.unit} a step, {case.per_step / s:.1f} "
              f"{case.unit}/s; loss {first:.4f} at the first step, {last:.4f} at the last (step "
              f"{warmup + steps * runs + (1 if compiled else 0)}){compile_note}", flush=True)
    except Exception as e:  # noqa: BLE001 — reported as the line's result (e.g. out of memory)
        print(f"{label}: {what} failed: {' '.join(str(e).split())[:400]}", flush=True)
        ok = False
    else:
        ok = True
    model = opt = fwd = None
    if compiled:
        torch._dynamo.reset()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return ok


def main():
    args = sys.argv[1:]
    quick = "quick" in args
    # BENCH_GPU_DEVICE=sim:0 too, so that run_gpu_models.sh's logic check runs both sides
    check_dev = os.environ.get("BENCH_GPU_DEVICE", "")
    tiny = "--cpu-tiny" in args or check_dev == "cpu" or check_dev.startswith("sim")
    if tiny:
        dev = torch.device("cpu")
        print("# --cpu-tiny: a logic check on small shapes on the CPU, not a measurement of "
              "cuda:0")
    else:
        if not torch.cuda.is_available():
            print(f"{NAME}: SKIP: CUDA is not available to PyTorch {torch.__version__}")
            return 0
        dev = torch.device("cuda", 0)
        p = torch.cuda.get_device_properties(0)
        print(f"# pytorch {torch.__version__} on cuda:0: {p.name}, {p.multi_processor_count} SMs, "
              f"{p.total_memory / 2**30:.1f} GiB")
    # strict float32 in the f32 lines, as Tessera's default (PyTorch's cuDNN default is TF32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = os.environ.get("BENCH_TORCH_CUDNN_BENCHMARK", "") == "1"
    # BENCH_TORCH_COMPILE=1: every line compiled too; =goal: the two goal lines (bf16 / amp)
    compile_env = os.environ.get("BENCH_TORCH_COMPILE", "")
    compile_too = compile_env in ("1", "goal")
    mode = os.environ.get("BENCH_TORCH_COMPILE_MODE", "") or None
    only = os.environ.get("BENCH_GPU_ONLY", "") or None
    if only and only.endswith("_compile"):
        only, compile_too, compile_env = only[:-len("_compile")], True, "1"
    nano = os.environ.get("BENCH_TORCH_GPT", "") == "nanogpt"
    warmup, steps, runs = (2, 3, 2) if quick else (3, 5, 3)
    warnings.filterwarnings("ignore", message=".*TensorFloat32.*")

    vocab, context, layers, heads, d, gpt_b, gpt_t = 50257, 1024, 12, 12, 768, 8, 1024
    img_b, img_hw, classes = 128, 224, 1000
    if tiny:
        vocab, context, layers, heads, d, gpt_b, gpt_t = 512, 64, 2, 2, 64, 2, 64
        img_b, img_hw, classes = 2, 64, 10
    compiling = f"on ({compile_env}, mode {mode})" if compile_too else "off"
    print(f"# gpt2_124m: {'nanoGPT-style model' if nano else 'gen_golden_gpt.GPT'}, vocab {vocab}, "
          f"context {context}, {layers} layers, {heads} heads, {d} wide, batch {gpt_b} x {gpt_t} "
          f"tokens; resnet50: torchvision, batch {img_b} x 3x{img_hw}x{img_hw} channels_last, "
          f"{classes} classes; {warmup} warm-up steps, median of {runs} rounds of {steps} steps; "
          f"torch.compile {compiling}; cudnn.benchmark "
          f"{torch.backends.cudnn.benchmark}", flush=True)

    def make_gpt():
        if nano:
            return NanoGPT(vocab=vocab, context=context, d=d, heads=heads, layers=layers)
        return GPT2(vocab=vocab, context=context, d=d, heads=heads, layers=layers)

    def make_resnet():
        import torchvision  # only when a ResNet line runs
        return torchvision.models.resnet50(num_classes=classes)

    torch.manual_seed(1)
    tok = torch.randint(0, vocab, (gpt_b, gpt_t), device=dev)
    tgt = torch.randint(0, vocab, (gpt_b, gpt_t), device=dev)
    img = torch.randn(img_b, 3, img_hw, img_hw, device=dev).contiguous(
        memory_format=torch.channels_last)
    lbl = torch.randint(0, classes, (img_b,), device=dev)
    cases = [
        Case("gpt2_124m_bf16", make_gpt, tok, tgt, True, True, gpt_b * gpt_t, "tokens"),
        Case("resnet50_amp", make_resnet, img, lbl, False, True, img_b, "images"),
        Case("gpt2_124m_f32", make_gpt, tok, tgt, True, False, gpt_b * gpt_t, "tokens"),
        Case("resnet50_f32", make_resnet, img, lbl, False, False, img_b, "images"),
    ]
    if only and only not in [c.name for c in cases]:
        print(f"{NAME}: BENCH_GPU_ONLY={only} is none of {', '.join(c.name for c in cases)} "
              "(or one of them with _compile)", file=sys.stderr)
        return 2
    ok = True
    for c in cases:
        if only and c.name != only:
            continue
        ok &= bench_case(c, dev, False, warmup, steps, runs, mode)
        if compile_too and (compile_env != "goal" or c.amp):
            ok &= bench_case(c, dev, True, warmup, steps, runs, mode)
    if not ok:
        print(f"{NAME}: a line failed (its \"failed\" line says why)", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
