#!/usr/bin/env python3
"""check_onnx_export.py — `tessera export` against the onnx package and ONNX Runtime.

For each model of the zoo (mlp, lenet, simplecnn, resnet20, resnet18, gpt) it runs
`tessera export --dynamic-batch --save-io DIR` (the example batch and Tessera's output on it saved
as .npy; fresh weights from --seed, except for mlp and resnet20, which first train a few steps with
`tessera train --checkpoint`, so that the export reads a checkpoint and BatchNorm's running
statistics are not the fresh ones), then
  - onnx.checker.check_model(model, full_check=True) (which also runs shape inference),
  - ONNX Runtime on the saved input, compared with Tessera's output: max |ort - tessera| must be
    within 1e-5 of max |tessera| (float32 rounding: the runtime's kernels are not Tessera's),
  - ONNX Runtime again at another batch size (the symbolic 'batch' dim), which must run and give
    that batch size.
Prints a table and exits non-zero on any failure.

usage: /opt/torch2/bin/torch-python tools/check_onnx_export.py BUILD_DIR [--keep DIR]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

REL_TOL = 1e-5

# (model, extra flags, train first): small widths keep the run short; gpt reads byte windows of
# --data text
MODELS = [
    ("mlp", [], True),
    ("lenet", [], False),
    ("simplecnn", [], False),
    ("resnet20", ["--width", "8"], True),
    ("resnet18", ["--width", "8"], False),
    ("gpt", ["--data", "text", "--context", "32", "--layers", "2", "--heads", "4", "--dim", "64"],
     False),
]


def tessera_run(cmd, what):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("tessera %s failed: %s" % (what, (r.stderr or r.stdout).strip()))


def export(tessera, name, flags, train, work):
    path = os.path.join(work, name + ".onnx")
    io_dir = os.path.join(work, name + "_io")
    cmd = [tessera, "export", "--model", name, "-o", path, "--dynamic-batch", "--batch", "2",
           "--seed", "1", "--device", "cpu", "--save-io", io_dir] + flags
    if train:
        ck = os.path.join(work, name + "_ck")
        tessera_run([tessera, "train", "--model", name, "--max-steps", "3", "--batch-size", "32",
                     "--progress", "none", "--checkpoint", ck, "--seed", "1"] + flags, "train")
        cmd += ["--checkpoint", ck]
    tessera_run(cmd, "export")
    x = np.load(os.path.join(io_dir, "input.npy"))
    y = np.load(os.path.join(io_dir, "output.npy"))
    return path, x, y


def check(tessera, name, flags, train, work):
    row = {"model": name, "nodes": "-", "weights": "-", "bytes": "-", "checker": "-",
           "rel_err": "-", "batch3": "-", "ok": False, "why": ""}
    try:
        path, x, y = export(tessera, name, flags, train, work)
        row["bytes"] = os.path.getsize(path)
        model = onnx.load(path)
        row["nodes"] = len(model.graph.node)
        row["weights"] = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
        onnx.checker.check_model(model, full_check=True)
        row["checker"] = "ok"
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        in_name = sess.get_inputs()[0].name
        got = sess.run(None, {in_name: x})[0]
        if got.shape != y.shape:
            raise RuntimeError("shape %s, Tessera's %s" % (got.shape, y.shape))
        scale = max(float(np.max(np.abs(y))), 1e-30)
        rel = float(np.max(np.abs(got.astype(np.float64) - y.astype(np.float64)))) / scale
        row["rel_err"] = "%.2e" % rel
        # another batch size through the symbolic dim: the first example row three times
        x3 = np.concatenate([x, x[:1]], axis=0)
        got3 = sess.run(None, {in_name: x3})[0]
        b3_ok = got3.shape[0] == 3 and np.allclose(got3[:2], got, rtol=0, atol=REL_TOL * scale)
        row["batch3"] = "ok" if b3_ok else "wrong"
        row["ok"] = rel <= REL_TOL and b3_ok
        if not row["ok"]:
            row["why"] = "outputs differ" if rel > REL_TOL else "batch 3 differs"
    except Exception as e:  # report and go on with the next model
        row["why"] = str(e).splitlines()[0][:100]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", help="the build folder (holds the tessera command)")
    ap.add_argument("--keep", help="write the files here and keep them")
    a = ap.parse_args()
    tessera = os.path.join(a.build, "tessera")
    if not os.access(tessera, os.X_OK):
        sys.exit("no tessera command in %s (build the tessera_cli target)" % a.build)
    work = a.keep or tempfile.mkdtemp(prefix="onnx_export_")
    os.makedirs(work, exist_ok=True)
    print("onnx %s, onnxruntime %s%s" % (onnx.__version__, ort.__version__,
                                         "; files in " + work if a.keep else ""))
    rows = [check(tessera, n, f, t, work) for n, f, t in MODELS]
    head = ("model", "nodes", "weights", "bytes", "checker", "max rel err", "batch 3", "result")
    fmt = "%-10s %6s %9s %9s %8s %12s %8s  %s"
    print(fmt % head)
    for r in rows:
        result = "ok" if r["ok"] else "FAIL: " + r["why"]
        print(fmt % (r["model"], r["nodes"], r["weights"], r["bytes"], r["checker"], r["rel_err"],
                     r["batch3"], result))
    bad = [r["model"] for r in rows if not r["ok"]]
    print("all %d models match ONNX Runtime within %g" % (len(rows), REL_TOL) if not bad
          else "mismatch: " + ", ".join(bad))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
