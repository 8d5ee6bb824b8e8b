"""Quantized tensors and dynamic quantization (include/tessera/quant.h, tessera.ao) against
PyTorch's results stored in tests/data/quant_ref.json (made by tests/data/gen_quant_ref.py with
torch 2.x's x86 engine): quantize_per_tensor / per_channel and dequantize bit for bit, and
quantize_dynamic's Linear within one quantum of fbgemm."""
import json
import math
import os
import struct

import pytest

import tessera

REF = json.load(open(os.path.join(os.path.dirname(__file__), "..", "data", "quant_ref.json")))


def f32(v):
    return tessera.tensor([float("nan") if a is None else a for a in v], dtype=tessera.float32)


def bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0]


def test_dtypes_and_names():
    assert str(tessera.qint8) == "tessera.qint8"
    assert tessera.quint8 is not tessera.uint8
    q = tessera.quantize_per_tensor(tessera.tensor([1.0, 2.0]), 0.5, 1, tessera.quint8)
    assert q.dtype == tessera.quint8 and q.is_quantized
    assert not tessera.tensor([1.0]).is_quantized
    assert q.int_repr().dtype == tessera.uint8
    assert q.q_scale() == 0.5 and q.q_zero_point() == 1
    assert q.qscheme() == "per_tensor_affine"


@pytest.mark.parametrize("case", range(len(REF["per_tensor"])))
def test_quantize_per_tensor_bits(case):
    c = REF["per_tensor"][case]
    x = f32(REF["x"])
    q = tessera.quantize_per_tensor(x, c["scale"], c["zero_point"], getattr(tessera, c["dtype"]))
    # inf and NaN (the last three): PyTorch's answer depends on whether the element falls in its
    # vector body or scalar tail, so only the finite ones are compared (Tessera saturates)
    fin = [i for i, v in enumerate(REF["x"]) if v is not None and math.isfinite(v)]
    got, want = q.int_repr().tolist(), c["int_repr"]
    assert [got[i] for i in fin] == [want[i] for i in fin]
    got, want = q.dequantize().tolist(), c["dequantize"]
    assert [bits(got[i]) for i in fin] == [bits(want[i]) for i in fin]
    lo, hi = {"qint8": (-128, 127), "quint8": (0, 255), "qint32": (-2**31, 2**31 - 1)}[c["dtype"]]
    assert q.int_repr().tolist()[-3:] == [hi, lo, lo if c["dtype"] == "qint32" else hi]


def test_quantize_per_channel_bits():
    c = REF["per_channel"]
    x = tessera.tensor(c["x"], dtype=tessera.float32)
    q = tessera.quantize_per_channel(x, tessera.tensor(c["scales"], dtype=tessera.float64),
                                     tessera.tensor(c["zero_points"]), c["axis"], tessera.quint8)
    assert q.int_repr().tolist() == c["int_repr"]
    assert q.dequantize().tolist() == c["dequantize"]  # float32 values: equal as doubles
    assert q.q_per_channel_axis() == 1
    assert q.q_per_channel_scales().tolist() == c["scales"]
    assert q.q_per_channel_zero_points().tolist() == c["zero_points"]
    assert q.qscheme() == "per_channel_affine"


def test_refusals_name_the_op():
    x = tessera.tensor([1.0, 2.0])
    q = tessera.quantize_per_tensor(x, 0.5, 0, tessera.qint8)
    with pytest.raises(tessera.TesseraError, match="add: quantized tensors are not supported"):
        q + q
    with pytest.raises(tessera.TesseraError, match="scale"):
        tessera.quantize_per_tensor(x, 0.0, 0, tessera.qint8)
    with pytest.raises(tessera.TesseraError, match="zero_point 300"):
        tessera.quantize_per_tensor(x, 1.0, 300, tessera.quint8)
    with pytest.raises(tessera.TesseraError, match="axis 3"):
        tessera.quantize_per_channel(x, tessera.tensor([1.0, 1.0]), tessera.tensor([0, 0]), 3,
                                     tessera.qint8)
    with pytest.raises(tessera.TesseraError, match="per-tensor"):
        tessera.quantize_per_channel(x, tessera.tensor([1.0, 1.0]), tessera.tensor([0, 0]), 0,
                                     tessera.qint8).q_scale()


def _model():
    d = REF["dynamic"]
    m = tessera.nn.Sequential(tessera.nn.Linear(24, 40), tessera.nn.ReLU(),
                              tessera.nn.Linear(40, 10))
    with tessera.no_grad():
        for i, L in zip((0, 2), d["layers"]):
            m[i].weight.copy_(tessera.tensor(L["weight"]))
            m[i].bias.copy_(tessera.tensor(L["bias"]))
    return m


