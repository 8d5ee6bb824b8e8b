#!/bin/sh
# run_python.sh — issue 28's training-step goals: the seed models' steps written in Python on
# Tessera (bench_python_train.py under `import tessera as torch`) beside the same script on PyTorch
# and beside the C steps (bench_train), each best of 1 and 2 threads. Goals: the Python step at
# least 1.5x faster than PyTorch's, and within 10% of the C step.
# Usage: bench/run_python.sh [BUILD_DIR] [quick]   (BUILD_DIR defaults to "build"; builds nothing)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
mode=${2:-full}
. "$here/bench_env.sh"
syspy=${TS_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); Tessera: $syspy; PyTorch: $PYTHON"
PYTHONPATH="$build/python" "$syspy" "$here/bench_python_train.py" tessera "$mode" >"$tmp/py.txt"
"$PYTHON" "$here/bench_python_train.py" torch "$mode" >"$tmp/torch.txt"
for t in 1 2; do
    for m in linreg simplenn simplecnn; do
        TS_NUM_THREADS=$t "$build/bench/bench_train" "$mode" $m >>"$tmp/c$t.txt"
    done
done
printf "%-10s %12s %12s %12s %10s %10s\n" model "python ms" "torch ms" "C ms" "vs torch" "py / C"
for m in linreg simplenn simplecnn; do
    py=$(awk -v m=$m '$1 == m {print $2}' "$tmp/py.txt")
    pt=$(awk -v m=$m '$1 == m {print $2}' "$tmp/torch.txt")
    c=$(cat "$tmp/c1.txt" "$tmp/c2.txt" | awk -v m=$m '$1 == m {if (b == "" || $2 < b) b = $2} END {print b}')
    awk -v m=$m -v p="$py" -v t="$pt" -v c="$c" 'BEGIN {
        printf "%-10s %12.4f %12.4f %12.4f %9.2fx %10.2f\n", m, p, t, c, t / p, p / c }'
done
