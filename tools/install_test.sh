#!/usr/bin/env bash
# install_test.sh — installs a built Tessera as a new user would (cmake --install to a temporary
# prefix), moves the install elsewhere (it must not remember where it was made), then builds
# examples/quickstart.c from outside the source tree: with the compile line of docs/USAGE.md, run
# exactly as written there (the lines between its install_test markers, with HOME a temporary
# folder holding the install at $HOME/opt/tessera), against libtessera.a with pkg-config --static,
# and with find_package(Tessera); and runs the programs.
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

# The documented compile line (docs/USAGE.md, between the install_test markers), as written: the
# install where it says ($HOME/opt/tessera, HOME a temporary folder), my_program.c the quickstart,
# LD_LIBRARY_PATH without any folder holding a libtessera.so (the program must find it itself).
doc_lines=$(awk '/<!-- install_test: begin/ {on = 1; next} /<!-- install_test: end/ {on = 0}
                 on && !/^```/' "$src/docs/USAGE.md")
[ -n "$doc_lines" ] || { echo "install_test: no install_test markers in docs/USAGE.md" >&2; exit 1; }
mkdir -p "$tmp/home/opt" "$tmp/user"
mv "$prefix" "$tmp/home/opt/tessera"
prefix=$tmp/home/opt/tessera
pc=$(find "$prefix" -name tessera.pc)
cp "$src/examples/quickstart.c" "$tmp/user/my_program.c"
ld_path=""
IFS=: read -ra dirs <<<"${LD_LIBRARY_PATH:-}"
for d in "${dirs[@]}"; do
  [ -n "$d" ] && ! compgen -G "$d/libtessera.so*" >/dev/null && ld_path=${ld_path:+$ld_path:}$d
done
echo "install_test: docs/USAGE.md's lines:"
sed 's/^/  /' <<<"$doc_lines"
(cd "$tmp/user" && env -u PKG_CONFIG_PATH HOME="$tmp/home" LD_LIBRARY_PATH="$ld_path" \
   bash -euo pipefail -c "$doc_lines") >"$tmp/out_so" ||
  { echo "install_test: docs/USAGE.md's compile line failed" >&2; exit 1; }
[ -x "$tmp/user/my_program" ] || { echo "install_test: the lines built no my_program" >&2; exit 1; }
# the program links the installed libtessera.so (ldd's output read whole, not piped into grep -q:
# under pipefail the SIGPIPE ldd gets when grep stops reading early fails the pipeline on a match)
export PKG_CONFIG_PATH="$(dirname "$pc")"
libdir=$(pkg-config --variable=libdir tessera)
linked=$(env LD_LIBRARY_PATH="$ld_path" ldd "$tmp/user/my_program")
so_name=libtessera.so.$(pkg-config --modversion tessera | cut -d. -f1,2)
grep -q "$so_name => $(cd "$libdir" && pwd -P)/$so_name\|$so_name => $libdir/$so_name" <<<"$linked" ||
  { echo "install_test: the program did not link the installed libtessera.so" >&2; echo "$linked" >&2; exit 1; }
echo "install_test: docs/USAGE.md's line built a program on libtessera.so that ran ($(head -1 "$tmp/out_so"))"

# pkg-config, the static library (--static adds the libraries it needs)
cc -std=c11 -o "$tmp/quickstart_pc" "$src/examples/quickstart.c" \
   $(pkg-config --cflags --libs --static tessera | sed "s|-ltessera |$libdir/libtessera.a |")
"$tmp/quickstart_pc" >"$tmp/out_pc"
echo "install_test: pkg-config build against libtessera.a ran ($(head -1 "$tmp/out_pc"))"
cmp -s "$tmp/out_pc" "$tmp/out_so" || { echo "install_test: shared and static disagree" >&2; exit 1; }

# the installed command, moved with its prefix, finds its libtessera.so
"$prefix/bin/tessera" devices >/dev/null ||
  { echo "install_test: the installed tessera command does not run" >&2; exit 1; }
echo "install_test: the installed tessera command runs"

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
