"""tessera.ao.nn.quantized's static modules (torch.ao.nn.quantized): Quantize, DeQuantize, Linear,
Conv2d, FloatFunctional / QFunctional. Each computes through one C function (include/tessera/
quant.h); each saves and loads PyTorch's state-dict keys (weight / bias / scale / zero_point, and
Linear's _packed_params), so a state dict from PyTorch's convert loads here.

The float bias is held as PyTorch holds it and passed as float32 to the C ops, which then compute
in PyTorch's x86 arithmetic (fbgemm's float bias, src/ops/qrequant.c); a module without a bias
passes zeros, which select that arithmetic and add nothing (docs/QUANTIZATION.md)."""
import tessera
from tessera import _C
from tessera.nn.module import Module

__all__ = ["Quantize", "DeQuantize", "Linear", "Conv2d", "FloatFunctional", "QFunctional",
           "Hardswish"]

def _as_float(v):
    return float(v.item()) if isinstance(v, tessera.Tensor) else float(v)


def _as_int(v):
    return int(v.item()) if isinstance(v, tessera.Tensor) else int(v)


class _WeightedQuantized(Module):
    """what Linear and Conv2d share: the qint8 weight, the float bias, the output scale / zero
    point"""

    def _init_out(self, scale=1.0, zero_point=0):
        self.scale, self.zero_point = float(scale), int(zero_point)
        self._zero_bias = None

    def set_weight_bias(self, w, b):
        if not getattr(w, "is_quantized", False) or w.dtype != tessera.qint8:
            raise TypeError(f"{self._get_name()}: weight must be a qint8 quantized tensor")
        if w.qscheme() not in ("per_tensor_affine", "per_channel_affine") or (
                w.qscheme() == "per_channel_affine" and w.q_per_channel_axis() != 0):
            raise ValueError(f"{self._get_name()}: weight must be quantized per tensor or per "
                             "channel along axis 0")
        self._w = w
        self._b = None if b is None else b.detach().float().contiguous()
        self._zero_bias = None

    def weight(self):
        return self._w

    def bias(self):
        return self._b

    def _weight_bias(self):
        return self._w, self._b

    def _bias_for(self, x):
        """the float32 bias the C op takes (zeros without one: PyTorch's x86 arithmetic either
        way)"""
        if self._b is not None:
            return self._b
        if self._zero_bias is None or self._zero_bias.device != self._w.device:
            self._zero_bias = tessera.zeros(self._w.shape[0], device=self._w.device)
        return self._zero_bias

    def _load_scale_zp(self, sd, prefix):
        self.scale = _as_float(sd[prefix + "scale"])
        self.zero_point = _as_int(sd[prefix + "zero_point"])


class Quantize(Module):
    """torch.ao.nn.quantized.Quantize: quantize_per_tensor with its scale / zero_point buffers"""

    def __init__(self, scale, zero_point, dtype):
        super().__init__()
        self.register_buffer("scale", tessera.tensor([float(scale)], dtype=tessera.float32))
        self.register_buffer("zero_point", tessera.tensor([int(zero_point)], dtype=tessera.int64))
        self.dtype = dtype

    def forward(self, x):
        return tessera.quantize_per_tensor(x, float(self.scale[0]), int(self.zero_point[0]),
                                           self.dtype)

    def _get_name(self):
        return "Quantize"

    def extra_repr(self):
        return f"scale={self.scale}, zero_point={self.zero_point}, dtype={self.dtype}"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        s, z = mod.activation_post_process.calculate_qparams()
        return cls(float(s[0]), int(z[0]), mod.activation_post_process.dtype)


class DeQuantize(Module):
    """torch.ao.nn.quantized.DeQuantize"""

    def forward(self, x):
        return x.dequantize()

    def _get_name(self):
        return "DeQuantize"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        return cls()


class _LinearPackedParams(Module):
    """PyTorch's LinearPackedParams: the state-dict keys dtype and _packed_params (w, b)"""

    def __init__(self, owner):
        super().__init__()
        self.__dict__["_owner"] = owner
        self.dtype = tessera.qint8

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "dtype"] = self.dtype
        destination[prefix + "_packed_params"] = self._owner._weight_bias()

    def _custom_state_keys(self):
        return ["dtype", "_packed_params"]

    def _load_custom_state(self, sd, prefix):
        w, b = sd[prefix + "_packed_params"]
        self._owner.set_weight_bias(w, b)


