"""tessera.ao.quantization.observer — PyTorch's observers (torch.ao.quantization.observer):
MinMaxObserver, MovingAverageMinMaxObserver, PerChannelMinMaxObserver, HistogramObserver. Each
forward is one C function (aminmax / minimum / maximum for MinMax; _C._moving_average_minmax_update,
_per_channel_minmax_update, _histogram_observer_update: PyTorch 2.15's arithmetic) and the qparams
one C function (_C._calculate_qparams, _C._histogram_observer_qparams: the L2 search then
_calculate_qparams, in PyTorch's float32 arithmetic); docs/QUANTIZATION.md."""
import functools

import tessera
from tessera import _C
from tessera.nn.module import Module

__all__ = ["MinMaxObserver", "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver",
           "HistogramObserver", "default_observer", "default_weight_observer",
           "default_per_channel_weight_observer", "default_dynamic_quant_observer"]

_EPS = 1.1920928955078125e-07  # torch.finfo(torch.float32).eps
_SYMMETRIC = ("per_tensor_symmetric", "per_channel_symmetric")
_SCHEMES = ("per_tensor_affine", "per_tensor_symmetric", "per_channel_affine",
            "per_channel_symmetric")


class _PartialWrapper:
    """Observer.with_args(**kw): a factory that makes the observer, with_args chaining"""

    def __init__(self, p):
        self.p = p

    def __call__(self, *args, **kwargs):
        return self.p(*args, **kwargs)

    def with_args(self, **kwargs):
        return _PartialWrapper(functools.partial(self.p, **kwargs))

    def __repr__(self):
        return self.p.__repr__()


def _scheme_name(q):
    name = q if isinstance(q, str) else getattr(q, "name", str(q))
    name = name.replace("torch.", "").replace("tessera.", "")
    if name not in _SCHEMES:
        raise NotImplementedError(f"tessera: observer qscheme {q} (one of {', '.join(_SCHEMES)})")
    return name


def _qmin_qmax(quant_min, quant_max, dtype, reduce_range):
    """PyTorch's calculate_qmin_qmax"""
    custom = quant_min is not None and quant_max is not None
    if custom:
        if not quant_min <= 0 <= quant_max:
            raise ValueError("Used-specified quantization range must include 0.")
        if quant_min >= quant_max:
            raise ValueError("qmin must be strictly less than qmax for user-specified "
                             "quantization range.")
        n = quant_max - quant_min + 1
        if dtype == tessera.qint8 and not 0 < n <= 256:
            raise ValueError("quantization range should be positive and not exceed the maximum "
                             "bit range (=256).")
        if dtype == tessera.quint8 and not 0 < n <= 256:
            raise ValueError("quantization range should be positive and not exceed the maximum "
                             "bit range (=256).")
        if reduce_range:
            quant_min, quant_max = quant_min // 2, quant_max // 2
        return quant_min, quant_max, True
    if dtype == tessera.qint8:
        return (-64, 63, False) if reduce_range else (-128, 127, False)
    if dtype == tessera.quint8:
        return (0, 127, False) if reduce_range else (0, 255, False)
    if dtype == tessera.qint32:
        return -2 ** 31, 2 ** 31 - 1, False
    raise NotImplementedError(f"tessera: observer dtype {dtype} (quint8, qint8, qint32)")


class _ObserverBase(Module):
    """UniformQuantizationObserverBase: dtype, qscheme, reduce_range, the range and eps (a float32
    [1] buffer, as PyTorch's: its state-dict key `eps`)"""

    def __init__(self, dtype=None, qscheme="per_tensor_affine", reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=_EPS,
                 is_dynamic=False, **kwargs):
        super().__init__()
        if is_dynamic:
            raise NotImplementedError("tessera: is_dynamic observers")
        self.dtype = tessera.quint8 if dtype is None else dtype
        self.qscheme = _scheme_name(qscheme)
        self.reduce_range = bool(reduce_range)
        if self.reduce_range and self.qscheme in _SYMMETRIC and self.dtype == tessera.quint8:
            raise NotImplementedError("Cannot reduce range for symmetric quantization for quint8")
        self.register_buffer("eps", tessera.tensor([float(eps)], dtype=tessera.float32))
        self.quant_min, self.quant_max, self.has_customized_qrange = _qmin_qmax(
            quant_min, quant_max, self.dtype, self.reduce_range)

    with_args = classmethod(lambda cls, **kw: _PartialWrapper(functools.partial(cls, **kw)))

    def _symmetric_zero_point(self):
        if self.dtype == tessera.quint8:
            return (self.quant_min + self.quant_max) // 2 if self.has_customized_qrange else 128
        return 0

    def _calculate_qparams(self, min_val, max_val):
        return _C._calculate_qparams(min_val, max_val, self.quant_min, self.quant_max,
                                     self.qscheme in _SYMMETRIC, self._symmetric_zero_point(),
                                     float(self.eps))

    def calculate_qparams(self):
        return self._calculate_qparams(self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"


class MinMaxObserver(_ObserverBase):
    """torch.ao.quantization.MinMaxObserver: the running min and max of what it sees"""

    def __init__(self, dtype=None, qscheme="per_tensor_affine", reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=_EPS,
                 is_dynamic=False, **kwargs):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs, eps,
                         is_dynamic, **kwargs)
        if self.qscheme not in ("per_tensor_affine", "per_tensor_symmetric"):
            raise NotImplementedError("MinMaxObserver's qscheme only support "
                                      "torch.per_tensor_symmetric and torch.per_tensor_affine.")
        self.register_buffer("min_val", tessera.tensor(float("inf")))
        self.register_buffer("max_val", tessera.tensor(float("-inf")))

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach().float()
        lo, hi = tessera.aminmax(x)
        self.min_val.copy_(tessera.minimum(lo, self.min_val))
        self.max_val.copy_(tessera.maximum(hi, self.max_val))
        return x_orig

    def reset_min_max_vals(self):
        self.min_val.fill_(float("inf"))
        self.max_val.fill_(float("-inf"))


