#!/bin/sh
# run_train.sh — training-step time and training-time memory growth of the issue's models on the
# cpu, Tessera (bench_train) beside PyTorch (bench_train_torch.py), each side the best of 1 and 2
# threads; prints the host and both sides (bench_env.sh), issue 14's goals, and the MLP's GEMM
# FLOP rate as a share of the host's measured peak (bench_train peak).
# Usage: bench/run_train.sh [BUILD_DIR] [quick]   (builds nothing; BUILD_DIR defaults to "build")
# ROUNDS (2): each round runs Tessera (1 and 2 threads) then PyTorch, and each side keeps its best
# time, so a slow spell of a shared machine hits both sides instead of deciding a ratio.
# PYTHON and BENCH_ISA as in bench_env.sh.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
mode=${2:-}
. "$here/bench_env.sh"
bin="$build/bench/bench_train"
[ -x "$bin" ] || { echo "run_train.sh: $bin not found; build first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench_header "$build"
"$bin" peak >"$tmp/peak.txt"
# Tessera: best of 1 and 2 threads too, per model
for round in $(seq "${ROUNDS:-2}"); do
    TS_NUM_THREADS=1 "$bin" $mode >>"$tmp/t1.txt"
    TS_NUM_THREADS=2 "$bin" $mode >>"$tmp/t2.txt"
    "$PYTHON" "$here/bench_train_torch.py" $mode >>"$tmp/torch.txt"
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '
    FILENAME ~ /peak.txt/ { peak[$1] = $2; next }
    FILENAME ~ /t[12].txt/ {
        if (!($1 in t)) { t[$1] = $2; m[$1] = $3; gf[$1] = $4; order[++n] = $1; next }
        if ($2 < t[$1]) t[$1] = $2
        if ($3 > m[$1]) m[$1] = $3
        next
    }
    { if (!($1 in pt) || $2 < pt[$1]) pt[$1] = $2; if ($3 > pm[$1]) pm[$1] = $3 }
    END {
        # issue 14: SimpleCNN >= 2x, SimpleNN >= 2.5x, MLP >= 1.1x, linear regression >= 20x
        goal["linreg"] = 20; goal["simplenn"] = 2.5; goal["simplecnn"] = 2; goal["mlp"] = 1.1
        p = peak["peak2"] > peak["peak1"] ? peak["peak2"] : peak["peak1"]
        printf "peak f32: %.1f GFLOP/s on 1 thread, %.1f on 2 (%s FMA loop)\n", peak["peak1"], peak["peak2"], peak["peak_isa"]
        printf "%-10s %12s %12s %8s %7s %s | %9s %9s %s | %s\n", "model", "Tessera ms", "PyTorch ms",
               "speedup", "goal", "met", "Ts MB", "PT MB", "mem<=PT", "GEMM FLOP/s share of peak"
        for (i = 1; i <= n; i++) {
            k = order[i]; r = pt[k] / t[k]
            share = gf[k] > 0 && p > 0 ? sprintf("Ts %.0f%%, PT %.0f%%", 100 * gf[k] / (t[k] / 1e3) / p, 100 * gf[k] / (pt[k] / 1e3) / p) : "-"
            printf "%-10s %12.4f %12.4f %7.2fx %6.1fx %-3s | %9.2f %9.2f %-7s | %s\n", k, t[k], pt[k], r,
                   goal[k], (r >= goal[k] ? "yes" : "NO"), m[k], pm[k], (m[k] <= pm[k] ? "yes" : "NO"), share
        }
        print "ms per training step (best of 1 and 2 threads and of the rounds on each side); MB = the"
        print "largest resident-set growth during the timed steps (peak RSS minus RSS before them,"
        print "/proc/self/status VmHWM); share = the step'"'"'s GEMM FLOPs / its time / the 2-thread peak"
        print "(the MLP goal: >= 85%)"
    }' "$tmp/peak.txt" "$tmp/t1.txt" "$tmp/t2.txt" "$tmp/torch.txt"
