"""Static quantization (tessera.ao.quantization's eager PTQ, tessera.ao.nn.quantized, the C ops of
include/tessera/quant.h) against two references:

* exact ones written here in Python integers and float64 (the quantized conv's int64 accumulator,
  PyTorch's NCHW pooling formulas, the float32 dequantize -> op -> quantize of cat);
* PyTorch 2.x's x86 results stored in tests/data/quant_static_ref.json and quant_static_*.pt by
  tests/data/gen_quant_static_ref.py (CI has no torch).

The quantized modules pass their float bias to the C ops, which then compute in PyTorch's x86
arithmetic (fbgemm's float32 bias and multiplier, src/ops/qrequant.c): the conv's integers equal
PyTorch's (tests/python/test_quant_x86.py holds the cases that tell the arithmetics apart)."""
import json
import os
import struct

import pytest

import tessera
import tessera.ao.nn.intrinsic.quantized as nniq
import tessera.ao.nn.quantized as nnq
import tessera.ao.quantization as tq
from tessera import _C, nn

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
REF = json.load(open(os.path.join(DATA, "quant_static_ref.json")))


def flat(v):
    return [a for b in v for a in flat(b)] if isinstance(v, list) else [v]


def shape(v):
    return [len(v)] + shape(v[0]) if isinstance(v, list) else []


def qtensor(d):
    ints = tessera.tensor(d["int_repr"], dtype={"quint8": tessera.uint8, "qint8": tessera.int8}[
        d["dtype"]])
    return tessera._make_per_tensor_quantized_tensor(ints, d["scale"], d["zero_point"])


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


# ------------------------------------------------------------------ conv
def conv_reference(c):
    """the exact result Tessera defines: int64 accumulator over in-bounds taps (padding reads the
    zero point: contributes 0), then PyTorch's x86 requantization in float32 (each float64
    operation on float32 values rounded to float32 is the float32 operation: 53 >= 2 * 24 + 2)"""
    x, xs, xz = c["x"]["int_repr"], c["x"]["scale"], c["x"]["zero_point"]
    w, ws, b = c["w_int"], c["w_scales"], c["bias"]
    N, C, H, W = shape(x)
    CO, CG, KH, KW = shape(w)
    G, st, pd, dl = c["groups"], c["stride"], c["padding"], c["dilation"]
    OH = (H + 2 * pd - dl * (KH - 1) - 1) // st + 1
    OW = (W + 2 * pd - dl * (KW - 1) - 1) // st + 1
    os_, oz = c["out_scale"], c["out_zero_point"]
    lo = oz if c["relu"] else 0
    y = [[[[0] * OW for _ in range(OH)] for _ in range(CO)] for _ in range(N)]
    for n in range(N):
        for co in range(CO):
            g = co // (CO // G)
            atws = f32(f32(xs) * f32(ws[co]))
            fb, mult = f32(f32(b[co]) / atws), f32(atws / f32(os_))
            for oy in range(OH):
                for ox in range(OW):
                    acc = 0
                    for ci in range(CG):
                        for i in range(KH):
                            yy = oy * st - pd + i * dl
                            if not 0 <= yy < H:
                                continue
                            for j in range(KW):
                                xx = ox * st - pd + j * dl
                                if 0 <= xx < W:
                                    acc += (x[n][g * CG + ci][yy][xx] - xz) * w[co][ci][i][j]
                    v = f32(f32(f32(acc) + fb) * mult)
                    y[n][co][oy][ox] = min(max(oz + round(v), lo), 255)
    return y


def make_conv(c):
    x = qtensor(c["x"])
    w = tessera._make_per_channel_quantized_tensor(
        tessera.tensor(c["w_int"], dtype=tessera.int8),
        tessera.tensor(c["w_scales"], dtype=tessera.float64),
        tessera.zeros(len(c["w_scales"]), dtype=tessera.int64), 0)
    CO, CG, KH, KW = shape(c["w_int"])
    cls = nniq.ConvReLU2d if c["relu"] else nnq.Conv2d
    m = cls(CG * c["groups"], CO, (KH, KW), stride=c["stride"], padding=c["padding"],
            dilation=c["dilation"], groups=c["groups"])
    m.set_weight_bias(w, tessera.tensor(c["bias"]))
    m.scale, m.zero_point = c["out_scale"], c["out_zero_point"]
    return m, x


