"""bench_fft_1t.py — issue 52's FFT and complex abs cases of bench_surface.py on ONE thread, each
side's minimum over 15 interleaved measurements (Tessera, PyTorch, Tessera, ...) of 5 calls: on a
shared, loaded host the minimum of one-thread runs moves far less than bench_surface.py's medians
of 1- and 2-thread runs. Figures: bench/results/fft.md.

    PYTHONPATH=build-nocuda/python /opt/torch2/bin/torch-python bench/bench_fft_1t.py
"""
import os

os.environ.setdefault("GOMP_SPINCOUNT", "1000")

import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import tessera as ts  # noqa: E402

torch.set_num_threads(1)
ts.set_num_threads(1)
rng = np.random.default_rng(0)


def c64(shape):
    return np.ascontiguousarray(rng.standard_normal(shape) + 1j * rng.standard_normal(shape),
                                dtype=np.complex64)


CASES = [
    ("fft.fft 97x1024", c64((97, 1024)), lambda L, x: L.fft.fft(x)),
    ("fft.rfft 97x1024", np.ascontiguousarray(rng.uniform(-3, 3, (97, 1024)), dtype=np.float32),
     lambda L, x: L.fft.rfft(x)),
    ("fft.irfft 256x513", c64((256, 513)), lambda L, x: L.fft.irfft(x, 1024)),
    ("fft.fft2 8x256x256", c64((8, 256, 256)), lambda L, x: L.fft.fft2(x)),
    ("complex_abs 1e5", c64((100000,)), lambda L, x: x.abs()),
]

for name, a, f in CASES:
    xs = {lib: lib.from_numpy(a.copy()) for lib in (ts, torch)}
    best = {ts: float("inf"), torch: float("inf")}
    for lib in best:
        f(lib, xs[lib])  # warm up
    for _ in range(15):
        for lib in (ts, torch):
            t0 = time.perf_counter()
            for _ in range(5):
                f(lib, xs[lib])
            best[lib] = min(best[lib], (time.perf_counter() - t0) / 5)
    print("%-20s tessera %8.1f us  torch %8.1f us  torch/tessera %.2f"
          % (name, best[ts] * 1e6, best[torch] * 1e6, best[torch] / best[ts]))
