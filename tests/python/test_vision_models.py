"""tessera.vision.models: every builder's names against torchvision's state-dict keys (literals
below), forward shapes, weights= errors, and a resnet18 forward against a float64 NumPy reference.

The literals were printed by (torchvision 0.29):
  /opt/torch2/bin/torch-python -c "import torchvision.models as m, hashlib
  print(list(m.resnet18(num_classes=10).state_dict()))
  for n in NAMES:  # image_size=32 for vit
      sd = m.__dict__[n](num_classes=10).state_dict()
      s = '\\n'.join('%s:%s' % (k, tuple(v.shape)) for k, v in sd.items())
      print(n, len(sd), hashlib.sha256(s.encode()).hexdigest()[:16])"
tools/check_vision_torch.py (needs torch) checks every builder against torchvision.
"""
import hashlib

import numpy as np
import pytest

import tessera as ts
import tessera.vision.models as M

RESNET18_KEYS = [
    'conv1.weight', 'bn1.weight', 'bn1.bias', 'bn1.running_mean', 'bn1.running_var',
    'bn1.num_batches_tracked', 'layer1.0.conv1.weight', 'layer1.0.bn1.weight',
    'layer1.0.bn1.bias', 'layer1.0.bn1.running_mean', 'layer1.0.bn1.running_var',
    'layer1.0.bn1.num_batches_tracked', 'layer1.0.conv2.weight', 'layer1.0.bn2.weight',
    'layer1.0.bn2.bias', 'layer1.0.bn2.running_mean', 'layer1.0.bn2.running_var',
    'layer1.0.bn2.num_batches_tracked', 'layer1.1.conv1.weight', 'layer1.1.bn1.weight',
    'layer1.1.bn1.bias', 'layer1.1.bn1.running_mean', 'layer1.1.bn1.running_var',
    'layer1.1.bn1.num_batches_tracked', 'layer1.1.conv2.weight', 'layer1.1.bn2.weight',
    'layer1.1.bn2.bias', 'layer1.1.bn2.running_mean', 'layer1.1.bn2.running_var',
    'layer1.1.bn2.num_batches_tracked', 'layer2.0.conv1.weight', 'layer2.0.bn1.weight',
    'layer2.0.bn1.bias', 'layer2.0.bn1.running_mean', 'layer2.0.bn1.running_var',
    'layer2.0.bn1.num_batches_tracked', 'layer2.0.conv2.weight', 'layer2.0.bn2.weight',
    'layer2.0.bn2.bias', 'layer2.0.bn2.running_mean', 'layer2.0.bn2.running_var',
    'layer2.0.bn2.num_batches_tracked', 'layer2.0.downsample.0.weight',
    'layer2.0.downsample.1.weight', 'layer2.0.downsample.1.bias',
    'layer2.0.downsample.1.running_mean', 'layer2.0.downsample.1.running_var',
    'layer2.0.downsample.1.num_batches_tracked', 'layer2.1.conv1.weight', 'layer2.1.bn1.weight',
    'layer2.1.bn1.bias', 'layer2.1.bn1.running_mean', 'layer2.1.bn1.running_var',
    'layer2.1.bn1.num_batches_tracked', 'layer2.1.conv2.weight', 'layer2.1.bn2.weight',
    'layer2.1.bn2.bias', 'layer2.1.bn2.running_mean', 'layer2.1.bn2.running_var',
    'layer2.1.bn2.num_batches_tracked', 'layer3.0.conv1.weight', 'layer3.0.bn1.weight',
    'layer3.0.bn1.bias', 'layer3.0.bn1.running_mean', 'layer3.0.bn1.running_var',
    'layer3.0.bn1.num_batches_tracked', 'layer3.0.conv2.weight', 'layer3.0.bn2.weight',
    'layer3.0.bn2.bias', 'layer3.0.bn2.running_mean', 'layer3.0.bn2.running_var',
    'layer3.0.bn2.num_batches_tracked', 'layer3.0.downsample.0.weight',
    'layer3.0.downsample.1.weight', 'layer3.0.downsample.1.bias',
    'layer3.0.downsample.1.running_mean', 'layer3.0.downsample.1.running_var',
    'layer3.0.downsample.1.num_batches_tracked', 'layer3.1.conv1.weight', 'layer3.1.bn1.weight',
    'layer3.1.bn1.bias', 'layer3.1.bn1.running_mean', 'layer3.1.bn1.running_var',
    'layer3.1.bn1.num_batches_tracked', 'layer3.1.conv2.weight', 'layer3.1.bn2.weight',
    'layer3.1.bn2.bias', 'layer3.1.bn2.running_mean', 'layer3.1.bn2.running_var',
    'layer3.1.bn2.num_batches_tracked', 'layer4.0.conv1.weight', 'layer4.0.bn1.weight',
    'layer4.0.bn1.bias', 'layer4.0.bn1.running_mean', 'layer4.0.bn1.running_var',
    'layer4.0.bn1.num_batches_tracked', 'layer4.0.conv2.weight', 'layer4.0.bn2.weight',
    'layer4.0.bn2.bias', 'layer4.0.bn2.running_mean', 'layer4.0.bn2.running_var',
    'layer4.0.bn2.num_batches_tracked', 'layer4.0.downsample.0.weight',
    'layer4.0.downsample.1.weight', 'layer4.0.downsample.1.bias',
    'layer4.0.downsample.1.running_mean', 'layer4.0.downsample.1.running_var',
    'layer4.0.downsample.1.num_batches_tracked', 'layer4.1.conv1.weight', 'layer4.1.bn1.weight',
    'layer4.1.bn1.bias', 'layer4.1.bn1.running_mean', 'layer4.1.bn1.running_var',
    'layer4.1.bn1.num_batches_tracked', 'layer4.1.conv2.weight', 'layer4.1.bn2.weight',
    'layer4.1.bn2.bias', 'layer4.1.bn2.running_mean', 'layer4.1.bn2.running_var',
    'layer4.1.bn2.num_batches_tracked', 'fc.weight', 'fc.bias',
]

