"""Writes tests/data/onnx_export_quant_ref.json: ONNX Runtime's outputs of the QDQ files that
tessera.onnx.export writes for tests/python/test_onnx_export_quant.py's stages (the converted static
PTQ Net of test_quant_static.py, cut after each layer), with the eager integers they were made from.

Run from the repository root with the Python the extension is built for (it exports), which runs
ONNX Runtime through /opt/torch2/bin/torch-python (or $ORT_PYTHON):
    PYTHONPATH=build/python /usr/bin/python3 tests/data/gen_onnx_export_quant_ref.py"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import test_onnx_export_quant as t  # noqa: E402

ORT = r'''
import json, sys
import numpy as np, onnxruntime as ort
folder, names, x = sys.argv[1], sys.argv[2].split(","), json.load(sys.stdin)
xa = np.array(x, dtype=np.float32)
out = {"version": ort.__version__}
for n in names:
    s = ort.InferenceSession(folder + "/" + n + ".onnx", providers=["CPUExecutionProvider"])
    out[n] = s.run(None, {s.get_inputs()[0].name: xa})[0].reshape(-1).tolist()
print(json.dumps(out))
'''

with tempfile.TemporaryDirectory() as folder:
    eager, x = t.export_stages(folder)
    run = subprocess.run([os.environ.get("ORT_PYTHON", "/opt/torch2/bin/torch-python"), "-c", ORT,
                          folder, ",".join(t.STAGES)], input=json.dumps(x.tolist()),
                         capture_output=True, text=True, check=True)
    ort = json.loads(run.stdout)
ref = {"onnxruntime": ort.pop("version"), "eager": {n: t.ints(eager[n]) for n in t.STAGES},
       "ort": ort}
with open(os.path.join(HERE, "onnx_export_quant_ref.json"), "w") as f:
    json.dump(ref, f, separators=(",", ":"))
print("wrote onnx_export_quant_ref.json (onnxruntime %s)" % ref["onnxruntime"])
