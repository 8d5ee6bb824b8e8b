#!/bin/sh
# run_train.sh — training-step time and training-time memory growth of the issue's models on the
# cpu, Tessera (bench_train) beside PyTorch (bench_train_torch.py, best of 1 and 2 threads), with
# the MLPs' and ResNets' GFLOP/s and share of the host's peak (PEAK_GFLOPS, else measured, else
# estimated), and issue 14's goals. PYTHON and BENCH_ISA as in bench_env.sh (PyTorch 2.x from PyPI
# when installed); the header names the CPU and both sides.
# Usage: bench/run_train.sh [BUILD_DIR] [quick|full [MODEL]]   (builds nothing; BUILD_DIR defaults to
# "build"; MODEL runs one case, e.g. resnet18)
# ROUNDS (2): each round runs Tessera (1 and 2 threads) then PyTorch, and each side keeps its best
# time, so a slow spell of a shared machine hits both sides instead of deciding a ratio.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
mode=${2:-}
only=${3:-}
. "$here/bench_env.sh"
python=$PYTHON
bin="$build/bench/bench_train"
[ -x "$bin" ] || { echo "run_train.sh: $bin not found; build first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench_header "$build"
# Tessera: best of 1 and 2 threads too, per model
for round in $(seq "${ROUNDS:-2}"); do
    TS_NUM_THREADS=1 "$bin" $mode $only >>"$tmp/t1.txt"
    TS_NUM_THREADS=2 "$bin" $mode $only >>"$tmp/t2.txt"
    "$python" "$here/bench_train_torch.py" $mode $only >>"$tmp/torch.txt"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
# the host's peak f32 GFLOP/s over the (at most 2) threads used: PEAK_GFLOPS, else measured by
# bench_xformer's FMA loop (bench/bench_peak.h) where it is built, else an estimate of
# cores x MHz x 32 (two 256-bit FMA pipes a core, as AVX2 machines and AMD's AVX-512 ones have)
if [ -n "${PEAK_GFLOPS:-}" ]; then
    peak=$PEAK_GFLOPS how="PEAK_GFLOPS"
elif [ -x "$build/bench/bench_xformer" ] && "$build/bench/bench_xformer" peak >"$tmp/peak.txt"; then
    peak=$(awk '{ v[$1] = $2 } END { printf "%.1f", (v["peak2"] > v["peak1"] ? v["peak2"] : v["peak1"]) }' "$tmp/peak.txt")
    how="measured (bench_xformer peak)"
else
    cores=$(nproc); [ "$cores" -gt 2 ] && cores=2
    peak=$(awk -v c="$cores" '/^cpu MHz/ { m = $4 } END { printf "%.0f", c * m * 32 / 1000 }' /proc/cpuinfo)
    how="estimated as cores x MHz x 32; set PEAK_GFLOPS to the real figure"
fi
awk -v peak="$peak" -v how="$how" '
    FILENAME ~ /t[12].txt/ {
        f[$1] = $4
        if (!($1 in t)) { t[$1] = $2; m[$1] = $3; order[++n] = $1; next }
        if ($2 < t[$1]) t[$1] = $2
        if ($3 > m[$1]) m[$1] = $3
        next
    }
    { if (!($1 in pt) || $2 < pt[$1]) pt[$1] = $2; if ($3 > pm[$1]) pm[$1] = $3 }
    END {
        # issue 14: SimpleCNN >= 2x, SimpleNN >= 2.5x, MLP >= 1.1x (its GEMMs at >= 85% of peak),
        # linear regression >= 20x
        goal["linreg"] = 20; goal["simplenn"] = 2.5; goal["simplecnn"] = 2; goal["mlp"] = 1.1
        goal["resnet18"] = 1.2; goal["resnet20"] = 1.2
        printf "%-10s %12s %12s %8s %7s %s | %9s %9s %s | %s\n", "model", "Tessera ms", "PyTorch ms",
               "speedup", "goal", "met", "Ts MB", "PT MB", "mem<=PT", "GFLOP/s Ts PT, share of peak"
        for (i = 1; i <= n; i++) {
            k = order[i]
            if (k == "mlp_gemms") continue  # no PyTorch counterpart: the line under the table
            r = pt[k] / t[k]
            fl = ""
            if (f[k] > 0) {
                gt = f[k] / (t[k] / 1e3); gp = f[k] / (pt[k] / 1e3)
                fl = sprintf("%6.1f %6.1f, %3.0f%% %3.0f%%", gt, gp, 100 * gt / peak, 100 * gp / peak)
            }
            printf "%-10s %12.4f %12.4f %7.2fx %6.1fx %-3s | %9.2f %9.2f %-7s | %s\n", k, t[k], pt[k], r,
                   goal[k], (r >= goal[k] ? "yes" : "NO"), m[k], pm[k], (m[k] <= pm[k] ? "yes" : "NO"), fl
        }
        if ("mlp_gemms" in t) {
            gg = f["mlp_gemms"] / (t["mlp_gemms"] / 1e3)
            printf "MLP b256 step'"'"'s 8 GEMMs alone: %.4f ms, %.1f GFLOP/s = %.0f%% of peak (goal >= 85%%: %s)\n",
                   t["mlp_gemms"], gg, 100 * gg / peak, (gg >= 0.85 * peak ? "yes" : "NO")
        }
        print "ms per training step (best of 1 and 2 threads and of the rounds on each side); MB = the"
        print "largest resident-set growth during the timed steps (peak RSS minus RSS before them,"
        print "/proc/self/status VmHWM); GFLOP/s = the model'"'"'s multiply-adds x 2 x 3 (forward, input and"
        print "weight gradients; the MLPs'"'"' first layer without the input gradient) per step over the whole"
        print "step'"'"'s time, as a share of the host'"'"'s peak f32 rate, " peak " GFLOP/s"
        print "(" how ")"
    }' "$tmp/t1.txt" "$tmp/t2.txt" "$tmp/torch.txt"
