#!/bin/sh
# run_ops.sh — issue 14's op goals: GELU, softmax and layer_norm (also with weight and bias)
# forward + backward (y = f(x), then backward from y with a fixed random gradient) on a
# [16, 256, 1024] float32 tensor, Tessera (bench_vec_math's op table)
# beside PyTorch (bench_ops_torch.py), each side the best of 1 and 2 threads and of ROUNDS (2)
# rounds, with the ratio and the goal (>= 1.5x), and the memory floor of such a pair on this
# machine (its traffic with no math) with PyTorch's time against it: the largest ratio the
# hardware allows. PYTHON and BENCH_ISA as in bench_env.sh.
# Usage: bench/run_ops.sh [BUILD_DIR]   (builds nothing; BUILD_DIR defaults to "build")
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
. "$here/bench_env.sh"
bin="$build/bench/bench_vec_math"
[ -x "$bin" ] || { echo "run_ops.sh: $bin not found; build first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench_header "$build"
for round in $(seq "${ROUNDS:-2}"); do
    for t in 1 2; do
        # the op table's float32 column: "gelu fwd+bwd   1.234   2.345   1.90x"
        TS_NUM_THREADS=$t "$bin" 5 | sed -n '/^ops on/,$p' |
            awk '/fwd\+bwd/ && !/^memory/ { n = $1 "_" $2; print n, $3 }
                 /^memory floor/ { print "floor", $NF == "ms" ? $(NF - 1) : $NF }' >>"$tmp/ts.txt"
        OMP_NUM_THREADS=$t "$PYTHON" "$here/bench_ops_torch.py" 4 >>"$tmp/pt.txt"
    done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
awk 'FNR == 1 { f++ }
     f == 1 { if (!(($1) in ts) || $2 < ts[$1]) ts[$1] = $2; names[$1] = 1 }
     f == 2 { if (!(($1) in pt) || $2 < pt[$1]) pt[$1] = $2 }
     END {
        printf "%-26s %12s %12s %8s %6s %4s %9s %9s\n", "[16,256,1024] f32", "Tessera ms", "PyTorch ms", "ratio", "goal", "met", "floor ms", "PT/floor"
        n = split("gelu_fwd+bwd softmax_fwd+bwd layer_norm_fwd+bwd layer_norm+affine_fwd+bwd", order, " ")
        for (i = 1; i <= n; i++) {
            k = order[i]
            if (!(k in ts) || !(k in pt)) continue
            r = pt[k] / ts[k]
            fl = ("floor" in ts) ? sprintf("%9.3f %8.2fx", ts["floor"], pt[k] / ts["floor"]) : ""
            printf "%-26s %12.3f %12.3f %7.2fx %6s %4s %s\n", k, ts[k], pt[k], r, ">=1.5x", (r >= 1.5 ? "yes" : "no"), fl
        }
        if ("floor" in ts)
            print "floor: the same memory traffic with no math (y = 1.5 x, then dx = g y, plain stores;\n" \
                  "bench_vec_math), best of 1 and 2 threads; PT/floor: the most any implementation here\n" \
                  "could gain on PyTorch"
     }' "$tmp/ts.txt" "$tmp/pt.txt"
