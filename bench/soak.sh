#!/bin/sh
# soak.sh — a long run that must not grow: SimpleNN trained for STEPS steps (100,000) on cpu and on
# sim:0, one device after the other, with the device's memory statistics and the process's RSS
# sampled every EVERY steps (1,000). After the warm-up (the first WARMUP steps, 10,000) it reports,
# per device, the drift of RSS and of the allocator's allocated/reserved bytes (last sample minus
# the first after warm-up, and the spread max - min) and whether the live tensors stayed constant.
# Fails (exit 1) when the live tensors change after warm-up or RSS drifts by more than LIMIT_KB
# (1024). Not part of CI: it takes minutes to hours.
# Usage: bench/soak.sh [BUILD_DIR] [STEPS] [EVERY]   (builds nothing; BUILD_DIR defaults to build)
#        DEVICES="cpu sim:0" WARMUP=10000 LIMIT_KB=1024 OUT=soak-logs
set -eu
build=${1:-build}
steps=${2:-100000}
every=${3:-1000}
warmup=${WARMUP:-10000}
limit=${LIMIT_KB:-1024}
out=${OUT:-soak-logs}
bin="$build/bench/bench_soak"
[ -x "$bin" ] || { echo "soak.sh: $bin not found; build first" >&2; exit 1; }
mkdir -p "$out"
status=0
for dev in ${DEVICES:-cpu sim:0}; do
    log="$out/soak-$(echo "$dev" | tr ':' '_').txt"
    start=$(date +%s)
    "$bin" "$dev" "$steps" "$every" >"$log"
    secs=$(( $(date +%s) - start ))
    awk -v dev="$dev" -v warm="$warmup" -v limit="$limit" -v secs="$secs" '
        /^#/ || $1 <= warm { next }
        {
            n++
            if (n == 1) { r0 = $2; a0 = $3; v0 = $4; l0 = $6; c0 = $7; rmin = rmax = $2 }
            if ($2 < rmin) rmin = $2
            if ($2 > rmax) rmax = $2
            if ($6 != l0 || $7 != c0) live_changed = 1
            r1 = $2; a1 = $3; v1 = $4; last = $1; loss = $8
        }
        END {
            if (n < 2) { printf "%s: too few samples after warm-up\n", dev; exit 1 }
            printf "%s: %d steps in %d s, %d samples after warm-up (step %d)\n", dev, last, secs, n, warm
            printf "  RSS        %d kB -> %d kB: drift %+d kB (%+.3f%%), spread %d kB\n",
                   r0, r1, r1 - r0, 100 * (r1 - r0) / r0, rmax - rmin
            printf "  allocated  %d -> %d bytes: drift %+d (%+.3f%%)\n", a0, a1, a1 - a0,
                   a0 ? 100 * (a1 - a0) / a0 : 0
            printf "  reserved   %d -> %d bytes: drift %+d (%+.3f%%)\n", v0, v1, v1 - v0,
                   v0 ? 100 * (v1 - v0) / v0 : 0
            printf "  live tensors %s (device %d, cpu %d); last loss %s\n",
                   live_changed ? "CHANGED" : "constant", l0, c0, loss
            if (live_changed || r1 - r0 > limit || a1 != a0) exit 1
        }' "$log" || status=1
done
exit $status
