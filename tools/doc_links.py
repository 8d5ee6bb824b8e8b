#!/usr/bin/env python3
"""doc_links.py — the documents name only files of the repository, and only files that exist
(issue 54, "no document refers to a file outside the repository").
    tools/doc_links.py [FILE.md ...]        (ctest: doc_links; default: README.md, docs/**/*.md,
                                             bench/results/*.md)
Checks, in each document,
  1. every relative Markdown link [text](path#anchor) names a file or directory that exists and
     lies inside the repository;
  2. every path written in backquotes that begins with a directory of the repository's top level
     (`src/nn/norm.c`, `tools/*.py`) or of src/ (`core/init.c`, the environment table's form)
     exists (`bench/bench_x` the program of bench/bench_x.c, `nn/x.py` python/tessera/nn/x.py);
     a pattern with * or ? must match at least one file;
  3. no document points outside the repository: `../shared/...`, or a DESIGN.md (there is none).
Exits 1 and lists each problem as FILE:LINE: what."""
import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TOP = ("src/", "include/", "tools/", "tests/", "bench/", "docs/", "python/", "examples/", "cmake/",
       "abi/", ".ci/")
SRC_DIRS = ("backend/", "core/", "autograd/", "ops/", "amp/", "nn/", "optim/", "parallel/", "io/",
            "data/", "models/", "onnx/", "dist/")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
PATHLIKE = re.compile(r"^[A-Za-z0-9_.*?/+-]+$")
OUTSIDE = re.compile(r"\.\./shared\b|\bDESIGN\.md\b")


def exists(rel):
    """rel (relative to ROOT) names a file or directory, or matches one when it is a pattern"""
    path = os.path.join(ROOT, rel)
    if any(ch in rel for ch in "*?"):
        return bool(glob.glob(path))
    return os.path.exists(path)


def code_paths(token):
    """the repository paths a backquoted token may name (any one existing will do), or None"""
    token = token.strip().rstrip(".,;:")
    token = re.sub(r":\d+(-\d+)?$", "", token)  # file.c:123
    if " " in token or not PATHLIKE.match(token) or "//" in token:
        return None
    if token.startswith(TOP):
        return [token, token + ".c"]  # bench/bench_x: the program of bench/bench_x.c
    if token.startswith(SRC_DIRS) and "/" in token.rstrip("/"):
        return ["src/" + token, "python/tessera/" + token]  # nn/functional.py: the Python side
    return None


def check(doc):
    problems = []
    rel_doc = os.path.relpath(doc, ROOT)
    base = os.path.dirname(doc)
    in_fence = False
    for no, line in enumerate(open(doc, encoding="utf-8", errors="replace"), 1):
        where = f"{rel_doc}:{no}"
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        for m in OUTSIDE.finditer(line):
            problems.append(f"{where}: refers to a file outside the repository: {m.group(0)}")
        if in_fence:
            continue
        for m in LINK.finditer(line):
            target = m.group(1).split("#", 1)[0]
            if not target or re.match(r"^[a-z]+:", target):
                continue  # an anchor in this page, a URL, mailto:
            path = os.path.normpath(os.path.join(base, target))
            if os.path.relpath(path, ROOT).startswith(".."):
                problems.append(f"{where}: link leaves the repository: {m.group(1)}")
            elif not os.path.exists(path):
                problems.append(f"{where}: link to a missing file: {m.group(1)}")
        for m in CODE.finditer(LINK.sub("", line)):
            rels = code_paths(m.group(1))
            if rels and not any(exists(r) for r in rels):
                problems.append(f"{where}: names a missing path: {m.group(1)}")
    return problems


def main(argv):
    docs = [os.path.abspath(a) for a in argv] or sorted(
        [os.path.join(ROOT, "README.md")]
        + glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
        + glob.glob(os.path.join(ROOT, "bench", "results", "*.md")))
    problems = [p for d in docs for p in check(d)]
    for p in problems:
        print(p)
    print(f"doc_links: {len(docs)} documents, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
