#!/bin/sh
# header_memory.sh — what a hostile safetensors header costs to load: writes three files and loads
# each with bench_header_memory, which prints the peak resident set.
#   array_100MB   a 100 MB header (the Python library's limit) of one array "0,0,0,...": 50 million
#                 JSON values (cJSON spends ~80 bytes on each)
#   array_16MiB   the same just under Tessera's 16 MiB header limit (8 million values)
#   worst_16MiB   the most a header within every limit can cost: 2^21 values (the limit), each an
#                 5-character string, in one array
# Usage: bench/header_memory.sh [BUILD_DIR]   (builds nothing; the files go to a temporary folder)
set -eu
build=${1:-build}
bin="$build/bench/bench_header_memory"
[ -x "$bin" ] || { echo "header_memory.sh: $bin not found; build first" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir" <<'PY'
import struct, sys
d = sys.argv[1]
def write(name, header):
    header += b" " * ((8 - len(header) % 8) % 8)
    with open("%s/%s" % (d, name), "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
def array(nbytes):
    n = (nbytes - 8) // 2
    return b'{"a":[' + b"0," * (n - 1) + b"0]}"
write("array_100MB", array(100_000_000 - 8))
write("array_16MiB", array((16 << 20) - 8))
write("worst_16MiB", b'{"a":[' + b",".join(b'"%05d"' % (i % 100000) for i in range((1 << 21) - 4)) + b"]}")
PY
for f in array_100MB array_16MiB worst_16MiB; do
    "$bin" "$dir/$f"
done
