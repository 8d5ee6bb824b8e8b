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
       (OUT: tests/data/onnx_quant by default; needs torch, onnx, onnxruntime; GEN_ONLY=poolnet (a
       label; "ms": the com.microsoft node cases) in
       the environment writes that label's cases alone)
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


class PoolNet(torch.nn.Module):
    """max pooling between quantized convs (the importer's integer MaxPool): 3x3 stride 2 pad 1 on an
    odd size, then 2x2 stride 2 with ceil_mode (the float path)"""

    def __init__(self):
        super().__init__()
        self.c0 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c1 = torch.nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.c0(x)), 3, 2, 1)
        y = torch.nn.functional.max_pool2d(torch.relu(self.c1(y)), 2, 2, ceil_mode=True)
        return y.mean(dim=(2, 3))


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


class MixNet(torch.nn.Module):
    """the op mix of a MobileNet / EfficientNet head in QOperator form (com.microsoft): a swish
    (Sigmoid, Mul), a Concat of branches with different scales, LeakyRelu, a global average pool,
    a Linear (QGemm)"""

    def __init__(self):
        super().__init__()
        self.c0 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c1 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 4, 1)
        self.fc = torch.nn.Linear(12, 5)

    def forward(self, x):
        y = torch.relu(self.c0(x))
        z = self.c1(y)
        z = z * torch.sigmoid(z)
        w = torch.nn.functional.leaky_relu(self.c2(y), 0.1)
        u = torch.cat([z, w], 1)
        u = torch.nn.functional.adaptive_avg_pool2d(u, 1)
        return self.fc(torch.flatten(u, 1))


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
            have.add(vi.name)
    for node in m.graph.node:  # shape inference does not type com.microsoft's outputs: uint8 here
        if node.domain == "com.microsoft":  # (the QOperator variants' activation type)
            for o in node.output:
                if o not in have:
                    m.graph.output.append(onnx.helper.make_tensor_value_info(
                        o, onnx.TensorProto.UINT8, None))
                    have.add(o)
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


def handmade_ms(path, kind):
    """one com.microsoft node on every input value: QLinearSigmoid / QLinearLeakyRelu over all 256
    (uint8 and int8), QLinearMul with a per-channel B and products on exact halves (ties), the
    global average pool NCHW and NHWC (int8 too), a Concat of inputs with Y's and other scales"""
    from onnx import TensorProto as T, helper as h
    rng = np.random.default_rng(13)
    f = np.float32
    s8 = kind.endswith("_s8")
    qt, nt = (T.INT8, np.int8) if s8 else (T.UINT8, np.uint8)
    xz, yz = nt(-3 if s8 else 120), nt(5 if s8 else 128)
    full = np.arange(-128, 128) if s8 else np.arange(256)
    inits = {"x_s": f(0.0625), "x_z": xz, "y_s": f(1 / 256), "y_z": yz}
    ins = ["x", "x_s", "x_z", "y_s", "y_z"]
    attrs = {}
    if kind.startswith("sigmoid"):
        op, x = "QLinearSigmoid", full.reshape(1, 256)
        inits["y_z"] = nt(-128 if s8 else 0)
    elif kind.startswith("leakyrelu"):
        op, x, attrs = "QLinearLeakyRelu", full.reshape(1, 256), {"alpha": 0.1}
        inits["y_s"] = f(0.05)
    elif kind.startswith("mul"):  # (x - xz) * (b - bz) * 0.5 * 0.25 / 0.125: ties at odd products
        op, x = "QLinearMul", rng.integers(-128 if s8 else 0, 128 if s8 else 256, (1, 4, 6, 6))
        inits = {"x_s": f(0.5), "x_z": xz, "b": rng.integers(-20, 21, (4, 1, 1)).astype(nt),
                 "b_s": f(0.25), "b_z": nt(0), "y_s": f(0.125), "y_z": yz}
        ins = ["x", "x_s", "x_z", "b", "b_s", "b_z", "y_s", "y_z"]
    elif kind.startswith("gap"):
        last = "nhwc" in kind
        op, attrs = "QLinearGlobalAveragePool", {"channels_last": int(last)}
        x = rng.integers(-128 if s8 else 0, 128 if s8 else 256, (2, 5, 6, 10) if last else (2, 10, 5, 6))
        inits["y_s"] = f(0.0625 * 1.5)
    else:  # concat: X0 on Y's parameters (copied), X1 on others (through its table)
        op, attrs = "QLinearConcat", {"axis": 1}
        x = rng.integers(-128 if s8 else 0, 128 if s8 else 256, (1, 3, 4, 4))
        inits = {"y_s": f(0.1), "y_z": yz, "x_s": f(0.1), "x_z": yz,
                 "x1": rng.integers(-128 if s8 else 0, 128 if s8 else 256, (1, 2, 4, 4)).astype(nt),
                 "x1_s": f(0.15), "x1_z": xz}
        ins = ["y_s", "y_z", "x", "x_s", "x_z", "x1", "x1_s", "x1_z"]
    x = x.astype(nt)
    node = h.make_node(op, ins, ["y"], domain="com.microsoft", **attrs)
    g = h.make_graph([node], f"ms_{kind}", [h.make_tensor_value_info("x", qt, list(x.shape))],
                     [h.make_tensor_value_info("y", qt, None)],
                     [nh.from_array(np.asarray(v), k) for k, v in inits.items()])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13),
                                             h.make_opsetid("com.microsoft", 1)]), path)
    return x