def test_choose_qparams_as_fbgemm():
    d = REF["dynamic"]
    s, z = tessera._C._choose_qparams_per_tensor(tessera.tensor(d["x"]), True)
    assert (s, z) == tuple(d["act_qparams"])


def test_quantize_dynamic_linear_within_one_quantum():
    from tessera.ao.quantization import quantize_dynamic
    from tessera.ao.nn.quantized.dynamic import Linear as DLinear
    d = REF["dynamic"]
    qm = quantize_dynamic(_model(), {tessera.nn.Linear}, dtype=tessera.qint8)
    assert isinstance(qm[0], DLinear) and isinstance(qm[2], DLinear)
    for i, L in zip((0, 2), d["layers"]):
        w = qm[i].weight()
        assert (w.q_scale(), w.q_zero_point()) == (L["q_scale"], L["q_zero_point"])
        assert w.int_repr().tolist() == L["int_repr"]
    x = tessera.tensor(d["x"])
    # first layer: the same quantized activations and weights, so the same int32 sums; outputs
    # differ from fbgemm's only by float rounding (fbgemm multiplies in float32, Tessera in float64)
    h = qm[1](qm[0](x)).tolist()  # the reference is after the ReLU
    s, _ = tessera._C._choose_qparams_per_tensor(x, True)
    quantum = s * d["layers"][0]["q_scale"]
    worst = max(abs(a - b) for ra, rb in zip(h, d["h"]) for a, b in zip(ra, rb))
    assert worst <= 1e-5 * max(1.0, max(abs(v) for r in d["h"] for v in r)), worst
    assert worst < quantum
    # the whole model: the second layer quantizes the first's output, whose few-ulp differences
    # may move an activation across a rounding boundary: one quantum of the second layer's
    # input times its weights' largest column sum bounds it
    y = qm(x).tolist()
    s2, _ = tessera._C._choose_qparams_per_tensor(qm[1](qm[0](x)), True)
    w2 = d["layers"][1]
    bound = s2 * w2["q_scale"] * max(sum(abs(v) for v in row) for row in w2["int_repr"])
    worst = max(abs(a - b) for ra, rb in zip(y, d["y"]) for a, b in zip(ra, rb))
    assert worst <= bound, (worst, bound)


def test_views_and_mean_of_a_quantized_tensor():
    """the view ops give the same view of the integers, with the input's parameters (a contiguous
    copy); mean is PyTorch's reference path, exact here (a power-of-two scale): zp +
    round-half-even(sum(q - zp) / count) worked in integers"""
    g = tessera.Generator().manual_seed(3)
    x = tessera.randn(2, 6, 3, 3, generator=g) * 2
    q = tessera.quantize_per_tensor(x, 0.125, 7, tessera.quint8)
    r = q.int_repr()
    for f in (lambda t: t.transpose(1, 2), lambda t: t.view(2, 2, 3, 3, 3).transpose(1, 2),
              lambda t: t.chunk(2, dim=1)[1], lambda t: t[1, 2:5], lambda t: t.permute(0, 2, 3, 1),
              lambda t: t[:, :1].expand(2, 4, 3, 3), lambda t: t.unsqueeze(0).squeeze(0)):
        v = f(q)
        assert v.is_quantized and v.q_scale() == 0.125 and v.q_zero_point() == 7
        assert v.is_contiguous() and v.int_repr().tolist() == f(r).contiguous().tolist()
    m = q.mean([2, 3])
    assert m.is_quantized and list(m.shape) == [2, 6] and m.q_scale() == 0.125
    ints = r.tolist()
    for b in range(2):
        for c in range(6):
            s = sum(v - 7 for row in ints[b][c] for v in row)
            want = min(255, max(0, 7 + round(s / 9)))  # python's round: half to even
            assert m.int_repr()[b, c].item() == want
    pc = tessera.quantize_per_channel(x, tessera.rand(6) + 0.1, tessera.zeros(6, dtype=tessera.int64),
                                      1, tessera.qint8)
    with pytest.raises(tessera.DtypeError, match="transpose: views of quantized tensors take "
                                                 "qint8, quint8 or qint32 quantized per tensor"):
        pc.transpose(1, 2)
    assert pc.detach().q_per_channel_axis() == 1


ELEMENTWISE = os.path.join(os.path.dirname(__file__), "..", "data", "quant_elementwise_ref.json")


