"""tessera.vision.models' issue-75 builders (ShuffleNetV2, MNASNet, RegNet X/Y, ConvNeXt,
EfficientNetV2, GoogLeNet, Inception v3, Swin V1/V2, MaxViT, segmentation FCN / DeepLabV3 /
LR-ASPP) against torchvision 0.29, without PyTorch:

- every builder's state dict (names, shapes, order; built on the meta device) equals the list
  torchvision gives (tests/data/vision_builders_keys.json.gz);
- eval outputs in float64 equal torchvision's float64 outputs (tests/data/
  vision_builders_ref.safetensors) for shufflenet_v2_x0_5, mnasnet0_5, regnet_x_400mf and small
  configurations of the other families' classes, with every state tensor set by the same exact
  float64 formula on both sides (fill_state);
- weights= / weights_backbone= / list_models / get_model behaviour.

Both data files come from tools/gen_vision_builders_ref.py (run it with
/opt/torch2/bin/torch-python; it holds the torchvision side of everything below).

Tolerance of the output checks: both sides compute in float64 (eps 1.1e-16) with the same
weights; they differ only in summation order, and the float32 runs of these models against
float64 (tools/model_zoo.py) show an amplification of rounding of at most ~1e3, so the expected
difference is ~1e-13 of the output's scale. RTOL = 1e-9 leaves a wide margin for that and is
still 1e6 times below what a wrong weight, a swapped layer or a wrong op changes (>= 1e-3).
"""
import gzip
import json
import os
import warnings

import pytest

import tessera as ts
import tessera.vision.models as M
from tessera.vision.models import segmentation as S

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
KEYS_PATH = os.path.join(DATA, "vision_builders_keys.json.gz")
REF_PATH = os.path.join(DATA, "vision_builders_ref.safetensors")
RTOL = 1e-9
PHI = 0.6180339887498949


def _keys():
    with gzip.open(KEYS_PATH, "rt", encoding="utf-8") as f:
        return json.load(f)


KEYS = _keys()
REFS = ts.load(REF_PATH)


def _builder(name):
    return getattr(S, name) if hasattr(S, name) else getattr(M, name)


@pytest.mark.parametrize("name", sorted(KEYS))
def test_state_dict_matches_torchvision(name):
    spec = KEYS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # googlenet / inception init_weights
        with ts.device("meta"):
            model = _builder(name)(**spec["kwargs"])
    got = [[k, list(v.shape)] for k, v in model.state_dict().items()]
    want = spec["keys"]
    if got != want:
        gk, wk = dict((k, s) for k, s in got), dict((k, s) for k, s in want)
        missing = [k for k in wk if k not in gk][:5]
        extra = [k for k in gk if k not in wk][:5]
        shapes = [(k, gk[k], wk[k]) for k in wk if k in gk and gk[k] != wk[k]][:5]
        pytest.fail("%s: state dict differs from torchvision's: missing %s, unexpected %s, "
                    "shapes (got, want) %s, order same: %s"
                    % (name, missing, extra, shapes, [k for k, _ in got] == list(wk)))


def test_builders_listed():
    names = set(M.list_models())
    assert set(KEYS) <= names, sorted(set(KEYS) - names)
    assert M.get_model_builder("fcn_resnet50") is S.fcn_resnet50
    assert M.get_model_builder("swin_v2_t") is M.swin_v2_t


# ---- exact outputs ------------------------------------------------------------------------

def pattern(n, j):
    """tools/gen_vision_builders_ref.py's pattern: 2 * frac(i * PHI + j * 0.1234) - 1, exact"""
    x = ts.arange(n, dtype=ts.float64) * PHI + j * 0.1234
    return 2.0 * (x - ts.floor(x)) - 1.0