SQUEEZENET1_1_KEYS = [
    'features.0.weight', 'features.0.bias', 'features.3.squeeze.weight',
    'features.3.squeeze.bias', 'features.3.expand1x1.weight', 'features.3.expand1x1.bias',
    'features.3.expand3x3.weight', 'features.3.expand3x3.bias', 'features.4.squeeze.weight',
    'features.4.squeeze.bias', 'features.4.expand1x1.weight', 'features.4.expand1x1.bias',
    'features.4.expand3x3.weight', 'features.4.expand3x3.bias', 'features.6.squeeze.weight',
    'features.6.squeeze.bias', 'features.6.expand1x1.weight', 'features.6.expand1x1.bias',
    'features.6.expand3x3.weight', 'features.6.expand3x3.bias', 'features.7.squeeze.weight',
    'features.7.squeeze.bias', 'features.7.expand1x1.weight', 'features.7.expand1x1.bias',
    'features.7.expand3x3.weight', 'features.7.expand3x3.bias', 'features.9.squeeze.weight',
    'features.9.squeeze.bias', 'features.9.expand1x1.weight', 'features.9.expand1x1.bias',
    'features.9.expand3x3.weight', 'features.9.expand3x3.bias', 'features.10.squeeze.weight',
    'features.10.squeeze.bias', 'features.10.expand1x1.weight', 'features.10.expand1x1.bias',
    'features.10.expand3x3.weight', 'features.10.expand3x3.bias', 'features.11.squeeze.weight',
    'features.11.squeeze.bias', 'features.11.expand1x1.weight', 'features.11.expand1x1.bias',
    'features.11.expand3x3.weight', 'features.11.expand3x3.bias', 'features.12.squeeze.weight',
    'features.12.squeeze.bias', 'features.12.expand1x1.weight', 'features.12.expand1x1.bias',
    'features.12.expand3x3.weight', 'features.12.expand3x3.bias', 'classifier.1.weight',
    'classifier.1.bias',
]

