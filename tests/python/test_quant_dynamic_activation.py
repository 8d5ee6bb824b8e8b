"""torchao's int8 dynamic-activation configs (int8_dynamic_activation_int8_weight /
int8_dynamic_activation_int4_weight) through quantize_, against references written out here from
torchao's rules: activations per token, symmetric (scale = max|x| / 127, at least 1e-5, round half
to even of x * (1 / scale) in float32, clamped to [-127, 127]); the layer's sums exact integers.
Two references: the float32 contract of include/tessera/quant.h evaluated exactly (rationals, each
step rounded to float32 once: every kernel must give these bits), and float64 (each output within
(units + 8) 2^-24 of the magnitude of its terms, units = ceil(K / 128); the C test derives the
bound: tests/test_qdynamic_act.c). The 8da4w weights: float16 scales (decision 0051)."""
import math
import struct
from fractions import Fraction

import pytest

import tessera
from tessera import nn
from tessera.ao.nn.quantized.dynamic_activation import Int8DynamicActivationLinear
from tessera.ao.quantization import (int8_dynamic_activation_int4_weight,
                                     int8_dynamic_activation_int8_weight, quantize_)

U = 2.0 ** -24


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def f16(v):
    return struct.unpack("e", struct.pack("e", v))[0]


def round32(fr):
    """a rational rounded to the nearest float32, ties to even (normal range)"""
    if fr == 0:
        return 0.0
    a = abs(fr)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    m = a / Fraction(2) ** (e - 23)  # in [2^23, 2^24)
    n, r = divmod(m.numerator, m.denominator)
    if 2 * r > m.denominator or (2 * r == m.denominator and n % 2):
        n += 1
    v = float(n) * 2.0 ** (e - 23)
    return v if fr > 0 else -v


def fma32(a, b, c):
    return round32(Fraction(a) * Fraction(b) + Fraction(c))


def add32(a, b):
    return round32(Fraction(a) + Fraction(b))


def mul32(a, b):
    return round32(Fraction(a) * Fraction(b))


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


def contract(x, layer):
    """the float32 bits every kernel gives (include/tessera/quant.h): int8 ((float)acc * sx) *
    scale + bias; int4 16 lanes of 8 elements a 128, fma chains over the 128s, a tree of the
    lanes, * sx, + bias"""
    wq = layer.weight
    q = wq.int_repr().tolist()
    scales, zps = wq.q_per_channel_scales().tolist(), wq.q_per_channel_zero_points().tolist()
    int4 = wq.dtype == tessera.quint4x2
    gs = wq._q_group_size() if int4 else None
    b = layer.bias.tolist() if layer.bias is not None else [0.0] * len(q)
    out = []
    for row in x.tolist():
        sx, xq = act_quant(row)
        K = len(row)
        yr = []
        for n, qn in enumerate(q):
            if not int4:
                acc = sum(xq[k] * (qn[k] - zps[n]) for k in range(K))
                y = mul32(mul32(f32(float(acc)), sx), f32(scales[n]))
            else:
                f = [0.0] * 16
                for c in range(0, K, 128):
                    for ln in range(16):
                        e0 = c + 8 * ln
                        if e0 >= K:
                            break
                        g = e0 // gs
                        L = sum(xq[k] * (qn[k] - zps[n][g]) for k in range(e0, e0 + 8))
                        f[ln] = fma32(float(L), f32(scales[n][g]), f[ln])
                h = [add32(f[i], f[i + 8]) for i in range(8)]
                h = [add32(h[i], h[i + 4]) for i in range(4)]
                y = mul32(add32(add32(h[0], h[2]), add32(h[1], h[3])), sx)
            yr.append(add32(y, f32(b[n])))
        out.append(yr)
    return out


def mlp():
    tessera.manual_seed(3)
    return nn.Sequential(nn.Linear(64, 48), nn.ReLU(), nn.Linear(48, 10, bias=False))


CONFIGS = [(int8_dynamic_activation_int8_weight(), 128),
           (int8_dynamic_activation_int4_weight(group_size=32), 128),
           (int8_dynamic_activation_int4_weight(group_size=64), 192),
           (int8_dynamic_activation_int4_weight(group_size=32), 160),
           (int8_dynamic_activation_int4_weight(group_size=128), 256)]


@pytest.mark.parametrize("config,K", CONFIGS)
def test_layer_against_reference(config, K):
    m = nn.Sequential(nn.Linear(K, 24))
    quantize_(m, config)
    assert isinstance(m[0], Int8DynamicActivationLinear)
    x = tessera.randn(3, K)
    with tessera.no_grad():
        y = m(x).tolist()
    units = (K + 127) // 128
    for yr, rr, cr in zip(y, reference(x, m[0]), contract(x, m[0])):
        assert yr == cr  # the contract's bits
        for v, (r, mag, groups) in zip(yr, rr):
            assert abs(v - r) <= (units + 8) * U * mag + 1e-30


def test_int4_weights_symmetric():
    """scale = float16(max(float32(max|group| / 7.5), float32 eps)), then q = clamp(round(w *
    float32(1 / scale)), -8, 7) + 8 with that rounded scale"""
    m = nn.Sequential(nn.Linear(64, 8))
    wf = m[0].weight.detach().tolist()
    quantize_(m, int8_dynamic_activation_int4_weight(group_size=32))
    w = m[0].weight
    assert w.dtype == tessera.quint4x2 and w._q_group_size() == 32
    assert set(v for r in w.q_per_channel_zero_points().tolist() for v in r) == {8}
    scales, q = w.q_per_channel_scales().tolist(), w.int_repr().tolist()
    for n, row in enumerate(wf):
        for g in range(2):
            vals = row[32 * g:32 * (g + 1)]
            s = f16(max(f32(max(abs(v) for v in vals) / 7.5), 2.0 ** -23))
            assert scales[n][g] == s
            inv = f32(1.0 / s)
            for k, v in enumerate(vals):
                assert q[n][32 * g + k] == max(-8, min(7, round(f32(v * inv)))) + 8


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
    big = nn.Sequential(nn.Linear(64, 2))
    with tessera.no_grad():
        big[0].weight[1, 40] = 491400.0  # scale 65520: float16's inf
    with pytest.raises(Exception, match="over float16's largest"):
        quantize_(big, int8_dynamic_activation_int4_weight(group_size=32))
