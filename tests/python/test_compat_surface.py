"""torch's Python surface that timm and torchvision call (issue 75): jit / fx / compiler in eager,
finfo / iinfo (PyTorch 2.15's values, written out below), the float8 names, torch.hub's cache,
nn.utils.fusion and FrozenBatchNorm2d (against float64 references), SyncBatchNorm in one process,
generic data classes, torchvision's datasets / transforms.functional / ops names."""
import math
import os
import typing
import warnings

import pytest

import tessera as ts
from tessera import nn


def _f64(t):
    return [float(v) for v in t.double().flatten().tolist()]


# ---------------------------------------------------------------- jit, fx, compiler
def test_jit_eager_names():
    def f(x):
        return x + 1
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert ts.jit.script(f) is f
        assert ts.jit.script(f) is f
    assert len([x for x in w if "runs eagerly" in str(x.message)]) <= 1  # once per process
    m = nn.Linear(2, 2)
    calls = []
    m.register_forward_hook(lambda *a: calls.append(1))
    assert ts.jit.trace(m, ts.ones(1, 2)) is m and calls == [1]  # ran once on the example
    assert ts.jit.ignore(f) is f and ts.jit.ignore(drop=True)(f) is f
    assert ts.jit.unused(f) is f and ts.jit.export(f) is f
    assert ts.jit.is_scripting() is False and ts.jit.is_tracing() is False
    assert ts.jit.annotate(typing.List[int], [1]) == [1]
    assert ts.jit.Final is typing.Final and typing.Final[int] == ts.jit.Final[int]
    assert ts.jit.isinstance([1, 2], typing.List[int]) and not ts.jit.isinstance([1, "a"],
                                                                                typing.List[int])
    assert not isinstance(m, ts.jit.ScriptModule)
    with pytest.raises(NotImplementedError, match="TorchScript"):
        ts.jit.load("x.pt")


def test_fx_wrap_and_limits():
    def g(x):
        return x
    assert ts.fx.wrap(g) is g and ts.fx.wrap("g") == "g"
    assert (__name__, "g") in ts.fx._wrapped
    with pytest.raises(TypeError):
        ts.fx.wrap(3)
    with pytest.raises(NotImplementedError, match="symbolic tracer"):
        ts.fx.symbolic_trace(nn.Linear(2, 2))
    with pytest.raises(NotImplementedError, match="symbolic tracer"):
        ts.fx.Tracer().trace(nn.Linear(2, 2))
    ts._assert(True, "never")
    ts._assert(ts.tensor(True), "never")
    with pytest.raises(AssertionError, match="the message"):
        ts._assert(False, "the message")
    with pytest.raises(AssertionError):
        ts._assert(ts.tensor(False), "t")


def test_compile_passes_through_and_warns_once():
    ts.compiler._warned.clear()
    m = nn.Linear(2, 2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert ts.compile(m) is m
        assert ts.compile(mode="max-autotune")(m) is m
    assert sum("runs eagerly" in str(x.message) for x in w) == 1
    assert ts.compiler.is_compiling() is False and ts.compiler.is_dynamo_compiling() is False
    assert ts.compiler.disable(m) is m and ts.compiler.disable()(m) is m


# ---------------------------------------------------------------- finfo / iinfo / float8
# torch.finfo's fields in PyTorch 2.15: bits, eps, max, tiny (= smallest_normal), resolution
FINFO = {
    "float32": (32, 1.1920928955078125e-07, 3.4028234663852886e+38, 1.1754943508222875e-38, 1e-06),
    "float64": (64, 2.220446049250313e-16, 1.7976931348623157e+308, 2.2250738585072014e-308,
                1e-15),
    "float16": (16, 0.0009765625, 65504.0, 6.103515625e-05, 0.001),
    "bfloat16": (16, 0.0078125, 3.3895313892515355e+38, 1.1754943508222875e-38, 0.01),
    "float8_e4m3fn": (8, 0.125, 448.0, 0.015625, 1.0),
    "float8_e5m2": (8, 0.25, 57344.0, 6.103515625e-05, 1.0),
    "float8_e4m3fnuz": (8, 0.125, 240.0, 0.0078125, 1.0),
    "float8_e5m2fnuz": (8, 0.25, 57344.0, 3.0517578125e-05, 1.0),
}
IINFO = {"int64": (64, -9223372036854775808, 9223372036854775807),
         "int32": (32, -2147483648, 2147483647), "int16": (16, -32768, 32767),
         "int8": (8, -128, 127), "uint64": (64, 0, 18446744073709551615),
         "uint32": (32, 0, 4294967295), "uint16": (16, 0, 65535), "uint8": (8, 0, 255)}


@pytest.mark.parametrize("name", sorted(FINFO))
def test_finfo_matches_pytorch(name):
    f = ts.finfo(getattr(ts, name))
    bits, eps, mx, tiny, res = FINFO[name]
    assert (f.bits, f.eps, f.max, f.min, f.tiny, f.smallest_normal, f.resolution, f.dtype) == (
        bits, eps, mx, -mx, tiny, tiny, res, name)
    assert type(f.eps) is float


def test_finfo_e8m0_and_default_and_errors():
    f = ts.finfo(ts.float8_e8m0fnu)
    assert (f.eps, f.max, f.min, f.tiny) == (1.0, 1.7014118346046923e+38, 5.877471754111438e-39,
                                             5.877471754111438e-39)
    assert ts.finfo().dtype == "float32"
    assert repr(ts.finfo(ts.float16)) == (
        "finfo(resolution=0.001, min=-65504, max=65504, eps=0.000976562, "
        "smallest_normal=6.10352e-05, tiny=6.10352e-05, dtype=float16)")
    with pytest.raises(TypeError, match="floating point"):
        ts.finfo(ts.int32)
    with pytest.raises(TypeError, match="integer"):
        ts.iinfo(ts.float32)
    with pytest.raises(TypeError, match="bool"):
        ts.iinfo(ts.bool)


@pytest.mark.parametrize("name", sorted(IINFO))
def test_iinfo_matches_pytorch(name):
    i = ts.iinfo(getattr(ts, name))
    assert (i.bits, i.min, i.max, i.dtype) == IINFO[name] + (name,)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                                  "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2"])
