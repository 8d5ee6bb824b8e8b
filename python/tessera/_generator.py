"""tessera.Generator — torch.Generator: a random stream of its own for the calls that take
generator= (rand, randn, randint, randperm, bernoulli, multinomial, normal, Tensor.uniform_ /
normal_ / random_ / bernoulli_ / cauchy_ / exponential_ / geometric_ / log_normal_, nn.init's
initialisers, the data loader's samplers, random_split).

A Generator is a Philox (seed, offset) pair, as the global generator is: for the length of one call
it becomes the calling thread's stream (C: ts_rng_thread_swap), so the call draws what the global
generator would draw from the same state, and leaves the global generator and other threads alone;
the Generator keeps where the drawing stopped. `Generator().manual_seed(s)` therefore draws what
`tessera.manual_seed(s)` would: the same numbers, not PyTorch's (Tessera's generator is not
PyTorch's Mersenne Twister). tessera.default_generator is the global generator itself."""
import contextlib
import random as _random

from . import _C

__all__ = ["Generator", "default_generator"]

_DEFAULT_SEED = 67280421310721  # PyTorch's default_rng_seed_val, the C library's too
_MASK = (1 << 64) - 1


def _signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


class Generator:
    """torch.Generator(device='cpu'): manual_seed (returns the generator), seed, initial_seed,
    get_state / set_state (an int64 tensor (seed, offset), as tessera.get_rng_state), device."""

    def __init__(self, device="cpu"):
        self.device = _C.device(device) if not isinstance(device, _C.device) else device
        self._ts_rng = (_DEFAULT_SEED, 0)

    def manual_seed(self, seed):
        if isinstance(seed, bool) or not isinstance(seed, int):
            try:
                seed = int(seed)
            except (TypeError, ValueError):
                raise TypeError("manual_seed(): seed must be an int, not %s"
                                % type(seed).__name__) from None
        self._ts_rng = (int(seed) & _MASK, 0)
        return self

    def seed(self):
        s = _random.SystemRandom().getrandbits(63)
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return self._ts_rng[0]

    def get_state(self):
        seed, offset = self._ts_rng
        return _C.tensor([_signed(seed), _signed(offset)], dtype=_C.int64)

    def set_state(self, new_state):
        if (not isinstance(new_state, _C.Tensor) or new_state.dtype != _C.int64
                or new_state.numel() != 2):
            raise ValueError("set_state(): new_state must be what get_state() returned (an int64 "
                             "tensor of 2 values)")
        seed, offset = (int(v) & _MASK for v in new_state.tolist())
        self._ts_rng = (seed, offset)
        return self

    def clone_state(self):
        g = Generator(self.device)
        g._ts_rng = self._ts_rng
        return g

    def __repr__(self):
        return "<tessera.Generator object (device=%s)>" % self.device


class _DefaultGenerator(Generator):
    """the global generator (tessera.manual_seed's) as a Generator object"""

    def __init__(self):
        self.device = _C.device("cpu")

    _ts_rng = None  # the C calls draw from the global generator as they do without generator=

    def manual_seed(self, seed):
        _C.manual_seed(int(seed))
        return self

    def seed(self):
        s = _random.SystemRandom().getrandbits(63)
        _C.manual_seed(s)
        return s

    def initial_seed(self):
        return _C.initial_seed()

    def get_state(self):
        return _C.get_rng_state()

    def set_state(self, new_state):
        _C.set_rng_state(new_state)
        return self

    def clone_state(self):
        g = Generator()
        g.set_state(self.get_state())
        return g


default_generator = _DefaultGenerator()


@contextlib.contextmanager
def use(generator, fn):
    """the calls inside draw from generator (None or default_generator: the global one)"""
    if generator is None:
        yield
        return
    if not isinstance(generator, Generator):
        raise TypeError("%s(): argument 'generator' must be tessera.Generator, not %s"
                        % (fn, type(generator).__name__))
    state = generator._ts_rng
    if state is None:
        yield
        return
    prev = _C._rng_thread_swap(True, *state)
    try:
        yield
    finally:
        _, seed, offset = _C._rng_thread_swap(*prev)
        generator._ts_rng = (seed, offset)


def drawing(fn):
    """decorator: f(..., generator=None) runs inside use(generator, fn)"""
    import functools

    def deco(f):
        @functools.wraps(f)
        def wrapper(*args, generator=None, **kwargs):
            with use(generator, fn):
                return f(*args, **kwargs)
        return wrapper
    return deco


def python_random(generator):
    """a random.Random for the data loader's Python-side shuffles: seeded by one draw from
    generator (a tessera.Generator; None: the global generator)"""
    with use(generator, "generator"):
        seed = int(_C.randint(0, 1 << 52, (1,)).item())
    return _random.Random(seed)
