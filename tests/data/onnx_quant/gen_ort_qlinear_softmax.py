"""ONNX Runtime's com.microsoft QLinearSoftmax on small random inputs (uint8 and int8, the last
axis, a middle axis, opset 12's flattened rows, one-value rows, long rows): writes
node/test_ort_ms_softmax_*/ (model.onnx, test_data_set_0/{input_0,output_0}.pb), which
ctest's test_onnx_quant_models compares bit for bit. Run with /opt/torch2/bin/torch-python
(onnxruntime 1.32): python3 tests/data/onnx_quant/gen_ort_qlinear_softmax.py"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node")
# name, shape, int8, axis (None: ORT's default), opset attribute, X_scale, Y_scale, Y_zero_point
CASES = [
    ("u8", [3, 17], False, None, 13, 0.07, 1 / 256, 0),
    ("s8", [3, 17], True, None, 13, 0.07, 1 / 256, -128),
    ("u8_axis1", [2, 5, 3], False, 1, 13, 0.21, 1 / 255, 0),
    ("s8_axis1", [2, 5, 3], True, 1, 13, 0.013, 0.004, -100),
    ("u8_opset12", [2, 3, 4], False, 1, 12, 0.05, 0.01, 3),
    ("s8_one", [4, 1], True, -1, 13, 0.3, 1 / 255, -128),
    ("u8_long", [2, 300], False, -1, 13, 0.02, 1 / 256, 0),
]


def main():
    rng = np.random.default_rng(78)
    for name, shape, s8, axis, opset, xs, ys, yz in CASES:
        t = TensorProto.INT8 if s8 else TensorProto.UINT8
        npt = np.int8 if s8 else np.uint8
        inits = [
            helper.make_tensor("xs", TensorProto.FLOAT, [], [xs]),
            helper.make_tensor("xz", t, [], [5 if not s8 else -5]),
            helper.make_tensor("ys", TensorProto.FLOAT, [], [ys]),
            helper.make_tensor("yz", t, [], [yz]),
        ]
        attrs = {"opset": opset}
        if axis is not None:
            attrs["axis"] = axis
        node = helper.make_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"],
                                domain="com.microsoft", **attrs)
        g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", t, shape)],
                              [helper.make_tensor_value_info("y", t, shape)], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                                helper.make_opsetid("com.microsoft", 1)])
        info = np.iinfo(npt)
        x = rng.integers(info.min, info.max + 1, size=shape).astype(npt)
        y = ort.InferenceSession(m.SerializeToString(),
                                 providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        d = os.path.join(HERE, "test_ort_ms_softmax_" + name)
        os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
        onnx.save(m, os.path.join(d, "model.onnx"))
        for fn, arr, nm in (("input_0.pb", x, "x"), ("output_0.pb", y, "y")):
            with open(os.path.join(d, "test_data_set_0", fn), "wb") as f:
                f.write(numpy_helper.from_array(arr, nm).SerializeToString())
        print(name, y.reshape(-1)[:8].tolist())


if __name__ == "__main__":
    main()
