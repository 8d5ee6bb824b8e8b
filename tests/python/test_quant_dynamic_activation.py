"""torchao's int8 dynamic-activation configs (int8_dynamic_activation_int8_weight /
int8_dynamic_activation_int4_weight) through quantize_, against a float64 reference written out
here from torchao's rules: activations per token, symmetric (scale = max|x| / 127, at least 1e-5,
round half to even of x * (1 / scale) in float32, clamped to [-127, 127]); the layer's sums exact
integers; each output within (groups + 12) 2^-24 of the magnitude of its terms (the C test derives
the bound: tests/test_qdynamic_act.c)."""
import math
import struct

import pytest

import tessera
from tessera import nn
from tessera.ao.nn.quantized.dynamic_activation import Int8DynamicActivationLinear
from tessera.ao.quantization import (int8_dynamic_activation_int4_weight,
                                     int8_dynamic_activation_int8_weight, quantize_)

U = 2.0 ** -24


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def act_quant(row):
    amax = max(abs(v) for v in row)
    s = max(f32(amax / 127.0), f32(1e-5))
    inv = f32(1.0 / s)
    return s, [max(-127, min(127, round(f32(v * inv)))) for v in row]  # round: half to even


def reference(x, layer):
    wq = layer.weight
    q = wq.int_repr().tolist()
    scales, zps = wq.q_per_channel_scales().tolist(), wq.q_per_channel_zero_points().tolist()
    group = wq._q_group_size() if wq.dtype == tessera.quint4x2 else len(q[0])
    b = layer.bias.tolist() if layer.bias is not None else [0.0] * len(q)
    out = []
    for row in x.tolist():
        sx, xq = act_quant(row)
        yr = []
        for n, qn in enumerate(q):
            r = mag = 0.0
            for g in range(len(qn) // group):
                s = scales[n][g] if group != len(qn) else scales[n]
                z = zps[n][g] if group != len(qn) else zps[n]
                ks = range(g * group, (g + 1) * group)
                r += s * sum(xq[k] * (qn[k] - z) for k in ks)
                mag += s * sum(abs(xq[k]) * (abs(qn[k]) + abs(z)) for k in ks)
            yr.append((r * sx + b[n], mag * sx + abs(b[n]), len(qn) // group))
        out.append(yr)
    return out


def mlp():
    tessera.manual_seed(3)
    return nn.Sequential(nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 10, bias=False))


@pytest.mark.parametrize("config", [int8_dynamic_activation_int8_weight(),
                                    int8_dynamic_activation_int4_weight(group_size=32),
                                    int8_dynamic_activation_int4_weight(group_size=64)])
def test_layer_against_reference(config):
    m = nn.Sequential(nn.Linear(128, 24))
    quantize_(m, config)
    assert isinstance(m[0], Int8DynamicActivationLinear)
    x = tessera.randn(3, 128)
    with tessera.no_grad():
        y = m(x).tolist()
    for yr, rr in zip(y, reference(x, m[0])):
        for v, (r, mag, groups) in zip(yr, rr):
            assert abs(v - r) <= (groups + 12) * U * mag + 1e-30


def test_int4_weights_symmetric():
    m = nn.Sequential(nn.Linear(64, 8))
    quantize_(m, int8_dynamic_activation_int4_weight(group_size=32))
    w = m[0].weight
    assert w.dtype == tessera.quint4x2 and w._q_group_size() == 32
    assert set(v for r in w.q_per_channel_zero_points().tolist() for v in r) == {8}


def test_model_close_to_float():
    m = mlp()
    x = tessera.randn(5, 64)
    with tessera.no_grad():
        y0 = m(x)
        quantize_(m, int8_dynamic_activation_int8_weight())
        y = m(x)
    assert float((y - y0).abs().max()) <= 0.02 * float(y0.abs().max())


def test_refusals():
    with pytest.raises(ValueError, match="group_size"):
        int8_dynamic_activation_int4_weight(group_size=48)
    with pytest.raises(NotImplementedError, match="only symmetric"):
        int8_dynamic_activation_int4_weight(act_mapping_type="asymmetric")
    m = nn.Sequential(nn.Linear(64, 8))
    quantize_(m, int8_dynamic_activation_int8_weight())
    with pytest.raises(RuntimeError, match="input must be float32"):
        m(tessera.randn(2, 64).double())
    with pytest.raises(RuntimeError, match="input's last dim"):
        m(tessera.randn(2, 63))
    x = tessera.randn(2, 64)
    x.requires_grad_(True)
    with pytest.raises(RuntimeError, match="no gradient"):
        m(x)
    assert not math.isnan(float(m(tessera.randn(2, 64)).sum()))
