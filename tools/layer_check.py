#!/usr/bin/env python3
"""layer_check.py — the layer rule of docs/ARCHITECTURE.md checked over the sources, and the largest
files and functions.

    tools/layer_check.py [--max-function N] [--top K] [--strict]

Prints (1) every #include in src/ that points to a higher layer than the including file's, except
the documented exceptions listed in EXCEPTIONS below (the same list as ARCHITECTURE.md's "The layer
rule"); (2) every #include in src/models, tools/ and python/src of a private src/ header (they use
the public headers only); (3) the K largest files of src/, python/src and tools/tessera; (4) every
function longer than N lines (default 150) and whether a comment in the ten lines above it says why
("long:" in the comment, e.g. `/* long: one switch over the ONNX attribute types */`).
(5) every #include of one backend's private header (src/backend/cpu, cuda, sim) from a front end.
--strict exits 1 when (1), (2), (5) or an unexplained long function is found (ctest runs it so).
"""
import argparse
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# rank of each src/ directory: a file may include its own rank and below
RANK = {
    "backend": 0, "core": 1, "autograd": 2, "ops": 3, "nn": 4, "optim": 4,
    "amp": 5, "parallel": 5, "io": 5, "data": 5, "onnx": 6, "dist": 6, "models": 7,
}

# (including file or directory prefix, included header): the documented exceptions
EXCEPTIONS = [
    ("", "amp/autocast.h"),                       # every front end consults autocast
    ("autograd/trace.c", "ops/elementwise.h"),    # tsi_ew_clone for the export trace
    ("amp/autocast_cache.c", "ops/view_grad.h"),
    ("amp/grad_scaler_step.c", "optim/optim_internal.h"),
    ("io/checkpoint.c", "nn/module_load.h"),
    ("io/checkpoint.c", "optim/optim_load.h"),
    ("backend/cpu/", "core/clones.h"),            # the ISA-variant macros
]

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(rel):
    """'src/ops/sort.c' -> 'ops'; None outside src/"""
    parts = rel.split("/")
    if len(parts) < 3 or parts[0] != "src":
        return None
    return parts[1]


def resolve(rel_file, inc):
    """the src/-relative path an include names, or None for public / system headers"""
    if inc == "tessera.h" or inc.startswith("tessera/"):
        return None
    here = os.path.dirname(rel_file)
    for base in (here, "src"):
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.exists(os.path.join(ROOT, cand)):
            return cand
    return None


def source_files(top, exts=(".c", ".h", ".cu", ".cuh")):
    for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
        for f in sorted(files):
            if f.endswith(exts):
                yield os.path.relpath(os.path.join(dirpath, f), ROOT)


def excepted(src_rel, target_rel):
    s = src_rel[len("src/"):]
    t = target_rel[len("src/"):]
    return any(s.startswith(who) and t == what for who, what in EXCEPTIONS)


def upward_includes():
    out = []
    for rel in source_files("src"):
        me = layer_of(rel)
        if me is None:
            continue
        with open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                target = resolve(rel, m.group(1))
                if target is None:
                    continue
                them = layer_of(target)
                if them is None or them not in RANK or me not in RANK:
                    continue
                if RANK[them] > RANK[me] and not excepted(rel, target):
                    out.append("%s:%d includes %s (%s above %s)" % (rel, n, target, them, me))
    return out


# the front ends reach a backend through src/backend/backend.h (the interface), the shared headers
# at src/backend/ and core's API only: the folders of one backend (src/backend/cpu, cuda, sim) are
# private to it and to core, which builds the backends and moves data between them. parallel/ (one
# process's device sets) is not a front end here: its NCCL transport (transport_nccl.c) drives the
# cuda backend's collectives as core drives its copies.
FRONT_ENDS = ("src/ops/", "src/nn/", "src/optim/", "src/onnx/", "src/dist/", "src/amp/",
              "src/autograd/", "src/io/", "src/data/", "src/models/", "python/src/",
              "tools/tessera/")
BACKEND_PRIVATE = ("src/backend/cpu/", "src/backend/cuda/", "src/backend/sim/")


