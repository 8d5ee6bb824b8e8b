"""Writes quant_elementwise_ref.json: PyTorch's (x86 engine) quantized mul / mul_relu (broadcast),
hardswish, hardsigmoid and avg_pool2d (channels_last inputs, as its quantized convolutions write;
floor and ceil mode, count_include_pad both ways, a divisor_override) on fixed random integers,
for tests/python/test_quant.py. Run with a PyTorch 2.x python:
    python tests/data/gen_quant_elementwise_ref.py"""
import json
import os

import torch

torch.manual_seed(1)
torch.backends.quantized.engine = "x86"
F = torch.nn.functional
out = {}
for dt, name, za, zb in ((torch.quint8, "quint8", 3, 130), (torch.qint8, "qint8", -2, 5)):
    lo, hi = (0, 255) if dt == torch.quint8 else (-128, 127)
    idt = torch.uint8 if dt == torch.quint8 else torch.int8
    ra = torch.randint(lo, hi + 1, (2, 16, 5, 5), dtype=idt)
    rb = torch.randint(lo, hi + 1, (2, 16, 1, 1), dtype=idt)
    a = torch._make_per_tensor_quantized_tensor(ra, 0.037, za)
    b = torch._make_per_tensor_quantized_tensor(rb, 0.011, zb)
    acl = a.contiguous(memory_format=torch.channels_last)
    hsg = F.hardsigmoid(acl)
    res = {
        "mul": torch.ops.quantized.mul(acl, b, 0.02, 7),
        "mul_relu": torch.ops.quantized.mul_relu(acl, b, 0.02, 7),
        "hardswish": torch.ops.quantized.hardswish(acl, 0.05, 10),
        "hardsigmoid": hsg,
        "avg_3_1_1": F.avg_pool2d(acl, 3, 1, 1),
        "avg_3_2_1_ceil_excl": F.avg_pool2d(acl, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        "avg_2_2_0_div3": F.avg_pool2d(acl, 2, 2, 0, divisor_override=3),
    }
    out[name] = {"a": ra.tolist(), "b": rb.tolist(), "a_scale": 0.037, "a_zp": za,
                 "b_scale": 0.011, "b_zp": zb, "hardsigmoid_qparams": [hsg.q_scale(),
                                                                     hsg.q_zero_point()],
                 **{k: v.int_repr().tolist() for k, v in res.items()}}
out["torch"] = torch.__version__
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quant_elementwise_ref.json")
with open(path, "w") as f:
    json.dump(out, f, separators=(",", ":"))
print("wrote", path)
