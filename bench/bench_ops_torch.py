"""bench_ops_torch.py — the PyTorch twin of `bench_vec_math fb`: GELU, softmax and layer_norm
(weight and bias) forward + backward on float32 [16, 256, 1024], the output's gradient given,
best of ROUNDS on 1 and on 2 threads. Prints "name ms" lines (the best over both thread counts).
Usage: bench_ops_torch.py [ROUNDS]   (default 7)"""
import sys
import time

import torch
import torch.nn.functional as F


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    torch.manual_seed(1)
    x = torch.randn(16, 256, 1024, requires_grad=True)
    g = torch.randn(16, 256, 1024)
    w = torch.randn(1024, requires_grad=True)
    b = torch.randn(1024, requires_grad=True)
    cases = [
        ("gelu_fb", lambda: F.gelu(x)),
        ("softmax_fb", lambda: F.softmax(x, -1)),
        ("layer_norm_fb", lambda: F.layer_norm(x, (1024,), w, b, 1e-5)),
    ]
    for name, fn in cases:
        best = 1e30
        for threads in (1, 2):
            torch.set_num_threads(threads)
            for r in range(rounds + 1):  # round 0 warms the allocator
                x.grad = w.grad = b.grad = None
                t0 = time.perf_counter()
                fn().backward(g)
                ms = (time.perf_counter() - t0) * 1e3
                if r > 0:
                    best = min(best, ms)
        print(f"{name} {best:.4f}")


if __name__ == "__main__":
    main()
