"""F.rms_norm's eps (PyTorch's meaning: None adds the input dtype's epsilon, 0.0 adds nothing),
nn.RMSNorm's repr, and rms_norm under autocast (CUDA's float32 list; none on the CPU), against a
float64 formula written out here."""
import math

import pytest

import tessera


def _flat(t):
    return t.detach().reshape(-1).tolist()


def _rms_ref(x, eps, w=None):
    # F.rms_norm over the last dim in float64, by hand
    out = []
    for row in x:
        r = 1.0 / math.sqrt(sum(v * v for v in row) / len(row) + eps)
        out.append([v * r * (w[i] if w else 1.0) for i, v in enumerate(row)])
    return out


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_rms_norm_explicit_zero_eps(device):
    # eps=0.0 adds nothing; eps=None adds float64's epsilon for a float64 input (PyTorch's
    # finfo(opmath).eps): rows of tiny values tell the two apart
    F = tessera.nn.functional
    rows = [[3e-9, -4e-9], [1e-8, 2e-8]]
    x = tessera.tensor(rows, dtype=tessera.float64, device=device)
    for eps, add in ((0.0, 0.0), (None, 2.0 ** -52), (1e-17, 1e-17)):
        got = _flat(F.rms_norm(x, (2,), eps=eps))
        want = [v for r in _rms_ref(rows, add) for v in r]
        for a, b in zip(got, want):
            assert abs(a - b) <= 1e-14 * abs(b), (eps, a, b)
    # float32: eps=0.0 vs None (float32's epsilon) on values whose mean square is ~1e-12
    x32 = tessera.tensor(rows, device=device)
    z, d = _flat(F.rms_norm(x32, (2,), eps=0.0)), _flat(F.rms_norm(x32, (2,), eps=None))
    wz = [v for r in _rms_ref(rows, 0.0) for v in r]
    wd = [v for r in _rms_ref(rows, 2.0 ** -23) for v in r]
    for a, b in zip(z + d, wz + wd):
        assert abs(a - b) <= 1e-5 * abs(b), (a, b)
    m = tessera.nn.RMSNorm(2, eps=0.0).to(device)
    for a, b in zip(_flat(m(x32)), wz):
        assert abs(a - b) <= 1e-5 * abs(b), (a, b)
    # the repr says what PyTorch's says
    assert "eps=0.0," in repr(m)
    assert "eps=None," in repr(tessera.nn.RMSNorm(2))
    assert "eps=1e-06," in repr(tessera.nn.RMSNorm(2, eps=1e-6))


@pytest.mark.parametrize("device", ["cpu", "sim:0"])
def test_rms_norm_autocasts_to_float32(device):
    # on CUDA's float32 list (PyTorch 2.15's autocast_mode.h AT_FORALL_FP32), as layer_norm; on
    # no CPU list: there a bf16 input gives bf16, computed in float32 and rounded once (decision
    # 0033), within bf16's unit roundoff 2^-8
    x = tessera.tensor([[1.0, -2.0, 0.5]], device=device).to(tessera.bfloat16)
    w = tessera.tensor([1.0, 0.5, 2.0], device=device)
    with tessera.autocast(device.split(":")[0], dtype=tessera.bfloat16):
        y = tessera.nn.functional.rms_norm(x, (3,), w)
    cpu = device == "cpu"
    assert y.dtype == (tessera.bfloat16 if cpu else tessera.float32)
    want = _rms_ref([[1.0, -2.0, 0.5]], 2.0 ** -23, [1.0, 0.5, 2.0])[0]
    for a, b in zip(_flat(y), want):
        assert abs(a - b) <= (2.0 ** -8 if cpu else 1e-6) * abs(b), (a, b)
