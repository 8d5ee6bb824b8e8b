#!/usr/bin/env bash
# gpu_check.sh — the whole GPU run in one command, for a machine with an NVIDIA GPU and no
# internet (docs/CUDA.md, "Running on a GPU"):
#   1. cJSON and zlib from the Debian packages in .gpu/debs (unpacked with dpkg -x into
#      /tmp/gpudeps), cuDNN and NCCL from python3's nvidia-* wheels; configure build-cuda
#      (TS_CUDA=ON, Release, TS_WERROR=ON) and build it;
#   2. (a) the suite with TS_REQUIRE_CUDA=1; (b) NCCL with one rank: test_dist_collectives, a probe
#      of every collective on cuda:0 and the trainer with FSDP, under `mpirun -np 1` (the trainer
#      also without a launcher, to compare); (c) compute-sanitizer memcheck, racecheck and
#      synccheck over $SANITIZE_TESTS; (d) test_cuda_alloc alone (the pinned-reuse check);
#      (e) bench/run_gpu.sh; (k, after the focus tests) the fused kernels' tests on cuda:0 and
#      bench/run_gpu_kernels.sh.
# Every step runs under `timeout` within one overall budget; a failing step never stops the next;
# the script prints PASS/FAIL/TIMEOUT/SKIP per step and exits 0. Logs go to $OUT: build.log,
# ctest.log, nccl.log, sanitizer.log, pinned.log, bench.log and summary.txt.
# Usage: OUT=DIR bash tools/gpu_check.sh
# Environment: OUT (default ./gpu-check-out); GPU_CHECK_BUDGET, seconds for everything (480);
# SANITIZE_TESTS (test_graph_capture test_graph_capture_train, on cuda:0 alone);
# SANITIZE_TIMEOUT, seconds a run (40);
# TARGETS, the build's targets (all); FOCUS_TESTS, run one by one first (the capture tests);
# CTEST_REGEX / CTEST_EXCLUDE, ctest's -R / -E (default -E: the cpu-only ISA reruns);
# SANITIZE_JOBS, runs at once (6; 1: one at a time); QUICK=1: the short benchmark run;
# KERNEL_TESTS, the fused kernels' tests (step k); PROFILE_CASE, PROFILE_SKIP, PROFILE_COUNT (step
# p, run only when STEPS names "profile": ncu's kernel times of bench_gpu's model cases);
# BUILD_DIR (build-cuda); GPU_DEPS (/tmp/gpudeps); STEPS, the steps to run (build focus kernels
# ctest nccl sanitize pinned bench, and profile; "configure" alone: set up and configure only, a
# dry run without a GPU);
# NCCL_DEVICE, the device of the NCCL step (cuda:0; sim:0 tries its commands on any machine).
set -u
cd "$(dirname "$0")/.." || exit 0
src=$PWD
OUT=${OUT:-$src/gpu-check-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
build=${BUILD_DIR:-build-cuda}
case $build in /*) bin=$build ;; *) bin=$src/$build ;; esac
steps=" ${STEPS:-build focus kernels ctest nccl sanitize pinned bench} "
want() { [[ $steps == *" $1 "* ]]; }
ndev=${NCCL_DEVICE:-cuda:0}
deps=${GPU_DEPS:-/tmp/gpudeps}
work=/tmp/gpucheck
budget=${GPU_CHECK_BUDGET:-480}
san_tests=${SANITIZE_TESTS:-test_graph_capture test_graph_capture_train}
san_timeout=${SANITIZE_TIMEOUT:-40}
san_jobs=${SANITIZE_JOBS:-6}
start=$SECONDS
mkdir -p "$work"

# The summary: a line per step, the notes gathered while it ran below it.
summary=()
pending=()
note() { pending+=("      $*"); }
# notes [PREFIX] < LINES: a note per line (its first 220 characters), after PREFIX
notes() {
    local l
    while IFS= read -r l; do note "${1-}${l:0:220}"; done
}
step() {
    summary+=("$(printf '%-7s %s' "$1" "$2")" "${pending[@]}")
    pending=()
}
left() { echo $((budget - (SECONDS - start))); }
# cap T RESERVE: T seconds, or fewer so that RESERVE seconds stay for the steps after this one
cap() {
    local t=$1 l
    l=$(($(left) - ${2:-0}))
    ((l < t)) && t=$l
    echo "$t"
}
# run_to LOG T CMD...: CMD under timeout T (its process group killed at the end), output appended
# to LOG; returns CMD's status (124: timed out; also when under 5 s were left to give it)
run_to() {
    local log=$1 t=$2 rc
    shift 2
    if ((t < 5)); then
        echo "+ skipped (${t}s left): $*" >>"$log"
        return 124
    fi
    echo "+ [$(date +%T), ${t}s] $*" >>"$log"
    timeout -k 10 "$t" "$@" >>"$log" 2>&1
    rc=$?
    echo "+ rc=$rc at $((SECONDS - start))s" >>"$log"
    return $rc
}
verdict() { # status -> PASS / TIMEOUT / FAIL
    case $1 in 0) echo PASS ;; 124 | 137) echo TIMEOUT ;; *) echo FAIL ;; esac
}
since() { tail -n +"$2" "$1"; } # since LOG LINE: the log from that line on

# ------------------------------------------------------------------ environment
[ -d /usr/local/cuda/bin ] && PATH=/usr/local/cuda/bin:$PATH
export PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun1=(mpirun --allow-run-as-root -np 1 --bind-to none)
blog=$OUT/build.log
: >"$blog"
{
    echo "== gpu_check.sh at $(date -u +%FT%TZ), commit $(git -C "$src" rev-parse --short HEAD 2>/dev/null)"
    git -C "$src" status --short 2>/dev/null | head -40
    nvidia-smi 2>&1 | head -20
    nvcc --version 2>&1 | tail -2
    gcc --version 2>&1 | head -1
    cmake --version 2>&1 | head -1
    mpirun --version 2>&1 | head -1
    echo "cores: $(nproc)"
    python3 -c 'import importlib.metadata as m; print(" ".join(sorted(d.metadata["Name"] + "=" + d.version for d in m.distributions() if d.metadata["Name"].lower().startswith(("torch", "nvidia-")))))' 2>&1
} >>"$blog" 2>&1
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
summary+=("GPU: ${gpu:-none found by nvidia-smi}")

# ------------------------------------------------------------------ 1. dependencies
echo "== dependencies" >>"$blog"
cmake_deps=()
zlib_deps=()
if ls "$src"/.gpu/debs/*.deb >/dev/null 2>&1; then
    rm -rf "$deps" && mkdir -p "$deps"
    for d in "$src"/.gpu/debs/*.deb; do
        dpkg -x "$d" "$deps" >>"$blog" 2>&1 || echo "dpkg -x $d failed" >>"$blog"
    done
    ml=$deps/usr/lib/x86_64-linux-gnu
    # zlib1g-dev's libz.so is an absolute link to /lib/x86_64-linux-gnu/libz.so.1.2.13, which
    # other systems lack: point it at the unpacked library
    zreal=$(find "$deps/lib" "$deps/usr/lib" -name 'libz.so.1.*' 2>/dev/null | head -1)
    [ -n "$zreal" ] && ln -sf "$zreal" "$ml/libz.so"
    if [ -f "$deps/usr/include/cjson/cJSON.h" ] && [ -e "$ml/libcjson.so" ]; then
        cmake_deps+=(-DTS_CJSON_INCLUDE="$deps/usr/include" -DTS_CJSON_LIB="$ml/libcjson.so")
    fi
    if [ -f "$deps/usr/include/zlib.h" ] && [ -e "$ml/libz.so" ]; then
        zlib_deps=(-DZLIB_INCLUDE_DIR="$deps/usr/include" -DZLIB_LIBRARY="$ml/libz.so")
    fi
    cmake_deps+=("${zlib_deps[@]}" -DCMAKE_PREFIX_PATH="$deps/usr")
    export LD_LIBRARY_PATH=$ml${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    ls -l "$deps/usr/include" "$ml" >>"$blog" 2>&1
else
    echo "no .gpu/debs: cJSON and zlib from the system" >>"$blog"
fi

# cuDNN and NCCL from the wheels: $deps/cudnn and $deps/nccl, each with include/ (links to the
# library's own headers only) and lib/ (links to its libraries, plus the unversioned libX.so the
# linker looks for)
sites=$(python3 - <<'PY' 2>/dev/null
import os, site, sys
c = []
try: c += site.getsitepackages()
except Exception: pass
try: c.append(site.getusersitepackages())
except Exception: pass
c += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
seen = set()
for p in c:
    if p not in seen and os.path.isdir(os.path.join(p, "nvidia")):
        seen.add(p); print(p)
PY
)
echo "site-packages with nvidia/: ${sites:-none}" >>"$blog"
wheel_root() { # wheel_root NAME: makes $deps/NAME from the first wheel holding NAME.h, prints it
    local name=$1 s h so root f
    for s in $sites; do
        h=$(find "$s/nvidia" -maxdepth 4 -name "$name.h" -path '*/include/*' 2>/dev/null | sort | head -1)
        so=$(find "$s/nvidia" -maxdepth 4 -name "lib$name.so.[0-9]*" 2>/dev/null | sort -V | head -1)
        if [ -z "$h" ] || [ -z "$so" ]; then continue; fi
        root=$deps/$name
        rm -rf "$root" && mkdir -p "$root/include" "$root/lib"
        for f in "$(dirname "$h")/$name"*.h; do ln -s "$f" "$root/include/"; done
        for f in "$(dirname "$so")/lib$name"*.so*; do ln -s "$f" "$root/lib/"; done
        ln -sf "$(basename "$so")" "$root/lib/lib$name.so"
        echo "$root"
        return
    done
}
mkdir -p "$deps"
cudnn_root=$(wheel_root cudnn)
nccl_root=$(wheel_root nccl)
if [ -n "$cudnn_root" ]; then
    export CUDNN_ROOT=$cudnn_root
    cmake_deps+=(-DTS_CUDNN_INCLUDE="$cudnn_root/include" -DTS_CUDNN_LIB="$cudnn_root/lib/libcudnn.so")
    LD_LIBRARY_PATH=$cudnn_root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
if [ -n "$nccl_root" ]; then
    export NCCL_ROOT=$nccl_root
    cmake_deps+=(-DTS_NCCL_INCLUDE="$nccl_root/include" -DTS_NCCL_LIB="$nccl_root/lib/libnccl.so")
    # (CMakeLists.txt adds TS_NCCL_INCLUDE to the library's include folders)
    LD_LIBRARY_PATH=$nccl_root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
{
    echo "CUDNN_ROOT=${cudnn_root:-unset} NCCL_ROOT=${nccl_root:-unset}"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    ls -l "$deps/cudnn/include" "$deps/cudnn/lib" "$deps/nccl/include" "$deps/nccl/lib"
} >>"$blog" 2>&1
[ -n "$cudnn_root" ] || summary+=("cuDNN: no wheel found (CMake searches beside the toolkit)")
[ -n "$nccl_root" ] || summary+=("NCCL: no wheel found (CMake searches beside the toolkit)")

# ------------------------------------------------------------------ 1. configure and build
if want build || want configure; then
    echo "== configure" >>"$blog"
    mark=$(wc -l <"$blog")
    run_to "$blog" "$(cap 120)" cmake -S . -B "$build" -DTS_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
        -DTS_WERROR=ON "${cmake_deps[@]}"
    rc=$?
    found=$(since "$blog" "$mark" | grep -E '^-- (Tessera: (CUDA|no CUDA|cuDNN|no cuDNN|NCCL|no NCCL|MPI|no MPI|cJSON)|Found ZLIB)' |
        sed 's/^-- Tessera: //; s/^-- Found ZLIB: \([^ ]*\).*/zlib \1/' | paste -sd';' | sed 's/;/; /g')
    note "found: ${found:-nothing (build.log)}"
    if [ $rc -eq 0 ] && want build; then
        keep=()
        case $(grep '^CMAKE_GENERATOR:' "$build/CMakeCache.txt" 2>/dev/null) in
        *Ninja*) keep=(-- -k 0) ;;
        *Makefiles*) keep=(-- -k) ;;
        esac
        echo "== build" >>"$blog"
        mark=$(wc -l <"$blog")
        # a failing target does not stop the others (-k): the steps below use what was built
        targets=()
        for t in ${TARGETS:-}; do targets+=(--target "$t"); done
        run_to "$blog" "$(cap 330 120)" cmake --build "$build" -j16 "${targets[@]}" "${keep[@]}"
        rc=$?
        if [ $rc -ne 0 ]; then
            note "$(since "$blog" "$mark" | grep -c 'error') lines saying 'error' in build.log; the first:"
            notes "  " < <(since "$blog" "$mark" | grep -m5 -E 'error|Error')
        fi
        ldd "$bin/tessera" 2>/dev/null | grep -E 'nccl|cudnn|cjson|libz|cublas|cudart|mpi' >>"$blog"
        step "$(verdict $rc)" "1 configure and build ($((SECONDS - start)) s)"
    elif [ $rc -eq 0 ]; then
        step PASS "1 configure only"
    else
        step FAIL "1 configure (build.log)"
    fi
