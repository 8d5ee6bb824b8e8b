"""Categorical(probs=None, logits=None): torch.distributions.Categorical."""
import math

import tessera as _t

from .distribution import Distribution

_EPS = {_t.float32: 1.1920928955078125e-07, _t.float64: 2.220446049250313e-16}
_MIN = {_t.float32: -3.4028234663852886e+38, _t.float64: -1.7976931348623157e+308}


class Categorical(Distribution):
    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            eps = _EPS.get(self.probs.dtype, 1.1920928955078125e-07)
            self.logits = self.probs.clamp(min=eps, max=1 - eps).log()  # probs_to_logits
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            self.probs = _t.softmax(self.logits, -1)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        super().__init__(self._param.shape[:-1], (), validate_args)

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def mean(self):
        return _t.full(self._extended_shape(), math.nan, dtype=self.probs.dtype)

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    def sample(self, sample_shape=()):
        shape = _t.Size(tuple(sample_shape))
        n = math.prod(shape)
        with _t.no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            samples_2d = _t.multinomial(probs_2d, n, True).t()
            return samples_2d.reshape(self._extended_shape(shape))

    def log_prob(self, value):
        value = value.long().unsqueeze(-1)
        value, log_pmf = _t.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        logits = self.logits.clamp(min=_MIN.get(self.logits.dtype, -3.4028234663852886e+38))
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = _t.arange(self._num_events, dtype=_t.int64)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values

    def __repr__(self):
        name = "probs" if self._param is self.probs else "logits"
        return f"Categorical({name}: {self._param.shape})"
