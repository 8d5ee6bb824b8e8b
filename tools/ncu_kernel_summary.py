"""ncu_kernel_summary.py — sums an `ncu --csv --metrics gpu__time_duration.sum` log by kernel name:
calls, total and mean microseconds, share of the profiled time, the largest first. The kernels'
names are cut at their template arguments' first 90 characters. Usage: ncu_kernel_summary.py LOG [TOP]
"""
import csv
import sys
from collections import defaultdict


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    total, calls = defaultdict(float), defaultdict(int)
    with open(path, newline="", errors="replace") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's own "==PROF==" lines are not CSV
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit, value = row.get("Metric Unit", "ns"), float(row["Metric Value"].replace(",", ""))
        us = value * {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(unit, 1e-3)
        name = row["Kernel Name"][:90]
        total[name] += us
        calls[name] += 1
    all_us = sum(total.values())
    print(f"{sum(calls.values())} kernels, {all_us:.1f} us in all")
    print(f"{'us':>10} {'share':>6} {'calls':>6} {'mean us':>8}  kernel")
    for name, us in sorted(total.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{us:10.1f} {us / all_us:6.1%} {calls[name]:6d} {us / calls[name]:8.2f}  {name}")


if __name__ == "__main__":
    main()
