#!/usr/bin/env python3
"""abi_check.py — the C library's ABI: which functions the public headers declare, whether each
carries TS_API (the only symbols libtessera.so exports), and whether the exported list matches the
committed one (abi/libtessera.symbols).

Usage (from the repository root):
  tools/abi_check.py --headers             every public declaration carries TS_API (exit 1 if not)
  tools/abi_check.py --fix                 puts TS_API in front of the declarations that lack it
  tools/abi_check.py --lib build/libtessera.so
                                           the headers' check, then the .so's exported functions
                                           against abi/libtessera.symbols and against the headers
  tools/abi_check.py --lib L --update      rewrites abi/libtessera.symbols and abi/libtessera.abi
                                           from the .so (an ABI change is a reviewed diff of both)

With --lib, `abidiff` (Debian's abigail-tools) also compares the .so with abi/libtessera.abi, the
committed `abidw` description. A Release build has no debug information, so that comparison covers
the ELF symbols, the SONAME and their versions; built with -g, abidw also records the types of every
exported function and abidiff then reports a changed struct or signature.

A declaration is a statement at file scope of a public header (include/tessera.h,
include/tessera/*.h) that names a ts_ function: `ts_tensor *ts_add(ts_tensor *a, ...);`. Static
inline functions and typedefs are not symbols and are skipped.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYMBOLS = os.path.join(ROOT, "abi", "libtessera.symbols")
ABI_XML = os.path.join(ROOT, "abi", "libtessera.abi")
NAME = re.compile(r"\b(ts_[A-Za-z0-9_]+)\s*\(")


def headers():
    return [os.path.join(ROOT, "include", "tessera.h")] + sorted(
        glob.glob(os.path.join(ROOT, "include", "tessera", "*.h")))


def strip_comments(line, in_comment):
    """The line without /* */ and // comments (as spaces), and whether a comment stays open."""
    out, i = [], 0
    while i < len(line):
        if in_comment:
            j = line.find("*/", i)
            if j < 0:
                return "".join(out), True
            i, in_comment = j + 2, False
        elif line.startswith("/*", i):
            in_comment, i = True, i + 2
        elif line.startswith("//", i):
            break
        else:
            out.append(line[i])
            i += 1
    return "".join(out), in_comment


def declarations(path):
    """(line index of the statement's first line, function name, has TS_API) for each file-scope
    function declaration of one header."""
    lines = open(path).read().split("\n")
    found, depth, in_comment, stmt, start, macro = [], 0, False, "", None, False
    for i, raw in enumerate(lines):
        code, in_comment = strip_comments(raw, in_comment)
        if macro or (not stmt and code.lstrip().startswith("#")):
            macro = code.rstrip().endswith("\\")
            continue
        for ch in code:
            if ch == "{":
                if depth == 0 and stmt.strip().startswith('extern "C"'):
                    stmt, start = "", None
                    continue
                depth += 1
            elif ch == "}":
                depth = max(depth - 1, 0)
                if depth == 0 and not stmt.strip():
                    continue
            if depth == 0:
                if ch == ";" or (ch == "}" and stmt.lstrip().startswith("static")):
                    s = stmt.strip()
                    m = NAME.search(s)
                    if m and not re.match(r"(typedef|static)\b", s) \
                            and not re.search(r"\(\s*\*", s.split(m.group(1))[0] + m.group(1)):
                        found.append((start, m.group(1), s.startswith("TS_API")))
                    stmt, start = "", None
                    continue
                if ch.strip() and start is None:
                    start = i
                stmt += ch
            elif stmt.lstrip().startswith("static"):
                stmt += ch
        if depth == 0 and stmt:
            stmt += " "
    return found


def check_headers(fix):
    missing, names = [], set()
    for h in headers():
        decls = declarations(h)
        names.update(n for _, n, _ in decls)
        bad = [(i, n) for i, n, ok in decls if not ok]
        if bad and fix:
            lines = open(h).read().split("\n")
            for i, _ in bad:
                lines[i] = "TS_API " + lines[i]
            open(h, "w").write("\n".join(lines))
        missing += [(os.path.relpath(h, ROOT), i + 1, n) for i, n in bad]
    return missing, names


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                         text=True).stdout
    return sorted({ln.split()[-1] for ln in out.splitlines()
                   if len(ln.split()) == 3 and ln.split()[1] in "TtWiDdBbRrVv"})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--headers", action="store_true")
    ap.add_argument("--fix", action="store_true")
    ap.add_argument("--lib")
    ap.add_argument("--update", action="store_true")
    a = ap.parse_args()
    missing, declared = check_headers(a.fix)
    if missing and not a.fix:
        for path, line, name in missing:
            print("%s:%d: %s: public declaration without TS_API" % (path, line, name))
        print("abi_check: %d declarations lack TS_API (tools/abi_check.py --fix adds it)"
              % len(missing))
        return 1
    if a.fix:
        print("abi_check: TS_API added to %d declarations" % len(missing))
    print("abi_check: %d public functions declared, each with TS_API" % len(declared))
    if not a.lib:
        return 0
    syms = exported(a.lib)
    if a.update:
        os.makedirs(os.path.dirname(SYMBOLS), exist_ok=True)
        with open(SYMBOLS, "w") as f:
            f.write("".join(s + "\n" for s in syms))
        print("abi_check: wrote %d symbols to %s" % (len(syms), os.path.relpath(SYMBOLS, ROOT)))
        xml = subprocess.run(["abidw", "--no-corpus-path", "--no-show-locs", a.lib], check=True,
                             capture_output=True, text=True).stdout
        # the dependencies differ by build (CUDA or not) and are not the ABI
        xml = re.sub(r"\n  <elf-needed>.*?</elf-needed>", "", xml, flags=re.S)
        with open(ABI_XML, "w") as f:
            f.write(xml)
        print("abi_check: wrote %s" % os.path.relpath(ABI_XML, ROOT))
        return 0
    rc = 0
    stray = [s for s in syms if s not in declared]
    for s in stray:
        print("abi_check: %s is exported but no public header declares it" % s)
    # a declared function the library does not define (a CUDA-only entry built without CUDA is
    # still defined by its stub, so every declaration must resolve)
    for s in sorted(declared - set(syms)):
        print("abi_check: %s is declared but libtessera.so does not export it" % s)
        rc = 1
    committed = open(SYMBOLS).read().split() if os.path.exists(SYMBOLS) else []
    added = sorted(set(syms) - set(committed))
    removed = sorted(set(committed) - set(syms))
    for s in removed:
        print("abi_check: %s was removed from the ABI (abi/libtessera.symbols lists it)" % s)
    for s in added:
        print("abi_check: %s is new in the ABI (not in abi/libtessera.symbols)" % s)
    if stray or added or removed:
        rc = 1
        print("abi_check: the exported symbols differ from abi/libtessera.symbols; if the change is "
              "meant, run tools/abi_check.py --lib %s --update and commit the list" % a.lib)
    else:
        print("abi_check: %d exported symbols match abi/libtessera.symbols" % len(syms))
    r = subprocess.run(["abidiff", ABI_XML, a.lib], capture_output=True,
                       text=True)
    if r.returncode:
        print(r.stdout + r.stderr)
        print("abi_check: abidiff reports an ABI change against abi/libtessera.abi (exit %d)"
              % r.returncode)
        rc = 1
    else:
        print("abi_check: abidiff: no ABI change against abi/libtessera.abi")
    return rc


if __name__ == "__main__":
    sys.exit(main())
