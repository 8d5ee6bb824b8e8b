#!/bin/sh
# run_capture.sh — issue 30 on the cpu: a captured-and-replayed step (bench_capture) against
# Tessera's eager step and PyTorch's eager step (bench_capture_torch.py), same run, where per-op work
# shows: linear regression and SimpleNN training steps, batch-1 inference of LeNet-5 and of the
# GPT-mini. Each side best of 1 and 2 threads (Tessera: TS_NUM_THREADS; PyTorch: set_num_threads)
# and of the rounds; ms per step = the median of single steps. bench_capture checks, untimed, that
# each replay's outputs equal its eager step's bit for bit ("# check" lines) and fails otherwise;
# a case whose capture fails shows the error instead of a replay time. PYTHON and BENCH_ISA as in
# bench_env.sh; the header names the CPU and both sides.
# Usage: bench/run_capture.sh [BUILD_DIR] [quick]   (builds nothing; BUILD_DIR defaults to "build")
# ROUNDS (2): each round runs Tessera (1 and 2 threads) then PyTorch.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
mode=${2:-}
. "$here/bench_env.sh"
bin="$build/bench/bench_capture"
[ -x "$bin" ] || { echo "run_capture.sh: $bin not found; build first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench_header "$build"
for _ in $(seq "${ROUNDS:-2}"); do
    TS_NUM_THREADS=1 "$bin" $mode >>"$tmp/ts.txt"
    TS_NUM_THREADS=2 "$bin" $mode >>"$tmp/ts.txt"
    "$PYTHON" "$here/bench_capture_torch.py" $mode >>"$tmp/torch.txt"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '/^# check/ && !seen[$0]++' "$tmp/ts.txt"
awk '
    /^#/ { next }
    FILENAME ~ /ts.txt/ {
        k = $1
        if (!(k in eager)) { order[++n] = k; eager[k] = $2; et[k] = "" }
        if ($2 <= eager[k]) eager[k] = $2
        if ($3 == "error") { err[k] = substr($0, index($0, " error ") + 7); next }
        if (!(k in replay) || $3 < replay[k]) { replay[k] = $3; rt[k] = $5 }
        next
    }
    { if (!(($1) in pt) || $2 < pt[$1]) { pt[$1] = $2; ptt[$1] = $3 } }
    END {
        printf "%-12s %12s %12s %12s %9s %9s | %s\n", "case", "PyTorch ms", "Ts eager ms",
               "Ts replay ms", "gain", "vs torch", "replay threads"
        for (i = 1; i <= n; i++) {
            k = order[i]
            if (k in replay) {
                printf "%-12s %12.4f %12.4f %12.4f %8.2fx %8.2fx | %d\n", k, pt[k], eager[k],
                       replay[k], eager[k] / replay[k], pt[k] / replay[k], rt[k]
            } else {
                printf "%-12s %12.4f %12.4f   capture failed: %s\n", k, pt[k], eager[k], err[k]
            }
        }
        print "ms per step: the median of single steps, each column its best of 1 and 2 threads and"
        print "of the rounds; replay = ts_copy_ of the inputs into the static tensors + ts_graph_replay;"
        print "gain = Tessera eager / replay; vs torch = PyTorch eager / replay"
    }' "$tmp/ts.txt" "$tmp/torch.txt"
