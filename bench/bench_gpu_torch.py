"""bench_gpu_torch.py — the PyTorch twin of bench_gpu.c on cuda:0: the same models, batches,
optimizers, GEMMs, copies, iteration counts and timing (warm-up round, then the median of several
rounds, each between two torch.cuda.synchronize calls). Prints "name value unit" lines ("#" lines
are comments); without CUDA prints "bench_gpu_torch: SKIP: <reason>" and exits 0.
Usage: python3 bench_gpu_torch.py [quick]"""
import statistics
import sys
import time

import torch
import torch.nn.functional as F

# the same models as the cpu benchmark (this folder is on sys.path when run as a script)
from bench_train_torch import SimpleCNN, mlp


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


def bench_model(name, make, x, y, lr, momentum, steps, runs):
    for amp in (False, True):
        torch.manual_seed(0)
        model = make().cuda()
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
        scaler = grad_scaler() if amp else None

        def step():
            opt.zero_grad()
            if scaler is None:
                F.cross_entropy(model(x), y).backward()
                opt.step()
                return
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        ms = time_work(step, steps, runs) * 1e3
        print(f"{name}_{'amp' if amp else 'f32'} {ms:.4f} ms", flush=True)


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
    torch.manual_seed(0)
    x = torch.randn(64, 784, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    img = torch.randn(64, 3, 32, 32, device="cuda")
    xb = torch.randn(256, 784, device="cuda")
    yb = torch.randint(0, 10, (256,), device="cuda")
    bench_model("simplenn", lambda: mlp([784, 128, 10]), x, y, 0.01, 0, 50 * scale, runs)
    bench_model("simplecnn", SimpleCNN, img, y, 0.001, 0.9, 50 * scale, runs)
    bench_model("mlp", lambda: mlp([784, 1024, 1024, 10]), xb, yb, 0.01, 0, 50 * scale, runs)

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
