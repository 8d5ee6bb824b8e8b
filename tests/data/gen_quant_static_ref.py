"""Makes tests/data/quant_static_ref.json and quant_static_model.pt / quant_static_float.pt:
PyTorch's x86 quantized results for tests/python/test_quant_static.py (the quantized conv, add,
cat and pooling ops, the observers' qparams, and eager-mode static PTQ of a small model whose
converted state dict Tessera loads).

Run with PyTorch (x86 engine): /opt/torch2/bin/torch-python tests/data/gen_quant_static_ref.py
"""
import json
import os
import warnings

import torch
import torch.ao.nn.intrinsic.quantized as nniq
import torch.ao.nn.quantized as nnq
import torch.ao.quantization as tq
from torch import nn

warnings.filterwarnings("ignore")
torch.backends.quantized.engine = "x86"
torch.manual_seed(0)
HERE = os.path.dirname(os.path.abspath(__file__))
out = {"torch": torch.__version__, "engine": torch.backends.quantized.engine}


def qt(q):
    """a per-tensor quantized tensor as JSON"""
    return {"int_repr": q.int_repr().tolist(), "scale": q.q_scale(), "zero_point": q.q_zero_point(),
            "dtype": str(q.dtype).replace("torch.", "")}


# ---- quantized conv2d: (C, CO, H, W, k, stride, padding, dilation, groups, relu)
convs = []
for (C, CO, H, W, k, st, pd, dl, g, relu) in [
        (3, 4, 7, 6, 3, 1, 1, 1, 1, False), (4, 6, 9, 8, 3, 2, 1, 1, 2, True),
        (6, 6, 7, 7, 3, 1, 1, 1, 6, False), (8, 8, 6, 5, 3, 2, 2, 2, 8, True),
        (4, 8, 5, 5, 1, 1, 0, 1, 1, False), (2, 4, 6, 6, 2, 1, 0, 1, 2, True)]:
    x = torch.quantize_per_tensor(torch.randn(2, C, H, W) * 2, 0.041, 60, torch.quint8)
    wf = torch.randn(CO, C // g, k, k) * 0.3
    ws = wf.abs().amax(dim=(1, 2, 3)).double() / 127.5
    wq = torch.quantize_per_channel(wf, ws, torch.zeros(CO, dtype=torch.long), 0, torch.qint8)
    b = torch.randn(CO) * 0.5
    cls = nniq.ConvReLU2d if relu else nnq.Conv2d
    m = cls(C, CO, k, stride=st, padding=pd, dilation=dl, groups=g)
    m.set_weight_bias(wq, b)
    m.scale, m.zero_point = 0.07, 50
    y = m(x)
    convs.append({"x": qt(x), "w_int": wq.int_repr().tolist(),
                  "w_scales": wq.q_per_channel_scales().tolist(), "bias": b.tolist(),
                  "stride": st, "padding": pd, "dilation": dl, "groups": g, "relu": relu,
                  "out_scale": 0.07, "out_zero_point": 50, "y": y.int_repr().tolist()})
out["conv"] = convs

# ---- add / add_relu / cat / max_pool2d / adaptive_avg_pool2d
a = torch.quantize_per_tensor(torch.randn(2, 3, 5, 7) * 2, 0.03, 120, torch.quint8)
b = torch.quantize_per_tensor(torch.randn(2, 3, 5, 7), 0.017, 7, torch.quint8)
out["add"] = {"a": qt(a), "b": qt(b), "scale": 0.045, "zero_point": 60,
              "y": torch.ops.quantized.add(a, b, 0.045, 60).int_repr().tolist(),
              "y_relu": torch.ops.quantized.add_relu(a, b, 0.045, 60).int_repr().tolist()}
out["cat"] = {"y": torch.ops.quantized.cat([a, b], 1, 0.05, 30).int_repr().tolist(),
              "dim": 1, "scale": 0.05, "zero_point": 30}
pools = []
for (k, st, pd, dl, ceil) in [(3, 2, 1, 1, False), (3, 2, 1, 1, True), (2, 2, 0, 1, False),
                              (2, 1, 1, 2, True)]:
    y = torch.nn.functional.max_pool2d(a, k, st, pd, dl, ceil_mode=ceil)
    pools.append({"k": k, "stride": st, "padding": pd, "dilation": dl, "ceil_mode": ceil,
                  "y": qt(y)})
out["max_pool2d"] = pools
out["adaptive_avg_pool2d"] = [
    {"size": s, "y": qt(torch.nn.functional.adaptive_avg_pool2d(a, s))}
    for s in [(1, 1), (2, 3), (3, 4), (5, 7), (4, 5)]]

# ---- observers' calculate_qparams
obs = []
ranges = [(-1.0, 3.0), (-2.5, 0.7), (0.2, 5.0), (-7.3, -0.1), (0.0, 0.0), (-1.25, 126.25),
          (-1e-6, 2e-6), (-123.456, 0.001)]
for (lo, hi) in ranges:
    x = torch.tensor([lo, hi, (lo + hi) / 2])
    for dtype in (torch.quint8, torch.qint8):
        for qs in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            for rr in (False, True):
                if rr and dtype == torch.quint8 and qs == torch.per_tensor_symmetric:
                    continue  # PyTorch refuses it
                o = tq.MinMaxObserver(dtype=dtype, qscheme=qs, reduce_range=rr)
                o(x)
                s, z = o.calculate_qparams()
                obs.append({"x": x.tolist(), "dtype": str(dtype)[6:], "qscheme": str(qs)[6:],
                            "reduce_range": rr, "scale": s.tolist(), "zero_point": z.tolist()})
o = tq.MinMaxObserver(quant_min=0, quant_max=15, dtype=torch.quint8,
                      qscheme=torch.per_tensor_symmetric)
o(torch.tensor([-1.0, 2.0]))
s, z = o.calculate_qparams()
obs.append({"x": [-1.0, 2.0], "dtype": "quint8", "qscheme": "per_tensor_symmetric",
            "reduce_range": False, "quant_min": 0, "quant_max": 15, "scale": s.tolist(),
            "zero_point": z.tolist()})
out["observers"] = obs
# moving average over three batches, per channel over a weight
xs = [torch.randn(4, 5) * (i + 1) for i in range(3)]
mo = tq.MovingAverageMinMaxObserver(averaging_constant=0.01)
for x in xs:
    mo(x)
s, z = mo.calculate_qparams()
out["moving_average"] = {"xs": [x.tolist() for x in xs], "min": mo.min_val.item(),
                         "max": mo.max_val.item(), "scale": s.tolist(), "zero_point": z.tolist()}
wt = torch.randn(6, 3, 2, 2)
pc = tq.PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
pc(wt)
s, z = pc.calculate_qparams()
pa = tq.PerChannelMinMaxObserver(ch_axis=1, dtype=torch.quint8, qscheme=torch.per_channel_affine)
pa(wt)
s2, z2 = pa.calculate_qparams()
out["per_channel"] = {"w": wt.tolist(), "sym": {"scale": s.tolist(), "zero_point": z.tolist()},
                      "affine_axis1": {"scale": s2.tolist(), "zero_point": z2.tolist()}}


# ---- eager-mode static PTQ of a small model
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=8)  # depthwise
        self.skip = nn.quantized.FloatFunctional()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4, 5)  # over the last dim
        self.fc_relu = nn.ReLU()
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.quant(x)
        h = self.relu1(self.bn1(self.conv1(x)))
        x = self.skip.add(self.conv2(h), h)
        x = self.pool(x)
        x = self.fc_relu(self.fc(x))
        return self.dequant(x)


