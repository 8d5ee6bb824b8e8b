#!/bin/sh
# run_gpu_kernels.sh — the CUDA issue's fused kernels alone (bench_gpu_kernels) beside PyTorch's on
# the same shapes (bench_gpu_kernels_torch.py), in one run, as a table: Tessera ms, PyTorch ms, the
# ratio PyTorch / Tessera (above 1: Tessera faster) and the goal (1.0x: each fused kernel at least
# as fast as PyTorch's).
# Usage: bench/run_gpu_kernels.sh [BUILD_DIR] [quick]   (builds nothing; BUILD_DIR: "build")
# Environment: PYTHON (bench_env.sh); BENCH_GPU_TS_OUT / BENCH_GPU_TORCH_OUT: files holding the
# two programs' output to tabulate instead of running them.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
mode=${2:-}
. "$here/bench_env.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench_header "$build"

if [ -n "${BENCH_GPU_TS_OUT:-}" ]; then
    cp "$BENCH_GPU_TS_OUT" "$tmp/ts.txt"
else
    bin="$build/bench/bench_gpu_kernels"
    [ -x "$bin" ] || { echo "run_gpu_kernels.sh: $bin not found; build first" >&2; exit 1; }
    # shellcheck disable=SC2086 # an empty mode must pass no argument
    "$bin" $mode >"$tmp/ts.txt"
fi
if [ -n "${BENCH_GPU_TORCH_OUT:-}" ]; then
    cp "$BENCH_GPU_TORCH_OUT" "$tmp/torch.txt"
else
    # shellcheck disable=SC2086
    "$PYTHON" "$here/bench_gpu_kernels_torch.py" $mode >"$tmp/torch.txt"
fi
if grep -h 'SKIP:' "$tmp/ts.txt" "$tmp/torch.txt"; then exit 0; fi
grep -h '^#' "$tmp/ts.txt" "$tmp/torch.txt" || true
# the raw lines first, so that the numbers survive whatever happens to the table
sed 's/^/# tessera: /' "$tmp/ts.txt" | grep -v '^# tessera: #' || true
sed 's/^/# pytorch: /' "$tmp/torch.txt" | grep -v '^# pytorch: #' || true
awk '
    /^#/ { next }
    $1 ~ /:$/ { k = $1; sub(/:$/, "", k); if (!(k in seen)) { seen[k] = 1; order[++n] = k }
                note[++nn] = (FILENAME ~ /ts.txt$/ ? "Tessera " : "PyTorch ") $0; next }
    { if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
      if (FILENAME ~ /ts.txt$/) t[$1] = $2; else pt[$1] = $2 }
    END {
        for (i = 1; i <= nn; i++) print note[i]
        printf "%-28s %12s %12s %9s %6s %s\n", "name (ms)", "Tessera", "PyTorch", "ratio", "goal", "met"
        for (i = 1; i <= n; i++) {
            k = order[i]
            # the comparison in parentheses: a bare ">" among the printf arguments redirects
            if (t[k] + 0 > 0 && pt[k] + 0 > 0)
                printf "%-28s %12.4f %12.4f %8.3fx %6s %s\n", k, t[k], pt[k], pt[k] / t[k], "1.0x",
                       ((pt[k] / t[k] >= 1) ? "yes" : "NO")
            else
                printf "%-28s %12s %12s %9s %6s %s\n", k, (k in t ? t[k] : "-"),
                       (k in pt ? pt[k] : "-"), "-", "1.0x", "NO"
        }
        print "ratio: PyTorch ms / Tessera ms (above 1: Tessera faster); each a forward + backward"
        print "(adamw: one step), medians of rounds after warm-up."
    }' "$tmp/ts.txt" "$tmp/torch.txt"
