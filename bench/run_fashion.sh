#!/bin/sh
# run_fashion.sh — `tessera train` on Fashion-MNIST (MLP and LeNet-5) beside its PyTorch twin
# (train_fashion_torch.py), each the best of 1 and 2 threads, and the loader alone (bench_loader).
# Usage: bench/run_fashion.sh [BUILD_DIR] [EPOCHS]   (builds nothing; defaults: build, 1 epoch)
# Environment: PYTHON (bench_env.sh: PyTorch 2.x from PyPI when installed), BENCH_ISA, DATA_DIR (/usr/share/datasets/fashion-mnist), THREADS
# (the thread counts tried on both sides: "1 2"), ROUNDS (2). Each round runs, per model, Tessera
# then PyTorch, and each side keeps its best round: a shared machine's slow spells (seen here: a
# minute of everything 30% slower) then hit both sides alike instead of deciding the ratio.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
epochs=${2:-1}
. "$here/bench_env.sh"
python=$PYTHON
data=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
threads=${THREADS:-1 2}
rounds=${ROUNDS:-2}
tessera="$build/tessera"
loader="$build/bench/bench_loader"

for b in "$tessera" "$loader"; do
    [ -x "$b" ] || { echo "run_fashion.sh: $b not found; build first: cmake --build $build" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bench_header "$build"

# Tessera: s/epoch from metrics.jsonl ("seconds": the training batches plus the test pass, as the
# trainer prints it), test accuracy of the last epoch, and the training rate (batch/s) of the last
# progress line, which counts the training batches alone.
# Then PyTorch on the same model, with the lr, momentum and schedule the trainer printed.
for round in $(seq "$rounds"); do
    for model in mlp lenet; do
        for th in $threads; do
            out="$tmp/ts-$model-$th"
            echo "Tessera: TS_NUM_THREADS=$th $tessera train --model $model --epochs $epochs --threads $th" >&2
            TS_NUM_THREADS=$th "$tessera" train --model "$model" --data fashion-mnist --data-dir "$data" \
                --epochs "$epochs" --threads "$th" --progress lines --log "$out.log" >"$out.txt"
            awk -v model="$model" -v th="$th" '
                FILENAME ~ /metrics.jsonl$/ && /"seconds"/ {
                    match($0, /"seconds": *[0-9.eE+-]+/); s = substr($0, RSTART, RLENGTH); sub(/.*: */, "", s)
                    match($0, /"test_accuracy": *[0-9.eE+-]+/); a = substr($0, RSTART, RLENGTH); sub(/.*: */, "", a)
                    sum += s; n++; acc = a; next
                }
                FILENAME ~ /txt$/ && / batch\/s/ {
                    for (i = 1; i <= NF; i++) {
                        if ($(i) == "batch/s") rate = $(i - 1)
                        if ($(i) == "batch") { nb = $(i + 1); sub(/.*\//, "", nb) }
                    }
                }
                FILENAME ~ /txt$/ && / lr / {
                    for (i = 1; i <= NF; i++) {
                        if ($(i) == "lr") lr = $(i + 1)
                        if ($(i) == "momentum") mom = $(i + 1)
                    }
                    sub(/,$/, "", lr); sub(/,$/, "", mom)
                    sched = ($0 ~ /cosine/) ? "cosine" : "constant"
                }
                END { printf "%s %d %.4f %s %s %s %s %s %s\n", model, th, sum / n, acc, rate, lr, mom, sched, nb }
            ' "$out.txt" "$out.log/metrics.jsonl" >>"$tmp/tessera.txt"
        done
        set -- $(awk -v m="$model" '$1 == m { print $6, $7, $8; exit }' "$tmp/tessera.txt")
        echo "PyTorch: $python $here/train_fashion_torch.py --models $model --epochs $epochs --lr $1 --momentum $2 --schedule $3 --threads $(echo $threads | tr ' ' ,)" >&2
        if ! "$python" "$here/train_fashion_torch.py" --models "$model" --epochs "$epochs" --lr "$1" \
            --momentum "$2" --schedule "$3" --threads "$(echo $threads | tr ' ' ,)" --data-dir "$data" >>"$tmp/torch.txt"; then
            echo "run_fashion.sh: the PyTorch side failed (is torch installed for $python?)" >&2
            exit 1
        fi
    done
done

echo "Loader: $loader" >&2
"$loader" >"$tmp/loader.txt"

echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
cat "$tmp/tessera.txt" "$tmp/torch.txt" | awk '{ print "  raw: " $0 }'
cat "$tmp/loader.txt" | awk '{ print "  raw: " $0 }'
echo

# Exit status 0 whatever the outcome: the table is the result.
awk -v epochs="$epochs" -v rounds="$rounds" '
    FILENAME ~ /tessera.txt$/ {
        if (!($1 in ts) || $3 < ts[$1]) { ts[$1] = $3; tacc[$1] = $4; rate[$1] = $5; tth[$1] = $2; nb[$1] = $9 }
        if (!seen[$1]++) order[++n] = $1
        next
    }
    FILENAME ~ /torch.txt$/ && $1 == "best" {
        if (!($2 in pt) || $5 < pt[$2]) { pt[$2] = $5; ptr[$2] = $4; pacc[$2] = $6; pth[$2] = $3 }
        next
    }
    FILENAME ~ /torch.txt$/ && $1 == "epoch" { next }
    FILENAME ~ /loader.txt$/ { ld[$1] = $3; if ($3 > lbest) { lbest = $3; lname = $1 } }
    END {
        printf "%-6s %14s %14s %10s %6s %8s %8s  %s\n", "model", "Tessera s/ep", "PyTorch s/ep",
               "Ts/PT", "goal", "Ts acc", "PT acc", "met"
        for (i = 1; i <= n; i++) {
            k = order[i]
            if (!(k in pt)) { printf "%-6s %14.3f %14s\n", k, ts[k], "missing"; continue }
            r = ts[k] / pt[k]
            printf "%-6s %9.3f (%dt) %9.3f (%dt) %10.3f %6s %8.4f %8.4f  %s\n", k, ts[k], tth[k], pt[k],
                   pth[k], r, "<=0.5", tacc[k], pacc[k], (r <= 0.5 ? "yes" : "NO")
        }
        print ""
        printf "s/epoch: training + the test pass, mean of %d epoch(s); (Nt): the better thread count;\n", epochs
        printf "each side its best of %d rounds, the two sides alternating\n", rounds
        for (i = 1; i <= n; i++) {
            k = order[i]
            if (k in pt && rate[k] > 0)
                printf "  %s training batches alone: Tessera %.3f s/ep (%.1f batch/s), PyTorch %.3f s/ep\n",
                       k, nb[k] / rate[k], rate[k], ptr[k]
        }
        print ""
        train = rate["lenet"] * 64
        printf "loader: %.0f samples/s with 0 workers, %.0f with 1, %.0f with 2 (bench_loader, synthetic 60k)\n",
               ld["loader_w0"], ld["loader_w1"], ld["loader_w2"]
        if (train > 0)
            printf "loader vs LeNet training: best %.0f / %.0f samples/s = %.1fx (goal >= 10x): %s\n",
                   lbest, train, lbest / train, (lbest >= 10 * train ? "yes" : "NO")
    }
' "$tmp/tessera.txt" "$tmp/torch.txt" "$tmp/loader.txt"
