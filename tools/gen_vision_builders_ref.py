"""gen_vision_builders_ref.py — the torchvision references of
tests/python/test_vision_models_builders.py (issue 75), made with PyTorch 2.15 / torchvision 0.29 (run with /opt/torch2/bin/torch-python):

  tests/data/vision_builders_keys.json.gz
                                         per builder: the state dict's [name, shape] list (params
                                         and buffers, in order), built on the meta device (JSON,
                                         one builder a line, gzip: 60 kB instead of 1 MB)
  tests/data/vision_builders_ref.safetensors
                                         for a few cheap builders (REF_MODELS) and small
                                         configurations of the other families (tiny_models()) on
                                         the input pattern(2*3*S*S, -1) as [2, 3, S, S]:
                                         the float64 eval output ("MODEL/out", segmentation also
                                         "MODEL/aux") of the model whose every floating
                                         state tensor is set by fill_state() below: a formula in
                                         exact float64 arithmetic (a golden-ratio sequence), so the
                                         test rebuilds the same weights without storing megabytes

  /opt/torch2/bin/torch-python tools/gen_vision_builders_ref.py            # both files
  /opt/torch2/bin/torch-python tools/gen_vision_builders_ref.py refs       # only the outputs
  /opt/torch2/bin/torch-python tools/gen_vision_builders_ref.py keys NAME  # print one key list
"""
import gzip
import io
import json
import os
import sys

import torch
import torchvision

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")

CLASSIFICATION = (
    ["shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0",
     "mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3"]
    + ["regnet_y_" + s for s in ("400mf", "800mf", "1_6gf", "3_2gf", "8gf", "16gf", "32gf",
                                 "128gf")]
    + ["regnet_x_" + s for s in ("400mf", "800mf", "1_6gf", "3_2gf", "8gf", "16gf", "32gf")]
    + ["convnext_tiny", "convnext_small", "convnext_base", "convnext_large",
       "efficientnet_v2_s", "efficientnet_v2_m", "efficientnet_v2_l", "googlenet", "inception_v3",
       "swin_t", "swin_s", "swin_b", "swin_v2_t", "swin_v2_s", "swin_v2_b", "maxvit_t"])
SEGMENTATION = ["fcn_resnet50", "fcn_resnet101", "deeplabv3_resnet50", "deeplabv3_resnet101",
                "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large"]
# kwargs the keys are listed with (torchvision's defaults otherwise); the test builds the same
KWARGS = {"fcn_resnet50": dict(aux_loss=True), "deeplabv3_resnet50": dict(aux_loss=True),
          "deeplabv3_mobilenet_v3_large": dict(aux_loss=True)}
REF_MODELS = ["shufflenet_v2_x0_5", "mnasnet0_5", "regnet_x_400mf"]


def tiny_models(tv):
    """small configurations of the heavier families' classes (the test builds the same with
    tessera.vision.models): name -> (model, input side)"""
    M = tv.models
    from torchvision.models.convnext import CNBlockConfig
    from torchvision.models.efficientnet import FusedMBConvConfig, MBConvConfig
    from torchvision.models.regnet import BlockParams
    from torchvision.models.swin_transformer import PatchMergingV2, SwinTransformerBlockV2
    swin = dict(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                window_size=[3, 3], stochastic_depth_prob=0.0, num_classes=10)
    return {
        "tiny_regnet_y": (M.RegNet(BlockParams.from_init_params(
            depth=4, w_0=16, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25), stem_width=16,
            num_classes=10), 32),
        "tiny_convnext": (M.ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)],
                                     num_classes=10), 32),
        "tiny_efficientnet_v2": (M.EfficientNet(
            [FusedMBConvConfig(1, 3, 1, 16, 16, 1), FusedMBConvConfig(4, 3, 2, 16, 24, 2),
             MBConvConfig(4, 3, 2, 24, 32, 1)], 0.0, last_channel=64, num_classes=10), 32),
        "tiny_googlenet": (M.GoogLeNet(num_classes=10, aux_logits=False, init_weights=False), 32),
        "tiny_swin": (M.SwinTransformer(**swin), 32),
        "tiny_swin_v2": (M.SwinTransformer(block=SwinTransformerBlockV2,
                                           downsample_layer=PatchMergingV2, **swin), 32),
        "tiny_maxvit": (M.MaxVit(input_size=(28, 28), stem_channels=8, partition_size=7,
                                 block_channels=[16], block_layers=[1], head_dim=8,
                                 stochastic_depth_prob=0.0, num_classes=10), 28),
        "deeplabv3_mobilenet_v3_large": (M.segmentation.deeplabv3_mobilenet_v3_large(
            weights=None, weights_backbone=None, num_classes=5, aux_loss=True), 32),
        "lraspp_mobilenet_v3_large": (M.segmentation.lraspp_mobilenet_v3_large(
            weights=None, weights_backbone=None, num_classes=5), 32),
    }


