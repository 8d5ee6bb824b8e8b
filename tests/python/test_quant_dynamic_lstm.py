"""tessera.ao.nn.quantized.dynamic.LSTM (ts_dynamic_quantized_lstm) against PyTorch's dynamic int8
LSTM on PyTorch's own state dicts (tests/data/quant_dynamic_lstm.pt, made by
tests/data/gen_quant_dynamic_lstm_ref.py), and quantize_dynamic swapping nn.LSTM.

The bounds. Both compute the same integers (the input and h quantized per tensor with the same
qparams, exact int32 products); they differ in rounding: fbgemm forms acc * x_scale * w_scale +
bias in float32 (a few roundings), Tessera in float64 rounded once, so a gate pre-activation
differs by at most 4 u (|gx| + |gh|) + 2 u |gate| (u = 2^-24); sigmoid / tanh (slopes <= 1, Sleef
vs libm, each within ~2 ulp) and the cell c' = f c + i g, h = o tanh(c') add a few u (1 + |c|).
Per step (_step_c, _step_h): |dc| <= (1 + Cmax)(8 M + 11) u, |dh| <= |dc| + (2 M + 12) u, M a
bound on |gx| + |gh| from the weights' row sums, Cmax = max|c_0| + T (test_single_steps: one step
from the same state, the rigorous check). Over a sequence the tests allow these summed over
steps and layers: linear growth, which assumes the state's small differences are not amplified
through W_hh (a worst-case Lipschitz bound grows like (R_hh (1 + Cmax))^T and says nothing). On
the stored cases: 3e-5 a step, 1.3e-4..3.2e-4 a sequence; the outputs differ by <= 1e-7. This
ignores a flipped quantization of h (a value within a few ulps of a rounding tie moving a
gate by a whole quantum): it does not occur in the stored cases; the single-step checks cannot
have one (the same h is quantized)."""
import os

import numpy as np
import pytest

import tessera
from tessera import nn
from tessera.ao.nn.quantized.dynamic import LSTM
from tessera.ao.quantization import quantize_dynamic

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "quant_dynamic_lstm.pt")
U = 2.0 ** -24


@pytest.fixture(scope="module")
def ref():
    if not os.path.exists(DATA):
        pytest.skip("tests/data/quant_dynamic_lstm.pt is absent (gen_quant_dynamic_lstm_ref.py)")
    return tessera.load(DATA, weights_only=False)


def _np(t):
    return np.asarray(t.numpy(), dtype=np.float64)


def _loaded(case):
    q = LSTM(**case["kwargs"])
    keys = q.load_state_dict({k[2:]: v for k, v in case["state_dict"].items()})
    assert not keys.missing_keys and not keys.unexpected_keys
    return q


def _bounds(q, case):
    """(R_ih, R_hh, M, Cmax) per layer: |W| row-sum bounds, the gates' and the cell's"""
    T = case["x"].shape[1 if q.batch_first else 0]
    cmax = float(np.abs(_np(case["c0"])).max()) + T  # |c_t| <= |c_0| + t
    xmax = float(np.abs(_np(case["x"])).max())
    D = 2 if q.bidirectional else 1
    out = []
    for layer in range(q.num_layers):
        cells = q._cells[layer * D:(layer + 1) * D]
        r_ih = max(np.abs(_np(c[0].dequantize())).sum(1).max() for c in cells)
        r_hh = max(np.abs(_np(c[1].dequantize())).sum(1).max() for c in cells)
        b = max(max(np.abs(_np(c[2])).max(), np.abs(_np(c[3])).max()) for c in cells)
        xm = xmax if layer == 0 else 1.0  # a layer's input: x, or h in [-1, 1]
        # |x_q| <= |x| + half a step, the step <= 2 max|x| / 127 (reduce_range)
        m = (r_ih * xm + r_hh) * (1 + 1 / 127) + 2 * b
        out.append((r_ih, r_hh, m, cmax))
    return out


def _sequence_tol(q, case):
    """the single-step bounds summed over the steps and layers (linear growth)"""
    T = case["x"].shape[1 if q.batch_first else 0]
    tol_c = sum(T * _step_c(m, cmax) for _, _, m, cmax in _bounds(q, case))
    return tol_c + _step_h(_bounds(q, case)[-1][2]), tol_c


def _step_c(m, cmax):
    """one step's |dc|: the gates differ by <= 6 u M (see the module's doc), the activations by
    that times their slope (<= 1/4 sigmoid, 1 tanh) + ~8 u (libm / Sleef within 1 ulp each, the
    division and add); c' = f c + i g: (|c| / 4 + 5 / 4) 6 u M + 11 u (1 + |c|)"""
    return (1 + cmax) * (8 * m + 11) * U


def _step_h(m):
    """h = o tanh(c'): |dh| <= |dc| + |do| + 4 u, |do| <= 6 u M / 4 + 8 u"""
    return (2 * m + 12) * U


@pytest.mark.parametrize("name", ["uni", "bi2", "bf_pc"])
def test_pytorch_state_dict(ref, name):
    case = ref[name]
    q = _loaded(case)
    if name == "bf_pc":
        assert "per_channel" in str(q._cells[0][0].qscheme())
    y, (hn, cn) = q(case["x"], (case["h0"], case["c0"]))
    tol_h, tol_c = _sequence_tol(q, case)
    assert tol_h < 1e-3  # the bound is a bound on rounding, not on quantization
    for got, want, tol in ((y, case["y"], tol_h), (hn, case["hn"], tol_h),
                           (cn, case["cn"], tol_c)):
        assert tuple(got.shape) == tuple(want.shape)
        assert np.abs(_np(got) - _np(want)).max() <= tol


