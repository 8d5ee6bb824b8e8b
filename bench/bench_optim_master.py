"""Float32 master weights for bf16 parameters (Optimizer.set_master_weights; decision 0030):
what they buy (the drift of a bf16 run from the float32 run) and what they cost (step time).

    PYTHONPATH=build/python /usr/bin/python3 bench/bench_optim_master.py [n] [steps]

Drift: one parameter of n elements (normal(0, 1)), AdamW(lr=1e-4, weight_decay=0.01), `steps` steps
with the same random bf16 gradients for a float32 run, a bf16 run and a bf16 run with masters: the
share of elements that never moved, that differ from the float32 run rounded to bf16, and the
mean |bf16 - float32| over the mean float32 update (at least the bf16 rounding of the values).
Time: the best of 50 AdamW steps over n elements on the cpu, per dtype and mode."""
import sys
import time

import numpy as np
import tessera
import tessera.nn as nn

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
rng = np.random.default_rng(0)
p0 = rng.standard_normal(n).astype(np.float32)


def N(t):
    return np.asarray(t.detach().float().numpy(), dtype=np.float64)


def make(dtype, masters):
    p = nn.Parameter(tessera.tensor(p0, dtype=tessera.bfloat16).to(dtype))
    opt = tessera.optim.AdamW([p], lr=1e-4, weight_decay=0.01)
    if masters:
        opt.set_master_weights(True)
    return p, opt


runs = {"float32": make(tessera.float32, False), "bf16": make(tessera.bfloat16, False),
        "bf16+masters": make(tessera.bfloat16, True)}
start = {k: N(p) for k, (p, _) in runs.items()}
for s in range(steps):
    g = tessera.tensor(rng.standard_normal(n).astype(np.float32), dtype=tessera.bfloat16)
    for k, (p, opt) in runs.items():
        p.grad = g.to(p.dtype)
        opt.step()
ref32 = runs["float32"][0]
ref, ref16 = N(ref32), N(ref32.to(tessera.bfloat16))
moved = np.mean(np.abs(ref - start["float32"]))
print(f"drift after {steps} AdamW(lr=1e-4) steps over {n} elements "
      f"(mean |float32 update| {moved:.3g}):")
for k in ("bf16", "bf16+masters"):
    v = N(runs[k][0])
    print(f"  {k:13s} elements never moved {100 * np.mean(v == start[k]):.1f}% "
          f"(float32 run: {100 * np.mean(ref == start['float32']):.1f}%), "
          f"differing from the float32 run rounded to bf16 {100 * np.mean(v != ref16):.1f}%, "
          f"mean |p - float32| / mean |update| {np.mean(np.abs(v - ref)) / moved:.3f}")
m = N(runs["bf16+masters"][1].state_dict()["state"][0]["master_weight"])
print(f"  master - float32 run: max |difference| {np.max(np.abs(m - ref)):.3g}")


def step_time(dtype, masters, reps=50):
    p, opt = make(dtype, masters)
    p.grad = tessera.tensor(rng.standard_normal(n).astype(np.float32)).to(dtype)
    opt.step()  # the state made
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        opt.step()
        best = min(best, time.perf_counter() - t)
    return best


print(f"AdamW step over {n} elements on the cpu, best of 50:")
for name, dt, m in (("float32", tessera.float32, False), ("bf16", tessera.bfloat16, False),
                    ("bf16+masters", tessera.bfloat16, True)):
    print(f"  {name:13s} {1e3 * step_time(dt, m):.2f} ms")
