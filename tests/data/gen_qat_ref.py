"""Makes tests/data/qat_ref.pt, PyTorch's quantization-aware-training results that
tests/python/test_qat.py compares Tessera with: fake quantize per tensor / per channel (outputs
and gradients), FakeQuantize modules over a few batches, and a small conv + bn + relu + linear
model through fuse_modules_qat / prepare_qat (x86 qconfig, version 0: FakeQuantize), a training
forward, three SGD steps and convert. Run: /opt/torch2/bin/torch-python tests/data/gen_qat_ref.py
"""
import os

import torch
import torch.ao.quantization as tq
from torch import nn

torch.manual_seed(78)
torch.backends.quantized.engine = "x86"
out = {}

# ---- fake quantize ops: random values past both ends, exact ties of x * (1 / scale)
x = (torch.rand(2000) - 0.5) * 8
for i, (s, zp, lo, hi) in enumerate([(0.1, 5, 0, 255), (0.037, -3, -128, 127), (0.5, 0, -8, 7)]):
    xi = x.clone()
    inv = torch.tensor(1.0 / torch.tensor(s, dtype=torch.float32).item(), dtype=torch.float32)
    xi[:64] = (torch.arange(64, dtype=torch.float32) - 32 + 0.5) / inv  # near / at ties
    xi.requires_grad_(True)
    y = torch.fake_quantize_per_tensor_affine(xi, s, zp, lo, hi)
    w = torch.rand(2000)
    (y * w).sum().backward()
    out[f"pt{i}_x"], out[f"pt{i}_y"] = xi.detach(), y.detach()
    out[f"pt{i}_w"], out[f"pt{i}_grad"] = w, xi.grad
    out[f"pt{i}_args"] = torch.tensor([s, zp, lo, hi], dtype=torch.float64)

xc = (torch.rand(4, 3, 5) - 0.5) * 6
for axis in (0, 1, 2):
    n = xc.shape[axis]
    sc = torch.rand(n) * 0.05 + 0.005
    zp = torch.randint(-20, 20, (n,), dtype=torch.int32)
    xa = xc.clone().requires_grad_(True)
    y = torch.fake_quantize_per_channel_affine(xa, sc, zp, axis, -128, 127)
    w = torch.rand(4, 3, 5)
    (y * w).sum().backward()
    out[f"pc{axis}_x"], out[f"pc{axis}_scale"], out[f"pc{axis}_zp"] = xa.detach(), sc, zp
    out[f"pc{axis}_y"], out[f"pc{axis}_w"], out[f"pc{axis}_grad"] = y.detach(), w, xa.grad

# ---- FakeQuantize modules over three batches
for name, fq in [("fq_act", tq.default_fake_quant()),
                 ("fq_wpc", tq.default_per_channel_weight_fake_quant()),
                 ("fq_w", tq.default_weight_fake_quant())]:
    for b in range(3):
        xb = torch.randn(6, 4, 3) * (1 + b)
        out[f"{name}_x{b}"], out[f"{name}_y{b}"] = xb, fq(xb)
        out[f"{name}_scale{b}"], out[f"{name}_zp{b}"] = fq.scale.clone(), fq.zero_point.clone()


# ---- a small model through QAT
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv1 = nn.Conv2d(2, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.fc = nn.Linear(6, 5)  # over the last dim
        self.fc_relu = nn.ReLU()
        self.fc2 = nn.Linear(5, 3)
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.quant(x)
        x = self.relu1(self.bn1(self.conv1(x)))
        x = self.relu2(self.conv2(x))
        x = self.fc_relu(self.fc(x))
        return self.dequant(self.fc2(x))


net = Net().train()
net.qconfig = tq.get_default_qat_qconfig("x86", version=0)
fused = tq.fuse_modules_qat(net, [["conv1", "bn1", "relu1"], ["conv2", "relu2"],
                                  ["fc", "fc_relu"]])
qat = tq.prepare_qat(fused)
xs = [torch.randn(3, 2, 6, 6) for _ in range(5)]
qat(xs[0])  # observers and batch norm statistics
out["qat_state0"] = {k: v.clone() for k, v in qat.state_dict().items()}
for i, xb in enumerate(xs):
    out[f"qat_x{i}"] = xb
y = qat(xs[1])
out["qat_train_y"] = y.detach()
loss = y.square().mean()
loss.backward()
out["qat_grad_conv1"] = qat.conv1.weight.grad.clone()
out["qat_grad_fc2"] = qat.fc2.weight.grad.clone()
qat.zero_grad()
opt = torch.optim.SGD(qat.parameters(), lr=0.1)
for xb in xs[2:5]:
    opt.zero_grad()
    qat(xb).square().mean().backward()
    opt.step()
out["qat_state3"] = {k: v.clone() for k, v in qat.state_dict().items()}
qat.eval()
xt = torch.randn(2, 2, 6, 6)
out["qat_test_x"], out["qat_eval_y"] = xt, qat(xt).detach()
q = tq.convert(qat.eval())
out["q_y"] = q(xt)
for name in ("conv1", "conv2", "fc", "fc2"):
    m = getattr(q, name)
    w = m.weight()
    out[f"q_{name}_w"] = w.int_repr()
    out[f"q_{name}_wscale"] = (w.q_per_channel_scales() if w.qscheme() ==
                               torch.per_channel_affine else torch.tensor([w.q_scale()]))
    out[f"q_{name}_out"] = torch.tensor([m.scale, m.zero_point], dtype=torch.float64)
out["q_quant_out"] = torch.tensor([q.quant.scale.item(), q.quant.zero_point.item()],
                                  dtype=torch.float64)
torch.save(out, os.path.join(os.path.dirname(os.path.abspath(__file__)), "qat_ref.pt"))
print("wrote qat_ref.pt:", len(out), "entries")
