"""Writes the PyTorch reference values of test_interpolate_antialias.py (run under
/opt/torch2/bin/torch-python; writes tests/data/interp_aa_refs.json)."""
import torch
import torch.nn.functional as F

x = (torch.arange(2 * 7 * 9, dtype=torch.float64).reshape(1, 2, 7, 9) * 0.37).sin()
out = {}
for mode in ("bilinear", "bicubic"):
    for size in ((3, 4), (10, 5)):
        xi = x.clone().requires_grad_(True)
        y = F.interpolate(xi, size=size, mode=mode, antialias=True)
        w = torch.arange(y.numel(), dtype=torch.float64).reshape(y.shape).cos()
        (y * w).sum().backward()
        out["%s_%dx%d" % (mode, *size)] = (y.flatten().tolist(), xi.grad.flatten().tolist())
import json, os  # noqa: E402,E401
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "interp_aa_refs.json")
with open(path, "w") as f:
    json.dump(out, f)
