"""bench_bf16.py — issue 29's bfloat16 goals on the cpu, one script for both libraries
(`import tessera as torch` or `import torch`; argv[1]: tessera | torch): bf16 `mm` at 1024^3 and
4096x4096x1024 (m x n x k), float32 and float16 `mm` 1024^3 beside them, and the MLP 784-1024-1024-10 batch 256
and ResNet-18 (CIFAR stem, batch 64) SGD training steps and bench_xformer's GPT-mini (4 layers,
d 256, 4 heads, context 256, vocab 256, batch 16) AdamW training step, each in float32 and under
`torch.autocast("cpu", dtype=torch.bfloat16)`. Each case is
the best of 1 and 2 threads; prints "name ms" lines (GFLOP/s for the products).

Usage: PYTHONPATH=build/python python3 bench/bench_bf16.py tessera [quick|full [PREFIX]]
       /opt/torch2/bin/torch-python bench/bench_bf16.py torch [quick|full [PREFIX]]
(PREFIX: only the cases whose name starts with it, e.g. resnet18; BENCH_CPU_TIME=1: one thread,
the process's CPU time instead of wall time, for A/B runs on a loaded host)
(bench/run_bf16.sh runs both and prints the ratios with the CPU's ISA and oneDNN's kernels.)"""
import importlib
import os
import sys
import time

torch = importlib.import_module(sys.argv[1] if len(sys.argv) > 1 else "tessera")
nn = torch.nn
F = torch.nn.functional
QUICK = len(sys.argv) > 2 and sys.argv[2] == "quick"
ONLY = sys.argv[3] if len(sys.argv) > 3 else ""
CPU_TIME = os.environ.get("BENCH_CPU_TIME") == "1"
clock = time.process_time if CPU_TIME else time.perf_counter


def timed(fn, reps, rounds=3):
    """best ms per call over `rounds` rounds of `reps` calls (a warm-up round first)"""
    best = float("inf")
    for r in range(rounds + 1):
        t0 = clock()
        for _ in range(reps):
            fn()
        dt = (clock() - t0) / reps * 1e3
        if r:
            best = min(best, dt)
    return best


def mm_case(m, n, k, dtype):
    a = torch.randn(m, k).to(dtype)
    b = torch.randn(k, n).to(dtype)
    flops = 2.0 * m * n * k
    reps = max(1, int(2e9 / flops)) if not QUICK else 1
    ms = timed(lambda: torch.mm(a, b), reps)
    return ms, flops / ms / 1e6


def step_case(make_model, x_shape, lr, autocast, reps):
    """ms of one SGD momentum step (cross-entropy over 10 classes), float32 or under autocast"""
    torch.manual_seed(0)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    x = torch.randn(*x_shape)
    y = torch.randint(0, 10, (x_shape[0],))
    if os.environ.get("BENCH_CHANNELS_LAST") and torch.__name__ == "torch" and x.dim() == 4:
        # PyTorch's channels_last (Tessera's ResNets run channels_last by themselves)
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)

    def step():
        opt.zero_grad()
        if autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
        else:
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return timed(step, reps, rounds=1 if QUICK else 3)


def gpt_step_case(autocast, reps):
    """ms of one AdamW step of the GPT-mini on random tokens, float32 or under autocast"""
    torch.manual_seed(0)
    V, T, B = 256, 256, 16
    if torch.__name__ == "tessera":
        model = nn.GPT(vocab_size=V, context=T, n_layer=4, n_head=4, n_embd=256)
    else:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
        from gen_golden_gpt import GPT  # Tessera's GPT in PyTorch, same structure and init
        model = GPT(vocab=V, context=T, d=256, heads=4, layers=4)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    idx = torch.randint(0, V, (B, T))
    tgt = torch.randint(0, V, (B, T))

    def step():
        opt.zero_grad()
        if autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(idx).view(-1, V), tgt.view(-1))
        else:
            loss = F.cross_entropy(model(idx).view(-1, V), tgt.view(-1))
        loss.backward()
        opt.step()
    return timed(step, reps, rounds=1 if QUICK else 3)


def mlp():
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def resnet18_cifar():
    if torch.__name__ == "tessera":
        return nn.models.resnet18(num_classes=10, cifar_stem=True)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
    from gen_golden_resnet import resnet18  # torchvision's, with the CIFAR stem
    return resnet18(num_classes=10, cifar_stem=True)


def main():
    cases = [
        ("mm_bf16_1024", lambda: mm_case(1024, 1024, 1024, torch.bfloat16)),
        ("mm_bf16_4096x4096x1024", lambda: mm_case(4096, 4096, 1024, torch.bfloat16)),
        ("mm_f32_1024", lambda: mm_case(1024, 1024, 1024, torch.float32)),
        ("mm_f16_1024", lambda: mm_case(1024, 1024, 1024, torch.float16)),
        ("mlp_step_f32", lambda: (step_case(mlp, (256, 784), 0.01, False, 2 if QUICK else 10), None)),
        ("mlp_step_autocast_bf16",
         lambda: (step_case(mlp, (256, 784), 0.01, True, 2 if QUICK else 10), None)),
        ("resnet18_step_f32",
         lambda: (step_case(resnet18_cifar, (64, 3, 32, 32), 0.1, False, 1), None)),
        ("resnet18_step_autocast_bf16",
         lambda: (step_case(resnet18_cifar, (64, 3, 32, 32), 0.1, True, 1), None)),
        ("gpt_step_f32", lambda: (gpt_step_case(False, 1), None)),
        ("gpt_step_autocast_bf16", lambda: (gpt_step_case(True, 1), None)),
    ]
    for name, fn in cases:
        if not name.startswith(ONLY):
            continue
        best, rate = float("inf"), None
        for threads in (1,) if CPU_TIME else (1, 2):
            torch.set_num_threads(threads)
            ms, r = fn()
            if ms < best:
                best, rate = ms, r
        print("%s %.4f %s" % (name, best, "%.1f" % rate if rate else "-"), flush=True)


if __name__ == "__main__":
    main()