def build(name, **kw):
    kw = dict(KWARGS.get(name, {}), **kw)
    if name in SEGMENTATION:
        kw.setdefault("weights_backbone", None)
    return torchvision.models.get_model(name, weights=None, **kw)


def key_list(name):
    try:
        with torch.device("meta"):
            m = build(name)
    except NotImplementedError:  # RegNet's width rule reads a tensor back (.tolist())
        m = build(name)
    return [[k, list(v.shape)] for k, v in m.state_dict().items()]


def write_keys():
    out = {}
    for name in CLASSIFICATION + SEGMENTATION:
        out[name] = dict(kwargs=KWARGS.get(name, {}), keys=key_list(name))
        print(name, len(out[name]["keys"]), flush=True)
    path = os.path.join(DATA, "vision_builders_keys.json.gz")
    # one builder a line (zcat | diff shows which changed); mtime 0: the same bytes every run
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as gz, \
            io.TextIOWrapper(gz, encoding="utf-8") as f:
        f.write("{\n" + ",\n".join("%s: %s" % (json.dumps(k), json.dumps(v, separators=(",", ":")))
                                   for k, v in out.items()) + "\n}\n")
    print("wrote", path, os.path.getsize(path), "bytes")


PHI = 0.6180339887498949


def pattern(n, j):
    """n values in [-1, 1): 2 * frac(i * PHI + j * 0.1234) - 1 (every step exact in float64 for
    the sizes used, so any library computes the same bits)"""
    x = torch.arange(n, dtype=torch.float64) * PHI + j * 0.1234
    return 2.0 * (x - torch.floor(x)) - 1.0


def fill_state(model):
    """every floating state tensor but Swin V2's relative_coords_table, in state_dict order
    (j = its index), from pattern():
    running_var 0.5 + v^2, running_mean 0.1 v, 1-D weight 1 + 0.2 v, bias 0.1 v,
    other tensors v * sqrt(3 / fan_in)"""
    with torch.no_grad():
        for j, (k, t) in enumerate(model.state_dict().items()):
            if not t.dtype.is_floating_point or k.endswith("relative_coords_table"):
                continue  # (Swin V2's table: a computed constant, checked as computed)
            v = pattern(t.numel(), j).reshape(t.shape)
            leaf = k.rsplit(".", 1)[-1]
            if leaf == "running_var":
                v = 0.5 + v * v
            elif leaf == "running_mean" or leaf == "bias":
                v = 0.1 * v
            elif t.dim() == 1:
                v = 1.0 + 0.2 * v
            else:
                v = v * (3.0 / (t.numel() // t.shape[0])) ** 0.5
            t.copy_(v.to(t.dtype))


def write_refs():
    from safetensors.torch import save_file
    tensors = {}
    models = [(name, build(name), 32) for name in REF_MODELS]
    models += [(name, m, side) for name, (m, side) in tiny_models(torchvision).items()]
    for name, m, side in models:
        m.eval()
        fill_state(m)
        x = pattern(2 * 3 * side * side, -1).reshape(2, 3, side, side).float()
        if not tensors:  # one input stored: the test checks its pattern() against it
            tensors[name + "/input"] = x
        with torch.no_grad():
            out = m.double()(x.double())
        for key, t in (out.items() if isinstance(out, dict) else [("out", out)]):
            tensors["%s/%s" % (name, key)] = t.contiguous()
            print(name, key, tuple(t.shape), flush=True)
    path = os.path.join(DATA, "vision_builders_ref.safetensors")
    save_file(tensors, path)
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    if sys.argv[1:2] == ["keys"]:
        for k, s in key_list(sys.argv[2]):
            print(k, s)
    elif sys.argv[1:2] == ["refs"]:
        write_refs()
    else:
        write_keys()
        write_refs()
