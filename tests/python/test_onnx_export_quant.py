"""tessera.onnx.export of a model converted by Tessera's eager static PTQ (test_quant_static.py's
Net: QuantStub, ConvReLU2d per channel, depthwise Conv2d, QFunctional add, MaxPool2d, LinearReLU on
a 4-D input, DeQuantStub) written as QDQ (docs/ONNX.md, "Quantized models").

The model is cut after each layer and exported with that layer's integers as the graph's output, so
every integer tensor is compared:

* the file loaded back by Tessera's importer (which fuses the QDQ patterns into integer nodes that
  compute as ONNX Runtime) against the eager model: the requantizations differ (ORT's float32
  multiplier and x / scale against the eager float64 multiplier and x * (1 / scale)), so an
  integer may move by one quantum at a near-tie, and a layer that reads a moved integer by
  |w| x_scale / out_scale more; the test bounds both and the count;
* the same files run by ONNX Runtime: bit for bit equal to the importer. ORT runs here when the
  Python has onnxruntime; otherwise its integers come from tests/data/onnx_export_quant_ref.json,
  written by tests/data/gen_onnx_export_quant_ref.py (a skip when the stored eager integers no
  longer match this model: regenerate)."""
import json
import os

import pytest

import tessera
from tessera import nn

import test_quant_static as tqs

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
REF_PATH = os.path.join(DATA, "onnx_export_quant_ref.json")
STAGES = ["quant", "conv1", "conv2", "add", "pool", "fc", "out"]


class Upto(nn.Module):
    """the converted Net's forward, stopped after STAGES[k]"""

    def __init__(self, net, k):
        super().__init__()
        self.net, self.k = net, k

    def forward(self, x):
        m, k = self.net, self.k
        q = m.quant(x)
        if k == 0:
            return q
        h = m.conv1(q)
        if k == 1:
            return h
        d = m.conv2(h)
        if k == 2:
            return d
        a = m.skip.add(d, h)
        if k == 3:
            return a
        p = m.pool(a)
        if k == 4:
            return p
        y = m.fc_relu(m.fc(p))
        return y if k == 5 else m.dequant(y)


def converted():
    return tqs._converted()


def example():
    return tessera.tensor(tqs.REF["model"]["x"])


def ints(t):
    """the integers of a quantized tensor, the values of another, as a flat list"""
    return tqs.flat((t.int_repr() if t.is_quantized else t).tolist())


def export_stages(folder):
    """each stage's file in folder; returns the eager results"""
    net, x = converted(), example()
    eager = {}
    for k, name in enumerate(STAGES):
        m = Upto(net, k)
        with tessera.no_grad():
            eager[name] = m(x)
        tessera.onnx.export(m, (x,), os.path.join(folder, name + ".onnx"))
    return eager, x


def ort_outputs(folder, x):
    """ONNX Runtime's output of each stage's file, or None without onnxruntime"""
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError:
        return None
    xa = np.array(x.tolist(), dtype=np.float32)
    out = {}
    for name in STAGES:
        s = ort.InferenceSession(os.path.join(folder, name + ".onnx"),
                                 providers=["CPUExecutionProvider"])
        out[name] = s.run(None, {s.get_inputs()[0].name: xa})[0].reshape(-1).tolist()
    return out


@pytest.fixture(scope="module")
def stages(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("export_quant"))
    eager, x = export_stages(folder)
    got = {}
    for name in STAGES:
        back = tessera.onnx.load(os.path.join(folder, name + ".onnx"))
        with tessera.no_grad():
            got[name] = back(x)
    return folder, x, eager, got


def test_types_and_shapes(stages):
    _, _, eager, got = stages
    for name in STAGES:
        e, g = eager[name], got[name]
        assert list(g.shape) == list(e.shape), name
        want = {tessera.quint8: tessera.uint8, tessera.qint8: tessera.int8}.get(e.dtype, e.dtype)
        assert g.dtype == want, name


def test_importer_against_eager(stages):
    """The quantize and first conv see the same input: within one quantum (the requantization's
    near-ties). Later layers read integers that may have moved by one: the conv2 (depthwise, 9
    taps) can move by up to 9 * max|w| * x_scale / out_scale + 1; the bound below is that for
    this model's weights, and such moves are rare (ties)."""
    _, _, eager, got = stages
    net = converted()
    w2 = max(abs(v) for v in tqs.flat(net.conv2.weight().dequantize().tolist()))
    wf = max(abs(v) for v in tqs.flat(net.fc.weight().dequantize().tolist()))
    after_conv2 = 1 + 9 * w2 * net.conv1.scale / net.conv2.scale
    bounds = {"quant": 1, "conv1": 1, "conv2": after_conv2, "add": after_conv2 + 1,
              "pool": after_conv2 + 1, "fc": 1 + 4 * wf * net.skip.scale / net.fc.scale}
    for name in STAGES[:-1]:
        a, b = ints(got[name]), ints(eager[name])
        diffs = [abs(p - q) for p, q in zip(a, b)]
        assert max(diffs) <= bounds[name], (name, max(diffs))
        assert sum(d != 0 for d in diffs) <= max(1, len(diffs) // 50), name
    # the float output: the last integers dequantized (within that bound times the scale)
    a, b = ints(got["out"]), ints(eager["out"])
    assert max(abs(p - q) for p, q in zip(a, b)) <= bounds["fc"] * net.fc.scale * (1 + 1e-6)


def test_same_parameters_bit_for_bit(stages):
    """max pooling's DQ -> MaxPool -> Q keeps the integers: the pooled integers of the re-imported
    add are the eager pooling of the re-imported add's integers"""
    folder, x, eager, got = stages
    a = got["add"]
    q = tessera._make_per_tensor_quantized_tensor(a, eager["add"].q_scale(),
                                                  eager["add"].q_zero_point())
    assert ints(tessera.nn.functional.max_pool2d(q, 2)) == ints(got["pool"])


def test_ort_bit_for_bit(stages):
    folder, x, eager, got = stages
    ort = ort_outputs(folder, x)
    if ort is None:
        if not os.path.exists(REF_PATH):
            pytest.skip("no onnxruntime and no stored reference (tests/data/"
                        "gen_onnx_export_quant_ref.py writes it)")
        ref = json.load(open(REF_PATH))
        if any(ref["eager"][n] != ints(eager[n]) for n in STAGES):
            pytest.skip("the stored ORT reference was made from another model's integers: run "
                        "tests/data/gen_onnx_export_quant_ref.py")
        ort = ref["ort"]
    for name in STAGES:
        assert ort[name] == pytest.approx(ints(got[name]), abs=0), name