net = Net()
with torch.no_grad():  # BatchNorm statistics other than the defaults
    net.bn1.running_mean.copy_(torch.randn(8) * 0.1)
    net.bn1.running_var.copy_(torch.rand(8) + 0.5)
    net.bn1.weight.copy_(torch.rand(8) + 0.5)
    net.bn1.bias.copy_(torch.randn(8) * 0.1)
net.eval()
torch.save(net.state_dict(), os.path.join(HERE, "quant_static_float.pt"))
calib = [torch.randn(2, 3, 8, 8) for _ in range(3)]
xin = torch.randn(2, 3, 8, 8)
runs = {}
for name, qconfig in [("x86", tq.get_default_qconfig("x86")),
                      ("minmax", tq.QConfig(
                          activation=tq.MinMaxObserver.with_args(reduce_range=True),
                          weight=tq.default_per_channel_weight_observer))]:
    m = Net()
    m.load_state_dict(net.state_dict())
    m.eval()
    m.qconfig = qconfig
    tq.fuse_modules(m, [["conv1", "bn1", "relu1"], ["fc", "fc_relu"]], inplace=True)
    tq.prepare(m, inplace=True)
    with torch.no_grad():
        for c in calib:
            m(c)
    tq.convert(m, inplace=True)
    with torch.no_grad():
        y = m(xin)
        q = m.quant(xin)
        h = m.conv1(q)
        a2 = m.skip.add(m.conv2(h), h)
        yq = m.fc(m.pool(a2))
    runs[name] = {"y": y.tolist(), "y_int": yq.int_repr().tolist(), "y_scale": yq.q_scale(),
                  "y_zero_point": yq.q_zero_point(), "h_int": h.int_repr().tolist(),
                  "add_int": a2.int_repr().tolist(),
                  "qparams": {k: [float(v.scale), int(v.zero_point)] for k, v in [
                      ("quant", m.quant), ("conv1", m.conv1), ("conv2", m.conv2),
                      ("skip", m.skip), ("fc", m.fc)]}}
    torch.save(m.state_dict(), os.path.join(HERE, "quant_static_%s.pt" % name))
    if name == "minmax":
        runs[name]["conv1_w_scales"] = m.conv1.weight().q_per_channel_scales().tolist()
        runs[name]["conv1_w_int"] = m.conv1.weight().int_repr().tolist()
out["model"] = {"calib": [c.tolist() for c in calib], "x": xin.tolist(), "runs": runs,
                "keys": list(m.state_dict().keys())}
with open(os.path.join(HERE, "quant_static_ref.json"), "w") as f:
    json.dump(out, f)
print("wrote", os.path.join(HERE, "quant_static_ref.json"))
print(list(m.state_dict().keys()))
