#!/bin/sh
# run_ops.sh — GELU, softmax and layer_norm (weight and bias) forward + backward on float32
# [16, 256, 1024]: Tessera (`bench_vec_math fb`, 1 and 2 threads) beside PyTorch 2.x
# (bench_ops_torch.py, 1 and 2 threads), same run, each side its best; goal (issue 14): >= 1.5x.
# Usage: bench/run_ops.sh [BUILD_DIR]   (builds nothing; BUILD_DIR defaults to "build")
# ROUNDS (7) per thread count; BENCH_ISA=avx2 caps both sides (bench_env.sh).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
. "$here/bench_env.sh"
bin="$build/bench/bench_vec_math"
[ -x "$bin" ] || { echo "run_ops.sh: $bin not found; build first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench_header "$build"
rounds=${ROUNDS:-7}
TS_NUM_THREADS=1 "$bin" fb "$rounds" >"$tmp/t.txt"
TS_NUM_THREADS=2 "$bin" fb "$rounds" >>"$tmp/t.txt"
"$PYTHON" "$here/bench_ops_torch.py" "$rounds" >"$tmp/torch.txt"
awk '
    FNR == NR { if (!($1 in t)) { order[++n] = $1; t[$1] = $2 } else if ($2 < t[$1]) t[$1] = $2; next }
    { pt[$1] = $2 }
    END {
        printf "%-14s %11s %11s %8s %6s %s\n", "case", "Tessera ms", "PyTorch ms", "speedup", "goal", "met"
        for (i = 1; i <= n; i++) {
            k = order[i]; r = pt[k] / t[k]
            printf "%-14s %11.3f %11.3f %7.2fx %6s %s\n", k, t[k], pt[k], r, ">=1.5x", (r >= 1.5 ? "yes" : "NO")
        }
    }
' "$tmp/t.txt" "$tmp/torch.txt"
