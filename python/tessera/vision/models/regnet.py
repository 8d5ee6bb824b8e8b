"""torchvision.models.regnet: RegNetX / RegNetY (400MF ... 128GF) with torchvision's module and
state-dict names (stem, trunk_output.blockN.blockN-i.{proj,f.{a,b,se,c}}, fc)."""
import math
from collections import OrderedDict
from functools import partial

import tessera as ts
from tessera import nn

from ._utils import Conv2dNormActivation, SqueezeExcitation, _check_weights, _make_divisible

__all__ = ["RegNet", "BlockParams"] + ["regnet_y_" + s for s in (
    "400mf", "800mf", "1_6gf", "3_2gf", "8gf", "16gf", "32gf", "128gf")] + [
    "regnet_x_" + s for s in ("400mf", "800mf", "1_6gf", "3_2gf", "8gf", "16gf", "32gf")]


class SimpleStemIN(Conv2dNormActivation):
    """3x3 stride-2 conv, norm, activation"""

    def __init__(self, width_in, width_out, norm_layer, activation_layer):
        super().__init__(width_in, width_out, kernel_size=3, stride=2, norm_layer=norm_layer,
                         activation_layer=activation_layer)


class BottleneckTransform(nn.Sequential):
    """1x1, grouped 3x3 [+ squeeze-excitation], 1x1"""

    def __init__(self, width_in, width_out, stride, norm_layer, activation_layer, group_width,
                 bottleneck_multiplier, se_ratio):
        layers = OrderedDict()
        w_b = int(round(width_out * bottleneck_multiplier))
        g = w_b // group_width
        layers["a"] = Conv2dNormActivation(width_in, w_b, kernel_size=1, stride=1,
                                           norm_layer=norm_layer, activation_layer=activation_layer)
        layers["b"] = Conv2dNormActivation(w_b, w_b, kernel_size=3, stride=stride, groups=g,
                                           norm_layer=norm_layer, activation_layer=activation_layer)
        if se_ratio:
            layers["se"] = SqueezeExcitation(w_b, int(round(se_ratio * width_in)),
                                             activation=activation_layer)
        layers["c"] = Conv2dNormActivation(w_b, width_out, kernel_size=1, stride=1,
                                           norm_layer=norm_layer, activation_layer=None)
        super().__init__(layers)


class ResBottleneckBlock(nn.Module):
    """activation(x + f(x)), x projected (1x1 conv + norm) when the width or stride changes"""

    def __init__(self, width_in, width_out, stride, norm_layer, activation_layer, group_width=1,
                 bottleneck_multiplier=1.0, se_ratio=None):
        super().__init__()
        self.proj = None
        if width_in != width_out or stride != 1:
            self.proj = Conv2dNormActivation(width_in, width_out, kernel_size=1, stride=stride,
                                             norm_layer=norm_layer, activation_layer=None)
        self.f = BottleneckTransform(width_in, width_out, stride, norm_layer, activation_layer,
                                     group_width, bottleneck_multiplier, se_ratio)
        self.activation = activation_layer(inplace=True)

    def forward(self, x):
        x = self.proj(x) + self.f(x) if self.proj is not None else x + self.f(x)
        return self.activation(x)


class AnyStage(nn.Sequential):
    """blocks of one output width; the first one strided"""

    def __init__(self, width_in, width_out, stride, depth, block_constructor, norm_layer,
                 activation_layer, group_width, bottleneck_multiplier, se_ratio=None,
                 stage_index=0):
        super().__init__()
        for i in range(depth):
            self.add_module("block%d-%d" % (stage_index, i), block_constructor(
                width_in if i == 0 else width_out, width_out, stride if i == 0 else 1, norm_layer,
                activation_layer, group_width, bottleneck_multiplier, se_ratio))


