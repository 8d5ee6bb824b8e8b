#!/usr/bin/env python3
"""run_corpus.py — runs the corpus of real programs (tests/programs/*.py, taken from pytorch/examples and
pytorch/tutorials; see README.md) each in its own subprocess and checks the loss or accuracy it prints
against bounds recorded from a PyTorch run of the same program.

  run_corpus.py [--lib tessera|torch] [--pythonpath DIR] [--only a,b] [--timeout S] [--budget S] [-v]

--lib tessera (default) runs the programs as written (`import tessera as torch`) with DIR (the build's
python folder) on PYTHONPATH. --lib torch rewrites `tessera.vision` to `torchvision` and `tessera` to
`torch` on the fly, to record the PyTorch numbers (run it with PyTorch's interpreter).
Data: Debian's Fashion-MNIST (/usr/share/datasets/fashion-mnist) stands in for MNIST; the harness writes
the first TRAIN_N / TEST_N images of it, uncompressed, to ../data/{MNIST,FashionMNIST}/raw and
./data/... of the programs' working folder (torchvision's layout, which tessera.vision reads too).
A program registered with numpy2=True runs under an interpreter with NumPy 2 (numpy2_python()); without
one it is an expected failure.
Exit status: 0 when every program passes or fails as listed in XFAIL (corpus_list.py); 1 otherwise, or
when the whole run takes longer than --budget; 77 (ctest's skip) without Debian's Fashion-MNIST."""
import argparse
import gzip
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FASHION = "/usr/share/datasets/fashion-mnist"
TRAIN_N, TEST_N = 1000, 500
FLOAT = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"

# name: (command-line arguments, regex whose LAST match's group 1 is the checked number, (lo, hi),
#        PyTorch 2.15 CPU's printed number for that run). Bounds are set around the PyTorch number wide
# enough for a different random stream (Tessera's generator is not PyTorch's), narrow enough that a
# program that does not learn falls outside.
PROGRAMS = {}


def program(name, args=(), pattern=None, bounds=None, *, torch=None, timeout=None, setup=None, source=None,
            numpy2=False):
    """setup: a program of this folder that makes the data (run first, in the same working folder);
    source: the file (NAME.py) or folder (NAME/main.py) to run when not the entry's name;
    numpy2: the program needs NumPy 2 (run under numpy2_python() when this interpreter's NumPy is older)"""
    PROGRAMS[name] = dict(args=list(args), pattern=pattern, bounds=bounds, torch=torch, timeout=timeout,
                          setup=setup, source=source or name, numpy2=numpy2)


# Interpreters that may have NumPy 2 where this one has NumPy 1 (Debian 12's python3 has 1.24): the
# environment's TS_CORPUS_NUMPY2_PYTHON, then the PyTorch venv the README's PyTorch numbers come from.
NUMPY2_CANDIDATES = (os.environ.get("TS_CORPUS_NUMPY2_PYTHON", ""), "/opt/torch2/bin/torch-python")
NUMPY1_FAILURE = r"NoneType copy mode not allowed"  # NumPy 1's np.array(x, copy=None), PyTorch's too