fi

# ------------------------------------------------------------------ 2. the focus tests
# Each of $FOCUS_TESTS alone with TS_REQUIRE_CUDA=1, its whole output kept; one that crashes is
# run again under cuda-gdb for the backtrace.
flog=$OUT/focus.log
: >"$flog"
if want focus; then
    fok=1
    for t in ${FOCUS_TESTS:-test_graph_capture test_graph_capture_train test_trainer_graph}; do
        if [ ! -x "$bin/tests/$t" ]; then
            note "$t: not built"
            fok=0
            continue
        fi
        mark=$(wc -l <"$flog")
        (cd "$bin/tests" && TS_REQUIRE_CUDA=1 TS_SIM_DEVICES=4 run_to "$flog" "$(cap 90 60)" "./$t")
        rc=$?
        note "$t: $(verdict $rc) (status $rc); $(since "$flog" "$mark" | grep -E '^[0-9]+ passed' | tail -1)"
        notes "  " < <(since "$flog" "$mark" | grep -E 'cuda:0|FAIL|failed' | grep -v '^+ ' | head -12)
        if [ $rc -ne 0 ]; then
            fok=0
            if [ $rc -ge 128 ] && [ $rc -ne 137 ] && command -v cuda-gdb >/dev/null; then
                mark=$(wc -l <"$flog")
                (cd "$bin/tests" && TS_REQUIRE_CUDA=1 TS_SIM_DEVICES=4 run_to "$flog" "$(cap 90 60)" \
                    cuda-gdb -q -batch -ex run -ex bt -ex 'info threads' --args "./$t")
                notes "  gdb: " < <(since "$flog" "$mark" | grep -E '^#[0-9]+ |signal' | head -25)
            fi
        fi
    done
    if [ $fok -eq 1 ]; then v=PASS; else v=FAIL; fi
    step $v "2 focus tests (focus.log)"
