"""tessera.amp — autocast and GradScaler (the C core's mixed precision, python/src/amp.c), with
torch.amp's names. device_type is "cpu", "cuda" or "sim"."""
import functools

from . import _C

Tensor = _C.Tensor


class autocast:
    """Context manager and decorator: ops on tensors of `device_type` inside run in PyTorch's
    autocast policy (matmul, linear, conv2d in `dtype`; softmax, losses, norms in float32).
    dtype None: float16 on cuda, bfloat16 on cpu and sim."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device_type = device_type.split(":")[0]
        self.fast_dtype = dtype
        self._enabled = bool(enabled)
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)

    def __enter__(self):
        _C._amp_begin(self.device_type, self.fast_dtype, self._enabled, self._cache_enabled)
        return self

    def __exit__(self, exc_type, exc, tb):
        _C._amp_end()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)
        return wrapper


def is_autocast_enabled(device_type="cuda"):
    return _C._amp_state(device_type)[0]


def get_autocast_dtype(device_type):
    return _C._amp_state(device_type)[1]


def clear_autocast_cache():
    _C._amp_clear_cache()


class GradScaler:
    """torch.amp.GradScaler: scale(loss).backward(); scaler.step(optimizer) (skipped when a
    gradient is Inf/NaN); scaler.update(). The scale lives on the device of the first loss."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        if growth_factor <= 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError("The backoff factor must be < 1.0.")
        self._device = device
        self._enabled = bool(enabled)
        self._c = _C.CGradScaler(float(init_scale), float(growth_factor), float(backoff_factor),
                                 int(growth_interval), self._enabled)

    def scale(self, outputs):
        if isinstance(outputs, Tensor):
            return self._c.scale(outputs)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def unscale_(self, optimizer):
        self._c.unscale_(optimizer._c)

    def step(self, optimizer, *args, **kwargs):
        """Steps unless an Inf/NaN gradient was found; returns None either way (as PyTorch when the
        optimizer's step returns None)."""
        optimizer._sync_lr()
        self._stepped = self._c.step(optimizer._c)
        return None

    def update(self, new_scale=None):
        if isinstance(new_scale, Tensor):
            new_scale = new_scale.item()
        self._c.update(None if new_scale is None else float(new_scale))

    def get_scale(self):
        return self._c.get_scale()

    def is_enabled(self):
        return self._enabled

    def _get_growth_tracker(self):
        return self._c.growth_tracker()

    def state_dict(self):
        if not self._enabled:
            return {}
        d = {k: t.item() for k, t in self._c.state_dict().items()}
        d["growth_interval"] = int(d["growth_interval"])
        d["_growth_tracker"] = int(d["_growth_tracker"])
        return d

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        self._c.load_state_dict({k: _C.tensor(float(v), dtype=_C.float64)
                                 for k, v in state_dict.items()})
