#!/usr/bin/env python3
"""gen_onnx_quant_models.py — the quantized ONNX cases of tests/data/onnx_quant (issue 78, part 4),
laid out as ONNX's backend node cases (model.onnx, test_data_set_0/input_N.pb, output_N.pb) so that
tests/test_onnx_backend.c runs them (ctest test_onnx_quant_models: TS_ONNX_TESTDATA pointed here).

1. ONNX's own backend node cases for the integer operators, copied from Debian's libonnx-testdata
   (MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv, DynamicQuantizeLinear): tiny files, so
   the test runs where that package is absent.
2. A small MLP and a small conv net exported by torch.onnx.export (opset 13, the TorchScript
   exporter) and quantized by ONNX Runtime's own quantizer: quantize_dynamic (MatMulInteger /
   ConvInteger + DynamicQuantizeLinear), quantize_static in QDQ and in QOperator format (per-channel
   int8 weights, uint8 activations, a fixed calibration reader). Every integer-typed value of the
   quantized graph is made a graph output, so the harness compares the integers exactly; the
   references are ONNX Runtime's outputs on a fixed input (the CI machine has no onnxruntime).

Usage: /opt/torch2/bin/torch-python tools/gen_onnx_quant_models.py [OUT]
       (OUT: tests/data/onnx_quant by default; needs torch, onnx, onnxruntime)
"""
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper as nh
import onnxruntime as ort
import torch
from onnxruntime import quantization as oq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data", "onnx_quant")
DEBIAN = "/usr/share/libonnx-testdata/data/node"
BACKEND_CASES = ["test_matmulinteger", "test_qlinearmatmul_2D", "test_qlinearmatmul_3D",
                 "test_basic_convinteger", "test_convinteger_with_padding",
                 "test_convinteger_without_padding", "test_qlinearconv",
                 "test_dynamicquantizelinear", "test_dynamicquantizelinear_max_adjusted",
                 "test_dynamicquantizelinear_min_adjusted"]
OPS = ["MatMul", "Conv", "Gemm", "Add"]
INT_TYPES = {onnx.TensorProto.UINT8, onnx.TensorProto.INT8, onnx.TensorProto.INT32}


class MLP(torch.nn.Module):
    """Linear layers on a [1, T, F] input export as MatMul + Add (not Gemm)"""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 24)
        self.fc3 = torch.nn.Linear(24, 8)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class Head(MLP):
    """the same layers on a [B, F] input: torch exports each Linear as one Gemm (transB 1)"""


class ConvNet(torch.nn.Module):
    """a dense 3x3, a strided grouped conv, a depthwise and a 1x1 conv with ReLUs, then a mean"""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2)
        self.c3 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.c4 = torch.nn.Conv2d(8, 12, 1)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        y = torch.relu(self.c2(y))
        y = torch.relu(self.c3(y))
        return self.c4(y).mean(dim=(2, 3))


class ResNetlet(torch.nn.Module):
    """a residual block: the Add of two quantized tensors (QLinearAdd, com.microsoft)"""

    def __init__(self):
        super().__init__()
        self.c0 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c1 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        y = torch.relu(self.c0(x))
        z = self.c2(torch.relu(self.c1(y)))
        return torch.relu(z + y).mean(dim=(2, 3))


class Reader(oq.CalibrationDataReader):
    def __init__(self, name, shape, seed):  # noqa: D107
        rng = np.random.default_rng(seed)
        self.data = iter([{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(8)])

    def get_next(self):
        return next(self.data, None)


def export(model, shape, path):
    torch.manual_seed(0)
    x = torch.randn(*shape)
    torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"], opset_version=13,
                      dynamo=False)


def expose_integers(path):
    """every uint8 / int8 / int32 value a node makes becomes a graph output too"""
    m = onnx.shape_inference.infer_shapes(onnx.load(path))
    have = {o.name for o in m.graph.output}
    for vi in m.graph.value_info:
        if vi.type.tensor_type.elem_type in INT_TYPES and vi.name not in have:
            m.graph.output.append(vi)
    onnx.save(m, path)


