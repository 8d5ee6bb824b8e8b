"""bench_rnn_torch.py — the PyTorch twin of bench_rnn.c: nn.LSTM and nn.GRU training steps (seq 64,
batch 32, input 256, hidden 256, 2 layers, float32, SGD, loss = mean of the output squared), best
of 1 and 2 threads. Prints "name ms_per_step" lines.
Usage: bench_rnn_torch.py [quick] [lstm|gru]"""
import sys
import time

import torch

T, B, I, H, LAYERS = 64, 32, 256, 256, 2


def bench(cls, steps, repeats):
    torch.manual_seed(0)
    m = cls(I, H, num_layers=LAYERS)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(T, B, I)
    best = 1e30
    for r in range(repeats + 1):  # round 0 warms up
        t0 = time.perf_counter()
        for _ in range(steps):
            opt.zero_grad()
            y, _ = m(x)
            (y * y).mean().backward()
            opt.step()
        ms = (time.perf_counter() - t0) / steps * 1e3
        if r > 0:
            best = min(best, ms)
    return best


def main():
    args = sys.argv[1:]
    quick = bool(args) and args[0] == "quick"
    if quick:
        args = args[1:]
    only = args[0] if args else None
    steps, repeats = (2, 2) if quick else (5, 3)
    for name, cls in (("lstm", torch.nn.LSTM), ("gru", torch.nn.GRU)):
        if only and only != name:
            continue
        best = 1e30
        for threads in (1, 2):
            torch.set_num_threads(threads)
            best = min(best, bench(cls, steps, repeats))
        print(f"{name} {best:.2f}", flush=True)


if __name__ == "__main__":
    main()
