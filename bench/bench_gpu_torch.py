"""bench_gpu_torch.py — the PyTorch twin of bench_gpu.c on cuda:0: the same models, batches,
optimizers, GEMMs, copies, iteration counts and timing (warm-up round, then the median of several
rounds, each between two torch.cuda.synchronize calls). Each training step is timed eagerly and as
a whole-network torch.cuda.graph capture replayed ("<case>_graph"). Prints "name value unit" lines
("#" lines are comments), "<case>_graph: capture failed: <exception>" when a capture fails; without
CUDA prints "bench_gpu_torch: SKIP: <reason>" and exits 0.
Usage: python3 bench_gpu_torch.py [quick]"""
import inspect
import os
import statistics
import sys
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

# the same models as the cpu benchmark (this folder is on sys.path when run as a script)
from bench_train_torch import SimpleCNN, mlp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from gen_golden_gpt import GPT  # noqa: E402  (Tessera's ts_gpt_new, as bench_xformer_torch.py)

WARMUP_STEPS = 3

# capturable=True AdamW stepping outside a capture (the eager warm-up) warns once per instance
warnings.filterwarnings("ignore", message=".*capturable=True.*")


class GPTMini(GPT):
    """The GPT of tools/gen_golden_gpt.py with its positions and causal mask made once, on the
    model's device (the original makes both on the cpu at each forward, which a CUDA model cannot
    take). The mask is only there because TransformerEncoderLayer asks for one with is_causal;
    attention drops it and runs causal."""

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


def gpt_mini():
    # bench_xformer's GPT-mini: vocab 256, context 256, 4 layers, 4 heads, d 256, no dropout
    return GPTMini(vocab=256, context=256, d=256, heads=4, layers=4)


def time_work(fn, iters, runs):
    """Median seconds per call over `runs` rounds of `iters` calls, after one warm-up round."""
    per_call = []
    for r in range(runs + 1):
        torch.cuda.synchronize(0)
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize(0)
        if r > 0:
            per_call.append((time.perf_counter() - t0) / iters)
    return statistics.median(per_call)


def grad_scaler():
    # torch.amp.GradScaler("cuda") is the newer spelling (torch.cuda.amp.GradScaler warns there);
    # torch 1.13 has only the latter.
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda")
    return torch.cuda.amp.GradScaler()


def has_fused(cls):
    return "fused" in inspect.signature(cls).parameters


class Case:
    """A training-step case: the model, its optimizer's settings and the timed steps' batch.
    lm: the GPT (tokens [B, T] in and out, logits [B, T, V]) with AdamW lr 3e-4, weight decay 0.1
    (bench_xformer's); otherwise SGD with lr and momentum."""

    def __init__(self, name, make, x, y, lr, momentum=0.0, lm=False):
        self.name, self.make, self.x, self.y = name, make, x, y
        self.lr, self.momentum, self.lm = lr, momentum, lm

    def optimizer(self, model, **kw):
        if self.lm:
            return torch.optim.AdamW(model.parameters(), lr=self.lr, weight_decay=0.1, **kw)
        return torch.optim.SGD(model.parameters(), lr=self.lr, momentum=self.momentum, **kw)

    def loss(self, out, y):
        if self.lm:
            return F.cross_entropy(out.view(-1, out.shape[-1]), y.view(-1))
        return F.cross_entropy(out, y)


def bench_eager(case, amp, steps, runs):
    torch.manual_seed(0)
    model = case.make().cuda()
    opt = case.optimizer(model)
    scaler = grad_scaler() if amp else None
    x, y = case.x, case.y

    def step():
        opt.zero_grad()
        if scaler is None:
            case.loss(model(x), y).backward()
            opt.step()
            return
        with torch.autocast("cuda", dtype=torch.float16):
            loss = case.loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    ms = time_work(step, steps, runs) * 1e3
    print(f"{case.name}_{'amp' if amp else 'f32'} {ms:.4f} ms", flush=True)


def amp_graph_recipe():
    """Whether the AMP graphs capture GradScaler.step and update too. GradScaler.step reads
    found_inf on the host (a sync, illegal in a capture) unless the optimizer is fused: then the
    fused kernel takes found_inf and skips the update on the device, and update() is a kernel. So
    the AMP graphs use fused=True SGD / AdamW and capture the whole step; a PyTorch without fused
    SGD (before 2.4) falls back to the recipe of PyTorch's docs (CUDA semantics, "Usage with
    torch.cuda.amp"): forward, loss and backward captured, scaler.step and update run eagerly after
    each replay."""
    return has_fused(torch.optim.SGD) and has_fused(torch.optim.AdamW)


