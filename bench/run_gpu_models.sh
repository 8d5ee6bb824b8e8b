#!/bin/sh
# run_gpu_models.sh — issue 57's real-model training steps: Tessera (bench_gpu_models) beside
# PyTorch (bench_gpu_models_torch.py) in one run, as a table: Tessera ms per step, PyTorch's best
# of eager and torch.compile (and which), the ratio PyTorch / Tessera (above 1: Tessera faster),
# the goal (1.1x for gpt2_124m_bf16 and resnet50_amp) and whether it is met.
# Usage: bench/run_gpu_models.sh [BUILD_DIR] [quick]   (builds nothing; BUILD_DIR: "build")
# Environment: PYTHON (bench_env.sh); BENCH_TORCH_COMPILE (default "goal": the two goal lines
# compiled too; "1": every line; "0": eager only) and the script's other knobs
# (BENCH_TORCH_COMPILE_MODE, BENCH_TORCH_CUDNN_BENCHMARK, BENCH_TORCH_GPT=nanogpt); BENCH_GPU_ONLY
# (one line, both sides); BENCH_GPU_TS_OUT / BENCH_GPU_TORCH_OUT: files holding the two programs'
# output to tabulate instead of running them (to check this table without a GPU).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
mode=${2:-}
. "$here/bench_env.sh"
BENCH_TORCH_COMPILE=${BENCH_TORCH_COMPILE:-goal}
export BENCH_TORCH_COMPILE
tmp=$(mktemp -d)
ts_rc=0
torch_rc=0
trap 'rm -rf "$tmp"' EXIT
bench_header "$build"

if [ -n "${BENCH_GPU_TS_OUT:-}" ]; then
    cp "$BENCH_GPU_TS_OUT" "$tmp/ts.txt"
else
    bin="$build/bench/bench_gpu_models"
    [ -x "$bin" ] || { echo "run_gpu_models.sh: $bin not found; build first" >&2; exit 1; }
    # shellcheck disable=SC2086 # an empty mode must pass no argument
    "$bin" $mode >"$tmp/ts.txt" || ts_rc=$? # 1: a line failed (its "failed" line); table first
fi
if [ -n "${BENCH_GPU_TORCH_OUT:-}" ]; then
    cp "$BENCH_GPU_TORCH_OUT" "$tmp/torch.txt"
else
    # shellcheck disable=SC2086
    "$PYTHON" "$here/bench_gpu_models_torch.py" $mode >"$tmp/torch.txt" || torch_rc=$?
fi

# A side that skipped (no GPU, no CUDA build, torch without CUDA) says why and ends the run.
if grep -h 'SKIP:' "$tmp/ts.txt" "$tmp/torch.txt"; then exit 0; fi
grep -h '^#' "$tmp/ts.txt" "$tmp/torch.txt" || true
awk '
    /^#/ { next }
    # "<name>: <what> failed: ...": no value for that side
    $1 ~ /:$/ {
        k = $1; sub(/:$/, "", k); sub(/_compile$/, "", k)
        if (!(k in seen)) { seen[k] = 1; order[++n] = k }
        note[++nn] = (FILENAME ~ /ts.txt$/ ? "Tessera " : "PyTorch ") $0
        next
    }
    NF < 3 { next }
    FILENAME ~ /ts.txt$/ { if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }; t[$1] = $2; next }
    {
        k = $1; how = "eager"
        if (k ~ /_compile$/) { sub(/_compile$/, "", k); how = "compile" }
        if (!(k in seen)) { seen[k] = 1; order[++n] = k }
        if ($2 + 0 > 0 && (!(k in pt) || $2 + 0 < pt[k] + 0)) { pt[k] = $2; which[k] = how }
        if (how == "eager") eager[k] = $2; else comp[k] = $2
    }
    END {
        goal["gpt2_124m_bf16"] = 1.1; goal["resnet50_amp"] = 1.1
        for (i = 1; i <= nn; i++) print note[i]
        printf "%-22s %12s %12s %8s %9s %6s %s\n", "name (ms/step)", "Tessera", "PyTorch",
               "best of", "ratio", "goal", "met"
        for (i = 1; i <= n; i++) {
            k = order[i]
            g = k in goal ? goal[k] "x" : "-"
            if (t[k] + 0 > 0 && pt[k] + 0 > 0) {
                r = pt[k] / t[k]
                printf "%-22s %12.4f %12.4f %8s %8.3fx %6s %s\n", k, t[k], pt[k], which[k], r, g,
                       (k in goal ? (r >= goal[k] ? "yes" : "NO") : "-")
            } else {
                # a missing or failed measurement cannot meet its goal
                printf "%-22s %12s %12s %8s %9s %6s %s\n", k, (t[k] == "" ? "-" : t[k]),
                       (pt[k] == "" ? "-" : pt[k]), (which[k] == "" ? "-" : which[k]), "-", g,
                       (k in goal ? "NO" : "-")
            }
        }
        for (i = 1; i <= n; i++) {
            k = order[i]
            if (k in eager && k in comp)
                printf "PyTorch %s: eager %s ms, torch.compile %s ms\n", k, eager[k], comp[k]
        }
        print "ratio: PyTorch ms / Tessera ms per training step (above 1: Tessera faster); PyTorch:"
        print "the best of eager and torch.compile (compilation excluded). Times: medians of rounds"
        print "after warm-up."
    }' "$tmp/ts.txt" "$tmp/torch.txt"
if [ "$ts_rc" -ne 0 ] || [ "$torch_rc" -ne 0 ]; then
    echo "run_gpu_models.sh: bench_gpu_models exited with $ts_rc, bench_gpu_models_torch.py with" \
        "$torch_rc (a \"failed\" line above says why)" >&2
    exit 1
fi
