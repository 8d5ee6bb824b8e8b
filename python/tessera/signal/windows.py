"""tessera.signal.windows — torch.signal.windows' window functions (issue 52): bartlett, blackman,
cosine, exponential, gaussian, general_cosine, general_hamming, hamming, hann, kaiser, nuttall.

Each takes the length M, sym=True (False: the periodic window, for spectral analysis: the symmetric
window of M + 1 points without its last), and dtype / device / requires_grad. The values are computed
in float64 on the host with PyTorch's formulas, then converted.
"""
import math

from .. import _C

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]


def _check(fn, M, dtype):
    if not isinstance(M, int) or isinstance(M, bool):
        raise TypeError("%s(): argument 'M' must be int, not %s" % (fn, type(M).__name__))
    if M < 0:
        raise ValueError("%s requires non-negative window length, got M=%d" % (fn, M))
    if dtype is not None and not dtype.is_floating_point:
        raise ValueError("%s expects float32 or float64 dtypes, got: %s" % (fn, dtype))


def _make(vals, dtype, device, requires_grad):
    dt = dtype if dtype is not None else _C.get_default_dtype()
    t = _C.tensor(vals, dtype=_C.float64, device=device).to(dt) if vals else \
        _C.empty(0, dtype=dt, device=device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _window(fn, M, sym, dtype, device, requires_grad, f):
    """f(n, N) for n < M: N the symmetric window's last index (M - 1, or M when periodic)"""
    _check(fn, M, dtype)
    if M <= 1:
        return _make([1.0] * M, dtype, device, requires_grad)
    N = M - 1 if sym else M
    return _make([f(n, N) for n in range(M)], dtype, device, requires_grad)


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None,
                requires_grad=False):
    """exp(-|n - center| / tau); center (M - 1) / 2 by default (M / 2 periodic)"""
    if tau <= 0:
        raise ValueError("Tau must be positive, got: %s instead." % tau)
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    c = center

    def f(n, N):
        cc = N / 2.0 if c is None else c
        return math.exp(-abs(n - cc) / tau)
    return _window("exponential", M, sym, dtype, device, requires_grad, f)


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """sin(pi (n + 1/2) / (N + 1))"""
    return _window("cosine", M, sym, dtype, device, requires_grad,
                   lambda n, N: math.sin(math.pi * (n + 0.5) / (N + 1)))


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """exp(-((n - N/2) / std)^2 / 2)"""
    if std <= 0:
        raise ValueError("Standard deviation must be positive, got: %s instead." % std)
    return _window("gaussian", M, sym, dtype, device, requires_grad,
                   lambda n, N: math.exp(-0.5 * ((n - N / 2.0) / std) ** 2))


def _i0(x):
    term, s, k = 1.0, 1.0, 0
    while term > 1e-17 * s:
        k += 1
        term *= (x / (2 * k)) ** 2
        s += term
    return s


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """i0(beta sqrt(1 - (2n/N - 1)^2)) / i0(beta)"""
    if beta < 0:
        raise ValueError("beta must be non-negative, got: %s instead." % beta)
    ib = _i0(beta)
    return _window("kaiser", M, sym, dtype, device, requires_grad,
                   lambda n, N: _i0(beta * math.sqrt(max(0.0, 1 - (2.0 * n / N - 1) ** 2))) / ib)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """sum_i (-1)^i a_i cos(2 pi i n / N)"""
    if not isinstance(a, (list, tuple)) and not isinstance(a, _C.Tensor):
        raise TypeError("Coefficients must be a list/tuple")
    if isinstance(a, _C.Tensor):
        a = a.tolist()
    if not a:
        raise ValueError("Coefficients cannot be empty")
    coef = [float(x) for x in a]
    return _window("general_cosine", M, sym, dtype, device, requires_grad,
                   lambda n, N: sum((-1) ** i * c * math.cos(2 * math.pi * i * n / N)
                                    for i, c in enumerate(coef)))


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """general_cosine with a = [alpha, 1 - alpha]"""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return general_hamming(M, alpha=0.54, sym=sym, dtype=dtype, device=device,
                           requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, device=device,
                           requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, device=device,
                          requires_grad=requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, device=device, requires_grad=requires_grad)


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """1 - |2n / N - 1|"""
    return _window("bartlett", M, sym, dtype, device, requires_grad,
                   lambda n, N: 1 - abs(2.0 * n / N - 1))
