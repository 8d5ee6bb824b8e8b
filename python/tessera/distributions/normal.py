"""Normal(loc, scale): torch.distributions.Normal."""
import math
import numbers

import tessera as _t

from .distribution import Distribution


class Normal(Distribution):
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        if isinstance(loc, numbers.Number) and isinstance(scale, numbers.Number):
            loc, scale = _t.tensor(float(loc)), _t.tensor(float(scale))
        else:
            dt = next(x.dtype for x in (loc, scale) if isinstance(x, _t.Tensor))
            loc = loc if isinstance(loc, _t.Tensor) else _t.tensor(float(loc), dtype=dt)
            scale = scale if isinstance(scale, _t.Tensor) else _t.tensor(float(scale), dtype=dt)
        self.loc, self.scale = _t.broadcast_tensors(loc, scale)
        super().__init__(self.loc.shape, (), validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale.pow(2)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with _t.no_grad():
            return _t.normal(self.loc.expand(shape), self.scale.expand(shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _t.randn(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        var = self.scale ** 2
        log_scale = self.scale.log()
        return -((value - self.loc) ** 2) / (2 * var) - log_scale - math.log(math.sqrt(2 * math.pi))

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()

    def cdf(self, value):
        return 0.5 * (1 + _t.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def __repr__(self):
        return f"Normal(loc: {self.loc.size()}, scale: {self.scale.size()})"
