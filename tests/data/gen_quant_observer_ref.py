"""Makes tests/data/quant_observer_ref.json and quant_observer_hist_state.pt: PyTorch's observers (HistogramObserver,
MovingAverageMinMaxObserver, PerChannelMinMaxObserver) over input sequences, and the x86-qconfig
PTQ of gen_quant_static_ref.py's model (the tensors each HistogramObserver saw, its range and
qparams), for tests/python/test_quant_observer.py. Float32 arrays are stored as base64 of their
little-endian bytes (exact); the final histogram as base64 of its zlib-compressed bytes.

Run with PyTorch: /opt/torch2/bin/torch-python tests/data/gen_quant_observer_ref.py
"""
import base64
import json
import os
import warnings
import zlib

import torch
import torch.ao.quantization as tq

warnings.filterwarnings("ignore")
torch.backends.quantized.engine = "x86"
torch.manual_seed(0)
HERE = os.path.dirname(os.path.abspath(__file__))


def enc(t):
    return base64.b64encode(t.detach().float().contiguous().numpy().tobytes()).decode()


def hist(h):
    """base64 of the zlib-compressed little-endian float32 bytes"""
    return base64.b64encode(zlib.compress(h.float().contiguous().numpy().tobytes(), 9)).decode()


def seq(*parts):
    return [p.float() for p in parts]


R = torch.randn
sequences = {
    "growing": seq(R(64), R(100) * 2 + 0.5, R(80) * 5 - 1, R(50) * 0.1),
    "same_range": seq(torch.tensor([-1.0, 2.0, 0.5, 0.25]), torch.tensor([-1.0, 2.0, 1.5]),
                      torch.tensor([0.0, 1.0, -0.5, 2.0, -1.0])),
    "shrinking_inside": seq(R(200) * 3, R(100) * 0.5, R(30)),
    "constant": seq(torch.full((10,), 0.75), torch.full((5,), 0.75), torch.full((4,), -0.25)),
    "constant_zero": seq(torch.zeros(7), torch.zeros(3)),
    "negative_only": seq(-R(90).abs() - 0.1, -R(40).abs() * 3 - 0.05),
    "single_value": seq(torch.tensor([1.5])),
    "single_then_more": seq(torch.tensor([1.5]), torch.tensor([-2.0, 4.0, 0.1])),
    "with_inf": seq(torch.tensor([1.0, float("inf"), -3.0, 2.0]),
                    torch.tensor([float("-inf"), 0.5, 5.0]),
                    torch.tensor([float("inf"), float("-inf")])),
    "wide": seq(R(300) * 1e3, R(300) * 1e-3, R(100) * 1e4 + 5e3),
    "relu_like": seq(R(2, 8, 8).clamp(min=0), R(2, 8, 8).clamp(min=0) * 1.3,
                     R(2, 8, 8).clamp(min=0) * 0.7),
}
for i in range(12):
    g = torch.Generator().manual_seed(100 + i)
    sequences["random%d" % i] = [
        torch.randn(int(torch.randint(1, 400, (1,), generator=g)), generator=g) *
        float(torch.rand(1, generator=g) * 4) + float(torch.randn(1, generator=g))
        for _ in range(int(torch.randint(1, 6, (1,), generator=g)))]

configs = [
    {"reduce_range": True},
    {"reduce_range": False},
    {"reduce_range": False, "qscheme": "per_tensor_symmetric", "dtype": "qint8"},
    {"bins": 256, "reduce_range": True},
    {"bins": 100, "dtype": "qint8"},
]


def make(cfg):
    kw = dict(cfg)
    if "qscheme" in kw:
        kw["qscheme"] = getattr(torch, kw["qscheme"])
    if "dtype" in kw:
        kw["dtype"] = getattr(torch, kw["dtype"])
    return tq.HistogramObserver(**kw)


hist_cases = []
for name, xs in sequences.items():
    for ci, cfg in enumerate(configs):
        if ci >= 3 and not name.startswith("random") and name not in ("growing", "constant"):
            continue
        o = make(cfg)
        steps = []
        for x in xs:
            o(x)
            steps.append([o.min_val.item(), o.max_val.item()])
        lo, hi = o._non_linear_param_search()
        s, z = o.calculate_qparams()
        hist_cases.append({"name": name, "config": cfg, "minmax": steps,
                           "histogram": hist(o.histogram), "search": [lo.item(), hi.item()], "scale": s.tolist(),
                           "zero_point": z.tolist()})

# NaN: PyTorch's histc refuses the range
nan_msg = None
try:
    tq.HistogramObserver()(torch.tensor([1.0, float("nan")]))
except RuntimeError as e:
    nan_msg = str(e)
