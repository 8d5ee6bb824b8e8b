"""Quantization-aware training against PyTorch's results (tests/data/qat_ref.pt, made by
tests/data/gen_qat_ref.py): fake quantize per tensor / per channel and their straight-through
gradients bit for bit, FakeQuantize modules over batches, and a conv + bn + relu + linear model
through fuse_modules_qat / prepare_qat (x86 qconfig, version 0) loaded with PyTorch's QAT state:
its training forward, gradients, three SGD steps, eval forward and convert's integers."""
import json
import os

import numpy as np
import pytest

import tessera as t
from tessera import nn
from tessera.ao import quantization as tq

REF = os.path.join(os.path.dirname(__file__), "..", "data", "qat_ref.pt")


@pytest.fixture(scope="module")
def ref():
    return t.load(REF)


def a(v):
    return np.asarray(v.detach().numpy())


def test_fake_quantize_per_tensor_bits(ref):
    for i in range(3):
        s, zp, lo, hi = [float(v) for v in ref[f"pt{i}_args"]]
        x = ref[f"pt{i}_x"].clone().requires_grad_(True)
        y = t.fake_quantize_per_tensor_affine(x, s, int(zp), int(lo), int(hi))
        assert y.grad_fn.name() == "FakeQuantizePerTensorAffineCachemaskBackward0"
        np.testing.assert_array_equal(a(y), a(ref[f"pt{i}_y"]))
        (y * ref[f"pt{i}_w"]).sum().backward()
        np.testing.assert_array_equal(a(x.grad), a(ref[f"pt{i}_grad"]))
        # the tensor-qparams form (FakeQuantize's buffers) gives the same
        y2, mask = t.fake_quantize_per_tensor_affine_cachemask(
            x.detach(), t.tensor([s]), t.tensor([int(zp)], dtype=t.int32), int(lo), int(hi))
        np.testing.assert_array_equal(a(y2), a(y))
        np.testing.assert_array_equal(a(mask), a(ref[f"pt{i}_grad"]) != 0)


def test_fake_quantize_per_channel_bits(ref):
    for axis in range(3):
        x = ref[f"pc{axis}_x"].clone().requires_grad_(True)
        y = t.fake_quantize_per_channel_affine(x, ref[f"pc{axis}_scale"], ref[f"pc{axis}_zp"],
                                               axis, -128, 127)
        np.testing.assert_array_equal(a(y), a(ref[f"pc{axis}_y"]))
        (y * ref[f"pc{axis}_w"]).sum().backward()
        np.testing.assert_array_equal(a(x.grad), a(ref[f"pc{axis}_grad"]))


def test_fake_quantize_errors():
    x = t.randn(3, 4)
    with pytest.raises(t.ArgumentError, match="quant_min 5 must be less than or equal to quant_max"):
        t.fake_quantize_per_tensor_affine(x, 0.1, 0, 5, 0)
    with pytest.raises(t.ArgumentError, match="zero_point 300"):
        t.fake_quantize_per_tensor_affine(x, 0.1, 300, 0, 255)
    with pytest.raises(t.ArgumentError, match="scale must be positive"):
        t.fake_quantize_per_tensor_affine(x, -0.1, 0, 0, 255)
    with pytest.raises(t.ArgumentError, match="axis 2 is out of range"):
        t.fake_quantize_per_channel_affine(x, t.ones(3), t.zeros(3, dtype=t.int32), 2, 0, 255)
    with pytest.raises(t.ShapeError, match="input.size\\(axis\\) = 4"):
        t.fake_quantize_per_channel_affine(x, t.ones(3), t.zeros(3, dtype=t.int32), 1, 0, 255)
    # a negative axis wraps, as PyTorch's
    y = t.fake_quantize_per_channel_affine(x, t.ones(4), t.zeros(4, dtype=t.int32), -1, -8, 7)
    np.testing.assert_array_equal(a(y), np.clip(np.round(a(x)), -8, 7))


