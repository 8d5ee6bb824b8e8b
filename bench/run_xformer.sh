#!/bin/sh
# run_xformer.sh — attention and GPT-mini training on the cpu, Tessera (bench_xformer, 1 and 2
# threads) beside PyTorch 2.x (bench_xformer_torch.py, 1 and 2 threads), same run, each side its
# best; prints the host (CPU model, ISA, cores), PyTorch's version and BLAS, the measured peak f32
# FLOP/s and each case's share of it, and the peak RSS growth of each side.
# Usage: bench/run_xformer.sh [BUILD_DIR] [quick]   (builds nothing; BUILD_DIR defaults to "build")
# ROUNDS (2) of Tessera then PyTorch; PYTHON overrides the PyTorch interpreter.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
mode=${2:-}
if [ -z "${PYTHON:-}" ]; then
    if [ -x /opt/torch2/bin/torch-python ]; then PYTHON=/opt/torch2/bin/torch-python; else PYTHON=python3; fi
fi
bin="$build/bench/bench_xformer"
[ -x "$bin" ] || { echo "run_xformer.sh: $bin not found; build first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
isa=$(grep -o -w -m1 -e avx512f /proc/cpuinfo | head -1 || true)
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, ISA: ${isa:-no avx512f} $(grep -o -w -m1 avx2 /proc/cpuinfo | head -1)${TS_CPU_ISA:+ (Tessera capped at $TS_CPU_ISA)}"
echo "PyTorch: $("$PYTHON" -c 'import torch; print(torch.__version__, "BLAS mkl" if torch.backends.mkl.is_available() else "", "capability", torch.backends.cpu.get_cpu_capability())')"
"$bin" peak >"$tmp/peak.txt"
for round in $(seq "${ROUNDS:-2}"); do
    TS_NUM_THREADS=1 "$bin" $mode >>"$tmp/t.txt"
    TS_NUM_THREADS=2 "$bin" $mode >>"$tmp/t.txt"
    "$PYTHON" "$here/bench_xformer_torch.py" $mode >>"$tmp/torch.txt"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '
    FILENAME ~ /peak.txt/ { peak[$1] = $2; next }
    FILENAME ~ /t.txt/ {
        if (!($1 in t)) { t[$1] = $2; m[$1] = $3; gf[$1] = $4; order[++n] = $1; next }
        if ($2 < t[$1]) t[$1] = $2
        if ($3 > m[$1]) m[$1] = $3
        next
    }
    { if (!($1 in pt) || $2 < pt[$1]) pt[$1] = $2; if ($3 > pm[$1]) pm[$1] = $3 }
    END {
        goal["sdpa"] = 1.5; goal["gpt"] = 1.25
        p = peak["peak2"] > peak["peak1"] ? peak["peak2"] : peak["peak1"]
        printf "peak f32: %.1f GFLOP/s on 1 thread, %.1f on 2 (%s FMA loop)\n", peak["peak1"], peak["peak2"], peak["peak_isa"]
        printf "%-6s %11s %11s %8s %5s %-3s | %8s %8s | %9s %9s %s\n", "case", "Tessera ms", "PyTorch ms",
               "speedup", "goal", "met", "Ts peak", "PT peak", "Ts MB", "PT MB", "mem<PT"
        for (i = 1; i <= n; i++) {
            k = order[i]; r = pt[k] / t[k]
            printf "%-6s %11.3f %11.3f %7.2fx %4.2fx %-3s | %7.1f%% %7.1f%% | %9.1f %9.1f %s\n", k, t[k], pt[k], r,
                   goal[k], (r >= goal[k] ? "yes" : "NO"), 100 * gf[k] / (t[k] / 1e3) / p,
                   100 * gf[k] / (pt[k] / 1e3) / p, m[k], pm[k], (m[k] < pm[k] ? "yes" : "NO")
        }
        print "ms per step, each side its best of 1 and 2 threads and of the rounds; peak = share of the"
        print "host'"'"'s peak f32 FLOP/s (2 threads) at the useful FLOPs of the step; MB = resident-set"
        print "growth during the timed steps (VmHWM after minus VmRSS before)"
    }' "$tmp/peak.txt" "$tmp/t.txt" "$tmp/torch.txt"