fi

# ------------------------------------------------------------------ 2k. the fused kernels
# Each of $KERNEL_TESTS alone on cuda:0 (TS_REQUIRE_CUDA=1: a skip is a failure), checking the
# fused kernels (layer norm, batch norm, cross-entropy, attention, cuBLASLt's activation
# epilogues) and cuSOLVER's linalg against float64 references and the CPU on every shape class;
# then bench/run_gpu_kernels.sh, each kernel beside PyTorch's.
klog=$OUT/kernels.log
: >"$klog"
if want kernels; then
    kok=1
    for t in ${KERNEL_TESTS:-test_layer_norm test_batch_norm test_batch_norm_nhwc test_batch_norm_bf16 test_cross_entropy_fused test_sdpa test_sdpa_tc test_golden_sdpa test_channels_last test_cuda_compute test_linalg_cuda test_linear_act_epilogue test_mlp_fused test_cuda_quant}; do
        if [ ! -x "$bin/tests/$t" ]; then
            note "$t: not built"
            kok=0
            continue
        fi
        mark=$(wc -l <"$klog")
        # cuda:0 alone (TS_TEST_ONLY_CUDA=1, KERNEL_ALL_DEVICES=1: cpu and sim too): CI runs the rest
        only=1
        [ "${KERNEL_ALL_DEVICES:-0}" = 1 ] && only=0
        (cd "$bin/tests" && TS_REQUIRE_CUDA=1 TS_SIM_DEVICES=4 TS_TEST_ONLY_CUDA=$only \
            run_to "$klog" "$(cap 60 60)" "./$t")
        rc=$?
        note "$t: $(verdict $rc) (status $rc); $(since "$klog" "$mark" | grep -E '^[0-9]+ passed' | tail -1)"
        notes "  " < <(since "$klog" "$mark" | grep -E 'FAIL|failed' | grep -v '^+ ' | head -8)
        [ $rc -eq 0 ] || kok=0
    done
    t=$(cap 150 30)
    if [ -f "$bin/CMakeCache.txt" ] && [ "$t" -ge 30 ]; then
        mode=
        [ "${QUICK:-0}" = 1 ] && mode=quick
        mark=$(wc -l <"$klog")
        run_to "$klog" "$t" bash -c "cmake --build '$bin' --target bench_gpu_kernels -j16 && bench/run_gpu_kernels.sh '$bin' $mode"
        rc=$?
        notes < <(since "$klog" "$mark" | grep -E '^name |SKIP:| (yes|NO)$|failed' | head -16)
        [ $rc -eq 0 ] || kok=0
    fi
    if [ $kok -eq 1 ]; then v=PASS; else v=FAIL; fi
    step $v "k fused kernels: tests on cuda:0, then run_gpu_kernels.sh (kernels.log)"
