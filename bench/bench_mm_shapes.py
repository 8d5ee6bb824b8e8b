"""bench_mm_shapes.py — bf16 `mm` over a few shapes on 1 and 2 threads, one script for both
libraries (`import tessera as torch` or `import torch`; argv[1]: tessera | torch): the rate of
the product kernel per thread, which bench_bf16.py's best-of-threads figure hides. Prints "MxNxK
threads ms TFLOP/s" lines (best of 5 rounds).

Usage: PYTHONPATH=build/python python3 bench/bench_mm_shapes.py tessera [float32|bfloat16|float16]
       /opt/torch2/bin/torch-python bench/bench_mm_shapes.py torch [...]"""
import importlib
import sys
import time

torch = importlib.import_module(sys.argv[1] if len(sys.argv) > 1 else "tessera")
DTYPE = getattr(torch, sys.argv[2] if len(sys.argv) > 2 else "bfloat16")
SHAPES = [(1024, 1024, 1024), (1024, 4096, 1024), (4096, 1024, 1024), (2048, 2048, 1024),
          (4096, 4096, 1024), (4096, 4096, 256)]


def rate(m, n, k, threads):
    torch.set_num_threads(threads)
    a = torch.randn(m, k).to(DTYPE)
    b = torch.randn(k, n).to(DTYPE)
    reps = max(1, int(2e10 / (2.0 * m * n * k)))
    for _ in range(2):
        torch.mm(a, b)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            torch.mm(a, b)
        best = min(best, (time.perf_counter() - t0) / reps)
    return best * 1e3, 2.0 * m * n * k / best / 1e12


for m, n, k in SHAPES:
    for threads in (1, 2):
        ms, tf = rate(m, n, k, threads)
        print("%dx%dx%d %d %.3f %.2f" % (m, n, k, threads, ms, tf), flush=True)
