"""torchvision.models.efficientnet: EfficientNet B0-B7 (v1: MBConv) and V2 S / M / L (FusedMBConv
stages, then MBConv)."""
import copy
import math
from functools import partial

import tessera as ts
from tessera import nn

from ._utils import (Conv2dNormActivation, SqueezeExcitation, StochasticDepth, _check_weights,
                     _make_divisible)

__all__ = (["EfficientNet"] + ["efficientnet_b%d" % i for i in range(8)]
           + ["efficientnet_v2_s", "efficientnet_v2_m", "efficientnet_v2_l"])


class MBConvConfig:
    def __init__(self, expand_ratio, kernel, stride, input_channels, out_channels, num_layers,
                 width_mult=1.0, depth_mult=1.0):
        self.expand_ratio = expand_ratio
        self.kernel = kernel
        self.stride = stride
        self.input_channels = self.adjust_channels(input_channels, width_mult)
        self.out_channels = self.adjust_channels(out_channels, width_mult)
        self.num_layers = int(math.ceil(num_layers * depth_mult))
        self.block = MBConv

    @staticmethod
    def adjust_channels(channels, width_mult, min_value=None):
        return _make_divisible(channels * width_mult, 8, min_value)


class MBConv(nn.Module):
    def __init__(self, cnf, stochastic_depth_prob, norm_layer, se_layer=SqueezeExcitation):
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError("MBConv: illegal stride value %r" % (cnf.stride,))
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        act = nn.SiLU
        layers = []
        expanded = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        if expanded != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, expanded, kernel_size=1,
                                               norm_layer=norm_layer, activation_layer=act))
        layers.append(Conv2dNormActivation(expanded, expanded, kernel_size=cnf.kernel,
                                           stride=cnf.stride, groups=expanded,
                                           norm_layer=norm_layer, activation_layer=act))
        layers.append(se_layer(expanded, max(1, cnf.input_channels // 4),
                               activation=partial(nn.SiLU, inplace=True)))
        layers.append(Conv2dNormActivation(expanded, cnf.out_channels, kernel_size=1,
                                           norm_layer=norm_layer, activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.out_channels = cnf.out_channels

    def forward(self, x):
        result = self.block(x)
        if self.use_res_connect:
            result = self.stochastic_depth(result) + x
        return result


class FusedMBConvConfig(MBConvConfig):
    """a FusedMBConv stage (EfficientNetV2): no width / depth multipliers"""

    def __init__(self, expand_ratio, kernel, stride, input_channels, out_channels, num_layers,
                 block=None):
        super().__init__(expand_ratio, kernel, stride, input_channels, out_channels, num_layers)
        self.block = block or FusedMBConv


class FusedMBConv(nn.Module):
    """EfficientNetV2's block: a full kxk conv expands (or maps straight to the output), then a
    1x1 projection; residual with stochastic depth when shapes agree"""

    def __init__(self, cnf, stochastic_depth_prob, norm_layer):
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError("FusedMBConv: illegal stride value %r" % (cnf.stride,))
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        expanded = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        if expanded != cnf.input_channels:
            layers = [Conv2dNormActivation(cnf.input_channels, expanded, kernel_size=cnf.kernel,
                                           stride=cnf.stride, norm_layer=norm_layer,
                                           activation_layer=nn.SiLU),
                      Conv2dNormActivation(expanded, cnf.out_channels, kernel_size=1,
                                           norm_layer=norm_layer, activation_layer=None)]
        else:
            layers = [Conv2dNormActivation(cnf.input_channels, cnf.out_channels,
                                           kernel_size=cnf.kernel, stride=cnf.stride,
                                           norm_layer=norm_layer, activation_layer=nn.SiLU)]
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.out_channels = cnf.out_channels

    def forward(self, x):
        result = self.block(x)
        if self.use_res_connect:
            result = self.stochastic_depth(result) + x
        return result


class EfficientNet(nn.Module):
    def __init__(self, inverted_residual_setting, dropout, stochastic_depth_prob=0.2,
                 num_classes=1000, norm_layer=None, last_channel=None):
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("EfficientNet: the inverted_residual_setting should not be empty")
        norm_layer = norm_layer or nn.BatchNorm2d
        first = inverted_residual_setting[0].input_channels
        layers = [Conv2dNormActivation(3, first, kernel_size=3, stride=2, norm_layer=norm_layer,
                                       activation_layer=nn.SiLU)]
        total = sum(cnf.num_layers for cnf in inverted_residual_setting)
        block_id = 0
        for cnf in inverted_residual_setting:
            stage = []
            for _ in range(cnf.num_layers):
                block_cnf = copy.copy(cnf)
                if stage:
                    block_cnf.input_channels = block_cnf.out_channels
                    block_cnf.stride = 1
                sd_prob = stochastic_depth_prob * float(block_id) / total
                stage.append(block_cnf.block(block_cnf, sd_prob, norm_layer))
                block_id += 1
            layers.append(nn.Sequential(*stage))
        lastconv_in = inverted_residual_setting[-1].out_channels
        lastconv_out = last_channel if last_channel is not None else 4 * lastconv_in
        layers.append(Conv2dNormActivation(lastconv_in, lastconv_out, kernel_size=1,
                                           norm_layer=norm_layer, activation_layer=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True),
                                        nn.Linear(lastconv_out, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                r = 1.0 / math.sqrt(m.out_features)
                nn.init.uniform_(m.weight, -r, r)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.classifier(ts.flatten(self.avgpool(self.features(x)), 1))


_CONFIGS = {  # name: (width_mult, depth_mult, dropout)
    "efficientnet_b0": (1.0, 1.0, 0.2), "efficientnet_b1": (1.0, 1.1, 0.2),
    "efficientnet_b2": (1.1, 1.2, 0.3), "efficientnet_b3": (1.2, 1.4, 0.3),
    "efficientnet_b4": (1.4, 1.8, 0.4), "efficientnet_b5": (1.6, 2.2, 0.4),
    "efficientnet_b6": (1.8, 2.6, 0.5), "efficientnet_b7": (2.0, 3.1, 0.5),
}


def _efficientnet(arch, weights, kwargs):
    _check_weights(arch, weights, kwargs)
    width, depth, dropout = _CONFIGS[arch]
    c = partial(MBConvConfig, width_mult=width, depth_mult=depth)
    setting = [c(1, 3, 1, 32, 16, 1), c(6, 3, 2, 16, 24, 2), c(6, 5, 2, 24, 40, 2),
               c(6, 3, 2, 40, 80, 3), c(6, 5, 1, 80, 112, 3), c(6, 5, 2, 112, 192, 4),
               c(6, 3, 1, 192, 320, 1)]
    if arch in ("efficientnet_b5", "efficientnet_b6", "efficientnet_b7"):
        kwargs.setdefault("norm_layer", partial(nn.BatchNorm2d, eps=0.001, momentum=0.01))
    return EfficientNet(setting, kwargs.pop("dropout", dropout), **kwargs)


_V2 = {  # name: (stage settings (fused?, expand, kernel, stride, in, out, layers), dropout)
    "efficientnet_v2_s": (((1, 1, 3, 1, 24, 24, 2), (1, 4, 3, 2, 24, 48, 4),
                           (1, 4, 3, 2, 48, 64, 4), (0, 4, 3, 2, 64, 128, 6),
                           (0, 6, 3, 1, 128, 160, 9), (0, 6, 3, 2, 160, 256, 15)), 0.2),
    "efficientnet_v2_m": (((1, 1, 3, 1, 24, 24, 3), (1, 4, 3, 2, 24, 48, 5),
                           (1, 4, 3, 2, 48, 80, 5), (0, 4, 3, 2, 80, 160, 7),
                           (0, 6, 3, 1, 160, 176, 14), (0, 6, 3, 2, 176, 304, 18),
                           (0, 6, 3, 1, 304, 512, 5)), 0.3),
    "efficientnet_v2_l": (((1, 1, 3, 1, 32, 32, 4), (1, 4, 3, 2, 32, 64, 7),
                           (1, 4, 3, 2, 64, 96, 7), (0, 4, 3, 2, 96, 192, 10),
                           (0, 6, 3, 1, 192, 224, 19), (0, 6, 3, 2, 224, 384, 25),
                           (0, 6, 3, 1, 384, 640, 7)), 0.4),
}


def _efficientnet_v2(arch, weights, kwargs):
    _check_weights(arch, weights, kwargs)
    stages, dropout = _V2[arch]
    setting = [(FusedMBConvConfig if fused else MBConvConfig)(*rest) for fused, *rest in stages]
    kwargs.setdefault("norm_layer", partial(nn.BatchNorm2d, eps=1e-03))
    return EfficientNet(setting, kwargs.pop("dropout", dropout), last_channel=1280, **kwargs)


def efficientnet_b0(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b0", weights, kwargs)


def efficientnet_b1(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b1", weights, kwargs)


def efficientnet_b2(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b2", weights, kwargs)


def efficientnet_b3(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b3", weights, kwargs)


def efficientnet_b4(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b4", weights, kwargs)


def efficientnet_b5(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b5", weights, kwargs)


def efficientnet_b6(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b6", weights, kwargs)


def efficientnet_b7(*, weights=None, progress=True, **kwargs):
    return _efficientnet("efficientnet_b7", weights, kwargs)


def efficientnet_v2_s(*, weights=None, progress=True, **kwargs):
    return _efficientnet_v2("efficientnet_v2_s", weights, kwargs)


def efficientnet_v2_m(*, weights=None, progress=True, **kwargs):
    return _efficientnet_v2("efficientnet_v2_m", weights, kwargs)


def efficientnet_v2_l(*, weights=None, progress=True, **kwargs):
    return _efficientnet_v2("efficientnet_v2_l", weights, kwargs)
