#!/usr/bin/env bash
# pip_install_test.sh — issue 28's install check: `pip install ./python` into a fresh venv from a
# clean clone of the current commit (nothing but PyPI and the Debian packages `make deps` installs),
# then, from outside the tree, the README's first Python program and the pytest suite against the
# installed package (not the build folder).
#
# Usage: tools/pip_install_test.sh [PYTEST_ARGS...]
#   TS_PIP_PYTHON chooses the interpreter of the venv (default /usr/bin/python3, Debian's).
#   TS_PIP_CUDA=OFF (default) builds the wheel without the CUDA backend, which takes the longest to
#   compile; TS_PIP_CUDA=AUTO builds it when nvcc is present, as a plain `pip install ./python` does.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)

git clone -q "$root" "$tmp/src"
"${TS_PIP_PYTHON:-/usr/bin/python3}" -m venv "$tmp/venv"
py="$tmp/venv/bin/python"
echo "== pip install ./python[test] into a fresh venv ($("$py" --version))"
"$py" -m pip install -q --upgrade pip
"$py" -m pip install -q "$tmp/src/python[test]" \
    --config-settings=cmake.define.TS_CUDA="${TS_PIP_CUDA:-OFF}"

echo "== the README's first program, from outside the tree"
mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere"
# the README's "A first Python program" section, its first code block, as written
awk '/^## A first Python program/ { inpy = 1 } inpy && /^```python/ { code = 1; next }
     code && /^```/ { exit } code { print }' "$root/README.md" >first.py
[ -s first.py ] || { echo "pip_install_test: no first program in README.md" >&2; exit 1; }
TS_SIM_DEVICES=2 "$py" first.py | tee first.out
where=$("$py" -c 'import tessera, os; print(os.path.dirname(tessera.__file__))')
case $where in
"$tmp/venv/"*) echo "tessera imported from the venv: $where" ;;
*) echo "pip_install_test: tessera came from $where, not the venv" >&2; exit 1 ;;
esac

echo "== the pytest suite against the installed package (run from outside the tree)"
TS_SIM_DEVICES=2 "$py" -m pytest -q -p no:cacheprovider "$tmp/src/tests/python" "$@"
echo "== pip install test passed in $(($(date +%s) - start)) s"
