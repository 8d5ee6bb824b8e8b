#!/usr/bin/env bash
# fuzz.sh — builds the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined) and fuzzes
# each for a share of N seconds (default 60), starting from its committed corpus: the safetensors
# reader, the IDX, CIFAR-10 and CSV dataset readers, the CSV reader's numbers, the `tessera`
# command line, the ONNX loader and the PyTorch checkpoint reader (ts_load_pt).
# Usage: tools/fuzz.sh [seconds]    Crash reproducers land in $FUZZ_BUILD (default build-fuzz).
set -euo pipefail
secs=${1:-60}
cd "$(dirname "$0")/.."
build=${FUZZ_BUILD:-build-fuzz}
# target, corpus folder, extra libFuzzer flags
targets=(
  "fuzz_safetensors tests/fuzz/corpus/safetensors -dict=tests/fuzz/safetensors.dict"
  "fuzz_idx tests/fuzz/corpus/idx"
  "fuzz_cifar tests/fuzz/corpus/cifar"
  "fuzz_csv tests/fuzz/corpus/csv"
  "fuzz_csv_num tests/fuzz/corpus/csv_num"
  "fuzz_args tests/fuzz/corpus/args -dict=tests/fuzz/args.dict -close_fd_mask=1"
  "fuzz_npy tests/fuzz/corpus/npy -dict=tests/fuzz/npy.dict"
  "fuzz_onnx tests/fuzz/corpus/onnx"
  "fuzz_pt tests/fuzz/corpus/pt -dict=tests/fuzz/pt.dict"
)
share=$((secs / ${#targets[@]}))
[ "$share" -ge 1 ] || share=1

if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz.sh: clang is not installed (make deps installs clang and libclang-rt-dev)" >&2
  exit 1
fi
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
mkdir -p "$build"
names=()
for t in "${targets[@]}"; do names+=("${t%% *}"); done
if ! { cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DTS_FUZZ=ON -DTS_CUDA=OFF -DTS_BUILD_BENCH=OFF \
         -DCMAKE_C_FLAGS="$san -fno-omit-frame-pointer" &&
       cmake --build "$build" -j "${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}" \
         --target "${names[@]}"; } >"$build/fuzz-build.log" 2>&1; then
  tail -40 "$build/fuzz-build.log" >&2
  echo "fuzz.sh: building the fuzz targets failed (log: $build/fuzz-build.log)" >&2
  exit 1
fi

# New inputs go to a scratch folder: the committed corpora only change by tools/gen_*_corpus.py.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for t in "${targets[@]}"; do
  read -r name corpus extra <<<"$t"
  mkdir -p "$work/$name"
  echo "fuzz.sh: fuzzing $name for ${share} s from $(ls "$corpus" | wc -l) corpus files"
  set +e # the progress lines (#N NEW ...) are left out of the log
  # shellcheck disable=SC2086 # $extra is a list of flags
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/tests/$name" -max_total_time="$share" -max_len=65536 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 $extra \
    -artifact_prefix="$build/$name-" "$work/$name" "$corpus" 2>&1 |
    grep -v '^#[0-9]'
  status=${PIPESTATUS[0]}
  set -e
  if [ "$status" -ne 0 ]; then
    echo "fuzz.sh: $name found a failure (exit $status); reproducer in $build/" >&2
    exit "$status"
  fi
done
echo "fuzz.sh: no failure in ${secs} s"