def test_float8_names_exist_but_make_no_tensors(name):
    dt = getattr(ts, name)
    assert repr(dt) == "tessera." + name and dt.itemsize == 1
    msg = name + " is not supported by Tessera yet"
    with pytest.raises(TypeError, match=msg):
        ts.zeros(2, dtype=dt)
    with pytest.raises(TypeError, match=msg):
        ts.ones(2).to(dt)
    with pytest.raises(TypeError, match=msg):
        ts.ones(2).to("cpu", dt)
    with pytest.raises(TypeError, match=msg):
        ts.ones(4).view(dt)


# ---------------------------------------------------------------- hub
def test_hub_dir_and_cached_state_dict(tmp_path, monkeypatch):
    monkeypatch.setattr(ts.hub, "_hub_dir", None)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    assert ts.hub.get_dir() == str(tmp_path / "th" / "hub")
    ts.hub.set_dir(str(tmp_path / "hub"))
    assert ts.hub.get_dir() == str(tmp_path / "hub")
    ck = tmp_path / "hub" / "checkpoints"
    ck.mkdir(parents=True)
    sd = {"w": ts.arange(6, dtype=ts.float32).reshape(2, 3)}
    ts.save(sd, str(ck / "model-abc123.pth"))
    got = ts.hub.load_state_dict_from_url("https://example.invalid/x/model-abc123.pth")
    assert got["w"].tolist() == sd["w"].tolist()
    got = ts.hub.load_state_dict_from_url("https://example.invalid/y", file_name="model-abc123.pth")
    assert got["w"].shape == (2, 3)


def test_hub_missing_file_says_where(tmp_path, monkeypatch):
    monkeypatch.setattr(ts.hub, "_hub_dir", str(tmp_path))
    with pytest.raises(RuntimeError, match="no network access.*" +
                       os.path.join(str(tmp_path), "checkpoints", "nothere.pth").replace(
                           "\\", "\\\\")):
        ts.hub.load_state_dict_from_url("http://tessera-test.invalid/nothere.pth")
    assert not os.path.exists(os.path.join(str(tmp_path), "checkpoints", "nothere.pth"))


def test_hub_load_local(tmp_path):
    (tmp_path / "hubconf.py").write_text(
        "dependencies = []\n"
        "def tiny(n=3):\n    'a Linear'\n    import tessera\n    return tessera.nn.Linear(n, 1)\n")
    m = ts.hub.load(str(tmp_path), "tiny", 4, source="local")
    assert m.in_features == 4
    assert "tiny" in ts.hub.list(str(tmp_path), source="local")
    assert ts.hub.help(str(tmp_path), "tiny", source="local") == "a Linear"
    with pytest.raises(NotImplementedError, match="github"):
        ts.hub.load("pytorch/vision", "resnet18")
    with pytest.raises(RuntimeError, match="Cannot find callable"):
        ts.hub.load(str(tmp_path), "nope", source="local")


