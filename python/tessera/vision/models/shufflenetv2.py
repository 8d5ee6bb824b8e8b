"""torchvision.models.shufflenetv2: ShuffleNetV2 x0.5 / x1.0 / x1.5 / x2.0 (torchvision's module
and state-dict names)."""
import tessera as ts
from tessera import nn

from ._utils import _check_weights

__all__ = ["ShuffleNetV2", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5",
           "shufflenet_v2_x2_0"]


def channel_shuffle(x, groups):
    """[N, g*c, H, W] -> the channels interleaved across the g groups"""
    n, c, h, w = x.shape
    x = ts.transpose(x.view(n, groups, c // groups, h, w), 1, 2).contiguous()
    return x.view(n, c, h, w)


def _depthwise(i, o, kernel_size, stride=1, padding=0, bias=False):
    return nn.Conv2d(i, o, kernel_size, stride, padding, bias=bias, groups=i)


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride):
        super().__init__()
        if not 1 <= stride <= 3:
            raise ValueError("ShuffleNetV2 InvertedResidual: illegal stride value %r" % (stride,))
        self.stride = stride
        branch = oup // 2
        if stride == 1 and inp != branch << 1:
            raise ValueError("ShuffleNetV2 InvertedResidual: with stride 1, inp (%d) must equal "
                             "oup // 2 << 1 (%d)" % (inp, branch << 1))
        if stride > 1:
            self.branch1 = nn.Sequential(
                _depthwise(inp, inp, 3, stride, 1), nn.BatchNorm2d(inp),
                nn.Conv2d(inp, branch, 1, 1, 0, bias=False), nn.BatchNorm2d(branch),
                nn.ReLU(inplace=True))
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(
            nn.Conv2d(inp if stride > 1 else branch, branch, 1, 1, 0, bias=False),
            nn.BatchNorm2d(branch), nn.ReLU(inplace=True),
            _depthwise(branch, branch, 3, stride, 1), nn.BatchNorm2d(branch),
            nn.Conv2d(branch, branch, 1, 1, 0, bias=False), nn.BatchNorm2d(branch),
            nn.ReLU(inplace=True))

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = ts.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = ts.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    def __init__(self, stages_repeats, stages_out_channels, num_classes=1000,
                 inverted_residual=InvertedResidual):
        super().__init__()
        if len(stages_repeats) != 3:
            raise ValueError("ShuffleNetV2: expected stages_repeats as list of 3 positive ints")
        if len(stages_out_channels) != 5:
            raise ValueError("ShuffleNetV2: expected stages_out_channels as list of 5 positive "
                             "ints")
        self._stage_out_channels = stages_out_channels
        cin, cout = 3, stages_out_channels[0]
        self.conv1 = nn.Sequential(nn.Conv2d(cin, cout, 3, 2, 1, bias=False), nn.BatchNorm2d(cout),
                                   nn.ReLU(inplace=True))
        cin = cout
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        for name, repeats, cout in zip(("stage2", "stage3", "stage4"), stages_repeats,
                                       stages_out_channels[1:]):
            seq = [inverted_residual(cin, cout, 2)]
            seq += [inverted_residual(cout, cout, 1) for _ in range(repeats - 1)]
            setattr(self, name, nn.Sequential(*seq))
            cin = cout
        cout = stages_out_channels[-1]
        self.conv5 = nn.Sequential(nn.Conv2d(cin, cout, 1, 1, 0, bias=False), nn.BatchNorm2d(cout),
                                   nn.ReLU(inplace=True))
        self.fc = nn.Linear(cout, num_classes)

    def forward(self, x):
        x = self.maxpool(self.conv1(x))
        x = self.conv5(self.stage4(self.stage3(self.stage2(x))))
        return self.fc(x.mean([2, 3]))


def _shufflenetv2(arch, weights, kwargs, repeats, channels):
    _check_weights(arch, weights, kwargs)
    return ShuffleNetV2(repeats, channels, **kwargs)


def shufflenet_v2_x0_5(*, weights=None, progress=True, **kwargs):
    return _shufflenetv2("shufflenet_v2_x0_5", weights, kwargs, [4, 8, 4], [24, 48, 96, 192, 1024])


def shufflenet_v2_x1_0(*, weights=None, progress=True, **kwargs):
    return _shufflenetv2("shufflenet_v2_x1_0", weights, kwargs, [4, 8, 4],
                         [24, 116, 232, 464, 1024])


def shufflenet_v2_x1_5(*, weights=None, progress=True, **kwargs):
    return _shufflenetv2("shufflenet_v2_x1_5", weights, kwargs, [4, 8, 4],
                         [24, 176, 352, 704, 1024])


def shufflenet_v2_x2_0(*, weights=None, progress=True, **kwargs):
    return _shufflenetv2("shufflenet_v2_x2_0", weights, kwargs, [4, 8, 4],
                         [24, 244, 488, 976, 2048])