def fill_state(model):
    """the generator's fill_state: each floating state tensor (j = its state_dict index)"""
    with ts.no_grad():
        for j, (k, t) in enumerate(model.state_dict().items()):
            if not t.dtype.is_floating_point or k.endswith("relative_coords_table"):
                continue  # (Swin V2's table: a computed constant, checked as computed)
            v = pattern(t.numel(), j).reshape(tuple(t.shape))
            leaf = k.rsplit(".", 1)[-1]
            if leaf == "running_var":
                v = 0.5 + v * v
            elif leaf in ("running_mean", "bias"):
                v = 0.1 * v
            elif t.dim() == 1:
                v = 1.0 + 0.2 * v
            else:
                v = v * (3.0 / (t.numel() // t.shape[0])) ** 0.5
            t.copy_(v.to(t.dtype))


def _tiny(name):
    """tools/gen_vision_builders_ref.py's tiny_models(), built with tessera: (model, side)"""
    from tessera.vision.models.convnext import CNBlockConfig
    from tessera.vision.models.efficientnet import FusedMBConvConfig, MBConvConfig
    from tessera.vision.models.regnet import BlockParams
    from tessera.vision.models.swin_transformer import PatchMergingV2, SwinTransformerBlockV2
    swin = dict(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                window_size=[3, 3], stochastic_depth_prob=0.0, num_classes=10)
    if name == "tiny_regnet_y":
        return M.RegNet(BlockParams.from_init_params(depth=4, w_0=16, w_a=8.0, w_m=2.0,
                                                     group_width=8, se_ratio=0.25),
                        stem_width=16, num_classes=10), 32
    if name == "tiny_convnext":
        return M.ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)],
                          num_classes=10), 32
    if name == "tiny_efficientnet_v2":
        return M.EfficientNet([FusedMBConvConfig(1, 3, 1, 16, 16, 1),
                               FusedMBConvConfig(4, 3, 2, 16, 24, 2),
                               MBConvConfig(4, 3, 2, 24, 32, 1)], 0.0, last_channel=64,
                              num_classes=10), 32
    if name == "tiny_googlenet":
        return M.GoogLeNet(num_classes=10, aux_logits=False, init_weights=False), 32
    if name == "tiny_swin":
        return M.SwinTransformer(**swin), 32
    if name == "tiny_swin_v2":
        return M.SwinTransformer(block=SwinTransformerBlockV2, downsample_layer=PatchMergingV2,
                                 **swin), 32
    if name == "tiny_maxvit":
        return M.MaxVit(input_size=(28, 28), stem_channels=8, partition_size=7,
                        block_channels=[16], block_layers=[1], head_dim=8,
                        stochastic_depth_prob=0.0, num_classes=10), 28
    if name == "deeplabv3_mobilenet_v3_large":
        return S.deeplabv3_mobilenet_v3_large(num_classes=5, aux_loss=True), 32
    if name == "lraspp_mobilenet_v3_large":
        return S.lraspp_mobilenet_v3_large(num_classes=5), 32
    return M.get_model(name), 32


OUTPUT_MODELS = ["shufflenet_v2_x0_5", "mnasnet0_5", "regnet_x_400mf", "tiny_regnet_y",
                 "tiny_convnext", "tiny_efficientnet_v2", "tiny_googlenet", "tiny_swin",
                 "tiny_swin_v2", "tiny_maxvit", "deeplabv3_mobilenet_v3_large",
                 "lraspp_mobilenet_v3_large"]


def test_pattern_matches_generator():
    x = pattern(2 * 3 * 32 * 32, -1).reshape(2, 3, 32, 32).float()
    assert ts.equal(x, REFS["shufflenet_v2_x0_5/input"])


def _rel_err(a, r):
    return float((a - r).abs().max()) / max(float(r.abs().max()), 1e-300)


@pytest.mark.parametrize("name", OUTPUT_MODELS)
def test_eval_output_matches_torchvision(name):
    model, side = _tiny(name)
    model.eval()
    fill_state(model)
    model = model.double()
    x = pattern(2 * 3 * side * side, -1).reshape(2, 3, side, side).float().double()
    with ts.no_grad():
        out = model(x)
    outs = dict(out) if isinstance(out, dict) else {"out": out}
    want = sorted(k.split("/", 1)[1] for k in REFS if k.startswith(name + "/")
                  and not k.endswith("/input"))
    assert sorted(outs) == want
    for key in want:
        ref = REFS["%s/%s" % (name, key)]
        assert tuple(outs[key].shape) == tuple(ref.shape), key
        err = _rel_err(outs[key], ref)
        assert err <= RTOL, "%s[%s]: max|out - ref| / max|ref| = %.3g" % (name, key, err)


# ---- arguments ------------------------------------------------------------------------------

def test_weights_and_backbone_weights_refused():
    with pytest.raises(ValueError, match="weights="):
        M.shufflenet_v2_x0_5(weights="IMAGENET1K_V1")
    with pytest.raises(ValueError, match="weights_backbone="):
        S.fcn_resnet50(weights_backbone="IMAGENET1K_V1")
    with pytest.raises(NotImplementedError, match="auxiliary"):
        S.lraspp_mobilenet_v3_large(aux_loss=True)
    with pytest.raises(TypeError, match="unexpected"):
        S.deeplabv3_resnet50(bogus=1)


def test_googlenet_inception_training_outputs():
    g = M.googlenet(num_classes=3, init_weights=False).train()
    out = g(ts.randn(2, 3, 64, 64))
    assert type(out).__name__ == "GoogLeNetOutputs" and tuple(out.aux_logits1.shape) == (2, 3)
    assert tuple(g.eval()(ts.randn(1, 3, 32, 32)).shape) == (1, 3)
    m = M.inception_v3(num_classes=3, aux_logits=False, init_weights=False).eval()
    assert tuple(m(ts.randn(1, 3, 75, 75)).shape) == (1, 3)


def test_maxvit_input_size_checked():
    with pytest.raises(ValueError, match="not divisible by partition size"):
        M.maxvit_t(input_size=(64, 64))
