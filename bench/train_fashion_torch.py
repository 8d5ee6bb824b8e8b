"""train_fashion_torch.py — the PyTorch twin of `tessera train` on Fashion-MNIST: the same models
(MLP 784-128-10, LeNet-5), preprocessing (x / 255, normalised with mean 0.2860, std 0.3530), batch
64, SGD with momentum at the trainer's lr on its cosine schedule (run_fashion.sh passes the lr,
momentum and schedule that `tessera train` printed), a seeded shuffle every epoch, and a
test pass (batches of 500, no grad) after each epoch. The input path is the cheapest fair one:
the whole set pre-loaded and pre-normalised as tensors, each batch an index_select of a shuffled
permutation. Each model is trained with torch.set_num_threads(1) and (2).

Prints, per model, thread count and epoch:
    epoch MODEL THREADS EPOCH TRAIN_S EPOCH_S TEST_ACC
(TRAIN_S: the training batches; EPOCH_S: training + test pass, as the trainer's "time"), and per
model the best thread count:
    best MODEL THREADS TRAIN_S_PER_EPOCH EPOCH_S_PER_EPOCH FINAL_TEST_ACC
Usage: train_fashion_torch.py [--epochs N] [--models mlp,lenet] [--threads 1,2] [--lr X]
       [--momentum X] [--schedule cosine|constant] [--seed N] [--data-dir DIR]
"""
import argparse
import gzip
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530  # tools/tessera/data.c: Fashion-MNIST's usual statistics
BATCH, TEST_BATCH = 64, 500  # tools/tessera/eval.c: test batches of max(500, --batch-size)


def read_idx(path):
    """An IDX file (plain or .gz) as a numpy array, every size checked against the payload."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        sys.exit("%s: not an IDX file of unsigned bytes" % path)
    ndim = data[3]
    dims = struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim])
    payload = data[4 + 4 * ndim:]
    if len(payload) != int(np.prod(dims)):
        sys.exit("%s: dims %s do not match a payload of %d bytes" % (path, dims, len(payload)))
    return np.frombuffer(payload, dtype=np.uint8).reshape(dims)


def load_split(data_dir, prefix):
    def find(kind):
        for name in ("%s-%s-ubyte.gz" % (prefix, kind), "%s-%s-ubyte" % (prefix, kind)):
            p = os.path.join(data_dir, name)
            if os.path.exists(p):
                return p
        sys.exit("no %s-%s-ubyte[.gz] in %s" % (prefix, kind, data_dir))
    images = read_idx(find("images-idx3"))
    labels = read_idx(find("labels-idx1"))
    # to_tensor (uint8 HWC -> float CHW / 255) then normalize, once, outside the timing
    x = torch.from_numpy(images.astype(np.float32)).div_(255.0).sub_(MEAN).div_(STD)
    return x.unsqueeze(1).contiguous(), torch.from_numpy(labels.astype(np.int64))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


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
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def evaluate(net, x, y):
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], TEST_BATCH):
            logits = net(x[i:i + TEST_BATCH])
            correct += int((logits.argmax(1) == y[i:i + TEST_BATCH]).sum())
    return correct / x.shape[0]


def train(model, threads, epochs, seed, lr, momentum, cosine, train_set, test_set):
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    net = MLP() if model == "mlp" else LeNet5()
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum)
    x, y = train_set
    n = x.shape[0]
    batches = (n + BATCH - 1) // BATCH  # no drop_last, as the trainer
    total = batches * epochs
    gen = torch.Generator().manual_seed(seed)
    step = 0
    rows = []
    for epoch in range(epochs):
        t0 = time.perf_counter()
        net.train()
        perm = torch.randperm(n, generator=gen)
        # the trainer's running sums: loss x batch size and correct predictions, kept as tensors
        loss_sum = torch.zeros((), dtype=torch.float64)
        correct = torch.zeros((), dtype=torch.int64)
        for b in range(batches):
            idx = perm[b * BATCH:(b + 1) * BATCH]
            xb, yb = x.index_select(0, idx), y.index_select(0, idx)
            if cosine:  # the trainer's schedule, set by the step (tools/tessera/train.c lr_at)
                for g in opt.param_groups:
                    g["lr"] = lr * 0.5 * (1 + math.cos(math.pi * step / total))
            opt.zero_grad()
            logits = net(xb)
            loss = F.cross_entropy(logits, yb)
            loss.backward()
            opt.step()
            with torch.no_grad():
                loss_sum += loss * yb.shape[0]
                correct += (logits.argmax(1) == yb).sum()
            step += 1
        t_train = time.perf_counter() - t0
        net.eval()
        acc = evaluate(net, *test_set)
        t_epoch = time.perf_counter() - t0
        print("epoch %s %d %d %.4f %.4f %.4f" % (model, threads, epoch + 1, t_train, t_epoch, acc),
              flush=True)
        print("  train loss %.4f acc %.4f" % (float(loss_sum) / n, int(correct) / n),
              file=sys.stderr, flush=True)
        rows.append((t_train, t_epoch, acc))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--models", default="mlp,lenet")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--schedule", choices=("cosine", "constant"), default="cosine")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    train_set = load_split(a.data_dir, "train")
    test_set = load_split(a.data_dir, "t10k")
    for model in a.models.split(","):
        best = None
        for threads in (int(t) for t in a.threads.split(",")):
            rows = train(model, threads, a.epochs, a.seed, a.lr, a.momentum,
                         a.schedule == "cosine", train_set, test_set)
            tr = sum(r[0] for r in rows) / len(rows)
            ep = sum(r[1] for r in rows) / len(rows)
            if best is None or ep < best[2]:
                best = (threads, tr, ep, rows[-1][2])
        print("best %s %d %.4f %.4f %.4f" % ((model,) + best), flush=True)


if __name__ == "__main__":
    main()
