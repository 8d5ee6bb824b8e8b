"""tessera.ao.nn.quantized.dynamic_activation — torchao's int8 dynamic-activation linear layers
(int8_dynamic_activation_int8_weight "8da8w" / int8_dynamic_activation_int4_weight "8da4w"):
each call quantizes x per token (symmetric int8, scale max|x| / 127) and multiplies it with
int8 (per output feature) or int4 (per group) weights in exact int32 sums, in the C function
ts_int8_dynamic_activation_linear (AVX512-VNNI where the CPU has it; docs/QUANTIZATION.md)."""
from tessera import _C

from .weight_only import WeightOnlyLinear

__all__ = ["Int8DynamicActivationLinear"]


class Int8DynamicActivationLinear(WeightOnlyLinear):
    """y = (xq @ q^T) * x_scale * w_scale + bias. weight: qint8 per channel (axis 0) or quint4x2
    per group (32, 64, 128 or 256); bias a float tensor or None. Inference only: the activations'
    rounding has no gradient (an input that requires grad is refused: run under no_grad). The
    constructor, `weight` and the repr are WeightOnlyLinear's."""

    _act = "act=int8 per token, "

    @classmethod
    def from_float(cls, mod, bits=8, group_size=32):
        """A float nn.Linear's copy: int8 symmetric per channel (bits 8, torchao's 8da8w weights)
        or int4 symmetric per group in [-8, 7] (bits 4, 8da4w's), the bias kept float (no
        Parameter: the layer takes no gradient)."""
        w = mod.weight.detach().float().contiguous()
        if bits == 8:
            wq = _C._quantize_int8_weight_only(w)
        elif bits == 4:
            wq = _C._quantize_int4_symmetric_weight(w, group_size)
        else:
            raise ValueError(f"Int8DynamicActivationLinear.from_float: bits must be 8 or 4 "
                             f"(got {bits})")
        bias = None if mod.bias is None else mod.bias.detach().float().clone()
        return cls(wq, bias)

    def forward(self, x):
        return _C._int8_dynamic_activation_linear(x, self._weight_q, self.bias)
