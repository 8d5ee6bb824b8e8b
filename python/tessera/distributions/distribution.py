"""Distribution: the base of tessera.distributions (batch_shape, event_shape, sample_shape)."""
import tessera as _t


class Distribution:
    has_rsample = False

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = _t.Size(tuple(batch_shape))
        self._event_shape = _t.Size(tuple(event_shape))

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    def _extended_shape(self, sample_shape=()):
        return _t.Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def sample(self, sample_shape=()):
        with _t.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} has no rsample")

    def __repr__(self):
        return type(self).__name__ + "()"
