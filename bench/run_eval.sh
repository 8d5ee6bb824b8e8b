#!/bin/sh
# run_eval.sh — eval-mode inference of ResNet-20, ResNet-18 (CIFAR, 32x32) and ResNet-18 (224x224)
# at batch 1 and 64: Tessera with batch-norm folded into the convolutions (fused) and without
# (unfused), both under ts_no_grad, and with autograd on (grad); PyTorch under torch.no_grad,
# torch.inference_mode and with autograd on; each side at 1 and 2 threads, every figure the best
# of its runs (bench/results/resnet.md, "Eval speed"). PYTHON and BENCH_ISA as in bench_env.sh.
# Usage: bench/run_eval.sh [BUILD_DIR] [MODEL [BATCH]]   (builds nothing; BUILD_DIR: "build")
# ROUNDS (2): each round runs Tessera then PyTorch at 1 and 2 threads, and each figure keeps its
# best, so a slow spell of a shared machine hits both sides.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
model=${2:-}
batch=${3:-}
. "$here/bench_env.sh"
bin="$build/bench/bench_eval"
[ -x "$bin" ] || { echo "run_eval.sh: $bin not found; build first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench_header "$build"
for round in $(seq "${ROUNDS:-2}"); do
    for th in 1 2; do
        TS_NUM_THREADS=$th "$bin" $model $batch | sed "s/\$/ $th/" >>"$tmp/ts.txt"
        TORCH_THREADS=$th "$PYTHON" "$here/bench_eval_torch.py" $model $batch |
            sed "s/\$/ $th/" >>"$tmp/pt.txt"
    done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
# lines "model batch mode wall_ms cpu_ms threads": the best per (model, batch, mode, threads)
awk '
    FILENAME ~ /ts.txt/ { k = $1 " " $2; s = "ts_" $3 }
    FILENAME ~ /pt.txt/ { k = $1 " " $2; s = "pt_" $3 }
    {
        key = k SUBSEP s SUBSEP $6
        if (!(key in t) || $4 < t[key]) t[key] = $4
        if (!(key in c) || $5 < c[key]) c[key] = $5
        if (!(k in seen)) { seen[k] = 1; order[++n] = k }
    }
    function best(k, s) { a = t[k, s, 1]; b = t[k, s, 2]; return (b != "" && b < a) ? b : a }
    function lo(a, b) { return a < b ? a : b }
    END {
        print "wall time, ms: each the best of 1 and 2 threads (fold = unfused / fused; vs PT = PyTorch best of no_grad and inference_mode / Tessera fused, > 1: Tessera faster)"
        printf "%-16s %9s %9s %9s %6s | %9s %9s %9s | %6s %s\n", "model batch", "Ts fused", "unfused",
               "Ts grad", "fold", "PT nograd", "PT infer", "PT grad", "vs PT", "(1 thread, 2 threads)"
        for (i = 1; i <= n; i++) {
            k = order[i]
            f = best(k, "ts_fused"); u = best(k, "ts_unfused"); g = best(k, "ts_grad")
            pn = best(k, "pt_no_grad"); pi = best(k, "pt_inference_mode"); pg = best(k, "pt_grad")
            p1 = lo(t[k, "pt_no_grad", 1], t[k, "pt_inference_mode", 1])
            p2 = lo(t[k, "pt_no_grad", 2], t[k, "pt_inference_mode", 2])
            printf "%-16s %9.2f %9.2f %9.2f %5.2fx | %9.2f %9.2f %9.2f | %5.2fx (%.2fx, %.2fx)\n", k, f, u, g,
                   u / f, pn, pi, pg, lo(pn, pi) / f, p1 / t[k, "ts_fused", 1], p2 / t[k, "ts_fused", 2]
        }
        print ""
        print "CPU time of the 1-thread runs, ms (the compute itself when other work shares the host)"
        printf "%-16s %9s %9s %9s %6s | %9s %9s %9s | %6s\n", "model batch", "Ts fused", "unfused",
               "Ts grad", "fold", "PT nograd", "PT infer", "PT grad", "vs PT"
        for (i = 1; i <= n; i++) {
            k = order[i]
            f = c[k, "ts_fused", 1]; u = c[k, "ts_unfused", 1]; g = c[k, "ts_grad", 1]
            pn = c[k, "pt_no_grad", 1]; pi = c[k, "pt_inference_mode", 1]; pg = c[k, "pt_grad", 1]
            printf "%-16s %9.2f %9.2f %9.2f %5.2fx | %9.2f %9.2f %9.2f | %5.2fx\n", k, f, u, g, u / f,
                   pn, pi, pg, lo(pn, pi) / f
        }
    }' "$tmp/ts.txt" "$tmp/pt.txt"
