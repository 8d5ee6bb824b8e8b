"""torchvision.models.densenet: DenseNet-121/161/169/201."""
from collections import OrderedDict

import tessera as ts
from tessera import nn
from tessera.nn import functional as F

from ._utils import _check_weights

__all__ = ["DenseNet", "densenet121", "densenet161", "densenet169", "densenet201"]


class _DenseLayer(nn.Module):
    def __init__(self, num_input_features, growth_rate, bn_size, drop_rate,
                 memory_efficient=False):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(num_input_features, bn_size * growth_rate, kernel_size=1, stride=1,
                               bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, stride=1,
                               padding=1, bias=False)
        self.drop_rate = float(drop_rate)
        self.memory_efficient = memory_efficient  # accepted; no checkpointing here

    def forward(self, input):
        prev = [input] if isinstance(input, ts.Tensor) else input
        out = self.conv1(self.relu1(self.norm1(ts.cat(prev, 1))))
        out = self.conv2(self.relu2(self.norm2(out)))
        if self.drop_rate > 0:
            out = F.dropout(out, p=self.drop_rate, training=self.training)
        return out


class _DenseBlock(nn.ModuleDict):
    def __init__(self, num_layers, num_input_features, bn_size, growth_rate, drop_rate,
                 memory_efficient=False):
        super().__init__()
        for i in range(num_layers):
            self.add_module("denselayer%d" % (i + 1),
                            _DenseLayer(num_input_features + i * growth_rate, growth_rate,
                                        bn_size, drop_rate, memory_efficient))

    def forward(self, init_features):
        features = [init_features]
        for _, layer in self.items():
            features.append(layer(features))
        return ts.cat(features, 1)


class _Transition(nn.Sequential):
    def __init__(self, num_input_features, num_output_features):
        super().__init__()
        self.norm = nn.BatchNorm2d(num_input_features)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(num_input_features, num_output_features, kernel_size=1, stride=1,
                              bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    def __init__(self, growth_rate=32, block_config=(6, 12, 24, 16), num_init_features=64,
                 bn_size=4, drop_rate=0, num_classes=1000, memory_efficient=False):
        super().__init__()
        self.features = nn.Sequential(OrderedDict([
            ("conv0", nn.Conv2d(3, num_init_features, kernel_size=7, stride=2, padding=3,
                                bias=False)),
            ("norm0", nn.BatchNorm2d(num_init_features)),
            ("relu0", nn.ReLU(inplace=True)),
            ("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1))]))
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            self.features.add_module("denseblock%d" % (i + 1), _DenseBlock(
                num_layers, num_features, bn_size, growth_rate, drop_rate, memory_efficient))
            num_features += num_layers * growth_rate
            if i != len(block_config) - 1:
                self.features.add_module("transition%d" % (i + 1),
                                         _Transition(num_features, num_features // 2))
                num_features //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(num_features))
        self.classifier = nn.Linear(num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, x):
        out = F.relu(self.features(x))
        out = ts.flatten(F.adaptive_avg_pool2d(out, (1, 1)), 1)
        return self.classifier(out)


def _densenet(arch, growth_rate, block_config, num_init_features, weights, kwargs):
    _check_weights(arch, weights, kwargs)
    return DenseNet(growth_rate, block_config, num_init_features, **kwargs)


def densenet121(*, weights=None, progress=True, **kwargs):
    return _densenet("densenet121", 32, (6, 12, 24, 16), 64, weights, kwargs)


def densenet161(*, weights=None, progress=True, **kwargs):
    return _densenet("densenet161", 48, (6, 12, 36, 24), 96, weights, kwargs)


def densenet169(*, weights=None, progress=True, **kwargs):
    return _densenet("densenet169", 32, (6, 12, 32, 32), 64, weights, kwargs)


def densenet201(*, weights=None, progress=True, **kwargs):
    return _densenet("densenet201", 32, (6, 12, 48, 32), 64, weights, kwargs)
