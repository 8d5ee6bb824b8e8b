"""torchvision.models.quantization.resnet: ResNet-18 / 50 and ResNeXt-101 with QuantStub /
DeQuantStub, FloatFunctional residual adds and fuse_model (torchvision's module and state-dict
names)."""
from tessera import nn
from tessera.ao.nn.quantized import FloatFunctional

from ..resnet import BasicBlock, Bottleneck, ResNet
from .utils import _QuantStubs, _build, _fuse_modules

__all__ = ["QuantizableResNet", "resnet18", "resnet50", "resnext101_32x8d", "resnext101_64x4d"]


class QuantizableBasicBlock(BasicBlock):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.add_relu = FloatFunctional()

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.add_relu.add_relu(out, identity)

    def fuse_model(self, is_qat=None):
        _fuse_modules(self, [["conv1", "bn1", "relu"], ["conv2", "bn2"]], is_qat, inplace=True)
        if self.downsample:
            _fuse_modules(self.downsample, ["0", "1"], is_qat, inplace=True)


class QuantizableBottleneck(Bottleneck):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.skip_add_relu = FloatFunctional()
        self.relu1 = nn.ReLU(inplace=False)
        self.relu2 = nn.ReLU(inplace=False)

    def forward(self, x):
        identity = x
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.skip_add_relu.add_relu(out, identity)

    def fuse_model(self, is_qat=None):
        _fuse_modules(self, [["conv1", "bn1", "relu1"], ["conv2", "bn2", "relu2"],
                             ["conv3", "bn3"]], is_qat, inplace=True)
        if self.downsample:
            _fuse_modules(self.downsample, ["0", "1"], is_qat, inplace=True)


class QuantizableResNet(_QuantStubs, ResNet):
    def fuse_model(self, is_qat=None):
        """conv + bn + relu, conv + bn fused in place (numerics unchanged, still float)"""
        _fuse_modules(self, ["conv1", "bn1", "relu"], is_qat, inplace=True)
        for m in self.modules():
            if type(m) is QuantizableBottleneck or type(m) is QuantizableBasicBlock:
                m.fuse_model(is_qat)


def _resnet(name, block, layers, weights, quantize, kwargs):
    return _build(name, QuantizableResNet, (block, layers), weights, quantize, kwargs)


def resnet18(*, weights=None, progress=True, quantize=False, **kwargs):
    return _resnet("quantized_resnet18", QuantizableBasicBlock, [2, 2, 2, 2], weights, quantize,
                   kwargs)


def resnet50(*, weights=None, progress=True, quantize=False, **kwargs):
    return _resnet("quantized_resnet50", QuantizableBottleneck, [3, 4, 6, 3], weights, quantize,
                   kwargs)


def resnext101_32x8d(*, weights=None, progress=True, quantize=False, **kwargs):
    kwargs.update(groups=32, width_per_group=8)
    return _resnet("quantized_resnext101_32x8d", QuantizableBottleneck, [3, 4, 23, 3], weights,
                   quantize, kwargs)


def resnext101_64x4d(*, weights=None, progress=True, quantize=False, **kwargs):
    kwargs.update(groups=64, width_per_group=4)
    return _resnet("quantized_resnext101_64x4d", QuantizableBottleneck, [3, 4, 23, 3], weights,
                   quantize, kwargs)
