"""interpolate(antialias=True), bilinear and bicubic (ts_interpolate; naflexvit resizes its
position table with it): float64 values and input gradients against PyTorch 2.15's float64
(tests/data/interp_aa_refs.json, made by tests/data/make_interp_aa_refs.py), shrinking and
growing; aa bilinear growing equals plain bilinear (the triangle's support is 1); other modes and
ranks refuse antialias with PyTorch's message."""
import json
import math
import os

import pytest

import tessera
import tessera.nn.functional as F

REFS = os.path.join(os.path.dirname(__file__), "..", "data", "interp_aa_refs.json")


def _x():
    return (tessera.arange(2 * 7 * 9, dtype=tessera.float64).reshape(1, 2, 7, 9) * 0.37).sin()


@pytest.mark.parametrize("key", ["bilinear_3x4", "bilinear_10x5", "bicubic_3x4", "bicubic_10x5"])
def test_against_pytorch_float64(key):
    ref_y, ref_g = json.load(open(REFS))[key]
    mode, size = key.split("_")
    size = tuple(int(v) for v in size.split("x"))
    x = _x().requires_grad_(True)
    y = F.interpolate(x, size=size, mode=mode, antialias=True)
    w = tessera.arange(y.numel(), dtype=tessera.float64).reshape(y.shape).cos()
    (y * w).sum().backward()
    # a few dozen products per value in float64: 1e-13 of the scale (a wrong tap is O(0.1))
    for got, ref in ((y.flatten().tolist(), ref_y), (x.grad.flatten().tolist(), ref_g)):
        scale = max(abs(v) for v in ref)
        assert max(abs(a - b) for a, b in zip(got, ref)) <= 1e-13 * scale


def test_bilinear_growing_equals_plain_bilinear():
    x = _x()
    a = F.interpolate(x, size=(11, 13), mode="bilinear", antialias=True)
    b = F.interpolate(x, size=(11, 13), mode="bilinear")
    assert max(abs(u - v) for u, v in zip(a.flatten().tolist(), b.flatten().tolist())) < 1e-14


def test_float32_close_to_float64():
    x = _x()
    y64 = F.interpolate(x, size=(3, 4), mode="bicubic", antialias=True).flatten().tolist()
    y32 = F.interpolate(x.float(), size=(3, 4), mode="bicubic", antialias=True).flatten().tolist()
    assert max(abs(a - b) for a, b in zip(y32, y64)) <= 64 * 2.0 ** -24 * max(map(abs, y64))
    assert all(math.isfinite(v) for v in y32)


def test_other_modes_refuse_antialias():
    with pytest.raises((ValueError, tessera.TesseraError) if hasattr(tessera, "TesseraError")
                       else ValueError, match="Anti-alias"):
        F.interpolate(_x(), size=(3, 4), mode="nearest", antialias=True)
