"""tessera.ao.quantization.quantize_ with torchao's weight-only configs (int8_weight_only,
int4_weight_only) and int8_dynamic_activation_int8_weight, on a small MLP.

Reference: the MLP in float64 (Python floats) over the dequantized weights. Each layer's kernel
sums x * (q - zp) in float32 per group and scales by the float32 scale: an output may differ from
float64 by (K + groups + 8) * 2^-24 * (sum_k |x_k w_nk| + |b_n|); the first layer's bound e1
reaches the output through ReLU (1-Lipschitz) as sum_n |w2[o][n]| e1[n]."""
import pytest

import tessera
from tessera import nn
from tessera.ao.nn.quantized.dynamic_activation import Int8DynamicActivationLinear
from tessera.ao.nn.quantized.weight_only import WeightOnlyLinear
from tessera.ao.quantization import (int4_weight_only, int8_dynamic_activation_int8_weight,
                                     int8_weight_only, quantize_)

U = 2.0 ** -24


def mlp(k=64, h=128, o=10):
    tessera.manual_seed(0)
    return nn.Sequential(nn.Linear(k, h), nn.ReLU(), nn.Linear(h, o))


def layer_ref(x, w, b, groups):
    """float64 rows of x @ w^T + b and each output's bound"""
    y, tol = [], []
    for row in x:
        yr, tr = [], []
        for n, wn in enumerate(w):
            s = sum(a * c for a, c in zip(row, wn)) + b[n]
            mag = sum(abs(a * c) for a, c in zip(row, wn)) + abs(b[n])
            yr.append(s)
            tr.append((len(row) + groups + 8) * U * mag)
        y.append(yr)
        tol.append(tr)
    return y, tol


@pytest.mark.parametrize("config,groups", [(int8_weight_only(), lambda k: 1),
                                           (int4_weight_only(group_size=32), lambda k: k // 32),
                                           (int4_weight_only(group_size=64), lambda k: k // 64)])
def test_mlp_against_float64(config, groups):
    m = mlp()
    x = tessera.randn(5, 64)
    quantize_(m, config)
    assert isinstance(m[0], WeightOnlyLinear) and isinstance(m[2], WeightOnlyLinear)
    if isinstance(config, type(int4_weight_only())):
        assert m[0].weight.dtype == tessera.quint4x2
        assert m[0].weight._q_group_size() == config.group_size
    else:
        assert m[0].weight.dtype == tessera.qint8
        assert m[0].weight.qscheme() == "per_channel_affine"
    y = m(x).tolist()
    w1, w2 = m[0].weight.dequantize().tolist(), m[2].weight.dequantize().tolist()
    b1, b2 = m[0].bias.tolist(), m[2].bias.tolist()
    h, e1 = layer_ref(x.tolist(), w1, b1, groups(64))
    h = [[max(v, 0.0) for v in r] for r in h]
    ref, e2 = layer_ref(h, w2, b2, groups(128))
    for i in range(5):
        for o in range(10):
            prop = sum(abs(w2[o][n]) * e1[i][n] for n in range(128))
            assert abs(y[i][o] - ref[i][o]) <= e2[i][o] * (1 + 1e-6) + prop, (i, o)


def test_close_to_float_model():
    """the quantization error itself: int8 within 1% of the output scale, int4 (gs 32) 10%"""
    for config, rel in ((int8_weight_only(), 0.01), (int4_weight_only(32), 0.1)):
        m = mlp()
        x = tessera.randn(8, 64)
        y0 = m(x)
        quantize_(m, config)
        err = float((m(x) - y0).abs().max())
        assert err <= rel * float(y0.abs().max()), (config, err)


def test_grad_of_x_and_bias():
    m = mlp()
    quantize_(m, int4_weight_only(group_size=32), filter_fn=lambda mod, fqn: fqn == "2")
    assert isinstance(m[0], nn.Linear) and isinstance(m[2], WeightOnlyLinear)
    h = tessera.randn(4, 128, requires_grad=True)
    g = tessera.randn(4, 10)
    (m[2](h) * g).sum().backward()
    w = m[2].weight.dequantize().tolist()
    gl, gx = g.tolist(), h.grad.tolist()
    for i in range(4):
        for k in range(128):
            r = sum(gl[i][n] * w[n][k] for n in range(10))
            s = sum(abs(gl[i][n] * w[n][k]) for n in range(10))
            assert abs(gx[i][k] - r) <= 14 * U * s + 1e-30
    gb = m[2].bias.grad.tolist()
    for n in range(10):
        assert abs(gb[n] - sum(gl[i][n] for i in range(4))) <= 1e-6
    assert not getattr(m[2].weight, "requires_grad", False)


def test_dynamic_route_and_filter():
    m = mlp()
    x = tessera.randn(3, 64)
    y0 = m(x)
    quantize_(m, int8_dynamic_activation_int8_weight())
    assert isinstance(m[0], Int8DynamicActivationLinear)
    assert m[0].weight.qscheme() == "per_channel_affine"
    assert float((m(x) - y0).abs().max()) <= 0.02 * float(y0.abs().max())


def test_filter_fn_gets_the_full_name():
    m = nn.Sequential(nn.Sequential(nn.Linear(64, 32)), nn.Linear(32, 4))
    seen = []
    quantize_(m, int8_weight_only(), filter_fn=lambda mod, fqn: seen.append(fqn) or fqn == "0.0")
    assert isinstance(m[0][0], WeightOnlyLinear) and isinstance(m[1], nn.Linear)
    assert "0.0" in seen and "1" in seen


def test_refusals():
    with pytest.raises(ValueError, match="group_size"):
        int4_weight_only(group_size=48)
    with pytest.raises(TypeError, match="unknown config"):
        quantize_(mlp(), "int8")
    with pytest.raises(NotImplementedError, match="itself a Linear"):
        quantize_(nn.Linear(64, 8), int8_weight_only())
    m = nn.Sequential(nn.Linear(40, 8))  # 40 is no multiple of 32
    with pytest.raises(RuntimeError, match="does not divide"):
        quantize_(m, int4_weight_only(group_size=32))
    q = nn.Sequential(nn.Linear(64, 8))
    quantize_(q, int8_weight_only())
    with pytest.raises(RuntimeError, match="input's last dim"):
        q(tessera.randn(2, 63))
