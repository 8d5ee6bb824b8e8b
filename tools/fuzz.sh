#!/usr/bin/env bash
# fuzz.sh — builds the safetensors libFuzzer target with clang (-fsanitize=fuzzer,address,undefined)
# and fuzzes it for N seconds (default 60), starting from the committed corpus.
# Usage: tools/fuzz.sh [seconds]    Crash reproducers land in $FUZZ_BUILD (default build-fuzz).
set -euo pipefail
secs=${1:-60}
cd "$(dirname "$0")/.."
build=${FUZZ_BUILD:-build-fuzz}
corpus=tests/fuzz/corpus/safetensors

if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz.sh: clang is not installed (make deps installs clang and libclang-rt-dev)" >&2
  exit 1
fi
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
mkdir -p "$build"
if ! { cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DTS_FUZZ=ON -DTS_CUDA=OFF -DTS_BUILD_BENCH=OFF \
         -DCMAKE_C_FLAGS="$san -fno-omit-frame-pointer" &&
       cmake --build "$build" -j "${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}" \
         --target fuzz_safetensors; } >"$build/fuzz-build.log" 2>&1; then
  tail -40 "$build/fuzz-build.log" >&2
  echo "fuzz.sh: building the fuzz target failed (log: $build/fuzz-build.log)" >&2
  exit 1
fi

# New inputs go to a scratch folder: the committed corpus only changes by tools/gen_fuzz_corpus.py.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fuzz.sh: fuzzing the safetensors reader for ${secs} s from $(ls "$corpus" | wc -l) corpus files"
set +e # the progress lines (#N NEW ...) are left out of the log
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
  "$build/tests/fuzz_safetensors" -max_total_time="$secs" -max_len=65536 -timeout=10 \
  -rss_limit_mb=2048 -dict=tests/fuzz/safetensors.dict -print_final_stats=1 \
  -artifact_prefix="$build/" "$work" "$corpus" 2>&1 |
  grep -v '^#[0-9]'
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  echo "fuzz.sh: the fuzzer found a failure (exit $status); reproducer in $build/" >&2
  exit "$status"
fi
echo "fuzz.sh: no failure in ${secs} s"