@pytest.mark.parametrize("case", range(len(REF["conv"])))
def test_conv_exact_and_torch(case):
    c = REF["conv"][case]
    m, x = make_conv(c)
    y = m(x)
    assert y.dtype == tessera.quint8 and y.q_scale() == c["out_scale"]
    got = y.int_repr().tolist()
    assert got == conv_reference(c)  # bit for bit: Tessera's own definition
    assert got == c["y"]  # and PyTorch's x86 integers


def test_conv_padding_uses_zero_point():
    """all-padding windows give exactly the bias: out = zp + round(b / os)"""
    x = tessera.quantize_per_tensor(tessera.zeros(1, 1, 1, 1) + 0.5, 0.25, 100, tessera.quint8)
    w = tessera.quantize_per_tensor(tessera.ones(1, 1, 1, 1), 0.5, 0, tessera.qint8)
    m = nnq.Conv2d(1, 1, 1, padding=1)
    m.set_weight_bias(w, tessera.tensor([1.0]))
    m.scale, m.zero_point = 0.125, 10
    y = m(x).int_repr().tolist()[0][0]
    # bias 1.0 / (0.25 * 0.5) = 8 -> 8 * 0.125 / 0.125 = 8, + 10; the center adds (102 - 100) * 2
    assert y == [[18, 18, 18], [18, 22, 18], [18, 18, 18]]


# ------------------------------------------------------------------ add, cat, pooling
def test_add_within_one_quantum():
    r = REF["add"]
    a, b = qtensor(r["a"]), qtensor(r["b"])
    f = nnq.QFunctional()
    f.scale, f.zero_point = r["scale"], r["zero_point"]
    for got, want in ((f.add(a, b), r["y"]), (f.add_relu(a, b), r["y_relu"])):
        assert got.q_scale() == r["scale"] and got.q_zero_point() == r["zero_point"]
        # PyTorch dequantizes with an fma (a * s - zp * s) in its vector body, Tessera with
        # s * (q - zp): the sums differ by an ulp or so, which moves a tie by at most one
        d = [abs(x - y) for x, y in zip(flat(got.int_repr().tolist()), flat(want))]
        assert max(d) <= 1 and sum(d) <= len(d) // 50


def test_cat_bits():
    r, c = REF["add"], REF["cat"]
    a, b = qtensor(r["a"]), qtensor(r["b"])
    f = nnq.QFunctional()
    f.scale, f.zero_point = c["scale"], c["zero_point"]
    assert f.cat([a, b], dim=c["dim"]).int_repr().tolist() == c["y"]


@pytest.mark.parametrize("case", range(len(REF["max_pool2d"])))
def test_max_pool_bits(case):
    p = REF["max_pool2d"][case]
    a = qtensor(REF["add"]["a"])
    y = nn.functional.max_pool2d(a, p["k"], p["stride"], p["padding"], p["dilation"],
                                 ceil_mode=p["ceil_mode"])
    assert y.int_repr().tolist() == p["y"]["int_repr"]
    assert (y.q_scale(), y.q_zero_point()) == (p["y"]["scale"], p["y"]["zero_point"])


@pytest.mark.parametrize("case", range(len(REF["adaptive_avg_pool2d"])))
def test_adaptive_avg_pool_bits(case):
    p = REF["adaptive_avg_pool2d"][case]
    a = qtensor(REF["add"]["a"])
    y = nn.functional.adaptive_avg_pool2d(a, p["size"])
    assert y.int_repr().tolist() == p["y"]["int_repr"]
    assert (y.q_scale(), y.q_zero_point()) == (p["y"]["scale"], p["y"]["zero_point"])