@pytest.mark.parametrize("dtype", ["quint8", "qint8"])
def test_mul_hardswish_hardsigmoid_avg_pool_are_pytorchs_bits(dtype):
    """PyTorch's x86 integers (tests/data/gen_quant_elementwise_ref.py) on fixed random inputs:
    mul and mul_relu broadcast [2, 16, 1, 1] over [2, 16, 5, 5] (QFunctional's), hardswish to
    given qparams, hardsigmoid to its fixed ones, avg_pool2d floor / ceil, with and without the
    padding counted and with a divisor_override: every integer equal"""
    with open(ELEMENTWISE) as f:
        r = json.load(f)[dtype]
    qdt, idt = ((tessera.quint8, tessera.uint8) if dtype == "quint8"
                else (tessera.qint8, tessera.int8))
    a = tessera._C._make_per_tensor_quantized_tensor(tessera.tensor(r["a"], dtype=idt),
                                                      r["a_scale"], r["a_zp"])
    b = tessera._C._make_per_tensor_quantized_tensor(tessera.tensor(r["b"], dtype=idt),
                                                      r["b_scale"], r["b_zp"])
    F = tessera.nn.functional
    qf = tessera.ao.nn.quantized.QFunctional()
    qf.scale, qf.zero_point = 0.02, 7
    hs = tessera.ao.nn.quantized.Hardswish(0.05, 10)
    got = {"mul": qf.mul(a, b), "mul_relu": qf.mul_relu(a, b), "hardswish": hs(a),
           "hardsigmoid": F.hardsigmoid(a), "avg_3_1_1": F.avg_pool2d(a, 3, 1, 1),
           "avg_3_2_1_ceil_excl": F.avg_pool2d(a, 3, 2, 1, ceil_mode=True,
                                               count_include_pad=False),
           "avg_2_2_0_div3": F.avg_pool2d(a, 2, 2, 0, divisor_override=3)}
    for k, v in got.items():
        assert v.dtype == qdt, k
        assert v.int_repr().tolist() == r[k], k
    h = got["hardsigmoid"]
    assert [h.q_scale(), h.q_zero_point()] == r["hardsigmoid_qparams"]
    assert got["mul"].q_scale() == 0.02 and got["avg_3_1_1"].q_zero_point() == r["a_zp"]
    own = F.hardswish(a)  # PyTorch's aten.hardswish on a quantized tensor: the input's qparams
    assert (own.q_scale(), own.q_zero_point()) == (a.q_scale(), a.q_zero_point())
    assert own.int_repr().tolist() == tessera.ao.nn.quantized.Hardswish(
        a.q_scale(), a.q_zero_point())(a).int_repr().tolist()
    with pytest.raises(TypeError, match="give both scale and zero_point, or neither"):
        tessera._C._quantized_hardswish(a, 0.1)
    with pytest.raises(RuntimeError, match="hardswish\\(inplace=True\\) of a quantized tensor"):
        F.hardswish(a, inplace=True)


class _QuantizedOps(tessera.nn.Module):
    """quantize, avg_pool2d (padding not counted), mean over two dims kept, a broadcast mul, a
    transpose and a mean over one dim, then dequantize: each a traced quantized op"""

    def forward(self, x):
        q = tessera.quantize_per_tensor(x, 0.05, 3, tessera.quint8)
        a = tessera.nn.functional.avg_pool2d(q, 3, 2, 1, count_include_pad=False)
        m = q.mean([2, 3], keepdim=True)
        p = tessera._C._quantized_mul(a, m, 0.01, 5, False)
        return p.transpose(2, 3).mean(1).dequantize() + q.mean().dequantize()


def test_quantized_ops_export_as_qdq(tmp_path):
    """written as QDQ and read back: the importer's float ops between DequantizeLinear and
    QuantizeLinear round once more than the integer kernels, so each output is within one
    quantum (0.01) of the eager model's per step it passed: the shape and the values check the
    traced dims, keepdim, window and broadcast"""
    g = tessera.Generator().manual_seed(5)
    x = tessera.rand(2, 3, 7, 6, generator=g) * 4
    m = _QuantizedOps()
    with tessera.no_grad():
        y = m(x)
    path = str(tmp_path / "qops.onnx")
    tessera.onnx.export(m, (x,), path)
    with tessera.no_grad():
        back = tessera.onnx.load(path)(x)
    assert list(back.shape) == list(y.shape) == [2, 3, 4]
    assert (back - y).abs().max().item() <= 3 * 0.01 + 1e-6


class _QuantizedHardswish(tessera.nn.Module):
    def forward(self, x):
        q = tessera.quantize_per_tensor(x, 0.05, 3, tessera.quint8)
        return tessera.nn.functional.hardswish(q).dequantize()


def test_quantized_hardswish_export_is_refused_by_name(tmp_path):
    """the QDQ exporter has no HardSwish (nor the float op): a clear refusal naming it, no file"""
    path = str(tmp_path / "hs.onnx")
    with pytest.raises(tessera.TesseraError, match="quantized hardswish: HardSwish is not written"):
        tessera.onnx.export(_QuantizedHardswish(), (tessera.rand(1, 2, 3, 3),), path)
    assert not os.path.exists(path)
