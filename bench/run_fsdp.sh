#!/bin/sh
# run_fsdp.sh — sharded data parallel's training step, Tessera (bench_fsdp under mpirun, 2 ranks x
# 1 thread) beside PyTorch's FSDP2 (fully_shard per block then the model, gloo; bench_fsdp_torch.py,
# 2 processes x 1 thread), and Tessera's own DDP, same machine: the GPT-mini and the 124M GPT.
# Usage: bench/run_fsdp.sh [BUILD_DIR] [ITERS] [MODELS]   (builds nothing; BUILD_DIR "build",
#   ITERS 5 timed steps after 2 warm-up ones, MODELS "gptmini gpt124m")
# ROUNDS (1) of each run, each a fresh job; each side keeps its best step and its lowest peak.
# MEMORY=1: also bench_fsdp memory on 4 ranks (the 124M GPT's peak beside the formula).
# PLAIN=1: also both sides' step without a wrapper (each rank alone on its batch, both ranks at
#   once): the kernels' share of the ratio.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
iters=${2:-5}
models=${3:-gptmini gpt124m}
. "$here/bench_env.sh"
bin="$build/bench/bench_fsdp"
[ -x "$bin" ] || { echo "run_fsdp.sh: $bin not found; build first" >&2; exit 1; }
root=""; [ "$(id -u)" = 0 ] && root=--allow-run-as-root
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench_header "$build"
export OMP_NUM_THREADS=1 TS_NUM_THREADS=1
for round in $(seq "${ROUNDS:-1}"); do
    for m in $models; do
        for mode in fsdp ddp ${PLAIN:+plain}; do
            mpirun -np 2 $root --oversubscribe --bind-to none "$bin" speed "$m" "$mode" "$iters" >>"$tmp/ts.txt"
        done
        for mode in fsdp ${PLAIN:+plain}; do
            "$PYTHON" "$here/bench_fsdp_torch.py" "$m" "$mode" "$iters" >>"$tmp/pt.txt"
        done
    done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '
    function max2(a, b) { return a > b ? a : b }
    function keep(arr, k, v) { if (!(k in arr) || v < arr[k]) arr[k] = v }
    $3 == "step" { if (FILENAME ~ /ts.txt/) keep(ts, $1 SUBSEP $2 SUBSEP "step", $4); else keep(pt, $1 SUBSEP $2 SUBSEP "step", $4)
                   if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
    $3 == "params" { params[$1] = $4 }
    $3 == "cpu_process_ms" || $3 == "cpu_thread_ms" { if (FILENAME ~ /ts.txt/) keep(ts, $1 SUBSEP $2 SUBSEP $3, $4) }
    $3 == "peak_rss_mb" || $3 == "peak_alloc_mb" {
        v = $4; for (i = 5; i <= NF; i++) v = max2(v, $i)
        if (FILENAME ~ /ts.txt/) keep(ts, $1 SUBSEP $2 SUBSEP $3, v); else keep(pt, $1 SUBSEP $2 SUBSEP $3, v) }
    END {
        printf "%-8s %7s | %9s %9s %7s | %9s %7s | %9s %9s %7s | %9s %9s %9s %9s\n", "model", "Mparams", "Ts FSDP", "PT FSDP",
               "PT/Ts", "Ts DDP", "FSDP/DDP", "Ts plain", "PT plain", "PT/Ts", "Ts alloc", "Ts RSS", "PT RSS", "DDP RSS"
        for (i = 1; i <= n; i++) {
            m = order[i]
            f = ts[m, "fsdp", "step"]; d = ts[m, "ddp", "step"]; p = pt[m, "fsdp", "step"]
            tp = ts[m, "plain", "step"]; pp = pt[m, "plain", "step"]
            printf "%-8s %7.1f | %9.1f %9.1f %6.2fx | %9.1f %7.2fx | %9.1f %9.1f %6.2fx | %9.1f %9.1f %9.1f %9.1f\n", m, params[m], f, p,
                   p / f, d, f / d, tp, pp, (tp > 0 ? pp / tp : 0), ts[m, "fsdp", "peak_alloc_mb"], ts[m, "fsdp", "peak_rss_mb"],
                   pt[m, "fsdp", "peak_rss_mb"], ts[m, "ddp", "peak_rss_mb"]
        }
        print "ms: median of ITERS steps (after 2 warm-up ones) of rank 0, 2 ranks x 1 thread, AdamW, stage 3"
        print "(FSDP2 FULL_SHARD), each block a unit. Goals: PT/Ts >= 1.5x, FSDP/DDP <= 1.3x, Ts RSS <= PT RSS."
        print "MB: the larger rank'"'"'s peak over the timed steps: Ts alloc = Tessera'"'"'s allocator statistics;"
        print "RSS = peak resident set (VmHWM, reset after the warm-up) less the resident set before the model"
        print "was built, the one measure both sides have (PyTorch keeps no CPU allocator statistics)."
        print "plain (PLAIN=1): no wrapper, each rank steps alone, both at once (0: not run)."
        for (i = 1; i <= n; i++)
            for (j = 1; j <= 3; j++) {
                mode = j == 1 ? "fsdp" : j == 2 ? "ddp" : "plain"
                if ((order[i], mode, "cpu_process_ms") in ts)
                    printf "Ts %s %s, rank 0'"'"'s CPU ms a step: process %.1f, calling thread %.1f, the rest %.1f\n",
                           order[i], mode, ts[order[i], mode, "cpu_process_ms"], ts[order[i], mode, "cpu_thread_ms"],
                           ts[order[i], mode, "cpu_process_ms"] - ts[order[i], mode, "cpu_thread_ms"]
            }
    }' "$tmp/ts.txt" "$tmp/pt.txt"
if [ "${MEMORY:-0}" = 1 ]; then
    mpirun -np 4 $root --oversubscribe --bind-to none "$bin" memory
fi
