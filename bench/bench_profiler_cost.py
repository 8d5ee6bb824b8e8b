"""bench_profiler_cost.py — the profiler's cost on a training step: the seed SimpleNN step
(784-128-10, batch 64, SGD) and a small CNN step, each timed with the profiler off and on
(record_shapes + profile_memory), on cpu and sim:0. Reports; asserts nothing. Times are the
process's CPU time per step (median), which a busy machine disturbs less than wall time (run with
OMP_NUM_THREADS=1 so that no thread spins).

    OMP_NUM_THREADS=1 TS_SIM_DEVICES=2 PYTHONPATH=build/python python3 \
        bench/bench_profiler_cost.py [--steps N]
"""
import argparse
import statistics
import time

import tessera as torch
from tessera.profiler import profile


def simple_nn():
    return torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 10))


def small_cnn():
    return torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                               torch.nn.Flatten(), torch.nn.Linear(8 * 13 * 13, 10))


def step_fn(model_fn, shape, device):
    torch.manual_seed(0)
    model = model_fn().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(*shape).to(device)
    y = torch.randint(0, 10, (shape[0],)).to(device)

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def timed(step, n, on):
    times = []
    for _ in range(3):  # warm-up
        step()
    for _ in range(n):
        if on:
            with profile(record_shapes=True, profile_memory=True):
                t0 = time.process_time()
                step()
                t1 = time.process_time()
        else:
            t0 = time.process_time()
            step()
            t1 = time.process_time()
        times.append((t1 - t0) * 1e3)
    return statistics.median(times), len(times)  # process_time has ~1 us resolution here


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    args = ap.parse_args()
    if not torch.sim.is_available():
        torch.sim.configure(2)
    print(f"{'model':10s} {'device':7s} {'off ms':>9s} {'on ms':>9s} {'on/off':>7s}  "
          f"(CPU ms a step, median of {args.steps}; on: record_shapes + profile_memory)")
    for name, fn, shape in (("simple_nn", simple_nn, (64, 784)),
                            ("small_cnn", small_cnn, (32, 1, 28, 28))):
        for dev in ("cpu", "sim:0"):
            step = step_fn(fn, shape, dev)
            off, _ = timed(step, args.steps, False)
            on, _ = timed(step, args.steps, True)
            print(f"{name:10s} {dev:7s} {off:9.3f} {on:9.3f} {on / off:7.3f}")
    with profile() as prof:
        step_fn(simple_nn, (64, 784), "cpu")()
    n_ev = len(prof.events())
    print(f"events recorded in one simple_nn step (with its set-up): {n_ev}")


if __name__ == "__main__":
    main()