@pytest.mark.parametrize("name", ["fq_act", "fq_wpc", "fq_w"])
def test_fake_quantize_modules(ref, name):
    fq = {"fq_act": tq.default_fake_quant, "fq_wpc": tq.default_per_channel_weight_fake_quant,
          "fq_w": tq.default_weight_fake_quant}[name]()
    for b in range(3):
        y = fq(ref[f"{name}_x{b}"])
        np.testing.assert_array_equal(a(fq.scale), a(ref[f"{name}_scale{b}"]))
        np.testing.assert_array_equal(a(fq.zero_point), a(ref[f"{name}_zp{b}"]))
        np.testing.assert_array_equal(a(y), a(ref[f"{name}_y{b}"]))
    fq.apply(tq.disable_fake_quant)
    x = ref[f"{name}_x0"]
    np.testing.assert_array_equal(a(fq(x)), a(x))
    fq.apply(tq.disable_observer)
    s = a(fq.scale).copy()
    fq(x * 10)
    np.testing.assert_array_equal(a(fq.scale), s)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv1 = nn.Conv2d(2, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.fc = nn.Linear(6, 5)
        self.fc_relu = nn.ReLU()
        self.fc2 = nn.Linear(5, 3)
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.quant(x)
        x = self.relu1(self.bn1(self.conv1(x)))
        x = self.relu2(self.conv2(x))
        x = self.fc_relu(self.fc(x))
        return self.dequant(self.fc2(x))


def qat_model(state):
    net = Net().train()
    net.qconfig = tq.get_default_qat_qconfig("x86", version=0)
    fused = tq.fuse_modules_qat(net, [["conv1", "bn1", "relu1"], ["conv2", "relu2"],
                                      ["fc", "fc_relu"]])
    qat = tq.prepare_qat(fused)
    assert type(qat.conv1).__name__ == "ConvBnReLU2d" and type(qat.fc2).__name__ == "Linear"
    # PyTorch's observers keep eps as a buffer (Tessera's too, or as an attribute)
    own = qat.state_dict()
    qat.load_state_dict({k: v for k, v in state.items() if k in own or not k.endswith(".eps")})
    return qat


def test_qat_model_forward_and_steps(ref):
    qat = qat_model(ref["qat_state0"])
    y = qat(ref["qat_x1"])
    want = a(ref["qat_train_y"])
    # The output is fake quantized (multiples of its scale); the float convolutions differ from
    # PyTorch's by float32 rounding, which can move a value across a rounding boundary: one
    # quantum, on few elements
    out_scale = float(qat.fc2.activation_post_process.scale[0])
    diff = np.abs(a(y) - want)
    assert diff.max() <= out_scale * 1.001 + 1e-6
    assert (diff > 1e-5).mean() < 0.05
    y.square().mean().backward()
    for name, g in (("conv1", qat.conv1.weight.grad), ("fc2", qat.fc2.weight.grad)):
        np.testing.assert_allclose(a(g), a(ref[f"qat_grad_{name}"]), rtol=0.02, atol=2e-3)
    qat.zero_grad()
    opt = t.optim.SGD(qat.parameters(), lr=0.1)
    for i in range(2, 5):
        opt.zero_grad()
        qat(ref[f"qat_x{i}"]).square().mean().backward()
        opt.step()
    sd = qat.state_dict()
    for k, v in ref["qat_state3"].items():
        if k.endswith(".eps") or "enabled" in k:
            continue
        got, exp = a(sd[k]).astype(np.float64), a(v).astype(np.float64)
        if k.endswith("weight") or k.endswith("bias"):  # parameters moved the same way
            start = a(ref["qat_state0"][k]).astype(np.float64)
            np.testing.assert_allclose(got - start, exp - start, rtol=0.05, atol=2e-4, err_msg=k)
        elif k.endswith("zero_point"):
            assert np.abs(got - exp).max() <= 1, k
        else:
            np.testing.assert_allclose(got, exp, rtol=1e-3, atol=1e-4, err_msg=k)


def test_qat_convert(ref):
    qat = qat_model(ref["qat_state3"])
    qat.eval()
    xt = ref["qat_test_x"]
    y = qat(xt)
    out_scale = float(qat.fc2.activation_post_process.scale[0])
    assert np.abs(a(y) - a(ref["qat_eval_y"])).max() <= out_scale * 1.001 + 1e-6
    q = tq.convert(qat)
    assert type(q.conv1).__name__ == "ConvReLU2d" and "quantized" in type(q.conv1).__module__
    s, z = [float(v) for v in ref["q_quant_out"]]
    assert (q.quant.scale.item(), q.quant.zero_point.item()) == (pytest.approx(s, rel=1e-7), z)
    for name in ("conv1", "conv2", "fc", "fc2"):
        m = getattr(q, name)
        w = m.weight()
        ws = a(w.q_per_channel_scales())
        np.testing.assert_allclose(ws, a(ref[f"q_{name}_wscale"]), rtol=1e-6, err_msg=name)
        # the folded batch norm is float64 rounded once here, float32 in PyTorch: a weight
        # exactly between two integers could go either way
        dw = np.abs(a(w.int_repr()).astype(int) - a(ref[f"q_{name}_w"]).astype(int))
        assert dw.max() <= 1 and (dw > 0).sum() <= 2, name
        os_, oz = [float(v) for v in ref[f"q_{name}_out"]]
        assert m.scale == pytest.approx(os_, rel=1e-6) and m.zero_point == oz, name
    yq = a(q(xt))
    want = a(ref["q_y"])
    # integers of fc2's output: the layers compute in PyTorch's x86 arithmetic, but the weights
    # above may differ by one integer (two at most) and the qparams in the last digits, each
    # moving an output by one quantum at a rounding boundary, one more through a layer
    assert np.abs(yq - want).max() <= 2 * q.fc2.scale * 1.001


def test_freeze_bn_stats(ref):
    from tessera.ao.nn.intrinsic import qat as nniqat
    qat = qat_model(ref["qat_state0"])
    qat.apply(nniqat.freeze_bn_stats)
    qat.train()  # a frozen batch norm stays frozen, as PyTorch's train() override keeps it
    rm = a(qat.conv1.bn.running_mean).copy()
    qat(ref["qat_x2"])
    np.testing.assert_array_equal(a(qat.conv1.bn.running_mean), rm)
    qat.apply(nniqat.update_bn_stats)
    qat(ref["qat_x2"])
    assert not np.array_equal(a(qat.conv1.bn.running_mean), rm)


FUSED = os.path.join(os.path.dirname(__file__), "..", "data", "qat_fused_ref.json")


def _fused_ref():
    with open(FUSED) as f:
        return json.load(f)


def test_fused_fake_quant_qparams_are_pytorchs():
    """ts_choose_qparams_minmax against torch.fused_moving_avg_obs_fake_quant's first qparams
    (tests/data/gen_qat_fused_ref.py): affine and symmetric, one-sided, tiny (fbgemm's 6.1e-5
    floor) and zero ranges; then the rows of a weight per channel: scale and zero point equal"""
    r = _fused_ref()
    for lo, hi, qmin, qmax, sym, scale, zp in r["pairs"]:
        s, z = t._C._choose_qparams_minmax(t.tensor(lo), t.tensor(hi), qmin,
                                                 qmax, sym)
        assert (s.item(), z.item()) == (scale, zp), (lo, hi, qmin, qmax, sym)
    pc = r["per_channel"]
    w = t.tensor(pc["w"])
    s, z = t._C._choose_qparams_minmax(w.amin(1), w.amax(1), -128, 127, True)
    assert s.tolist() == pc["scale"] and z.tolist() == pc["zero_point"]
    with pytest.raises(t.TesseraError, match="min_val 1 is not <= max_val 0"):
        t._C._choose_qparams_minmax(t.tensor(1.0), t.tensor(0.0), 0, 255, False)


@pytest.mark.parametrize("backend", ["qnnpack", "x86"])
def test_default_qat_qconfig_trains_with_pytorchs_qparams(backend):
    """conv + bn fused for QAT, hardswish; get_default_qat_qconfig (version 1: the fused fake
    quants) and one training forward: the weight fake quant's qparams (symmetric: max(|min| /
    128, max / 127), not the observer's max|w| / 127.5) equal PyTorch's, the activation's too
    or within one float32 step of its observed range, and the output within one activation
    quantum (the same bits here)"""
    r = _fused_ref()
    m0 = r["model"]
    net = t.nn.Sequential(t.nn.Conv2d(3, 16, 3, 2, 1, bias=False),
                                t.nn.BatchNorm2d(16), t.nn.Hardswish())
    net.load_state_dict({k: t.tensor(v) for k, v in m0["state"].items()})
    net = tq.fuse_modules_qat(net.train(), [["0", "1"]], inplace=False)
    net.qconfig = tq.get_default_qat_qconfig(backend)
    tq.prepare_qat(net, inplace=True)
    y = net(t.tensor(m0["x"]))
    ref, c = m0[backend], net[0]
    assert c.weight_fake_quant.scale.tolist() == ref["w_scale"]
    assert c.weight_fake_quant.zero_point.tolist() == ref["w_zero_point"]
    act = c.activation_post_process
    assert act.zero_point.tolist() == ref["act_zero_point"]
    assert abs(act.scale.item() - ref["act_scale"][0]) <= 2e-7 * ref["act_scale"][0]
    diff = (y.detach() - t.tensor(ref["y"])).abs().max().item()
    assert diff <= ref["act_scale"][0] * 1.001
