"""torchvision.models.mnasnet: MNASNet (B1 variant) 0.5 / 0.75 / 1.0 / 1.3 (torchvision's module and
state-dict names; the version-2 stem, the one torchvision's weights use)."""
from tessera import nn

from ._utils import _check_weights

__all__ = ["MNASNet", "mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3"]

_BN_MOMENTUM = 1 - 0.9997


class _InvertedResidual(nn.Module):
    def __init__(self, in_ch, out_ch, kernel_size, stride, expansion_factor, bn_momentum=0.1):
        super().__init__()
        if stride not in (1, 2):
            raise ValueError("MNASNet: stride should be 1 or 2 instead of %r" % (stride,))
        if kernel_size not in (3, 5):
            raise ValueError("MNASNet: kernel_size should be 3 or 5 instead of %r"
                             % (kernel_size,))
        mid = in_ch * expansion_factor
        self.apply_residual = in_ch == out_ch and stride == 1
        self.layers = nn.Sequential(
            nn.Conv2d(in_ch, mid, 1, bias=False), nn.BatchNorm2d(mid, momentum=bn_momentum),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, kernel_size, padding=kernel_size // 2, stride=stride, groups=mid,
                      bias=False),
            nn.BatchNorm2d(mid, momentum=bn_momentum), nn.ReLU(inplace=True),
            nn.Conv2d(mid, out_ch, 1, bias=False), nn.BatchNorm2d(out_ch, momentum=bn_momentum))

    def forward(self, x):
        return self.layers(x) + x if self.apply_residual else self.layers(x)


def _stack(in_ch, out_ch, kernel_size, stride, exp_factor, repeats, bn_momentum):
    if repeats < 1:
        raise ValueError("MNASNet: repeats should be >= 1, instead got %r" % (repeats,))
    blocks = [_InvertedResidual(in_ch, out_ch, kernel_size, stride, exp_factor, bn_momentum)]
    blocks += [_InvertedResidual(out_ch, out_ch, kernel_size, 1, exp_factor, bn_momentum)
               for _ in range(1, repeats)]
    return nn.Sequential(*blocks)


def _round_to_multiple_of(val, divisor, round_up_bias=0.9):
    new_val = max(divisor, int(val + divisor / 2) // divisor * divisor)
    return new_val if new_val >= round_up_bias * val else new_val + divisor


def _get_depths(alpha):
    return [_round_to_multiple_of(d * alpha, 8) for d in (32, 16, 24, 40, 80, 96, 192, 320)]


class MNASNet(nn.Module):
    _version = 2

    def __init__(self, alpha, num_classes=1000, dropout=0.2):
        super().__init__()
        if alpha <= 0.0:
            raise ValueError("MNASNet: alpha should be greater than 0.0 instead of %r" % (alpha,))
        self.alpha = alpha
        self.num_classes = num_classes
        d = _get_depths(alpha)
        m = _BN_MOMENTUM
        self.layers = nn.Sequential(
            nn.Conv2d(3, d[0], 3, padding=1, stride=2, bias=False),
            nn.BatchNorm2d(d[0], momentum=m), nn.ReLU(inplace=True),
            nn.Conv2d(d[0], d[0], 3, padding=1, stride=1, groups=d[0], bias=False),
            nn.BatchNorm2d(d[0], momentum=m), nn.ReLU(inplace=True),
            nn.Conv2d(d[0], d[1], 1, padding=0, stride=1, bias=False),
            nn.BatchNorm2d(d[1], momentum=m),
            _stack(d[1], d[2], 3, 2, 3, 3, m), _stack(d[2], d[3], 5, 2, 3, 3, m),
            _stack(d[3], d[4], 5, 2, 6, 3, m), _stack(d[4], d[5], 3, 1, 6, 2, m),
            _stack(d[5], d[6], 5, 2, 6, 4, m), _stack(d[6], d[7], 3, 1, 6, 1, m),
            nn.Conv2d(d[7], 1280, 1, padding=0, stride=1, bias=False),
            nn.BatchNorm2d(1280, momentum=m), nn.ReLU(inplace=True))
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True),
                                        nn.Linear(1280, num_classes))
        for mod in self.modules():
            if isinstance(mod, nn.Conv2d):
                nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
                if mod.bias is not None:
                    nn.init.zeros_(mod.bias)
            elif isinstance(mod, nn.BatchNorm2d):
                nn.init.ones_(mod.weight)
                nn.init.zeros_(mod.bias)
            elif isinstance(mod, nn.Linear):
                nn.init.kaiming_uniform_(mod.weight, mode="fan_out", nonlinearity="sigmoid")
                nn.init.zeros_(mod.bias)

    def forward(self, x):
        return self.classifier(self.layers(x).mean([2, 3]))


def _mnasnet(arch, alpha, weights, kwargs):
    _check_weights(arch, weights, kwargs)
    return MNASNet(alpha, **kwargs)


def mnasnet0_5(*, weights=None, progress=True, **kwargs):
    return _mnasnet("mnasnet0_5", 0.5, weights, kwargs)


def mnasnet0_75(*, weights=None, progress=True, **kwargs):
    return _mnasnet("mnasnet0_75", 0.75, weights, kwargs)


def mnasnet1_0(*, weights=None, progress=True, **kwargs):
    return _mnasnet("mnasnet1_0", 1.0, weights, kwargs)


def mnasnet1_3(*, weights=None, progress=True, **kwargs):
    return _mnasnet("mnasnet1_3", 1.3, weights, kwargs)
