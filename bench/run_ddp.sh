#!/bin/sh
# run_ddp.sh — DistributedDataParallel's training step, Tessera (bench_ddp under mpirun, 2 ranks x 1
# thread) beside PyTorch's DDP on gloo (bench_ddp_torch.py, 2 processes x 1 thread), same machine.
# Usage: bench/run_ddp.sh [BUILD_DIR] [ITERS]   (builds nothing; BUILD_DIR defaults to "build")
# ROUNDS (2) of Tessera then PyTorch; each side keeps its best figure per measurement.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
iters=${2:-20}
. "$here/bench_env.sh"
bin="$build/bench/bench_ddp"
[ -x "$bin" ] || { echo "run_ddp.sh: $bin not found; build first" >&2; exit 1; }
root=""; [ "$(id -u)" = 0 ] && root=--allow-run-as-root
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench_header "$build"
for round in $(seq "${ROUNDS:-2}"); do
    OMP_NUM_THREADS=1 TS_NUM_THREADS=1 mpirun -np 2 $root --oversubscribe --bind-to none "$bin" "$iters" >>"$tmp/ts.txt"
    OMP_NUM_THREADS=1 "$PYTHON" "$here/bench_ddp_torch.py" "$iters" >>"$tmp/pt.txt"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '
    NF != 3 { next }
    FILENAME ~ /ts.txt/ { k = $1 SUBSEP $2; if (!(k in ts) || ($2 != "hidden" && $3 < ts[k]) || ($2 == "hidden" && $3 > ts[k])) ts[k] = $3; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }; next }
    { k = $1 SUBSEP $2; if (!(k in pt) || $3 < pt[k]) pt[k] = $3 }
    END {
        printf "%-10s %9s %9s %7s %5s | %9s %9s %9s %9s %8s | %9s %9s %9s %6s\n", "model", "Ts DDP", "PT DDP",
               "ratio", "goal", "Ts 1proc", "overhead", "Ts allred", "AR in step", "hidden", "MPI raw", "Ts/MPI", "gloo", "MB"
        for (i = 1; i <= n; i++) {
            m = order[i]
            r = pt[m, "ddp_step"] / ts[m, "ddp_step"]
            ovh = ts[m, "ddp_step"] - ts[m, "plain_step"]
            printf "%-10s %9.3f %9.3f %6.2fx %4.1fx | %9.3f %9.3f %9.3f %10.3f %7.0f%% | %9.3f %8.0f%% %9.3f %6.2f\n",
                   m, ts[m, "ddp_step"], pt[m, "ddp_step"], r, 1.5, ts[m, "plain_step"], ovh,
                   ts[m, "allreduce"], ts[m, "plain_ar_step"] - ts[m, "plain_step"], 100 * ts[m, "hidden"], ts[m, "mpi_allreduce"],
                   (ts[m, "allreduce"] > 0 ? 100 * ts[m, "mpi_allreduce"] / ts[m, "allreduce"] : 0),
                   pt[m, "allreduce"], ts[m, "grad_mb"]
        }
        print "ms: median step or all-reduce of 2 ranks x 1 thread, each side its best round. overhead = DDP"
        print "step - the same step without DDP on the per-rank batch (goal: <= one all-reduce of all the"
        print "gradients, Ts allred, measured alone); AR in step = what that one blocking all-reduce adds to the"
        print "step when it runs between backward and the optimizer (rank skew and cold caches included);"
        print "hidden = share of the communication thread'"'"'s time that backward overlapped;"
        print "Ts/MPI = raw MPI_Allreduce time / ts_dist_all_reduce time (goal >= 90%); gloo = PyTorch'"'"'s all-reduce."
    }' "$tmp/ts.txt" "$tmp/pt.txt"
