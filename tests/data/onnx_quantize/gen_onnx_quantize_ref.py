#!/usr/bin/env python3
"""gen_onnx_quantize_ref.py — ONNX Runtime's quantizer's output on small float models, for
tests/test_onnx_quantize.c (ts_onnx_quantize must write the same scales, zero points and integer
weights, and Tessera must then run the file to ORT's outputs).

Per model NAME (float32, opset 17, made with onnx.helper):
  NAME.onnx                 the float model
  NAME_calib_{0,1,2}.npy    the calibration batches (fixed seeds)
  NAME_input.npy            a test input
  NAME_static_ort.onnx      quantize_static: QDQ, CalibrationMethod.MinMax, per_channel=True,
                            weight_type QInt8, activation_type QUInt8 (mlp: QInt8),
                            op_types_to_quantize Conv, MatMul, Gemm, Add
  NAME_dynamic_ort.onnx     quantize_dynamic: op_types_to_quantize MatMul, Gemm (weights QInt8)
  NAME_{static,dynamic}_out.npy  ORT's outputs of those models on NAME_input.npy
Models: convnet (Conv, Relu, Conv, residual Add, Flatten, Gemm transB 1), mlp (MatMul without
bias, Relu, Gemm transB 0 with C), gemm1 (one Gemm: the error-bound test), ties (one Gemm whose
weights fall on quantization ties). And for the refusals:
relu.onnx (nothing to quantize), gemm1_opset11.onnx (opset 11); shared.onnx (two Gemms reading one
weight and bias) with shared_calib.npy.

Usage: /opt/torch2/bin/torch-python tests/data/onnx_quantize/gen_onnx_quantize_ref.py
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnxruntime import quantization as oq

OUT = os.path.dirname(os.path.abspath(__file__))


def init(rng, name, shape, scale):
    return nh.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def convnet(rng):
    inits = [init(rng, "c1.weight", (4, 3, 3, 3), 0.3), init(rng, "c1.bias", (4,), 0.1),
             init(rng, "c2.weight", (4, 4, 3, 3), 0.2), init(rng, "c2.bias", (4,), 0.1),
             init(rng, "fc.weight", (5, 256), 0.05), init(rng, "fc.bias", (5,), 0.1)]
    nodes = [h.make_node("Conv", ["x", "c1.weight", "c1.bias"], ["c1"], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "c2.weight", "c2.bias"], ["c2"], pads=[1, 1, 1, 1]),
             h.make_node("Add", ["c2", "r1"], ["s"]),
             h.make_node("Relu", ["s"], ["r2"]),
             h.make_node("Flatten", ["r2"], ["f"]),
             h.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["y"], transB=1)]
    return nodes, inits, [2, 3, 8, 8], [2, 5]


def mlp(rng):
    inits = [init(rng, "w1", (6, 8), 0.5), init(rng, "w2", (8, 3), 0.4), init(rng, "b2", (3,), 0.2)]
    nodes = [h.make_node("MatMul", ["x", "w1"], ["h"]), h.make_node("Relu", ["h"], ["hr"]),
             h.make_node("Gemm", ["hr", "w2", "b2"], ["y"])]
    return nodes, inits, [4, 6], [4, 3]


def gemm1(rng):
    inits = [init(rng, "w", (3, 6), 0.5), init(rng, "b", (3,), 0.3)]
    return [h.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], inits, [4, 6], [4, 3]


def ties(rng):
    """weights at exact quantization ties: absmax 127 * 2^-7 makes the scale 2^-7, and odd
    multiples of 2^-8 fall half-way (round half to even: 0.5 -> 0, 1.5 -> 2, -2.5 -> -2)"""
    w = np.array([[0.9921875, 2 ** -8, 3 * 2 ** -8, -5 * 2 ** -8, 0.25, -0.5],
                  [-0.9921875, -(2 ** -8), 7 * 2 ** -8, 0.125, 9 * 2 ** -8, 0.0],
                  [0.9921875, -3 * 2 ** -8, -7 * 2 ** -8, 2 ** -6, 11 * 2 ** -8, 0.5]], np.float32)
    inits = [nh.from_array(w, "w"), init(rng, "b", (3,), 0.3)]
    return [h.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], inits, [4, 6], [4, 3]


class Reader(oq.CalibrationDataReader):
    def __init__(self, batches):  # noqa: D107
        self.it = iter([{"x": b} for b in batches])

    def get_next(self):
        return next(self.it, None)


def run(path, x):
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


def main():
    for seed, (name, make) in enumerate([("convnet", convnet), ("mlp", mlp), ("gemm1", gemm1),
                                             ("ties", ties)]):
        rng = np.random.default_rng(100 + seed)
        nodes, inits, xs, ys = make(rng)
        g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, xs)],
                         [h.make_tensor_value_info("y", T.FLOAT, ys)], inits)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], producer_name="gen")
        m.ir_version = 8
        p = lambda s: os.path.join(OUT, s)  # noqa: E731
        onnx.save(m, p(f"{name}.onnx"))
        batches = [(rng.standard_normal(xs) * (1 + k)).astype(np.float32) for k in range(3)]
        for k, b in enumerate(batches):
            np.save(p(f"{name}_calib_{k}.npy"), b)
        x = (rng.standard_normal(xs) * 1.5).astype(np.float32)
        np.save(p(f"{name}_input.npy"), x)
        act = oq.QuantType.QInt8 if name == "mlp" else oq.QuantType.QUInt8
        oq.quantize_static(p(f"{name}.onnx"), p(f"{name}_static_ort.onnx"), Reader(batches),
                           quant_format=oq.QuantFormat.QDQ, per_channel=True,
                           activation_type=act, weight_type=oq.QuantType.QInt8,
                           op_types_to_quantize=["Conv", "MatMul", "Gemm", "Add"],
                           calibrate_method=oq.CalibrationMethod.MinMax)
        oq.quantize_dynamic(p(f"{name}.onnx"), p(f"{name}_dynamic_ort.onnx"),
                            op_types_to_quantize=["MatMul", "Gemm"], weight_type=oq.QuantType.QInt8)
        for mode in ("static", "dynamic"):
            np.save(p(f"{name}_{mode}_out.npy"), run(p(f"{name}_{mode}_ort.onnx"), x))
        print(name, "done")
    # refusals: nothing to quantize (a Relu alone), an opset before 13 (a Gemm at opset 11)
    xi, yo = h.make_tensor_value_info("x", T.FLOAT, [4, 6]), h.make_tensor_value_info("y", T.FLOAT, [4, 6])
    m = h.make_model(h.make_graph([h.make_node("Relu", ["x"], ["y"])], "relu", [xi], [yo]),
                     opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(OUT, "relu.onnx"))
    # one weight and bias read by two Gemms (quantized once / per input), calibrated on shared_calib
    rng = np.random.default_rng(7)
    inits = [init(rng, "w", (6, 6), 0.4), init(rng, "b", (6,), 0.2)]
    g = h.make_graph([h.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1),
                      h.make_node("Gemm", ["h", "w", "b"], ["y"], transB=1)], "shared", [xi],
                     [yo], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(OUT, "shared.onnx"))
    np.save(os.path.join(OUT, "shared_calib.npy"), rng.standard_normal((4, 6)).astype(np.float32))
    m = onnx.load(os.path.join(OUT, "gemm1.onnx"))
    m.opset_import[0].version = 11
    onnx.save(m, os.path.join(OUT, "gemm1_opset11.onnx"))


if __name__ == "__main__":
    main()
