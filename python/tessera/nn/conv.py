"""tessera.nn's convolution modules beyond Conv2d: Conv1d, Conv3d, ConvTranspose1d/2d/3d, their
Lazy* forms (in_channels from the first input), Unfold, Fold and ChannelShuffle. Python Modules
owning their Parameters (layers.py says why) over functional_conv.py's C calls."""
from .. import _C
from . import functional as F
from . import functional_conv as FC
from .layers import _Weighted
from .module import Module
from .parameter import Parameter

_PAD_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(_Weighted):
    _k = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None,
                 output_padding=0):
        super().__init__()
        k, name = self._k, type(self).__name__
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PAD_MODES:
            raise ValueError(f"padding_mode must be one of {_PAD_MODES}, but got "
                             f"padding_mode='{padding_mode}'")
        if self._transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = FC._ntuple(kernel_size, k, "kernel_size", name)
        self.stride = FC._ntuple(stride, k, "stride", name)
        self.dilation = FC._ntuple(dilation, k, "dilation", name)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string '{padding}', should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = FC._ntuple(padding, k, "padding", name)
        self.output_padding = FC._ntuple(output_padding, k, "output_padding", name)
        self.transposed = self._transposed
        self.padding_mode = padding_mode
        if isinstance(self.padding, str):  # PyTorch's _reversed_padding_repeated_twice
            total = [d * (kk - 1) for d, kk in zip(self.dilation, self.kernel_size)]
            pairs = [(t // 2, t - t // 2) if self.padding == "same" else (0, 0) for t in total]
        else:
            pairs = [(p, p) for p in self.padding]
        self._reversed_padding_repeated_twice = tuple(v for pr in reversed(pairs) for v in pr)
        if in_channels > 0 or not getattr(self, "_lazy", False):
            self._make(self._weight_shape(in_channels), bias, device, dtype)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
            self._lazy_bias = bias

    def _make(self, weight_shape, bias, device, dtype):
        # the bias has out_channels entries (a transposed weight's first dim is in_channels)
        super()._make(weight_shape, False, device, dtype)
        if bias:
            self.bias = Parameter(_C.empty(self.out_channels, device=device, dtype=dtype))
            self.reset_parameters()

    def _weight_shape(self, in_channels):
        if self._transposed:
            return (in_channels, self.out_channels // self.groups) + self.kernel_size
        return (self.out_channels, in_channels // self.groups) + self.kernel_size

    def _conv(self, input, weight, bias):
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return FC._convnd(self._k, input, weight, bias, self.stride, 0, self.dilation,
                              self.groups, type(self).__name__)
        if self._k == 2:
            return F.conv2d(input, weight, bias, self.stride, self.padding, self.dilation,
                            self.groups)
        return FC._convnd(self._k, input, weight, bias, self.stride, self.padding, self.dilation,
                          self.groups, type(self).__name__)

    def forward(self, input):
        return self._conv(input, self.weight, self.bias)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self._k:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._k:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._k:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    _k = 1


class Conv3d(_ConvNd):
    _k = 3


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__} does not support a string padding")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, device, dtype, output_padding)

    def _output_padding(self, input, output_size):
        """PyTorch's ConvTranspose output_size -> output_padding"""
        if output_size is None:
            return self.output_padding
        k = self._k
        output_size = list(output_size)
        if len(output_size) == k + 2 or (len(output_size) == k + 1 and input.dim() == k + 1):
            output_size = output_size[-k:]
        if len(output_size) != k:
            raise ValueError(f"ConvTranspose{k}D: for {input.dim()}D input, output_size must "
                             f"have {k} or {k + 2} elements (got {len(output_size)})")
        pads = []
        for d in range(k):
            dim_size = input.shape[input.dim() - k + d]
            min_size = ((dim_size - 1) * self.stride[d] - 2 * self.padding[d] +
                        self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            max_size = min_size + self.stride[d] - 1
            if not min_size <= output_size[d] <= max_size:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes "
                                 f"range from {min_size} to {max_size} (for an input of "
                                 f"{list(input.shape[-k:])})")
            pads.append(output_size[d] - min_size)
        return tuple(pads)

    def _conv(self, input, weight, bias, output_size=None):
        return FC._conv_transposend(self._k, input, weight, bias, self.stride, self.padding,
                                    self._output_padding(input, output_size), self.groups,
                                    self.dilation, type(self).__name__)

    def forward(self, input, output_size=None):
        return self._conv(input, self.weight, self.bias, output_size)


class ConvTranspose1d(_ConvTransposeNd):
    _k = 1


class ConvTranspose2d(_ConvTransposeNd):
    _k = 2


class ConvTranspose3d(_ConvTransposeNd):
    _k = 3


class _LazyMixin:
    """in_channels 0 until the first forward (the input's channels) or a state dict's weight
    (load_state_dict on this module) makes the parameters"""
    _lazy = True

    def _materialize(self, in_channels, device, dtype):
        self.in_channels = in_channels
        self._make(self._weight_shape(in_channels), self._lazy_bias, device, dtype)

    def has_uninitialized_params(self):
        return self.weight is None

    def initialize_parameters(self, input, *args, **kwargs):
        if self.weight is None:
            dim = 0 if input.dim() == self._k + 1 else 1
            self._materialize(input.shape[dim], input.device, input.dtype)

    def forward(self, input, *args, **kwargs):
        self.initialize_parameters(input)
        # PyTorch's cls_to_become: the module is the eager one afterwards (d2l's init_cnn tests
        # type(m) == nn.Conv2d); nn.Conv2d is layers.Conv2d, which has no padding modes
        become = type(self).cls_to_become
        if become is _Conv2d and self.padding_mode == "zeros":
            from .layers import Conv2d as become
        self.__class__ = become
        return become.forward(self, input, *args, **kwargs)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        w = state_dict.get("weight") if hasattr(state_dict, "get") else None
        if self.weight is None and w is not None:
            c = w.shape[0] if self._transposed else w.shape[1] * self.groups
            self._materialize(c, w.device, w.dtype)
        return super().load_state_dict(state_dict, strict, assign)


def _lazy(cls):
    def __init__(self, out_channels, kernel_size, *args, **kwargs):
        cls.__init__(self, 0, out_channels, kernel_size, *args, **kwargs)
    return type("Lazy" + cls.__name__, (_LazyMixin, cls),
                {"__init__": __init__, "__module__": __name__, "cls_to_become": cls})


class _Conv2d(_ConvNd):
    """Conv2d with padding modes (zeros, reflect, replicate, circular): LazyConv2d's base"""
    _k = 2


_Conv2d.__name__ = "Conv2d"
LazyConv1d, LazyConv2d, LazyConv3d = _lazy(Conv1d), _lazy(_Conv2d), _lazy(Conv3d)
LazyConvTranspose1d = _lazy(ConvTranspose1d)
LazyConvTranspose2d = _lazy(ConvTranspose2d)
LazyConvTranspose3d = _lazy(ConvTranspose3d)


class Unfold(Module):
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        return FC.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return FC.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                       self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return FC.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


__all__ = ["Conv1d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
           "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d", "Unfold", "Fold", "ChannelShuffle"]