# name: (number of keys, sha256 of "key:shape" lines)[:16], num_classes=10
KEY_HASHES = {
    "resnet50": (320, "c29e81f8536c1b17"),
    "resnext50_32x4d": (320, "b91a70f86b6510f1"),
    "wide_resnet50_2": (320, "c7ee6b9a0455f76b"),
    "vgg11": (22, "98f50e130f840dc3"),
    "vgg11_bn": (62, "aacc40cbaac15c65"),
    "alexnet": (16, "810a6e7d9fc81035"),
    "squeezenet1_0": (52, "2023180fe56c6ca9"),
    "mobilenet_v2": (314, "e8c390ccb928535d"),
    "mobilenet_v3_small": (244, "319f69cb945c989a"),
    "mobilenet_v3_large": (312, "b4a5bac78edc7da5"),
    "efficientnet_b0": (360, "95715971b22b22fc"),
    "efficientnet_b3": (574, "c68d7e76bc0251bc"),
    "densenet121": (727, "5d9682cbbb1a10d1"),
    "vit_b_16": (152, "8853d95fd93b1ee5"),
}

# built in test_every_builder_constructs; the others (> 30M parameters) are slow to initialise
# here and are checked by tools/check_vision_torch.py
HEAVY = {"alexnet", "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19",
         "vgg19_bn", "resnet101", "resnet152", "resnext101_32x8d", "resnext101_64x4d",
         "wide_resnet50_2", "wide_resnet101_2", "efficientnet_b5", "efficientnet_b6",
         "efficientnet_b7", "vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14",
         "densenet161"}


def _kw(name):
    if name == "vit_h_14":
        return {"image_size": 28}
    return {"image_size": 32} if name.startswith("vit") else {}


def _digest(sd):
    s = "\n".join("%s:%s" % (k, tuple(v.shape)) for k, v in sd.items())
    return len(sd), hashlib.sha256(s.encode()).hexdigest()[:16]


def test_resnet18_and_squeezenet_keys():
    assert list(M.resnet18(num_classes=10).state_dict()) == RESNET18_KEYS
    assert list(M.squeezenet1_1(num_classes=10).state_dict()) == SQUEEZENET1_1_KEYS


@pytest.mark.parametrize("name", sorted(KEY_HASHES))
def test_key_and_shape_hashes(name):
    if name in HEAVY or name in SLOW:
        pytest.skip("slow to build here: tools/check_vision_torch.py checks it")
    assert _digest(M.get_model(name, num_classes=10, **_kw(name)).state_dict()) == KEY_HASHES[name]


# one forward per family here (construction of the others is slow in CI; the tool covers them)
SLOW = {"efficientnet_b3", "densenet121"}
FORWARD = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
           "efficientnet_b0", "squeezenet1_0", "squeezenet1_1"]


@pytest.mark.parametrize("name", FORWARD)
def test_builder_forward_shapes(name):
    m = M.get_model(name, num_classes=7, **_kw(name))
    m.eval()
    size = 32 if name.startswith(("vit", "mobilenet", "efficientnet", "resnet", "resnext")) else 64
    with ts.no_grad():
        y = m(ts.randn(2, 3, size, size))
    assert tuple(y.shape) == (2, 7)
    assert bool(ts.isfinite(y).all())


def test_all_builders_listed():
    assert HEAVY <= set(M.list_models()) and set(FORWARD) <= set(M.list_models())
    classic = ("alexnet", "densenet", "efficientnet", "mobilenetv2", "mobilenetv3", "resnet",
               "squeezenet", "vgg", "vision_transformer")  # the later families: their own tests
    mods = [M.get_model_builder(n).__module__ for n in M.list_models()]
    assert sum(m.rsplit(".", 1)[-1] in classic for m in mods
               if ".video." not in m and ".quantization." not in m) == 41 + 3
    # + efficientnet_v2_s/m/l (video.resnet and quantization.*: test_vision_quantized.py)


def test_small_vit_forward():
    from tessera.vision.models.vision_transformer import VisionTransformer
    m = VisionTransformer(16, 8, num_layers=2, num_heads=2, hidden_dim=8, mlp_dim=16,
                          num_classes=3)
    names = list(m.state_dict())
    assert names[:3] == ["class_token", "conv_proj.weight", "conv_proj.bias"]
    assert "encoder.layers.encoder_layer_1.mlp.3.weight" in names
    assert "encoder.layers.encoder_layer_0.self_attention.in_proj_weight" in names
    m.eval()
    with ts.no_grad():
        assert tuple(m(ts.randn(2, 3, 16, 16)).shape) == (2, 3)
    with pytest.raises(ValueError, match="wrong image size"):
        m(ts.randn(1, 3, 8, 8))


