"""tessera.ao.nn.quantized.dynamic — torch.ao.nn.quantized.dynamic: Linear and LSTM with qint8
weights, float activations quantized per tensor at each call (the C functions
ts_dynamic_quantized_linear, ts_dynamic_quantized_lstm)."""
import tessera
from tessera import _C
from tessera.nn.module import Module

__all__ = ["Linear", "LSTM"]


class Linear(Module):
    """torch.ao.nn.quantized.dynamic.Linear: y = x W^T + b with W qint8 (per tensor or per channel
    along the output features), x quantized to quint8 per tensor at each call from its min and
    max (reduce_range as PyTorch's x86 backend), int32 products, float32 output."""

    _version = 4

    def __init__(self, in_features, out_features, bias_=True, dtype=None):
        super().__init__()
        if dtype not in (None, tessera.qint8):
            raise NotImplementedError(f"tessera: dynamic Linear with dtype={dtype} "
                                      "(only qint8 weights)")
        self.in_features, self.out_features = in_features, out_features
        self.reduce_range = True
        w = tessera.quantize_per_tensor(tessera.zeros(out_features, in_features), 1.0, 0,
                                        tessera.qint8)
        self._packed = (w, tessera.zeros(out_features) if bias_ else None)

    def _weight_bias(self):
        return self._packed

    def weight(self):
        return self._packed[0]

    def bias(self):
        return self._packed[1]

    def set_weight_bias(self, w, b):
        if not getattr(w, "is_quantized", False) or w.dtype != tessera.qint8:
            raise TypeError("dynamic Linear: weight must be a qint8 quantized tensor")
        if tuple(w.shape) != (self.out_features, self.in_features):
            raise ValueError(f"dynamic Linear: weight of shape {tuple(w.shape)}, expected "
                             f"{(self.out_features, self.in_features)}")
        self._packed = (w, None if b is None else b.detach().float().contiguous())

    def forward(self, x):
        w, b = self._packed
        return _C._dynamic_quantized_linear(x, w, b, self.reduce_range)

    def extra_repr(self):
        w = self._packed[0]
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"dtype={w.dtype}, qscheme={w.qscheme()}")

    def _get_name(self):
        return "DynamicQuantizedLinear"

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant=False):
        """A float nn.Linear's copy: its weight quantized to qint8 as PyTorch's
        default_dynamic_qconfig does (MinMaxObserver, per_tensor_symmetric), its bias kept
        float."""
        w = mod.weight.detach().float()
        scale, zero_point = _symmetric_qparams(w)
        wq = tessera.quantize_per_tensor(w, scale, zero_point, tessera.qint8)
        q = cls(mod.in_features, mod.out_features, bias_=mod.bias is not None)
        q.set_weight_bias(wq, mod.bias)
        return q


def _symmetric_qparams(w):
    """MinMaxObserver(dtype=qint8, qscheme=per_tensor_symmetric, reduce_range=False)'s
    calculate_qparams: scale = max(|min|, max) / 127.5 (at least float32's eps), zero point 0."""
    lo = min(float(w.min()), 0.0)
    hi = max(float(w.max()), 0.0)
    amax = max(-lo, hi)
    eps = 1.1920928955078125e-07  # torch.finfo(torch.float32).eps
    scale = max(amax / ((127 - (-128)) / 2), eps)
    # the observer holds its scale as a float32 tensor
    scale = float(tessera.tensor([scale], dtype=tessera.float32)[0])
    return scale, 0


from .rnn import LSTM  # noqa: E402  (rnn.py imports _symmetric_qparams from here)
