#!/usr/bin/env bash
# run_onnx.sh — ONNX inference speed: Tessera running the exported file (bench_onnx), ONNX Runtime
# on the same file and PyTorch eager in inference_mode (bench/onnx_peers.py), best of 1 and 2
# threads each, and the imported model against the same model built with Tessera's C API.
# Usage: PYTHON=/opt/torch2/bin/torch-python bench/run_onnx.sh BUILD [RUNS]
#   (the models are exported first by tools/onnx_real_models.py into /tmp/tessera-onnx-models)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-10}
py=${PYTHON:-/opt/torch2/bin/torch-python}
out=${ONNX_MODELS:-/tmp/tessera-onnx-models}
source bench/bench_env.sh 2>/dev/null || true
"$py" -c "import sys; sys.path.insert(0, 'tools'); import onnx_real_models as m, os
os.makedirs('$out', exist_ok=True)
for n in ('resnet18', 'mobilenet_v3_small', 'gpt_mini'): m.export(n, '$out')" >/dev/null
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), ISA: $("$build"/tessera devices 2>/dev/null | grep -o 'vector ISA [a-z0-9]*' | head -1)"
printf "%-26s %10s %10s %10s %10s %9s %9s %9s\n" case tessera capi ort torch "vs ort" "vs torch" "vs capi"
for c in "resnet18 image 1" "resnet18 image 32" "mobilenet_v3_small image 1" "gpt_mini tokens 16"; do
  read -r name kind batch <<<"$c"
  t=$("$build"/bench/bench_onnx "$out/$name.onnx" "$kind" "$batch" "$runs")
  p=$("$py" bench/onnx_peers.py "$out/$name.onnx" "$name" "$kind" "$batch" "$runs")
  ts=$(awk '/^onnx/{print $2}' <<<"$t"); capi=$(awk '/^capi/{print $2}' <<<"$t")
  ort=$(awk '/^ort/{print $2}' <<<"$p"); pt=$(awk '/^torch/{print $2}' <<<"$p")
  awk -v c="$name b$batch" -v t="$ts" -v a="${capi:-0}" -v o="$ort" -v p="$pt" 'BEGIN {
    printf "%-26s %10.2f %10s %10.2f %10.2f %8.2fx %8.2fx %9s\n", c, t, (a > 0 ? sprintf("%.2f", a) : "-"),
           o, p, o / t, p / t, (a > 0 ? sprintf("%.2f", t / a) : "-") }'
done