@pytest.mark.parametrize("name", ["uni", "bf_pc"])
def test_single_steps(ref, name):
    """one step from each of PyTorch's states: no accumulated difference, no flip possible"""
    case = ref[name]
    q = _loaded(case)
    (_, _, m, cmax), = _bounds(q, case)
    tol_c, tol_h = _step_c(m, cmax), _step_c(m, cmax) + _step_h(m)
    h, c = case["h0"], case["c0"]
    x = case["x"]
    T = x.shape[1 if q.batch_first else 0]
    assert len(case["step_h"]) == T
    for t in range(T):
        xt = x[:, t:t + 1] if q.batch_first else x[t:t + 1]
        _, (hn, cn) = q(xt, (h, c))
        h, c = case["step_h"][t], case["step_c"][t]
        assert np.abs(_np(cn) - _np(c)).max() <= tol_c
        assert np.abs(_np(hn) - _np(h)).max() <= tol_h


@pytest.mark.parametrize("name", ["uni", "bi2"])
def test_quantize_dynamic_swaps_lstm(ref, name):
    """PyTorch's float model quantized here: the same qint8 weights as PyTorch's, the outputs"""
    case = ref[name]
    model = nn.Sequential(nn.LSTM(**case["kwargs"]), nn.Linear(4, 2))
    model[0].load_state_dict({k[2:]: v for k, v in case["float_state_dict"].items()})
    qm = quantize_dynamic(model, {nn.LSTM, nn.Linear}, dtype=tessera.qint8)
    assert type(qm[0]) is LSTM and qm[0]._get_name() == "DynamicQuantizedLSTM"
    assert type(qm[1]).__name__ == "Linear" and type(model[0]) is nn.LSTM
    want = _loaded(case)
    for mine, theirs in zip(qm[0]._cells, want._cells):
        for a, b in zip(mine[:2], theirs[:2]):
            assert a.q_scale() == b.q_scale() and a.q_zero_point() == b.q_zero_point()
            assert np.array_equal(a.int_repr().numpy(), b.int_repr().numpy())
        for a, b in zip(mine[2:], theirs[2:]):
            assert np.array_equal(a.numpy(), b.numpy())
    y, _ = qm[0](case["x"], (case["h0"], case["c0"]))
    assert np.abs(_np(y) - _np(case["y"])).max() <= _sequence_tol(want, case)[0]


def test_state_dict_round_trip_and_layouts(ref):
    case = ref["bi2"]
    q = _loaded(case)
    sd = q.state_dict()
    assert list(sd) == [f"_all_weight_values.{i}.param" for i in range(4)]
    assert sd["_all_weight_values.0.param"]._type_name() == \
        "__torch__.torch.classes.rnn.CellParamsBase"
    q2 = LSTM(**case["kwargs"])
    q2.load_state_dict(sd)
    x, h0, c0 = case["x"], case["h0"], case["c0"]
    y, (hn, cn) = q(x, (h0, c0))
    y2, (hn2, cn2) = q2(x, (h0, c0))
    assert np.array_equal(y.numpy(), y2.numpy()) and np.array_equal(cn.numpy(), cn2.numpy())
    # unbatched: sequence 1 alone; zero states by default
    yu, (hu, cu) = q(x[:, 1], (h0[:, 1], c0[:, 1]))
    yb, (hb, cb) = q(x[:, 1:2], (h0[:, 1:2], c0[:, 1:2]))
    assert tuple(yu.shape) == (x.shape[0], 10) and tuple(hu.shape) == (4, 5)
    assert np.array_equal(yu.numpy(), yb.numpy()[:, 0]) and np.array_equal(cu.numpy(),
                                                                          cb.numpy()[:, 0])
    yz, _ = q(x)
    yz2, _ = q(x, (tessera.zeros(4, 2, 5), tessera.zeros(4, 2, 5)))
    assert np.array_equal(yz.numpy(), yz2.numpy())


def test_errors(ref):
    with pytest.raises(NotImplementedError, match="proj_size"):
        LSTM(4, 5, proj_size=2)
    with pytest.raises(NotImplementedError, match="dtype"):
        LSTM(4, 5, dtype=tessera.float16)
    q = _loaded(ref["uni"])
    x = ref["uni"]["x"]
    with pytest.raises(Exception, match="h0 must be float32"):
        q(x, (tessera.zeros(2, 3, 5), tessera.zeros(1, 3, 5)))
    with pytest.raises(Exception, match="input must be float32"):
        q(tessera.zeros(2, 3, 4, 1))
    packed = nn.utils.rnn.pack_padded_sequence(x, [6, 5, 4])
    with pytest.raises(NotImplementedError, match="PackedSequence"):
        q(packed)
    sd = q.state_dict()
    with pytest.raises(ValueError, match="CellParamsBase"):
        q.load_state_dict({"_all_weight_values.0.param": x})
    bad = sd["_all_weight_values.0.param"]
    st, name = bad.__getstate__()
    bad.__setstate__((("quantized_dynamic_fp16",) + st[1:], name))
    with pytest.raises(NotImplementedError, match="quantized_dynamic_fp16"):
        q.load_state_dict(sd)
    with pytest.raises(NotImplementedError, match="GRU"):
        quantize_dynamic(nn.Sequential(nn.GRU(2, 3)), {nn.GRU})
