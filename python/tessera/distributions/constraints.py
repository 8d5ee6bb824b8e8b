"""tessera.distributions.constraints — torch.distributions.constraints' region checks that
libraries call (Hugging Face transformers checks a covariance with positive_definite.check before
sampling new embedding rows). Each check is PyTorch's test, made of tensor ops: a bool tensor of
the batch shape (event_dim rightmost dims removed)."""
import tessera

__all__ = ["Constraint", "real", "positive", "nonnegative", "unit_interval", "boolean", "square",
           "symmetric", "positive_definite"]


class Constraint:
    """A region a value may lie in; check(value) says, per event, whether it does."""
    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError

    def __repr__(self):
        return self.__class__.__name__[1:] + "()"


class _Real(Constraint):
    def check(self, value):
        return value == value                      # False for NaN


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return self.lower_bound < value


class _GreaterThanEq(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return self.lower_bound <= value


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (self.lower_bound <= value) & (value <= self.upper_bound)


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        return tessera.full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1],
                            dtype=tessera.bool, device=value.device)


class _Symmetric(_Square):
    def check(self, value):
        square = super().check(value)
        if not square.all():
            return square
        return tessera.isclose(value, value.mT, atol=1e-6).all(-2).all(-1)


class _PositiveDefinite(_Symmetric):
    def check(self, value):
        sym = super().check(value)
        if not sym.all():
            return sym
        return tessera.linalg.cholesky_ex(value).info.eq(0)


real = _Real()
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
unit_interval = _Interval(0.0, 1.0)
boolean = _Boolean()
square = _Square()
symmetric = _Symmetric()
positive_definite = _PositiveDefinite()
