"""tessera.ao.quantization.fake_quantize — quantization-aware training's fake quantization under
PyTorch's names (torch.ao.quantization.fake_quantize): FakeQuantize (an observer, then
tessera.fake_quantize_per_tensor_affine / _per_channel_affine, the C ops with the
straight-through gradient), FusedMovingAvgObsFakeQuantize, MovingAveragePerChannelMinMaxObserver,
the default fake quants and enable_/disable_fake_quant / _observer.

FusedMovingAvgObsFakeQuantize trains with the qparams PyTorch's fused kernel chooses, fbgemm's
ChooseQuantizationParams over the moving-average range (ts_choose_qparams_minmax), updated only
while fake quantization is on; its calculate_qparams (what convert reads) stays the observer's.
The two differ: a symmetric scale is max(|min| / 128, max / 127) there and max|x| / 127.5 in the
observer, and fbgemm's smallest scale is 6.1e-5 (docs/QUANTIZATION.md)."""
import functools

import tessera
from tessera import _C
from tessera.nn.module import Module

from .observer import (_EPS, MovingAverageMinMaxObserver, PerChannelMinMaxObserver,
                       _PartialWrapper)

__all__ = ["FakeQuantize", "FusedMovingAvgObsFakeQuantize", "MovingAveragePerChannelMinMaxObserver",
           "default_fake_quant", "default_weight_fake_quant",
           "default_per_channel_weight_fake_quant", "default_fused_act_fake_quant",
           "default_fused_wt_fake_quant", "default_fused_per_channel_wt_fake_quant",
           "enable_fake_quant", "disable_fake_quant", "enable_observer", "disable_observer"]

_RANGES = {"qint8": (-128, 127), "quint8": (0, 255), "qint32": (-2 ** 31, 2 ** 31 - 1)}


class MovingAveragePerChannelMinMaxObserver(PerChannelMinMaxObserver):
    """torch.ao.quantization.MovingAveragePerChannelMinMaxObserver: per channel, min += c * (batch
    min - min) (the first batch taken as it is), one C call
    (ts_moving_average_per_channel_minmax_update)"""

    def __init__(self, averaging_constant=0.01, ch_axis=0, dtype=None,
                 qscheme="per_channel_affine", reduce_range=False, quant_min=None,
                 quant_max=None, eps=_EPS, is_dynamic=False, **kwargs):
        super().__init__(ch_axis=ch_axis, dtype=dtype, qscheme=qscheme,
                         reduce_range=reduce_range, quant_min=quant_min, quant_max=quant_max,
                         eps=eps, is_dynamic=is_dynamic, **kwargs)
        self.averaging_constant = averaging_constant

    def forward(self, x_orig):
        self.min_val, self.max_val = _C._moving_average_per_channel_minmax_update(
            self.min_val, self.max_val, x_orig.detach(), self.ch_axis, self.averaging_constant)
        return x_orig

    # PyTorch's per-channel min / max have one value a channel: loaded whatever their shape here
    def _custom_state_keys(self):
        return ["min_val", "max_val"]

    def _load_custom_state(self, sd, prefix):
        self.min_val = sd[prefix + "min_val"].detach().float().clone()
        self.max_val = sd[prefix + "max_val"].detach().float().clone()


def _dtype_name(dt):
    return str(dt).replace("torch.", "").replace("tessera.", "")


class FakeQuantize(Module):
    """torch.ao.quantization.FakeQuantize: in forward, the observer sees x (observer_enabled) and
    its qparams become scale / zero_point; then (fake_quant_enabled) x is fake quantized with them,
    per tensor or per channel along ch_axis. The buffers are PyTorch's: fake_quant_enabled,
    observer_enabled (uint8 [1]), scale (float32), zero_point (int32)."""

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min=None, quant_max=None,
                 is_dynamic=False, **observer_kwargs):
        super().__init__()
        self.register_buffer("fake_quant_enabled", tessera.tensor([1], dtype=tessera.uint8))
        self.register_buffer("observer_enabled", tessera.tensor([1], dtype=tessera.uint8))
        if is_dynamic:
            raise NotImplementedError("tessera: FakeQuantize(is_dynamic=True)")
        if quant_min is not None and quant_max is not None:
            if quant_min > quant_max:
                raise AssertionError("quant_min must be less than or equal to quant_max")
            dtype = observer_kwargs.get("dtype", tessera.quint8)
            if hasattr(observer, "p"):
                dtype = getattr(observer.p, "keywords", {}).get("dtype", dtype)
            lo, hi = _RANGES.get(_dtype_name(dtype), (None, None))
            if lo is None:
                raise NotImplementedError(f"tessera: FakeQuantize of dtype {dtype}")
            if lo > quant_min:
                raise AssertionError("quant_min out of bound")
            if quant_max > hi:
                raise AssertionError("quant_max out of bound")
            observer_kwargs.update({"quant_min": quant_min, "quant_max": quant_max})
        self.activation_post_process = observer(**observer_kwargs)
        app = self.activation_post_process
        self.quant_min, self.quant_max = app.quant_min, app.quant_max
        self.is_dynamic = False
        self.register_buffer("scale", tessera.tensor([1.0], dtype=tessera.float32))
        self.register_buffer("zero_point", tessera.tensor([0], dtype=tessera.int32))
        self.dtype, self.qscheme = app.dtype, app.qscheme
        self.ch_axis = getattr(app, "ch_axis", -1)
        self.is_per_channel = self.qscheme in ("per_channel_affine", "per_channel_symmetric")

    with_args = classmethod(lambda cls, **kw: _PartialWrapper(functools.partial(cls, **kw)))

    def enable_fake_quant(self, enabled=True):
        self.fake_quant_enabled[0] = 1 if enabled else 0

    def disable_fake_quant(self):
        self.enable_fake_quant(False)

    def enable_observer(self, enabled=True):
        self.observer_enabled[0] = 1 if enabled else 0

    def disable_observer(self):
        self.enable_observer(False)

    def calculate_qparams(self):
        return self.activation_post_process.calculate_qparams()

    def _set_qparams(self, s, z):
        s, z = s.float(), z.to(tessera.int32)
        if tuple(self.scale.shape) != tuple(s.shape):
            self.scale, self.zero_point = s.contiguous(), z.contiguous()
        else:
            self.scale.copy_(s)
            self.zero_point.copy_(z)

    def _fake_quant(self, X):
        if self.is_per_channel:
            return tessera.fake_quantize_per_channel_affine(
                X, self.scale, self.zero_point, self.ch_axis, self.quant_min, self.quant_max)
        return tessera.fake_quantize_per_tensor_affine(
            X, self.scale, self.zero_point, self.quant_min, self.quant_max)

    def forward(self, X):
        if int(self.observer_enabled[0]) == 1:
            self.activation_post_process(X.detach())
            self._set_qparams(*self.calculate_qparams())
        if int(self.fake_quant_enabled[0]) == 1:
            X = self._fake_quant(X)
        return X

    def extra_repr(self):
        return (f"fake_quant_enabled={self.fake_quant_enabled}, "
                f"observer_enabled={self.observer_enabled}, quant_min={self.quant_min}, "
                f"quant_max={self.quant_max}, dtype={self.dtype}, qscheme={self.qscheme}, "
                f"ch_axis={self.ch_axis}, scale={self.scale}, zero_point={self.zero_point}")

    # scale / zero_point are [1] or one a channel: loaded whatever their shape here
    def _custom_state_keys(self):
        return ["scale", "zero_point"]

    def _load_custom_state(self, sd, prefix):
        self.scale = sd[prefix + "scale"].detach().float().clone()
        self.zero_point = sd[prefix + "zero_point"].detach().to(tessera.int32).clone()


