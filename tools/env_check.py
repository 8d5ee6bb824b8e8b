#!/usr/bin/env python3
"""env_check.py — the environment variables read in one place (issue 54, "each decision in one place").
    tools/env_check.py        (ctest: env_table)
Checks that
  1. no file of src/ calls getenv() except src/backend/env_config.c (the one snapshot) and the
     documented exception src/backend/cpu/omp_wait.c (it re-executes the process for libgomp);
  2. every variable of the table in src/backend/env_config.h has a row in docs/ARCHITECTURE.md's
     "Environment variables" table, and every TS_ variable that table says the library (src/)
     reads is in env_config.h.
Exits 1 and lists what disagrees."""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
GETENV_ALLOWED = {"src/backend/env_config.c", "src/backend/cpu/omp_wait.c"}


def table_names():
    text = open(os.path.join(ROOT, "src/backend/env_config.h")).read()
    return re.findall(r'X\(\s*\w+\s*,\s*"([A-Z0-9_]+)"', text)


def doc_rows():
    """(variable names of one row, the row's 'read in' column) for the library's table"""
    text = open(os.path.join(ROOT, "docs/ARCHITECTURE.md")).read()
    start = text.index("## Environment variables")
    end = text.find("\nRead only by tests", start)
    rows = []
    for line in text[start:end].splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        names = re.findall(r"`([A-Z][A-Z0-9_]+)", cells[0])
        rows.append((names, cells[-1]))
    return rows


def getenv_calls():
    bad = []
    for base, _, files in os.walk(os.path.join(ROOT, "src")):
        for f in files:
            if not f.endswith((".c", ".h", ".cu", ".cuh")):
                continue
            path = os.path.join(base, f)
            rel = os.path.relpath(path, ROOT)
            if rel in GETENV_ALLOWED:
                continue
            for no, line in enumerate(open(path, errors="replace"), 1):
                if re.search(r"\bgetenv\s*\(", line):
                    bad.append(f"{rel}:{no}: {line.strip()}")
    return bad


def main():
    problems = [f"getenv outside env_config.c: {b}" for b in getenv_calls()]
    names = table_names()
    if len(names) < 20 or len(set(names)) != len(names):
        problems.append(f"env_config.h: the table did not parse ({len(names)} names, some twice?)")
    documented = set()
    library_side = set()
    for row_names, read_in in doc_rows():
        documented.update(row_names)
        # rows the library reads (a path of src/ in 'read in'), not only libgomp, OpenBLAS or tools/
        if re.search(r"(core|backend|autograd|onnx|dist|ops|nn)/", read_in):
            library_side.update(n for n in row_names if n.startswith("TS_"))
    for n in names:
        if n not in documented:
            problems.append(f"{n}: in src/backend/env_config.h, missing from docs/ARCHITECTURE.md's table")
    for n in sorted(library_side - set(names) - {"TS_OMP_SPIN_SET"}):
        problems.append(f"{n}: docs/ARCHITECTURE.md says the library reads it; not in env_config.h")
    for p in problems:
        print(p)
    print(f"env_check: {len(names)} variables in the table, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
