#!/bin/sh
# run_amp.sh — mixed precision against float32 on Fashion-MNIST: `tessera train` of the same model
# with and without --amp (same seed, same batches), printing each run's test accuracy and epoch
# time and the accuracy difference (issue 6's must-show: within 0.5 points).
# Usage: bench/run_amp.sh [BUILD_DIR] [EPOCHS] [MODEL]   (defaults: build, 2, lenet)
# Environment: DATA_DIR (/usr/share/datasets/fashion-mnist), AMP_ARGS (extra flags for the amp run,
# e.g. "--amp-dtype f16" or "--devices sim:0,sim:1").
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
epochs=${2:-2}
model=${3:-lenet}
data=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
tessera="$build/tessera"
[ -x "$tessera" ] || { echo "run_amp.sh: $tessera not found; build first" >&2; exit 1; }

. "$here/bench_env.sh"
bench_header "$build"
run() { # label, extra flags...
    label=$1
    shift
    start=$(date +%s.%N)
    out=$("$tessera" train --model "$model" --data fashion-mnist --data-dir "$data" \
        --epochs "$epochs" --progress none "$@")
    end=$(date +%s.%N)
    acc=$(printf '%s\n' "$out" | sed -n 's/^test accuracy: //p')
    awk -v l="$label" -v a="$acc" -v s="$start" -v e="$end" \
        'BEGIN { printf "%-24s test accuracy %s  %.1f s\n", l, a, e - s }' >&2
    echo "$acc"
}
f32=$(run "float32")
# shellcheck disable=SC2086
amp=$(run "--amp ${AMP_ARGS:-}" --amp ${AMP_ARGS:-})
awk -v a="$amp" -v f="$f32" \
    'BEGIN { printf "accuracy difference (amp - f32): %+.2f points (goal: within 0.5)\n", (a - f) * 100 }'
