#!/usr/bin/python3
"""bench_python_ops.py — the cost of one small op called from Python, Tessera beside PyTorch in the
same run: `a + b` on one-element tensors, `x.sum()` on a one-element tensor, and a Linear forward
at batch 1 (`x @ w.t() + b`, 256 -> 128). The issue's goal: at most PyTorch's cost.

Run under the interpreter that has tessera (PYTHONPATH=build-py/python /usr/bin/python3
bench/bench_python_ops.py); it runs the same measurements in PyTorch's interpreter as a child
(/opt/torch2/bin/torch-python, or --torch-python PATH; skipped when absent). Each side takes the
better of 1 and 2 threads, and the best of several rounds (round 0 warms up).
"""
import argparse
import json
import os
import subprocess
import sys
import time

CASES = [
    ("add_1elem", "a + b"),
    ("sum_1elem", "x.sum()"),
    ("linear_b1_256x128", "xi @ w.t() + bias"),
]


def measure(lib, threads, number, rounds):
    """ns per call of each case with `threads` kernel threads"""
    lib.set_num_threads(threads)
    lib.manual_seed(0)
    env = {
        "a": lib.ones(1), "b": lib.ones(1), "x": lib.ones(1),
        "xi": lib.randn(1, 256), "w": lib.randn(128, 256), "bias": lib.randn(128),
    }
    out = {}
    for name, stmt in CASES:
        code = compile("for _ in range(%d):\n    %s" % (number, stmt), name, "exec")
        best = float("inf")
        for r in range(rounds + 1):
            t0 = time.perf_counter()
            exec(code, env)
            dt = (time.perf_counter() - t0) / number
            if r > 0:
                best = min(best, dt)
        out[name] = best * 1e9
    return out


def best_of_threads(lib, number, rounds):
    runs = [measure(lib, t, number, rounds) for t in (1, 2)]
    return {name: min(r[name] for r in runs) for name, _ in CASES}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--side", choices=["tessera", "torch"], default="tessera")
    ap.add_argument("--torch-python", default="/opt/torch2/bin/torch-python")
    ap.add_argument("--number", type=int, default=20000, help="calls per round")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if args.side == "torch":
        import torch
        print(json.dumps(best_of_threads(torch, args.number, args.rounds)))
        return
    import tessera
    if not hasattr(tessera, "set_num_threads"):
        tessera.set_num_threads = lambda n: None
    mine = best_of_threads(tessera, args.number, args.rounds)
    theirs = None
    if os.path.exists(args.torch_python):
        child = subprocess.run([args.torch_python, os.path.abspath(__file__), "--side", "torch",
                                "--number", str(args.number), "--rounds", str(args.rounds)],
                               capture_output=True, text=True)
        if child.returncode == 0:
            theirs = json.loads(child.stdout.strip().splitlines()[-1])
        else:
            print("torch side failed:", child.stderr.strip()[-500:], file=sys.stderr)
    print("%-20s %14s %14s %8s" % ("op (from Python)", "tessera ns", "torch ns", "ratio"))
    for name, _ in CASES:
        t = theirs[name] if theirs else float("nan")
        print("%-20s %14.0f %14.0f %8.2f" % (name, mine[name], t, mine[name] / t))


if __name__ == "__main__":
    main()