def write_case(name, model_path, x):
    case = os.path.join(OUT, "node", name)
    data = os.path.join(case, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    shutil.copy(model_path, os.path.join(case, "model.onnx"))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    outs = sess.run(None, {"x": x})
    with open(os.path.join(data, "input_0.pb"), "wb") as f:
        f.write(nh.from_array(x, "x").SerializeToString())
    for i, (o, v) in enumerate(zip(sess.get_outputs(), outs)):
        with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
            f.write(nh.from_array(np.asarray(v), o.name).SerializeToString())
    print(f"{name}: {len(outs)} outputs", ", ".join(f"{o.name}:{v.dtype}" for o, v in
                                                    zip(sess.get_outputs(), outs)))


def handmade_qdq(path, kind, bias_scale=1):
    """DequantizeLinear -> MatMul / Conv -> QuantizeLinear on a uint8 input, scales whose
    float32 ratio x_scale * w_scale / y_scale sits a rounding away from 1/2: ONNX Runtime's integer
    requantization and the float QDQ arithmetic then round many outputs differently"""
    from onnx import TensorProto as T, helper as h
    rng = np.random.default_rng(11)
    # y_scale 0.07 with the odd bias: no near ties, where two float convolutions may round apart
    xs, ys = np.float32(0.1), np.float32(0.06 if bias_scale == 1 else 0.07)
    if kind == "matmul":
        k, cols = 64, 48
        shape, w = [16, k], rng.integers(-3, 4, (k, cols)).astype(np.int8)
        ws = (np.float32(0.3) * (1 + np.arange(cols) % 3 * np.float32(1e-7))).astype(np.float32)
        wz = np.zeros(cols, np.int8)
        nodes = [h.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["w"], axis=1),
                 h.make_node("MatMul", ["xf", "w"], ["y0"]),
                 h.make_node("QuantizeLinear", ["y0", "y_s", "y_z"], ["y"])]
        inits = []
    elif kind == "add":  # a residual Add: ORT runs it as QLinearAdd (QLinearAdd cases' scales)
        shape = [1, 4, 16, 16]
        xs, ys = np.float32(0.011), np.float32(0.042)
        nodes = [h.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["w"]),
                 h.make_node("Add", ["xf", "w"], ["y0"]),
                 h.make_node("QuantizeLinear", ["y0", "y_s", "y_z"], ["y"])]
        w, ws, wz, inits = (rng.integers(0, 256, shape).astype(np.uint8), np.float32(0.05),
                            np.uint8(9), [])
    elif kind == "gemm":  # torch's Linear: Gemm with transB 1, w [N, K] per row, an int32 bias
        k, cols = 64, 48
        shape, w = [16, k], rng.integers(-3, 4, (cols, k)).astype(np.int8)
        ws = (np.float32(0.3) * (1 + np.arange(cols) % 3 * np.float32(1e-7))).astype(np.float32)
        wz = np.zeros(cols, np.int8)
        bs = (xs * ws).astype(np.float32)
        nodes = [h.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["w"], axis=0),
                 h.make_node("DequantizeLinear", ["b_q", "b_s", "b_z"], ["b"], axis=0),
                 h.make_node("Gemm", ["xf", "w", "b"], ["y0"], transB=1),
                 h.make_node("QuantizeLinear", ["y0", "y_s", "y_z"], ["y"])]
        inits = [nh.from_array(rng.integers(-100, 100, cols).astype(np.int32), "b_q"),
                 nh.from_array(bs, "b_s"), nh.from_array(np.zeros(cols, np.int32), "b_z")]
    else:
        cout, cin = 6, 4
        shape, w = [1, cin, 9, 9], rng.integers(-3, 4, (cout, cin, 3, 3)).astype(np.int8)
        ws = (np.float32(0.3) * (1 + np.arange(cout) % 3 * np.float32(1e-7))).astype(np.float32)
        wz = np.zeros(cout, np.int8)
        bias = rng.integers(-100, 100, cout).astype(np.int32)
        bs = (xs * ws * np.float32(bias_scale)).astype(np.float32)
        nodes = [h.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["w"], axis=0),
                 h.make_node("DequantizeLinear", ["b_q", "b_s", "b_z"], ["b"], axis=0),
                 h.make_node("Conv", ["xf", "w", "b"], ["y0"], pads=[1, 1, 1, 1],
                             strides=[2, 1]),
                 h.make_node("QuantizeLinear", ["y0", "y_s", "y_z"], ["y"])]
        inits = [nh.from_array(bias, "b_q"), nh.from_array(bs, "b_s"),
                 nh.from_array(np.zeros(cout, np.int32), "b_z")]
    nodes.insert(0, h.make_node("DequantizeLinear", ["x", "x_s", "x_z"], ["xf"]))
    inits += [nh.from_array(w, "w_q"), nh.from_array(ws, "w_s"), nh.from_array(wz, "w_z"),
              nh.from_array(xs, "x_s"), nh.from_array(np.uint8(3), "x_z"),
              nh.from_array(ys, "y_s"), nh.from_array(np.uint8(128), "y_z")]
    g = h.make_graph(nodes, f"qdq_{kind}", [h.make_tensor_value_info("x", T.UINT8, shape)],
                     [h.make_tensor_value_info("y", T.UINT8, None)], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), path)
    if kind == "add":
        return rng.integers(0, 256, shape).astype(np.uint8)
    return rng.integers(0, 9, shape).astype(np.uint8)  # near x_z: few saturate