# ---------------------------------------------------------------- fusion, batch norms
def _bn(c, seed):
    bn = nn.BatchNorm2d(c).eval()
    with ts.no_grad():
        bn.weight.copy_(ts.tensor([0.5 + 0.25 * i + 0.01 * seed for i in range(c)]))
        bn.bias.copy_(ts.tensor([0.1 * i - 0.2 for i in range(c)]))
        bn.running_mean.copy_(ts.tensor([0.3 * i - 0.4 for i in range(c)]))
        bn.running_var.copy_(ts.tensor([1.5 + 0.5 * i for i in range(c)]))
    return bn


def test_fuse_conv_bn_eval_against_float64():
    ts.manual_seed(0)
    conv = nn.Conv2d(2, 3, 3, padding=1).eval()
    bn = _bn(3, 0)
    fused = ts.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
    assert fused is not conv and isinstance(fused.weight, nn.Parameter)
    W, B = _f64(conv.weight), _f64(conv.bias)
    g, b, m, v = _f64(bn.weight), _f64(bn.bias), _f64(bn.running_mean), _f64(bn.running_var)
    per = len(W) // 3
    for o in range(3):
        s = g[o] / math.sqrt(v[o] + bn.eps)
        for k in range(per):  # one product of two rounded factors: a few float32 ulps
            assert fused.weight.flatten()[o * per + k].item() == pytest.approx(
                W[o * per + k] * s, rel=4e-7, abs=1e-12)
        assert fused.bias[o].item() == pytest.approx((B[o] - m[o]) * s + b[o], rel=1e-6,
                                                     abs=1e-7)
    x = ts.randn(1, 2, 5, 5)
    ref = _f64(bn(conv(x)))
    out = _f64(fused(x))
    scale = max(abs(r) for r in ref)
    assert max(abs(a - r) for a, r in zip(out, ref)) <= 1e-5 * scale
    with pytest.raises(AssertionError, match="eval"):
        ts.nn.utils.fusion.fuse_conv_bn_eval(conv.train(), bn)


def test_fuse_conv_bn_weights_transpose_and_no_bias():
    w = ts.arange(12, dtype=ts.float32).reshape(2, 3, 1, 2) * 0.1  # ConvTranspose: (in, out, ...)
    rm, rv = ts.tensor([0.1, 0.2, 0.3]), ts.tensor([1.0, 2.0, 4.0])
    fw, fb = ts.nn.utils.fusion.fuse_conv_bn_weights(w, None, rm, rv, 0.0, None, None,
                                                     transpose=True)
    for i in range(2):
        for o in range(3):
            for k in range(2):
                ref = w[i, o, 0, k].item() / math.sqrt(rv[o].item())
                assert fw[i, o, 0, k].item() == pytest.approx(ref, rel=4e-7, abs=1e-12)
    for o in range(3):
        assert fb[o].item() == pytest.approx(-rm[o].item() / math.sqrt(rv[o].item()), rel=4e-7)


def test_fuse_linear_bn_eval_against_float64():
    ts.manual_seed(1)
    lin = nn.Linear(4, 3).eval()
    bn = nn.BatchNorm1d(3).eval()
    with ts.no_grad():
        bn.weight.copy_(ts.tensor([1.5, -0.5, 2.0]))
        bn.bias.copy_(ts.tensor([0.1, 0.2, -0.3]))
        bn.running_mean.copy_(ts.tensor([0.5, -1.0, 0.25]))
        bn.running_var.copy_(ts.tensor([0.5, 2.0, 3.0]))
    fused = ts.nn.utils.fusion.fuse_linear_bn_eval(lin, bn)
    W, B = _f64(lin.weight), _f64(lin.bias)
    for o in range(3):
        s = _f64(bn.weight)[o] / math.sqrt(_f64(bn.running_var)[o] + bn.eps)
        for k in range(4):
            assert fused.weight[o, k].item() == pytest.approx(W[o * 4 + k] * s, rel=4e-7)
        assert fused.bias[o].item() == pytest.approx(
            (B[o] - _f64(bn.running_mean)[o]) * s + _f64(bn.bias)[o], rel=1e-6, abs=1e-7)
    with pytest.raises(AssertionError, match="num_features"):
        ts.nn.utils.fusion.fuse_linear_bn_eval(nn.Linear(4, 5).eval(), bn)


