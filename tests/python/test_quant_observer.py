"""The observers whose statistics are computed in C (src/ops/quant_observer.c):
HistogramObserver (histogram, running range, the L2 search and the qparams),
MovingAverageMinMaxObserver and PerChannelMinMaxObserver, against PyTorch 2.15's results stored in
tests/data/quant_observer_ref.json by tests/data/gen_quant_observer_ref.py (CI has no torch): bit
for bit, since the C code follows PyTorch's float32 arithmetic and order. Then the x86 qconfig
(HistogramObserver with reduce_range) end to end: prepare, calibrate, convert."""
import base64
import json
import os
import struct
import zlib

import pytest

import tessera
import tessera.ao.quantization as tq
from tessera import _C

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
REF = json.load(open(os.path.join(DATA, "quant_observer_ref.json")))


def dec(b64, shape):
    raw = base64.b64decode(b64)
    vals = list(struct.unpack("<%df" % (len(raw) // 4), raw))
    t = tessera.tensor(vals, dtype=tessera.float32)
    return t.reshape(shape) if shape else t.reshape([])


def hist_of(b64):
    """the stored histogram (zlib-compressed float32 bytes) as a list"""
    raw = zlib.decompress(base64.b64decode(b64))
    return list(struct.unpack("<%df" % (len(raw) // 4), raw))


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def make_hist(cfg):
    kw = dict(cfg)
    if "dtype" in kw:
        kw["dtype"] = getattr(tessera, kw["dtype"])
    return tq.HistogramObserver(**kw)


# ------------------------------------------------------------------ HistogramObserver
CASES = REF["histogram"]


@pytest.mark.parametrize("i", range(len(CASES)),
                         ids=["%s-%d" % (c["name"], n) for n, c in enumerate(CASES)])
def test_histogram_observer_bits(i):
    c = CASES[i]
    o = make_hist(c["config"])
    seq = REF["sequences"][c["name"]]
    for x, shape, (mn, mx) in zip(seq["xs"], seq["shapes"], c["minmax"]):
        o(dec(x, shape))
        assert (float(o.min_val), float(o.max_val)) == (mn, mx)
    assert o.histogram.tolist() == hist_of(c["histogram"])
    lo, hi = _C._histogram_observer_search(o.histogram, o.min_val, o.max_val, o.dst_nbins)
    assert [float(lo), float(hi)] == c["search"]
    s, z = o.calculate_qparams()
    assert s.dtype == tessera.float32 and z.dtype == tessera.int64
    assert (s.tolist(), z.tolist()) == (c["scale"], c["zero_point"])


def test_histogram_observer_edges():
    # NaN: PyTorch's histc refuses the range; so does Tessera, naming the op
    assert "not finite" in REF["nan_error"]
    o = tq.HistogramObserver()
    with pytest.raises(Exception, match="histogram_observer_update: input has NaN"):
        o(tessera.tensor([1.0, float("nan")]))
    # nothing observed: scale 1, zero point 0 (PyTorch's)
    s, z = o.calculate_qparams()
    assert [s.tolist(), z.tolist()] == REF["unobserved"]
    # an empty input and an all-inf one change nothing
    o(tessera.tensor([]))
    o(tessera.tensor([float("inf"), float("-inf")]))
    assert float(o.min_val) == float("inf") and float(o.histogram.sum()) == 0
    with pytest.raises(NotImplementedError, match="qscheme"):
        tq.HistogramObserver(qscheme="per_channel_affine")
    with pytest.raises(NotImplementedError, match="dynamic"):
        tq.HistogramObserver(is_dynamic=True)
    with pytest.raises(ValueError, match="bins"):
        tq.HistogramObserver(bins=0)
    with pytest.raises(Exception, match="dst_nbins"):
        _C._histogram_observer_search(o.histogram, tessera.tensor(0.0), tessera.tensor(1.0), 1)


def test_histogram_state_dict_is_torchs():
    o = tq.HistogramObserver(reduce_range=True)
    keys = [k.split(".")[-1] for k in REF["observer_state_keys"] if k.startswith("quant.")]
    assert list(o.state_dict().keys()) == keys
    # a state dict saved after calibration loads into a fresh observer and gives its qparams
    c = next(c for c in CASES if c["name"] == "growing" and c["config"] == {"reduce_range": True})
    seq = REF["sequences"]["growing"]
    for x, shape in zip(seq["xs"], seq["shapes"]):
        o(dec(x, shape))
    o2 = tq.HistogramObserver(reduce_range=True)
    o2.load_state_dict(o.state_dict())
    s, z = o2.calculate_qparams()
    assert (s.tolist(), z.tolist()) == (c["scale"], c["zero_point"])


def test_histogram_state_from_torch_loads():
    """conv1's calibrated HistogramObserver state dict saved by PyTorch (torch.save) loads into
    Tessera's observer and gives PyTorch's qparams"""
    sd = tessera.load(os.path.join(DATA, "quant_observer_hist_state.pt"))
    assert list(sd.keys()) == ["eps", "histogram", "min_val", "max_val"]
    o = tq.get_default_qconfig("x86").activation()
    o.load_state_dict(sd)
    p = REF["ptq_x86"]["conv1"]
    assert (float(o.min_val), float(o.max_val)) == (p["min"], p["max"])
    s, z = o.calculate_qparams()
    assert (s.tolist(), z.tolist()) == (p["scale"], p["zero_point"])


# ------------------------------------------------------------------ moving average, per channel
@pytest.mark.parametrize("i", range(len(REF["moving_average"])))
def test_moving_average_bits(i):
    m = REF["moving_average"][i]
    o = tq.MovingAverageMinMaxObserver(averaging_constant=m["c"])
    for x, shape, want in zip(m["xs"], m["shapes"], m["minmax"]):
        o(dec(x, shape))
        got = [float(o.min_val), float(o.max_val)]
        assert str(got) == str(want)  # NaN compares by its text


@pytest.mark.parametrize("i", range(len(REF["per_channel"])))
def test_per_channel_bits(i):
    p = REF["per_channel"][i]
    o = tq.PerChannelMinMaxObserver(ch_axis=p["axis"], dtype=tessera.qint8,
                                    qscheme="per_channel_symmetric")
    for x, shape, want in zip(p["xs"], p["shapes"], p["steps"]):
        o(dec(x, shape))
        assert [o.min_val.tolist(), o.max_val.tolist()] == want
    s, z = o.calculate_qparams()
    assert (s.tolist(), z.tolist()) == (p["scale"], p["zero_point"])


def test_min_max_update_refusals():
    o = tq.PerChannelMinMaxObserver(ch_axis=3)
    with pytest.raises(Exception, match="ch_axis 3 is out of range"):
        o(tessera.randn(2, 3))
    o = tq.PerChannelMinMaxObserver(ch_axis=0)
    o(tessera.randn(3, 2))
    with pytest.raises(Exception, match="3 / 3 channels, the input 4"):
        o(tessera.randn(4, 2))
    with pytest.raises(Exception, match="must be finite"):
        _C._moving_average_minmax_update(tessera.tensor(0.0), tessera.tensor(1.0),
                                         tessera.randn(3), float("nan"))


# ------------------------------------------------------------------ the x86 qconfig, end to end
def test_default_qconfigs():
    for backend, rr, weight in [("x86", True, "PerChannelMinMaxObserver"),
                                ("fbgemm", True, "PerChannelMinMaxObserver"),
                                ("qnnpack", False, "MinMaxObserver"),
                                ("onednn", False, "PerChannelMinMaxObserver")]:
        qc = tq.get_default_qconfig(backend)
        a, w = qc.activation(), qc.weight()
        assert type(a) is tq.HistogramObserver and a.reduce_range == rr and a.bins == 2048
        assert (a.quant_min, a.quant_max) == ((0, 127) if rr else (0, 255))
        assert type(w).__name__ == weight and w.dtype == tessera.qint8


def test_x86_observers_see_torchs_tensors():
    """Each activation observer of the x86-prepared model fed the tensors PyTorch's saw: its
    range, histogram, search and qparams are PyTorch's bit for bit"""
    for k, p in REF["ptq_x86"].items():
        o = tq.get_default_qconfig("x86").activation()
        for x, shape in zip(p["xs"], p["shapes"]):
            o(dec(x, shape))
        assert (float(o.min_val), float(o.max_val)) == (p["min"], p["max"]), k
        assert o.histogram.tolist() == hist_of(p["histogram"]), k
        s, z = o.calculate_qparams()
        assert (s.tolist(), z.tolist()) == (p["scale"], p["zero_point"]), k


def test_x86_ptq_end_to_end():
    """Tessera's own prepare + calibrate + convert with get_default_qconfig('x86'): the input's
    qparams bit for bit; the layers' close to PyTorch's (Tessera's float conv and BN folding are
    not PyTorch's bits, so the histogram sees values a few ulps away: the chosen range can move by
    a bin, the scale by about 1 / 2048 of the range, the zero point by one)"""
    from test_quant_static import Net  # noqa: F401  (the same model code)
    import test_quant_static as tqs
    m = tqs._prepared_net(tq.get_default_qconfig("x86"))
    assert type(m.quant.activation_post_process) is tq.HistogramObserver
    with tessera.no_grad():
        for c in tqs.REF["model"]["calib"]:
            m(tessera.tensor(c))
    m = tq.convert(m)
    want = {k: (p["scale"][0], p["zero_point"][0]) for k, p in REF["ptq_x86"].items()}
    got = {"quant": (float(m.quant.scale[0]), int(m.quant.zero_point[0]))}
    for k in ("conv1", "conv2", "skip", "fc"):
        got[k] = (getattr(m, k).scale, getattr(m, k).zero_point)
    assert got["quant"] == want["quant"]
    for k in ("conv1", "conv2", "skip", "fc"):
        assert got[k][0] == pytest.approx(want[k][0], rel=2e-3), k
        assert abs(got[k][1] - want[k][1]) <= 1, k
    y = m(tessera.tensor(tqs.REF["model"]["x"]))
    assert tuple(y.shape) == (2, 8, 4, 5)