def numpy_major(python):
    """(NumPy's major version, Python's (major, minor)) under interpreter `python`; None if it fails"""
    try:
        out = subprocess.run([python, "-c", "import sys, numpy; print(numpy.__version__.split('.')[0], "
                              "*sys.version_info[:2])"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True, timeout=60).stdout.split()
        return int(out[0]), (int(out[1]), int(out[2]))
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


_numpy2 = {}


def numpy2_python():
    """an interpreter with NumPy 2 and this one's Python version (so the build's extension, made for
    it, loads): this one when it has NumPy 2, else the first of NUMPY2_CANDIDATES that does; None
    when there is none"""
    if "python" not in _numpy2:
        _numpy2["python"] = None
        for cand in (sys.executable,) + NUMPY2_CANDIDATES:
            if cand and os.path.exists(cand):
                got = numpy_major(cand)
                if got and got[0] >= 2 and got[1] == tuple(sys.version_info[:2]):
                    _numpy2["python"] = cand
                    break
    return _numpy2["python"]


# the programs are registered in corpus_list.py, to keep this file about the harness
sys.path.insert(0, HERE)
from corpus_list import XFAIL, register  # noqa: E402

register(program, FLOAT)


def write_idx(src, dst, n):
    with gzip.open(src, "rb") as f:
        head = f.read(8)
        magic, count = struct.unpack(">II", head)
        dims = [struct.unpack(">I", f.read(4))[0] for _ in range((magic & 0xFF) - 1)]
        per = 1
        for d in dims:
            per *= d
        body = f.read(per * min(n, count))
    with open(dst, "wb") as f:
        f.write(struct.pack(">II", magic, min(n, count)))
        for d in dims:
            f.write(struct.pack(">I", d))
        f.write(body)


def make_data(root):
    for sub in ("MNIST", "FashionMNIST"):
        raw = os.path.join(root, sub, "raw")
        os.makedirs(raw, exist_ok=True)
        for split, n in (("train", TRAIN_N), ("t10k", TEST_N)):
            for kind in ("images-idx3", "labels-idx1"):
                name = "%s-%s-ubyte" % (split, kind)
                write_idx(os.path.join(FASHION, name + ".gz"), os.path.join(raw, name), n)


def make_stubs(run):
    """the programs plot, gat and nn_tutorial import requests (to download only what the harness
    generates), nn_tutorial imports IPython; CI has none of them: no-op stand-ins (plots are not
    checked; nothing is downloaded)"""
    pkg = os.path.join(run, "matplotlib")
    os.makedirs(pkg)
    noop = ("def _noop(*a, **k):\n    return _noop\n\n\n"
            "def __getattr__(name):\n    return _noop\n")
    for mod in ("__init__", "pyplot", "ticker"):
        with open(os.path.join(pkg, mod + ".py"), "w") as f:
            # `from matplotlib import pyplot` finds the submodule, not the package's __getattr__
            f.write(noop + ("\nimport matplotlib.pyplot  # noqa: E402\nimport matplotlib.ticker  # noqa: E402\n"
                            if mod == "__init__" else ""))
    with open(os.path.join(run, "requests.py"), "w") as f:
        f.write("def get(*a, **k):\n    raise RuntimeError('the corpus downloads nothing')\n")
    # nn_tutorial imports IPython's debugger (its set_trace call is commented out)
    ipy = os.path.join(run, "IPython", "core")
    os.makedirs(ipy)
    for mod in ("__init__", "core/__init__", "core/debugger"):
        with open(os.path.join(run, "IPython", mod + ".py"), "w") as f:
            f.write("def set_trace(*a, **k):\n    pass\n" if mod == "core/debugger" else "")


def to_torch(text):
    text = text.replace("tessera.vision", "torchvision")
    return re.sub(r"\btessera\b", "torch", text)


def copy_program(name, lib, work):
    """copies program NAME.py or folder NAME/ (run as NAME/main.py) to the working folder, rewritten for
    PyTorch when lib is torch; returns the path to run"""
    src = os.path.join(HERE, name)
    files = [name + ".py"]
    if os.path.isdir(src):
        os.makedirs(os.path.join(work, "run", name), exist_ok=True)
        files = [os.path.join(name, f) for f in sorted(os.listdir(src)) if f.endswith(".py")]
    for rel in files:
        with open(os.path.join(HERE, rel)) as f:
            text = f.read()
        with open(os.path.join(work, "run", rel), "w") as f:
            f.write(to_torch(text) if lib == "torch" else text)
    return os.path.join(work, "run", name, "main.py") if os.path.isdir(src) else os.path.join(work, "run", files[0])


def run_one(name, spec, lib, work, env, timeout, verbose):
    t0 = time.time()
    out, rc = "", 0
    python = sys.executable
    if spec["numpy2"]:
        python = numpy2_python() or sys.executable
        if python != sys.executable:
            out = "(run under %s: it needs NumPy 2)\n" % python
    for step, args in ((spec["setup"], []), (spec["source"], spec["args"])):
        if step is None:
            continue
        path = copy_program(step, lib, work)
        try:
            p = subprocess.run([python, path] + args, cwd=os.path.join(work, "run"), env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=spec["timeout"] or timeout)
            out, rc = out + p.stdout, p.returncode
        except subprocess.TimeoutExpired as e:
            text = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            out, rc = out + text, "timeout"
        if rc != 0:
            break
    dt = time.time() - t0
    value, why = None, None
    if rc != 0:
        tail = out.strip().splitlines()[-1:] or [""]
        why = "exit %s: %s" % (rc, tail[0][:200])
    elif spec["pattern"]:
        found = re.findall(spec["pattern"], out)
        if not found:
            why = "no match for %r in its output" % spec["pattern"]
        else:
            last = found[-1]
            value = float(last[0] if isinstance(last, tuple) else last)
            lo, hi = spec["bounds"] or (float("-inf"), float("inf"))
            if not (lo <= value <= hi):
                why = "%g outside [%g, %g] (PyTorch printed %s)" % (value, lo, hi, spec["torch"])
    return value, why, dt, out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", choices=("tessera", "torch"), default="tessera")
    ap.add_argument("--pythonpath", help="folder holding the tessera package (build/python)")
    ap.add_argument("--only", help="comma-separated program names")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per program")
    ap.add_argument("--budget", type=float, default=0, help="seconds for the whole corpus (0: none)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    names = a.only.split(",") if a.only else sorted(PROGRAMS)
    for n in names:
        if n not in PROGRAMS:
            ap.error("unknown program %r" % n)
    if not os.path.isdir(FASHION):
        print("skipped: no %s (apt-get install dataset-fashion-mnist)" % FASHION)
        return 77
    env = dict(os.environ)
    # the programs run in a scratch folder: make PYTHONPATH's entries absolute
    env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(d) for d in env.get("PYTHONPATH", "").split(os.pathsep) if d)
    if a.pythonpath:
        env["PYTHONPATH"] = os.path.abspath(a.pythonpath) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("MPLBACKEND", "Agg")
    # one thread a program unless told otherwise: CI machines are small and shared, and a thread pool
    # on a loaded machine costs more than it gains for these sizes
    env.setdefault("OMP_NUM_THREADS", "1")
    work = tempfile.mkdtemp(prefix="ts_corpus_")
    counts = {"pass": 0, "xfail": 0, "FAIL": 0, "XPASS": 0}
    t_all = time.time()
    try:
        make_data(os.path.join(work, "data"))
        os.makedirs(os.path.join(work, "run"))
        os.symlink(os.path.join(work, "data"), os.path.join(work, "run", "data"))
        make_stubs(os.path.join(work, "run"))
        os.makedirs(os.path.join(work, "run", "results"))  # vae writes there (a folder of its checkout)
        for n in names:
            spec = PROGRAMS[n]
            value, why, dt, out = run_one(n, spec, a.lib, work, env, a.timeout, a.verbose)
            match, xfail = XFAIL.get(n, (None, None)) if a.lib == "tessera" else (None, None)
            if spec["numpy2"] and numpy2_python() is None:
                # no interpreter with NumPy 2 here: PyTorch fails the same way (README)
                match, xfail = NUMPY1_FAILURE, ("needs NumPy 2 (np.array(x, copy=None)); no interpreter with "
                                                "it found (TS_CORPUS_NUMPY2_PYTHON)")
            if why is None:
                status = "XPASS" if xfail else "pass"
            else:
                status = "xfail" if xfail and re.search(match, out) else "FAIL"
            counts[status] += 1
            note = why or ""
            if status == "xfail":
                note = "(listed: %s)" % xfail
            elif xfail:
                note = ("%s [listed as failing with %r]" % (note, match) if why else
                        "listed as failing (%s): take it off XFAIL" % xfail)
            if a.verbose or status == "FAIL":
                sys.stdout.write(out if a.verbose else "\n".join(out.strip().splitlines()[-15:]) + "\n")
            print("%-6s %-34s %8s %6.1fs %s" % (status, n, "" if value is None else "%.6g" % value, dt, note),
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = time.time() - t_all
    print("corpus (%s): %d pass, %d xfail, %d FAIL, %d XPASS of %d in %.0fs" % (
        a.lib, counts["pass"], counts["xfail"], counts["FAIL"], counts["XPASS"], len(names), total))
    bad = counts["FAIL"] > 0
    if a.budget and total > a.budget:
        print("over the time budget of %.0fs" % a.budget)
        bad = True
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
