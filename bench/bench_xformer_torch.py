"""bench_xformer_torch.py — the PyTorch twin of bench_xformer.c: scaled_dot_product_attention
forward + backward at (16, 4, 256, 64) causal, and the same GPT-mini training step (the GPT of
tools/gen_golden_gpt.py, Tessera's structure and names), best of 1 and 2 threads. Prints
"name ms_per_step peak_mb" lines."""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from gen_golden_gpt import GPT  # noqa: E402
from bench_train_torch import rss_reset, status_kb  # noqa: E402


def timed(step, steps, repeats):
    best = 1e30
    for r in range(repeats + 1):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        dt = (time.perf_counter() - t0) / steps * 1e3
        if r > 0:
            best = min(best, dt)
    return best


def bench_sdpa(steps):
    q, k, v = (torch.randn(16, 4, 256, 64, requires_grad=True) for _ in range(3))
    g = torch.randn(16, 4, 256, 64)

    def step():
        for t in (q, k, v):
            t.grad = None
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)
    rss0 = rss_reset()
    ms = timed(step, steps, 3)
    return ms, (status_kb("VmHWM:") - rss0) / 1024.0


def bench_gpt(steps):
    m = GPT(vocab=256, context=256, d=256, heads=4, layers=4)
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.1)
    idx = torch.randint(0, 256, (16, 256))
    tgt = torch.randint(0, 256, (16, 256))

    def step():
        opt.zero_grad()
        F.cross_entropy(m(idx).view(-1, 256), tgt.view(-1)).backward()
        opt.step()
    rss0 = rss_reset()
    ms = timed(step, steps, 2)
    return ms, (status_kb("VmHWM:") - rss0) / 1024.0


def main():
    scale = 1 if len(sys.argv) > 1 and sys.argv[1] == "quick" else 3
    torch.manual_seed(0)
    for name, fn in (("sdpa", lambda: bench_sdpa(4 * scale)), ("gpt", lambda: bench_gpt(scale))):
        results = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results.append(fn())
        print(f"{name} {min(r[0] for r in results):.4f} {max(r[1] for r in results):.2f}",
              flush=True)


if __name__ == "__main__":
    main()
