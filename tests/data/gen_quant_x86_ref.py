"""Makes tests/data/quant_x86_ref.json: PyTorch's x86 quantized Linear / Conv2d (dense, grouped,
depthwise; weights per tensor and per channel; with and without bias; ReLU fused or not) on cases
where the requantization's arithmetic decides integers: each case stored has outputs on which a
float64 requantization with an int32 bias (Tessera's before PyTorch's x86 one, src/ops/qrequant.c)
gives another integer than PyTorch, so a test of these cases fails unless the float32 arithmetic
is PyTorch's step for step (tests/python/test_quant_x86.py).

Each case is also checked here against that arithmetic written in numpy float32; a case where
PyTorch itself differs from it is not stored and is counted (PyTorch's x86 engine runs convs
through oneDNN on AVX512-VNNI hosts, which rounds a few near-tie outputs a million otherwise).

Run with PyTorch (x86 engine): /opt/torch2/bin/torch-python tests/data/gen_quant_x86_ref.py
"""
import json
import os
import warnings

import numpy as np
import torch
import torch.ao.nn.intrinsic.quantized as nniq
import torch.ao.nn.quantized as nnq

warnings.filterwarnings("ignore")
torch.backends.quantized.engine = "x86"
torch.manual_seed(0)
rng = np.random.default_rng(0)
HERE = os.path.dirname(os.path.abspath(__file__))
f32 = np.float32


def x86_formula(acc, bias, xs, ws, osc, ozp, per_tensor, relu):
    """fbgemm's requantization in float32 (acc [.., CO, ..] on axis 1)"""
    atws = (f32(xs) * ws.astype(f32)).astype(f32)
    mult = (atws / f32(osc)).astype(f32)
    shp = (1, -1) + (1,) * (acc.ndim - 2)
    if bias is None:
        fb = np.zeros_like(atws)
    elif per_tensor:
        fb = (bias.astype(f32) * f32(1.0 / np.float64(atws[0]))).astype(f32)
    else:
        fb = (bias.astype(f32) / atws).astype(f32)
    v = ((acc.astype(f32) + fb.reshape(shp)).astype(f32) * mult.reshape(shp)).astype(f32)
    return np.clip(np.rint(v).astype(np.int64) + ozp, ozp if relu else 0, 255)


def f64_int32_bias(acc, bias, xs, ws, osc, ozp, relu):
    """the float64 requantization with bias rounded to int32"""
    shp = (1, -1) + (1,) * (acc.ndim - 2)
    bi = np.zeros(len(ws)) if bias is None else np.rint(bias.astype(np.float64) / (xs * ws))
    v = np.rint((acc + bi.reshape(shp)) * (xs * ws / osc).reshape(shp)).astype(np.int64)
    return np.clip(v + ozp, ozp if relu else 0, 255)


def one(kind, per_tensor, relu, has_bias):
    if kind == "linear":
        K, CO = 48, 24
        xf, wf = torch.randn(6, K) * 2, torch.randn(CO, K) * 0.08
        geo = {}
    else:
        C, CO, g = (8, 12, 1) if kind == "conv" else (8, 16, 4) if kind == "grouped" else (12, 12, 12)
        xf, wf = torch.randn(1, C, 7, 6) * 2, torch.randn(CO, C // g, 3, 3) * 0.15
        geo = {"stride": 1, "padding": 1, "groups": g}
    b = torch.randn(CO) * 0.7 if has_bias else None
    xs, xz = float(rng.uniform(0.01, 0.06)), int(rng.integers(90, 160))
    x = torch.quantize_per_tensor(xf, xs, xz, torch.quint8)
    if per_tensor:
        s = float(wf.abs().max() / 127)
        w = torch.quantize_per_tensor(wf, s, 0, torch.qint8)
        ws = np.full(CO, s)
    else:
        wsd = (wf.reshape(CO, -1).abs().amax(1) / 127).double()
        w = torch.quantize_per_channel(wf, wsd, torch.zeros(CO, dtype=torch.long), 0, torch.qint8)
        ws = wsd.numpy()
    osc, ozp = float(rng.uniform(0.01, 0.06)), int(rng.integers(40, 100))
    if kind == "linear":
        m = (nniq.LinearReLU if relu else nnq.Linear)(K, CO)
    else:
        m = (nniq.ConvReLU2d if relu else nnq.Conv2d)(xf.shape[1], CO, 3, **geo)
    m.set_weight_bias(w, b)
    m.scale, m.zero_point = osc, ozp
    y = m(x).int_repr().numpy().astype(np.int64)
    xi, wi = x.int_repr().double() - xz, w.int_repr().double()
    acc = (xi @ wi.T if kind == "linear" else torch.nn.functional.conv2d(
        xi, wi, padding=1, groups=geo["groups"])).numpy().astype(np.int64)
    bn = None if b is None else b.numpy()
    formula = x86_formula(acc, bn, xs, ws, osc, ozp, per_tensor, relu)
    old = f64_int32_bias(acc, bn, xs, ws, osc, ozp, relu)
    case = {"kind": kind, "per_tensor": per_tensor, "relu": relu,
            "x": {"int_repr": x.int_repr().tolist(), "scale": xs, "zero_point": xz},
            "w_int": w.int_repr().tolist(), "w_scales": ws.tolist(),
            "bias": None if b is None else b.tolist(), "out_scale": osc, "out_zero_point": ozp,
            "y": y.tolist(), **geo}
    return case, int((y != formula).sum()), int((y != old).sum())


cases, dropped = [], {}
for kind in ("linear", "conv", "grouped", "depthwise"):
    for per_tensor in (False, True):
        for relu in (False, True):
            for has_bias in (True, False):
                for _ in range(400 if has_bias else 1500):  # until a case that the float64 arithmetic gets wrong
                    case, bad, old_bad = one(kind, per_tensor, relu, has_bias)
                    if bad:
                        dropped[kind] = dropped.get(kind, 0) + 1
                    elif old_bad:
                        cases.append(case)
                        break
                else:
                    print("no discriminating case:", kind, per_tensor, relu, has_bias)
out = {"torch": torch.__version__, "engine": torch.backends.quantized.engine, "cases": cases,
       "dropped_where_pytorch_is_not_the_formula": dropped}
with open(os.path.join(HERE, "quant_x86_ref.json"), "w") as f:
    json.dump(out, f, separators=(",", ":"))
print("wrote", len(cases), "cases; dropped", dropped)
