"""bench_eval_torch.py — the PyTorch twin of bench_eval.c: eval-mode inference of the same ResNets
(tools/gen_golden_resnet.py's, torchvision's structure) at batch 1 and 64, under torch.no_grad
("no_grad"), torch.inference_mode ("inference_mode") and with autograd on ("grad"). Prints
"model batch mode wall_ms cpu_ms" lines, each the best of several runs after a warm-up (cpu_ms:
the process's CPU time, all threads); threads from
TORCH_THREADS (else PyTorch's default). BENCH_AUTOCAST=1: every forward inside its own
`torch.autocast("cpu", dtype=torch.bfloat16)`; BENCH_CHANNELS_LAST=1: model and input in
channels_last (Tessera's ResNets are channels_last by themselves).
Usage: bench_eval_torch.py [MODEL [BATCH]]"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from gen_golden_resnet import resnet18, resnet20  # noqa: E402


AUTOCAST = os.environ.get("BENCH_AUTOCAST", "0") != "0"
CHANNELS_LAST = os.environ.get("BENCH_CHANNELS_LAST", "0") != "0"


def forward_s(model, x, ctx):
    with ctx():
        t0, c0 = time.perf_counter(), time.process_time()
        if AUTOCAST:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = model(x)
        else:
            y = model(x)
        float(y.detach().sum())
        return time.perf_counter() - t0, time.process_time() - c0


def best_ms(model, x, ctx):
    for _ in range(2):
        forward_s(model, x, ctx)
    best, best_cpu, spent, i = 1e30, 1e30, 0.0, 0
    while i < 3 or (spent < 2.0 and i < 200):
        t, c = forward_s(model, x, ctx)
        spent += t
        best, best_cpu = min(best, t), min(best_cpu, c)
        i += 1
    return best * 1e3, best_cpu * 1e3


class grad_on:
    def __enter__(self):
        self.prev = torch.is_grad_enabled()
        torch.set_grad_enabled(True)

    def __exit__(self, *a):
        torch.set_grad_enabled(self.prev)


MODES = [("no_grad", torch.no_grad), ("inference_mode", torch.inference_mode), ("grad", grad_on)]


def bench(name, model, batch, side):
    model.eval()
    x = torch.randn(batch, 3, side, side)
    if CHANNELS_LAST:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    best = {m: [1e30, 1e30] for m, _ in MODES}
    for _ in range(2):
        for m, ctx in MODES:
            t, c = best_ms(model, x, ctx)
            best[m] = [min(best[m][0], t), min(best[m][1], c)]
    for m, _ in MODES:
        print(f"{name} {batch} {m} {best[m][0]:.3f} {best[m][1]:.3f}", flush=True)


def main():
    if os.environ.get("TORCH_THREADS"):
        torch.set_num_threads(int(os.environ["TORCH_THREADS"]))
    only = sys.argv[1] if len(sys.argv) > 1 else None
    only_batch = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    torch.manual_seed(0)
    for n in (1, 64):
        if only_batch and n != only_batch:
            continue
        if only in (None, "resnet20"):
            bench("resnet20", resnet20(), n, 32)
        if only in (None, "resnet18"):
            bench("resnet18", resnet18(num_classes=10, cifar_stem=True), n, 32)
        if only in (None, "resnet18_224"):
            bench("resnet18_224", resnet18(), n, 224)


if __name__ == "__main__":
    main()
