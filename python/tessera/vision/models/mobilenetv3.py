"""torchvision.models.mobilenetv3: MobileNetV3 small and large."""
from functools import partial

import tessera as ts
from tessera import nn

from ._utils import Conv2dNormActivation, SqueezeExcitation, _check_weights, _make_divisible

__all__ = ["MobileNetV3", "mobilenet_v3_large", "mobilenet_v3_small"]


class InvertedResidualConfig:
    def __init__(self, input_channels, kernel, expanded_channels, out_channels, use_se, activation,
                 stride, dilation, width_mult):
        self.input_channels = self.adjust_channels(input_channels, width_mult)
        self.kernel = kernel
        self.expanded_channels = self.adjust_channels(expanded_channels, width_mult)
        self.out_channels = self.adjust_channels(out_channels, width_mult)
        self.use_se = use_se
        self.use_hs = activation == "HS"
        self.stride = stride
        self.dilation = dilation

    @staticmethod
    def adjust_channels(channels, width_mult):
        return _make_divisible(channels * width_mult, 8)


class InvertedResidual(nn.Module):
    def __init__(self, cnf, norm_layer,
                 se_layer=partial(SqueezeExcitation, scale_activation=nn.Hardsigmoid)):
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError("InvertedResidual: illegal stride value %r" % (cnf.stride,))
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        act = nn.Hardswish if cnf.use_hs else nn.ReLU
        layers = []
        if cnf.expanded_channels != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, cnf.expanded_channels,
                                               kernel_size=1, norm_layer=norm_layer,
                                               activation_layer=act))
        stride = 1 if cnf.dilation > 1 else cnf.stride
        layers.append(Conv2dNormActivation(cnf.expanded_channels, cnf.expanded_channels,
                                           kernel_size=cnf.kernel, stride=stride,
                                           dilation=cnf.dilation, groups=cnf.expanded_channels,
                                           norm_layer=norm_layer, activation_layer=act))
        if cnf.use_se:
            layers.append(se_layer(cnf.expanded_channels,
                                   _make_divisible(cnf.expanded_channels // 4, 8)))
        layers.append(Conv2dNormActivation(cnf.expanded_channels, cnf.out_channels, kernel_size=1,
                                           norm_layer=norm_layer, activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.out_channels = cnf.out_channels
        self._is_cn = cnf.stride > 1

    def forward(self, x):
        result = self.block(x)
        return result + x if self.use_res_connect else result


class MobileNetV3(nn.Module):
    def __init__(self, inverted_residual_setting, last_channel, num_classes=1000, block=None,
                 norm_layer=None, dropout=0.2):
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("MobileNetV3: the inverted_residual_setting should not be empty")
        block = block or InvertedResidual
        norm_layer = norm_layer or partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)
        first = inverted_residual_setting[0].input_channels
        layers = [Conv2dNormActivation(3, first, kernel_size=3, stride=2, norm_layer=norm_layer,
                                       activation_layer=nn.Hardswish)]
        for cnf in inverted_residual_setting:
            layers.append(block(cnf, norm_layer))
        lastconv_in = inverted_residual_setting[-1].out_channels
        lastconv_out = 6 * lastconv_in
        layers.append(Conv2dNormActivation(lastconv_in, lastconv_out, kernel_size=1,
                                           norm_layer=norm_layer, activation_layer=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(lastconv_out, last_channel),
                                        nn.Hardswish(inplace=True),
                                        nn.Dropout(p=dropout, inplace=True),
                                        nn.Linear(last_channel, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.classifier(ts.flatten(self.avgpool(self.features(x)), 1))


def _mobilenet_v3_conf(arch, width_mult=1.0, reduced_tail=False, dilated=False):
    rd = 2 if reduced_tail else 1
    dil = 2 if dilated else 1
    c = partial(InvertedResidualConfig, width_mult=width_mult)
    if arch == "mobilenet_v3_large":
        setting = [
            c(16, 3, 16, 16, False, "RE", 1, 1), c(16, 3, 64, 24, False, "RE", 2, 1),
            c(24, 3, 72, 24, False, "RE", 1, 1), c(24, 5, 72, 40, True, "RE", 2, 1),
            c(40, 5, 120, 40, True, "RE", 1, 1), c(40, 5, 120, 40, True, "RE", 1, 1),
            c(40, 3, 240, 80, False, "HS", 2, 1), c(80, 3, 200, 80, False, "HS", 1, 1),
            c(80, 3, 184, 80, False, "HS", 1, 1), c(80, 3, 184, 80, False, "HS", 1, 1),
            c(80, 3, 480, 112, True, "HS", 1, 1), c(112, 3, 672, 112, True, "HS", 1, 1),
            c(112, 5, 672, 160 // rd, True, "HS", 2, dil),
            c(160 // rd, 5, 960 // rd, 160 // rd, True, "HS", 1, dil),
            c(160 // rd, 5, 960 // rd, 160 // rd, True, "HS", 1, dil)]
        last = InvertedResidualConfig.adjust_channels(1280 // rd, width_mult)
    else:
        setting = [
            c(16, 3, 16, 16, True, "RE", 2, 1), c(16, 3, 72, 24, False, "RE", 2, 1),
            c(24, 3, 88, 24, False, "RE", 1, 1), c(24, 5, 96, 40, True, "HS", 2, 1),
            c(40, 5, 240, 40, True, "HS", 1, 1), c(40, 5, 240, 40, True, "HS", 1, 1),
            c(40, 5, 120, 48, True, "HS", 1, 1), c(48, 5, 144, 48, True, "HS", 1, 1),
            c(48, 5, 288, 96 // rd, True, "HS", 2, dil),
            c(96 // rd, 5, 576 // rd, 96 // rd, True, "HS", 1, dil),
            c(96 // rd, 5, 576 // rd, 96 // rd, True, "HS", 1, dil)]
        last = InvertedResidualConfig.adjust_channels(1024 // rd, width_mult)
    return setting, last


def _mobilenet_v3(arch, weights, kwargs):
    _check_weights(arch, weights, kwargs)
    conf = {k: kwargs.pop(k) for k in ("width_mult", "reduced_tail", "dilated") if k in kwargs}
    setting, last = _mobilenet_v3_conf(arch, **conf)
    return MobileNetV3(setting, last, **kwargs)


def mobilenet_v3_large(*, weights=None, progress=True, **kwargs):
    return _mobilenet_v3("mobilenet_v3_large", weights, kwargs)


def mobilenet_v3_small(*, weights=None, progress=True, **kwargs):
    return _mobilenet_v3("mobilenet_v3_small", weights, kwargs)
