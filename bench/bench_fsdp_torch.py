"""bench_fsdp_torch.py — the PyTorch twin of bench_fsdp.c's speed mode: FSDP2 (fully_shard on each
block, then on the model; reshard after forward, PyTorch's default) on the gloo backend, 2
processes on this machine, one thread each, the same GPT (tools/gen_golden_gpt.py: Tessera's
structure, names and init), batches and AdamW. MODE ddp: DistributedDataParallel instead; plain: no
wrapper (each rank steps alone on its batch, the machine as loaded).

Usage: bench_fsdp_torch.py gptmini|gpt124m fsdp|ddp|plain ITERS
Prints "MODEL MODE key value..." lines from rank 0, as bench_fsdp does: the median step (ms) and
every rank's peak resident set above the process's before the model was built (MB), over the timed
steps (the high-water mark reset after the warm-up through /proc/self/clear_refs). PyTorch's CPU
allocator keeps no statistics, so the resident set is the measure both sides share."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tools"))
sys.path.insert(0, here)
from gen_golden_gpt import GPT  # noqa: E402
from bench_train_torch import rss_reset, status_kb  # noqa: E402

CASES = {  # vocab, context, d, heads, layers, batch a rank
    "gptmini": (256, 256, 256, 4, 4, 8),
    "gpt124m": (256, 256, 768, 12, 12, 2),
}


def worker(rank, world, name, mode, iters, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    V, T, d, heads, layers, B = CASES[name]
    rss0 = status_kb("VmRSS:")
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randint(0, V, (B, T), generator=g)
    y = torch.randint(0, V, (B, T), generator=g)
    torch.manual_seed(1)
    m = GPT(vocab=V, context=T, d=d, heads=heads, layers=layers)
    nparams = sum(p.numel() for p in m.parameters())
    if mode == "plain":  # no wrapper: every rank steps alone on its batch
        net = m
    elif mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        net = DDP(m)
    else:
        from torch.distributed.fsdp import fully_shard
        for b in m.blocks:
            fully_shard(b)
        fully_shard(m)
        net = m
    opt = torch.optim.AdamW(net.parameters(), lr=3e-4, weight_decay=0.1)

    def step():
        opt.zero_grad()
        F.cross_entropy(net(x).view(-1, V), y.view(-1)).backward()
        opt.step()

    for _ in range(2):
        step()
    dist.barrier()
    rss_reset()
    t = []
    for _ in range(iters):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        t.append(time.perf_counter() - t0)
    peak = (status_kb("VmHWM:") - rss0) * 1024 / 1e6
    peaks = [None] * world
    dist.all_gather_object(peaks, peak)
    if rank == 0:
        t.sort()
        print(f"{name} {mode} params {nparams / 1e6:.3f}")
        print(f"{name} {mode} step {t[len(t) // 2] * 1e3:.3f}")
        print(f"{name} {mode} peak_rss_mb " + " ".join(f"{p:.2f}" for p in peaks), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    name, mode = sys.argv[1], sys.argv[2]
    iters = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    port = 29500 + os.getpid() % 1000
    mp.spawn(worker, args=(2, name, mode, iters, port), nprocs=2)