fi

# ------------------------------------------------------------------ 2p. where a step's time goes
# Nsight Compute times every kernel of a few eager training steps of $PROFILE_CASE (bench_gpu's
# model cases; default gptmini) after the first $PROFILE_SKIP kernels; tools/ncu_kernel_summary.py
# sums them by kernel, the largest first (profile.log).
prlog=$OUT/profile.log
: >"$prlog"
ncu_bin=$(command -v ncu || true)
[ -z "$ncu_bin" ] && [ -x /usr/local/cuda/bin/ncu ] && ncu_bin=/usr/local/cuda/bin/ncu
if ! want profile; then
    :
elif [ -n "$ncu_bin" ] && [ -x "$bin/bench/bench_gpu" ] && [ "$(left)" -gt 60 ]; then
    for c in ${PROFILE_CASE:-gptmini}; do
        raw=$work/ncu_$c.csv
        BENCH_GPU_ONLY=$c BENCH_GPU_STEPS=4 run_to "$prlog" "$(cap 90 40)" "$ncu_bin" --csv \
            --metrics gpu__time_duration.sum -s "${PROFILE_SKIP:-1200}" -c "${PROFILE_COUNT:-800}" \
            --log-file "$raw" "$bin/bench/bench_gpu" quick
        rc=$?
        echo "== $c" >>"$prlog"
        python3 tools/ncu_kernel_summary.py "$raw" 30 >>"$prlog" 2>&1
        note "$c: status $rc; $(grep -m1 'kernels,' "$prlog" | tail -1)"
    done
    step PASS "p ncu kernel times of ${PROFILE_CASE:-gptmini} (profile.log)"
