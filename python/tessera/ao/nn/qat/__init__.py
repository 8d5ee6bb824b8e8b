"""tessera.ao.nn.qat — quantization-aware training modules (torch.ao.nn.qat): Linear and Conv2d,
the float layers whose weight passes through the qconfig's weight fake quant in forward (the C
fake-quantize ops, straight-through gradient); convert turns them into tessera.ao.nn.quantized's
modules (_quantized_from_qat)."""
import tessera
from tessera import nn
from tessera.nn import functional as F

__all__ = ["Linear", "Conv2d"]


def _need_qconfig(qconfig):
    if not qconfig:
        raise AssertionError("qconfig must be provided for QAT module")
    return qconfig


class Linear(nn.Linear):
    """torch.ao.nn.qat.Linear: F.linear(x, weight_fake_quant(weight), bias)"""

    _FLOAT_MODULE = nn.Linear

    def __init__(self, in_features, out_features, bias=True, qconfig=None, device=None,
                 dtype=None):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.qconfig = _need_qconfig(qconfig)
        self.weight_fake_quant = qconfig.weight()

    def forward(self, input):
        return F.linear(input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """the QAT module sharing mod's parameters (mod: the float module with a qconfig)"""
        if type(mod) is not cls._FLOAT_MODULE:
            raise AssertionError(f"qat.{cls.__name__}.from_float only works for "
                                 f"{cls._FLOAT_MODULE.__name__}")
        qconfig = _need_qconfig(getattr(mod, "qconfig", None))
        lin = mod[0] if isinstance(mod, nn.Sequential) else mod
        q = cls(lin.in_features, lin.out_features, bias=lin.bias is not None, qconfig=qconfig)
        q.weight, q.bias = lin.weight, lin.bias
        return q


class Conv2d(nn.Conv2d):
    """torch.ao.nn.qat.Conv2d: F.conv2d(x, weight_fake_quant(weight), bias, ...)"""

    _FLOAT_MODULE = nn.Conv2d

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", qconfig=None, device=None,
                 dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device=device, dtype=dtype)
        self.qconfig = _need_qconfig(qconfig)
        self.weight_fake_quant = qconfig.weight()

    def _conv(self, input, weight, bias):
        return F.conv2d(input, weight, bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def forward(self, input):
        return self._conv(input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        if type(mod) is not cls._FLOAT_MODULE:
            raise AssertionError(f"qat.{cls.__name__}.from_float only works for "
                                 f"{cls._FLOAT_MODULE.__name__}")
        qconfig = _need_qconfig(getattr(mod, "qconfig", None))
        c = mod[0] if isinstance(mod, nn.Sequential) else mod
        q = cls(c.in_channels, c.out_channels, c.kernel_size, c.stride, c.padding, c.dilation,
                c.groups, c.bias is not None, c.padding_mode, qconfig=qconfig)
        q.weight, q.bias = c.weight, c.bias
        return q


def _quantized_from_qat(cls, mod):
    """convert's step for a QAT module (PyTorch's from_float of a module with weight_fake_quant):
    a ConvBn's batch norm folded into its weight and bias (nn.utils.fusion.fuse_conv_bn_weights
    with the running statistics), the weight fake quant run once over that weight (its observer
    sees it, as PyTorch's get_qconv / from_float do), the weight quantized to qint8 with the fake
    quant's qparams, the output scale / zero point from activation_post_process."""
    from tessera.nn.utils.fusion import fuse_conv_bn_weights
    if "activation_post_process" not in mod._modules:
        raise RuntimeError(f"convert: {type(mod).__name__} has no activation_post_process: call "
                           "prepare_qat and train (or run data through) the model first")
    weight, bias = mod.weight, mod.bias
    if getattr(mod, "bn", None) is not None:
        bn = mod.bn
        weight, bias = fuse_conv_bn_weights(weight, bias, bn.running_mean, bn.running_var, bn.eps,
                                            bn.weight, bn.bias)
    wpp = mod.weight_fake_quant
    with tessera.no_grad():
        w = weight.detach().float()
        wpp(w)
        s, z = wpp.calculate_qparams()
    if wpp.dtype != tessera.qint8:
        raise NotImplementedError(f"tessera: convert of weights fake quantized to {wpp.dtype} "
                                  "(qint8 only)")
    if wpp.is_per_channel:
        qw = tessera.quantize_per_channel(w, s.double(), z.long(), wpp.ch_axis, tessera.qint8)
    else:
        qw = tessera.quantize_per_tensor(w, float(s.reshape(-1)[0]), int(z.reshape(-1)[0]),
                                         tessera.qint8)
    if isinstance(mod, nn.Conv2d):
        q = cls(mod.in_channels, mod.out_channels, mod.kernel_size, mod.stride, mod.padding,
                mod.dilation, mod.groups, bias is not None, mod.padding_mode)
    else:
        q = cls(mod.in_features, mod.out_features, bias_=bias is not None)
    q.set_weight_bias(qw, None if bias is None else bias.detach())
    a_s, a_z = mod.activation_post_process.calculate_qparams()
    q.scale, q.zero_point = float(a_s.reshape(-1)[0]), int(a_z.reshape(-1)[0])
    return q
