#!/usr/bin/env bash
# mutate.sh — mutation testing: plants small bugs (universalmutator's C rules: operators, constants,
# conditions, deleted statements) in the given source files one at a time, rebuilds incrementally and
# runs the tests that cover the file (tools/mutate.map). A mutant the tests fail on is killed; one
# they pass survived: a bug the suite cannot see, or an equivalent mutant (same behaviour). Mutants
# whose object code equals the original's are equivalent for certain and left out of the score, as
# are mutants that do not compile. Every file is restored afterwards, also on Ctrl-C.
#
# Python extension sources (python/src/*.c) rebuild tessera_python and run their pytest files; a
# library source whose map line names pytest files rebuilds tessera_python (and libtessera.so) too.
#
# Usage: nice -n 19 tools/mutate.sh [-n N] [-s SEED] [-B BUILD] [-o REPORT] [-r OLD] FILE...
#   -n N       mutants per file, drawn at random (seeded) among those that compile (default 20;
#              0 = all of them, which takes hours per file on 2 cores)
#   -s SEED    the draw (default 1): the same seed and sources give the same mutants
#   -B BUILD   build folder (default build-mut: Release, no CUDA, no benchmarks; made if missing)
#   -o REPORT  where each mutant's outcome and diff go (default BUILD/mutate-report.txt)
#   -r OLD     only the mutants that SURVIVED in the report OLD (after adding tests: the killed
#              ones stay killed while tests are only added or tightened)
#   -d REV     only the lines the working tree changed or added since git revision REV (a change
#              inside a large file: its own lines, not a draw over the whole file)
# Needs `mutate` (pip install universalmutator). Prints the score per file and overall: killed /
# (killed + survived), with the sample size.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
per_file=20 seed=1 build=build-mut report="" rerun="" since=""
while getopts "n:s:B:o:r:d:h" opt; do
    case $opt in
    n) per_file=$OPTARG ;;
    s) seed=$OPTARG ;;
    B) build=$OPTARG ;;
    o) report=$OPTARG ;;
    r) rerun=$OPTARG ;;
    d) since=$OPTARG ;;
    *) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "mutate.sh: name the source files to mutate (see -h)" >&2; exit 2; }
command -v mutate >/dev/null 2>&1 ||
    { echo "mutate.sh: universalmutator is missing: pip install universalmutator" >&2; exit 2; }
report=${report:-$build/mutate-report.txt}
map=${MUTATE_MAP:-tools/mutate.map}