# MLAS's float32 arithmetic, for choosing the order cases' scales and inputs (handmade_ms_order):
# each case's values make ORT's order of float32 operations and a plausible other order give
# different integers, so that an importer computing the other order fails it
_LOGISTIC_A = [4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05,
               8.51377133304701e-03, 2.48287947061529e-01]
_LOGISTIC_B = [6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06,
               1.70198817374094e-03, 1.16817656904453e-01, 9.93151921023180e-01]


def _logistic(v, fused):
    """MLAS's logistic (Eigen's rational polynomial): each multiply-add one fma (fused, as its FMA3
    kernel) or a float32 multiply then a float32 add"""
    f = np.float32
    if fused:  # the float64 product of two float32 is exact: one rounding of the sum (to float32)
        def ma(a, b, c):
            return (a.astype(np.float64) * np.float64(f(b)) + np.float64(f(c))).astype(f)
    else:
        def ma(a, b, c):
            return ((a * f(b)).astype(f) + f(c)).astype(f)
    x = np.clip(v, f(-18), f(18)).astype(f)
    x2 = (x * x).astype(f)
    p = ma(x2, _LOGISTIC_A[0], _LOGISTIC_A[1])
    for a in _LOGISTIC_A[2:]:
        p = ma(p, x2, a)
    q = ma(x2, _LOGISTIC_B[0], _LOGISTIC_B[1])
    for b in _LOGISTIC_B[2:]:
        q = ma(q, x2, b)
    y = ((((p * x).astype(f)) / q).astype(f) + f(0.5)).astype(f)
    return np.clip(y, f(0), f(1)).astype(f)


def _quantize(v, scale, zp, s8):
    """MlasQuantizeLinear: saturate(round_half_even(v / scale) + zp), all in float32"""
    lo, hi = (-128, 127) if s8 else (0, 255)
    q = np.clip((v / np.float32(scale)).astype(np.float32), np.float32(lo - zp),
                np.float32(hi - zp))
    return np.rint(q).astype(np.int64) + zp


def _sigmoid_fma_scale(xs, xz, s8):
    """a Y_scale near 1/256 for which the fused and the unfused logistic quantize one of the 256
    table entries apart: y / Y_scale put on k + 1/2 between the two float32 results"""
    f = np.float32
    full = np.arange(-128, 128) if s8 else np.arange(256)
    v = (f(xs) * (full - xz).astype(f)).astype(f)
    y1, y2 = _logistic(v, True), _logistic(v, False)
    yz = -128 if s8 else 0
    best = None
    for i in np.nonzero(y1 != y2)[0]:
        for k in range(200, 256):
            ys = f((np.float64(y1[i]) + np.float64(y2[i])) / 2 / (k + 0.5))
            for cand in (ys, np.nextafter(ys, f(1)), np.nextafter(ys, f(0))):
                d = int(np.sum(_quantize(y1, cand, yz, s8) != _quantize(y2, cand, yz, s8)))
                if d and (best is None or abs(cand - 1 / 256) < abs(best - 1 / 256)):
                    best = cand
    assert best is not None, "no Y_scale rounds the fused and unfused logistic apart"
    return f(best), yz