def handmade_qlinear(path, kind):
    """QLinearMatMul / QLinearConv nodes whose requantization multipliers are exact halves and
    quarters (ties, to even), uint8 weights with a zero point per column / output channel, a
    grouped convolution; int8 x int8 -> int8 (matmul_s8s8)"""
    from onnx import TensorProto as T, helper as h
    rng = np.random.default_rng(5)
    f = np.float32
    if kind == "matmul_halves":
        x = rng.integers(0, 14, (8, 16)).astype(np.uint8)
        xs, xz, ys, yz = f(0.5), np.uint8(7), f(1.0), np.uint8(3)
        w = rng.integers(124, 133, (16, 10)).astype(np.uint8)
        wz = (126 + np.arange(10) % 5).astype(np.uint8)
        ws = np.where(np.arange(10) % 2 == 0, f(1.0), f(0.5)).astype(f)
    elif kind == "matmul_s8s8":
        x = rng.integers(-6, 5, (8, 16)).astype(np.int8)
        xs, xz, ys, yz = f(1 + 2.0 ** -23), np.int8(-1), f(1.0), np.int8(-20)
        w = rng.integers(-2, 3, (16, 10)).astype(np.int8)
        wz, ws = np.int8(0), f(0.5)
    else:
        x = rng.integers(0, 10, (1, 4, 7, 7)).astype(np.uint8)
        xs, xz, ys, yz = f(0.5), np.uint8(4), f(0.5), np.uint8(100)
        w = rng.integers(125, 132, (6, 2, 3, 3)).astype(np.uint8)
        wz = (126 + np.arange(6) % 4).astype(np.uint8)
        ws = np.array([0.5, 0.25, 1.0] * 2, f)
    inits = [nh.from_array(np.asarray(v), n) for n, v in
             [("x_s", xs), ("x_z", xz), ("w", w), ("w_s", ws), ("w_z", wz), ("y_s", ys),
              ("y_z", yz)]]
    names = ["x", "x_s", "x_z", "w", "w_s", "w_z", "y_s", "y_z"]
    if kind == "conv_halves":
        inits.append(nh.from_array(rng.integers(-50, 50, 6).astype(np.int32), "b"))
        node = h.make_node("QLinearConv", names + ["b"], ["y"], pads=[1, 1, 1, 1], group=2)
    else:
        node = h.make_node("QLinearMatMul", names, ["y"])
    xt = T.INT8 if x.dtype == np.int8 else T.UINT8
    g = h.make_graph([node], kind, [h.make_tensor_value_info("x", xt, list(x.shape))],
                     [h.make_tensor_value_info("y", T.INT8 if yz.dtype == np.int8 else T.UINT8,
                                               None)], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), path)
    return x


def handmade_qlinear_add(path, kind):
    """com.microsoft's QLinearAdd with scale ratios whose float32 sums land next to halves, in the
    three orders ORT's broadcast gives MLAS: same shapes, a B per channel ([C, 1, 1]: B's term
    first), a one-value A (swapped to B's place, vector order). The scales were picked (among a few)
    so that the two orders, and float64 ratios, round some outputs apart."""
    from onnx import TensorProto as T, helper as h
    rng = np.random.default_rng(9)
    xshape = [1, 4, 16, 16]
    bshape = {"same": xshape, "bias": [4, 1, 1], "scalar_a": xshape}[kind]
    b = rng.integers(0, 256, bshape).astype(np.uint8)
    inits = [nh.from_array(np.asarray(v), n) for n, v in
             [("a_s", np.float32(0.011)), ("a_z", np.uint8(117)), ("b", b),
              ("b_s", np.float32(0.05)), ("b_z", np.uint8(9)), ("c_s", np.float32(0.042)),
              ("c_z", np.uint8(131))]]
    ins = ["x", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"]
    if kind == "scalar_a":  # A is one value, B the input
        ins = ["b1", "a_s", "a_z", "x", "b_s", "b_z", "c_s", "c_z"]
        inits.append(nh.from_array(np.uint8(200), "b1"))
    node = h.make_node("QLinearAdd", ins, ["y"], domain="com.microsoft")
    g = h.make_graph([node], f"qladd_{kind}", [h.make_tensor_value_info("x", T.UINT8, xshape)],
                     [h.make_tensor_value_info("y", T.UINT8, None)], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13),
                                             h.make_opsetid("com.microsoft", 1)]), path)
    return rng.integers(0, 256, xshape).astype(np.uint8)


