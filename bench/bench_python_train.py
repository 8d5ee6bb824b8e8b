"""bench_python_train.py — the seed models' training steps written in Python, one script for both
libraries: `import tessera as torch` or `import torch` (argv[1]: tessera | torch), the same model
definitions, optimizer, loss and timing as bench_train_torch.py / bench_train.c (linear regression,
SimpleNN 784-128-10 b64, SimpleCNN b64), best of 1 and 2 threads. Prints "name ms_per_step".
Usage: PYTHONPATH=build/python python3 bench/bench_python_train.py tessera [quick]
       /opt/torch2/bin/torch-python bench/bench_python_train.py torch [quick]
(bench/run_python.sh runs both and the C steps beside them.)"""
import importlib
import sys
import time

torch = importlib.import_module(sys.argv[1] if len(sys.argv) > 1 else "tessera")
nn = torch.nn
F = torch.nn.functional


class SimpleCNN(nn.Module):  # seed 000, as bench_train_torch.py
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


class SimpleNN(nn.Module):  # seed 001
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def timed(step, steps, repeats):
    best = 1e30
    for r in range(repeats + 1):  # round 0 warms up
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        dt = (time.perf_counter() - t0) / steps * 1e3
        if r > 0:
            best = min(best, dt)
    return best


def bench_model(model, x, y, lr, momentum, steps, repeats):
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return timed(step, steps, repeats)


def bench_linreg(steps, repeats):  # seed 002
    X = torch.rand(100, 10)
    y = torch.rand(100, 1)
    W = torch.rand(10, 1, requires_grad=True)
    opt = torch.optim.SGD([W], lr=0.01)

    def step():
        opt.zero_grad()
        loss = torch.mean((X.mm(W) - y) ** 2)
        loss.backward()
        opt.step()
    return timed(step, steps, repeats)


def main():
    scale = 1 if len(sys.argv) > 2 and sys.argv[2] == "quick" else 4
    torch.manual_seed(0)
    x = torch.randn(64, 784)
    y = torch.randint(0, 10, (64,))
    img = torch.randn(64, 3, 32, 32)
    cases = [
        ("linreg", lambda: bench_linreg(500 * scale, 3)),
        ("simplenn", lambda: bench_model(SimpleNN(), x, y, 0.01, 0, 50 * scale, 3)),
        ("simplecnn", lambda: bench_model(SimpleCNN(), img, y, 0.001, 0.9, 10 * scale, 3)),
    ]
    for name, fn in cases:
        best = 1e30
        for threads in (1, 2):
            torch.set_num_threads(threads)
            best = min(best, fn())
        print("%s %.4f" % (name, best), flush=True)


if __name__ == "__main__":
    main()