class BlockParams:
    def __init__(self, depths, widths, group_widths, bottleneck_multipliers, strides,
                 se_ratio=None):
        self.depths = depths
        self.widths = widths
        self.group_widths = group_widths
        self.bottleneck_multipliers = bottleneck_multipliers
        self.strides = strides
        self.se_ratio = se_ratio

    @classmethod
    def from_init_params(cls, depth, w_0, w_a, w_m, group_width, bottleneck_multiplier=1.0,
                         se_ratio=None, **kwargs):
        """the per-stage settings of the quantized linear width rule (RegNet paper), computed
        in float32 tensors as torchvision does, so that the rounding agrees"""
        quant, stride = 8, 2
        if w_a < 0 or w_0 <= 0 or w_m <= 1 or w_0 % 8 != 0:
            raise ValueError("RegNet: invalid settings w_0=%r w_a=%r w_m=%r" % (w_0, w_a, w_m))
        widths_cont = ts.arange(depth, device="cpu") * w_a + w_0  # not on meta
        capacity = ts.round(ts.log(widths_cont / w_0) / math.log(w_m))
        block_widths = (ts.round(ts.pow(w_m, capacity) * w_0 / quant) * quant).int().tolist()
        num_stages = len(set(block_widths))
        splits = [w != wp for w, wp in zip(block_widths + [0], [0] + block_widths)]
        stage_widths = [w for w, t in zip(block_widths, splits[:-1]) if t]
        starts = [d for d, t in enumerate(splits) if t]
        stage_depths = [b - a for a, b in zip(starts[:-1], starts[1:])]
        mults = [bottleneck_multiplier] * num_stages
        stage_widths, group_widths = cls._adjust_widths_groups_compatibilty(
            stage_widths, mults, [group_width] * num_stages)
        return cls(stage_depths, stage_widths, group_widths, mults, [stride] * num_stages,
                   se_ratio)

    def _get_expanded_params(self):
        return zip(self.widths, self.strides, self.depths, self.group_widths,
                   self.bottleneck_multipliers)

    @staticmethod
    def _adjust_widths_groups_compatibilty(stage_widths, bottleneck_ratios, group_widths):
        widths = [int(w * b) for w, b in zip(stage_widths, bottleneck_ratios)]
        group_min = [min(g, w) for g, w in zip(group_widths, widths)]
        ws_bot = [_make_divisible(w, g) for w, g in zip(widths, group_min)]
        return [int(w / b) for w, b in zip(ws_bot, bottleneck_ratios)], group_min


class RegNet(nn.Module):
    def __init__(self, block_params, num_classes=1000, stem_width=32, stem_type=None,
                 block_type=None, norm_layer=None, activation=None):
        super().__init__()
        stem_type = stem_type or SimpleStemIN
        norm_layer = norm_layer or nn.BatchNorm2d
        block_type = block_type or ResBottleneckBlock
        activation = activation or nn.ReLU
        self.stem = stem_type(3, stem_width, norm_layer, activation)
        width = stem_width
        blocks = []
        for i, (w_out, stride, depth, gw, bm) in enumerate(block_params._get_expanded_params()):
            blocks.append(("block%d" % (i + 1), AnyStage(
                width, w_out, stride, depth, block_type, norm_layer, activation, gw, bm,
                block_params.se_ratio, stage_index=i + 1)))
            width = w_out
        self.trunk_output = nn.Sequential(OrderedDict(blocks))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(in_features=width, out_features=num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, mean=0.0, std=math.sqrt(2.0 / fan_out))
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.avgpool(self.trunk_output(self.stem(x)))
        return self.fc(x.flatten(start_dim=1))


