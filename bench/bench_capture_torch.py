"""bench_capture_torch.py — the PyTorch twin of bench_capture.c: PyTorch's eager step on the same
cases (the seed's linear regression X 100x10 / W 10x1 with SGD, SimpleNN 784-128-10 at batch 64 with
SGD momentum 0.9, and batch-1 inference of LeNet-5 on 1x28x28 and of the GPT-mini on 16 and 256
tokens, eval mode under torch.inference_mode()). Each case is timed at 1 and 2 threads, by the
median of single steps after a warm-up (the batches taking turns, as in bench_capture.c), and the
best is printed: "name ms threads". Usage: bench_capture_torch.py [quick]"""
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from gen_golden_gpt import GPT  # noqa: E402

BATCHES = 8  # bench_capture.c's CHECK_STEPS
MIN_ITERS, MAX_ITERS = 21, 20000


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
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


def median_ms(step, budget_s):
    """ms of one step: the median of single steps after a warm-up of about a tenth of the budget"""
    t0 = time.perf_counter()
    warm, w = 0.0, 0
    while w < 3 or warm < budget_s / 10:
        step()
        w += 1
        warm = time.perf_counter() - t0
    n = int(min(MAX_ITERS, max(MIN_ITERS, budget_s / (warm / w))))
    ms = []
    for _ in range(n):
        s0 = time.perf_counter()
        step()
        ms.append((time.perf_counter() - s0) * 1e3)
    ms.sort()
    return ms[n // 2]


def taking_turns(batches, body):
    """a step function that runs body on the batches in turn"""
    state = {"next": 0}

    def step():
        b = batches[state["next"] % len(batches)]
        state["next"] += 1
        body(*b)
    return step


def linreg():
    W = torch.rand(10, 1, requires_grad=True)
    opt = torch.optim.SGD([W], lr=0.01)
    batches = [(torch.rand(100, 10), torch.rand(100, 1)) for _ in range(BATCHES)]

    def body(X, y):
        opt.zero_grad()
        loss = torch.mean((X.mm(W) - y) ** 2)
        loss.backward()
        opt.step()
    return taking_turns(batches, body)


def simplenn():
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = [(torch.randn(64, 784), torch.randint(0, 10, (64,))) for _ in range(BATCHES)]

    def body(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return taking_turns(batches, body)


def inference(model, batches):
    model.eval()

    def body(x):
        with torch.inference_mode():
            model(x)
    return taking_turns([(x,) for x in batches], body)


def lenet_b1():
    return inference(LeNet5(), [torch.randn(1, 1, 28, 28) for _ in range(BATCHES)])


def gpt_b1(tokens):
    model = GPT(vocab=256, context=256, d=256, heads=4, layers=4)
    return inference(model, [torch.randint(0, 256, (1, tokens)) for _ in range(BATCHES)])


def main():
    budget_s = 0.05 if len(sys.argv) > 1 and sys.argv[1] == "quick" else 0.3
    torch.manual_seed(0)
    cases = [
        ("linreg", linreg),
        ("simplenn", simplenn),
        ("lenet_b1", lenet_b1),
        ("gpt_b1_t16", lambda: gpt_b1(16)),
        ("gpt_b1_t256", lambda: gpt_b1(256)),
    ]
    for name, make in cases:
        best = None
        for threads in (1, 2):
            torch.set_num_threads(threads)
            ms = median_ms(make(), budget_s)
            if best is None or ms < best[0]:
                best = (ms, threads)
        print(f"{name} {best[0]:.5f} {best[1]}", flush=True)


if __name__ == "__main__":
    main()
