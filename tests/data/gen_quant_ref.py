"""Makes tests/data/quant_ref.json: PyTorch's quantized results for tests/python/test_quant.py.

Run with PyTorch (x86 engine): /opt/torch2/bin/torch-python tests/data/gen_quant_ref.py
"""
import json
import os
import warnings

import torch

warnings.filterwarnings("ignore")
torch.manual_seed(0)
out = {"torch": torch.__version__, "engine": torch.backends.quantized.engine}

# per tensor: random values plus ties, ends and NaN, three dtypes
x = torch.cat([torch.randn(200) * 3, torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 1e6, -1e6,
                                                   float("inf"), float("-inf"), float("nan")])])
per_tensor = []
for dt, scale, zp in [("qint8", 0.0137, -3), ("quint8", 0.05, 128), ("qint32", 0.001, 1000),
                      ("qint8", 1.0, 0), ("quint8", 1 / 3, 7)]:
    q = torch.quantize_per_tensor(x, scale, zp, getattr(torch, dt))
    d = q.dequantize()
    per_tensor.append({"dtype": dt, "scale": scale, "zero_point": zp,
                       "int_repr": q.int_repr().tolist(),
                       "dequantize": [None if v != v else v for v in d.tolist()]})
out["x"] = [None if v != v else v for v in x.tolist()]
out["per_tensor"] = per_tensor

# per channel along axis 1 of [4, 3, 5]
xc = torch.randn(4, 3, 5) * 2
sc = torch.tensor([0.02, 0.05, 0.1], dtype=torch.float64)
zc = torch.tensor([0, 10, 250])
qc = torch.quantize_per_channel(xc, sc, zc, 1, torch.quint8)
out["per_channel"] = {"x": xc.tolist(), "scales": sc.tolist(), "zero_points": zc.tolist(),
                      "axis": 1, "int_repr": qc.int_repr().tolist(),
                      "dequantize": qc.dequantize().tolist()}

# quantize_dynamic of a small MLP
model = torch.nn.Sequential(torch.nn.Linear(24, 40), torch.nn.ReLU(), torch.nn.Linear(40, 10))
xin = torch.randn(6, 24)
qm = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
with torch.no_grad():
    y = qm(xin)
    h = qm[1](qm[0](xin))
layers = []
for i in (0, 2):
    w = qm[i].weight()
    layers.append({"weight": model[i].weight.detach().tolist(),
                   "bias": model[i].bias.detach().tolist(),
                   "q_scale": w.q_scale(), "q_zero_point": w.q_zero_point(),
                   "int_repr": w.int_repr().tolist()})
out["dynamic"] = {"x": xin.tolist(), "layers": layers, "y": y.tolist(), "h": h.tolist(),
                  "act_qparams": list(torch._choose_qparams_per_tensor(xin, True))}

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quant_ref.json")
with open(path, "w") as f:
    json.dump(out, f)
print("wrote", path)
