#!/bin/sh
# run_threads.sh — OpenMP wait policies on a shared machine: training steps (bench_train) of a
# small-op model (SimpleNN b64) and a large one (MLP 784-1024-1024-10 b256) on 2 threads under each
# policy, with the machine as it is and with a busy loop on every core competing (nice 0), the
# policies interleaved round by round. Prints ms per step and each policy's ratio to libgomp's
# default. Usage: bench/run_threads.sh [BUILD_DIR] [ROUNDS]   (defaults: build, 3)
# POLICIES: space-separated environment settings to compare ("default" = none of ours; one may
# also say TS_NUM_THREADS=1, a reference without barriers). No PyTorch here.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
rounds=${2:-3}
bin="$build/bench/bench_train"
[ -x "$bin" ] || { echo "run_threads.sh: $bin not found; build first" >&2; exit 1; }
policies=${POLICIES:-"default OMP_WAIT_POLICY=passive GOMP_SPINCOUNT=100 GOMP_SPINCOUNT=1000 GOMP_SPINCOUNT=10000 TS_NUM_THREADS=1"}
cores=$(nproc)
tmp=$(mktemp -d)
busy=""
stop_busy() { for p in $busy; do kill "$p" 2>/dev/null || true; done; busy=""; }
trap 'stop_busy; rm -rf "$tmp"' EXIT
BENCH_OMP=none . "$here/bench_env.sh"
bench_header "$build"
for round in $(seq "$rounds"); do
    for load in idle loaded; do
        if [ "$load" = loaded ]; then
            for c in $(seq "$cores"); do
                nice -n 0 sh -c 'while :; do :; done' &
                busy="$busy $!"
            done
        fi
        for pol in $policies; do
            for model in simplenn mlp; do
                # the policy reaches the program through its environment; "default" sets nothing
                # shellcheck disable=SC2086
                if [ "$pol" = default ]; then
                    t=$(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT TS_NUM_THREADS=2 \
                        "$bin" x "$model" | awk '{ print $2 }')
                else # a policy may also say TS_NUM_THREADS=1 (a reference without barriers)
                    t=$(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT TS_NUM_THREADS=2 "$pol" \
                        "$bin" x "$model" | awk '{ print $2 }')
                fi
                echo "$load $pol $model $t" >>"$tmp/raw.txt"
            done
        done
        stop_busy
    done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '
    { k = $1 SUBSEP $2 SUBSEP $3; s[k] += $4; n[k]++; if (!($2 in seen)) { seen[$2] = 1; order[++np] = $2 } }
    END {
        printf "%-26s %14s %14s %14s %14s\n", "policy (2 threads)", "SimpleNN idle", "loaded", "MLP idle", "loaded"
        for (i = 1; i <= np; i++) {
            p = order[i]; line = sprintf("%-26s", p)
            split("idle loaded", L, " ")
            for (m = 1; m <= 2; m++) for (l = 1; l <= 2; l++) {
                model = m == 1 ? "simplenn" : "mlp"
                k = L[l] SUBSEP p SUBSEP model; b = L[l] SUBSEP order[1] SUBSEP model
                v = s[k] / n[k]; base = s[b] / n[b]
                line = line sprintf(" %7.3f %5.2fx", v, base / v)
            }
            print line
        }
        print "ms per training step (mean over the rounds of bench_train'"'"'s best-of-3 means); Nx = the"
        print "first policy'"'"'s time / this one'"'"'s (above 1: faster). loaded: a busy loop per core at nice 0."
    }' "$tmp/raw.txt"