def fused_differs(path, x):
    """how many outputs ORT's fused (integer) run and its unfused (float QDQ) run disagree on"""
    runs = []
    for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
                  ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        runs.append(sess.run(None, {"x": x}))
    return sum(int(np.sum(a != b)) for a, b in zip(*runs) if a.dtype != np.float32)


def main():
    os.makedirs(os.path.join(OUT, "node"), exist_ok=True)
    for c in BACKEND_CASES:
        src = os.path.join(DEBIAN, c)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(OUT, "node", c), dirs_exist_ok=True)
        else:
            print(f"{src} missing (Debian's libonnx-testdata): not copied")
    tmp = tempfile.mkdtemp()
    for kind in ("same", "bias", "scalar_a"):
        q = os.path.join(tmp, f"qladd_{kind}.onnx")
        x = handmade_qlinear_add(q, kind)
        write_case(f"test_ort_qlinearadd_{kind}", q, x)
    for kind in ("matmul_halves", "matmul_s8s8", "conv_halves"):
        q = os.path.join(tmp, f"{kind}.onnx")
        x = handmade_qlinear(q, kind)
        write_case(f"test_ort_qlinear_{kind}", q, x)
    for kind, name, bias_scale in [("matmul", "matmul_ties", 1), ("conv", "conv_ties", 1),
                                   ("gemm", "gemm_ties", 1), ("add", "add_ties", 1),
                                   ("conv", "conv_bias_scale", 2)]:
        q = os.path.join(tmp, f"qdq_{name}.onnx")
        x = handmade_qdq(q, kind, bias_scale)
        print(f"qdq_{name}: ORT fused vs unfused differ in {fused_differs(q, x)} integers")
        write_case(f"test_ort_qdq_{name}", q, x)
    for label, net, shape, dyn_w in [("mlp", MLP(), (1, 64, 16), oq.QuantType.QInt8),
                                     ("gemm", Head(), (64, 16), oq.QuantType.QInt8),
                                     ("convnet", ConvNet(), (1, 3, 16, 16), oq.QuantType.QUInt8),
                                     ("resnet", ResNetlet(), (1, 3, 12, 12), oq.QuantType.QUInt8)]:
        torch.manual_seed(1)
        for p in net.parameters():
            torch.nn.init.uniform_(p, -0.5, 0.5)
        f32 = os.path.join(tmp, f"{label}.onnx")
        export(net.eval(), shape, f32)
        x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
        variants = {
            "dynamic": lambda o: oq.quantize_dynamic(f32, o, weight_type=dyn_w,
                                                     op_types_to_quantize=OPS),
            "qdq": lambda o: oq.quantize_static(
                f32, o, Reader("x", shape, 3), quant_format=oq.QuantFormat.QDQ,
                per_channel=True, activation_type=oq.QuantType.QUInt8,
                weight_type=oq.QuantType.QInt8, op_types_to_quantize=OPS),
            "qoperator": lambda o: oq.quantize_static(
                f32, o, Reader("x", shape, 3), quant_format=oq.QuantFormat.QOperator,
                per_channel=True, activation_type=oq.QuantType.QUInt8,
                weight_type=oq.QuantType.QInt8, op_types_to_quantize=OPS),
        }
        if label == "gemm":  # QOperator writes com.microsoft's QGemm, which Tessera refuses
            del variants["qoperator"]
        for kind, make in variants.items():
            q = os.path.join(tmp, f"{label}_{kind}.onnx")
            make(q)
            expose_integers(q)
            print(f"{label}_{kind}: ORT fused vs unfused differ in {fused_differs(q, x)} integers")
            write_case(f"test_ort_{label}_{kind}", q, x)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