class FusedMovingAvgObsFakeQuantize(FakeQuantize):
    """torch.ao.quantization.FusedMovingAvgObsFakeQuantize: a FakeQuantize whose observer is a
    moving-average one (per tensor or per channel), run as PyTorch's fused kernel: the observer
    sees x (observer_enabled); then, only while fake_quant_enabled, scale / zero_point become
    fbgemm's ChooseQuantizationParams of the running range (symmetric schemes: preserve_sparsity)
    and x is fake quantized with them"""

    def __init__(self, observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                 **observer_kwargs):
        super().__init__(observer, quant_min, quant_max, **observer_kwargs)
        if not isinstance(self.activation_post_process,
                          (MovingAverageMinMaxObserver, MovingAveragePerChannelMinMaxObserver)):
            raise AssertionError("Fused observer+fake_quant module only works with "
                                 "MovingAverageMinMaxObserver")
        self.register_buffer("fake_quant_enabled", tessera.tensor([1], dtype=tessera.int64))
        self.register_buffer("observer_enabled", tessera.tensor([1], dtype=tessera.int64))
        self.is_symmetric_quant = self.qscheme in ("per_tensor_symmetric",
                                                   "per_channel_symmetric")

    def forward(self, X):
        app = self.activation_post_process
        if int(self.observer_enabled[0]) == 1:
            app(X.detach())
        if int(self.fake_quant_enabled[0]) == 1:
            self._set_qparams(*_C._choose_qparams_minmax(
                app.min_val, app.max_val, self.quant_min, self.quant_max,
                self.is_symmetric_quant))
            X = self._fake_quant(X)
        return X


def _fq(observer, qmin, qmax, dtype, qscheme, cls=FakeQuantize, **kw):
    return cls.with_args(observer=observer, quant_min=qmin, quant_max=qmax, dtype=dtype,
                         qscheme=qscheme, **kw)


default_fake_quant = _fq(MovingAverageMinMaxObserver, 0, 255, tessera.quint8, "per_tensor_affine",
                         reduce_range=True)
default_weight_fake_quant = _fq(MovingAverageMinMaxObserver, -128, 127, tessera.qint8,
                                "per_tensor_symmetric", reduce_range=False)
default_per_channel_weight_fake_quant = _fq(MovingAveragePerChannelMinMaxObserver, -128, 127,
                                            tessera.qint8, "per_channel_symmetric",
                                            reduce_range=False, ch_axis=0)
default_fused_act_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, dtype=tessera.quint8)
default_fused_wt_fake_quant = _fq(MovingAverageMinMaxObserver, -128, 127, tessera.qint8,
                                  "per_tensor_symmetric", cls=FusedMovingAvgObsFakeQuantize)
default_fused_per_channel_wt_fake_quant = _fq(MovingAveragePerChannelMinMaxObserver, -128, 127,
                                              tessera.qint8, "per_channel_symmetric",
                                              cls=FusedMovingAvgObsFakeQuantize)


def _is_fake_quant(mod):
    return isinstance(mod, FakeQuantize)


def disable_fake_quant(mod):
    """model.apply(disable_fake_quant)"""
    if _is_fake_quant(mod):
        mod.disable_fake_quant()


def enable_fake_quant(mod):
    if _is_fake_quant(mod):
        mod.enable_fake_quant()


def disable_observer(mod):
    if _is_fake_quant(mod):
        mod.disable_observer()


def enable_observer(mod):
    if _is_fake_quant(mod):
        mod.enable_observer()
