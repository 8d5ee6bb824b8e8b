"""bench_train_torch.py — the PyTorch twin of bench_train.c: the same models, batches and optimizers,
best of 1 and 2 threads per model. Prints "name ms_per_step peak_mb" lines. The ResNets are
tools/gen_golden_resnet.py's (torchvision's structure and names, the CIFAR stem, He et al.'s
resnet20), the ones whose outputs and gradients tests/test_golden_resnet.c compares."""
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from gen_golden_resnet import resnet18, resnet20  # noqa: E402


def status_kb(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return -1


def rss_reset():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return status_kb("VmRSS:")


class SimpleCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(400, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 400)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


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


def bench_model(model, x, y, lr, momentum, steps, repeats):
    if os.environ.get("BENCH_CHANNELS_LAST") and x.dim() == 4:  # as bench_train.c
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    rss0 = rss_reset()
    ms = timed(step, steps, repeats)
    return ms, (status_kb("VmHWM:") - rss0) / 1024.0


def bench_linreg(steps, repeats):
    X = torch.rand(100, 10)
    y = torch.rand(100, 1)
    W = torch.rand(10, 1, requires_grad=True)
    opt = torch.optim.SGD([W], lr=0.01)

    def step():
        opt.zero_grad()
        loss = torch.mean((X.mm(W) - y) ** 2)
        loss.backward()
        opt.step()
    rss0 = rss_reset()
    ms = timed(step, steps, repeats)
    return ms, (status_kb("VmHWM:") - rss0) / 1024.0


def main():
    scale = 1 if len(sys.argv) > 1 and sys.argv[1] == "quick" else 4
    only = sys.argv[2] if len(sys.argv) > 2 else None  # one model, as bench_train
    torch.manual_seed(0)
    x = torch.randn(64, 784)
    y = torch.randint(0, 10, (64,))
    img = torch.randn(64, 3, 32, 32)
    xb = torch.randn(256, 784)
    yb = torch.randint(0, 10, (256,))
    img128 = torch.randn(128, 3, 32, 32)
    y128 = torch.randint(0, 10, (128,))
    cases = [
        ("linreg", lambda: bench_linreg(500 * scale, 3)),
        ("simplenn", lambda: bench_model(mlp([784, 128, 10]), x, y, 0.01, 0, 50 * scale, 3)),
        ("simplecnn", lambda: bench_model(SimpleCNN(), img, y, 0.001, 0.9, 10 * scale, 3)),
        ("mlp", lambda: bench_model(mlp([784, 1024, 1024, 10]), xb, yb, 0.01, 0, 5 * scale, 3)),
        ("resnet18", lambda: bench_model(resnet18(num_classes=10, cifar_stem=True), img, y, 0.1, 0.9,
                                         scale, 2)),
        ("resnet20", lambda: bench_model(resnet20(), img128, y128, 0.1, 0.9, 2 * scale, 2)),
    ]
    for name, fn in cases:
        if only and name != only:
            continue
        results = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results.append(fn())
        ms = min(r[0] for r in results)
        mem = max(r[1] for r in results)
        print(f"{name} {ms:.4f} {mem:.2f}", flush=True)


if __name__ == "__main__":
    main()