else
    step SKIP "p profile (no ncu, no bench_gpu, or no time left)"
fi

# ------------------------------------------------------------------ 2a. the suite
clog=$OUT/ctest.log
: >"$clog"
if ! want ctest; then
    :
elif [ -f "$bin/CTestTestfile.cmake" ] && [ -x "$bin/tests/test_cuda_alloc" ]; then
    regex=()
    [ -n "${CTEST_REGEX:-}" ] && regex=(-R "$CTEST_REGEX")
    # the ISA reruns test the cpu kernels only, which CI runs; two threads a test, or eight tests
    # of 16 threads each load the machine past 70 (the first H200 run: 70 of 252 tests in 150 s)
    exclude=${CTEST_EXCLUDE-_(avx2|generic|avx512|avx512_core|dnnl_avx512_core|isa)$}
    [ -n "$exclude" ] && regex+=(-E "$exclude")
    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 TS_REQUIRE_CUDA=1 run_to "$clog" "$(cap 240 120)" \
        ctest --test-dir "$bin" -j8 "${regex[@]}" --output-on-failure --timeout 200
    rc=$?
    notes < <(grep -E 'tests passed|Total Test time' "$clog")
    notes < <(sed -n '/The following tests FAILED:/,/^$/p; /The following tests did not run:/,/^$/p' "$clog" | grep -vE '^$|^\+ |^Errors while' | head -30)
    if [ $rc -eq 124 ]; then
        note "timed out; failed until then:"
        notes < <(grep -E '\*\*\*(Failed|Timeout|Exception)|Failed +[0-9.]+ sec' "$clog" | head -20)
    fi
    step "$(verdict $rc)" "a ctest, TS_REQUIRE_CUDA=1, -j8"
