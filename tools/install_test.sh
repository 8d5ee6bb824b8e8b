#!/usr/bin/env bash
# install_test.sh — installs a built Tessera as a new user would (cmake --install to a temporary
# prefix), moves the install elsewhere (it must not remember where it was made), then builds
# examples/quickstart.c from outside the source tree twice — with pkg-config and with
# find_package(Tessera) — and runs both programs.
# Usage: tools/install_test.sh [build folder, default build]
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/first" >/dev/null
mv "$tmp/first" "$tmp/prefix" # relocated: nothing may point at $tmp/first
prefix=$tmp/prefix
if grep -rq "$tmp/first" "$prefix"; then
  echo "install_test: the install remembers its first prefix:" >&2
  grep -rl "$tmp/first" "$prefix" >&2
  exit 1
fi
pc=$(find "$prefix" -name tessera.pc)
cfg=$(find "$prefix" -name TesseraConfig.cmake)
[ -n "$pc" ] && [ -n "$cfg" ] || { echo "install_test: tessera.pc or TesseraConfig.cmake missing" >&2; exit 1; }

# pkg-config (a static library: --static adds the libraries it needs)
export PKG_CONFIG_PATH="$(dirname "$pc")"
cc -std=c11 -o "$tmp/quickstart_pc" "$src/examples/quickstart.c" \
   $(pkg-config --cflags --libs --static tessera)
"$tmp/quickstart_pc" >"$tmp/out_pc"
echo "install_test: pkg-config build ran ($(head -1 "$tmp/out_pc"))"

# CMake package
mkdir -p "$tmp/project"
cp "$src/examples/quickstart.c" "$tmp/project/"
cat >"$tmp/project/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(quickstart LANGUAGES C)
find_package(Tessera 0.1 REQUIRED)
add_executable(quickstart quickstart.c)
target_link_libraries(quickstart PRIVATE Tessera::tessera)
CMAKE
cmake -S "$tmp/project" -B "$tmp/project/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/project/build" >/dev/null
"$tmp/project/build/quickstart" >"$tmp/out_cmake"
echo "install_test: find_package(Tessera) build ran ($(head -1 "$tmp/out_cmake"))"
cmp -s "$tmp/out_pc" "$tmp/out_cmake" || { echo "install_test: the two programs disagree" >&2; exit 1; }