def bench_graph(case, amp, steps, runs):
    """PyTorch's whole-network capture (CUDA semantics, "Whole-network capture"): static input and
    target, 3 warm-up steps on a side stream, zero_grad(set_to_none=True), then forward, loss,
    backward and optimizer step captured in a torch.cuda.graph; each timed step copies the batch
    into the static tensors and replays. AdamW is capturable=True (its step count on the device);
    SGD needs nothing. AMP: see amp_graph_recipe."""
    label = f"{case.name}_{'amp' if amp else 'f32'}_graph"
    whole = not amp or amp_graph_recipe()
    kw = {}
    if case.lm:
        kw["capturable"] = True
    if amp and whole:
        kw["fused"] = True
    torch.manual_seed(0)
    model = case.make().cuda()
    opt = case.optimizer(model, **kw)
    scaler = grad_scaler() if amp else None
    static_x, static_y = case.x.clone(), case.y.clone()

    def body():  # the captured part: no zero_grad (the grads are None before the capture)
        if scaler is None:
            loss = case.loss(model(static_x), static_y)
            loss.backward()
            opt.step()
            return loss
        with torch.autocast("cuda", dtype=torch.float16):
            loss = case.loss(model(static_x), static_y)
        scaler.scale(loss).backward()
        if whole:
            scaler.step(opt)
            scaler.update()
        return loss

    def outside():  # what the partial AMP capture leaves to run eagerly after each replay
        if not whole:
            scaler.step(opt)
            scaler.update()

    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_STEPS):
                opt.zero_grad(set_to_none=True)
                body()
                outside()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            body()
    except Exception as e:  # noqa: BLE001 — reported as the line's result, as bench_gpu does
        print(f"{label}: capture failed: {' '.join(str(e).split())[:400]}", flush=True)
        return

    def step():
        static_x.copy_(case.x)
        static_y.copy_(case.y)
        g.replay()
        outside()
    ms = time_work(step, steps, runs) * 1e3
    print(f"{label} {ms:.4f} ms", flush=True)


def bench_model(case, steps, runs):
    for amp in (False, True):
        bench_eager(case, amp, steps, runs)
    for amp in (False, True):
        bench_graph(case, amp, steps, runs)


def bench_gemm(label, n, dtype, tf32, iters, runs):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.manual_seed(1)
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    s = time_work(lambda: torch.mm(a, b), iters, runs)
    print(f"{label} {2.0 * n * n * n / s * 1e-12:.2f} TFLOP/s", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    del a, b


def bench_h2d(label, nbytes, pinned, iters, runs):
    src = torch.ones(nbytes // 4)
    if pinned:
        src = src.pin_memory()
    s = time_work(lambda: src.to("cuda", non_blocking=pinned), iters, runs)
    print(f"{label} {nbytes / s * 1e-9:.2f} GB/s", flush=True)


def main():
    if not torch.cuda.is_available():
        print(f"bench_gpu_torch: SKIP: CUDA is not available to PyTorch {torch.__version__}")
        return
    quick = len(sys.argv) > 1 and sys.argv[1] == "quick"
    scale, runs = (1, 3) if quick else (4, 7)
    p = torch.cuda.get_device_properties(0)
    print(f"# pytorch {torch.__version__} on cuda:0: {p.name}, {p.multi_processor_count} SMs, "
          f"{p.total_memory / 2**30:.1f} GiB")
    # Same math as Tessera's defaults: strict float32 (PyTorch lets cuDNN convolutions use TF32
    # by default; Tessera's ts_cuda_set_allow_tf32 covers both and is off) and no cuDNN autotuner
    # (PyTorch's default; Tessera uses cuDNN's heuristics).
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    whole = "whole step, GradScaler.step and update included (fused=True SGD / AdamW)"
    partial = ("forward, loss and backward; scaler.step and update eagerly after each replay (no "
               "fused SGD in this PyTorch)")
    print(f"# pytorch _graph lines: torch.cuda.graph after {WARMUP_STEPS} warm-up steps on a side "
          f"stream; AMP captures the {whole if amp_graph_recipe() else partial}")
    torch.manual_seed(0)
    x = torch.randn(64, 784, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    img = torch.randn(64, 3, 32, 32, device="cuda")
    xb = torch.randn(256, 784, device="cuda")
    yb = torch.randint(0, 10, (256,), device="cuda")
    # the GPT-mini on a batch small enough to be launch-bound: 8 sequences of 64 tokens
    tok = torch.randint(0, 256, (8, 64), device="cuda")
    tgt = torch.randint(0, 256, (8, 64), device="cuda")
    steps = 50 * scale
    bench_model(Case("simplenn", lambda: mlp([784, 128, 10]), x, y, 0.01), steps, runs)
    bench_model(Case("simplecnn", SimpleCNN, img, y, 0.001, 0.9), steps, runs)
    bench_model(Case("mlp", lambda: mlp([784, 1024, 1024, 10]), xb, yb, 0.01), steps, runs)
    bench_model(Case("gptmini", gpt_mini, tok, tgt, 3e-4, lm=True), steps, runs)

    n = 8192
    bench_gemm("gemm_f32", n, torch.float32, False, 2 if quick else 5, runs)
    bench_gemm("gemm_tf32", n, torch.float32, True, 5 if quick else 20, runs)
    bench_gemm("gemm_f16", n, torch.float16, False, 10 if quick else 50, runs)
    bench_gemm("gemm_bf16", n, torch.bfloat16, False, 10 if quick else 50, runs)

    nbytes = 256 << 20
    bench_h2d("h2d_pinned", nbytes, True, 5 if quick else 20, runs)
    bench_h2d("h2d_pageable", nbytes, False, 5 if quick else 20, runs)


if __name__ == "__main__":
    main()
