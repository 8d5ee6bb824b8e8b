#!/usr/bin/env python3
"""check_gpt_torch.py — loads a state dict saved by Tessera's GPT (ts_gpt_new) into the PyTorch GPT
of tools/gen_golden_gpt.py (strict: the same keys and shapes, no head.weight) and compares the
logits Tessera computed for the saved input.

    TS_GPT_SAVE=/tmp/gpt_ts.safetensors build/tests/test_golden_gpt
    /opt/torch2/bin/torch-python tools/check_gpt_torch.py /tmp/gpt_ts.safetensors"""
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden_gpt import GPT  # noqa: E402

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=DTYPES[h["dtype"]])
        out[name] = t.reshape(h["shape"])
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/gpt_ts.safetensors"
    sd = load_safetensors(path)
    idx, want = sd.pop("input"), sd.pop("logits")
    model = GPT()
    model.load_state_dict(sd, strict=True)
    model.eval()
    with torch.no_grad():
        got = model(idx)
    err = ((got - want).abs() / (1e-5 + 1e-4 * want.abs())).max().item()
    print(f"{len(sd)} tensors loaded strictly into PyTorch's GPT; logits {tuple(got.shape)}, "
          f"worst err/tol {err:.3g}: {'ok' if err <= 1 else 'MISMATCH'}")
    return 0 if err <= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
