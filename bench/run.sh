#!/bin/sh
# run.sh — runs bench_core and its PyTorch twin side by side and prints the comparison table.
# Usage: bench/run.sh [BUILD_DIR] [quick]   (builds nothing; BUILD_DIR defaults to "build")
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
mode=${2:-}
bin="$build/bench/bench_core"
. "$here/bench_env.sh"
python=$PYTHON

if [ ! -x "$bin" ]; then
    echo "run.sh: $bin not found; build first: cmake --build $build" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bench_header "$build"
echo "Tessera: $bin $mode" >&2
"$bin" $mode >"$tmp/tessera.txt"
echo "PyTorch: $python $here/bench_core_torch.py $mode" >&2
if ! "$python" "$here/bench_core_torch.py" $mode >"$tmp/torch.txt"; then
    echo "run.sh: the PyTorch side failed (is torch installed for $python?)" >&2
    exit 1
fi

# add: ns/op, lower is better, goal PyTorch/Tessera >= 5; matmul: GFLOP/s, goal Tessera/PyTorch
# >= 0.95. Exit status 0 whatever the outcome: the table is the result.
awk '
    FNR == NR { ts[$1] = $2; order[++n] = $1; next }
    { pt[$1] = $2 }
    END {
        printf "%-13s %12s %12s %8s %10s  %s\n", "measurement", "Tessera", "PyTorch", "ratio", "goal", "met"
        for (i = 1; i <= n; i++) {
            k = order[i]
            if (!(k in pt)) { printf "%-13s %12s %12s\n", k, ts[k], "missing"; continue }
            if (k ~ /^add_/) {
                unit = "ns"; ratio = pt[k] / ts[k]; goal = 5; g = ">= 5x"
            } else {
                unit = "GF/s"; ratio = ts[k] / pt[k]; goal = 0.95; g = ">= 0.95x"
            }
            met = "NO"
            if (ratio >= goal) met = "yes"
            printf "%-13s %12s %12s %7.2fx %10s  %s\n", k, ts[k] " " unit, pt[k] " " unit, ratio, g, met
        }
        print ""
        print "add: nanoseconds per op (ratio = PyTorch / Tessera, how many times cheaper Tessera is)"
        print "matmul: f32 square GFLOP/s (ratio = Tessera / PyTorch); PyTorch best of 1 and 2 threads"
        print "linear_fwd: x[64,784] @ W[128,784]^T; linear_wgrad: dy[64,128]^T @ x[64,784] (GFLOP/s)"
    }
' "$tmp/tessera.txt" "$tmp/torch.txt"
