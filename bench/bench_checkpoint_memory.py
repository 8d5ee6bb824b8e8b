"""bench_checkpoint_memory.py — what activation checkpointing saves (issue 55): 8 blocks of
[Linear(512, 512), GELU, LayerNorm] on a [2048, 512] batch, one training step on sim:0 (whose
allocator counts every byte), plain and through checkpoint_sequential with 2, 4 and 8 segments.
Prints the bytes held after the forward and the step's peak, both above what was allocated
before it, and the input gradient's sum (the same for every line).
Usage: TS_SIM_DEVICES=1 PYTHONPATH=build/python python3 bench/bench_checkpoint_memory.py [device]
(each configuration in its own process, so that one's peak is not another's)."""
import subprocess
import sys


def measure(device, segments):
    import tessera as torch
    from tessera import nn
    from tessera.utils.checkpoint import checkpoint_sequential

    torch.manual_seed(0)
    blocks = []
    for _ in range(8):
        blocks += [nn.Linear(512, 512), nn.GELU(), nn.LayerNorm(512)]
    net = nn.Sequential(*blocks).to(device)
    x = torch.randn(2048, 512, device=device, requires_grad=True)
    base = torch.memory_stats(device)["allocated_bytes.all.current"]
    torch.cuda.reset_peak_memory_stats(device)
    y = net(x) if segments == 0 else checkpoint_sequential(net, segments, x)
    held = torch.memory_stats(device)["allocated_bytes.all.current"] - base
    y.square().mean().backward()
    peak = torch.memory_stats(device)["allocated_bytes.all.peak"] - base
    print(f"{device} segments {segments}: held after forward {held / 2**20:.1f} MiB, "
          f"step peak {peak / 2**20:.1f} MiB, grad sum {x.grad.sum().item():.6g}")


if __name__ == "__main__":
    if len(sys.argv) > 2:
        measure(sys.argv[1], int(sys.argv[2]))
    else:
        dev = sys.argv[1] if len(sys.argv) > 1 else "sim:0"
        for seg in (0, 2, 4, 8):
            subprocess.run([sys.executable, __file__, dev, str(seg)], check=True)