else
    step SKIP "a ctest (not built)"
fi

# ------------------------------------------------------------------ 2b. NCCL with one rank
# Collectives on cuda tensors go through NCCL whenever Tessera was built with CUDA, NCCL and MPI
# and the process was started by a launcher (its group has an MPI communicator); without one, a
# world of one runs them locally. No variable selects it. DDP does no collective in a world of
# one; FSDP does (all_gather, reduce_scatter; all_reduce at stage 1).
nlog=$OUT/nccl.log
: >"$nlog"
nccl_ok=1
nccl_fail() {
    nccl_ok=0
    note "FAIL: $*"
}
nc() { cap "$1" 100; } # what the sub-steps may take, 100 s kept for the steps after
if ! want nccl; then
    :
elif [ -x "$bin/tests/test_dist_collectives" ] && [ "$(left)" -gt 130 ]; then
    export NCCL_DEBUG=INFO
    echo "== test_dist_collectives under mpirun -np 1 (its hand-made cuda tensor goes to NCCL)" >>"$nlog"
    mark=$(wc -l <"$nlog")
    (cd "$bin/tests" && TS_SIM_DEVICES=4 OMP_NUM_THREADS=4 run_to "$nlog" "$(nc 60)" "${mpirun1[@]}" ./test_dist_collectives)
    rc=$?
    [ $rc -eq 0 ] || nccl_fail "test_dist_collectives -np 1: status $rc"
    note "test_dist_collectives -np 1: status $rc; $(since "$nlog" "$mark" | grep -m1 'a cuda tensor:' || echo 'no "a cuda tensor" line')"

    # the probe (tools/nccl_probe.c, built with the project): every collective and dtype on
    # cuda:0, checked against the host
    probe=$bin/nccl_probe
    export TS_SIM_DEVICES=1 # for NCCL_DEVICE=sim:0, the dry run on any machine
    if [ -x "$probe" ]; then
        echo "== nccl_probe $ndev without a launcher (a world of one without MPI: the local path)" >>"$nlog"
        mark=$(wc -l <"$nlog")
        run_to "$nlog" "$(nc 40)" "$probe" "$ndev"
        rc=$?
        [ $rc -eq 0 ] || nccl_fail "nccl_probe without a launcher: status $rc"
        note "nccl_probe, no launcher: status $rc; $(since "$nlog" "$mark" | grep -m1 'checks passed' || echo 'no result line')"
        echo "== nccl_probe $ndev under mpirun -np 1 (NCCL for cuda tensors)" >>"$nlog"
        mark=$(wc -l <"$nlog")
        run_to "$nlog" "$(nc 60)" "${mpirun1[@]}" "$probe" "$ndev"
        rc=$?
        [ $rc -eq 0 ] || nccl_fail "nccl_probe -np 1: status $rc"
        if [[ $ndev == cuda* ]] && ! since "$nlog" "$mark" | grep -q 'Init COMPLETE'; then
            nccl_fail "nccl_probe -np 1: no NCCL communicator was made (no 'Init COMPLETE' line)"
        fi
        note "nccl_probe -np 1: status $rc; $(since "$nlog" "$mark" | grep -m1 'checks passed' || echo 'no result line')"
        note "  $(since "$nlog" "$mark" | grep -m1 -oE 'NCCL version [^ ]+' || echo 'no NCCL version line'), $(since "$nlog" "$mark" | grep -c 'Init COMPLETE') x 'Init COMPLETE'; $(since "$nlog" "$mark" | grep -m1 -oE 'all_reduce 64 MiB.*' || true)"
    else
        nccl_fail "no nccl_probe in $bin (not built)"
    fi

    # the trainer on cuda:0 (synthetic MNIST, MLP, 2 epochs): FSDP without a launcher, then FSDP
    # stage 3 and stage 1 and plain training under mpirun -np 1. One rank's collectives copy or
    # keep the data, so every run must end with the same weights.
    echo "== synthetic MNIST" >>"$nlog"
    if [ -x "$bin/tessera" ] && python3 - "$work/data/mnist" >>"$nlog" 2>&1 <<'PY'; then