def handmade_ms_order(path, kind):
    """com.microsoft nodes whose scales (searched with numpy's float32 above, among round decimal
    scales) and inputs make the order of ORT's float32 operations decide integers: QLinearMul's
    ratio (A_scale * B_scale) / C_scale against A_scale * (B_scale / C_scale) on 256 element pairs
    whose products round apart; the global average pool's x_scale / (y_scale * size) against
    x_scale / y_scale / size on channel sums that round apart (NCHW uint8, NHWC int8);
    QLinearSigmoid's table with the fused logistic against the unfused one (one entry apart)"""
    from onnx import TensorProto as T, helper as h
    f = np.float32
    rng = np.random.default_rng(17)
    s8 = kind.endswith("_s8")
    qt, nt = (T.INT8, np.int8) if s8 else (T.UINT8, np.uint8)
    lo, hi = (-128, 127) if s8 else (0, 255)
    attrs = {}
    if kind.startswith("mul"):
        sa, sb, sc, za, zb, zc = ((f(0.03), f(0.075), f(0.144), -3, 0, 5) if s8 else
                                  (f(0.1), f(0.05), f(0.12), 120, 3, 128))
        r1, r2 = f(f(sa * sb) / sc), f(sa * f(sb / sc))
        vals = np.arange(lo, hi + 1)
        a, b = [g.ravel() for g in np.meshgrid(vals, vals, indexing="ij")]
        p = ((a - za) * (b - zb)).astype(f)
        apart = [np.clip(np.rint((f(p * r).astype(f) + f(zc)).astype(f)), lo, hi) for r in (r1, r2)]
        pick = np.nonzero(apart[0] != apart[1])[0]
        assert pick.size >= 32, f"mul {kind}: {pick.size} pairs apart"
        pick = rng.choice(pick, min(pick.size, 128), replace=False)
        rest = rng.integers(0, a.size, 256 - pick.size)
        idx = rng.permutation(np.concatenate([pick, rest]))
        x, bv = a[idx].reshape(1, 4, 8, 8), b[idx].reshape(1, 4, 8, 8).astype(nt)
        op, ins = "QLinearMul", ["x", "x_s", "x_z", "b", "b_s", "b_z", "y_s", "y_z"]
        inits = {"x_s": sa, "x_z": nt(za), "b": bv, "b_s": sb, "b_z": nt(zb), "y_s": sc,
                 "y_z": nt(zc)}
    elif kind.startswith("gap"):
        xs, ys, xz, yz = (f(0.265), f(0.053), -3, 5) if s8 else (f(0.225), f(0.105), 120, 128)
        last, n, ch = s8, 30, 8
        r1, r2 = f(xs / f(ys * f(n))), f(f(xs / ys) / f(n))
        acc = np.arange((lo - xz) * n, (hi - xz) * n + 1)
        apart = [np.clip(np.rint((acc.astype(f) * r).astype(f)) + yz, lo, hi) for r in (r1, r2)]
        pick = np.nonzero(apart[0] != apart[1])[0]
        assert pick.size >= 16, f"gap {kind}: {pick.size} sums apart"
        sums = acc[rng.choice(pick, 2 * ch, replace=False)] + xz * n  # the channel sums of x
        x = np.empty((2 * ch, n), np.int64)
        for i, s in enumerate(sums):  # n values summing to s, shuffled
            base, extra = divmod(int(s), n)
            x[i] = rng.permutation(np.array([base + 1] * extra + [base] * (n - extra)))
        x = x.reshape(2, ch, 5, 6)
        if last:
            x = x.transpose(0, 2, 3, 1)
        op, ins, attrs = "QLinearGlobalAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], {
            "channels_last": int(last)}
        inits = {"x_s": xs, "x_z": nt(xz), "y_s": ys, "y_z": nt(yz)}
    else:  # sigmoid
        xs, xz = f(0.0625), (-3 if s8 else 120)
        ys, yz = _sigmoid_fma_scale(xs, xz, s8)
        x = (np.arange(-128, 128) if s8 else np.arange(256)).reshape(1, 256)
        op, ins = "QLinearSigmoid", ["x", "x_s", "x_z", "y_s", "y_z"]
        inits = {"x_s": xs, "x_z": nt(xz), "y_s": ys, "y_z": nt(yz)}
    x = np.ascontiguousarray(x).astype(nt)
    node = h.make_node(op, ins, ["y"], domain="com.microsoft", **attrs)
    g = h.make_graph([node], f"ms_{kind}", [h.make_tensor_value_info("x", qt, list(x.shape))],
                     [h.make_tensor_value_info("y", qt, None)],
                     [nh.from_array(np.asarray(v), k) for k, v in inits.items()])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13),
                                             h.make_opsetid("com.microsoft", 1)]), path)
    return x


