"""tessera.nn's layers (Linear, Bilinear, Conv2d, pools, activations, the dropouts, norms,
Embedding, EmbeddingBag...): Python Modules
that own their Parameters and call the C library's functional ops in forward.

Why not wrap the C modules (ts_linear_new...) here: a Python Module's Parameters can be replaced
(`layer.weight = nn.Parameter(...)`), tied between layers (`head.weight = emb.weight`) or moved,
as PyTorch programs do; with the weights held by Python and the op called per forward, every such
program works and there is one copy of each weight. Only the model-zoo networks whose forward has
no functional C form (nn_models.py: GPT, ResNets, MultiheadAttention, TransformerEncoderLayer)
run a C module, over the same handles."""
import math

from .. import _C
from . import functional as F
from . import functional_bilinear as FB
from . import functional_dropout as FD
from . import functional_embedding_bag as FE
from . import init
from .module import Module
from .parameter import Parameter


def _empty(shape, device, dtype):
    return _C.empty(*shape, device=device, dtype=dtype)


class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class _Weighted(Module):
    """a weight [out, ...] and an optional bias [out], PyTorch's default init of Linear and Conv:
    kaiming_uniform_(a=sqrt(5)) and a bias in U(-1/sqrt(fan_in), 1/sqrt(fan_in))"""

    def _make(self, weight_shape, bias, device, dtype):
        self.weight = Parameter(_empty(weight_shape, device, dtype))
        if bias:
            self.bias = Parameter(_empty(weight_shape[:1], device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = math.prod(self.weight.shape[1:])
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)


class Linear(_Weighted):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self._make((out_features, in_features), bias, device, dtype)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Conv2d(_Weighted):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise NotImplementedError(f"tessera: Conv2d(padding_mode={padding_mode!r})")
        if in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = F._pair(kernel_size, "kernel_size", "Conv2d")
        self.stride = F._pair(stride, "stride", "Conv2d")
        self.padding = padding if isinstance(padding, str) else F._pair(padding, "padding",
                                                                         "Conv2d")
        self.dilation = F._pair(dilation, "dilation", "Conv2d")
        self.padding_mode = padding_mode
        self._make((out_channels, in_channels // groups) + self.kernel_size, bias, device, dtype)

    def forward(self, input):
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class _Pool2d(Module):
    """the options both pools share (stride None: the kernel size, PyTorch's default)"""

    def __init__(self, kernel_size, stride, padding, ceil_mode, **more):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.__dict__.update(more)


class MaxPool2d(_Pool2d):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__(kernel_size, stride, padding, ceil_mode, dilation=dilation,
                         return_indices=return_indices)

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(_Pool2d):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__(kernel_size, stride, padding, ceil_mode,
                         count_include_pad=count_include_pad, divisor_override=divisor_override)

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _Options(Module):
    """a module of a few options named by `_opts`: forward is `_fn(input, *options)`"""
    _opts, _fn = (), None

    def __init__(self, *values):
        super().__init__()
        for k, v in zip(self._opts, values):
            setattr(self, k, v)

    def forward(self, input):
        return type(self)._fn(input, *(getattr(self, k) for k in self._opts))

    def extra_repr(self):
        return ", ".join(f"{k}={getattr(self, k)!r}" for k in self._opts)


class AdaptiveAvgPool2d(_Options):
    _opts, _fn = ("output_size",), F.adaptive_avg_pool2d

    def __init__(self, output_size):
        super().__init__(output_size)


class _Activation(Module):
    """an activation module without parameters: forward is `_fn(input)`"""
    _fn = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU(_Activation):
    _fn = F.relu

    def forward(self, input):  # inplace=True writes into input, as PyTorch's
        return F.relu(input, self.inplace)


class SiLU(_Activation):
    _fn = F.silu

    def forward(self, input):  # inplace=True writes into input, as PyTorch's
        return F.silu(input, self.inplace)


class Sigmoid(_Activation):
    _fn = F.sigmoid

    def __init__(self):
        super().__init__()


class Tanh(_Activation):
    _fn = F.tanh

    def __init__(self):
        super().__init__()


class GELU(_Options):
    _opts = ("approximate",)

    def __init__(self, approximate="none"):
        super().__init__(approximate)

    @staticmethod
    def _fn(input, approximate):
        return F.gelu(input, approximate=approximate)


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Softplus(_Options):
    _opts, _fn = ("beta", "threshold"), F.softplus

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__(beta, threshold)


class Softmax(_Options):
    _opts, _fn = ("dim",), F.softmax

    def __init__(self, dim=None):
        super().__init__(dim)


class LogSoftmax(Softmax):
    _fn = F.log_softmax


class Flatten(_Options):
    _opts = ("start_dim", "end_dim")

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__(start_dim, end_dim)

    @staticmethod
    def _fn(input, start_dim, end_dim):
        return input.flatten(start_dim, end_dim)


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class _NormBase(Module):
    """the state of BatchNorm and InstanceNorm (PyTorch's _NormBase): InstanceNorm is no
    _BatchNorm, as in PyTorch (isinstance checks that fuse or convert BatchNorms skip it)"""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self._bias = bool(bias) and affine  # PyTorch 2.x: bias=False keeps the weight only
        if affine:
            self.weight = Parameter(_empty((num_features,), device, dtype))
            if self._bias:
                self.bias = Parameter(_empty((num_features,), device, dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _C.zeros(num_features, device=device,
                                                          dtype=dtype))
            self.register_buffer("running_var", _C.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked",
                                 _C.zeros((), device=device, dtype=_C.int64))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, " + ("" if self._bias else "bias=False, ") +
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    _dims = ()

    def forward(self, input):
        if input.dim() not in self._dims:
            raise ValueError(f"expected {' or '.join(f'{d}D' for d in self._dims)} input "
                             f"(got {input.dim()}D input)")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            _C._nn_add_(self.num_batches_tracked, 1)
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked.item())
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None,
                            self.running_var if keep else None, self.weight, self.bias,
                            use_batch, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    _dims = (4,)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self.normalized_shape = F._shape(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_C.ones(*self.normalized_shape, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(_C.zeros(*self.normalized_shape, device=device,
                                               dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self):  # PyTorch's: weight 1, bias 0 (timm's _init_weights calls it)
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        self.normalized_shape = F._shape(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_C.ones(*self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self):  # PyTorch's: weight 1
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None and padding_idx < 0:
            padding_idx += num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(_empty((num_embeddings, embedding_dim), device, dtype),
                                    requires_grad=not _freeze)
            init.normal_(self.weight)
            if padding_idx is not None:
                init.zeros_(self.weight.data[padding_idx])
        else:
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, **kwargs):
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx=padding_idx, _weight=embeddings, _freeze=freeze)


class _DropoutNd(Dropout):
    _fn = None

    def forward(self, input):
        return type(self)._fn(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    _fn = staticmethod(FD.alpha_dropout)


class FeatureAlphaDropout(_DropoutNd):
    _fn = staticmethod(FD.feature_alpha_dropout)


class Dropout1d(_DropoutNd):
    _fn = staticmethod(FD.dropout1d)


class Dropout2d(_DropoutNd):
    _fn = staticmethod(FD.dropout2d)


class Dropout3d(_DropoutNd):
    _fn = staticmethod(FD.dropout3d)


class Bilinear(Module):
    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        self.weight = Parameter(_C.empty(out_features, in1_features, in2_features, device=device,
                                         dtype=dtype))
        if bias:
            self.bias = Parameter(_C.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1]) if self.weight.shape[1] else 0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return FB.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class EmbeddingBag(Module):
    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.mode, self.sparse = scale_grad_by_freq, mode, sparse
        self.include_last_offset = include_last_offset
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(_C.empty(num_embeddings, embedding_dim, device=device,
                                             dtype=dtype))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise AssertionError("Shape of weight does not match num_embeddings and "
                                     "embedding_dim")
            self.weight = Parameter(_weight)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            init.zeros_(self.weight.data[self.padding_idx])

    def forward(self, input, offsets=None, per_sample_weights=None):
        return FE.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                                self.scale_grad_by_freq, self.mode, self.sparse,
                                per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        s += f", mode='{self.mode}'"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, mode="mean", sparse=False,
                        include_last_offset=False, padding_idx=None):
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings,
                  include_last_offset, padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag
