"""onnx_peers.py — the peers of bench_onnx.c: ONNX Runtime running the same .onnx file and PyTorch
eager (torch.inference_mode) running the model it was exported from (tools/onnx_real_models.py's
builders and weights), each best of 1 and 2 threads, median of the timed runs after warm-up.
Usage: onnx_peers.py FILE.onnx MODEL image|tokens BATCH [RUNS]  -> "ort <ms>" and "torch <ms>"."""
import os
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from onnx_real_models import MODELS, perturb  # noqa: E402


def median_ms(fn, runs):
    for _ in range(3):
        fn()
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


def main():
    path, name, kind, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    runs = int(sys.argv[5]) if len(sys.argv) > 5 else 10
    if kind == "tokens":
        x = np.random.randint(0, 256, (batch, 256)).astype(np.int64)
    else:
        x = np.random.randn(batch, 3, 224, 224).astype(np.float32)
    best_ort = best_torch = float("inf")
    torch.manual_seed(0)
    model = perturb(MODELS[name][0]()).eval()
    xt = torch.from_numpy(x)
    for threads in (1, 2):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        best_ort = min(best_ort, median_ms(lambda: sess.run(None, {"input": x}), runs))
        torch.set_num_threads(threads)
        with torch.inference_mode():
            best_torch = min(best_torch, median_ms(lambda: model(xt), runs))
    print(f"ort {best_ort:.3f}")
    print(f"torch {best_torch:.3f}")


if __name__ == "__main__":
    main()