def _avgpool_sum_apart(xs, xz, yz, rng):
    """a 3 x 3 window of uint8 values and a y_scale near 0.03 for which its float32 sum in ORT's
    order (x_scale * (x - x_zp) each, added left to right) and the exact sum quantize apart: y_scale
    puts (sum / 9) / y_scale on k + 1/2 between the two"""
    f = np.float32
    w = rng.integers(0, 256, (4096, 9))
    v = (f(xs) * (w - xz).astype(f)).astype(f)
    acc = v[:, 0].copy()
    for j in range(1, 9):
        acc = (acc + v[:, j]).astype(f)
    exact = v.astype(np.float64).sum(1).astype(f)

    def q(a, ys):
        return np.clip(np.rint(((a / f(9)).astype(f) / ys).astype(f) + f(yz)), 0, 255)
    for i in np.nonzero(acc != exact)[0]:
        a, e = np.float64((acc[i] / f(9)).astype(f)), np.float64((exact[i] / f(9)).astype(f))
        k = np.floor((a + e) / 2 / 0.03)
        ys = f((a + e) / 2 / (k + 0.5))
        for cand in (ys, np.nextafter(ys, f(1)), np.nextafter(ys, f(0))):
            if q(acc[i:i + 1], cand)[0] != q(exact[i:i + 1], cand)[0]:
                return w[i], cand
    raise AssertionError("no window rounds apart")


