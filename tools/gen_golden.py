#!/usr/bin/env python3
"""gen_golden.py — writes tests/golden/*.safetensors with PyTorch: for each seed model its weights,
an input batch, the logits, the loss, every gradient, and 10-step loss trajectories with
SGD-momentum and with Adam. The C test tests/test_golden.c compares Tessera against them.

Run with a Python that has torch (Debian's python3-torch): /usr/bin/python3 tools/gen_golden.py
The files are committed; CI needs no PyTorch."""
import json
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden")
DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}


def save_safetensors(path, tensors, meta):
    """The safetensors format, written by hand so that only torch is needed."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        data = t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = meta
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)


class SimpleNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class SimpleCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class LinReg(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(10, 1)

    def forward(self, x):
        return self.linear(x)


class ConvBN(nn.Module):
    """A small conv net with batch norm (training mode: batch statistics, running stats updated)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(x, 1))


def loss_fn(kind, out, target):
    return F.cross_entropy(out, target) if kind == "ce" else F.mse_loss(out, target)


def trajectory(model_cls, init_state, x, target, kind, make_opt, steps=10):
    m = model_cls()
    m.load_state_dict(init_state)
    opt = make_opt(m.parameters())
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(kind, m(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return torch.tensor(losses, dtype=torch.float64)


def golden(name, model_cls, x, target, kind):
    torch.manual_seed(1)
    model = model_cls()
    init_state = {k: v.clone() for k, v in model.state_dict().items()}
    out = model(x)
    loss = loss_fn(kind, out, target)
    loss.backward()
    t = {"input": x, "target": target, "logits": out, "loss": loss.reshape(())}
    for k, v in init_state.items():
        t["model." + k] = v
    for k, v in model.named_parameters():
        t["grad." + k] = v.grad
    for k, v in model.state_dict().items():  # buffers after one training forward (batch norm)
        if not k.endswith("weight") and not k.endswith("bias"):
            t["after." + k] = v
    t["traj.sgd"] = trajectory(model_cls, init_state, x, target, kind,
                               lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9))
    t["traj.adam"] = trajectory(model_cls, init_state, x, target, kind,
                                lambda p: torch.optim.Adam(p, lr=1e-3))
    meta = {"model": name, "loss": kind, "torch": torch.__version__,
            "sgd": "lr=0.01 momentum=0.9", "adam": "lr=1e-3"}
    save_safetensors(os.path.join(OUT, name + ".safetensors"), t, meta)
    print(f"{name}: loss {loss.item():.6f}, sgd {t['traj.sgd'][-1].item():.6f}, "
          f"adam {t['traj.adam'][-1].item():.6f}")


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    golden("simplenn", SimpleNN, torch.randn(8, 784, generator=g),
           torch.randint(0, 10, (8,), generator=g), "ce")
    golden("simplecnn", SimpleCNN, torch.randn(4, 3, 32, 32, generator=g),
           torch.randint(0, 10, (4,), generator=g), "ce")
    golden("linreg", LinReg, torch.rand(100, 10, generator=g), torch.rand(100, 1, generator=g), "mse")
    golden("convbn", ConvBN, torch.randn(6, 1, 8, 8, generator=g),
           torch.randint(0, 3, (6,), generator=g), "ce")
    return 0


if __name__ == "__main__":
    sys.exit(main())