class MovingAverageMinMaxObserver(MinMaxObserver):
    """torch.ao.quantization.MovingAverageMinMaxObserver: min += c * (batch min - min)"""

    def __init__(self, averaging_constant=0.01, dtype=None, qscheme="per_tensor_affine",
                 reduce_range=False, quant_min=None, quant_max=None, eps=_EPS, is_dynamic=False,
                 **kwargs):
        self.averaging_constant = averaging_constant
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range,
                         quant_min=quant_min, quant_max=quant_max, eps=eps,
                         is_dynamic=is_dynamic, **kwargs)

    def forward(self, x_orig):
        _C._moving_average_minmax_update(self.min_val, self.max_val, x_orig.detach(),
                                         self.averaging_constant)
        return x_orig


class PerChannelMinMaxObserver(_ObserverBase):
    """torch.ao.quantization.PerChannelMinMaxObserver: min / max per index along ch_axis"""

    def __init__(self, ch_axis=0, dtype=None, qscheme="per_channel_affine", reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=_EPS,
                 is_dynamic=False, **kwargs):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs, eps,
                         is_dynamic, **kwargs)
        if self.qscheme not in ("per_channel_affine", "per_channel_symmetric"):
            raise NotImplementedError("PerChannelMinMaxObserver's qscheme: per_channel_affine or "
                                      "per_channel_symmetric (per_channel_affine_float_qparams "
                                      "is not implemented in tessera)")
        self.ch_axis = ch_axis
        self.register_buffer("min_val", tessera.tensor([]))
        self.register_buffer("max_val", tessera.tensor([]))

    def forward(self, x_orig):
        self.min_val, self.max_val = _C._per_channel_minmax_update(
            self.min_val, self.max_val, x_orig.detach(), self.ch_axis)
        return x_orig


class HistogramObserver(_ObserverBase):
    """torch.ao.quantization.HistogramObserver: a running histogram of `bins` bins over the running
    [min_val, max_val] (buffers `histogram`, `min_val`, `max_val`: PyTorch's state-dict keys), the
    qparams from the range the L2-error search over its bins picks (PyTorch 2.15's arithmetic, in
    C). inf values are dropped (PyTorch warns); NaN raises (PyTorch's histc raises too)."""

    def __init__(self, bins=2048, dtype=None, qscheme="per_tensor_affine", reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=_EPS,
                 is_dynamic=False, **kwargs):
        if _scheme_name(qscheme) not in ("per_tensor_affine", "per_tensor_symmetric"):
            raise NotImplementedError("HistogramObserver's qscheme only support "
                                      "torch.per_tensor_symmetric and torch.per_tensor_affine.")
        if is_dynamic:
            raise NotImplementedError("HistogramObserver doesn't support dynamic quantization")
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs, eps,
                         is_dynamic, **kwargs)
        if not isinstance(bins, int) or bins < 1:
            raise ValueError(f"HistogramObserver: bins must be a positive int (got {bins!r})")
        self.bins = bins
        self.register_buffer("histogram", tessera.zeros(bins))
        self.register_buffer("min_val", tessera.tensor(float("inf")))
        self.register_buffer("max_val", tessera.tensor(float("-inf")))
        self.dst_nbins = 2 ** (32 if self.dtype == tessera.qint32 else 8)
        self.upsample_rate = 16  # PyTorch's constant (used by the C update)

    def forward(self, x_orig):
        _C._histogram_observer_update(self.histogram, self.min_val, self.max_val,
                                      x_orig.detach())
        return x_orig

    def calculate_qparams(self):
        if self.histogram.numel() != self.bins:
            raise AssertionError("The number of bins in histogram should be equal to the number "
                                 "of bins supplied while making this observer")
        return _C._histogram_observer_qparams(
            self.histogram, self.min_val, self.max_val, self.dst_nbins, self.quant_min,
            self.quant_max, self.qscheme in _SYMMETRIC, self._symmetric_zero_point(),
            float(self.eps))


default_observer = MinMaxObserver.with_args(quant_min=0, quant_max=127)
default_weight_observer = MinMaxObserver.with_args(dtype=tessera.qint8,
                                                   qscheme="per_tensor_symmetric")
default_per_channel_weight_observer = PerChannelMinMaxObserver.with_args(
    dtype=tessera.qint8, qscheme="per_channel_symmetric")
default_dynamic_quant_observer = None  # dynamic quantization computes its own (quantize_dynamic)