tests_for() { # the tests of the first map line whose glob matches $1
    local glob rest
    while read -r glob rest; do
        [[ -z $glob || $glob == \#* ]] && continue
        # shellcheck disable=SC2053 # the map's first column is a glob
        if [[ $1 == $glob ]]; then
            echo "$rest"
            return
        fi
    done <"$map"
}

for f in "$@"; do
    [ -f "$f" ] || { echo "mutate.sh: no file $f" >&2; exit 2; }
    [ -n "$(tests_for "$f")" ] || { echo "mutate.sh: $f has no line in $map" >&2; exit 2; }
done

if [ ! -f "$build/CMakeCache.txt" ]; then
    echo "mutate.sh: configuring $build"
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTS_CUDA=OFF -DTS_BUILD_BENCH=OFF \
        >"$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; exit 1; }
fi
# a build folder made before a test file was added knows no target for it: refresh the globs
cmake "$build" >"$build.configure.log" 2>&1 || { cat "$build.configure.log" >&2; exit 1; }
jobs=${MUTATE_JOBS:-2}
# the interpreter the build made the Python extension for (its pytest files run under it)
python=$(sed -n 's/^_\{0,1\}Python3_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt" | head -1)
python=${python:-python3}
work=$(mktemp -d)
current="" # the file being mutated, restored by the trap
child=""   # the test running, stopped by the trap
restore() {
    [ -z "$child" ] || kill -KILL "$child" 2>/dev/null || true
    if [ -n "$current" ]; then cp "$work/original" "$current"; current=""; fi
    rm -rf "$work"
}
trap restore EXIT
trap 'exit 130' INT TERM

# the library's sources build into target tessera; the Python extension's (python/src/*.c) into
# tessera_python, whose tests are pytest files ("py:test_x.py" in the map)
target_of() { case $1 in python/src/*) echo tessera_python ;; *) echo tessera ;; esac; }
object_of() {
    case $1 in
    python/src/*) echo "$build/python/CMakeFiles/tessera_python.dir/src/${1#python/src/}.o" ;;
    *) echo "$build/CMakeFiles/tessera.dir/$1.o" ;;
    esac
}
build_lib() { cmake --build "$build" -j "$jobs" --target "$(target_of "$1")" >"$work/build.log" 2>&1; }
targets_of() { # the map's "test:VAR=value" entries name the target test; pytest files ("py:")
    local t py=""  # run against the extension, which links libtessera.so: rebuild both
    for t in $1; do
        [[ $t == np[0-9]:* ]] && t=${t#np?:}
        if [[ $t == py:* ]]; then py=1; else printf '%s ' "${t%%:*}"; fi
    done
    [ -z "$py" ] || printf 'tessera_python '
}
# Runs each test program as ctest would (TS_SIM_DEVICES=4, from the tests' folder; "test:VAR=value"
# adds a variable, e.g. test_ops_table:TS_OT_FILTER=softmax for the rows a file can touch; "np2:test"
# runs it under mpiexec with 2 ranks, as ctest's test_dist_*_np2), under a
# time limit: a mutant that makes a test hang is killed too. Sets $failing to the first failing
# test and returns 1, or returns 0 when every test passed.
run_tests() {
    local t rc name env
    for t in $1; do
        ranks=""
        if [[ $t == np[0-9]:* ]]; then ranks=${t:2:1} t=${t#np?:}; fi
        name=${t%%:*} env=""
        [ "$name" = "$t" ] || env=${t#*:}
        rc=0
        # in the background and waited for, so that Ctrl-C stops it at once
        if [[ $t == py:* ]]; then # a pytest file of tests/python against BUILD/python, as ctest's
            env PYTHONPATH="$build/python" TS_SIM_DEVICES=2 timeout -s KILL "$2" \
                "$python" -m pytest -q -x -p no:cacheprovider "tests/python/${t#py:}" \
                >"$work/test.log" 2>&1 &
        elif [ -n "$ranks" ]; then # as ctest's test_dist_*_npN: one thread a rank, oversubscribed
            (cd "$build/tests" && exec env TS_SIM_DEVICES=4 OMP_NUM_THREADS=1 \
                OMPI_MCA_rmaps_base_oversubscribe=1 $env timeout -s KILL "$2" mpiexec -n "$ranks" \
                --oversubscribe --allow-run-as-root --bind-to none "./$name") >"$work/test.log" 2>&1 &
        else
            (cd "$build/tests" && exec env TS_SIM_DEVICES=4 $env timeout -s KILL "$2" "./$name") \
                >"$work/test.log" 2>&1 &
        fi
        child=$!
        wait "$child" 2>/dev/null || rc=$? # (a crash is a kill, not news)
        child=""
        [ $rc -eq 0 ] || [ $rc -eq 77 ] || { failing=$t; return 1; }
    done
    return 0
}

: >"$report"
total_k=0 total_s=0 total_e=0 total_x=0
summary=""
for f in "$@"; do
    tests=$(tests_for "$f")
    targets=$(targets_of "$tests")
    echo "== $f: tests $tests"
    # shellcheck disable=SC2086 # a list of targets
    cmake --build "$build" -j "$jobs" --target tessera "$(target_of "$f")" $targets >"$work/build.log" 2>&1 ||
        { tail -20 "$work/build.log" >&2; echo "mutate.sh: the build fails" >&2; exit 1; }
    start=$(date +%s)
    if ! run_tests "$tests" 3600; then
        echo "mutate.sh: $failing fails without any mutant; fix that first" >&2
        exit 1
    fi
    base=$(($(date +%s) - start))
    limit=$((base * 5 + 30))
    orig_sum=$(sha256sum <"$(object_of "$f")")
    rm -rf "$work/m" && mkdir -p "$work/m"
    cp "$f" "$work/original"
    lines_opt=()
    if [ -n "$since" ]; then # the new side's line numbers of every hunk since REV
        git diff -U0 "$since" -- "$f" |
            sed -n 's/^@@ -[0-9,]* +\([0-9]*\)\(,\([0-9]*\)\)\{0,1\} @@.*/\1 \3/p' |
            while read -r first count; do
                for ((i = 0; i < ${count:-1}; i++)); do echo $((first + i)); done
            done >"$work/lines"
        [ -s "$work/lines" ] || { echo "  (no line of $f changed since $since)"; continue; }
        lines_opt=(--lines "$work/lines")
    fi
    mutate "$f" c --noCheck ${lines_opt[@]+"${lines_opt[@]}"} --mutantDir "$work/m" \
        >"$work/generate.log" 2>&1
    # the draw: a seeded shuffle of all mutants, taken in order until N compiled
    mapfile -t order < <(python3 -c '
import os, random, sys, zlib
names = sorted(os.listdir(sys.argv[1]), key=lambda n: int(n.split(".")[-2]))
random.Random(int(sys.argv[2]) * 1000003 + zlib.crc32(sys.argv[3].encode())).shuffle(names)
print("\n".join(names))' "$work/m" "$seed" "$f")
    if [ -n "$rerun" ]; then # the survivors of the old report, in its order
        mapfile -t order < <(awk -v f="$f" '$3 == "SURVIVED" && index($1, f ":") == 1 { print $2 }' \
            "$rerun")
    fi
    k=0 s=0 e=0 x=0
    current=$f
    for m in "${order[@]}"; do
        [ -z "$rerun" ] && [ "$per_file" -gt 0 ] && [ $((k + s + e)) -ge "$per_file" ] && break
        cp "$work/m/$m" "$f"
        change=$(diff "$work/original" "$f" | grep '^[<>]' | head -4 || true)
        line=$(diff "$work/original" "$f" | sed -n '1s/[acd].*//p' || true)
        if ! build_lib "$f"; then
            x=$((x + 1))
            continue
        fi
        if [ "$(sha256sum <"$(object_of "$f")")" = "$orig_sum" ]; then
            verdict="EQUIVALENT (same object code)"
            e=$((e + 1))
        else
            # shellcheck disable=SC2086
            cmake --build "$build" -j "$jobs" --target $targets >"$work/build.log" 2>&1 || true
            if run_tests "$tests" "$limit"; then
                verdict="SURVIVED"
                s=$((s + 1))
            else
                verdict="KILLED by $failing"
                k=$((k + 1))
            fi
        fi
        printf '%s:%s %s %s\n%s\n\n' "$f" "$line" "$m" "$verdict" "$change" >>"$report"
        printf '  %-12s %s:%s\n' "${verdict%% *}" "$f" "$line"
        cp "$work/original" "$f"
    done
    cp "$work/original" "$f" # the draw can end on a mutant that did not compile
    current=""
    build_lib "$f" || true # the original again, and the tests linked with it
    # shellcheck disable=SC2086
    cmake --build "$build" -j "$jobs" --target $targets >"$work/build.log" 2>&1 || true
    score="n/a"
    [ $((k + s)) -gt 0 ] && score=$(awk -v k=$k -v s=$s 'BEGIN { printf "%.1f%%", 100 * k / (k + s) }')
    line=$(printf '%-36s %3d sampled: %3d killed, %3d survived, %3d same object, %3d not compiling; score %s' \
        "$f" $((k + s + e)) $k $s $e $x "$score")
    echo "$line"
    summary+="$line"$'\n'
    total_k=$((total_k + k)) total_s=$((total_s + s)) total_e=$((total_e + e)) total_x=$((total_x + x))
done
echo
echo "== mutation score (seed $seed, up to $per_file mutants per file; report: $report)"
printf '%s' "$summary"
if [ $((total_k + total_s)) -gt 0 ]; then
    awk -v k=$total_k -v s=$total_s -v e=$total_e -v x=$total_x 'BEGIN {
        printf "total: %d killed of %d non-equivalent by object code (%d same object, %d not compiling): %.1f%%\n",
               k, k + s, e, x, 100 * k / (k + s) }'
fi
