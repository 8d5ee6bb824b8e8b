"""tessera.ao.nn.quantized.weight_only — torchao's weight-only quantized linear layers
(int8_weight_only / int4_weight_only): float activations, int8 (per output feature) or int4 (per
group along in_features) weights, computed by the C function ts_weight_only_linear without
dequantizing the weight in memory (docs/QUANTIZATION.md)."""
import tessera
from tessera import _C
from tessera.nn.module import Module

__all__ = ["WeightOnlyLinear"]


class WeightOnlyLinear(Module):
    """y = x @ dequant(weight)^T + bias. weight: qint8 per channel (axis 0) or quint4x2 per group
    (group size 32, 64, 128 or 256); bias a float Parameter or None. The weight is frozen (it is
    no Parameter and gets no gradient); x and bias get theirs."""

    _act = ""  # extra_repr's word on the activations (float here)

    def __init__(self, weight, bias=None):
        super().__init__()
        if not getattr(weight, "is_quantized", False):
            raise TypeError(f"{type(self).__name__}: weight must be a quantized tensor "
                            "(tessera.ao.quantization.quantize_ makes one)")
        self.out_features, self.in_features = (int(d) for d in weight.shape)
        self._weight_q = weight
        self.bias = bias

    @property
    def weight(self):
        """the quantized weight (qint8 or quint4x2)"""
        return self._weight_q

    @classmethod
    def from_float(cls, mod, bits=8, group_size=128):
        """A float nn.Linear's weight-only copy: int8 symmetric per channel (bits 8) or int4
        asymmetric per group (bits 4), the bias kept float."""
        w = mod.weight.detach().float().contiguous()
        if bits == 8:
            wq = _C._quantize_int8_weight_only(w)
        elif bits == 4:
            wq = _C._quantize_int4_weight_only(w, group_size)
        else:
            raise ValueError(f"WeightOnlyLinear.from_float: bits must be 8 or 4 (got {bits})")
        bias = None
        if mod.bias is not None:
            bias = tessera.nn.Parameter(mod.bias.detach().float().clone())
        return cls(wq, bias)

    def forward(self, x):
        return _C._weight_only_linear(x, self._weight_q, self.bias)

    def extra_repr(self):
        w = self._weight_q
        extra = f", group_size={w._q_group_size()}" if w.dtype == tessera.quint4x2 else ""
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"{self._act}weight={w.dtype}{extra}, bias={self.bias is not None}")
