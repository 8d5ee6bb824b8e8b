"""tessera.ao.nn.quantized's Linear / Conv2d (and their ReLU fusions) give PyTorch's x86 integers
bit for bit: tests/data/quant_x86_ref.json holds PyTorch 2.x's outputs (gen_quant_x86_ref.py) on
cases chosen because a float64 requantization with the bias rounded to int32 (Tessera's arithmetic
before src/ops/qrequant.c) gets some of their integers wrong. Dense, grouped and depthwise convs
and the linear layer, weights per tensor and per channel, with and without bias, on cpu and
sim:0. The C ops' own definition is tests/test_quant_x86.c."""
import json
import os

import pytest

import tessera
import tessera.ao.nn.intrinsic.quantized as nniq
import tessera.ao.nn.quantized as nnq

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
REF = json.load(open(os.path.join(DATA, "quant_x86_ref.json")))


def module(c, device="cpu"):
    """the case's module and input, their tensors made on device"""
    x = tessera._make_per_tensor_quantized_tensor(
        tessera.tensor(c["x"]["int_repr"], dtype=tessera.uint8, device=device), c["x"]["scale"],
        c["x"]["zero_point"])
    wi = tessera.tensor(c["w_int"], dtype=tessera.int8, device=device)
    co = len(c["w_scales"])
    if c["per_tensor"]:
        w = tessera._make_per_tensor_quantized_tensor(wi, c["w_scales"][0], 0)
    else:
        w = tessera._make_per_channel_quantized_tensor(
            wi, tessera.tensor(c["w_scales"], dtype=tessera.float64),
            tessera.zeros(co, dtype=tessera.int64), 0)
    if c["kind"] == "linear":
        m = (nniq.LinearReLU if c["relu"] else nnq.Linear)(wi.shape[1], co)
    else:
        cls = nniq.ConvReLU2d if c["relu"] else nnq.Conv2d
        m = cls(wi.shape[1] * c["groups"], co, 3, stride=c["stride"], padding=c["padding"],
                groups=c["groups"])
    m.set_weight_bias(w, None if c["bias"] is None else tessera.tensor(c["bias"], device=device))
    m.scale, m.zero_point = c["out_scale"], c["out_zero_point"]
    return m, x


def test_reference_covers_every_kind():
    kinds = {(c["kind"], c["per_tensor"], c["relu"], c["bias"] is not None) for c in REF["cases"]}
    for kind in ("linear", "conv", "grouped", "depthwise"):
        for pt in (False, True):
            for relu in (False, True):
                assert (kind, pt, relu, True) in kinds
    assert any(c["bias"] is None for c in REF["cases"])


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
@pytest.mark.parametrize("case", range(len(REF["cases"])))
def test_pytorchs_x86_integers(case, device):
    c = REF["cases"][case]
    m, x = module(c, device)
    y = m(x)
    assert y.dtype == tessera.quint8 and y.q_scale() == c["out_scale"]
    assert y.q_zero_point() == c["out_zero_point"]
    assert str(y.device) == device
    assert y.int_repr().cpu().tolist() == c["y"]


def test_state_dict_keeps_float_bias():
    """the module holds PyTorch's float bias (its state dict's), not an int32 one"""
    c = next(c for c in REF["cases"] if c["kind"] == "linear" and c["bias"] is not None)
    m, _ = module(c)
    b = m.state_dict()["_packed_params._packed_params"][1]
    assert b.dtype == tessera.float32 and b.tolist() == tessera.tensor(c["bias"]).tolist()