_PARAMS = {  # name: depth, w_0, w_a, w_m, group_width, se_ratio
    "regnet_y_400mf": (16, 48, 27.89, 2.09, 8, 0.25),
    "regnet_y_800mf": (14, 56, 38.84, 2.4, 16, 0.25),
    "regnet_y_1_6gf": (27, 48, 20.71, 2.65, 24, 0.25),
    "regnet_y_3_2gf": (21, 80, 42.63, 2.66, 24, 0.25),
    "regnet_y_8gf": (17, 192, 76.82, 2.19, 56, 0.25),
    "regnet_y_16gf": (18, 200, 106.23, 2.48, 112, 0.25),
    "regnet_y_32gf": (20, 232, 115.89, 2.53, 232, 0.25),
    "regnet_y_128gf": (27, 456, 160.83, 2.52, 264, 0.25),
    "regnet_x_400mf": (22, 24, 24.48, 2.54, 16, None),
    "regnet_x_800mf": (16, 56, 35.73, 2.28, 16, None),
    "regnet_x_1_6gf": (18, 80, 34.01, 2.25, 24, None),
    "regnet_x_3_2gf": (25, 88, 26.31, 2.25, 48, None),
    "regnet_x_8gf": (23, 80, 49.56, 2.88, 120, None),
    "regnet_x_16gf": (22, 216, 55.59, 2.1, 128, None),
    "regnet_x_32gf": (23, 320, 69.86, 2.0, 168, None),
}


def _regnet(arch, weights, kwargs):
    _check_weights(arch, weights, kwargs)
    depth, w_0, w_a, w_m, gw, se = _PARAMS[arch]
    extra = {k: kwargs.pop(k) for k in ("bottleneck_multiplier",) if k in kwargs}
    params = BlockParams.from_init_params(depth=depth, w_0=w_0, w_a=w_a, w_m=w_m, group_width=gw,
                                          se_ratio=se, **extra)
    norm_layer = kwargs.pop("norm_layer", partial(nn.BatchNorm2d, eps=1e-05, momentum=0.1))
    return RegNet(params, norm_layer=norm_layer, **kwargs)


def regnet_y_400mf(*, weights=None, progress=True, **kwargs):
    return _regnet("regnet_y_400mf", weights, kwargs)


def regnet_y_800mf(*, weights=None, progress=True, **kwargs):
    return _regnet("regnet_y_800mf", weights, kwargs)


def regnet_y_1_6gf(*, weights=None, progress=True, **kwargs):
    return _regnet("regnet_y_1_6gf", weights, kwargs)


def regnet_y_3_2gf(*, weights=None, progress=True, **kwargs):
    return _regnet("regnet_y_3_2gf", weights, kwargs)


def regnet_y_8gf(*, weights=None, progress=True, **kwargs):
    return _regnet("regnet_y_8gf", weights, kwargs)


def regnet_y_16gf(*, weights=None, progress=True, **kwargs):
    return _regnet("regnet_y_16gf", weights, kwargs)


def regnet_y_32gf(*, weights=None, progress=True, **kwargs):
    return _regnet("regnet_y_32gf", weights, kwargs)


def regnet_y_128gf(*, weights=None, progress=True, **kwargs):
    return _regnet("regnet_y_128gf", weights, kwargs)


def regnet_x_400mf(*, weights=None, progress=True, **kwargs):
    return _regnet("regnet_x_400mf", weights, kwargs)


def regnet_x_800mf(*, weights=None, progress=True, **kwargs):
    return _regnet("regnet_x_800mf", weights, kwargs)


def regnet_x_1_6gf(*, weights=None, progress=True, **kwargs):
    return _regnet("regnet_x_1_6gf", weights, kwargs)


def regnet_x_3_2gf(*, weights=None, progress=True, **kwargs):
    return _regnet("regnet_x_3_2gf", weights, kwargs)


def regnet_x_8gf(*, weights=None, progress=True, **kwargs):
    return _regnet("regnet_x_8gf", weights, kwargs)


def regnet_x_16gf(*, weights=None, progress=True, **kwargs):
    return _regnet("regnet_x_16gf", weights, kwargs)


def regnet_x_32gf(*, weights=None, progress=True, **kwargs):
    return _regnet("regnet_x_32gf", weights, kwargs)
