"""tessera.vision.models.detection.backbone_utils — feature extractors for the detectors:
IntermediateLayerGetter (a model's children up to the last returned one, returning a dict),
BackboneWithFPN (that plus a FeaturePyramidNetwork), resnet_fpn_backbone / mobilenet_backbone
and their _extractor forms with torchvision's freezing of the first layers."""
from collections import OrderedDict

from tessera import nn

from ...ops import misc as misc_nn_ops
from ...ops.feature_pyramid_network import (ExtraFPNBlock, FeaturePyramidNetwork,  # noqa: F401
                                           LastLevelMaxPool)
from .. import mobilenetv2, mobilenetv3, resnet

__all__ = ["IntermediateLayerGetter", "BackboneWithFPN", "resnet_fpn_backbone",
           "mobilenet_backbone"]


class IntermediateLayerGetter(nn.ModuleDict):
    """torchvision.models._utils.IntermediateLayerGetter: model's direct children in order, up
    to the last key of return_layers; forward returns {return_layers[name]: output}."""

    def __init__(self, model, return_layers):
        names = [n for n, _ in model.named_children()]
        if not set(return_layers).issubset(names):
            raise ValueError("return_layers are not present in model: %s"
                             % sorted(set(return_layers) - set(names)))
        orig = dict(return_layers)
        remaining = dict(return_layers)
        layers = OrderedDict()
        for name, module in model.named_children():
            layers[name] = module
            remaining.pop(name, None)
            if not remaining:
                break
        super().__init__(layers)
        self.return_layers = orig

    def forward(self, x):
        out = OrderedDict()
        for name, module in self.items():
            x = module(x)
            if name in self.return_layers:
                out[self.return_layers[name]] = x
        return out


class BackboneWithFPN(nn.Module):
    def __init__(self, backbone, return_layers, in_channels_list, out_channels,
                 extra_blocks=None, norm_layer=None):
        super().__init__()
        if extra_blocks is None:
            extra_blocks = LastLevelMaxPool()
        self.body = IntermediateLayerGetter(backbone, return_layers=return_layers)
        self.fpn = FeaturePyramidNetwork(in_channels_list=in_channels_list,
                                         out_channels=out_channels, extra_blocks=extra_blocks,
                                         norm_layer=norm_layer)
        self.out_channels = out_channels

    def forward(self, x):
        return self.fpn(self.body(x))


def _no_weights(name, weights):
    if weights is not None:
        raise ValueError("tessera.vision.models.detection.%s: weights=%r is not supported "
                         "(tessera downloads nothing); load a local checkpoint instead"
                         % (name, weights))


def resnet_fpn_backbone(*, backbone_name, weights=None, norm_layer=misc_nn_ops.FrozenBatchNorm2d,
                        trainable_layers=3, returned_layers=None, extra_blocks=None):
    _no_weights("resnet_fpn_backbone", weights)
    backbone = getattr(resnet, backbone_name)(weights=None, norm_layer=norm_layer)
    return _resnet_fpn_extractor(backbone, trainable_layers, returned_layers, extra_blocks)


def _resnet_fpn_extractor(backbone, trainable_layers, returned_layers=None, extra_blocks=None,
                          norm_layer=None):
    if trainable_layers < 0 or trainable_layers > 5:
        raise ValueError("Trainable layers should be in the range [0,5], got %d"
                         % trainable_layers)
    to_train = ["layer4", "layer3", "layer2", "layer1", "conv1"][:trainable_layers]
    if trainable_layers == 5:
        to_train.append("bn1")
    for name, p in backbone.named_parameters():
        if all(not name.startswith(layer) for layer in to_train):
            p.requires_grad_(False)
    if extra_blocks is None:
        extra_blocks = LastLevelMaxPool()
    if returned_layers is None:
        returned_layers = [1, 2, 3, 4]
    if min(returned_layers) <= 0 or max(returned_layers) >= 5:
        raise ValueError("Each returned layer should be in the range [1,4]. Got %s"
                         % (returned_layers,))
    return_layers = {f"layer{k}": str(v) for v, k in enumerate(returned_layers)}
    stage2 = backbone.inplanes // 8
    in_channels_list = [stage2 * 2 ** (i - 1) for i in returned_layers]
    return BackboneWithFPN(backbone, return_layers, in_channels_list, 256,
                           extra_blocks=extra_blocks, norm_layer=norm_layer)


def _validate_trainable_layers(is_trained, trainable_backbone_layers, max_value, default_value):
    if not is_trained:
        trainable_backbone_layers = max_value
    if trainable_backbone_layers is None:
        trainable_backbone_layers = default_value
    if trainable_backbone_layers < 0 or trainable_backbone_layers > max_value:
        raise ValueError("Trainable backbone layers should be in the range [0,%d], got %d"
                         % (max_value, trainable_backbone_layers))
    return trainable_backbone_layers


def mobilenet_backbone(*, backbone_name, weights=None, fpn,
                       norm_layer=misc_nn_ops.FrozenBatchNorm2d, trainable_layers=2,
                       returned_layers=None, extra_blocks=None):
    _no_weights("mobilenet_backbone", weights)
    mods = {"mobilenet_v2": mobilenetv2.mobilenet_v2,
            "mobilenet_v3_large": mobilenetv3.mobilenet_v3_large,
            "mobilenet_v3_small": mobilenetv3.mobilenet_v3_small}
    if backbone_name not in mods:
        raise ValueError("mobilenet_backbone: unknown backbone_name %r" % (backbone_name,))
    backbone = mods[backbone_name](weights=None, norm_layer=norm_layer)
    return _mobilenet_extractor(backbone, fpn, trainable_layers, returned_layers, extra_blocks)


def _mobilenet_extractor(backbone, fpn, trainable_layers, returned_layers=None,
                         extra_blocks=None, norm_layer=None):
    backbone = backbone.features
    stage_indices = ([0] + [i for i, b in enumerate(backbone) if getattr(b, "_is_cn", False)]
                     + [len(backbone) - 1])
    num_stages = len(stage_indices)
    if trainable_layers < 0 or trainable_layers > num_stages:
        raise ValueError("Trainable layers should be in the range [0,%d], got %d"
                         % (num_stages, trainable_layers))
    freeze_before = (len(backbone) if trainable_layers == 0
                     else stage_indices[num_stages - trainable_layers])
    for b in list(backbone)[:freeze_before]:
        for p in b.parameters():
            p.requires_grad_(False)
    out_channels = 256
    if fpn:
        if extra_blocks is None:
            extra_blocks = LastLevelMaxPool()
        if returned_layers is None:
            returned_layers = [num_stages - 2, num_stages - 1]
        if min(returned_layers) < 0 or max(returned_layers) >= num_stages:
            raise ValueError("Each returned layer should be in the range [0,%d], got %s"
                             % (num_stages - 1, returned_layers))
        return_layers = {f"{stage_indices[k]}": str(v) for v, k in enumerate(returned_layers)}
        in_channels_list = [backbone[stage_indices[i]].out_channels for i in returned_layers]
        return BackboneWithFPN(backbone, return_layers, in_channels_list, out_channels,
                               extra_blocks=extra_blocks, norm_layer=norm_layer)
    m = nn.Sequential(backbone, nn.Conv2d(backbone[-1].out_channels, out_channels, 1))
    m.out_channels = out_channels
    return m
