#!/usr/bin/env python3
"""onnx_backend_ort.py — ONNX's backend test suite (Debian's libonnx-testdata) through ONNX Runtime
and through Tessera in the same run, with the same harness rules as tests/test_onnx_backend.c: each
model.onnx loaded, each test_data_set_N fed, each output compared with rtol 1e-3, atol 1e-7 (NaN
equal to NaN, dtypes and shapes equal); a model the runtime will not load counts as refused.

Usage: /opt/torch2/bin/torch-python tools/onnx_backend_ort.py BUILD [--suites node,...] [--filter S]
       (BUILD: a build folder with tests/test_onnx_backend; the python needs onnx, onnxruntime)
Prints per suite: cases passed / failed / refused for both, and the cases one passes and the other
does not. Exits non-zero when Tessera passes fewer cases than ONNX Runtime on some suite.
"""
import argparse
import collections
import ctypes
import glob
import os
import subprocess
import sys

import numpy as np

try:
    import onnx
    import onnx.numpy_helper
    import onnxruntime as ort
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e} (run with ../shared/tools/install-torch.sh's python)")
    sys.exit(0)

DATA = os.environ.get("TS_ONNX_TESTDATA", "/usr/share/libonnx-testdata/data")
SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]
RTOL, ATOL = 1e-3, 1e-7


MESSAGES = {"tensor": (onnx.TensorProto, onnx.numpy_helper.to_array),
            "seq": (onnx.SequenceProto, onnx.numpy_helper.to_list),
            "optional": (onnx.OptionalProto, onnx.numpy_helper.to_optional)}


def read_value(path, type_str=None):
    """A test data file: a TensorProto, or a SequenceProto / OptionalProto (ORT takes lists). The
    value's type ("seq(tensor(float))", as ORT names it) picks the message, as the C harness does
    from the model's declaration: the bytes alone do not say (an OptionalProto or a SequenceProto
    often parses as a TensorProto too, into a wrong tensor); without a type each is tried."""
    raw = open(path, "rb").read()
    kind = type_str.split("(")[0] if type_str else None
    for cls, conv in [MESSAGES[kind]] if kind in MESSAGES else MESSAGES.values():
        msg = cls()
        try:
            msg.ParseFromString(raw)
            return conv(msg)
        except Exception:  # noqa: BLE001 - try the next message type
            continue
    raise ValueError(f"cannot parse {path}")


def bf16_bits_to_float(a):
    """bfloat16 values held as their uint16 bit patterns -> float32 (the same values)."""
    return (np.asarray(a, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def ort_value_to_numpy(v):
    """An output OrtValue as numpy; bfloat16 (which numpy lacks) as float32 of the same values."""
    if v.data_type() != "tensor(bfloat16)":
        return v.numpy()
    count = int(np.prod(v.shape()))
    bits = np.frombuffer((ctypes.c_uint16 * count).from_address(v.data_ptr()), dtype=np.uint16)
    return bf16_bits_to_float(bits.copy()).reshape(v.shape())


def run_bf16(sess, feeds):
    """A run with bfloat16 inputs or outputs, through OrtValues (ORT's numpy path has no bfloat16).
    A feed for a bfloat16 input is the uint16 bit pattern Debian's data holds (ONNX's numpy_helper
    before 1.14 wrote bfloat16 so, numpy having no bfloat16), as tests/test_onnx_backend.c reads."""
    values = {}
    for i in sess.get_inputs():
        x = feeds[i.name]
        if i.type == "tensor(bfloat16)" and x.dtype == np.uint16:
            values[i.name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
                np.ascontiguousarray(x), onnx.TensorProto.BFLOAT16)
        else:
            values[i.name] = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x))
    return [ort_value_to_numpy(v) for v in sess.run_with_ort_values(None, values)]


def close(got, want):
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(
            close(g, w) for g, w in zip(got, want))
    if want is None:
        return got is None
    got = np.asarray(got)
    want = np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if want.dtype.kind in "fc":
        return bool(np.all(np.isclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)))
    return bool(np.array_equal(got, want))


def run_ort(case_dir):
    model_path = os.path.join(case_dir, "model.onnx")
    try:
        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - any load error is a refusal
        return "refused", str(e).splitlines()[0][:200]
    names = [i.name for i in sess.get_inputs()]
    bf16 = any(v.type == "tensor(bfloat16)" for v in sess.get_inputs() + sess.get_outputs())
    sets = sorted(glob.glob(os.path.join(case_dir, "test_data_set_*")))
    if not sets:
        return "failed", "no test data"
    for s in sets:
        n_in = len(glob.glob(os.path.join(s, "input_*.pb")))
        n_out = len(glob.glob(os.path.join(s, "output_*.pb")))
        try:
            ins, outs = sess.get_inputs(), sess.get_outputs()
            feeds = {names[i]: read_value(os.path.join(s, f"input_{i}.pb"), ins[i].type)
                     for i in range(n_in)}
            want = [read_value(os.path.join(s, f"output_{i}.pb"), outs[i].type)
                    for i in range(n_out)]
            if bf16:
                got = run_bf16(sess, feeds)
                want = [bf16_bits_to_float(w) if o.type == "tensor(bfloat16)" and
                        w.dtype == np.uint16 else w for w, o in zip(want, sess.get_outputs())]
            else:
                got = sess.run(None, feeds)
        except Exception as e:  # noqa: BLE001 - a run error is a failure
            return "failed", str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        for i in range(n_out):
            if not close(got[i], want[i]):
                return "failed", f"output {i} differs"
    return "passed", ""


def run_tessera(build, suite_filter):
    exe = os.path.join(build, "tests", "test_onnx_backend")
    env = dict(os.environ, TS_ONNX_VERBOSE="1", TS_ONNX_DEVICES="cpu", TS_SIM_DEVICES="1")
    args = [exe] + ([suite_filter] if suite_filter else [])
    out = subprocess.run(args, env=env, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        word, _, rest = line.partition(" ")
        if word not in ("pass", "refused", "known", "FAIL"):
            continue
        case = rest.split(" on ")[0]
        res[case] = {"pass": "passed", "refused": "refused"}.get(word, "failed")
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--suites", default=",".join(SUITES))
    ap.add_argument("--filter", default=None)
    a = ap.parse_args()
    print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}")
    tessera = run_tessera(a.build, a.filter)
    ok = True
    diffs = []
    print(f"\n{'suite':20} {'runtime':14} {'passed':>7} {'failed':>7} {'refused':>8}")
    for suite in a.suites.split(","):
        counts = {"ort": collections.Counter(), "tessera": collections.Counter()}
        for case_dir in sorted(glob.glob(os.path.join(DATA, suite, "*"))):
            name = os.path.basename(case_dir)
            if a.filter and a.filter not in name:
                continue
            key = f"{suite}/{name}"
            o, why = run_ort(case_dir)
            t = tessera.get(key, "missing")
            counts["ort"][o] += 1
            counts["tessera"][t] += 1
            if (o == "passed") != (t == "passed"):
                diffs.append(f"  {key}: onnxruntime {o}{' (' + why + ')' if why else ''}, tessera {t}")
        for who in ("ort", "tessera"):
            c = counts[who]
            label = "onnxruntime" if who == "ort" else "tessera"
            print(f"{suite:20} {label:14} {c['passed']:7} {c['failed']:7} {c['refused']:8}")
        if counts["tessera"]["passed"] < counts["ort"]["passed"]:
            ok = False
    print("\ncases where exactly one of them passes:")
    print("\n".join(diffs) if diffs else "  none")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
