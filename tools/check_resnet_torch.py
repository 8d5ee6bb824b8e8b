#!/usr/bin/env python3
"""check_resnet_torch.py — full-size ResNet state dicts between PyTorch and Tessera, both ways.

  save  [--model resnet18|resnet20] FILE   PyTorch's model (torchvision's resnet18 when torchvision
        is importable, else tools/gen_golden_resnet.py's, which has its names and structure) with
        BatchNorm statistics from two train-mode forwards, an input [2, 3, 64, 64] and the float64
        results of those float32 weights: eval logits, train logits and the running statistics
        after that train-mode forward. Then:  TS_RESNET_LOAD=FILE build/tests/test_golden_resnet
  check [--model resnet18|resnet20] FILE   a Tessera state dict written by
        TS_RESNET_SAVE=FILE [TS_RESNET_MODEL=resnet20] build/tests/test_golden_resnet
        loads into PyTorch's model with load_state_dict(strict=True) and gives Tessera's logits.

Run with /opt/torch2/bin/torch-python (PYTHONPATH=DIR with torchvision, optionally)."""
import argparse
import copy
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_gpt_torch import load_safetensors  # noqa: E402
from gen_golden import save_safetensors  # noqa: E402
from gen_golden_resnet import perturb, resnet18, resnet20  # noqa: E402


def torch_model(name):
    if name == "resnet20":
        return resnet20(), "gen_golden_resnet.resnet20"
    try:
        import torchvision.models as tvm
        return tvm.resnet18(), "torchvision.models.resnet18"
    except ImportError:
        return resnet18(), "gen_golden_resnet.resnet18 (torchvision not importable)"


def save(path, name):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    model, where = torch_model(name)
    perturb(model, g, (4, 3, 64, 64))
    x = torch.randn(2, 3, 64, 64, generator=g)
    t = {"model." + k: v.clone() for k, v in model.state_dict().items()}
    t["input"] = x
    m = copy.deepcopy(model).double()
    m.eval()
    with torch.no_grad():
        t["logits_eval"] = m(x.double()).float()
        m.train()
        t["logits_train"] = m(x.double()).float()
    for k, v in m.state_dict().items():
        if "running" in k or "num_batches" in k:
            t["after." + k] = v.float() if v.is_floating_point() else v
    save_safetensors(path, t, {"model": name})
    n = sum(v.numel() for v in model.parameters())
    print(f"wrote {path}: {where}, {n} parameters, {len(t)} tensors, "
          f"{os.path.getsize(path) / 2**20:.1f} MiB")
    return 0


def check(path, name):
    sd = load_safetensors(path)
    x, want = sd.pop("input"), sd.pop("logits_eval")
    model, where = torch_model(name)
    model.load_state_dict(sd, strict=True)
    model.eval()
    with torch.no_grad():
        got = model(x)
    err = ((got - want).abs() / (1e-4 * want.abs().max() + 1e-4 * want.abs())).max().item()
    ok = err <= 1
    print(f"{len(sd)} tensors of Tessera's {name} loaded strictly into {where}; eval logits "
          f"{tuple(got.shape)}, worst err/tol {err:.3g}: {'ok' if ok else 'MISMATCH'}")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["save", "check"])
    ap.add_argument("file")
    ap.add_argument("--model", choices=["resnet18", "resnet20"], default="resnet18")
    a = ap.parse_args()
    torch.set_num_threads(1)
    return save(a.file, a.model) if a.mode == "save" else check(a.file, a.model)


if __name__ == "__main__":
    sys.exit(main())