class Linear(_WeightedQuantized):
    """torch.ao.nn.quantized.Linear: y = requant(x W^T + b), x quint8 per tensor [.., in],
    W qint8 [out, in] (ts_quantized_linear)."""

    _FLOAT_MODULE = None  # tessera.nn.Linear (set below)
    _relu = False

    def __init__(self, in_features, out_features, bias_=True, dtype=None):
        super().__init__()
        if dtype not in (None, tessera.qint8):
            raise NotImplementedError(f"tessera: quantized Linear with dtype={dtype} (qint8 only)")
        self.in_features, self.out_features = in_features, out_features
        self._init_out()
        w = tessera.quantize_per_tensor(tessera.zeros(out_features, in_features), 1.0, 0,
                                        tessera.qint8)
        self._packed_params = _LinearPackedParams(self)
        self.set_weight_bias(w, tessera.zeros(out_features) if bias_ else None)

    def forward(self, x):
        return _C._quantized_linear(x, self._w, self._bias_for(x), self.scale, self.zero_point,
                                    self._relu)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "scale"] = tessera.tensor(self.scale, dtype=tessera.float32)
        destination[prefix + "zero_point"] = tessera.tensor(self.zero_point, dtype=tessera.int64)

    def _custom_state_keys(self):
        return ["scale", "zero_point"]

    def _load_custom_state(self, sd, prefix):
        self._load_scale_zp(sd, prefix)

    def _get_name(self):
        return "QuantizedLinear"

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"scale={self.scale}, zero_point={self.zero_point}, qscheme={self._w.qscheme()}")

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        lin = mod[0] if isinstance(mod, tessera.nn.Sequential) else mod
        s, z = mod.activation_post_process.calculate_qparams()
        q = cls(lin.in_features, lin.out_features, bias_=lin.bias is not None)
        q.set_weight_bias(_quantize_weight(lin.weight, mod.qconfig), lin.bias)
        q.scale, q.zero_point = float(s[0]), int(z[0])
        return q


class Conv2d(_WeightedQuantized):
    """torch.ao.nn.quantized.Conv2d (zeros padding): ts_quantized_conv2d"""

    _relu = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise NotImplementedError(f"tessera: quantized Conv2d with padding_mode="
                                      f"'{padding_mode}' (zeros only)")
        pair = lambda v: (v, v) if isinstance(v, int) else tuple(v)  # noqa: E731
        if isinstance(padding, str):
            raise NotImplementedError("tessera: quantized Conv2d with a string padding")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = pair(kernel_size), pair(stride)
        self.padding, self.dilation, self.groups = pair(padding), pair(dilation), groups
        self.padding_mode = padding_mode
        self._init_out()
        w = tessera.quantize_per_tensor(
            tessera.zeros(out_channels, in_channels // groups, *self.kernel_size), 1.0, 0,
            tessera.qint8)
        self.set_weight_bias(w, tessera.zeros(out_channels) if bias else None)

    def forward(self, x):
        return _C._quantized_conv2d(x, self._w, self._bias_for(x), self.stride, self.padding,
                                    self.dilation, self.groups, self.scale, self.zero_point,
                                    self._relu)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "weight"] = self._w
        destination[prefix + "bias"] = self._b
        destination[prefix + "scale"] = tessera.tensor(self.scale, dtype=tessera.float32)
        destination[prefix + "zero_point"] = tessera.tensor(self.zero_point, dtype=tessera.int64)

    def _custom_state_keys(self):
        return ["weight", "bias", "scale", "zero_point"]

    def _load_custom_state(self, sd, prefix):
        self.set_weight_bias(sd[prefix + "weight"], sd[prefix + "bias"])
        self._load_scale_zp(sd, prefix)

    def _get_name(self):
        return "QuantizedConv2d"

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, scale={self.scale}, zero_point={self.zero_point}, "
                f"padding={self.padding}, dilation={self.dilation}, groups={self.groups}")

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        conv = mod[0] if isinstance(mod, tessera.nn.Sequential) else mod
        s, z = mod.activation_post_process.calculate_qparams()
        q = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                conv.dilation, conv.groups, conv.bias is not None, conv.padding_mode)
        q.set_weight_bias(_quantize_weight(conv.weight, mod.qconfig), conv.bias)
        q.scale, q.zero_point = float(s[0]), int(z[0])
        return q


