"""Makes tests/data/qat_fused_ref.json: what PyTorch's fused moving-average fake quant
(FusedMovingAvgObsFakeQuantize, get_default_qat_qconfig's version 1, QAT's default) trains with,
for tests/python/test_qat.py: the scale and zero point torch.fused_moving_avg_obs_fake_quant
chooses from a first (min, max) (affine / symmetric, per tensor and per channel, ranges on one
side of 0, below fbgemm's smallest scale, zero), and a conv + bn + hardswish model through
fuse_modules_qat / prepare_qat with each backend's qconfig: the training forward's output and
the weight and activation fake quants' qparams. Run with a PyTorch 2.x python:
    /opt/torch2/bin/torch-python tests/data/gen_qat_fused_ref.py"""
import json
import os

import torch
import torch.ao.quantization as tq
from torch import nn

torch.manual_seed(53)
out = {"torch": torch.__version__, "pairs": []}
PAIRS = [(-1.526, 1.7508), (-0.2391, 0.2446), (0.3, 2.0), (-2.0, -0.25), (-1e-4, 3e-3),
         (-2e-6, 3e-6), (0.0, 0.0), (-7.5, 0.5), (1e-7, 1e-5), (-3e-6, -1e-7), (-5e-5, 0.0)]
for lo, hi in PAIRS:
    for qmin, qmax, sym in ((0, 255, False), (0, 127, False), (-128, 127, True), (-128, 127, False),
                            (0, 255, True)):
        x = torch.tensor([lo, hi], dtype=torch.float32)
        rmin, rmax = torch.tensor(float("inf")), torch.tensor(float("-inf"))
        sc, zp = torch.tensor([1.0]), torch.tensor([0], dtype=torch.int32)
        torch.fused_moving_avg_obs_fake_quant(x, torch.tensor([1]), torch.tensor([1]), rmin, rmax,
                                              sc, zp, 0.01, qmin, qmax, 0, False, sym)
        out["pairs"].append([float(x[0]), float(x[1]), qmin, qmax, sym, sc.item(), int(zp.item())])

# per channel: the rows' ranges of a weight
w = (torch.rand(6, 4) - 0.5) * torch.tensor([[1.0], [0.01], [1e-6], [3.0], [0.2], [5e-5]])
rmin, rmax = torch.full((6,), float("inf")), torch.full((6,), float("-inf"))
sc, zp = torch.ones(6), torch.zeros(6, dtype=torch.int32)
torch.fused_moving_avg_obs_fake_quant(w, torch.tensor([1]), torch.tensor([1]), rmin, rmax, sc, zp,
                                      0.01, -128, 127, 0, True, True)
out["per_channel"] = {"w": w.tolist(), "scale": sc.tolist(), "zero_point": zp.tolist()}

# a model: conv + bn (fused for QAT) + hardswish, one training forward per backend
base = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
for p in base.parameters():
    p.data.uniform_(-0.5, 0.5)
x = torch.rand(2, 3, 8, 8)
out["model"] = {"state": {k: v.tolist() for k, v in base.state_dict().items()}, "x": x.tolist()}
for backend in ("qnnpack", "x86"):
    m = tq.fuse_modules_qat(base.train(), [["0", "1"]], inplace=False)
    m.qconfig = tq.get_default_qat_qconfig(backend)
    tq.prepare_qat(m, inplace=True)
    y = m(x)
    c = m[0]
    out["model"][backend] = {
        "y": y.detach().tolist(), "w_scale": c.weight_fake_quant.scale.tolist(),
        "w_zero_point": c.weight_fake_quant.zero_point.tolist(),
        "act_scale": c.activation_post_process.scale.tolist(),
        "act_zero_point": c.activation_post_process.zero_point.tolist()}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "qat_fused_ref.json")
with open(path, "w") as f:
    json.dump(out, f, separators=(",", ":"))
print("wrote", path)
