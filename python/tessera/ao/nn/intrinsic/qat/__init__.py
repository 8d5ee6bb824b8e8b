"""tessera.ao.nn.intrinsic.qat — fused QAT modules (torch.ao.nn.intrinsic.qat): LinearReLU,
ConvReLU2d, and ConvBn2d / ConvBnReLU2d, which fold the batch norm into the weight during
training as PyTorch's _forward_approximate does: the weight scaled by gamma / sqrt(running_var +
eps) is fake quantized, the convolution's output divided back by that factor and the bias added,
then the batch norm runs (batch statistics in training, running ones in eval or after
freeze_bn_stats)."""
import math

import tessera
from tessera import nn
from tessera.nn import functional as F
from tessera.nn import init

from .. import ConvBn2d as _FConvBn2d
from .. import ConvBnReLU2d as _FConvBnReLU2d
from .. import ConvReLU2d as _FConvReLU2d
from .. import LinearReLU as _FLinearReLU
from ...qat import Conv2d as _QConv2d
from ...qat import Linear as _QLinear
from ...qat import _need_qconfig

__all__ = ["LinearReLU", "ConvReLU2d", "ConvBn2d", "ConvBnReLU2d", "update_bn_stats",
           "freeze_bn_stats"]


class LinearReLU(_QLinear):
    """torch.ao.nn.intrinsic.qat.LinearReLU: relu(linear(x, weight_fake_quant(weight), bias))"""

    _FLOAT_MODULE = _FLinearReLU

    def forward(self, input):
        return F.relu(F.linear(input, self.weight_fake_quant(self.weight), self.bias))


class ConvReLU2d(_QConv2d):
    """torch.ao.nn.intrinsic.qat.ConvReLU2d"""

    _FLOAT_MODULE = _FConvReLU2d

    def forward(self, input):
        return F.relu(self._conv(input, self.weight_fake_quant(self.weight), self.bias))


class ConvBn2d(nn.Conv2d):
    """torch.ao.nn.intrinsic.qat.ConvBn2d: a convolution and its batch norm (self.bn) with the
    batch norm folded into the fake-quantized weight (PyTorch's _forward_approximate)"""

    _FLOAT_MODULE = _FConvBn2d
    _relu = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=None, padding_mode="zeros", eps=1e-05, momentum=0.1,
                 freeze_bn=False, qconfig=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bool(bias), padding_mode)
        self.qconfig = _need_qconfig(qconfig)
        self.freeze_bn = freeze_bn if self.training else True
        self.bn = nn.BatchNorm2d(out_channels, eps, momentum, True, True)
        self.weight_fake_quant = self.qconfig.weight()
        self.reset_bn_parameters()
        if self.training and not freeze_bn:
            self.update_bn_stats()
        else:
            self.freeze_bn_stats()

    def reset_running_stats(self):
        self.bn.reset_running_stats()

    def reset_bn_parameters(self):
        """PyTorch's: running statistics reset, gamma ~ U(0, 1), beta 0, the bias ~ U(-1/sqrt
        (fan_in), 1/sqrt(fan_in))"""
        self.bn.reset_running_stats()
        init.uniform_(self.bn.weight)
        init.zeros_(self.bn.bias)
        if self.bias is not None:
            bound = 1 / math.sqrt(math.prod(self.weight.shape[1:]))
            init.uniform_(self.bias, -bound, bound)

    def update_bn_stats(self):
        self.freeze_bn = False
        self.bn.training = True
        return self

    def freeze_bn_stats(self):
        self.freeze_bn = True
        self.bn.training = False
        return self

    def forward(self, input):
        # model.train() sets every module's flag: a frozen bn stays in eval here, as PyTorch's
        # train() override keeps it
        self.bn.training = self.training and not self.freeze_bn
        bn = self.bn
        running_std = tessera.sqrt(bn.running_var + bn.eps)
        scale_factor = bn.weight / running_std
        scaled_weight = self.weight_fake_quant(self.weight * scale_factor.reshape(-1, 1, 1, 1))
        zero_bias = tessera.zeros(self.out_channels, dtype=input.dtype)
        conv = self._conv(input, scaled_weight, zero_bias)
        conv_orig = conv / scale_factor.reshape(1, -1, 1, 1)
        if self.bias is not None:
            conv_orig = conv_orig + self.bias.reshape(1, -1, 1, 1)
        y = bn(conv_orig)
        return F.relu(y) if self._relu else y

    def _conv(self, input, weight, bias):
        return F.conv2d(input, weight, bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def extra_repr(self):
        return super().extra_repr() + f", freeze_bn={self.freeze_bn}"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """the QAT module sharing the fused float module's conv and bn parameters and buffers"""
        if type(mod) is not cls._FLOAT_MODULE:
            raise AssertionError(f"qat.{cls.__name__}.from_float only works for "
                                 f"{cls._FLOAT_MODULE.__name__}")
        qconfig = _need_qconfig(getattr(mod, "qconfig", None))
        conv, bn = mod[0], mod[1]
        q = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                conv.dilation, conv.groups, conv.bias is not None, conv.padding_mode, bn.eps,
                bn.momentum, False, qconfig)
        q.weight, q.bias = conv.weight, conv.bias
        q.bn.weight, q.bn.bias = bn.weight, bn.bias
        q.bn.running_mean, q.bn.running_var = bn.running_mean, bn.running_var
        q.bn.num_batches_tracked = bn.num_batches_tracked
        return q


class ConvBnReLU2d(ConvBn2d):
    """torch.ao.nn.intrinsic.qat.ConvBnReLU2d: ConvBn2d then relu"""

    _FLOAT_MODULE = _FConvBnReLU2d
    _relu = True


def update_bn_stats(mod):
    """model.apply(update_bn_stats): batch norms of ConvBn modules update their statistics"""
    if isinstance(mod, ConvBn2d):
        mod.update_bn_stats()


def freeze_bn_stats(mod):
    """model.apply(freeze_bn_stats): batch norms of ConvBn modules use their running statistics"""
    if isinstance(mod, ConvBn2d):
        mod.freeze_bn_stats()
