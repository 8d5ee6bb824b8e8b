"""The in-place random fills on the seeded Philox generator as exact compositions over C ops
(Tensor.cauchy_ / exponential_ / geometric_ / log_normal_ / normal_, forwarded here by
python/src/tensor_python_methods.c) and torch.normal (C: ts_normal)."""
from . import _C
from ._generator import drawing as _drawing

__all__ = ["normal"]


def _uniform(t):
    """uniform [0, 1) values of t's shape, dtype and device (the seeded generator)"""
    return _C.rand_like(t)


def _fill_(self, values):
    with _C_no_grad():
        self.copy_(values)
    return self


def _C_no_grad():
    from .autograd import no_grad
    return no_grad()


def _check_float(self, fn):
    if not self.dtype.is_floating_point:
        raise TypeError("%s(): expected a floating-point tensor, got %s" % (fn, self.dtype))


@_drawing("cauchy_")
def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    return _C._cauchy_(self, median, sigma)


@_drawing("exponential_")
def exponential_(self, lambd=1.0, *, generator=None):
    _check_float(self, "exponential_")
    if not lambd > 0:
        raise RuntimeError("exponential_(): expects lambda > 0.0, but found lambda=%s" % lambd)
    u = _uniform(self)
    return _fill_(self, (-u).log1p().neg().div(lambd))


@_drawing("geometric_")
def geometric_(self, p, *, generator=None):
    return _C._geometric_(self, p)


@_drawing("log_normal_")
def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    return _C._log_normal_(self, mean, std)


# normal: C's (ts_normal, src/ops/sampling.c; python/src/tensor_statistics.c)
from ._C import normal  # noqa: E402,F401


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    return self.normal_(mean, std, generator=generator)
