#!/bin/sh
# run_rnn.sh — nn.LSTM and nn.GRU training steps on the cpu (seq 64, batch 32, input 256, hidden 256,
# 2 layers, float32, SGD), Tessera (bench_rnn) beside PyTorch (bench_rnn_torch.py), each side the
# best of 1 and 2 threads; issue 52's goal: >= 1.2x PyTorch. PYTHON and BENCH_ISA as in
# bench_env.sh; TS_GEMM (gemm_provider.h) picks Tessera's GEMM provider if set.
# Usage: bench/run_rnn.sh [BUILD_DIR] [quick]   (builds nothing; BUILD_DIR defaults to "build")
# ROUNDS (2): each round runs Tessera (1 and 2 threads) then PyTorch; each side keeps its best.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
mode=${2:-}
. "$here/bench_env.sh"
bin="$build/bench/bench_rnn"
[ -x "$bin" ] || { echo "run_rnn.sh: $bin not found; build first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench_header "$build"
for round in $(seq "${ROUNDS:-2}"); do
    TS_NUM_THREADS=1 "$bin" $mode >>"$tmp/ts.txt"
    TS_NUM_THREADS=2 "$bin" $mode >>"$tmp/ts.txt"
    "$PYTHON" "$here/bench_rnn_torch.py" $mode >>"$tmp/pt.txt"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '
    FILENAME ~ /ts.txt/ { if (!($1 in t) || $2 < t[$1]) t[$1] = $2; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }; next }
    { if (!($1 in p) || $2 < p[$1]) p[$1] = $2 }
    END {
        printf "%-6s %12s %12s %8s %6s %s\n", "model", "Tessera ms", "PyTorch ms", "speedup", "goal", "met"
        for (i = 1; i <= n; i++) {
            k = order[i]; s = p[k] / t[k]
            printf "%-6s %12.1f %12.1f %7.2fx %5.1fx %s\n", k, t[k], p[k], s, 1.2, (s >= 1.2 ? "yes" : "no")
        }
    }' "$tmp/ts.txt" "$tmp/pt.txt"