def backend_private_includes():
    """every #include of one backend's private header from a front end"""
    out = []
    for top in ("src", "python/src", "tools/tessera"):
        for rel in source_files(top):
            if not rel.startswith(FRONT_ENDS):
                continue
            with open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE_RE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    for base in (os.path.dirname(rel), "src"):
                        cand = os.path.normpath(os.path.join(base, inc))
                        if os.path.exists(os.path.join(ROOT, cand)):
                            if cand.startswith(BACKEND_PRIVATE):
                                out.append("%s:%d includes %s, private to its backend"
                                           % (rel, n, cand))
                            break
    return out


def private_includes_outside():
    out = []
    for top in ("src/models", "tools/tessera", "python/src"):
        for rel in source_files(top):
            with open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE_RE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    if inc == "tessera.h" or inc.startswith("tessera/"):
                        continue
                    # the part's own headers are fine (src/models' shared "models/..." too); a
                    # private header of the library is not
                    if os.path.exists(os.path.join(ROOT, os.path.dirname(rel), inc)):
                        continue
                    if rel.startswith("src/models/") and inc.startswith("models/"):
                        continue
                    if os.path.exists(os.path.join(ROOT, "src", inc)):
                        out.append("%s:%d includes the library's private %s" % (rel, n, inc))
    return out


FUNC_START_RE = re.compile(r"^[A-Za-z_][\w \*\(\),\[\]]*\b(\w+)\s*\([^;]*$")


def functions(rel):
    """(name, first line, length in lines, explained) of each top-level function body: a line at
    column 0 opening a definition, its body until the matching brace at column 0"""
    with open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace") as fh:
        lines = fh.read().split("\n")
    # the #else / #elif branches blanked: braces are counted along the first branch only
    live, stack = [], []
    for line in lines:
        t = line.strip()
        if t.startswith(("#if", "# if")):
            stack.append(False)
        elif t.startswith(("#el", "# el")) and stack:
            stack[-1] = True
        elif t.startswith(("#endif", "# endif")) and stack:
            stack.pop()
            live.append("")
            continue
        live.append("" if any(stack) else line)
    lines = live
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = FUNC_START_RE.match(line)
        if m and not line.startswith(("typedef", "struct", "enum", "union", "static const",
                                      "#", "return")):
            # the opening brace: on this line or within the next few (wrapped parameters)
            j = i
            while j < len(lines) and j < i + 12 and "{" not in lines[j] and ";" not in lines[j]:
                j += 1
            if j < len(lines) and "{" in lines[j] and ";" not in lines[j].split("{")[0]:
                depth = 0
                k = j
                while k < len(lines):
                    depth += lines[k].count("{") - lines[k].count("}")
                    if depth <= 0 and k > j - 1 and "}" in lines[k]:
                        break
                    k += 1
                length = k - i + 1
                above = "\n".join(lines[max(0, i - 10):i])
                out.append((m.group(1), i + 1, length, "long:" in above.lower()))
                i = k + 1
                continue
        i += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-function", type=int, default=150)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--strict", action="store_true")
    a = ap.parse_args()

    up = upward_includes()
    print("== upward includes outside the documented exceptions: %d" % len(up))
    for s in up:
        print("  " + s)
    priv = private_includes_outside()
    print("== private library headers included by models, tools or python/src: %d" % len(priv))
    for s in priv:
        print("  " + s)

    be = backend_private_includes()
    print("== a backend's private headers included by a front end: %d" % len(be))
    for s in be:
        print("  " + s)

    sizes = []
    for top in ("src", "python/src", "tools/tessera"):
        for rel in source_files(top):
            with open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace") as fh:
                sizes.append((sum(1 for _ in fh), rel))
    sizes.sort(reverse=True)
    print("== largest files (lines)")
    for n, rel in sizes[:a.top]:
        print("  %6d  %s" % (n, rel))

    long_fns = []
    for top in ("src", "python/src", "tools/tessera"):
        for rel in source_files(top, (".c", ".cu")):
            for name, line, length, why in functions(rel):
                if length > a.max_function:
                    long_fns.append((length, rel, line, name, why))
    long_fns.sort(reverse=True)
    unexplained = [f for f in long_fns if not f[4]]
    print("== functions over %d lines: %d (%d without a 'long:' comment saying why)" %
          (a.max_function, len(long_fns), len(unexplained)))
    for length, rel, line, name, why in long_fns:
        print("  %5d  %s:%d %s%s" % (length, rel, line, name, "" if why else "   <- no 'long:' comment"))
    if a.strict and (up or priv or be or unexplained):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
