#!/usr/bin/env python3
"""check_safetensors_torch.py — safetensors interchange between Tessera and PyTorch.

  write-ref PATH   writes tests/data/torch_ref.safetensors with PyTorch + the safetensors package
                   (tests/test_safetensors.c loads it and checks every value; then writes the same
                   tensors back and expects the very same bytes)
  check PATH       loads a file written by tests/test_safetensors.c (tessera_written.safetensors in
                   the test's working folder, e.g. build/tests/) with PyTorch and compares names,
                   dtypes, shapes, values and metadata with what the C test wrote

Needs /usr/bin/python3 with torch and safetensors (pip install safetensors).
"""
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file


def reference_tensors():
    g = torch.Generator().manual_seed(0)
    return {
        "fc1.weight": torch.randn(3, 4, generator=g),
        "fc1.bias": torch.linspace(-1, 1, 3),
        "bn.running_var": torch.rand(2, generator=g, dtype=torch.float64),
        "bn.num_batches_tracked": torch.tensor(7, dtype=torch.int64),
        "half": torch.tensor([0.1, -2.5, 65504.0], dtype=torch.float16),
        "bhalf": torch.tensor([0.1, -2.5, 3.0e38], dtype=torch.bfloat16),
        "idx32": torch.tensor([[-1, 2], [2147483647, -2147483648]], dtype=torch.int32),
        "pixels": torch.tensor([0, 7, 255], dtype=torch.uint8),
        "mask": torch.tensor([True, False, True, True]),
        "empty": torch.zeros(0, 5),
        "scalar": torch.tensor(2.75),
    }


def tessera_written():
    """What tests/test_safetensors.c writes (values by the same formulas)."""
    i = torch.arange
    return {
        "f32": (i(6, dtype=torch.float64) * 0.5 - 1).float().reshape(2, 3),
        "f64": ((i(3, dtype=torch.float64) + 1) / 3),
        "f16": (i(4, dtype=torch.float64) - 1.5).half().reshape(2, 2),
        "bf16": ((i(4, dtype=torch.float64) + 1) * 0.25).bfloat16(),
        "i64": (i(4, dtype=torch.int64) * 1000000000000 - 7).reshape(2, 2),
        "i32": (i(5, dtype=torch.int32) * -3),
        "u8": (i(4) * 60).to(torch.uint8),
        "bool": (i(3) % 2).bool(),
        "scalar": torch.tensor(3.5),
        "empty": torch.zeros(0, 3),
        "layer.0.weight": i(6, dtype=torch.float32).reshape(2, 3).t(),
    }, {"format": "pt", "producer": "tessera"}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("write-ref", "check"):
        print(__doc__)
        return 2
    path = sys.argv[2]
    if sys.argv[1] == "write-ref":
        save_file(reference_tensors(), path, metadata={"format": "pt"})
        for k, v in load_file(path).items():
            print(k, v.dtype, list(v.shape), v.flatten().tolist())
        return 0
    want, meta = tessera_written()
    got = load_file(path)
    with safe_open(path, framework="pt") as f:
        got_meta = f.metadata()
    bad = []
    if sorted(got) != sorted(want):
        bad.append("names: %s vs %s" % (sorted(got), sorted(want)))
    for k, w in want.items():
        g = got.get(k)
        if g is None:
            continue
        if g.dtype != w.dtype or g.shape != w.shape or not torch.equal(g, w.contiguous()):
            bad.append("%s: got %s %s %s, want %s %s %s" % (k, g.dtype, list(g.shape), g.tolist(),
                                                           w.dtype, list(w.shape), w.tolist()))
    if got_meta != meta:
        bad.append("metadata %s vs %s" % (got_meta, meta))
    if bad:
        print("MISMATCH\n  " + "\n  ".join(bad))
        return 1
    print("PyTorch %s loads %s: %d tensors and the metadata match" % (torch.__version__, path,
                                                                       len(want)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