def test_quantized_refusals():
    a = qtensor(REF["add"]["a"])
    with pytest.raises(Exception, match="quantized tensors are not supported"):
        nn.functional.relu(a)
    f = nnq.QFunctional()
    with pytest.raises(Exception, match="output zero_point 300"):
        _C._quantized_add(a, a, 0.1, 300, False)
    with pytest.raises(Exception, match="quantized_conv2d: weight must be qint8"):
        _C._quantized_conv2d(a, a, None, 1, 0, 1, 1, 0.1, 0, False)
    with pytest.raises(RuntimeError, match="not intended"):
        f(a)


# ------------------------------------------------------------------ observers
@pytest.mark.parametrize("case", range(len(REF["observers"])))
def test_observer_qparams_bits(case):
    o = REF["observers"][case]
    kw = {}
    if "quant_min" in o:
        kw = {"quant_min": o["quant_min"], "quant_max": o["quant_max"]}
    obs = tq.MinMaxObserver(dtype=getattr(tessera, o["dtype"]), qscheme=o["qscheme"],
                            reduce_range=o["reduce_range"], **kw)
    obs(tessera.tensor(o["x"]))
    s, z = obs.calculate_qparams()
    assert s.dtype == tessera.float32 and z.dtype == tessera.int64
    assert s.tolist() == o["scale"] and z.tolist() == o["zero_point"]


def test_moving_average_and_per_channel_bits():
    m = REF["moving_average"]
    obs = tq.MovingAverageMinMaxObserver(averaging_constant=0.01)
    for x in m["xs"]:
        obs(tessera.tensor(x))
    assert (float(obs.min_val), float(obs.max_val)) == (m["min"], m["max"])
    s, z = obs.calculate_qparams()
    assert (s.tolist(), z.tolist()) == (m["scale"], m["zero_point"])
    p = REF["per_channel"]
    w = tessera.tensor(p["w"])
    sym = tq.PerChannelMinMaxObserver(ch_axis=0, dtype=tessera.qint8,
                                      qscheme="per_channel_symmetric")
    sym(w)
    s, z = sym.calculate_qparams()
    assert (s.tolist(), z.tolist()) == (p["sym"]["scale"], p["sym"]["zero_point"])
    aff = tq.PerChannelMinMaxObserver(ch_axis=1, dtype=tessera.quint8)
    aff(w)
    s, z = aff.calculate_qparams()
    assert (s.tolist(), z.tolist()) == (p["affine_axis1"]["scale"],
                                        p["affine_axis1"]["zero_point"])


def test_observer_refusals():
    with pytest.raises(NotImplementedError, match="Cannot reduce range"):
        tq.MinMaxObserver(qscheme="per_tensor_symmetric", reduce_range=True)
    with pytest.raises(ValueError, match="must include 0"):
        tq.MinMaxObserver(quant_min=1, quant_max=10)


# ------------------------------------------------------------------ the model
class Net(nn.Module):
    """gen_quant_static_ref.py's Net, the same code in Tessera"""

    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.skip = nnq.FloatFunctional()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4, 5)
        self.fc_relu = nn.ReLU()
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.quant(x)
        h = self.relu1(self.bn1(self.conv1(x)))
        x = self.skip.add(self.conv2(h), h)
        x = self.pool(x)
        x = self.fc_relu(self.fc(x))
        return self.dequant(x)


MINMAX = tq.QConfig(activation=tq.MinMaxObserver.with_args(reduce_range=True),
                    weight=tq.default_per_channel_weight_observer)


def _prepared_net(qconfig, prepare=True):
    m = Net()
    m.load_state_dict(tessera.load(os.path.join(DATA, "quant_static_float.pt")))
    m.eval()
    m.qconfig = qconfig
    tq.fuse_modules(m, [["conv1", "bn1", "relu1"], ["fc", "fc_relu"]], inplace=True)
    if prepare:
        tq.prepare(m, inplace=True)
    return m


