"""bench_ddp_torch.py — the PyTorch twin of bench_ddp.c: DistributedDataParallel on the gloo
backend, 2 processes on this machine, one thread each, the same models, batches and measurements.
Prints "name key value" lines (milliseconds) from rank 0."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from bench_train_torch import SimpleCNN  # the same model as bench_train_torch.py


def mlp():
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def time_steps(net, opt, x, y, iters):
    def step():
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
    for _ in range(3):
        step()
    t = []
    for _ in range(iters):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        t.append(time.perf_counter() - t0)
    return median(t) * 1e3


def bench(rank, world, name, make, shape, global_batch, iters):
    per = global_batch // world
    torch.manual_seed(1 + rank)
    x = torch.randn(per, *shape)
    y = torch.randint(0, 10, (per,))
    plain = make()
    t_plain = time_steps(plain, torch.optim.SGD(plain.parameters(), lr=0.01, momentum=0.9), x, y,
                         iters)
    nparams = sum(p.numel() for p in plain.parameters())
    ddp = DDP(make())
    t_ddp = time_steps(ddp, torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9), x, y, iters)
    flat = torch.ones(nparams)
    for _ in range(3):
        dist.all_reduce(flat)
    t = []
    for _ in range(iters):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(flat)
        t.append(time.perf_counter() - t0)
    if rank == 0:
        print(f"{name} ddp_step {t_ddp:.3f}")
        print(f"{name} plain_step {t_plain:.3f}")
        print(f"{name} allreduce {median(t) * 1e3:.3f}", flush=True)


def worker(rank, world, iters, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    if rank == 0:
        print(f"torch {torch.__version__} gloo, world {world}", flush=True)
    bench(rank, world, "mlp", mlp, (784,), 256, iters)
    bench(rank, world, "simplecnn", SimpleCNN, (3, 32, 32), 64, iters)
    dist.destroy_process_group()


if __name__ == "__main__":
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    port = 29500 + os.getpid() % 1000
    mp.spawn(worker, args=(2, iters, port), nprocs=2)
