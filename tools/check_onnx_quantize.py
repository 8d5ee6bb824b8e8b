#!/usr/bin/env python3
"""check_onnx_quantize.py — `tessera quantize`'s files under ONNX Runtime, against ORT's own
quantizer on the same float model and calibration samples (bench/results/quantization-accuracy.md,
"tessera quantize (ONNX QDQ)").

Usage: /opt/torch2/bin/torch-python tools/check_onnx_quantize.py DIR [FASHION_DIR]
  DIR holds float.onnx (tessera export --dynamic-batch), static.onnx and dynamic.onnx (tessera
  quantize, default --calib-batches 10 --batch-size 64: the first 640 training images, unshuffled).
Prints the test accuracy of each file under ORT, of ORT's quantize_static (QDQ, MinMax, per
channel, uint8 activations, the same 640 images) and quantize_dynamic, and how many of the 10,000
predictions each quantized file changes from the float model's.
"""
import gzip
import os
import sys

import numpy as np
import onnxruntime as ort
from onnxruntime import quantization as oq

DIR = sys.argv[1]
FASHION = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"


def images(name):
    with gzip.open(os.path.join(FASHION, name), "rb") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    return ((x.astype(np.float32) / 255 - 0.2860) / 0.3530).astype(np.float32)


def labels(name):
    with gzip.open(os.path.join(FASHION, name), "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=8)


class Reader(oq.CalibrationDataReader):
    def __init__(self, x):  # noqa: D107
        self.it = iter([{"input": x[i:i + 64]} for i in range(0, 640, 64)])

    def get_next(self):
        return next(self.it, None)


def predict(path, x):
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return np.concatenate([s.run(None, {"input": x[i:i + 1000]})[0].argmax(1)
                           for i in range(0, len(x), 1000)])


def main():
    xt, yt = images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz")
    xtrain = images("train-images-idx3-ubyte.gz")[:640]
    p = lambda s: os.path.join(DIR, s)  # noqa: E731
    oq.quantize_static(p("float.onnx"), p("ort_static.onnx"), Reader(xtrain),
                       quant_format=oq.QuantFormat.QDQ, per_channel=True,
                       activation_type=oq.QuantType.QUInt8, weight_type=oq.QuantType.QInt8,
                       op_types_to_quantize=["Conv", "MatMul", "Gemm", "Add"],
                       calibrate_method=oq.CalibrationMethod.MinMax)
    oq.quantize_dynamic(p("float.onnx"), p("ort_dynamic.onnx"), op_types_to_quantize=["MatMul", "Gemm"])
    ref = predict(p("float.onnx"), xt)
    for f in ["float.onnx", "static.onnx", "dynamic.onnx", "ort_static.onnx", "ort_dynamic.onnx"]:
        pr = predict(p(f), xt)
        print(f"{f:18s} accuracy {np.mean(pr == yt):.4f}  predictions changed vs float "
              f"{int(np.sum(pr != ref))}  bytes {os.path.getsize(p(f))}")


if __name__ == "__main__":
    main()