def _converted(calibrate=True):
    m = _prepared_net(MINMAX)
    if calibrate:
        with tessera.no_grad():
            for c in REF["model"]["calib"]:
                m(tessera.tensor(c))
    return tq.convert(m)


def test_converted_structure_and_keys():
    m = _converted()
    assert type(m.quant) is nnq.Quantize and type(m.conv1) is nniq.ConvReLU2d
    assert type(m.conv2) is nnq.Conv2d and type(m.fc) is nniq.LinearReLU
    assert type(m.skip) is nnq.QFunctional and type(m.dequant) is nnq.DeQuantize
    assert isinstance(m.bn1, nn.Identity) and isinstance(m.fc_relu, nn.Identity)
    assert list(m.state_dict().keys()) == REF["model"]["keys"]


def test_own_ptq_qparams_match_torch():
    """Tessera's observers over the same calibration data: the input's qparams bit for bit; the
    layers' within the float conv's rounding (Tessera's float conv and BN folding are not
    PyTorch's bits: min / max move by ulps, so the scale by a few float32 ulps and the zero
    point by at most one)"""
    m = _converted()
    want = REF["model"]["runs"]["minmax"]["qparams"]
    got = {"quant": (float(m.quant.scale[0]), int(m.quant.zero_point[0]))}
    for k in ("conv1", "conv2", "skip", "fc"):
        got[k] = (getattr(m, k).scale, getattr(m, k).zero_point)
    assert got["quant"] == tuple(want["quant"])
    for k in ("conv1", "conv2", "skip", "fc"):
        assert got[k][0] == pytest.approx(want[k][0], rel=1e-5), k
        assert abs(got[k][1] - want[k][1]) <= 1, k
    ws = m.conv1.weight().q_per_channel_scales().tolist()
    assert ws == pytest.approx(REF["model"]["runs"]["minmax"]["conv1_w_scales"], rel=1e-6)


@pytest.mark.parametrize("run", ["minmax", "x86"])
def test_torch_state_dict_outputs(run):
    """PyTorch's converted state dict (its x86 qconfig: HistogramObserver (test_quant_observer.py),
    only chose the numbers) loaded into Tessera's converted model: every layer's integers are
    PyTorch's (the conv and linear in its x86 arithmetic, the add's rounding)"""
    m = _converted(calibrate=False)
    sd = tessera.load(os.path.join(DATA, "quant_static_%s.pt" % run))
    m.load_state_dict(sd)
    r = REF["model"]["runs"][run]
    assert (m.conv1.scale, m.conv1.zero_point) == (f32(r["qparams"]["conv1"][0]),
                                                   r["qparams"]["conv1"][1])
    x = tessera.tensor(REF["model"]["x"])
    with tessera.no_grad():
        q = m.quant(x)
        h = m.conv1(q)
        a2 = m.skip.add(m.conv2(h), h)
        yq = m.fc(m.pool(a2))
        y = m(x)
    assert h.int_repr().tolist() == r["h_int"]
    assert a2.int_repr().tolist() == r["add_int"]
    assert yq.int_repr().tolist() == r["y_int"]
    assert yq.q_scale() == pytest.approx(r["y_scale"], rel=1e-7)
    assert y.tolist() == yq.dequantize().tolist()


def test_quantized_state_dict_save_load_roundtrip(tmp_path):
    """tessera.save writes quantized tensors as PyTorch does (_rebuild_qtensor, QInt8Storage):
    a converted model's state dict saved and loaded into a fresh one gives the same integers"""
    m = _converted()
    path = str(tmp_path / "q.pt")
    tessera.save(m.state_dict(), path)
    m2 = _converted(calibrate=False)
    m2.load_state_dict(tessera.load(path))
    x = tessera.tensor(REF["model"]["x"])
    with tessera.no_grad():
        assert m2(x).tolist() == m(x).tolist()
    w = tessera.load(path)["conv1.weight"]
    assert w.qscheme() == "per_channel_affine" and w.int_repr().tolist() == \
        m.conv1.weight().int_repr().tolist()