@pytest.mark.parametrize("bad", [{"weights": "IMAGENET1K_V1"}, {"pretrained": True}])
def test_weights_refused(bad):
    with pytest.raises(ValueError, match="resnet18: weights=.*not supported"):
        M.resnet18(**bad)
    with pytest.raises(ValueError, match="unknown model"):
        M.get_model("resnet19")


def test_submodules_like_torchvision():
    from tessera.vision.models import densenet, efficientnet, mobilenetv3, resnet, vgg
    assert resnet.resnet50 is M.resnet50 and vgg.vgg16 is M.vgg16
    assert densenet.densenet121 is M.densenet121 and efficientnet.efficientnet_b0
    assert mobilenetv3.mobilenet_v3_small is M.mobilenet_v3_small
    m = M.resnet18(pretrained=False)
    assert m.fc.out_features == 1000


def test_stochastic_depth_train_and_eval():
    from tessera.vision.models._utils import StochasticDepth
    sd = StochasticDepth(0.5, "row")
    x = ts.ones(400, 3)
    sd.eval()
    assert np.array_equal(sd(x).numpy(), x.numpy())
    sd.train()
    y = sd(x).numpy()
    rows = y[:, 0]
    assert set(np.unique(rows)) <= {0.0, 2.0} and (y == rows[:, None]).all()
    assert 100 < (rows == 0).sum() < 300  # Binomial(400, 0.5): 10 standard deviations


# ------------------------------------------------------------------ float64 NumPy resnet18
def _conv(x, w, b, stride, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out if b is None else out + b[None, :, None, None]


def _bn(x, sd, p):
    g, b, m, v = (sd[p + s] for s in (".weight", ".bias", ".running_mean", ".running_var"))
    return (x - m[None, :, None, None]) / np.sqrt(v[None, :, None, None] + 1e-5) * \
        g[None, :, None, None] + b[None, :, None, None]


def _maxpool(x):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    oh, ow = (x.shape[2] - 1) // 2 + 1, (x.shape[3] - 1) // 2 + 1
    return np.max([xp[:, :, i:i + 2 * oh:2, j:j + 2 * ow:2] for i in range(3) for j in range(3)], 0)


def _resnet18_ref(x, sd):
    relu = lambda t: np.maximum(t, 0)  # noqa: E731
    x = _maxpool(relu(_bn(_conv(x, sd["conv1.weight"], None, 2, 3), sd, "bn1")))
    for li in range(1, 5):
        for bi in range(2):
            p = "layer%d.%d" % (li, bi)
            stride = 2 if li > 1 and bi == 0 else 1
            out = relu(_bn(_conv(x, sd[p + ".conv1.weight"], None, stride, 1), sd, p + ".bn1"))
            out = _bn(_conv(out, sd[p + ".conv2.weight"], None, 1, 1), sd, p + ".bn2")
            if p + ".downsample.0.weight" in sd:
                x = _bn(_conv(x, sd[p + ".downsample.0.weight"], None, stride, 0), sd,
                        p + ".downsample.1")
            x = relu(out + x)
    return x.mean((2, 3)) @ sd["fc.weight"].T + sd["fc.bias"]


def test_resnet18_forward_matches_numpy():
    rng = np.random.default_rng(1)
    m = M.resnet18(num_classes=5)
    sd = {}
    for k, v in m.state_dict().items():
        shape = tuple(v.shape)
        if k.endswith("num_batches_tracked"):
            continue
        if k.endswith("running_var") or k.endswith(".weight") and len(shape) == 1:
            sd[k] = rng.uniform(0.5, 1.5, shape)
        elif k.endswith("conv1.weight") or k.endswith("conv2.weight") or "downsample.0" in k:
            sd[k] = rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))
        else:
            sd[k] = rng.standard_normal(shape) * 0.1
    m.load_state_dict({k: ts.tensor(v.astype(np.float32)) for k, v in sd.items()}, strict=False)
    m.eval()
    x = rng.standard_normal((2, 3, 32, 32)).astype(np.float32)
    with ts.no_grad():
        got = m(ts.tensor(x)).numpy().astype(np.float64)
    want = _resnet18_ref(x.astype(np.float64),
                         {k: v.astype(np.float32).astype(np.float64) for k, v in sd.items()})
    # float32 accumulation over 20 layers of K <= 4608 terms: relative 1e-4 of the logit scale
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())