def test_frozen_batchnorm2d_against_float64():
    from tessera.vision.ops.misc import FrozenBatchNorm2d
    f = FrozenBatchNorm2d(3, eps=1e-3)
    assert set(dict(f.named_buffers())) == {"weight", "bias", "running_mean", "running_var"}
    assert list(f.parameters()) == []
    bn = _bn(3, 1)
    for k in ("weight", "bias", "running_mean", "running_var"):
        getattr(f, k).copy_(getattr(bn, k).detach())
    x = ts.randn(2, 3, 4, 4, requires_grad=True)
    y = f(x)
    xs, ys = x.detach().double(), y.detach().double()
    for c in range(3):
        s = _f64(f.weight)[c] / math.sqrt(_f64(f.running_var)[c] + 1e-3)
        ref = (xs[:, c] - _f64(f.running_mean)[c]) * s + _f64(f.bias)[c]
        err = (ys[:, c] - ref).abs().max().item()
        assert err <= 4 * 2.0 ** -24 * (ref.abs().max().item() + 1), (c, err)
    y.sum().backward()
    for c in range(3):
        s = _f64(f.weight)[c] / math.sqrt(_f64(f.running_var)[c] + 1e-3)
        assert x.grad[:, c].double().sub(s).abs().max().item() <= 1e-6 * abs(s) + 1e-7
    assert repr(f) == "FrozenBatchNorm2d(3, eps=0.001)"


def test_sync_batchnorm_one_process_is_batchnorm():
    ts.manual_seed(3)
    bn = nn.BatchNorm2d(4)
    sbn = nn.SyncBatchNorm(4)
    sbn.load_state_dict(bn.state_dict())
    x = ts.randn(3, 4, 2, 2)
    xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ya, yb = bn(xa), sbn(xb)
    assert ya.tolist() == yb.tolist()
    (ya * ya).sum().backward()
    (yb * yb).sum().backward()
    assert xa.grad.tolist() == xb.grad.tolist()
    assert sbn.running_mean.tolist() == bn.running_mean.tolist()
    assert sbn.num_batches_tracked.item() == 1
    y5 = nn.SyncBatchNorm(4)(ts.randn(2, 4, 2, 2, 2))  # N-D, as torch's
    assert y5.shape == (2, 4, 2, 2, 2)


def test_convert_sync_batchnorm_shares_state():
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4),
                          nn.Sequential(nn.BatchNorm1d(4)))
    w, rv = model[1].weight, model[1].running_var
    out = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert isinstance(out[1], nn.SyncBatchNorm) and isinstance(out[2][0], nn.SyncBatchNorm)
    assert out[1].weight is w and out[1].running_var is rv
    assert isinstance(out[0], nn.Conv2d)
    assert nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm2d(2)).__class__ is nn.SyncBatchNorm


# ---------------------------------------------------------------- data, vision names
def test_generic_data_classes():
    from tessera.utils.data import Dataset, DataLoader, IterableDataset, Sampler
    for cls in (Sampler, Dataset, DataLoader, IterableDataset):
        alias = cls[int]
        assert typing.get_origin(alias) is cls and typing.get_args(alias) == (int,)

    class Idx(Sampler[int]):
        def __iter__(self):
            return iter([2, 0, 1])

    class Ds(Dataset[int]):
        def __getitem__(self, i):
            return ts.tensor([float(i)])

        def __len__(self):
            return 3
    got = [b.tolist() for b in DataLoader(Ds(), batch_size=1, sampler=Idx())]
    assert got == [[[2.0]], [[0.0]], [[1.0]]]


def test_vision_names():
    from tessera.vision import datasets, ops, transforms
    from tessera.vision.transforms import functional as TF
    assert TF.InterpolationMode.BICUBIC.value == "bicubic"
    assert transforms.InterpolationMode is TF.InterpolationMode
    for n in ("KMNIST", "QMNIST", "ImageNet", "Places365", "INaturalist", "SVHN"):
        with pytest.raises(NotImplementedError, match=n + " is not available in Tessera"):
            getattr(datasets, n)("root")
    assert datasets.CIFAR100 is not None and datasets.ImageFolder is not None
    assert ops.FrozenBatchNorm2d is ops.misc.FrozenBatchNorm2d
    x = ts.ones(4, 3)
    assert ops.stochastic_depth(x, 0.5, "row", training=False) is x
    m = ops.MLP(3, [5, 2])
    assert m(x).shape == (4, 2)
    from tessera.vision.models import feature_extraction as fe
    with pytest.raises(NotImplementedError, match="torch.fx"):
        fe.create_feature_extractor(nn.Linear(2, 2), ["x"])


def test_type_as_takes_dtype_and_device():
    x = ts.tensor([1.5, -2.25])
    y = x.type_as(ts.zeros(1, dtype=ts.float64))
    assert y.dtype == ts.float64 and y.tolist() == [1.5, -2.25]
    assert x.type_as(ts.zeros(1, dtype=ts.int32)).tolist() == [1, -2]
    assert x.type_as(x) is x or x.type_as(x).tolist() == x.tolist()
    z = x.type_as(ts.zeros(1, dtype=ts.float16, device="sim:0"))
    assert str(z.device) == "sim:0" and z.dtype == ts.float16
    with pytest.raises(TypeError, match="type_as"):
        x.type_as(ts.float64)
