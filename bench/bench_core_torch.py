#!/usr/bin/python3
"""bench_core_torch.py — PyTorch side of bench_core: `a + b` per-op cost and torch.mm GFLOP/s
(square, and a linear layer's two products on a small batch).

Prints the same "name value" lines as bench_core (ns/op for add, GFLOP/s for matmul). Each
measurement runs with torch.set_num_threads(1) and with 2, and the better of the two is printed,
so PyTorch is compared at its best setting on this machine.
"""
import sys
import time

import torch


def bench_add(n, batches, repeats):
    a = torch.full((n,), 1.5)
    b = torch.full((n,), 2.5)
    best = float("inf")
    for r in range(repeats + 1):  # round 0 warms up
        t0 = time.perf_counter()
        for _ in range(batches):
            for _ in range(1000):
                a + b
        dt = (time.perf_counter() - t0) / (batches * 1000)
        if r > 0:
            best = min(best, dt)
    return best * 1e9


def bench_mm(m, n, k, ta, tb, iters, repeats):
    """[m, k] @ [k, n]; ta / tb: that operand a transposed view, as in bench_core.c"""
    torch.manual_seed(1)
    a = torch.randn(k, m) if ta else torch.randn(m, k)
    b = torch.randn(n, k) if tb else torch.randn(k, n)
    best = float("inf")
    for r in range(repeats + 1):
        t0 = time.perf_counter()
        for _ in range(iters):
            torch.mm(a.t() if ta else a, b.t() if tb else b)
        dt = (time.perf_counter() - t0) / iters
        if r > 0:
            best = min(best, dt)
    return 2.0 * m * n * k / best * 1e-9


def main():
    q = 10 if len(sys.argv) > 1 and sys.argv[1] == "quick" else 1
    runs = [
        ("add_1", lambda: bench_add(1, 200 // q, 7), min, "%.1f"),
        ("add_1000", lambda: bench_add(1000, 200 // q, 7), min, "%.1f"),
        ("matmul_256", lambda: bench_mm(256, 256, 256, False, False, 50 // q, 5), max, "%.2f"),
        ("matmul_1024", lambda: bench_mm(1024, 1024, 1024, False, False, max(10 // q, 1), 5), max,
         "%.2f"),
        ("matmul_2048", lambda: bench_mm(2048, 2048, 2048, False, False, 2, 1 if q > 1 else 5), max,
         "%.2f"),
        ("linear_fwd", lambda: bench_mm(64, 128, 784, False, True, 500 // q, 5), max, "%.2f"),
        ("linear_wgrad", lambda: bench_mm(128, 784, 64, True, False, 500 // q, 5), max, "%.2f"),
    ]
    with torch.no_grad():
        for name, fn, better, fmt in runs:
            vals = []
            for threads in (1, 2):
                torch.set_num_threads(threads)
                vals.append(fn())
            print(("%s " + fmt) % (name, better(vals)), flush=True)


if __name__ == "__main__":
    main()