def _quantize_weight(weight, qconfig):
    """PyTorch's _quantize_weight: the qconfig's weight observer over the float weight, then
    quantize_per_channel (axis the observer's) or quantize_per_tensor to qint8"""
    obs = qconfig.weight()
    w = weight.detach().float()
    obs(w)
    s, z = obs.calculate_qparams()
    if obs.dtype != tessera.qint8:
        raise NotImplementedError(f"tessera: weights quantized to {obs.dtype} (qint8 only)")
    if obs.qscheme in ("per_channel_affine", "per_channel_symmetric"):
        return tessera.quantize_per_channel(w, s.double(), z.long(), obs.ch_axis, tessera.qint8)
    return tessera.quantize_per_tensor(w, float(s[0]), int(z[0]), tessera.qint8)


class FloatFunctional(Module):
    """torch.ao.nn.quantized.FloatFunctional: float add / add_relu / cat / mul / matmul observed
    by activation_post_process (Identity until prepare); add_scalar / mul_scalar unobserved"""

    def __init__(self):
        super().__init__()
        self.activation_post_process = tessera.nn.Identity()

    def forward(self, x):
        raise RuntimeError("FloatFunctional is not intended to use the 'forward'. Please use the "
                           "underlying operation")

    def add(self, x, y):
        return self.activation_post_process(tessera.add(x, y))

    def add_relu(self, x, y):
        return self.activation_post_process(tessera.relu(tessera.add(x, y)))

    def cat(self, x, dim=0):
        return self.activation_post_process(tessera.cat(x, dim=dim))

    def mul(self, x, y):
        return self.activation_post_process(tessera.mul(x, y))

    def matmul(self, x, y):
        return self.activation_post_process(tessera.matmul(x, y))

    def add_scalar(self, x, y):  # not observed, as PyTorch's: the quantized op needs no qparams
        return tessera.add(x, y)

    def mul_scalar(self, x, y):
        return tessera.mul(x, y)


class QFunctional(Module):
    """torch.ao.nn.quantized.QFunctional: add / add_relu / mul / mul_relu / cat of quantized
    tensors to its scale and zero point (ts_quantized_add, ts_quantized_mul, ts_quantized_cat)"""

    def __init__(self):
        super().__init__()
        self.scale, self.zero_point = 1.0, 0
        self.activation_post_process = tessera.nn.Identity()

    def forward(self, x):
        raise RuntimeError("Functional is not intended to use the 'forward'. Please use the "
                           "underlying operation")

    def add(self, x, y):
        return _C._quantized_add(x, y, self.scale, self.zero_point, False)

    def add_relu(self, x, y):
        return _C._quantized_add(x, y, self.scale, self.zero_point, True)

    def cat(self, x, dim=0):
        return _C._quantized_cat(list(x), dim, self.scale, self.zero_point)

    def mul(self, x, y):
        return _C._quantized_mul(x, y, self.scale, self.zero_point, False)

    def mul_relu(self, x, y):
        return _C._quantized_mul(x, y, self.scale, self.zero_point, True)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "scale"] = tessera.tensor(self.scale, dtype=tessera.float32)
        destination[prefix + "zero_point"] = tessera.tensor(self.zero_point, dtype=tessera.int64)

    def _custom_state_keys(self):
        return ["scale", "zero_point"]

    def _load_custom_state(self, sd, prefix):
        self.scale = _as_float(sd[prefix + "scale"])
        self.zero_point = _as_int(sd[prefix + "zero_point"])

    def _get_name(self):
        return "QFunctional"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        s, z = mod.activation_post_process.calculate_qparams()
        q = cls()
        q.scale, q.zero_point = float(s[0]), int(z[0])
        return q


class Hardswish(tessera.nn.Hardswish):
    """torch.ao.nn.quantized.Hardswish: hardswish of a quantized tensor requantized to its scale and
    zero point (ts_quantized_hardswish; buffers `scale`, `zero_point` as PyTorch's)"""

    def __init__(self, scale, zero_point, device=None, dtype=None):
        super().__init__()
        self.register_buffer("scale", tessera.tensor(float(scale), dtype=tessera.float32))
        self.register_buffer("zero_point", tessera.tensor(int(zero_point), dtype=tessera.int64))

    def forward(self, input):
        return _C._quantized_hardswish(input, float(self.scale), int(self.zero_point))

    def _get_name(self):
        return "QuantizedHardswish"

    @staticmethod
    def from_float(mod, use_precomputed_fake_quant=False):
        s, z = mod.activation_post_process.calculate_qparams()
        return Hardswish(float(s[0] if s.dim() else s), int(z[0] if z.dim() else z))

