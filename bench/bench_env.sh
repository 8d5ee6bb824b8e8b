# bench_env.sh — sourced by every bench/run*.sh: which PyTorch to compare with, the ISA caps, and
# the header naming the machine and both sides.
#
# PYTHON: the interpreter whose torch is the peer. Unset: PyTorch 2.x from PyPI when
#   ../shared/tools/install-torch.sh installed it (/opt/torch2/bin/torch-python), else python3.
# BENCH_ISA=avx2|generic: both sides capped at that ISA (Tessera: TS_CPU_ISA, and its OpenBLAS
#   through OPENBLAS_CORETYPE; PyTorch: ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA,
#   MKL_ENABLE_INSTRUCTIONS), for the issue's comparison of an AVX-512 host running AVX2 code.
# OpenMP's wait: unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, both sides get
#   GOMP_SPINCOUNT=1000 (what `tessera` uses: docs/USAGE.md, "Threads"); libgomp's default spinning
#   collapses on a machine that other processes keep busy, on either side. BENCH_OMP=none: leave
#   it alone (run_threads.sh, which sets it per run).
# Usage: . "$here/bench_env.sh"; bench_header "$build"

if [ -z "${PYTHON:-}" ]; then
    if [ -x /opt/torch2/bin/torch-python ]; then
        PYTHON=/opt/torch2/bin/torch-python
    else
        PYTHON=python3
    fi
fi
export PYTHON

case "${BENCH_ISA:-}" in
"") ;;
avx2)
    export TS_CPU_ISA=avx2 OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 \
        ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2
    ;;
generic)
    export TS_CPU_ISA=generic OPENBLAS_CORETYPE=Prescott ATEN_CPU_CAPABILITY=default \
        ONEDNN_MAX_CPU_ISA=SSE41 MKL_ENABLE_INSTRUCTIONS=SSE4_2
    ;;
*)
    echo "bench_env.sh: BENCH_ISA=$BENCH_ISA is not avx2 or generic" >&2
    exit 2
    ;;
esac

if [ -z "${OMP_WAIT_POLICY:-}" ] && [ -z "${GOMP_SPINCOUNT:-}" ] && [ "${BENCH_OMP:-}" != none ]; then
    export GOMP_SPINCOUNT=1000
fi

# One line for the machine, one per side: the CPU (model, cores, vector ISA), Tessera (the ISA its
# kernels use, its BLAS and threads: `tessera devices`), PyTorch (version, BLAS, the ISA of its
# kernels, threads) and the load.
bench_header() {
    isa=$(grep -o -w -m1 -e avx512f /proc/cpuinfo | head -1 || true)
    [ -n "$isa" ] || isa=$(grep -o -w -m1 -e avx2 /proc/cpuinfo | head -1 || true)
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, best ISA ${isa:-generic}"
    if [ -x "$1/tessera" ]; then
        echo "Tessera: $("$1/tessera" devices | sed -n 's/^cpu: *//p')"
    fi
    echo "PyTorch ($PYTHON): $("$PYTHON" -c '
import re, torch
blas = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
print(torch.__version__, "BLAS", blas.group(1) if blas else "?", "ISA",
      torch.backends.cpu.get_cpu_capability(), torch.get_num_threads(), "threads,",
      "oneDNN" if torch.backends.mkldnn.is_available() else "no oneDNN")
' 2>/dev/null || echo "not importable")"
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); OpenMP wait for both sides: ${OMP_WAIT_POLICY:+OMP_WAIT_POLICY=$OMP_WAIT_POLICY }${GOMP_SPINCOUNT:+GOMP_SPINCOUNT=$GOMP_SPINCOUNT}${BENCH_ISA:+; both sides capped at $BENCH_ISA}"
}