import os, random, struct, sys
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
def write(name, n, seed):  # learnable: a bright bar placed by the label, over noise
    r = random.Random(seed); img = bytearray(n * 784); lab = bytearray(n)
    for i in range(n):
        k = r.randrange(10); lab[i] = k
        row, col = 2 + (k // 5) * 12, 2 + (k % 5) * 5
        for j in range(784): img[i * 784 + j] = r.randrange(128)
        for y in range(row, row + 10):
            for x in range(col, col + 4): img[i * 784 + y * 28 + x] = 64 + r.randrange(128)
    with open(os.path.join(d, name + "-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28)); f.write(img)
    with open(os.path.join(d, name + "-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n)); f.write(lab)
write("train", 4096, 1); write("t10k", 1024, 2)
print("synthetic MNIST in", d)
PY
        rm -rf "$work/ck"
        targs=(train --model mlp --data mnist --data-dir "$work/data/mnist" --epochs 2 --seed 1
            --device "$ndev" --progress none)
        tsum='' tinits=0
        trun() { # trun NAME LAUNCHER... -- TRAIN-ARGS...: sets tsum (the weights' md5), tinits
            local name=$1 pre=() m r acc
            shift
            while [ "$1" != -- ]; do
                pre+=("$1")
                shift
            done
            shift
            echo "== trainer $name" >>"$nlog"
            m=$(wc -l <"$nlog")
            run_to "$nlog" "$(nc 45)" "${pre[@]}" "$bin/tessera" "${targs[@]}" --checkpoint "$work/ck/$name" "$@"
            r=$?
            acc=$(since "$nlog" "$m" | grep -m1 -oE 'test accuracy: [0-9.]+' || echo 'no accuracy')
            tinits=$(since "$nlog" "$m" | grep -c 'Init COMPLETE')
            tsum=$(md5sum "$work/ck/$name/model.safetensors" 2>/dev/null | cut -c1-12)
            note "trainer $name: status $r, $acc, NCCL inits $tinits, weights ${tsum:-none}"
            [ $r -eq 0 ] || nccl_fail "trainer $name: status $r"
        }
        trun fsdp_no_launcher -- --fsdp
        ref=$tsum
        for stage in 3 1; do
            trun mpi_fsdp$stage "${mpirun1[@]}" -- --fsdp --fsdp-stage $stage
            [ "$tsum" = "$ref" ] || nccl_fail "mpi_fsdp$stage's weights differ from fsdp_no_launcher's"
            if [[ $ndev == cuda* ]] && [ "$tinits" -eq 0 ]; then
                nccl_fail "mpi_fsdp$stage: no NCCL communicator was made"
            fi
        done
        trun mpi_plain "${mpirun1[@]}" --
        [ "$tsum" = "$ref" ] || nccl_fail "mpi_plain's weights differ from fsdp_no_launcher's"
    else
        nccl_fail "no tessera program, or python3 could not write the synthetic data"
    fi
    unset NCCL_DEBUG
    if [ $nccl_ok -eq 1 ]; then v=PASS; else v=FAIL; fi
    step $v "b NCCL with one rank (mpirun -np 1, $ndev)"
else
    step SKIP "b NCCL (not built, or under 130 s left)"
fi

# ------------------------------------------------------------------ 2c. compute-sanitizer
slog=$OUT/sanitizer.log
: >"$slog"
csan=$(command -v compute-sanitizer || true)
[ -z "$csan" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && csan=/usr/local/cuda/bin/compute-sanitizer
t_run=$(cap "$san_timeout" 90)
if ! want sanitize; then
    :
elif [ -n "$csan" ] && [ -d "$bin/tests" ] && [ "$t_run" -ge 10 ]; then
    mkdir -p "$work/san" && rm -f "$work"/san/*
    for t in $san_tests; do
        for tool in memcheck racecheck synccheck; do
            f=$work/san/$t.$tool
            if [ ! -x "$bin/tests/$t" ]; then
                echo "$bin/tests/$t: not built" >"$f.log"
                echo 127 >"$f.rc"
                continue
            fi
            while [ "$(jobs -rp | wc -l)" -ge "$san_jobs" ]; do wait -n; done
            (
                cd "$bin/tests" || exit
                TS_REQUIRE_CUDA=1 TS_SIM_DEVICES=4 TS_TEST_ONLY_CUDA=1 timeout -k 5 "$t_run" "$csan" --tool "$tool" \
                    --error-exitcode 1 "./$t" >"$f.log" 2>&1
                echo $? >"$f.rc"
            ) &
        done
    done
    wait
    ok=1
    for t in $san_tests; do
        for tool in memcheck racecheck synccheck; do
            f=$work/san/$t.$tool
            rc=$(cat "$f.rc" 2>/dev/null || echo 1)
            v=$(verdict "$rc")
            [ "$rc" = 127 ] && v="NOT BUILT"
            [ "$v" = PASS ] || ok=0
            es=$(grep -m1 'ERROR SUMMARY' "$f.log" 2>/dev/null | sed 's/^=* *//')
            note "$t $tool: $v (status $rc)${es:+, $es}"
            {
                echo "==== $t $tool: status $rc ($v)"
                cat "$f.log" 2>/dev/null
            } >>"$slog"
        done
    done
    if [ $ok -eq 1 ]; then v=PASS; else v=FAIL; fi
    step $v "c compute-sanitizer (${t_run} s a run, $san_jobs at once)"
else
    step SKIP "c compute-sanitizer (no compute-sanitizer, no tests, or no time left)"
fi

# ------------------------------------------------------------------ 2d. pinned reuse
plog=$OUT/pinned.log
: >"$plog"
if ! want pinned; then
    :
elif [ -x "$bin/tests/test_cuda_alloc" ] && [ "$(left)" -gt 20 ]; then
    (cd "$bin/tests" && TS_REQUIRE_CUDA=1 TS_SIM_DEVICES=4 run_to "$plog" "$(cap 90 60)" ./test_cuda_alloc)
    rc=$?
    notes < <(grep -E '^(pinned|record_stream)|FAIL|passed|failed' "$plog" | head -12)
    step "$(verdict $rc)" "d test_cuda_alloc alone (the pinned reuse)"
else
    step SKIP "d test_cuda_alloc (not built, or no time left)"
fi

# ------------------------------------------------------------------ 2e. benchmarks
elog=$OUT/bench.log
: >"$elog"
mode=
[ "${QUICK:-0}" = 1 ] && mode=quick
t=$(cap 120 0)
if ! want bench; then
    :
elif [ -f "$bin/CMakeCache.txt" ] && [ "$t" -ge 30 ]; then
    run_to "$elog" "$t" bash -c "cmake --build '$bin' --target bench_gpu -j16 && bench/run_gpu.sh '$bin' $mode"
    rc=$?
    notes < <(grep -E '^name |SKIP:| (yes|NO)$' "$elog" | head -16)
    v=$(verdict $rc)
    grep -q 'SKIP:' "$elog" && v=FAIL # a side that skipped on a GPU machine measured nothing
    step "$v" "e bench_gpu and bench/run_gpu.sh ${mode:-(full)}"
else
    step SKIP "e benchmarks (not configured, or under 30 s left)"
fi

# ------------------------------------------------------------------ summary
summary+=("total $((SECONDS - start)) s of a budget of $budget s; logs in $OUT")
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
exit 0

