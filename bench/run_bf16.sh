#!/bin/sh
# run_bf16.sh — issue 29's bfloat16 goals on this CPU: bench_bf16.py on Tessera and on PyTorch in
# the same run (each best of 1 and 2 threads), the ratios, the machine's float32 and bf16 peaks
# (bench_peak_bf16), Tessera's AMX kernel against oneDNN's on an AMX host (bench_amx_gemm), and
# which oneDNN kernels ran (ONEDNN_VERBOSE: avx512_core_amx, avx512_core_bf16...) on both sides.
# Usage: bench/run_bf16.sh [BUILD_DIR] [quick]   (BUILD_DIR defaults to "build"; builds nothing)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
mode=${2:-full}
. "$here/bench_env.sh"
syspy=${TS_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|amx_bf16|avx512_fp16)$' | tr '\n' ' ')
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); ISA: $flags"
"$build/bench/bench_peak_bf16"
# on an AMX host: Tessera's own AMX kernel against oneDNN's AMX primitive on the large products
# (the kernel takes those by default; bench/results/autocast.md, "AMX host, session 23")
case " $flags " in *" amx_bf16 "*)
    TS_AMX_GEMM=all "$build/bench/bench_amx_gemm" 4096 4096 1024 2048 2048 1024 ;;
esac
PYTHONPATH="$build/python" "$syspy" "$here/bench_bf16.py" tessera "$mode" >"$tmp/ts.txt"
"$PYTHON" "$here/bench_bf16.py" torch "$mode" >"$tmp/pt.txt"
printf "%-26s %12s %12s %10s\n" case "tessera ms" "torch ms" "vs torch"
while read -r name ms rate; do
    pt=$(awk -v n="$name" '$1 == n {print $2}' "$tmp/pt.txt")
    awk -v n="$name" -v a="$ms" -v b="$pt" 'BEGIN { printf "%-26s %12.3f %12.3f %9.2fx\n", n, a, b, b / a }'
done <"$tmp/ts.txt"
for m in mlp resnet18 gpt; do
    awk -v m=$m '$1 == m "_step_f32" {f = $2} $1 == m "_step_autocast_bf16" {b = $2}
         END { if (b) printf "Tessera %s: autocast step %.2fx its own float32 step\n", m, f / b }' "$tmp/ts.txt"
done
# the kernels each side's bf16 product ran (one small product, verbose)
k_ts=$(ONEDNN_VERBOSE=1 PYTHONPATH="$build/python" "$syspy" -c 'import tessera as t; t.mm(t.ones(64, 64, dtype=t.bfloat16), t.ones(64, 64, dtype=t.bfloat16))' 2>/dev/null |
    grep -m1 'exec,cpu,matmul' | sed 's/.*exec,cpu,matmul,\([^,]*\),.*/\1/' || true)
k_pt=$(ONEDNN_VERBOSE=1 "$PYTHON" -c 'import torch as t; t.mm(t.ones(64, 64, dtype=t.bfloat16), t.ones(64, 64, dtype=t.bfloat16))' 2>/dev/null |
    grep -m1 'exec,cpu,matmul' | sed 's/.*exec,cpu,matmul,\([^,]*\),.*/\1/' || true)
echo "oneDNN bf16 matmul kernel: tessera ${k_ts:-none (widened to float32)}; torch ${k_pt:-not oneDNN (its own or MKL)}"