def handmade_ms_avgpool(path, kind):
    """com.microsoft's QLinearAveragePool: strides, pads, count_include_pad, ceil_mode (its last
    window dropped where it would start in the end padding), NCHW and channels_last (int8), 1-D
    and 3-D, ties (halves), a kernel over the whole image (ORT's global pool), and windows whose
    float32 sum in ORT's order quantizes apart from the exact sum (avgpool_sumorder)"""
    from onnx import TensorProto as T, helper as h
    f = np.float32
    rng = np.random.default_rng(19)
    s8 = kind.endswith("_s8")
    qt, nt = (T.INT8, np.int8) if s8 else (T.UINT8, np.uint8)
    xs, ys, xz, yz = f(0.0173), f(0.0291), nt(-7 if s8 else 120), nt(3 if s8 else 128)
    cases = {  # shape, kernel, strides, pads, count_include_pad, ceil_mode
        "avgpool": ([1, 3, 9, 9], [3, 3], [2, 2], [1, 1, 1, 1], 0, 0),
        "avgpool_ceil_incl": ([1, 2, 7, 8], [2, 3], [2, 2], [0, 1, 1, 0], 1, 1),
        "avgpool_ceil_trim": ([1, 2, 6, 4], [3, 3], [2, 2], [0, 0, 1, 2], 0, 1),
        "avgpool_nhwc_s8": ([2, 5, 6, 3], [3, 3], [1, 2], [1, 1, 1, 1], 0, 0),
        "avgpool_1d": ([1, 3, 11], [4], [3], [2, 1], 1, 0),
        "avgpool_3d": ([1, 2, 4, 5, 6], [2, 3, 2], [2, 2, 2], [1, 1, 0, 0, 1, 1], 0, 1),
        "avgpool_ties": ([1, 2, 6, 6], [2, 2], [2, 2], [1, 1, 1, 1], 0, 0),
        "avgpool_global": ([1, 16, 4, 5], [4, 5], [1, 1], [0, 0, 0, 0], 0, 0),
        "avgpool_sumorder": ([1, 2, 12, 12], [3, 3], [3, 3], [0, 0, 0, 0], 0, 0),  # disjoint
    }
    shape, kernel, strides, pads, incl, ceil = cases[kind]
    last = "nhwc" in kind
    if kind == "avgpool_ties":  # x * 0.5 / count / 0.25: halves where the count is 4
        xs, ys, xz, yz = f(0.5), f(0.25), nt(0), nt(3)
    if kind == "avgpool_global":  # scales for which ORT's global pool (int32 sums, one scale)
        xs, ys = f(0.2), f(0.08)  # and the windowed float32 path round apart on some images
    x = rng.integers(-128 if s8 else 0, 128 if s8 else 256, shape)
    if kind == "avgpool_sumorder":  # 32 disjoint windows, the first one that rounds apart
        w, ys = _avgpool_sum_apart(xs, int(xz), int(yz), rng)
        x[0, 0, :3, :3] = w.reshape(3, 3)
    if kind == "avgpool_global":  # channels 0-7: images that the two paths round apart
        w = rng.integers(0, 256, (4096, 20))
        v = (xs * (w - int(xz)).astype(f)).astype(f)
        acc = v[:, 0].copy()
        for j in range(1, 20):
            acc = (acc + v[:, j]).astype(f)
        windowed = np.rint(((acc / f(20)).astype(f) / ys).astype(f) + f(yz))
        ratio = f(xs / f(ys * f(20)))
        pooled = np.rint(((w - int(xz)).sum(1).astype(f) * ratio).astype(f)) + int(yz)
        apart = np.nonzero((np.clip(windowed, 0, 255) != np.clip(pooled, 0, 255)))[0]
        assert apart.size >= 8, apart.size
        x[0, :8] = w[apart[:8]].reshape(8, 4, 5)
    if last:
        x = np.moveaxis(x, 1, -1)
    x = np.ascontiguousarray(x).astype(nt)
    node = h.make_node("QLinearAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"],
                       domain="com.microsoft", kernel_shape=kernel, strides=strides, pads=pads,
                       count_include_pad=incl, ceil_mode=ceil, channels_last=int(last))
    inits = {"x_s": xs, "x_z": xz, "y_s": ys, "y_z": yz}
    g = h.make_graph([node], f"ms_{kind}", [h.make_tensor_value_info("x", qt, list(x.shape))],
                     [h.make_tensor_value_info("y", qt, None)],
                     [nh.from_array(np.asarray(v), k) for k, v in inits.items()])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13),
                                             h.make_opsetid("com.microsoft", 1)]), path)
    return x


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
    only = os.environ.get("GEN_ONLY")
    for c in BACKEND_CASES if not only else []:
        src = os.path.join(DEBIAN, c)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(OUT, "node", c), dirs_exist_ok=True)
        else:
            print(f"{src} missing (Debian's libonnx-testdata): not copied")
    tmp = tempfile.mkdtemp()
    for kind in ("same", "bias", "scalar_a") if not only else []:
        q = os.path.join(tmp, f"qladd_{kind}.onnx")
        x = handmade_qlinear_add(q, kind)
        write_case(f"test_ort_qlinearadd_{kind}", q, x)
    for kind in ("sigmoid", "sigmoid_s8", "leakyrelu", "leakyrelu_s8", "mul", "mul_s8", "gap",
                 "gap_nhwc", "gap_s8", "concat", "concat_s8") if not only or only == "ms" else []:
        q = os.path.join(tmp, f"ms_{kind}.onnx")
        x = handmade_ms(q, kind)
        try:
            write_case(f"test_ort_ms_{kind}", q, x)
        except Exception as e:  # a type or layout ORT's CPU kernels lack: not a case
            print(f"ms_{kind}: ONNX Runtime refuses it ({str(e).splitlines()[0][:120]})")
    for kind in ("mul_order", "mul_order_s8", "gap_order", "gap_order_s8", "sigmoid_fma",
                 "sigmoid_fma_s8") if not only or only == "ms" else []:
        q = os.path.join(tmp, f"ms_{kind}.onnx")
        x = handmade_ms_order(q, kind)
        write_case(f"test_ort_ms_{kind}", q, x)
    for kind in ("avgpool", "avgpool_ceil_incl", "avgpool_ceil_trim", "avgpool_nhwc_s8",
                 "avgpool_1d", "avgpool_3d", "avgpool_ties", "avgpool_global",
                 "avgpool_sumorder") if not only or only == "ms" else []:
        q = os.path.join(tmp, f"ms_{kind}.onnx")
        x = handmade_ms_avgpool(q, kind)
        write_case(f"test_ort_ms_{kind}", q, x)
    for kind in ("matmul_halves", "matmul_s8s8", "conv_halves") if not only else []:
        q = os.path.join(tmp, f"{kind}.onnx")
        x = handmade_qlinear(q, kind)
        write_case(f"test_ort_qlinear_{kind}", q, x)
    for kind, name, bias_scale in [("matmul", "matmul_ties", 1), ("conv", "conv_ties", 1),
                                   ("gemm", "gemm_ties", 1), ("add", "add_ties", 1),
                                   ("conv", "conv_bias_scale", 2)] if not only else []:
        q = os.path.join(tmp, f"qdq_{name}.onnx")
        x = handmade_qdq(q, kind, bias_scale)
        print(f"qdq_{name}: ORT fused vs unfused differ in {fused_differs(q, x)} integers")
        write_case(f"test_ort_qdq_{name}", q, x)
    for label, net, shape, dyn_w in [("mlp", MLP(), (1, 64, 16), oq.QuantType.QInt8),
                                     ("gemm", Head(), (64, 16), oq.QuantType.QInt8),
                                     ("convnet", ConvNet(), (1, 3, 16, 16), oq.QuantType.QUInt8),
                                     ("resnet", ResNetlet(), (1, 3, 12, 12), oq.QuantType.QUInt8),
                                     ("poolnet", PoolNet(), (1, 3, 15, 15), oq.QuantType.QUInt8),
                                     ("mixnet", MixNet(), (1, 3, 12, 12), oq.QuantType.QUInt8)]:
        if only and label != only:
            continue
        ops = OPS + ["Relu", "MaxPool"] if label == "poolnet" else OPS
        if label == "mixnet":
            ops = OPS + ["Mul", "Sigmoid", "LeakyRelu", "Concat", "GlobalAveragePool", "Flatten"]
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
                weight_type=oq.QuantType.QInt8, op_types_to_quantize=ops),
            "qoperator": lambda o: oq.quantize_static(
                f32, o, Reader("x", shape, 3), quant_format=oq.QuantFormat.QOperator,
                per_channel=True, activation_type=oq.QuantType.QUInt8,
                weight_type=oq.QuantType.QInt8, op_types_to_quantize=ops),
        }
        if label == "poolnet":  # the QDQ form alone
            variants = {"qdq": variants["qdq"]}
        if label == "mixnet":  # com.microsoft's operators: the QOperator form alone
            variants = {"qoperator": variants["qoperator"]}
        for kind, make in variants.items():
            q = os.path.join(tmp, f"{label}_{kind}.onnx")
            make(q)
            expose_integers(q)
            print(f"{label}_{kind}: ORT fused vs unfused differ in {fused_differs(q, x)} integers")
            write_case(f"test_ort_{label}_{kind}", q, x)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
