"""torchvision.models.mobilenetv2: MobileNetV2."""
import tessera as ts
from tessera import nn

from ._utils import Conv2dNormActivation, _check_weights, _make_divisible

__all__ = ["MobileNetV2", "mobilenet_v2"]


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, expand_ratio, norm_layer=None):
        super().__init__()
        if stride not in (1, 2):
            raise ValueError("InvertedResidual: stride should be 1 or 2, got %r" % (stride,))
        norm_layer = norm_layer or nn.BatchNorm2d
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(Conv2dNormActivation(inp, hidden_dim, kernel_size=1,
                                               norm_layer=norm_layer, activation_layer=nn.ReLU6))
        layers += [Conv2dNormActivation(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim,
                                        norm_layer=norm_layer, activation_layer=nn.ReLU6),
                   nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False), norm_layer(oup)]
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes=1000, width_mult=1.0, inverted_residual_setting=None,
                 round_nearest=8, block=None, norm_layer=None, dropout=0.2):
        super().__init__()
        block = block or InvertedResidual
        norm_layer = norm_layer or nn.BatchNorm2d
        input_channel, last_channel = 32, 1280
        if inverted_residual_setting is None:
            inverted_residual_setting = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
                                         [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]
        if len(inverted_residual_setting) == 0 or len(inverted_residual_setting[0]) != 4:
            raise ValueError("MobileNetV2: inverted_residual_setting should be a non-empty list of "
                             "4-element lists, got %r" % (inverted_residual_setting,))
        input_channel = _make_divisible(input_channel * width_mult, round_nearest)
        self.last_channel = _make_divisible(last_channel * max(1.0, width_mult), round_nearest)
        features = [Conv2dNormActivation(3, input_channel, stride=2, norm_layer=norm_layer,
                                         activation_layer=nn.ReLU6)]
        for t, c, n, s in inverted_residual_setting:
            output_channel = _make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                features.append(block(input_channel, output_channel, s if i == 0 else 1,
                                      expand_ratio=t, norm_layer=norm_layer))
                input_channel = output_channel
        features.append(Conv2dNormActivation(input_channel, self.last_channel, kernel_size=1,
                                             norm_layer=norm_layer, activation_layer=nn.ReLU6))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout),
                                        nn.Linear(self.last_channel, num_classes))
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
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(ts.flatten(x, 1))


def mobilenet_v2(*, weights=None, progress=True, **kwargs):
    _check_weights("mobilenet_v2", weights, kwargs)
    return MobileNetV2(**kwargs)