unobserved = [t.tolist() for t in tq.HistogramObserver().calculate_qparams()]

# MovingAverage / PerChannel (bit for bit)
mov = []
for c, xs in [(0.01, [R(40) * (i + 1) for i in range(4)]), (0.3, [R(7) - 2, R(9) + 3, R(3) * 10]),
              (0.5, [torch.tensor([float("nan"), 1.0]), R(5)]),
              (0.1, [R(30) * (1 + i % 3) - 0.1 * i for i in range(12)]),
              # values where float32 steps and a float64 formula round apart (min and max)
              (0.1, [torch.tensor([0.14404356479644775, 3.0]),
                     torch.tensor([7.27136754989624, 13.929352760314941])])]:
    o = tq.MovingAverageMinMaxObserver(averaging_constant=c)
    mins = []
    for x in xs:
        o(x)
        mins.append([o.min_val.item(), o.max_val.item()])
    mov.append({"c": c, "xs": [enc(x) for x in xs], "shapes": [list(x.shape) for x in xs],
                "minmax": mins})
per = []
for axis, shapes in [(0, [(6, 3, 2, 2), (6, 3, 2, 2)]), (1, [(2, 5, 4), (3, 5, 1)]),
                     (-1, [(4, 3), (2, 3)])]:
    o = tq.PerChannelMinMaxObserver(ch_axis=axis, dtype=torch.qint8,
                                    qscheme=torch.per_channel_symmetric)
    xs = [R(*s) * (i + 1) for i, s in enumerate(shapes)]
    steps = []
    for x in xs:
        o(x)
        steps.append([o.min_val.tolist(), o.max_val.tolist()])
    s, z = o.calculate_qparams()
    per.append({"axis": axis, "xs": [enc(x) for x in xs], "shapes": [list(x.shape) for x in xs],
                "steps": steps, "scale": s.tolist(), "zero_point": z.tolist()})

# the x86 PTQ of gen_quant_static_ref.py's model: what each activation observer saw
REF = json.load(open(os.path.join(HERE, "quant_static_ref.json")))
src = open(os.path.join(HERE, "gen_quant_static_ref.py")).read()
ns = {"nn": torch.nn, "tq": tq, "torch": torch}
exec("class Net" + src.split("class Net")[1].split("\nnet = Net()")[0], ns)
m = ns["Net"]()
m.load_state_dict(torch.load(os.path.join(HERE, "quant_static_float.pt")))
m.eval()
m.qconfig = tq.get_default_qconfig("x86")
tq.fuse_modules(m, [["conv1", "bn1", "relu1"], ["fc", "fc_relu"]], inplace=True)
tq.prepare(m, inplace=True)
seen = {}
obs = {"quant": m.quant.activation_post_process, "conv1": m.conv1.activation_post_process,
       "conv2": m.conv2.activation_post_process, "skip": m.skip.activation_post_process,
       "fc": m.fc.activation_post_process}
for k, o in obs.items():
    o.register_forward_pre_hook(lambda mod, inp, k=k: seen.setdefault(k, []).append(inp[0]))
with torch.no_grad():
    for c in REF["model"]["calib"]:
        m(torch.tensor(c))
ptq = {}
for k, o in obs.items():
    lo, hi = o._non_linear_param_search()
    s, z = o.calculate_qparams()
    ptq[k] = {"xs": [enc(x) for x in seen[k]], "shapes": [list(x.shape) for x in seen[k]],
              "min": o.min_val.item(), "max": o.max_val.item(), "histogram": hist(o.histogram),
              "search": [lo.item(), hi.item()], "scale": s.tolist(), "zero_point": z.tolist()}
    assert [float(s), int(z)] == REF["model"]["runs"]["x86"]["qparams"][k], k
sd = {k: list(v.shape) for k, v in m.state_dict().items() if "activation_post_process" in k}
# one calibrated observer's state dict as PyTorch saves it (Tessera loads it: same qparams)
torch.save(m.conv1.activation_post_process.state_dict(),
           os.path.join(HERE, "quant_observer_hist_state.pt"))

seqs = {name: {"xs": [enc(x) for x in xs], "shapes": [list(x.shape) for x in xs]}
        for name, xs in sequences.items()}
out = {"torch": torch.__version__, "threads": torch.get_num_threads(), "sequences": seqs,
       "histogram": hist_cases,
       "nan_error": nan_msg, "unobserved": unobserved, "moving_average": mov, "per_channel": per,
       "ptq_x86": ptq, "observer_state_keys": sd}
with open(os.path.join(HERE, "quant_observer_ref.json"), "w") as f:
    json.dump(out, f)
print("wrote quant_observer_ref.json:", len(hist_cases), "histogram cases")
