#!/bin/sh
# run_gpu.sh — the CUDA issue's GPU benchmarks: Tessera (bench_gpu) beside PyTorch CUDA
# (bench_gpu_torch.py) in one run, as a table with the ratio, the goal and whether it is met: the
# training steps eagerly and captured in CUDA graphs (*_graph), the GEMMs, the copies.
# Usage: bench/run_gpu.sh [BUILD_DIR] [quick]   (builds nothing; BUILD_DIR defaults to "build")
# Environment: PYTHON (bench_env.sh: PyTorch 2.x from PyPI when installed, else python3: it needs
# CUDA); BENCH_GPU_TS_OUT and
# BENCH_GPU_TORCH_OUT name files holding the two programs' output to tabulate instead of running
# them (to check this table without a GPU).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
mode=${2:-}
. "$here/bench_env.sh"
python=$PYTHON
tmp=$(mktemp -d)
ts_rc=0
trap 'rm -rf "$tmp"' EXIT
bench_header "$build"

if [ -n "${BENCH_GPU_TS_OUT:-}" ]; then
    cp "$BENCH_GPU_TS_OUT" "$tmp/ts.txt"
else
    bin="$build/bench/bench_gpu"
    [ -x "$bin" ] || { echo "run_gpu.sh: $bin not found; build first" >&2; exit 1; }
    # shellcheck disable=SC2086 # an empty mode must pass no argument
    "$bin" $mode >"$tmp/ts.txt" || ts_rc=$? # 1: a replayed loss differs (# check); table first
fi
if [ -n "${BENCH_GPU_TORCH_OUT:-}" ]; then
    cp "$BENCH_GPU_TORCH_OUT" "$tmp/torch.txt"
else
    # shellcheck disable=SC2086
    "$python" "$here/bench_gpu_torch.py" $mode >"$tmp/torch.txt"
fi

# A side that skipped (no GPU, no CUDA build, torch without CUDA) says why and ends the run.
if grep -h 'SKIP:' "$tmp/ts.txt" "$tmp/torch.txt"; then exit 0; fi
grep -h '^#' "$tmp/ts.txt" "$tmp/torch.txt" || true
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '
    /^#/ { next }
    # "<name>: capture failed: ..." or "<name>: <what> failed: ...": no value for that side
    $1 ~ /:$/ {
        k = $1; sub(/:$/, "", k)
        if (!(k in unit)) { unit[k] = "ms"; order[++n] = k }
        note[++nn] = (FILENAME ~ /ts.txt$/ ? "Tessera " : "PyTorch ") $0
        next
    }
    FILENAME ~ /ts.txt$/ { t[$1] = $2; if (!($1 in unit)) { unit[$1] = $3; order[++n] = $1 }; next }
    { pt[$1] = $2; if (!($1 in unit)) { unit[$1] = $3; order[++n] = $1 } }
    function row(name, a, b, u, time_like, g,    r, ok, gs) {
        gs = g == "" ? "-" : (time_like ? g "x" : g * 100 "%")
        if (a == "" || b == "" || a + 0 <= 0 || b + 0 <= 0) {
            # a missing or failed measurement cannot meet its goal
            printf "%-36s %12s %12s %9s %7s %s\n", name " (" u ")", (a == "" ? "-" : a),
                   (b == "" ? "-" : b), "-", gs, (g == "" ? "-" : "NO")
            return
        }
        r = time_like ? b / a : a / b
        ok = g == "" ? "-" : (r >= g ? "yes" : "NO")
        printf "%-36s %12.4f %12.4f %8.3f%s %7s %s\n", name " (" u ")", a, b, r,
               (time_like ? "x" : " "), gs, ok
    }
    function speedup(name, a, b, g,    ok) {
        # a, b: each side'"'"'s own speed-up; the goal, when given, is on Tessera'"'"'s
        ok = g == "" ? "-" : (a != "" && a >= g ? "yes" : "NO")
        if (a == "" || b == "")
            printf "%-36s %12s %12s %9s %7s %s\n", name " (x)", (a == "" ? "-" : sprintf("%.3fx", a)),
                   (b == "" ? "-" : sprintf("%.3fx", b)), "-", (g == "" ? "-" : g "x"), ok
        else
            printf "%-36s %11.3fx %11.3fx %8.3f  %7s %s\n", name " (x)", a, b, a / b,
                   (g == "" ? "-" : g "x"), ok
    }
    END {
        goal["simplenn_f32"] = 1.5; goal["simplenn_amp"] = 1.5
        goal["simplecnn_f32"] = 1.5; goal["simplecnn_amp"] = 1.5
        goal["gemm_bf16"] = 0.95; goal["h2d_pinned"] = 0.90
        for (i = 1; i <= nn; i++) print note[i]
        printf "%-36s %12s %12s %9s %7s %s\n", "name", "Tessera", "PyTorch", "ratio", "goal", "met"
        for (i = 1; i <= n; i++) {
            k = order[i]
            row(k, t[k], pt[k], unit[k], unit[k] == "ms", k ~ /_graph$/ ? 1.3 : goal[k])
        }
        # Tessera graphed against PyTorch eager
        for (i = 1; i <= n; i++) {
            k = order[i]
            if (k !~ /_graph$/) continue
            e = k; sub(/_graph$/, "", e)
            row(k "_vs_eager", t[k], pt[e], "ms", 1, 2)
        }
        # AMP against float32 on each side: f32 ms / amp ms (above 1: AMP is faster)
        for (i = 1; i <= n; i++) {
            k = order[i]
            if (k !~ /_amp(_graph)?$/) continue
            f = k; sub(/_amp/, "_f32", f)
            a = (t[k] > 0 && t[f] > 0) ? t[f] / t[k] : ""
            b = (pt[k] > 0 && pt[f] > 0) ? pt[f] / pt[k] : ""
            name = k; sub(/_amp/, "_amp_speedup", name)
            speedup(name, a, b, k ~ /_graph$/ ? 1 : "")
        }
        print "ratio: PyTorch ms / Tessera ms for step times (above 1: Tessera faster), Tessera /"
        print "PyTorch for TFLOP/s and GB/s. *_graph: the whole step captured once (CUDA graph) and"
        print "replayed, the batch copied into static inputs first; *_graph_vs_eager: Tessera graphed"
        print "beside PyTorch eager. *_amp_speedup: f32 step ms / AMP step ms on each side, ratio ="
        print "Tessera speed-up / PyTorch speed-up; *_amp_speedup_graph: the same graphed, its goal"
        print "on Tessera'"'"'s own speed-up (AMP no slower than f32). Times: medians of rounds after"
        print "warm-up."
    }' "$tmp/ts.txt" "$tmp/torch.txt"
if [ "$ts_rc" -ne 0 ]; then
    echo "run_gpu.sh: bench_gpu exited with $ts_rc (a \"# check\" line above says why)" >&2
    exit "$ts_rc"
fi
